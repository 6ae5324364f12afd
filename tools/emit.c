/*
 * The emitter; see emit.h.
 *
 * JSON is written compact, as one document ending with a newline: a stack
 * of open objects and arrays knows where commas go.  Tables are written
 * line by line with fixed column widths, so nothing is buffered and a
 * report of a million rows streams; each cell escaped (fmt.h) and padded
 * by the characters it shows.  CSV repeats its header only when the
 * set of columns changes (after a blank line), so a command whose tables
 * share their columns (the summary's) gives one CSV table.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "emit.h"
#include "fmt.h"

const char *const emit_format_names[] = {
	[EMIT_TABLE] = "table", [EMIT_CSV] = "csv", [EMIT_JSON] = "json", NULL,
};

static int col_in(const struct emit_col *c, unsigned where)
{
	return !c->in || (c->in & where);
}

static const char *col_head(const struct emit_col *c)
{
	return c->head ? c->head : c->key ? c->key : "";
}

void emit_init(struct emit *e, FILE *out, enum emit_format fmt)
{
	memset(e, 0, sizeof(*e));
	e->out = out;
	e->fmt = fmt;
	if (fmt == EMIT_JSON) {
		fputc('{', out);
		e->stack[0] = (struct emit_frame){ .array = 0 };
		e->depth = 1;
	}
}

int emit_finish(struct emit *e)
{
	if (e->fmt == EMIT_JSON) {
		while (e->depth > 0)
			fputc(e->stack[--e->depth].array ? ']' : '}', e->out);
		fputc('\n', e->out);
	}
	if (fflush(e->out) == EOF || ferror(e->out)) {
		cli_error("cannot write the output: %s", strerror(errno ? errno : EIO));
		return -EIO;
	}
	return e->err;
}

/* ---- JSON ---------------------------------------------------------------- */

/* Before a member or element: the comma and, in an object, the name. */
static void json_lead(struct emit *e, const char *key)
{
	struct emit_frame *f;

	if (e->depth == 0)
		return;
	f = &e->stack[e->depth - 1];
	if (f->count++)
		fputc(',', e->out);
	if (!f->array) {
		fmt_json(e->out, key ? key : "");
		fputc(':', e->out);
	}
}

static void json_open(struct emit *e, const char *key, int array)
{
	if (e->fmt != EMIT_JSON)
		return;
	if (e->depth == EMIT_DEPTH) {
		e->err = -EOVERFLOW;
		return;
	}
	json_lead(e, key);
	fputc(array ? '[' : '{', e->out);
	e->stack[e->depth++] = (struct emit_frame){ .array = array };
}

static void json_close(struct emit *e)
{
	if (e->fmt != EMIT_JSON || e->depth <= 1)
		return;
	fputc(e->stack[--e->depth].array ? ']' : '}', e->out);
}

void emit_object_begin(struct emit *e, const char *key)
{
	json_open(e, key, 0);
}

void emit_object_end(struct emit *e)
{
	json_close(e);
}

void emit_array_begin(struct emit *e, const char *key)
{
	json_open(e, key, 1);
}

void emit_array_end(struct emit *e)
{
	json_close(e);
}

/* The value as a number in CSV and JSON: integers whole, reals as the
 * column says.  Returns 0 when it is not a finite number. */
static int data_number(enum emit_type t, int prec, struct emit_val v, char *buf, size_t len)
{
	double d = v.kind == EV_INT ? (double)v.i : v.d;

	if (v.kind != EV_INT && v.kind != EV_REAL)
		return 0;
	if (v.kind == EV_REAL && !isfinite(v.d))
		return 0;
	switch (t) {
	case EMIT_NS:
	case EMIT_BYTES:
		/* Means and slopes keep their fraction when the column asks. */
		if (prec > 0 && v.kind != EV_INT) {
			snprintf(buf, len, "%.17g", d);
			return 1;
		}
		/* fall through */
	case EMIT_INT:
		if (v.kind == EV_INT)
			snprintf(buf, len, "%lld", (long long)v.i);
		else if (fabs(d) < 9e18)
			snprintf(buf, len, "%lld", (long long)llround(d)); /* half away from 0 */
		else
			snprintf(buf, len, "%.0f", d);
		return 1;
	case EMIT_SHARE:
		snprintf(buf, len, "%.6f", d);
		return 1;
	case EMIT_BOOL:
		snprintf(buf, len, "%d", d != 0);
		return 1;
	default:
		/* Data keeps every digit; prec is for people. */
		(void)prec;
		snprintf(buf, len, "%.17g", d);
		return 1;
	}
}

