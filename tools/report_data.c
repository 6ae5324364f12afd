/*
 * The data of the report's charts, as one JSON object; see report.h.
 *
 *   steps   per process with steps (the most frequent top-level range):
 *           [step index, duration ns], at most REPORT_POINTS of them (a
 *           bucket's shortest and longest step where there are more)
 *   kernels the kernels with the most GPU time over the processes
 *           (estimates for sampled ones): short name, full name, ns, count
 *   sites   the same by the line that launched them: the Python line, else
 *           the native call site (the launch stacks of schema 5)
 *   gpu     per process and device, the busy share in equal bins from its
 *           first operation to its last (null outside sampling windows)
 *   memory  per process and memory (the largest peaks first): its live
 *           bytes over time, a bucket's lowest and highest values kept, the
 *           peak exactly, and the fitted lines of its growing call sites
 *   sizes   the allocations' size distribution (shimmer allocations
 *           --histogram size) of the memories with the most allocations:
 *           labels (the buckets from the first any of them uses to the
 *           last), and per memory each bucket's share of its allocations,
 *           count and bytes
 *
 * Times are seconds since r->origin_ns.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "histogram.h"
#include "map.h"
#include "report.h"

/* A JSON string in the page's <script> (fmt_json_script()); "" for none. */
static void jstr(FILE *out, const char *s)
{
	fmt_json_script(out, s ? s : "");
}

static void jnum(FILE *out, double v)
{
	if (isfinite(v))
		fprintf(out, "%.6g", v);
	else
		fputs("null", out);
}

static double sec(const struct report *r, int64_t ns)
{
	return (double)(ns - r->origin_ns) / 1e9;
}

static void label(const struct model_proc *p, const char *what, char *buf, size_t len)
{
	char who[200];

	snprintf(buf, len, "%s%s%s", findings_proc_label(p, who, sizeof(who)), what ? " " : "",
		 what ? what : "");
}

/* ---- steps ------------------------------------------------------------------ */

static int cmp_steps(const void *x, const void *y)
{
	const struct model_steps *a = *(const struct model_steps *const *)x;
	const struct model_steps *b = *(const struct model_steps *const *)y;

	return (a->n < b->n) - (a->n > b->n);
}

static int steps(struct report *r)
{
	const struct model_steps **v = calloc(model_nprocs(r->m) + 1, sizeof(*v));
	size_t n = 0;
	int err = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < model_nprocs(r->m) && !err; i++) {
		const struct model_proc *p = model_proc(r->m, i);
		const struct model_steps *s;

		if (!p->selected || (err = model_steps(r->m, p, NULL, &s)))
			continue;
		if (s->n >= 2)
			v[n++] = s;
	}
	array_sort(v, n, sizeof(*v), cmp_steps);
	fputs("\"steps\":[", r->out);
	for (size_t i = 0; i < n && i < REPORT_SERIES && !err; i++) {
		const struct model_steps *s = v[i];
		size_t buckets = s->n > REPORT_POINTS / 2 ? REPORT_POINTS / 2 : s->n;
		char name[300];

		label(s->proc, s->name, name, sizeof(name));
		fputs(i ? ",{\"label\":" : "{\"label\":", r->out);
		jstr(r->out, name);
		fputs(",\"points\":[", r->out);
		for (size_t b = 0, first = 1; b < buckets; b++) {
			size_t lo = s->n * b / buckets, hi = s->n * (b + 1) / buckets, kmin = lo, kmax = lo;

			for (size_t k = lo; k < hi; k++) {
				if (s->end[k] - s->start[k] < s->end[kmin] - s->start[kmin])
					kmin = k;
				if (s->end[k] - s->start[k] > s->end[kmax] - s->start[kmax])
					kmax = k;
			}
			for (int j = 0; j < (kmin == kmax ? 1 : 2); j++) {
				size_t k = j == 0 ? (kmin < kmax ? kmin : kmax) : (kmin < kmax ? kmax : kmin);

				fprintf(r->out, "%s[%zu,%lld]", first ? "" : ",", k,
					(long long)(s->end[k] - s->start[k]));
				first = 0;
			}
		}
		fputs("]}", r->out);
		r->has_steps = 1;
	}
	fputs("]", r->out);
	free(v);
	return err;
}

/* ---- kernels, and the lines that launched them ------------------------------------ */

