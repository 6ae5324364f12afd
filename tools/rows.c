/*
 * Rows as a table, CSV (RFC 4180, fmt_csv) or JSON (an array of objects,
 * fmt_json); see rows.h.
 */
#include "rows.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "utf8.h"

const char *const rows_formats[] = { "table", "csv", "json", NULL };

int rows_add(struct rows *t, const char *const *human, const char *const *raw)
{
	size_t k = (size_t)t->ncols;

	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		char **h = realloc(t->human, cap * k * sizeof(*h));

		if (!h)
			return -ENOMEM;
		t->human = h;
		h = realloc(t->raw, cap * k * sizeof(*h));
		if (!h)
			return -ENOMEM;
		t->raw = h;
		t->cap = cap;
	}
	for (size_t i = 0; i < k; i++) {
		t->human[t->n * k + i] = strdup(human[i] ? human[i] : "");
		t->raw[t->n * k + i] = strdup(raw && raw[i] ? raw[i] : human[i] ? human[i] : "");
		if (!t->human[t->n * k + i] || !t->raw[t->n * k + i])
			return -ENOMEM;
	}
	t->n++;
	return 0;
}

/* Display width: UTF-8 sequences count once. */
static size_t width(const char *s)
{
	size_t w = 0;

	for (; *s; s++)
		w += ((unsigned char)*s & 0xc0) != 0x80;
	return w;
}

static void pad(FILE *out, size_t n)
{
	while (n--)
		fputc(' ', out);
}

static void table(const struct rows *t, FILE *out)
{
	size_t k = (size_t)t->ncols, w[32] = { 0 };

	for (size_t c = 0; c < k && c < 32; c++) {
		w[c] = strlen(t->cols[c].name);
		for (size_t r = 0; r < t->n; r++)
			if (width(t->human[r * k + c]) > w[c])
				w[c] = width(t->human[r * k + c]);
	}
	for (size_t c = 0; c < k; c++) {
		const char *name = t->cols[c].name;
		size_t gap = w[c] - strlen(name);

		if (t->cols[c].number)
			pad(out, gap);
		fputs(name, out);
		if (c + 1 < k)
			pad(out, (t->cols[c].number ? 0 : gap) + 2);
	}
	fputc('\n', out);
	for (size_t r = 0; r < t->n; r++) {
		for (size_t c = 0; c < k; c++) {
			const char *s = t->human[r * k + c];
			size_t gap = w[c] - width(s);

			if (t->cols[c].number)
				pad(out, gap);
			fputs(s, out);
			if (c + 1 < k)
				pad(out, (t->cols[c].number ? 0 : gap) + 2);
		}
		fputc('\n', out);
	}
}

static void csv(const struct rows *t, FILE *out)
{
	size_t k = (size_t)t->ncols;

	for (size_t c = 0; c < k; c++) {
		fmt_csv(out, t->cols[c].name);
		fputc(c + 1 < k ? ',' : '\n', out);
	}
	for (size_t r = 0; r < t->n; r++)
		for (size_t c = 0; c < k; c++) {
			fmt_csv(out, t->raw[r * k + c]);
			fputc(c + 1 < k ? ',' : '\n', out);
		}
}

static void json(const struct rows *t, FILE *out)
{
	size_t k = (size_t)t->ncols;

	fputc('[', out);
	for (size_t r = 0; r < t->n; r++) {
		fputs(r ? ",\n {" : "\n {", out);
		for (size_t c = 0; c < k; c++) {
			const char *v = t->raw[r * k + c];

			if (c)
				fputs(", ", out);
			fmt_json(out, t->cols[c].name);
			fputs(": ", out);
			if (t->cols[c].number || t->cols[c].raw_number)
				fputs(*v ? v : "null", out);
			else
				fmt_json(out, v);
		}
		fputc('}', out);
	}
	fputs(t->n ? "\n]\n" : "]\n", out);
}

void rows_print(const struct rows *t, enum rows_format f, FILE *out)
{
	if (f == ROWS_CSV)
		csv(t, out);
	else if (f == ROWS_JSON)
		json(t, out);
	else
		table(t, out);
}

void rows_free(struct rows *t)
{
	for (size_t i = 0; i < t->n * (size_t)t->ncols; i++) {
		free(t->human[i]);
		free(t->raw[i]);
	}
	free(t->human);
	free(t->raw);
	t->human = t->raw = NULL;
	t->n = t->cap = 0;
}
