/*
 * Findings: running the rules, ordering and writing; see findings.h.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "findings.h"
#include "fmt.h"
#include "map.h"

void findings_opts_init(struct findings_opts *o)
{
	*o = (struct findings_opts){ .threshold = FINDINGS_HOT };
}

enum severity findings_severity(double share)
{
	return share > FINDINGS_HIGH ? SEV_HIGH : share >= FINDINGS_MEDIUM ? SEV_MEDIUM : SEV_LOW;
}

const char *findings_severity_name(enum severity s)
{
	return s == SEV_HIGH ? "HIGH" : s == SEV_MEDIUM ? "MEDIUM" : "LOW";
}

char *findings_proc_label(const struct model_proc *p, char *buf, size_t len)
{
	if (!p)
		snprintf(buf, len, "the run");
	else if (p->rank >= 0)
		snprintf(buf, len, "pid %lld (rank %lld) %s", (long long)p->pid, (long long)p->rank,
			 p->exe_base ? p->exe_base : "?");
	else
		snprintf(buf, len, "pid %lld %s", (long long)p->pid, p->exe_base ? p->exe_base : "?");
	return buf;
}

char *findings_site(const char *native, const char *python, char *buf, size_t len)
{
	if (python && native)
		snprintf(buf, len, "%s  [%s]", python, native);
	else if (python || native)
		snprintf(buf, len, "%s", python ? python : native);
	else
		snprintf(buf, len, "(no call site recorded)");
	return buf;
}

/* ---- building ---------------------------------------------------------------- */

static char *vformat(const char *fmt, va_list ap)
{
	char *s = NULL;

	if (vasprintf(&s, fmt, ap) < 0)
		return NULL;
	return s;
}

/* *dst followed by the formatted text (separated by a space). */
static void append(struct findings *f, char **dst, const char *fmt, va_list ap)
{
	char *add = vformat(fmt, ap), *both = NULL;

	if (!add) {
		f->err = -ENOMEM;
		return;
	}
	if (!*dst) {
		*dst = add;
		return;
	}
	if (asprintf(&both, "%s %s", *dst, add) < 0) {
		f->err = -ENOMEM;
		free(add);
		return;
	}
	free(*dst);
	free(add);
	*dst = both;
}

/* Each finding knows its findings for error reporting. */
struct finding_box {
	struct finding x;
	struct findings *f;
};

static struct findings *owner(struct finding *x)
{
	return ((struct finding_box *)x)->f;
}

struct finding *finding_new(struct findings *f, const char *kind, const struct model_proc *p,
			    double share, const char *fmt, ...)
{
	struct finding_box *b;
	va_list ap;

	if (array_grow(&f->v, &f->cap, f->n, sizeof(*f->v)) < 0 || !(b = calloc(1, sizeof(*b)))) {
		f->err = -ENOMEM;
		return NULL;
	}
	b->f = f;
	b->x.kind = kind;
	b->x.proc = p;
	b->x.device = -1;
	b->x.share = share;
	b->x.severity = findings_severity(share);
	va_start(ap, fmt);
	b->x.title = vformat(fmt, ap);
	va_end(ap);
	if (!b->x.title)
		f->err = -ENOMEM;
	f->v[f->n++] = &b->x;
	return &b->x;
}

void finding_set_severity(struct finding *x, enum severity s)
{
	x->severity = s;
}

void finding_detail(struct finding *x, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	append(owner(x), &x->detail, fmt, ap);
	va_end(ap);
}

void finding_coverage(struct finding *x, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	append(owner(x), &x->coverage, fmt, ap);
	va_end(ap);
}

void finding_advice(struct finding *x, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	append(owner(x), &x->advice, fmt, ap);
	va_end(ap);
}

const char *finding_str(struct finding *x, const char *s)
{
	char *c;

	if (!s)
		return NULL;
	if (array_grow(&x->owned, &x->owned_cap, x->nowned, sizeof(*x->owned)) < 0 ||
	    !(c = strdup(s))) {
		owner(x)->err = -ENOMEM;
		return NULL;
	}
	x->owned[x->nowned++] = c;
	return c;
}

void finding_kv(struct finding *x, const char *key, enum emit_type t, struct emit_val v)
{
	if (x->nkv == FINDING_KV_MAX)
		return;
	if (v.kind == EV_STR)
		v.s = finding_str(x, v.s);
	x->kv[x->nkv++] = (struct finding_kv){ key, t, v };
}

void finding_table(struct finding *x, const struct emit_table *t)
{
	x->items = t;
}