struct bar {
	char *name, *full;
	double ns, count;
};

static int cmp_bar(const void *x, const void *y)
{
	const struct bar *a = x, *b = y;

	return (a->ns < b->ns) - (a->ns > b->ns);
}

static void bars_out(struct report *r, const char *key, struct bar *v, size_t n)
{
	array_sort(v, n, sizeof(*v), cmp_bar);
	fprintf(r->out, ",\"%s\":[", key);
	for (size_t i = 0; i < n && i < REPORT_BARS; i++) {
		fputs(i ? ",{\"name\":" : "{\"name\":", r->out);
		jstr(r->out, v[i].name);
		fputs(",\"site\":", r->out);
		jstr(r->out, v[i].name);
		fputs(",\"full\":", r->out);
		jstr(r->out, v[i].full ? v[i].full : v[i].name);
		fputs(",\"ns\":", r->out);
		jnum(r->out, v[i].ns);
		fputs(",\"count\":", r->out);
		jnum(r->out, v[i].count);
		fputs("}", r->out);
	}
	fputs("]", r->out);
}

/* Kernel time by kernel (by_site 0: each bar's name the short name, full the
 * whole) or by launching line (1), over the processes (the findings'). */
static int bars(struct report *r, int by_site)
{
	const char *key = by_site ? "sites" : "kernels";
	struct strtab names = { 0 };
	struct bar *v = NULL;
	char **shown = NULL;
	size_t cap = 0;
	int err = 0;

	for (size_t i = 0; i < r->f->nprocs && !err; i++) {
		const struct findings_proc *fp = &r->f->procs[i];
		size_t n = by_site ? fp->nsites : fp->nkernels;

		for (size_t k = 0; k < n && !err; k++) {
			const struct findings_site *s = by_site ? &fp->sites[k] : &fp->kernels[k];
			int64_t idx;

			if ((err = strtab_index(&names, s->site, &idx)))
				break;
			if ((size_t)idx >= cap) {
				size_t ncap = (size_t)idx * 2 + 16;
				struct bar *nv = realloc(v, ncap * sizeof(*v));

				if (!nv) {
					err = -ENOMEM;
					break;
				}
				memset(nv + cap, 0, (ncap - cap) * sizeof(*nv));
				v = nv;
				cap = ncap;
			}
			v[idx].ns += s->ns;
			v[idx].count += s->count;
		}
	}
	/* Kernels by their short names, told apart where two read alike. */
	if (!err && !by_site)
		err = fmt_short_names((const char *const *)names.v, names.n, &shown);
	for (size_t i = 0; !err && i < names.n; i++) {
		if (by_site) {
			v[i].name = strdup(names.v[i]);
		} else {
			v[i].name = shown[i];
			shown[i] = NULL;
			v[i].full = strdup(names.v[i]);
		}
		if (!v[i].name || (!by_site && !v[i].full))
			err = -ENOMEM;
	}
	if (!err)
		bars_out(r, key, v, names.n);
	if (by_site)
		r->has_sites = names.n > 0;
	else
		r->has_kernels = names.n > 0;
	for (size_t i = 0; i < names.n && v; i++) {
		free(v[i].name);
		free(v[i].full);
	}
	free(v);
	fmt_short_names_free(shown, names.n);
	strtab_free(&names);
	return err;
}

/* ---- GPU busy ---------------------------------------------------------------------- */

static void gpu(struct report *r)
{
	size_t shown = 0;

	fputs(",\"gpu\":[", r->out);
	for (size_t i = 0; i < r->f->nprocs; i++) {
		const struct findings_proc *fp = &r->f->procs[i];

		for (size_t d = 0; d < fp->nbusy && shown < REPORT_SERIES; d++) {
			const struct findings_busy *b = &fp->busy[d];
			char what[32], name[300];

			snprintf(what, sizeof(what), "cuda:%lld", (long long)b->device);
			label(fp->p, what, name, sizeof(name));
			fputs(shown ? ",{\"label\":" : "{\"label\":", r->out);
			jstr(r->out, name);
			fputs(",\"points\":[", r->out);
			for (int k = 0; k < FINDINGS_BUSY_BINS; k++) {
				int64_t t = b->a + (b->b - b->a) * k / FINDINGS_BUSY_BINS;

				fprintf(r->out, "%s[", k ? "," : "");
				jnum(r->out, sec(r, t));
				fputs(",", r->out);
				jnum(r->out, b->share[k]);
				fputs("]", r->out);
			}
			fputs("]}", r->out);
			shown++;
			r->has_gpu = 1;
		}
	}
	fputs("]", r->out);
}