/* JSON text as it is, but what fmt_json() escapes beyond ASCII (a C1
 * control, a byte that is not UTF-8): a store's argv column, written by a
 * collector that left them raw.  Such bytes can only be inside its
 * strings, where the escape is the same string. */
static void json_raw(FILE *out, const char *s)
{
	size_t n = strlen(s), i = 0, len;
	char buf[FMT_JSON_CHAR_MAX];

	while (i < n) {
		if ((unsigned char)s[i] < 0x80) {
			fputc(s[i++], out);
			continue;
		}
		i += fmt_json_char(s + i, n - i, 0, buf, &len);
		fwrite(buf, 1, len, out);
	}
}

static void json_value(struct emit *e, enum emit_type t, int prec, struct emit_val v)
{
	char num[64];

	if (v.kind == EV_NONE) {
		fputs("null", e->out);
	} else if (t == EMIT_RAW && v.kind == EV_STR) {
		json_raw(e->out, v.s);
	} else if (t == EMIT_BOOL && v.kind != EV_STR) {
		fputs((v.kind == EV_INT ? v.i != 0 : v.d != 0) ? "true" : "false", e->out);
	} else if (v.kind == EV_STR) {
		fmt_json(e->out, v.s);
	} else if (data_number(t, prec, v, num, sizeof(num))) {
		fputs(num, e->out);
	} else {
		fputs("null", e->out);
	}
}

void emit_kv(struct emit *e, const char *key, enum emit_type t, struct emit_val v)
{
	if (e->fmt != EMIT_JSON)
		return;
	json_lead(e, key);
	json_value(e, t, 0, v);
}

/* ---- text --------------------------------------------------------------- */

void emit_text(struct emit *e, const char *fmt, ...)
{
	va_list ap;
	char *text = NULL;
	int n;

	if (e->fmt != EMIT_TABLE)
		return;
	va_start(ap, fmt);
	n = vasprintf(&text, fmt, ap);
	va_end(ap);
	if (n < 0) {
		e->err = -ENOMEM;
		return;
	}
	/* Its own lines stay lines; what a caller left unescaped (fmt_esc())
	 * still shows no control. */
	fmt_esc_write(e->out, text, 1);
	free(text);
	e->wrote = 1;
}

/* ---- tables -------------------------------------------------------------- */

char *emit_cell(const struct emit_col *c, struct emit_val v, char *buf, size_t len)
{
	char num[64];
	const char *s = num;
	double d = v.kind == EV_INT ? (double)v.i : v.d;

	if (v.kind == EV_NONE) {
		snprintf(buf, len, "-");
		return buf;
	}
	if (v.kind == EV_STR) {
		s = v.s;
	} else if (v.kind == EV_REAL && !isfinite(v.d)) {
		s = "-";
	} else {
		switch (c->type) {
		case EMIT_NS:
			fmt_duration(num, sizeof(num), d);
			break;
		case EMIT_BYTES:
			fmt_bytes(num, sizeof(num), d);
			break;
		case EMIT_SHARE:
			snprintf(num, sizeof(num), "%.1f%%", 100.0 * d);
			break;
		case EMIT_BOOL:
			snprintf(num, sizeof(num), "%s", d != 0 ? "yes" : "no");
			break;
		case EMIT_REAL:
			if (c->prec > 0)
				snprintf(num, sizeof(num), "%.*f", c->prec, d);
			else
				snprintf(num, sizeof(num), "%g", d);
			break;
		default:
			if (v.kind == EV_INT)
				snprintf(num, sizeof(num), "%lld", (long long)v.i);
			else
				snprintf(num, sizeof(num), "%.0f", d);
			break;
		}
	}
	snprintf(buf, len, "%s%s", v.approx && strcmp(s, "-") ? "~" : "", s);
	return buf;
}

static void table_line(struct emit *e, const char *const *cells)
{
	const struct emit_table *t = e->table;
	int first = 1;

	fprintf(e->out, "%*s", t->indent, "");
	for (size_t i = 0; i < t->ncols; i++) {
		const struct emit_col *c = &t->cols[i];
		int last = 1, pad;

		if (!col_in(c, EMIT_IN_TABLE))
			continue;
		for (size_t j = i + 1; j < t->ncols; j++)
			if (col_in(&t->cols[j], EMIT_IN_TABLE))
				last = 0;
		/* An empty last cell: no trailing blanks. */
		if (last && !cells[i][0])
			break;
		if (!first)
			fprintf(e->out, "%*s", c->gap > 0 ? c->gap : 1, "");
		first = 0;
		/* Padded by the characters shown: the escaped text's. */
		pad = abs(c->width) - (int)fmt_esc_width(cells[i]);
		if (c->width > 0 && pad > 0)
			fprintf(e->out, "%*s", pad, "");
		fmt_esc_write(e->out, cells[i], 0);
		/* A left-aligned last column needs no padding. */
		if (c->width < 0 && !last && pad > 0)
			fprintf(e->out, "%*s", pad, "");
	}
	fputc('\n', e->out);
	e->wrote = 1;
}