void finding_row(struct finding *x, const struct emit_val *v)
{
	size_t nc = x->items->ncols;
	struct emit_val *rows = realloc(x->rows, (x->nrows + 1) * nc * sizeof(*rows));

	if (!rows) {
		owner(x)->err = -ENOMEM;
		return;
	}
	x->rows = rows;
	for (size_t c = 0; c < nc; c++) {
		struct emit_val e = v[c];

		if (e.kind == EV_STR)
			e.s = finding_str(x, e.s);
		rows[x->nrows * nc + c] = e;
	}
	x->nrows++;
}

void findings_withhold(struct findings *f, const char *kind, const struct model_proc *p,
		       const char *fmt, ...)
{
	va_list ap;
	char *r;

	va_start(ap, fmt);
	r = vformat(fmt, ap);
	va_end(ap);
	if (!r || array_grow(&f->w, &f->wcap, f->nw, sizeof(*f->w)) < 0) {
		free(r);
		f->err = -ENOMEM;
		return;
	}
	f->w[f->nw++] = (struct withheld){ kind, p, r };
}

static void finding_free(struct finding *x)
{
	free(x->title);
	free(x->detail);
	free(x->coverage);
	free(x->advice);
	free(x->rows);
	for (size_t i = 0; i < x->nowned; i++)
		free(x->owned[i]);
	free(x->owned);
	free((struct finding_box *)x);
}

void findings_free(struct findings *f)
{
	for (size_t i = 0; i < f->n; i++)
		finding_free(f->v[i]);
	free(f->v);
	for (size_t i = 0; i < f->nw; i++)
		free(f->w[i].reason);
	free(f->w);
	for (size_t i = 0; i < f->nprocs; i++) {
		free(f->procs[i].arrivals);
		free(f->procs[i].busy);
		for (size_t k = 0; k < f->procs[i].nsites; k++)
			free(f->procs[i].sites[k].site);
		free(f->procs[i].sites);
		for (size_t k = 0; k < f->procs[i].nkernels; k++)
			free(f->procs[i].kernels[k].site);
		free(f->procs[i].kernels);
	}
	for (size_t i = 0; i < f->nfits; i++) {
		free(f->fits[i].site);
		free(f->fits[i].t);
		free(f->fits[i].y);
	}
	free(f->fits);
	free(f->procs);
	memset(f, 0, sizeof(*f));
}

/* ---- running ------------------------------------------------------------------ */

static int cmp_finding(const void *a, const void *b)
{
	const struct finding *x = *(struct finding *const *)a, *y = *(struct finding *const *)b;

	if (x->severity != y->severity)
		return x->severity > y->severity ? -1 : 1;
	if (x->share != y->share)
		return x->share > y->share ? -1 : 1;
	if (x->proc != y->proc)
		return !x->proc ? -1 : !y->proc ? 1 : x->proc->index < y->proc->index ? -1 : 1;
	return strcmp(x->kind, y->kind);
}

int findings_run(struct model *m, const struct findings_opts *o, struct findings *f)
{
	int err;

	memset(f, 0, sizeof(*f));
	f->m = m;
	f->o = o;
	/* the call sites' frames without a name, which findings that name
	 * sites say in their coverage */
	err = model_load_unnamed(m);
	if (!err)
		err = findings_gpu(f);
	if (!err)
		err = findings_mem(f);
	if (!err)
		err = findings_hot(f);
	if (!err)
		err = f->err;
	if (!err)
		array_sort(f->v, f->n, sizeof(*f->v), cmp_finding);
	return err;
}

void findings_count(const struct findings *f, size_t count[4])
{
	memset(count, 0, 4 * sizeof(*count));
	for (size_t i = 0; i < f->n; i++)
		count[f->v[i]->severity]++;
}

/* ---- writing -------------------------------------------------------------------- */

/* Text wrapped at about 100 columns, each line after the first indented.
 * It names what the store holds (kernels, call sites, executables): it is
 * escaped first (fmt.h), measured in the columns a terminal gives it (a
 * wide character two) and cut between characters. */
static void wrapped(struct emit *e, const char *label, const char *text)
{
	const size_t width = 100, indent = 12;
	const char *p = text ? fmt_esc(text) : NULL;
	int first = 1;

	while (p && *p) {
		size_t room = width - indent, n = strlen(p), cut;

		if (fmt_text_width(p, n) > room) {
			cut = fmt_text_cut(p, room);
			n = cut;
			while (n > 0 && p[n] != ' ')
				n--;
			if (n == 0) /* no blank: where the columns end */
				n = cut;
			if (n == 0) /* (no character that narrow: one) */
				n = fmt_text_cut(p, 2) ? fmt_text_cut(p, 2) : 1;
		}
		emit_text(e, "  %-9s %.*s\n", first ? label : "", (int)n, p);
		first = 0;
		p += n;
		while (*p == ' ')
			p++;
	}
}