/* ---- memory ------------------------------------------------------------------------ */

/* A memory's live bytes, REPORT_POINTS / 3 buckets over its process's life:
 * in each, its lowest and highest values (in their order) and its last. */
struct mem_pass {
	struct report *r;
	int64_t a, b;
	size_t nb;
	int64_t cur_bucket;
	double lo, hi, last;
	int64_t lo_t, hi_t, last_t;
	int first;
};

static void mem_flush(struct mem_pass *s)
{
	struct { int64_t t; double v; } pt[3];
	size_t n = 0;

	if (s->cur_bucket < 0)
		return;
	if (s->lo_t <= s->hi_t) {
		pt[n++] = (__typeof__(pt[0])){ s->lo_t, s->lo };
		pt[n++] = (__typeof__(pt[0])){ s->hi_t, s->hi };
	} else {
		pt[n++] = (__typeof__(pt[0])){ s->hi_t, s->hi };
		pt[n++] = (__typeof__(pt[0])){ s->lo_t, s->lo };
	}
	if (s->last_t > pt[1].t)
		pt[n++] = (__typeof__(pt[0])){ s->last_t, s->last };
	for (size_t i = 0; i < n; i++) {
		fprintf(s->r->out, "%s[", s->first ? "" : ",");
		jnum(s->r->out, sec(s->r, pt[i].t));
		fputs(",", s->r->out);
		jnum(s->r->out, pt[i].v);
		fputs("]", s->r->out);
		s->first = 0;
	}
}

static int mem_event(void *ctx, int64_t t, double live)
{
	struct mem_pass *s = ctx;
	int64_t k = s->b > s->a ? (int64_t)((double)(t - s->a) * (double)s->nb /
					    (double)(s->b - s->a)) : 0;

	if (k != s->cur_bucket) {
		mem_flush(s);
		s->cur_bucket = k;
		s->lo = s->hi = live;
		s->lo_t = s->hi_t = t;
	}
	if (live < s->lo) {
		s->lo = live;
		s->lo_t = t;
	}
	if (live > s->hi) {
		s->hi = live;
		s->hi_t = t;
	}
	s->last = live;
	s->last_t = t;
	return 0;
}

static int cmp_mem(const void *x, const void *y)
{
	const struct model_mem *a = *(struct model_mem *const *)x, *b = *(struct model_mem *const *)y;

	return (a->peak < b->peak) - (a->peak > b->peak);
}

static int memory(struct report *r)
{
	struct model_mem *const *mems;
	struct model_mem **v = NULL;
	size_t n;
	int err = model_memories(r->m, &mems, &n);

	fputs(",\"memory\":[", r->out);
	if (!err && n && !(v = malloc(n * sizeof(*v))))
		err = -ENOMEM;
	if (!err && n) { /* none (no process selected): v and mems may be NULL */
		memcpy(v, mems, n * sizeof(*v));
		array_sort(v, n, sizeof(*v), cmp_mem);
	}
	for (size_t i = 0, shown = 0; !err && i < n && shown < REPORT_SERIES; i++) {
		const struct model_mem *mem = v[i];
		struct mem_pass s = { .r = r, .a = mem->proc->start_ns, .b = mem->proc->end_ns,
				      .nb = REPORT_POINTS / 3, .cur_bucket = -1, .first = 1 };
		char name[300];
		int nf = 0;

		if (mem->peak <= 0)
			continue;
		label(mem->proc, mem->label, name, sizeof(name));
		fputs(shown ? ",{\"label\":" : "{\"label\":", r->out);
		jstr(r->out, name);
		fputs(",\"points\":[", r->out);
		err = model_mem_events(r->m, mem, mem_event, &s);
		mem_flush(&s);
		fputs("],\"peak\":[", r->out);
		jnum(r->out, sec(r, mem->peak_ns));
		fputs(",", r->out);
		jnum(r->out, mem->peak);
		fputs("],\"fits\":[", r->out);
		/* the fits of its growing call sites (the memory-growth rule's) */
		for (size_t f = 0; f < r->f->nfits; f++) {
			const struct findings_fit *l = &r->f->fits[f];
			char fl[600], b[FMT_UNIT_MAX];

			if (l->mem != mem)
				continue;
			snprintf(fl, sizeof(fl), "%s, %s a %s, R2 %.3f", l->site,
				 fmt_bytes(b, sizeof(b), l->slope), l->per_step ? "step" : "second",
				 l->r2);
			fputs(nf++ ? ",{\"label\":" : "{\"label\":", r->out);
			jstr(r->out, fl);
			fputs(",\"points\":[", r->out);
			for (size_t k = 0; k < l->n; k++) {
				fprintf(r->out, "%s[", k ? "," : "");
				jnum(r->out, sec(r, l->t[k]));
				fputs(",", r->out);
				jnum(r->out, l->y[k]);
				fputs("]", r->out);
			}
			fputs("]}", r->out);
		}
		fputs("]}", r->out);
		shown++;
		r->has_memory = 1;
	}
	fputs("]", r->out);
	free(v);
	return err;
}