/* Whether t has a column written in e's format. */
static int table_shown(const struct emit *e, const struct emit_table *t)
{
	unsigned where = e->fmt == EMIT_TABLE ? EMIT_IN_TABLE
			 : e->fmt == EMIT_CSV	 ? EMIT_IN_CSV
						 : EMIT_IN_JSON;

	for (size_t i = 0; i < t->ncols; i++)
		if (col_in(&t->cols[i], where))
			return 1;
	return 0;
}

void emit_table_begin(struct emit *e, const struct emit_table *t)
{
	/* A table with nothing to write in this format is no table. */
	e->table = table_shown(e, t) ? t : NULL;
	if (!e->table)
		return;
	if (e->fmt == EMIT_JSON) {
		json_open(e, t->key, 1);
	} else if (e->fmt == EMIT_CSV) {
		char head[sizeof(e->csv_head)];
		size_t n = 0;

		head[0] = 0;
		for (size_t i = 0; i < t->ncols; i++) {
			if (!col_in(&t->cols[i], EMIT_IN_CSV))
				continue;
			n += (size_t)snprintf(head + n, n < sizeof(head) ? sizeof(head) - n : 0, "%s%s",
					      n ? "," : "", t->cols[i].key);
			if (n >= sizeof(head)) {
				e->err = -EOVERFLOW;
				return;
			}
		}
		if (strcmp(head, e->csv_head) != 0) {
			if (e->wrote)
				fputc('\n', e->out);
			fprintf(e->out, "%s\n", head);
			memcpy(e->csv_head, head, sizeof(head));
			e->wrote = 1;
		}
	} else if (!t->no_heading) {
		const char *cells[64];

		if (t->ncols > 64) {
			e->err = -EOVERFLOW;
			return;
		}
		for (size_t i = 0; i < t->ncols; i++)
			cells[i] = col_head(&t->cols[i]);
		table_line(e, cells);
	}
}

void emit_row(struct emit *e, const struct emit_val *v)
{
	const struct emit_table *t = e->table;
	char num[64];

	if (!t)
		return;
	if (e->fmt == EMIT_JSON) {
		json_lead(e, NULL);
		fputc('{', e->out);
		for (size_t i = 0, n = 0; i < t->ncols; i++) {
			const struct emit_col *c = &t->cols[i];

			if (!col_in(c, EMIT_IN_JSON))
				continue;
			if (n++)
				fputc(',', e->out);
			fmt_json(e->out, c->key);
			fputc(':', e->out);
			json_value(e, c->type, c->prec, v[i]);
		}
		fputc('}', e->out);
	} else if (e->fmt == EMIT_CSV) {
		for (size_t i = 0, n = 0; i < t->ncols; i++) {
			const struct emit_col *c = &t->cols[i];

			if (!col_in(c, EMIT_IN_CSV))
				continue;
			if (n++)
				fputc(',', e->out);
			if (v[i].kind == EV_STR)
				fmt_csv(e->out, v[i].s);
			else if (data_number(c->type, c->prec, v[i], num, sizeof(num)))
				fputs(num, e->out);
		}
		fputc('\n', e->out);
		e->wrote = 1;
	} else {
		char buf[64][96];
		const char *cells[64];

		if (t->ncols > 64) {
			e->err = -EOVERFLOW;
			return;
		}
		for (size_t i = 0; i < t->ncols; i++) {
			/* Long text (a kernel's full name) is written whole
			 * (escaped by table_line()). */
			if (v[i].kind == EV_STR && !v[i].approx)
				cells[i] = v[i].s;
			else
				cells[i] = emit_cell(&t->cols[i], v[i], buf[i], sizeof(buf[i]));
		}
		table_line(e, cells);
	}
}

void emit_table_end(struct emit *e)
{
	if (e->fmt == EMIT_JSON && e->table)
		json_close(e);
	e->table = NULL;
}