static void emit_finding(struct emit *e, const struct finding *x)
{
	char who[256];

	emit_object_begin(e, NULL);
	emit_kv(e, "kind", EMIT_STR, ev_str(x->kind));
	emit_kv(e, "severity", EMIT_STR, ev_str(findings_severity_name(x->severity)));
	emit_kv(e, "share", EMIT_REAL, ev_real(x->share));
	emit_kv(e, "pid", EMIT_INT, x->proc ? ev_int(x->proc->pid) : ev_none());
	emit_kv(e, "proc_id", EMIT_INT, x->proc ? ev_int(x->proc->proc_id) : ev_none());
	emit_kv(e, "rank", EMIT_INT, x->proc && x->proc->rank >= 0 ? ev_int(x->proc->rank) : ev_none());
	emit_kv(e, "exe", EMIT_STR, ev_str(x->proc ? x->proc->exe : NULL));
	emit_kv(e, "device", EMIT_INT, x->device >= 0 ? ev_int(x->device) : ev_none());
	emit_kv(e, "title", EMIT_STR, ev_str(x->title));
	emit_kv(e, "detail", EMIT_STR, ev_str(x->detail));
	emit_object_begin(e, "evidence");
	for (size_t i = 0; i < x->nkv; i++)
		emit_kv(e, x->kv[i].key, x->kv[i].type, x->kv[i].v);
	emit_object_end(e);
	emit_text(e, "[%s] %s: %s: %s\n", findings_severity_name(x->severity), x->kind,
		  fmt_esc(findings_proc_label(x->proc, who, sizeof(who))),
		  fmt_esc(x->title ? x->title : ""));
	wrapped(e, "evidence", x->detail);
	if (x->items && x->nrows) {
		emit_table_begin(e, x->items);
		for (size_t r = 0; r < x->nrows; r++)
			emit_row(e, x->rows + r * x->items->ncols);
		emit_table_end(e);
	} else {
		emit_array_begin(e, "items");
		emit_array_end(e);
	}
	wrapped(e, "coverage", x->coverage);
	wrapped(e, "advice", x->advice);
	emit_kv(e, "coverage", EMIT_STR, ev_str(x->coverage));
	emit_kv(e, "recommendation", EMIT_STR, ev_str(x->advice));
	emit_object_end(e);
	emit_text(e, "\n");
}

void findings_emit(struct emit *e, const struct findings *f)
{
	size_t c[4], nproc = 0;
	char who[256];

	findings_count(f, c);
	for (size_t i = 0; i < model_nprocs(f->m); i++)
		nproc += model_proc(f->m, i)->selected;
	emit_text(e, "shimmer bottlenecks: %zu finding%s (%zu HIGH, %zu MEDIUM, %zu LOW) in %zu"
		  " process%s\n\n", f->n, f->n == 1 ? "" : "s", c[SEV_HIGH], c[SEV_MEDIUM],
		  c[SEV_LOW], nproc, nproc == 1 ? "" : "es");
	emit_object_begin(e, "counts");
	emit_kv(e, "HIGH", EMIT_INT, ev_int((int64_t)c[SEV_HIGH]));
	emit_kv(e, "MEDIUM", EMIT_INT, ev_int((int64_t)c[SEV_MEDIUM]));
	emit_kv(e, "LOW", EMIT_INT, ev_int((int64_t)c[SEV_LOW]));
	emit_object_end(e);
	emit_kv(e, "processes", EMIT_INT, ev_int((int64_t)nproc));
	emit_array_begin(e, "findings");
	for (size_t i = 0; i < f->n; i++)
		emit_finding(e, f->v[i]);
	emit_array_end(e);
	if (f->n == 0)
		emit_text(e, "No finding: no rule fired on what was recorded.\n\n");
	emit_array_begin(e, "withheld");
	if (f->nw)
		emit_text(e, "Not judged (the data a rule needs is missing):\n");
	for (size_t i = 0; i < f->nw; i++) {
		emit_object_begin(e, NULL);
		emit_kv(e, "kind", EMIT_STR, ev_str(f->w[i].kind));
		emit_kv(e, "pid", EMIT_INT, f->w[i].proc ? ev_int(f->w[i].proc->pid) : ev_none());
		emit_kv(e, "proc_id", EMIT_INT,
			f->w[i].proc ? ev_int(f->w[i].proc->proc_id) : ev_none());
		emit_kv(e, "reason", EMIT_STR, ev_str(f->w[i].reason));
		emit_text(e, "  %-16s %s: %s\n", f->w[i].kind,
			  fmt_esc(findings_proc_label(f->w[i].proc, who, sizeof(who))),
			  fmt_esc(f->w[i].reason));
		emit_object_end(e);
	}
	emit_array_end(e);
}