/* ---- allocation sizes -------------------------------------------------------------- */

static int cmp_hist(const void *x, const void *y)
{
	const struct model_hist *a = *(const struct model_hist *const *)x;
	const struct model_hist *b = *(const struct model_hist *const *)y;

	if (a->total_count != b->total_count)
		return (a->total_count < b->total_count) - (a->total_count > b->total_count);
	return (a->mem->index > b->mem->index) - (a->mem->index < b->mem->index);
}

static void hist_values(FILE *out, const char *key, const double *v, unsigned lo, unsigned hi,
			double whole)
{
	fprintf(out, ",\"%s\":[", key);
	for (unsigned b = lo; b <= hi; b++) {
		if (b > lo)
			fputc(',', out);
		jnum(out, whole > 0 ? v[b] / whole : v[b]);
	}
	fputc(']', out);
}

static int sizes(struct report *r)
{
	const struct model_hist *v, **top = NULL;
	size_t n, shown = 0;
	unsigned lo = MODEL_HIST_BUCKETS, hi = 0;
	char text[HISTOGRAM_TEXT_MAX], name[300];
	int err = model_heap_hist(r->m, MODEL_HIST_SIZE, &v, &n);

	if (!err && !(top = malloc((n + 1) * sizeof(*top))))
		err = -ENOMEM;
	for (size_t i = 0; !err && i < n; i++)
		if (v[i].total_count > 0)
			top[shown++] = &v[i];
	if (err)
		return err;
	array_sort(top, shown, sizeof(*top), cmp_hist);
	if (shown > REPORT_SERIES)
		shown = REPORT_SERIES;
	for (size_t i = 0; i < shown; i++)
		for (unsigned b = 0; b < MODEL_HIST_BUCKETS; b++)
			if (top[i]->count[b] > 0) {
				lo = b < lo ? b : lo;
				hi = b > hi ? b : hi;
			}
	fputs(",\"sizes\":{\"labels\":[", r->out);
	for (unsigned b = lo; shown && b <= hi; b++) {
		fputs(b > lo ? "," : "", r->out);
		jstr(r->out, histogram_bucket_text(text, sizeof(text), MODEL_HIST_SIZE, b));
	}
	fputs("],\"sets\":[", r->out);
	for (size_t i = 0; i < shown; i++) {
		label(top[i]->mem->proc, top[i]->mem->label, name, sizeof(name));
		fputs(i ? ",{\"label\":" : "{\"label\":", r->out);
		jstr(r->out, name);
		fprintf(r->out, ",\"estimated\":%d", top[i]->mem->estimated);
		hist_values(r->out, "share", top[i]->count, lo, hi, top[i]->total_count);
		hist_values(r->out, "count", top[i]->count, lo, hi, 0);
		hist_values(r->out, "bytes", top[i]->bytes, lo, hi, 0);
		fputc('}', r->out);
	}
	fputs("]}", r->out);
	r->has_sizes = shown > 0;
	free(top);
	return 0;
}

int report_data(struct report *r)
{
	int err;

	fputc('{', r->out);
	err = steps(r);
	if (!err)
		err = bars(r, 0);
	if (!err)
		err = bars(r, 1);
	if (!err)
		gpu(r);
	if (!err)
		err = memory(r);
	if (!err)
		err = sizes(r);
	fputs("}", r->out);
	return err;
}
