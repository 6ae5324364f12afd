/*
 * The findings of the GPU timeline (see findings.h, docs/usage.md):
 * CPU-GPU synchronization, GPU idle (Holistic Trace Analysis's split,
 * Nsight Systems' gpu_time_util and gpu_gaps), launch-bound work, pageable
 * and synchronous copies, synchronous memsets, data loading, and
 * communication and ranks.
 *
 * One process at a time: its GPU operations (kernels, copies, memsets),
 * each joined to the API call that launched it (same correlation id), are
 * read into memory, sorted by device and start, and turned into interval
 * lists: the device's busy time (the union of its operations), the span
 * analysed (from its first operation's start to its last's end, or, for a
 * process whose GPU activity was sampled, the sampling windows within
 * it), idle stretches.  Then one pass over its CUDA calls in time order
 * (blocked time, what each thread did during the intervals watched) and
 * one over its threads' CPU time readings.  Memory: about 100 bytes per
 * GPU operation of the largest process.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "findings.h"
#include "fmt.h"
#include "map.h"
#include "wire.h"

/* ---- intervals ------------------------------------------------------------------ */

struct iv {
	int64_t a, b; /* [a, b) */
};

struct ivs {
	struct iv *v;
	size_t n, cap;
};

static int ivs_add(struct ivs *s, int64_t a, int64_t b)
{
	if (b <= a)
		return 0;
	if (array_grow(&s->v, &s->cap, s->n, sizeof(*s->v)) < 0)
		return -ENOMEM;
	s->v[s->n++] = (struct iv){ a, b };
	return 0;
}

static void ivs_free(struct ivs *s)
{
	free(s->v);
	memset(s, 0, sizeof(*s));
}

static int cmp_iv(const void *x, const void *y)
{
	const struct iv *a = x, *b = y;

	return (a->a > b->a) - (a->a < b->a);
}

/* Sort and merge overlapping or touching intervals. */
static void ivs_merge(struct ivs *s)
{
	size_t n = 0;

	/* they often come sorted (a device's operations): a check first */
	for (size_t i = 1; i < s->n; i++)
		if (s->v[i].a < s->v[i - 1].a) {
			array_sort(s->v, s->n, sizeof(*s->v), cmp_iv);
			break;
		}
	for (size_t i = 0; i < s->n; i++) {
		if (n && s->v[i].a <= s->v[n - 1].b) {
			if (s->v[i].b > s->v[n - 1].b)
				s->v[n - 1].b = s->v[i].b;
		} else {
			s->v[n++] = s->v[i];
		}
	}
	s->n = n;
}

static int64_t ivs_len(const struct ivs *s)
{
	int64_t t = 0;

	for (size_t i = 0; i < s->n; i++)
		t += s->v[i].b - s->v[i].a;
	return t;
}

/* |x ∩ y| of two merged lists. */
static int64_t ivs_overlap(const struct ivs *x, const struct ivs *y)
{
	size_t i = 0, j = 0;
	int64_t t = 0;

	while (i < x->n && j < y->n) {
		int64_t a = x->v[i].a > y->v[j].a ? x->v[i].a : y->v[j].a;
		int64_t b = x->v[i].b < y->v[j].b ? x->v[i].b : y->v[j].b;

		if (b > a)
			t += b - a;
		if (x->v[i].b < y->v[j].b)
			i++;
		else
			j++;
	}
	return t;
}

/* |[a, b) ∩ s| of a merged list, from index *from on (advanced past the
 * intervals that end before a: calls must come in order of a). */
static int64_t ivs_overlap_one(const struct ivs *s, size_t *from, int64_t a, int64_t b)
{
	int64_t t = 0;

	while (*from < s->n && s->v[*from].b <= a)
		(*from)++;
	for (size_t i = *from; i < s->n && s->v[i].a < b; i++) {
		int64_t lo = s->v[i].a > a ? s->v[i].a : a, hi = s->v[i].b < b ? s->v[i].b : b;

		if (hi > lo)
			t += hi - lo;
	}
	return t;
}

/* Whether [a, b) lies inside one interval of merged s. */
static int ivs_inside(const struct ivs *s, int64_t a, int64_t b)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->v[mid].b <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < s->n && s->v[lo].a <= a && b <= s->v[lo].b;
}

/* out = x ∩ y (merged inputs). */
static int ivs_intersect(const struct ivs *x, const struct ivs *y, struct ivs *out)
{
	size_t i = 0, j = 0;

	while (i < x->n && j < y->n) {
		int64_t a = x->v[i].a > y->v[j].a ? x->v[i].a : y->v[j].a;
		int64_t b = x->v[i].b < y->v[j].b ? x->v[i].b : y->v[j].b;

		if (b > a && ivs_add(out, a, b) < 0)
			return -ENOMEM;
		if (x->v[i].b < y->v[j].b)
			i++;
		else
			j++;
	}
	return 0;
}

/* out = x \ y (merged inputs). */
static int ivs_minus(const struct ivs *x, const struct ivs *y, struct ivs *out)
{
	size_t j = 0;

	for (size_t i = 0; i < x->n; i++) {
		int64_t a = x->v[i].a, b = x->v[i].b;

		while (j < y->n && y->v[j].b <= a)
			j++;
		for (size_t k = j; k < y->n && y->v[k].a < b && a < b; k++) {
			if (y->v[k].a > a && ivs_add(out, a, y->v[k].a) < 0)
				return -ENOMEM;
			if (y->v[k].b > a)
				a = y->v[k].b;
		}
		if (a < b && ivs_add(out, a, b) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* ---- a process's GPU operations ------------------------------------------------ */

enum { OP_KERNEL, OP_COPY, OP_MEMSET };

#define OPF_PAGEABLE 0x1u /* a host copy touching pageable memory */
#define OPF_NCCL 0x2u     /* a communication kernel */
#define OPF_SYNCMEM 0x4u  /* a memset of pinned or managed memory */
#define OPF_GRAPH 0x8u    /* a kernel launched by a CUDA graph */

struct op {
	int64_t start, end;
	int64_t name;   /* kernel: index into names; copy: its direction (enum dir) */
	int64_t bytes;
	uint32_t api;   /* launching call: index into apis + 1; 0: not recorded */
	int32_t stream; /* -1: unknown */
	uint16_t dev;
	uint8_t kind;
	uint8_t flags;
};

enum dir { DIR_HTOD, DIR_DTOH, DIR_OTHER };

struct api_item {
	int64_t correlation;
	int64_t start, end, tid, stack, pystack;
};

static int cmp_api(const void *x, const void *y)
{
	const struct api_item *a = x, *b = y;

	return (a->correlation > b->correlation) - (a->correlation < b->correlation);
}

/* An operation and when its launch call began. */
struct launched {
	int64_t api_start, start, end;
};

static int cmp_launched(const void *x, const void *y)
{
	const struct launched *a = x, *b = y;

	return (a->api_start > b->api_start) - (a->api_start < b->api_start);
}

/* HTA's idle split on one stream. */
struct stream_idle {
	int32_t stream;
	int64_t hw_ns, kw_ns, other_ns;
};

/* A device of the process: its operations are ops[first, first + n). */
struct dev {
	int64_t device;
	size_t first, n;
	struct ivs busy;  /* union of its operations */
	struct ivs span;  /* what is analysed: [first start, last end), or windows in it */
	int64_t span_ns, busy_ns;
	int64_t hw_ns, kw_ns, other_ns; /* HTA's idle split, over its streams */
	struct stream_idle *streams;    /* the same per stream */
	size_t nstreams, streams_cap;
	struct ivs comm, compute, mem;  /* unions by class */
	/* Nsight's gpu_gaps and gpu_time_util (whole recordings only) */
	int64_t ngaps, gaps_ns;         /* idle stretches of FINDINGS_GAP_NS or more */
	size_t gap_w[3], ngap_w;        /* the longest: watches */
	int nlow;                       /* chunks under FINDINGS_UTIL_LOW */
	struct {
		int64_t a, b;
		double util;
		size_t w;
	} low[3];                       /* the longest low stretches */
	size_t nlow_w;
};

/* What a thread did during a watched interval. */
#define WATCH_THREADS 8
#define WATCH_FNS 3

struct thr_act {
	int64_t tid;
	int64_t cuda_ns;
	int64_t cpu_ns, wait_ns;
	int64_t known_ns; /* the part of the interval its CPU readings cover */
	int cpu_known;
	struct { const char *fn; int64_t ns; } fn[WATCH_FNS];
};

struct watch {
	int64_t a, b;
	struct thr_act t[WATCH_THREADS];
	size_t nt;
};

struct site_item {
	struct map_key key; /* proc, stack, pystack */
	int64_t n;
	double ns;
};

struct fn_item {
	struct map_key key; /* proc, fn id, 0 */
	const char *name;
	int64_t n, ns;
};

struct seq_item {
	struct map_key key; /* proc, n1, n2 << 32 | n3 */
	int64_t n;
};

struct name_ptr {
	struct map_key key; /* the model's name pointer */
	int64_t index;      /* into names */
	int set;
};

struct name_item {
	struct map_key key; /* proc, name index, 0 */
	int64_t n, short_n;
	int64_t ns;
};

/* Everything one process needs while its rules run. */
struct gproc {
	struct findings *f;
	struct model *m;
	const struct model_proc *p;
	int sampled;
	struct op *ops;
	size_t nops, cap;
	struct api_item *apis; /* by correlation */
	size_t napis, apis_cap;
	size_t api_hint;       /* the last one found: operations come in about its order */
	int64_t kernels, graph_kernels; /* recorded, and of them launched by CUDA graphs */
	struct strtab names;
	char **shown;         /* names as findings show them (kname()) */
	size_t nshown;
	struct map name_ptrs; /* the model's name pointers -> names */
	struct dev *devs;
	size_t ndevs, devs_cap;
	struct ivs windows;  /* sampled: the sampling windows */
	struct ivs all_busy; /* union over devices */
	struct ivs all_span; /* union of the devices' spans */
	int64_t first_ns, last_ns;
	int64_t last_start;  /* the last operation's start */
	/* What is analysed: with steps, the steps after the first (a warm-up)
	 * on the CPU, and on the GPU the operations launched in them; without
	 * steps, everything (gfocus: the first operation to the last). */
	int64_t focus_a, focus_b;   /* the CPU's */
	int64_t gfocus_a, gfocus_b; /* the GPU's */
	struct ivs win;             /* the union of both (in the windows) */
	struct launched *launched;  /* operations with their launch, by launch */
	size_t nlaunched;
	const struct model_steps *steps;
	int64_t step_tid;    /* the thread of the steps' ranges; -1 unknown */
	/* the pass over the CUDA calls */
	struct watch *watches;
	size_t nwatches, watch_cap;
	struct ivs bidle;    /* data loading: idle at step boundaries */
	size_t *bidle_step;  /* the step of each */
	int64_t *bidle_cuda; /* the step thread's CUDA time in each */
	int64_t blocked_ns, blocked_calls, blocked_sited;
	int64_t *step_blocked; /* per step */
	struct map block_fns, block_sites;
	int64_t sync_copies, sync_copy_ns;
	struct map sync_copy_sites;
	int any_cuda;
	struct map call_fns;  /* every call's time in the span, by function */
	/* launches */
	int64_t *delays;      /* kernel start - launch call end */
	size_t ndelays, delays_cap;
	int64_t delay_outliers;
	struct map seqs;      /* kernel triples on a stream: {n1, n2, n3} */
	/* data loading */
	size_t load_steps;    /* steps whose boundary was judged */
	int64_t load_cycle_ns;
};

/* Kernel name i as findings show it: its short name, told apart from the
 * process's other kernels whose short names read alike (fmt_short_names();
 * made once, when first asked; on a failed allocation the short name). */
static const char *kname(struct gproc *g, size_t i, char *buf, size_t len)
{
	if (!g->shown || g->nshown != g->names.n) {
		fmt_short_names_free(g->shown, g->nshown);
		g->nshown = 0;
		if (fmt_short_names((const char *const *)g->names.v, g->names.n, &g->shown))
			g->shown = NULL;
		else
			g->nshown = g->names.n;
	}
	if (g->shown && i < g->nshown) {
		snprintf(buf, len, "%s", g->shown[i]);
		return buf;
	}
	return fmt_short_name(buf, len, g->names.v[i]);
}

static const char *dir_name(int64_t d)
{
	return d == DIR_HTOD ? "HtoD" : d == DIR_DTOH ? "DtoH" : "other";
}

static int is_nccl(const char *name)
{
	return name && (strncmp(name, "nccl", 4) == 0 || strstr(name, "nccl") ||
			strstr(name, "NCCL"));
}

static struct op *op_new(struct gproc *g)
{
	if (array_grow(&g->ops, &g->cap, g->nops, sizeof(*g->ops)) < 0)
		return NULL;
	memset(&g->ops[g->nops], 0, sizeof(g->ops[0]));
	return &g->ops[g->nops++];
}

/* The launching call of an operation: the API call of its correlation.
 * Operations are read in about the order they were launched, so the
 * search gallops from the last one found. */
static void op_launch(struct gproc *g, struct op *o, int64_t correlation)
{
	size_t n = g->napis, lo, hi, step = 1, h = g->api_hint < n ? g->api_hint : 0;

	if (!n)
		return;
	if (g->apis[h].correlation <= correlation) {
		lo = h;
		hi = h + 1;
		while (hi < n && g->apis[hi].correlation <= correlation) {
			lo = hi;
			hi += step;
			step *= 2;
		}
		if (hi > n)
			hi = n;
	} else {
		hi = h;
		lo = h;
		while (lo > 0 && g->apis[lo].correlation > correlation) {
			hi = lo;
			lo = lo > step ? lo - step : 0;
			step *= 2;
		}
	}
	/* the last of [lo, hi) at or below correlation */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (g->apis[mid].correlation <= correlation)
			lo = mid;
		else
			hi = mid;
	}
	if (g->apis[lo].correlation == correlation) {
		o->api = (uint32_t)(lo + 1);
		g->api_hint = lo;
	}
}

static int api_cb(void *ctx, const struct model_api *a)
{
	struct gproc *g = ctx;
	struct api_item *it;

	if (array_grow(&g->apis, &g->apis_cap, g->napis, sizeof(*g->apis)) < 0)
		return -ENOMEM;
	it = &g->apis[g->napis++];
	it->correlation = a->correlation;
	it->start = a->start_ns;
	it->end = a->end_ns;
	it->tid = a->tid;
	it->stack = a->stack_id;
	it->pystack = a->pystack_id;
	return 0;
}

/* The API calls by correlation (they come about sorted: a check first). */
static void apis_sort(struct gproc *g)
{
	for (size_t i = 1; i < g->napis; i++)
		if (g->apis[i - 1].correlation > g->apis[i].correlation) {
			array_sort(g->apis, g->napis, sizeof(*g->apis), cmp_api);
			return;
		}
}

static int kernel_cb(void *ctx, const struct model_kernel *k)
{
	struct gproc *g = ctx;
	struct op *o = op_new(g);
	int err;

	if (!o)
		return -ENOMEM;
	o->kind = OP_KERNEL;
	o->start = k->start_ns;
	o->end = k->end_ns > k->start_ns ? k->end_ns : k->start_ns;
	o->dev = (uint16_t)k->device;
	o->stream = (int32_t)k->stream;
	/* the model hands out one pointer per name: intern each once */
	{
		struct map_key nk = { (int64_t)(uintptr_t)k->name, 0, 0 };
		struct name_ptr *np = map_get(&g->name_ptrs, &nk);

		if (!np)
			return -ENOMEM;
		if (!np->set) {
			err = strtab_index(&g->names, k->name ? k->name : "(unnamed kernel)",
					   &np->index);
			np->set = 1;
		} else {
			err = 0;
		}
		o->name = np->index;
	}
	if (is_nccl(k->name))
		o->flags |= OPF_NCCL;
	g->kernels++;
	if (k->graph_id > 0) {
		o->flags |= OPF_GRAPH;
		g->graph_kernels++;
	}
	op_launch(g, o, k->correlation);
	return err;
}

static int copy_cb(void *ctx, const struct model_copy *c)
{
	struct gproc *g = ctx;
	struct op *o = op_new(g);

	if (!o)
		return -ENOMEM;
	o->kind = c->memset ? OP_MEMSET : OP_COPY;
	o->start = c->start_ns;
	o->end = c->end_ns > c->start_ns ? c->end_ns : c->start_ns;
	o->dev = (uint16_t)c->device;
	o->stream = (int32_t)c->stream;
	o->bytes = c->bytes;
	if (!c->memset) {
		o->name = c->kind && !strcmp(c->kind, "HtoD") ? DIR_HTOD :
			  c->kind && !strcmp(c->kind, "DtoH") ? DIR_DTOH : DIR_OTHER;
		if (o->name != DIR_OTHER &&
		    ((c->src_kind && !strcmp(c->src_kind, "pageable")) ||
		     (c->dst_kind && !strcmp(c->dst_kind, "pageable"))))
			o->flags |= OPF_PAGEABLE;
	} else if (c->dst_kind && (!strcmp(c->dst_kind, "pinned") ||
				   !strcmp(c->dst_kind, "managed"))) {
		o->flags |= OPF_SYNCMEM;
	}
	op_launch(g, o, c->correlation);
	return 0;
}

static int window_cb(void *ctx, const struct model_window *w)
{
	struct gproc *g = ctx;

	return ivs_add(&g->windows, w->start_ns, w->end_ns);
}

static int cmp_op(const void *x, const void *y)
{
	const struct op *a = x, *b = y;

	if (a->dev != b->dev)
		return a->dev < b->dev ? -1 : 1;
	return (a->start > b->start) - (a->start < b->start);
}

static const struct api_item *op_api(const struct gproc *g, const struct op *o)
{
	return o->api ? &g->apis[o->api - 1] : NULL;
}

/* Half or more of the process's kernels came from CUDA graph launches (and
 * it ran some): the advice then says how to use graphs better, not to
 * start using them. */
static int mostly_graphs(const struct gproc *g)
{
	return g->graph_kernels > 0 && 2 * g->graph_kernels >= g->kernels;
}

/* The steps' thread: the thread of the first range named like the steps. */
struct step_tid_ctx {
	const char *name;
	int64_t tid;
};

static int step_tid_cb(void *ctx, const struct model_range *r)
{
	struct step_tid_ctx *s = ctx;

	if (r->depth == 0 && r->name && !strcmp(r->name, s->name)) {
		s->tid = r->tid;
		return 1;
	}
	return 0;
}

static int load(struct gproc *g)
{
	struct model_scan w = model_scan_proc(g->p, 0);
	int err;

	struct model_scan wk = w;

	g->sampled = g->p->sampling != NULL;
	err = model_api_each(g->m, &w, api_cb, g);
	if (!err)
		apis_sort(g);
	wk.brief = 1;
	if (!err)
		err = model_kernels_each(g->m, &wk, kernel_cb, g);
	if (!err)
		err = model_copies_each(g->m, &w, copy_cb, g);
	if (!err && g->sampled)
		err = model_windows_each(g->m, &w, window_cb, g);
	if (err)
		return err;
	ivs_merge(&g->windows);
	array_sort(g->ops, g->nops, sizeof(*g->ops), cmp_op);
	err = model_steps(g->m, g->p, NULL, &g->steps);
	g->step_tid = -1;
	if (!err && g->steps->n && g->steps->name) {
		struct step_tid_ctx s = { g->steps->name, -1 };

		err = model_ranges_each(g->m, &w, step_tid_cb, &s);
		if (err == 1)
			err = 0;
		g->step_tid = s.tid;
	}
	return err;
}

/* ---- per device -------------------------------------------------------------- */

static int cmp_stream_idx(const void *x, const void *y, void *ctx)
{
	const struct op *ops = ctx, *a = &ops[*(const size_t *)x], *b = &ops[*(const size_t *)y];

	if (a->stream != b->stream)
		return a->stream < b->stream ? -1 : 1;
	return (a->start > b->start) - (a->start < b->start);
}

/* HTA's idle split on each stream of d: before each operation, the gap
 * since the stream's previous one ended is host wait when its launch
 * call began after that end, kernel wait when shorter than
 * FINDINGS_KERNEL_WAIT_NS, else other.  A sampled process counts only
 * gaps inside one window. */
static int idle_split(struct gproc *g, struct dev *d)
{
	size_t *idx = malloc((d->n + 1) * sizeof(*idx));
	int64_t prev_end = 0;

	if (!idx)
		return -ENOMEM;
	for (size_t i = 0; i < d->n; i++)
		idx[i] = d->first + i;
	qsort_r(idx, d->n, sizeof(*idx), cmp_stream_idx, g->ops);
	for (size_t i = 0, k = 0; i < d->n; i++) {
		const struct op *o = &g->ops[idx[i]];
		const struct api_item *a = op_api(g, o);
		int64_t gap;
		int first = i == 0 || o->stream != g->ops[idx[i - 1]].stream;

		if (first)
			k = 0;
		/* kernel sequences on the stream (fusion candidates) */
		if (o->kind == OP_KERNEL) {
			if (k >= 2) {
				struct map_key sk = { g->ops[idx[i - 2]].name, g->ops[idx[i - 1]].name,
						      o->name };
				struct seq_item *q;

				if (g->ops[idx[i - 1]].kind == OP_KERNEL &&
				    g->ops[idx[i - 2]].kind == OP_KERNEL) {
					if (!(q = map_get(&g->seqs, &sk))) {
						free(idx);
						return -ENOMEM;
					}
					q->n++;
				}
			}
			k++;
		}
		/* launch delay outliers: the stream was idle, the kernel late */
		if (o->kind == OP_KERNEL && a) {
			int64_t ready = a->end > prev_end || first ? a->end : prev_end;

			if (o->start - ready > FINDINGS_DELAY_OUTLIER_NS &&
			    (!g->sampled || ivs_inside(&d->span, ready, o->start)))
				g->delay_outliers++;
		}
		if (first) {
			prev_end = o->end;
			if (array_grow(&d->streams, &d->streams_cap, d->nstreams,
				       sizeof(*d->streams)) < 0) {
				free(idx);
				return -ENOMEM;
			}
			d->streams[d->nstreams++] = (struct stream_idle){ .stream = o->stream };
			continue;
		}
		/* the gap within the span (whole recordings: its one interval) */
		gap = (o->start < d->span.v[d->span.n - 1].b ? o->start : d->span.v[d->span.n - 1].b) -
		      (prev_end > d->span.v[0].a ? prev_end : d->span.v[0].a);
		if (gap > 0 && (!g->sampled || ivs_inside(&d->span, prev_end, o->start))) {
			struct stream_idle *si = &d->streams[d->nstreams - 1];

			if (a && a->start > prev_end) {
				d->hw_ns += gap;
				si->hw_ns += gap;
			} else if (gap < FINDINGS_KERNEL_WAIT_NS) {
				d->kw_ns += gap;
				si->kw_ns += gap;
			} else {
				d->other_ns += gap;
				si->other_ns += gap;
			}
		}
		if (o->end > prev_end)
			prev_end = o->end;
	}
	free(idx);
	return 0;
}

static int dev_build(struct gproc *g, struct dev *d)
{
	int64_t lo = INT64_MAX, hi = INT64_MIN;
	struct ivs whole = { 0 };
	int err = 0;

	for (size_t i = d->first; i < d->first + d->n && !err; i++) {
		const struct op *o = &g->ops[i];
		struct ivs *cls = o->kind != OP_KERNEL ? &d->mem :
				  (o->flags & OPF_NCCL) ? &d->comm : &d->compute;

		if (o->start < lo)
			lo = o->start;
		if (o->end > hi)
			hi = o->end;
		err = ivs_add(&d->busy, o->start, o->end);
		if (!err)
			err = ivs_add(cls, o->start, o->end);
	}
	if (err)
		return err;
	ivs_merge(&d->busy);
	ivs_merge(&d->comm);
	ivs_merge(&d->compute);
	ivs_merge(&d->mem);
	if (hi <= lo)
		hi = lo + 1;
	/* with steps, the work launched in them: start-up and the end of
	 * the run are not the loop's */
	if (g->gfocus_a > lo)
		lo = g->gfocus_a;
	if (g->gfocus_b < hi)
		hi = g->gfocus_b;
	if (hi <= lo)
		hi = lo + 1;
	err = ivs_add(&whole, lo, hi);
	if (!err && g->sampled)
		err = ivs_intersect(&g->windows, &whole, &d->span);
	else if (!err)
		err = ivs_add(&d->span, lo, hi);
	ivs_free(&whole);
	if (err)
		return err;
	d->span_ns = ivs_len(&d->span);
	d->busy_ns = ivs_overlap(&d->busy, &d->span);
	return d->span.n ? idle_split(g, d) : 0;
}

static int devices(struct gproc *g)
{
	const struct model_steps *s = g->steps;
	int err = 0;

	g->focus_a = g->gfocus_a = INT64_MIN;
	g->focus_b = g->gfocus_b = INT64_MAX;
	g->launched = malloc((g->nops + 1) * sizeof(*g->launched));
	if (!g->launched)
		return -ENOMEM;
	for (size_t i = 0; i < g->nops; i++) {
		const struct api_item *a = op_api(g, &g->ops[i]);

		if (a)
			g->launched[g->nlaunched++] = (struct launched){ a->start, g->ops[i].start,
									 g->ops[i].end };
	}
	array_sort(g->launched, g->nlaunched, sizeof(*g->launched), cmp_launched);
	if (s->n >= 1) {
		int64_t ga = INT64_MAX, gb = INT64_MIN;

		g->focus_a = s->start[s->n >= 2 ? 1 : 0];
		g->focus_b = s->end[s->n - 1];
		for (size_t i = 0; i < g->nlaunched; i++)
			if (g->launched[i].api_start >= g->focus_a &&
			    g->launched[i].api_start <= g->focus_b) {
				if (g->launched[i].start < ga)
					ga = g->launched[i].start;
				if (g->launched[i].end > gb)
					gb = g->launched[i].end;
			}
		if (gb > ga) {
			g->gfocus_a = ga;
			g->gfocus_b = gb;
		} else {
			/* launches not recorded: the steps' own span */
			g->gfocus_a = g->focus_a;
			g->gfocus_b = g->focus_b;
		}
	}

	g->first_ns = INT64_MAX;
	g->last_ns = INT64_MIN;
	for (size_t i = 0; i < g->nops; i++) {
		if (i == 0 || g->ops[i].dev != g->ops[i - 1].dev) {
			struct dev *d;

			if (array_grow(&g->devs, &g->devs_cap, g->ndevs, sizeof(*g->devs)) < 0)
				return -ENOMEM;
			d = &g->devs[g->ndevs++];
			memset(d, 0, sizeof(*d));
			d->device = g->ops[i].dev;
			d->first = i;
		}
		g->devs[g->ndevs - 1].n++;
		if (g->ops[i].start < g->first_ns)
			g->first_ns = g->ops[i].start;
		if (g->ops[i].end > g->last_ns)
			g->last_ns = g->ops[i].end;
		if (g->ops[i].start > g->last_start)
			g->last_start = g->ops[i].start;
	}
	for (size_t i = 0; i < g->ndevs && !err; i++) {
		err = dev_build(g, &g->devs[i]);
		for (size_t k = 0; !err && k < g->devs[i].busy.n; k++)
			err = ivs_add(&g->all_busy, g->devs[i].busy.v[k].a, g->devs[i].busy.v[k].b);
		for (size_t k = 0; !err && k < g->devs[i].span.n; k++)
			err = ivs_add(&g->all_span, g->devs[i].span.v[k].a, g->devs[i].span.v[k].b);
	}
	ivs_merge(&g->all_busy);
	ivs_merge(&g->all_span);
	/* the CPU's side: the steps and the GPU work they launched */
	if (!err && g->all_span.n) {
		struct ivs w = { 0 };
		int64_t a = g->all_span.v[0].a, b = g->all_span.v[g->all_span.n - 1].b;

		if (g->focus_a != INT64_MIN && g->focus_a < a)
			a = g->focus_a;
		if (g->focus_b != INT64_MAX && g->focus_b > b)
			b = g->focus_b;
		err = ivs_add(&w, a, b);
		if (!err && g->sampled)
			err = ivs_intersect(&g->windows, &w, &g->win);
		else if (!err)
			err = ivs_add(&g->win, a, b);
		ivs_free(&w);
	}
	return err;
}

static int watch_add(struct gproc *g, int64_t a, int64_t b, size_t *index)
{
	if (array_grow(&g->watches, &g->watch_cap, g->nwatches, sizeof(*g->watches)) < 0)
		return -ENOMEM;
	memset(&g->watches[g->nwatches], 0, sizeof(g->watches[0]));
	g->watches[g->nwatches].a = a;
	g->watches[g->nwatches].b = b;
	*index = g->nwatches++;
	return 0;
}

static struct thr_act *watch_thread(struct watch *w, int64_t tid)
{
	for (size_t i = 0; i < w->nt; i++)
		if (w->t[i].tid == tid)
			return &w->t[i];
	if (w->nt == WATCH_THREADS)
		return NULL;
	w->t[w->nt] = (struct thr_act){ .tid = tid };
	return &w->t[w->nt++];
}

/* Nsight's gpu_gaps (idle stretches of FINDINGS_GAP_NS or more) and
 * gpu_time_util (the span in FINDINGS_UTIL_CHUNKS equal chunks, those
 * under FINDINGS_UTIL_LOW busy), for whole recordings: windows of a few
 * milliseconds hold neither. */
static int gaps_and_chunks(struct gproc *g, struct dev *d)
{
	int64_t lo = d->span.v[0].a, hi = d->span.v[d->span.n - 1].b, len = hi - lo;
	struct { int64_t a, b; } best[3] = { { 0, 0 } };
	size_t from = 0;
	int err = 0;

	for (size_t i = 1; i < d->busy.n; i++) {
		int64_t a = d->busy.v[i - 1].b, b = d->busy.v[i].a;

		if (b - a < FINDINGS_GAP_NS)
			continue;
		d->ngaps++;
		d->gaps_ns += b - a;
		for (int k = 0; k < 3; k++)
			if (b - a > best[k].b - best[k].a) {
				memmove(&best[k + 1], &best[k], (size_t)(2 - k) * sizeof(best[0]));
				best[k].a = a;
				best[k].b = b;
				break;
			}
	}
	for (int k = 0; k < 3 && best[k].b > best[k].a && !err; k++)
		err = watch_add(g, best[k].a, best[k].b, &d->gap_w[d->ngap_w++]);
	if (err || len < FINDINGS_UTIL_CHUNKS)
		return err;
	/* low chunks, adjacent ones merged into stretches */
	for (int c = 0; c < FINDINGS_UTIL_CHUNKS;) {
		int64_t a = lo + len * c / FINDINGS_UTIL_CHUNKS, b;
		int64_t busy = 0;
		int e = c;

		while (e < FINDINGS_UTIL_CHUNKS) {
			int64_t ca = lo + len * e / FINDINGS_UTIL_CHUNKS;
			int64_t cb = lo + len * (e + 1) / FINDINGS_UTIL_CHUNKS;
			size_t f2 = from;
			int64_t u = ivs_overlap_one(&d->busy, &f2, ca, cb);

			if ((double)u >= FINDINGS_UTIL_LOW * (double)(cb - ca))
				break;
			busy += u;
			e++;
		}
		if (e == c) {
			c++;
			continue;
		}
		b = lo + len * e / FINDINGS_UTIL_CHUNKS;
		d->nlow += e - c;
		for (int k = 0; k < 3; k++)
			if (b - a > d->low[k].b - d->low[k].a) {
				memmove(&d->low[k + 1], &d->low[k], (size_t)(2 - k) * sizeof(d->low[0]));
				d->low[k].a = a;
				d->low[k].b = b;
				d->low[k].util = (double)busy / (double)(b - a);
				break;
			}
		c = e;
	}
	for (int k = 0; k < 3 && d->low[k].b > d->low[k].a && !err; k++) {
		err = watch_add(g, d->low[k].a, d->low[k].b, &d->low[k].w);
		d->nlow_w = (size_t)k + 1;
	}
	return err;
}

/*
 * Data loading: before each step's first GPU operation, since the end of
 * the step before, the time no device was busy (a sampled process: only
 * steps whose stretch lies in one window).  The CUDA pass takes out the
 * time the steps' thread spent in CUDA calls.
 */
static int boundaries(struct gproc *g)
{
	const struct model_steps *s = g->steps;
	struct ivs one = { 0 }, idle = { 0 };
	size_t li = 0;
	int err = 0;

	if (!s->n || !g->nlaunched)
		return 0;
	for (size_t k = 1; k < s->n && !err; k++) {
		int64_t first = INT64_MAX;

		/* the first GPU work of the operations launched in the step */
		while (li < g->nlaunched && g->launched[li].api_start < s->start[k])
			li++;
		for (size_t j = li; j < g->nlaunched && g->launched[j].api_start <= s->end[k]; j++)
			if (g->launched[j].start < first)
				first = g->launched[j].start;
		if (first == INT64_MAX || s->end[k - 1] >= first)
			continue;
		if (g->sampled && !ivs_inside(&g->windows, s->start[k - 1], first))
			continue;
		g->load_steps++;
		g->load_cycle_ns += s->end[k] - s->end[k - 1];
		one.n = 0;
		idle.n = 0;
		err = ivs_add(&one, s->end[k - 1], first);
		if (!err)
			err = ivs_minus(&one, &g->all_busy, &idle);
		for (size_t i = 0; !err && i < idle.n; i++) {
			err = ivs_add(&g->bidle, idle.v[i].a, idle.v[i].b);
			if (!err && !(g->bidle_step = realloc(g->bidle_step,
							      g->bidle.cap * sizeof(size_t))))
				err = -ENOMEM;
			if (!err)
				g->bidle_step[g->bidle.n - 1] = k;
		}
	}
	ivs_free(&one);
	ivs_free(&idle);
	if (!err && g->bidle.n && !(g->bidle_cuda = calloc(g->bidle.n, sizeof(int64_t))))
		err = -ENOMEM;
	return err;
}

/* ---- the pass over the CUDA calls ------------------------------------------------- */

struct cuda_pass {
	struct gproc *g;
	size_t span_from, bidle_from, step_from, call_from;
};

static int is_memset_fn(const struct model_fn *fn)
{
	return fn && fn->name && strncmp(fn->name, "cudaMemset", 10) == 0;
}

/* A call that may have waited for the GPU: a synchronizing call, or a
 * copy touching host memory, or a memset, that lasted
 * SHM_BLOCKED_STACK_NS or more. */
static int blocking(const struct model_cuda_call *c)
{
	unsigned fl = c->fn ? c->fn->flags : 0;
	int host = c->copy_kind == 0 || c->copy_kind == 1 || c->copy_kind == 2 ||
		   c->copy_kind == 4;

	if (c->ret != 0)
		return 0;
	if (fl & SHM_FNF_SYNC)
		return 1;
	return (((fl & SHM_FNF_COPY) && host) || is_memset_fn(c->fn)) &&
	       c->end_ns - c->start_ns >= SHM_BLOCKED_STACK_NS;
}

static int site_add(struct map *m, int64_t proc, int64_t stack, int64_t pystack, double ns)
{
	struct map_key k = { proc, stack, pystack };
	struct site_item *it = map_get(m, &k);

	if (!it)
		return -ENOMEM;
	it->n++;
	it->ns += ns;
	return 0;
}

static int cuda_cb(void *ctx, const struct model_cuda_call *c)
{
	struct cuda_pass *cp = ctx;
	struct gproc *g = cp->g;
	int64_t a = c->start_ns, b = c->end_ns > c->start_ns ? c->end_ns : c->start_ns;
	int err = 0;

	g->any_cuda = 1;
	if (c->ret != 0 && findings_device_alloc_fn(c->fn))
		g->f->failed_allocs++;
	if (c->fn) {
		int64_t in = ivs_overlap_one(&g->win, &cp->call_from, a, b);
		struct map_key k = { c->fn->fn_id, 0, 0 };
		struct fn_item *fi;

		if (in > 0) {
			if (!(fi = map_get(&g->call_fns, &k)))
				return -ENOMEM;
			fi->name = c->fn->name;
			fi->n++;
			fi->ns += in;
		}
	}
	/* a wait after which the GPU got no more work (the program's last
	 * synchronize) delayed nothing */
	if (blocking(c) && b < g->last_start) {
		int64_t in = ivs_overlap_one(&g->win, &cp->span_from, a, b);

		if (in > 0) {
			struct map_key k = { g->p->proc_id, c->fn ? c->fn->fn_id : -1, 0 };
			struct fn_item *fi = map_get(&g->block_fns, &k);

			if (!fi)
				return -ENOMEM;
			fi->name = c->fn ? c->fn->name : "?";
			fi->n++;
			fi->ns += in;
			g->blocked_ns += in;
			g->blocked_calls++;
			if (c->stack_id >= 0 || c->pystack_id >= 0)
				g->blocked_sited++;
			err = site_add(&g->block_sites, g->p->proc_id, c->stack_id, c->pystack_id,
				       (double)in);
			if (!err && g->step_blocked && c->tid == g->step_tid) {
				const struct model_steps *s = g->steps;

				while (cp->step_from < s->n && s->end[cp->step_from] <= a)
					cp->step_from++;
				for (size_t k2 = cp->step_from; k2 < s->n && s->start[k2] < b; k2++) {
					int64_t lo = s->start[k2] > a ? s->start[k2] : a;
					int64_t hi = s->end[k2] < b ? s->end[k2] : b;

					if (hi > lo)
						g->step_blocked[k2] += hi - lo;
				}
			}
		}
	}
	if (!err && c->ret == 0 && c->fn && c->fn->name && !strcmp(c->fn->name, "cudaMemcpy") &&
	    c->copy_kind != 3) {
		g->sync_copies++;
		g->sync_copy_ns += b - a;
		err = site_add(&g->sync_copy_sites, g->p->proc_id, c->stack_id, c->pystack_id,
			       (double)(b - a));
	}
	for (size_t i = 0; !err && i < g->nwatches; i++) {
		struct watch *w = &g->watches[i];
		int64_t lo = w->a > a ? w->a : a, hi = w->b < b ? w->b : b;
		struct thr_act *t;

		if (hi <= lo || !(t = watch_thread(w, c->tid)))
			continue;
		t->cuda_ns += hi - lo;
		for (int k = 0; k < WATCH_FNS; k++) {
			if (!t->fn[k].fn || (c->fn && t->fn[k].fn == c->fn->name)) {
				t->fn[k].fn = c->fn ? c->fn->name : "?";
				t->fn[k].ns += hi - lo;
				break;
			}
		}
	}
	if (!err && g->bidle.n && c->tid == g->step_tid) {
		while (cp->bidle_from < g->bidle.n && g->bidle.v[cp->bidle_from].b <= a)
			cp->bidle_from++;
		for (size_t i = cp->bidle_from; i < g->bidle.n && g->bidle.v[i].a < b; i++) {
			int64_t lo = g->bidle.v[i].a > a ? g->bidle.v[i].a : a;
			int64_t hi = g->bidle.v[i].b < b ? g->bidle.v[i].b : b;

			if (hi > lo)
				g->bidle_cuda[i] += hi - lo;
		}
	}
	return err;
}

/* ---- threads' CPU time --------------------------------------------------------------- */

struct cpu_series {
	int64_t tid;
	int64_t *ts, *cpu, *wait; /* wait -1: unknown */
	size_t n, cap, cap2, cap3;
};

struct cpu_load {
	struct cpu_series *v;
	size_t n, cap;
};

static int cpu_cb(void *ctx, const struct model_cpu *c)
{
	struct cpu_load *l = ctx;
	struct cpu_series *s;

	if (!l->n || l->v[l->n - 1].tid != c->tid) {
		if (array_grow(&l->v, &l->cap, l->n, sizeof(*l->v)) < 0)
			return -ENOMEM;
		memset(&l->v[l->n], 0, sizeof(l->v[0]));
		l->v[l->n++].tid = c->tid;
	}
	s = &l->v[l->n - 1];
	if (array_grow(&s->ts, &s->cap, s->n, sizeof(*s->ts)) < 0 ||
	    array_grow(&s->cpu, &s->cap2, s->n, sizeof(*s->cpu)) < 0 ||
	    array_grow(&s->wait, &s->cap3, s->n, sizeof(*s->wait)) < 0)
		return -ENOMEM;
	s->ts[s->n] = c->ts_ns;
	s->wait[s->n] = c->wait_ns;
	s->cpu[s->n++] = c->cpu_ns;
	return 0;
}

static void cpu_load_free(struct cpu_load *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].ts);
		free(l->v[i].cpu);
		free(l->v[i].wait);
	}
	free(l->v);
	memset(l, 0, sizeof(*l));
}

/* The thread's CPU time (or with wait, its wait for a CPU) at t: a rise
 * between two readings happened in the period before the later one; -1
 * before its first reading or when unknown. */
static double series_at(const struct cpu_series *s, int64_t t, int wait)
{
	const int64_t *v = wait ? s->wait : s->cpu;
	size_t lo = 0, hi = s->n;
	int64_t rise;

	if (!s->n || t < s->ts[0])
		return -1;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->ts[mid] <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* s->ts[lo - 1] <= t < s->ts[lo] */
	if (lo >= s->n)
		return (double)v[s->n - 1];
	if (v[lo] < 0 || v[lo - 1] < 0)
		return -1;
	rise = s->ts[lo] - SHM_CPUTIME_PERIOD_NS;
	if (t <= rise)
		return (double)v[lo - 1];
	return (double)v[lo - 1] + (double)(v[lo] - v[lo - 1]) * (double)(t - rise) /
					   (double)SHM_CPUTIME_PERIOD_NS;
}

static double cpu_at(const struct cpu_series *s, int64_t t)
{
	return series_at(s, t, 0);
}

static int cpu_watches(struct gproc *g, int *have)
{
	struct model_scan w = model_scan_proc(g->p, 0);
	struct cpu_load l = { 0 };
	int err = model_cpu_each(g->m, &w, cpu_cb, &l);

	*have = l.n > 0;
	for (size_t i = 0; !err && i < g->nwatches; i++) {
		struct watch *wt = &g->watches[i];

		for (size_t k = 0; k < l.n; k++) {
			/* the part of the interval after the thread's first reading */
			int64_t from = wt->a > l.v[k].ts[0] ? wt->a : l.v[k].ts[0];
			double a, b, wa, wb;
			struct thr_act *t;

			if (from >= wt->b)
				continue;
			a = cpu_at(&l.v[k], from);
			b = cpu_at(&l.v[k], wt->b);
			wa = series_at(&l.v[k], from, 1);
			wb = series_at(&l.v[k], wt->b, 1);
			if (a < 0 || b < 0 || !(t = watch_thread(wt, l.v[k].tid)))
				continue;
			t->cpu_ns = (int64_t)(b - a);
			t->wait_ns = wa >= 0 && wb >= 0 ? (int64_t)(wb - wa) : 0;
			t->known_ns = wt->b - from;
			t->cpu_known = 1;
		}

	}
	cpu_load_free(&l);
	return err;
}

/* A process's time on a CPU and waiting for one over its life, from its
 * threads' last readings; -1 when there is none (*wait: unknown).  *last:
 * when the last of them was read.  Its CPU time at its exit, where the
 * process said it (model_proc.exit_cpu_ns), is its time on a CPU to its
 * end (*last: its end), ended threads' too; waiting stays the threads'
 * (no exit reading has it). */
static int proc_cpu(struct model *m, const struct model_proc *p, double *cpu, double *wait,
		    int64_t *last)
{
	struct model_scan w = model_scan_proc(p, 0);
	struct cpu_load l = { 0 };
	int err = model_cpu_each(m, &w, cpu_cb, &l);

	*cpu = *wait = l.n ? 0 : -1;
	*last = p->start_ns;
	for (size_t i = 0; i < l.n; i++) {
		if (l.v[i].ts[l.v[i].n - 1] > *last)
			*last = l.v[i].ts[l.v[i].n - 1];
		*cpu += (double)l.v[i].cpu[l.v[i].n - 1];
		if (l.v[i].wait[l.v[i].n - 1] < 0)
			*wait = -1;
		else if (*wait >= 0)
			*wait += (double)l.v[i].wait[l.v[i].n - 1];
	}
	if (p->exit_cpu_ns >= 0) {
		/* (a reading of /proc after the BYE may be later still) */
		*cpu = fmax(*cpu, (double)p->exit_cpu_ns);
		if (p->end_ns > *last)
			*last = p->end_ns;
	}
	cpu_load_free(&l);
	return err;
}

/* "thread T on CPU 97%, in cudaStreamSynchronize 2%; ..." for w. */
static void watch_words(const struct watch *w, int have_cpu, char *buf, size_t len)
{
	double d = (double)(w->b - w->a);
	size_t n = 0, shown = 0;
	size_t order[WATCH_THREADS];

	buf[0] = 0;
	for (size_t i = 0; i < w->nt; i++)
		order[i] = i;
	/* busiest first */
	for (size_t i = 0; i < w->nt; i++)
		for (size_t j = i + 1; j < w->nt; j++) {
			const struct thr_act *a = &w->t[order[i]], *b = &w->t[order[j]];

			if (b->cpu_ns + b->cuda_ns > a->cpu_ns + a->cuda_ns) {
				size_t t = order[i];

				order[i] = order[j];
				order[j] = t;
			}
		}
	for (size_t i = 0; i < w->nt && shown < 3 && n < len; i++) {
		const struct thr_act *t = &w->t[order[i]];
		int k;

		double kd = t->known_ns > 0 ? (double)t->known_ns : d;

		if ((double)(t->cpu_ns + t->wait_ns) < 0.05 * kd && (double)t->cuda_ns < 0.05 * d)
			continue;
		n += (size_t)snprintf(buf + n, len - n, "%sthread %lld", shown ? "; " : "",
				      (long long)t->tid);
		/* (readings land up to a period late: a share can pass 100%) */
		if (t->cpu_known && n < len)
			n += (size_t)snprintf(buf + n, len - n, " on CPU %.0f%%",
					      fmin(100.0, 100.0 * (double)t->cpu_ns / kd));
		if (t->cpu_known && (double)t->wait_ns >= 0.05 * kd && n < len)
			n += (size_t)snprintf(buf + n, len - n, ", waiting for a CPU %.0f%%",
					      fmin(100.0, 100.0 * (double)t->wait_ns / kd));
		for (k = 0; k < WATCH_FNS && t->fn[k].fn && n < len; k++)
			if ((double)t->fn[k].ns >= 0.02 * d)
				n += (size_t)snprintf(buf + n, len - n, ", in %s %.0f%%", t->fn[k].fn,
						      100.0 * (double)t->fn[k].ns / d);
		if (t->cuda_ns == 0 && n < len)
			n += (size_t)snprintf(buf + n, len - n, ", in no CUDA call");
		shown++;
	}
	if (!shown)
		snprintf(buf, len, "%s", have_cpu ? "no thread on a CPU or in a CUDA call"
					  : "no thread in a CUDA call (CPU use not recorded)");
}

/* ---- the rules ------------------------------------------------------------------------ */

static const char *dur(char *buf, double ns)
{
	return fmt_duration(buf, FMT_UNIT_MAX, ns);
}

/* What a finding on g's GPU timeline covers. */
static void gpu_coverage(struct gproc *g, struct finding *x)
{
	const struct model_proc *p = g->p;

	if (g->sampled)
		finding_coverage(x, "GPU activity was recorded in %lld sampling windows (%.1f%% of"
				 " the run; SHIMMER_GPU=all records all of it): the GPU figures are"
				 " those inside the windows.", (long long)p->sampling->windows,
				 100.0 * p->sampling->share);
	else
		finding_coverage(x, "Every GPU operation and CUDA call was recorded.");
	if (p->dropped_gpu)
		finding_coverage(x, "CUPTI lost %lld records.", (long long)p->dropped_gpu);
	if (p->dropped_host)
		finding_coverage(x, "%lld host events were lost (the rings were full).",
				 (long long)p->dropped_host);
	if (p->cut)
		finding_coverage(x, "The collector was lost while the process ran: what came"
				 " after its last commit was never stored.");
}

static const struct emit_col site_cols[] = {
	{ "ns", "TIME", EMIT_NS, 10, 0, 0, 0 },
	{ "calls", "CALLS", EMIT_INT, 7, 0, 0, 0 },
	{ "share", "SHARE", EMIT_SHARE, 6, 0, 0, 0 },
	{ "site", "CALL SITE", EMIT_STR, -1, 0, 0, 2 },
};

static const struct emit_table site_table = { "items", site_cols, 4, 4, 0 };

struct site_ref {
	const struct site_item *it;
};

static int cmp_site(const void *x, const void *y)
{
	const struct site_item *a = *(struct site_item *const *)x, *b = *(struct site_item *const *)y;

	if (a->ns != b->ns)
		return a->ns > b->ns ? -1 : 1;
	return (a->n < b->n) - (a->n > b->n);
}

/* The top sites of m as the finding's table (at most max rows), share of
 * total; the first site's rendering into first (if not NULL). */
static int site_rows(struct gproc *g, struct finding *x, struct map *m, double total,
		     size_t max, char *first, size_t flen)
{
	struct site_item **v = malloc((m->n + 1) * sizeof(*v));
	int err = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < m->n; i++)
		v[i] = map_item(m, i);
	array_sort(v, m->n, sizeof(*v), cmp_site);
	finding_table(x, &site_table);
	/* stacks that render as one site are one row */
	struct strtab names = { 0 };
	struct { double ns; int64_t n; const char *first; } *by = calloc(m->n + 1, sizeof(*by));
	size_t shown = 0;

	if (!by) {
		free(v);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->n && !err; i++) {
		const char *nat = NULL, *py = NULL;
		char site[512];
		int64_t k;

		err = model_stack_site(g->m, g->p->proc_id, v[i]->key.a, v[i]->key.b, &nat, &py);
		if (err == -EINVAL) {
			err = 0; /* a store without stacks: rows without sites */
			nat = py = NULL;
		}
		if (err)
			break;
		findings_site(nat, py, site, sizeof(site));
		err = strtab_index(&names, site, &k);
		if (err)
			break;
		by[k].ns += v[i]->ns;
		by[k].n += v[i]->n;
		if (!by[k].first)
			by[k].first = py ? py : nat;
	}
	while (!err && shown < max) {
		size_t best = SIZE_MAX;

		for (size_t k = 0; k < names.n; k++)
			if (by[k].n >= 0 && (best == SIZE_MAX || by[k].ns > by[best].ns))
				best = k;
		if (best == SIZE_MAX)
			break;
		if (shown == 0 && first)
			snprintf(first, flen, "%s", by[best].first ? by[best].first : "");
		finding_row(x, (struct emit_val[]){ ev_real(by[best].ns), ev_int(by[best].n),
						    ev_real(total > 0 ? by[best].ns / total : 0),
						    ev_str(names.v[best]) });
		by[best].n = -1;
		shown++;
	}
	free(by);
	strtab_free(&names);
	free(v);
	return err;
}

static int rule_sync(struct gproc *g)
{
	int64_t busy = ivs_overlap(&g->all_busy, &g->all_span), span = ivs_len(&g->win);
	const struct model_steps *s = g->steps;
	char b[4][FMT_UNIT_MAX], fns[512] = "", top[512] = "";
	struct finding *x;
	double share;
	size_t nfn = 0, with = 0;
	int64_t stepsum = 0, blocksum = 0;

	if (g->blocked_ns <= 0 || busy <= 0)
		return 0;
	share = (double)g->blocked_ns / (double)busy;
	if (share < FINDINGS_SYNC_SHARE ||
	    (double)g->blocked_ns < FINDINGS_SYNC_MIN_WALL * (double)span)
		return 0;
	x = finding_new(g->f, "sync", g->p, share > 1 ? 1 : share,
			"the CPU waited for the GPU %.0f%% as long as the GPU worked", 100 * share);
	if (!x)
		return -ENOMEM;
	for (size_t i = 0; i < g->block_fns.n && nfn < sizeof(fns) - 80; i++) {
		const struct fn_item *fi = map_item(&g->block_fns, i);

		nfn += (size_t)snprintf(fns + nfn, sizeof(fns) - nfn, "%s%s %s in %lld",
					i ? ", " : "", fi->name, dur(b[0], (double)fi->ns),
					(long long)fi->n);
	}
	finding_detail(x, "Threads were blocked in CUDA calls that wait for the GPU for %s in %lld"
		       " calls (%s), against %s of GPU work.", dur(b[0], (double)g->blocked_ns),
		       (long long)g->blocked_calls, fns, dur(b[1], (double)busy));
	if (s->n >= 2 && g->step_blocked) {
		size_t n = s->n - 1; /* after the first, as the rest */

		for (size_t k = 1; k < s->n; k++) {
			with += g->step_blocked[k] > 0;
			blocksum += g->step_blocked[k];
			stepsum += s->end[k] - s->start[k];
		}
		if (with)
			finding_detail(x, "%zu of %zu '%s' steps (after the first) blocked, %s a step on"
				       " average (%.0f%% of the step).", with, n, s->name,
				       dur(b[2], (double)blocksum / (double)n),
				       stepsum ? 100.0 * (double)blocksum / (double)stepsum : 0.0);
		finding_kv(x, "steps", EMIT_INT, ev_int((int64_t)n));
		finding_kv(x, "steps_blocked", EMIT_INT, ev_int((int64_t)with));
		finding_kv(x, "blocked_per_step_ns", EMIT_NS, ev_real((double)blocksum / (double)n));
	}
	finding_kv(x, "blocked_ns", EMIT_NS, ev_int(g->blocked_ns));
	finding_kv(x, "blocked_calls", EMIT_INT, ev_int(g->blocked_calls));
	finding_kv(x, "gpu_busy_ns", EMIT_NS, ev_int(busy));
	if (site_rows(g, x, &g->block_sites, (double)g->blocked_ns, 5, top, sizeof(top)) < 0)
		return -ENOMEM;
	if (top[0])
		finding_detail(x, "Most of it at %s.", top);
	finding_kv(x, "top_site", EMIT_STR, ev_str(top[0] ? top : NULL));
	gpu_coverage(g, x);
	finding_coverage(x, "Call sites are recorded for calls that blocked %d us or more: %lld of"
			 " the %lld blocked calls.", SHM_BLOCKED_STACK_NS / 1000,
			 (long long)g->blocked_sited, (long long)g->blocked_calls);
	finding_advice(x, "Take the synchronization out of the loop: keep values on the GPU (sum"
		       " the loss in a tensor and call .item() every N steps, not every step),"
		       " avoid .cpu(), .numpy(), print() or Python conditions on CUDA tensors"
		       " inside the step, copy results with .to('cpu', non_blocking=True) into"
		       " pinned memory, and call torch.cuda.synchronize() only where you time.");
	return 0;
}

static const struct emit_col idle_cols[] = {
	{ "what", "WHAT", EMIT_STR, -12, 0, 0, 0 },
	{ "at_s", "AT (S)", EMIT_REAL, 8, 0, 3, 0 },
	{ "ns", "LENGTH", EMIT_NS, 10, 0, 0, 0 },
	{ "gpu_busy", "GPU BUSY", EMIT_SHARE, 8, 0, 0, 0 },
	{ "cpu", "THE CPU MEANWHILE", EMIT_STR, -1, 0, 0, 2 },
};

static const struct emit_table idle_table = { "items", idle_cols, 5, 4, 0 };

static int rule_idle(struct gproc *g, struct dev *d, int have_cpu)
{
	const struct model_proc *p = g->p;
	int64_t idle = d->span_ns - d->busy_ns, split = d->hw_ns + d->kw_ns + d->other_ns;
	double share = d->span_ns ? (double)idle / (double)d->span_ns : 0;
	char b[4][FMT_UNIT_MAX], words[512];
	struct finding *x;

	if (d->span_ns <= 0 || (share < FINDINGS_IDLE_SHARE && d->ngaps == 0))
		return 0;
	x = finding_new(g->f, "gpu_idle", p, share, "cuda:%lld idle %.0f%% of the time it was in use",
			(long long)d->device, 100 * share);
	if (!x)
		return -ENOMEM;
	x->device = d->device;
	finding_detail(x, "cuda:%lld ran no kernel, copy or memset for %s of %s (from its first"
		       " operation to its last%s).", (long long)d->device, dur(b[0], (double)idle),
		       dur(b[1], (double)d->span_ns), g->sampled ? ", inside the windows" : "");
	if (split > 0)
		finding_detail(x, "On its streams the idle time before each operation was host wait"
			       " %.0f%% (its launch call began after the previous one ended: the"
			       " CPU was late), kernel wait %.0f%% (gaps under %d us between"
			       " back-to-back operations), other %.0f%% (dependencies, events).",
			       100.0 * (double)d->hw_ns / (double)split,
			       100.0 * (double)d->kw_ns / (double)split,
			       FINDINGS_KERNEL_WAIT_NS / 1000, 100.0 * (double)d->other_ns / (double)split);
	if (!g->sampled) {
		finding_detail(x, "%d of %d equal time chunks were under %.0f%% busy;", d->nlow,
			       FINDINGS_UTIL_CHUNKS, 100 * FINDINGS_UTIL_LOW);
		finding_detail(x, "%lld gaps of %d ms or more (%s).", (long long)d->ngaps,
			       FINDINGS_GAP_NS / 1000000, dur(b[2], (double)d->gaps_ns));
	}
	finding_kv(x, "idle_ns", EMIT_NS, ev_int(idle));
	finding_kv(x, "span_ns", EMIT_NS, ev_int(d->span_ns));
	finding_kv(x, "host_wait_ns", EMIT_NS, ev_int(d->hw_ns));
	finding_kv(x, "kernel_wait_ns", EMIT_NS, ev_int(d->kw_ns));
	finding_kv(x, "other_wait_ns", EMIT_NS, ev_int(d->other_ns));
	finding_kv(x, "low_chunks", EMIT_INT, g->sampled ? ev_none() : ev_int(d->nlow));
	finding_kv(x, "gaps", EMIT_INT, g->sampled ? ev_none() : ev_int(d->ngaps));
	finding_table(x, &idle_table);
	/* per stream (the 4 with the most idle time) */
	for (size_t shown = 0; shown < 4; shown++) {
		struct stream_idle *best = NULL;
		char what[32];
		int64_t t;

		for (size_t k = 0; k < d->nstreams; k++) {
			struct stream_idle *si = &d->streams[k];

			t = si->hw_ns + si->kw_ns + si->other_ns;
			if (t > 0 && (!best || t > best->hw_ns + best->kw_ns + best->other_ns))
				best = si;
		}
		if (!best)
			break;
		t = best->hw_ns + best->kw_ns + best->other_ns;
		snprintf(what, sizeof(what), "stream %d", best->stream);
		snprintf(words, sizeof(words), "idle before its work: host wait %.0f%%, kernel wait"
			 " %.0f%%, other %.0f%%", 100.0 * (double)best->hw_ns / (double)t,
			 100.0 * (double)best->kw_ns / (double)t, 100.0 * (double)best->other_ns / (double)t);
		finding_row(x, (struct emit_val[]){ ev_str(what), ev_none(), ev_int(t), ev_none(),
						    ev_str(words) });
		best->hw_ns = -best->hw_ns - 1; /* taken */
	}
	for (size_t k = 0; k < d->nstreams; k++)
		if (d->streams[k].hw_ns < 0)
			d->streams[k].hw_ns = -d->streams[k].hw_ns - 1;
	for (size_t k = 0; k < d->ngap_w; k++) {
		const struct watch *w = &g->watches[d->gap_w[k]];

		watch_words(w, have_cpu, words, sizeof(words));
		finding_row(x, (struct emit_val[]){ ev_str("gap"),
						    ev_real((double)(w->a - p->start_ns) / 1e9),
						    ev_int(w->b - w->a), ev_real(0), ev_str(words) });
	}
	for (size_t k = 0; k < d->nlow_w; k++) {
		const struct watch *w = &g->watches[d->low[k].w];

		watch_words(w, have_cpu, words, sizeof(words));
		finding_row(x, (struct emit_val[]){ ev_str("low use"),
						    ev_real((double)(w->a - p->start_ns) / 1e9),
						    ev_int(w->b - w->a), ev_real(d->low[k].util),
						    ev_str(words) });
	}
	gpu_coverage(g, x);
	if (g->sampled)
		finding_coverage(x, "Low-use chunks and long gaps need the whole timeline: not"
				 " judged under sampling.");
	if (!have_cpu)
		finding_coverage(x, "No CPU time readings: what the threads did is told by their"
				 " CUDA calls only.");
	if (d->hw_ns >= d->kw_ns && d->hw_ns >= d->other_ns && mostly_graphs(g))
		finding_advice(x, "The GPU mostly waited for the CPU to give it work, although its"
			       " kernels already come from CUDA graphs: see the synchronization and"
			       " data-loading findings; move CPU work out of the step (between two"
			       " graph replays), capture more of the step in one graph, and give"
			       " each kernel more work (a larger batch).");
	else if (d->hw_ns >= d->kw_ns && d->hw_ns >= d->other_ns)
		finding_advice(x, "The GPU mostly waited for the CPU to give it work: see the"
			       " launch-bound, synchronization and data-loading findings; capture"
			       " the step in a CUDA graph or use torch.compile, give each kernel more"
			       " work (a larger batch), and move CPU work out of the step.");
	else if (d->kw_ns >= d->other_ns && mostly_graphs(g))
		finding_advice(x, "The GPU mostly waited between back-to-back kernels of its CUDA"
			       " graphs: fewer, fused kernels (torch.compile) leave fewer such gaps.");
	else if (d->kw_ns >= d->other_ns)
		finding_advice(x, "The GPU mostly waited between back-to-back kernels: that launch"
			       " overhead goes with CUDA graphs (torch.cuda.CUDAGraph,"
			       " torch.compile(mode=\"reduce-overhead\")) or fewer, fused kernels.");
	else
		finding_advice(x, "The GPU mostly waited although the work had been launched:"
			       " streams waiting on events or on one another, or work launched on"
			       " another device; check cudaStreamWaitEvent and cross-stream"
			       " dependencies, and what the CPU did in the gaps listed.");
	return 0;
}

static int cmp_i64(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;

	return (a > b) - (a < b);
}

/* The element of rank k in v[0, n), reordering v so that the smaller ones
 * come before v[k] and the larger after (Wirth's selection): linear on
 * average, where a sort is n log n. */
static int64_t select_k(int64_t *v, size_t n, size_t k)
{
	ptrdiff_t l = 0, r = (ptrdiff_t)n - 1, kk = (ptrdiff_t)k;

	while (l < r) {
		int64_t x = v[kk];
		ptrdiff_t i = l, j = r;

		do {
			while (v[i] < x)
				i++;
			while (x < v[j])
				j--;
			if (i <= j) {
				int64_t t = v[i];

				v[i++] = v[j];
				v[j--] = t;
			}
		} while (i <= j);
		if (j < kk)
			l = i;
		if (kk < i)
			r = j;
	}
	return v[kk];
}

/* The q-quantile of v[0, n) (the element of rank (n - 1) q), reordering v. */
static double pct(int64_t *v, size_t n, double q)
{
	return n ? (double)select_k(v, n, (size_t)((double)(n - 1) * q)) : 0;
}

static const struct emit_col launch_cols[] = {
	{ "kernel", "KERNEL", EMIT_STR, -28, 0, 0, 0 },
	{ "count", "SHORT", EMIT_INT, 8, 0, 0, 0 },
	{ "median_ns", "MEDIAN", EMIT_NS, 10, 0, 0, 0 },
	{ "site", "LAUNCHED FROM", EMIT_STR, -1, 0, 0, 2 },
	{ "name", NULL, EMIT_STR, 0, EMIT_IN_JSON, 0, 0 },
};

static const struct emit_table launch_table = { "items", launch_cols, 5, 4, 0 };

struct kstat {
	int64_t name, n, short_n;
	int64_t *durs;
	size_t nd, cap;
	int64_t site_stack, site_py, site_n; /* most frequent launching site of short ones */
};

static int cmp_kstat(const void *x, const void *y)
{
	const struct kstat *a = x, *b = y;

	return (a->short_n < b->short_n) - (a->short_n > b->short_n);
}

/* What one launching call gave the GPU: a kernel launch one kernel, a
 * CUDA graph launch all the kernels of the graph (same correlation id). */
struct unit {
	int64_t gpu_ns;  /* its kernels' time, summed */
	int64_t first;   /* its first kernel's start */
	int64_t kernels; /* how many */
	int counted;     /* its call's time and delay taken */
};

static int rule_launch(struct gproc *g)
{
	int64_t known = 0, nshort = 0, span = 0, hw = 0, *kd = NULL, *ld = NULL;
	int64_t graph_kernels = 0, graph_launches = 0, *gk = NULL, *gt = NULL;
	size_t nk = 0, nl = 0, nks = 0, napis = 0;
	struct kstat *ks = NULL;
	struct unit *units = NULL;
	struct map sites = { .item_size = sizeof(struct site_item) };
	char b[8][FMT_UNIT_MAX], seqs[1024] = "";
	struct finding *x;
	double hw_share;
	int err = 0;

	for (size_t i = 0; i < g->ndevs; i++) {
		span += g->devs[i].span_ns;
		hw += g->devs[i].hw_ns;
	}
	hw_share = span ? (double)hw / (double)span : 0;
	for (size_t i = 0; i < g->nops; i++)
		if (g->ops[i].api > napis)
			napis = g->ops[i].api;
	kd = malloc((g->nops + 1) * sizeof(*kd));
	ld = malloc((g->nops + 1) * sizeof(*ld));
	gk = malloc((g->nops + 1) * sizeof(*gk));
	gt = malloc((g->nops + 1) * sizeof(*gt));
	ks = calloc(g->names.n + 1, sizeof(*ks));
	units = calloc(napis + 1, sizeof(*units));
	if (!kd || !ld || !gk || !gt || !ks || !units) {
		err = -ENOMEM;
		goto out;
	}
	/* Each launching call's kernels first: a graph launch's kernels are
	 * judged together against the one call, never each against it. */
	for (size_t i = 0; i < g->nops; i++) {
		const struct op *o = &g->ops[i];
		struct unit *u;

		if (o->kind != OP_KERNEL || !o->api)
			continue;
		u = &units[o->api - 1];
		if (!u->kernels || o->start < u->first)
			u->first = o->start;
		u->gpu_ns += o->end - o->start;
		u->kernels++;
	}
	for (size_t i = 0; i < g->nops; i++) {
		const struct op *o = &g->ops[i];
		const struct api_item *a = op_api(g, o);
		struct unit *u;
		struct kstat *k;

		if (o->kind != OP_KERNEL || !a)
			continue;
		u = &units[o->api - 1];
		known++;
		kd[nk++] = o->end - o->start;
		graph_kernels += (o->flags & OPF_GRAPH) != 0;
		/* the launch itself (its call, its delay) once, at its first kernel */
		if (!u->counted && o->start == u->first) {
			u->counted = 1;
			ld[nl++] = a->end - a->start;
			if (o->flags & OPF_GRAPH) {
				gk[graph_launches] = u->kernels;
				gt[graph_launches++] = u->gpu_ns;
			}
			if (array_grow(&g->delays, &g->delays_cap, g->ndelays,
				       sizeof(*g->delays)) < 0) {
				err = -ENOMEM;
				goto out;
			}
			g->delays[g->ndelays++] = o->start - a->end;
		}
		k = &ks[o->name];
		k->name = o->name;
		k->n++;
		if (u->gpu_ns < a->end - a->start) {
			struct map_key sk = { o->name, a->stack, a->pystack };
			struct site_item *si = map_get(&sites, &sk);

			nshort++;
			k->short_n++;
			if (!si || array_grow(&k->durs, &k->cap, k->nd, sizeof(*k->durs)) < 0) {
				err = -ENOMEM;
				goto out;
			}
			k->durs[k->nd++] = o->end - o->start;
			if (++si->n > k->site_n) {
				k->site_n = si->n;
				k->site_stack = a->stack;
				k->site_py = a->pystack;
			}
		}
	}
	if (known < FINDINGS_LAUNCH_MIN || (double)nshort < FINDINGS_LAUNCH_SHORT * (double)known ||
	    hw_share < FINDINGS_LAUNCH_HOSTWAIT)
		goto out;
	if (graph_kernels)
		x = finding_new(g->f, "launch_bound", g->p, hw_share,
				"%.0f%% of the kernels came from launches that gave the GPU less"
				" work than the launch call took; the GPU waited for launches %.0f%%"
				" of the time", 100.0 * (double)nshort / (double)known,
				100 * hw_share);
	else
		x = finding_new(g->f, "launch_bound", g->p, hw_share,
				"%.0f%% of the kernels ran shorter than their launch; the GPU waited"
				" for launches %.0f%% of the time",
				100.0 * (double)nshort / (double)known, 100 * hw_share);
	if (!x) {
		err = -ENOMEM;
		goto out;
	}
	if (graph_kernels)
		finding_detail(x, "%lld of %lld kernels came from a launch whose GPU work (the"
			       " kernel, or all the kernels of a CUDA graph launch) took less time"
			       " than the CPU call that launched it (median kernel %s, median launch"
			       " call %s); the GPU waited with nothing launched (host wait) %s,"
			       " %.0f%% of its time in use.", (long long)nshort, (long long)known,
			       dur(b[0], pct(kd, nk, 0.5)), dur(b[1], pct(ld, nl, 0.5)),
			       dur(b[2], (double)hw), 100 * hw_share);
	else
		finding_detail(x, "%lld of %lld kernels ran shorter than the CPU call that"
			       " launched them (median kernel %s, median launch call %s); the GPU"
			       " waited with nothing launched (host wait) %s, %.0f%% of its time in"
			       " use.", (long long)nshort, (long long)known,
			       dur(b[0], pct(kd, nk, 0.5)), dur(b[1], pct(ld, nl, 0.5)),
			       dur(b[2], (double)hw), 100 * hw_share);
	if (graph_launches)
		finding_detail(x, "%lld of the %lld kernels were launched by CUDA graphs: %lld graph"
			       " launches, a median of %.0f kernels and %s of kernel time each.",
			       (long long)graph_kernels, (long long)known, (long long)graph_launches,
			       pct(gk, (size_t)graph_launches, 0.5),
			       dur(b[6], pct(gt, (size_t)graph_launches, 0.5)));
	finding_detail(x, "Launch delay (GPU start minus launch call end): median %s, p99 %s;"
		       " %lld kernels started more than %d us after their launch on an idle"
		       " stream.", dur(b[3], pct(g->delays, g->ndelays, 0.5)),
		       dur(b[4], pct(g->delays, g->ndelays, 0.99)), (long long)g->delay_outliers,
		       FINDINGS_DELAY_OUTLIER_NS / 1000);
	/* fusion candidates: the most frequent kernel triples */
	{
		size_t n = 0;

		for (int r = 0; r < 3; r++) {
			struct seq_item *best = NULL;

			for (size_t i = 0; i < g->seqs.n; i++) {
				struct seq_item *q = map_item(&g->seqs, i);

				if (q->n > 0 && (!best || q->n > best->n))
					best = q;
			}
			if (!best || best->n < 2)
				break;
			{
				char s1[128], s2[128], s3[128];

				kname(g, (size_t)best->key.proc_id, s1, sizeof(s1));
				kname(g, (size_t)best->key.a, s2, sizeof(s2));
				kname(g, (size_t)best->key.b, s3, sizeof(s3));
				n += (size_t)snprintf(seqs + n, sizeof(seqs) - n, "%s%s > %s > %s (x%lld)",
						      r ? "; " : "", s1, s2, s3, (long long)best->n);
			}
			best->n = -best->n; /* taken */
		}
		for (size_t i = 0; i < g->seqs.n; i++) {
			struct seq_item *q = map_item(&g->seqs, i);

			if (q->n < 0)
				q->n = -q->n;
		}
		if (n)
			finding_detail(x, "Most frequent kernel sequences (fusion candidates): %s.",
				       seqs);
		finding_kv(x, "fusion_candidates", EMIT_STR, ev_str(n ? seqs : NULL));
	}
	finding_kv(x, "kernels", EMIT_INT, ev_int(known));
	finding_kv(x, "short_kernels", EMIT_INT, ev_int(nshort));
	finding_kv(x, "median_kernel_ns", EMIT_NS, ev_real(pct(kd, nk, 0.5)));
	finding_kv(x, "median_launch_ns", EMIT_NS, ev_real(pct(ld, nl, 0.5)));
	finding_kv(x, "host_wait_ns", EMIT_NS, ev_int(hw));
	finding_kv(x, "launch_delay_p50_ns", EMIT_NS, ev_real(pct(g->delays, g->ndelays, 0.5)));
	finding_kv(x, "launch_delay_p99_ns", EMIT_NS, ev_real(pct(g->delays, g->ndelays, 0.99)));
	finding_kv(x, "launch_delay_outliers", EMIT_INT, ev_int(g->delay_outliers));
	finding_kv(x, "graph_kernels", EMIT_INT, ev_int(graph_kernels));
	finding_kv(x, "graph_launches", EMIT_INT, ev_int(graph_launches));
	array_sort(ks, g->names.n, sizeof(*ks), cmp_kstat);
	finding_table(x, &launch_table);
	for (size_t i = 0; i < g->names.n && i < 5 && ks[i].short_n > 0 && !err; i++) {
		const char *nat = NULL, *py = NULL;
		char shortn[128], site[512];

		nks++;
		err = model_stack_site(g->m, g->p->proc_id, ks[i].site_stack, ks[i].site_py, &nat,
				       &py);
		if (err == -EINVAL)
			err = 0;
		findings_site(nat, py, site, sizeof(site));
		kname(g, (size_t)ks[i].name, shortn, sizeof(shortn));
		finding_row(x, (struct emit_val[]){ ev_str(shortn), ev_int(ks[i].short_n),
						    ev_real(pct(ks[i].durs, ks[i].nd, 0.5)),
						    ev_str(site), ev_str(g->names.v[ks[i].name]) });
	}
	gpu_coverage(g, x);
	if (mostly_graphs(g))
		finding_advice(x, "The kernels already come from CUDA graphs, but each graph launch"
			       " gives the GPU less work than the launch costs: capture more of the"
			       " step in one graph (the whole forward, backward and optimizer step;"
			       " torch.compile(mode=\"reduce-overhead\") over the whole model), replay"
			       " fewer, larger graphs, or give each kernel more work (a larger"
			       " batch).");
	else
		finding_advice(x, "Launch fewer, larger kernels: capture the step in a CUDA graph"
			       " (torch.cuda.CUDAGraph, torch.compile(mode=\"reduce-overhead\")), fuse"
			       " the frequent sequences (torch.compile; fused optimizers with"
			       " foreach=True or fused=True), or give each kernel more work (a larger"
			       " batch).");
out:
	for (size_t i = 0; ks && i < g->names.n; i++)
		free(ks[i].durs);
	free(ks);
	free(kd);
	free(ld);
	free(gk);
	free(gt);
	free(units);
	map_free(&sites);
	return err;
}

static const struct emit_col copy_cols[] = {
	{ "what", "WHAT", EMIT_STR, -10, 0, 0, 0 },
	{ "count", "COUNT", EMIT_INT, 8, 0, 0, 0 },
	{ "bytes", "BYTES", EMIT_BYTES, 10, 0, 0, 0 },
	{ "ns", "TIME", EMIT_NS, 10, 0, 0, 0 },
	{ "site", "CALL SITE", EMIT_STR, -1, 0, 0, 2 },
};

static const struct emit_table copy_table = { "items", copy_cols, 5, 4, 0 };

/* Pageable copies (flag OPF_PAGEABLE) or synchronous memsets (OPF_SYNCMEM). */
static int rule_copies(struct gproc *g, unsigned flag)
{
	const char *kind = flag == OPF_PAGEABLE ? "pageable_copy" : "sync_memset";
	double scale = g->sampled && g->p->sampling->scale > 0 ? g->p->sampling->scale : 1;
	int64_t n = 0, bytes = 0, ns = 0, span = ivs_len(&g->all_span), byd[3] = { 0 };
	struct map sites = { .item_size = sizeof(struct site_item) };
	struct site_item **top = NULL;
	char b[2][FMT_UNIT_MAX];
	struct finding *x;
	int err = 0;

	for (size_t i = 0; i < g->nops; i++) {
		const struct op *o = &g->ops[i];
		const struct api_item *a = op_api(g, o);

		if (!(o->flags & flag))
			continue;
		n++;
		bytes += o->bytes;
		ns += o->end - o->start;
		if (flag == OPF_PAGEABLE)
			byd[o->name]++;
		if ((err = site_add(&sites, o->name, a ? a->stack : -1, a ? a->pystack : -1,
				    (double)(o->end - o->start))) < 0)
			goto out;
	}
	if ((double)n * scale < FINDINGS_COPIES_MIN)
		goto out;
	x = finding_new(g->f, kind, g->p, span ? (double)ns / (double)span : 0,
			flag == OPF_PAGEABLE ? "%s%lld copies between the GPU and pageable memory" :
					       "%s%lld memsets of pinned or managed memory",
			scale > 1 ? "~" : "", (long long)llround((double)n * scale));
	if (!x) {
		err = -ENOMEM;
		goto out;
	}
	if (flag == OPF_PAGEABLE)
		finding_detail(x, "%lld copies (%lld HtoD, %lld DtoH) of %s moved pageable host"
			       " memory, %s on the GPU: the driver stages each through a pinned buffer"
			       " and the call waits for it (an asynchronous copy becomes synchronous).",
			       (long long)n, (long long)byd[DIR_HTOD], (long long)byd[DIR_DTOH],
			       fmt_bytes(b[0], sizeof(b[0]), (double)bytes), dur(b[1], (double)ns));
	else
		finding_detail(x, "%lld memsets of %s set pinned or managed memory, %s on the GPU;"
			       " such a memset is synchronous: the calling thread waits for it.",
			       (long long)n, fmt_bytes(b[0], sizeof(b[0]), (double)bytes),
			       dur(b[1], (double)ns));
	finding_kv(x, "count", EMIT_INT, ev_int(n));
	finding_kv(x, "estimated_count", EMIT_INT, ev_int(llround((double)n * scale)));
	finding_kv(x, "bytes", EMIT_BYTES, ev_int(bytes));
	finding_kv(x, "gpu_ns", EMIT_NS, ev_int(ns));
	finding_table(x, &copy_table);
	top = malloc((sites.n + 1) * sizeof(*top));
	if (!top) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < sites.n; i++)
		top[i] = map_item(&sites, i);
	array_sort(top, sites.n, sizeof(*top), cmp_site);
	for (size_t i = 0; i < sites.n && i < 5 && !err; i++) {
		const char *nat = NULL, *py = NULL;
		char site[512];

		err = model_stack_site(g->m, g->p->proc_id, top[i]->key.a, top[i]->key.b, &nat, &py);
		if (err == -EINVAL)
			err = 0;
		findings_site(nat, py, site, sizeof(site));
		finding_row(x, (struct emit_val[]){
				       ev_str(flag == OPF_PAGEABLE ? dir_name(top[i]->key.proc_id)
								   : "memset"),
				       ev_int(top[i]->n), ev_none(), ev_real(top[i]->ns), ev_str(site) });
	}
	gpu_coverage(g, x);
	if (scale > 1)
		finding_coverage(x, "The count for the whole run is estimated (x%.1f).", scale);
	if (flag == OPF_PAGEABLE)
		finding_advice(x, "Copy from and to pinned memory: DataLoader(pin_memory=True) with"
			       " tensor.to(device, non_blocking=True), staging buffers made with"
			       " torch.empty(..., pin_memory=True) or cudaMallocHost, then"
			       " cudaMemcpyAsync on a stream.");
	else
		finding_advice(x, "Set device memory instead (cudaMemsetAsync on a cudaMalloc'd"
			       " block), or fill pinned buffers on the CPU (memset) where the GPU need"
			       " not wait.");
out:
	free(top);
	map_free(&sites);
	return err;
}

/* Synchronous copies: cudaMemcpy (not Async) with host memory (Nsight's
 * cuda_memcpy_sync). */
static int rule_sync_copies(struct gproc *g)
{
	double wall = model_proc_wall(g->p);
	char b[2][FMT_UNIT_MAX];
	struct finding *x;

	if (g->sync_copies < FINDINGS_COPIES_MIN)
		return 0;
	x = finding_new(g->f, "sync_copy", g->p, wall > 0 ? (double)g->sync_copy_ns / wall : 0,
			"%lld synchronous copies (cudaMemcpy) with host memory",
			(long long)g->sync_copies);
	if (!x)
		return -ENOMEM;
	finding_detail(x, "%lld calls of cudaMemcpy moved data between host and device, %s in"
		       " the calls (%.1f%% of the process's %s): each waits for the device's earlier"
		       " work, then for its copy.", (long long)g->sync_copies,
		       dur(b[0], (double)g->sync_copy_ns),
		       wall > 0 ? 100.0 * (double)g->sync_copy_ns / wall : 0.0, dur(b[1], wall));
	finding_kv(x, "count", EMIT_INT, ev_int(g->sync_copies));
	finding_kv(x, "ns", EMIT_NS, ev_int(g->sync_copy_ns));
	if (site_rows(g, x, &g->sync_copy_sites, (double)g->sync_copy_ns, 5, NULL, 0) < 0)
		return -ENOMEM;
	finding_coverage(x, "Every CUDA call was recorded; call sites for the calls of %d us or"
			 " more.", SHM_BLOCKED_STACK_NS / 1000);
	finding_advice(x, "Use cudaMemcpyAsync from pinned memory on a stream (tensor.to(device,"
		       " non_blocking=True) with pinned tensors), and synchronize once, where the"
		       " result is needed.");
	return 0;
}

static const struct emit_col worker_cols[] = {
	{ "pid", "PID", EMIT_INT, 8, 0, 0, 0 },
	{ "busy", "BUSY", EMIT_SHARE, 6, 0, 0, 0 },
	{ "cpu_ns", "ON CPU", EMIT_NS, 10, 0, 0, 0 },
	{ "wait_ns", "WAITING", EMIT_NS, 10, 0, 0, 0 },
	{ "life_ns", "LIFE", EMIT_NS, 10, 0, 0, 0 },
	{ "what", "WHAT", EMIT_STR, -1, 0, 0, 2 },
};

static const struct emit_table worker_table = { "items", worker_cols, 6, 4, 0 };

/* DataLoader-like workers: p's children running its program. */
static int is_worker(const struct model_proc *p, const struct model_proc *c)
{
	return c->selected && p->exe && c->exe && !strcmp(p->exe, c->exe);
}

static int rule_loading(struct gproc *g)
{
	const struct model_proc *p = g->p;
	int64_t idle = ivs_len(&g->bidle), cuda = 0, wait;
	size_t nworkers = 0, nbusy = 0, nknown = 0, nshort = 0;
	int64_t short_pid = 0, short_ns = 0;
	char b[3][FMT_UNIT_MAX];
	struct finding *x;
	double share;
	int err = 0;

	if (!g->steps->n) {
		if (g->nops)
			findings_withhold(g->f, "data_loading", p, "no steps: mark each training step"
					  " with a range (torch.cuda.nvtx.range_push/pop, or"
					  " shimmer_range_push/pop) to have step boundaries judged");
		return 0;
	}
	if (!g->load_steps) {
		if (g->sampled)
			findings_withhold(g->f, "data_loading", p, "no step boundary fell inside a GPU"
					  " sampling window (SHIMMER_GPU=all records every one)");
		return 0;
	}
	for (size_t i = 0; i < g->bidle.n; i++)
		cuda += g->bidle_cuda[i];
	wait = idle - cuda;
	share = g->load_cycle_ns ? (double)wait / (double)g->load_cycle_ns : 0;
	if (share < FINDINGS_LOADING_SHARE)
		return 0;
	x = finding_new(g->f, "data_loading", p, share,
			"the GPU waited %.0f%% of the time at step boundaries while the step's thread"
			" ran outside CUDA", 100 * share);
	if (!x)
		return -ENOMEM;
	finding_detail(x, "Between the end of a '%s' step and the first GPU work of the next, no"
		       " device was busy while the steps' thread was outside any CUDA call for %s"
		       " over %zu steps, %s a step (%.0f%% of their time): the thread was getting the"
		       " next batch or doing other CPU work.", g->steps->name, dur(b[0], (double)wait),
		       g->load_steps, dur(b[1], (double)wait / (double)g->load_steps), 100 * share);
	finding_kv(x, "wait_ns", EMIT_NS, ev_int(wait));
	finding_kv(x, "steps", EMIT_INT, ev_int((int64_t)g->load_steps));
	finding_table(x, &worker_table);
	for (size_t i = 0; i < p->nchildren && !err; i++) {
		const struct model_proc *c = p->children[i];
		double cpu, cwait, life = model_proc_wall(c), busy;
		int64_t last;

		if (!is_worker(p, c))
			continue;
		nworkers++;
		err = proc_cpu(g->m, c, &cpu, &cwait, &last);
		if (err)
			break;
		/* its last reading well before its end: the collector read it
		 * every CPUTIME_PERIOD and missed the reading at its end (killed,
		 * and reaped by its parent first), and it said none at its exit:
		 * the rest is unknown */
		if (cpu >= 0 && c->end_ns - last > SHM_CPUTIME_PERIOD_NS / 10) {
			if (!nshort++)
				short_pid = c->pid, short_ns = c->end_ns - last;
		}
		/* busy: on a CPU, or runnable and waiting for one, until the
		 * last reading (a process gone is not read at its end) */
		busy = cpu >= 0 && last > c->start_ns ?
			       (cpu + (cwait > 0 ? cwait : 0)) / (double)(last - c->start_ns) : -1;
		if (busy > 1)
			busy = 1; /* its threads began before it said HELLO */
		if (busy >= 0) {
			nknown++;
			nbusy += busy >= 0.8;
		}
		finding_row(x, (struct emit_val[]){ ev_int(c->pid),
						    busy >= 0 ? ev_real(busy) : ev_none(),
						    cpu >= 0 ? ev_real(cpu) : ev_none(),
						    cwait >= 0 ? ev_real(cwait) : ev_none(), ev_real(life),
						    ev_str("worker (a child running the same program)") });
	}
	if (err)
		return err;
	finding_kv(x, "workers", EMIT_INT, ev_int((int64_t)nworkers));
	finding_kv(x, "workers_busy", EMIT_INT, ev_int((int64_t)nbusy));
	if (!nworkers)
		finding_detail(x, "No worker process: the steps' process loads its data itself.");
	else if (nknown)
		finding_detail(x, "%zu worker process%s (children running the same program, as"
			       " DataLoader workers are): %zu of %zu busy (on a CPU or waiting for"
			       " one) 80%% or more of their lives.", nworkers,
			       nworkers == 1 ? "" : "es", nbusy, nknown);
	else
		finding_detail(x, "%zu worker process%s; their CPU time was not recorded.", nworkers,
			       nworkers == 1 ? "" : "es");
	if (nshort)
		finding_detail(x, "ON CPU and WAITING of %zu worker%s stop at %s last reading, before"
			       " %s end (pid %lld: its last %s unread): %s ended between two readings"
			       " without saying its CPU time as it ended (killed; a process that exits"
			       " says it) and was gone before the reading at %s end.", nshort,
			       nshort == 1 ? "" : "s", nshort == 1 ? "its" : "their",
			       nshort == 1 ? "its" : "their", (long long)short_pid,
			       dur(b[2], (double)short_ns), nshort == 1 ? "it" : "each",
			       nshort == 1 ? "its" : "their");
	if (g->sampled)
		finding_coverage(x, "Only the %zu step boundaries inside GPU sampling windows were"
				 " judged (of %zu steps).", g->load_steps, g->steps->n);
	else
		finding_coverage(x, "Every step boundary was judged (%zu).", g->load_steps);
	if (!nworkers)
		finding_advice(x, "Load and prepare batches in worker processes while the GPU works:"
			       " DataLoader(num_workers=N, pin_memory=True, persistent_workers=True),"
			       " with N up to the CPU cores you can spare.");
	else if (nknown && 2 * nbusy >= nknown)
		finding_advice(x, "The workers are busy all the time: add workers (num_workers), or"
			       " make each sample cheaper (decode and augment on the GPU, cache"
			       " preprocessed data, a faster image library).");
	else
		finding_advice(x, "The workers are mostly idle: the wait is in the main process"
			       " (collating, the host-to-device copy, Python work between steps):"
			       " raise prefetch_factor, use pin_memory=True and non_blocking copies,"
			       " and move per-step Python work off the critical path.");
	return 0;
}

static int rule_comm(struct gproc *g, struct findings_proc *fp)
{
	char b[5][FMT_UNIT_MAX];
	struct finding *x;
	int64_t exposed = fp->comm_ns - fp->overlap_ns;
	double share = fp->span_ns ? (double)exposed / (double)fp->span_ns : 0;

	if (fp->comm_ns <= 0 || share < FINDINGS_COMM_EXPOSED)
		return 0;
	x = finding_new(g->f, "communication", g->p, share,
			"%.0f%% of the GPU's time was communication no computation overlapped",
			100 * share);
	if (!x)
		return -ENOMEM;
	finding_detail(x, "Of %s in use, NCCL kernels ran %s, compute kernels %s, copies and"
		       " memsets %s; computation overlapped %.0f%% of the communication, leaving %s"
		       " exposed.", dur(b[0], (double)fp->span_ns), dur(b[1], (double)fp->comm_ns),
		       dur(b[2], (double)fp->compute_ns), dur(b[3], (double)fp->mem_ns),
		       100.0 * (double)fp->overlap_ns / (double)fp->comm_ns,
		       dur(b[4], (double)exposed));
	finding_kv(x, "comm_ns", EMIT_NS, ev_int(fp->comm_ns));
	finding_kv(x, "compute_ns", EMIT_NS, ev_int(fp->compute_ns));
	finding_kv(x, "memory_ns", EMIT_NS, ev_int(fp->mem_ns));
	finding_kv(x, "overlap_ns", EMIT_NS, ev_int(fp->overlap_ns));
	finding_kv(x, "span_ns", EMIT_NS, ev_int(fp->span_ns));
	gpu_coverage(g, x);
	finding_advice(x, "Overlap communication with computation: with DDP let gradient buckets"
		       " all-reduce during the backward pass (tune bucket_cap_mb; avoid"
		       " find_unused_parameters and syncs inside backward), with FSDP turn on"
		       " backward and forward prefetch; accumulate gradients with no_sync() to"
		       " communicate less often.");
	return 0;
}

/* Hot API calls: a CUDA function over --threshold of the span, its calls
 * clipped to it (the first calls' set-up, before the span, is left out).
 * Calls that wait for the GPU are the synchronization and copy rules'. */
static int rule_hot_api(struct gproc *g)
{
	int64_t span = ivs_len(&g->win);

	for (size_t i = 0; i < g->call_fns.n && span > 0; i++) {
		const struct fn_item *fi = map_item(&g->call_fns, i);
		const struct model_fn *fn = model_fn(g->m, fi->key.proc_id);
		double share = (double)fi->ns / (double)span;
		char b[3][FMT_UNIT_MAX];
		struct finding *x;

		if (!fn || share <= g->f->o->threshold || (fn->flags & (SHM_FNF_SYNC | SHM_FNF_COPY)) ||
		    !strncmp(fn->name, "cudaMemset", 10))
			continue;
		x = finding_new(g->f, "hot_api", g->p, share, "%s took %.0f%% of the time", fn->name,
				100 * share);
		if (!x)
			return -ENOMEM;
		finding_set_severity(x, share > FINDINGS_HIGH ? SEV_MEDIUM : SEV_LOW);
		finding_detail(x, "%lld calls of %s took %s, a mean of %s, in the %s analysed%s.",
			       (long long)fi->n, fn->name, dur(b[0], (double)fi->ns),
			       dur(b[1], (double)fi->ns / (double)fi->n), dur(b[2], (double)span),
			       g->steps->n ? " (the steps after the first)" : "");
		finding_kv(x, "function", EMIT_STR, ev_str(fn->name));
		finding_kv(x, "calls", EMIT_INT, ev_int(fi->n));
		finding_kv(x, "total_ns", EMIT_NS, ev_int(fi->ns));
		gpu_coverage(g, x);
		if (!strncmp(fn->name, "cudaGraphLaunch", 15))
			finding_advice(x, "Launching graphs is the cost: replay fewer, larger CUDA"
				       " graphs (capture the whole step in one), or give each of"
				       " their kernels more work (a larger batch).");
		else if (fn->flags & SHM_FNF_LAUNCH)
			finding_advice(x, "Launching is the cost: launch fewer, larger kernels (CUDA"
				       " graphs, torch.compile, fused operations).");
		else if (fn->flags & (SHM_FNF_ALLOC | SHM_FNF_FREE))
			finding_advice(x, "Allocate device memory once and reuse it (a caching or pool"
				       " allocator: cudaMallocAsync with a memory pool, or PyTorch's"
				       " caching allocator) instead of every step.");
		else
			finding_advice(x, "Call %s less often: hoist it out of the loop or batch its"
				       " work into fewer calls.", fn->name);
	}
	return 0;
}

/* Hot kernels: a kernel name over --threshold of the process's kernel time
 * (findings_hot.c has the rest of the hot operations). */
static int rule_hot_kernels(struct gproc *g)
{
	struct { int64_t ns, n; } *by = calloc(g->names.n + 1, sizeof(*by));
	struct map sites = { .item_size = sizeof(struct site_item) };
	int64_t total = 0;
	size_t shown = 0;
	int err = 0;

	if (!by)
		return -ENOMEM;
	for (size_t i = 0; i < g->nops; i++)
		if (g->ops[i].kind == OP_KERNEL) {
			by[g->ops[i].name].ns += g->ops[i].end - g->ops[i].start;
			by[g->ops[i].name].n++;
			total += g->ops[i].end - g->ops[i].start;
		}
	while (total > 0 && shown < 5 && !err) {
		size_t best = SIZE_MAX;
		double share;
		struct finding *x;
		char shortn[128], b[3][FMT_UNIT_MAX];

		for (size_t k = 0; k < g->names.n; k++)
			if (by[k].n > 0 && (best == SIZE_MAX || by[k].ns > by[best].ns))
				best = k;
		if (best == SIZE_MAX)
			break;
		share = (double)by[best].ns / (double)total;
		if (share <= g->f->o->threshold)
			break;
		kname(g, best, shortn, sizeof(shortn));
		x = finding_new(g->f, "hot_kernel", g->p, share, "kernel %s took %.0f%% of the GPU's"
				" kernel time", shortn, 100 * share);
		if (!x) {
			err = -ENOMEM;
			break;
		}
		finding_set_severity(x, share > FINDINGS_HIGH ? SEV_MEDIUM : SEV_LOW);
		finding_detail(x, "%lld runs of %s took %s of %s kernel time, a mean of %s.",
			       (long long)by[best].n, shortn, dur(b[0], (double)by[best].ns),
			       dur(b[1], (double)total), dur(b[2], (double)by[best].ns /
							       (double)by[best].n));
		finding_kv(x, "kernel", EMIT_STR, ev_str(g->names.v[best]));
		finding_kv(x, "count", EMIT_INT, ev_int(by[best].n));
		finding_kv(x, "total_ns", EMIT_NS, ev_int(by[best].ns));
		/* where it was launched from */
		map_free(&sites);
		sites.item_size = sizeof(struct site_item);
		for (size_t i = 0; i < g->nops && !err; i++) {
			const struct op *o = &g->ops[i];
			const struct api_item *a = op_api(g, o);

			if (o->kind == OP_KERNEL && o->name == (int64_t)best)
				err = site_add(&sites, 0, a ? a->stack : -1, a ? a->pystack : -1,
					       (double)(o->end - o->start));
		}
		if (!err)
			err = site_rows(g, x, &sites, (double)by[best].ns, 3, NULL, 0);
		gpu_coverage(g, x);
		finding_advice(x, "This kernel is where the GPU's time goes: check that its work is"
			       " needed at this size, run it in lower precision where it is a matmul or"
			       " convolution (torch.autocast, TF32), and profile it alone (ncu"
			       " --kernel-name) to see whether memory or compute bounds it.");
		by[best].n = 0;
		shown++;
	}
	map_free(&sites);
	free(by);
	return err;
}

/* Kernel time by the line that launched it (fp->sites) and by kernel
 * (fp->kernels). */
static int launch_sites(struct gproc *g, struct findings_proc *fp)
{
	struct map by = { .item_size = sizeof(struct site_item) };
	double scale = g->sampled && g->p->sampling->scale > 0 ? g->p->sampling->scale : 1;
	struct strtab names = { 0 };
	double *ns = NULL;
	int err = 0;

	for (size_t i = 0; i < g->nops && !err; i++) {
		const struct op *o = &g->ops[i];
		const struct api_item *a = op_api(g, o);

		if (o->kind == OP_KERNEL)
			/* (-2, -2): the launch itself was not recorded */
			err = site_add(&by, 0, a ? a->stack : -2, a ? a->pystack : -2,
				       (double)(o->end - o->start) * scale);
	}
	if (!err && by.n && !(ns = calloc(by.n, sizeof(*ns))))
		err = -ENOMEM;
	for (size_t i = 0; i < by.n && !err; i++) {
		const struct site_item *it = map_item(&by, i);
		const char *nat = NULL, *py = NULL, *site;
		int64_t k;

		if (it->key.a >= -1 || it->key.b >= -1)
			err = model_stack_site(g->m, g->p->proc_id, it->key.a, it->key.b, &nat, &py);
		if (err == -EINVAL)
			err = 0;
		site = py ? py : nat ? nat : it->key.a == -2 ? "(launch call not recorded)" :
		       "(launched with no stack recorded)";
		if (!err && !(err = strtab_index(&names, site, &k)))
			ns[k] += it->ns;
	}
	/* and by kernel name */
	if (!err && g->names.n && !(fp->kernels = calloc(g->names.n, sizeof(*fp->kernels))))
		err = -ENOMEM;
	for (size_t k = 0; k < g->names.n && !err; k++) {
		fp->kernels[k].site = strdup(g->names.v[k]);
		fp->nkernels++;
		if (!fp->kernels[k].site)
			err = -ENOMEM;
	}
	for (size_t i = 0; i < g->nops && !err; i++)
		if (g->ops[i].kind == OP_KERNEL) {
			fp->kernels[g->ops[i].name].ns += (double)(g->ops[i].end - g->ops[i].start) * scale;
			fp->kernels[g->ops[i].name].count += scale;
			fp->kernel_count += scale;
		}
	if (!err && names.n && !(fp->sites = calloc(names.n, sizeof(*fp->sites))))
		err = -ENOMEM;
	for (size_t k = 0; k < names.n && !err; k++) {
		fp->sites[k].site = strdup(names.v[k]);
		fp->sites[k].ns = ns[k];
		fp->nsites++;
		if (!fp->sites[k].site)
			err = -ENOMEM;
	}
	free(ns);
	strtab_free(&names);
	map_free(&by);
	return err;
}

/* ---- one process ---------------------------------------------------------------------- */

static void gproc_free(struct gproc *g)
{
	free(g->ops);
	free(g->apis);
	strtab_free(&g->names);
	fmt_short_names_free(g->shown, g->nshown);
	map_free(&g->name_ptrs);
	for (size_t i = 0; i < g->ndevs; i++) {
		ivs_free(&g->devs[i].busy);
		ivs_free(&g->devs[i].span);
		ivs_free(&g->devs[i].comm);
		ivs_free(&g->devs[i].compute);
		ivs_free(&g->devs[i].mem);
		free(g->devs[i].streams);
	}
	free(g->devs);
	ivs_free(&g->windows);
	ivs_free(&g->all_busy);
	ivs_free(&g->all_span);
	ivs_free(&g->win);
	free(g->launched);
	free(g->watches);
	ivs_free(&g->bidle);
	free(g->bidle_step);
	free(g->bidle_cuda);
	free(g->step_blocked);
	map_free(&g->block_fns);
	map_free(&g->block_sites);
	map_free(&g->sync_copy_sites);
	free(g->delays);
	map_free(&g->seqs);
	map_free(&g->call_fns);
}

static int process(struct findings *f, const struct model_proc *p)
{
	struct gproc g = {
		.f = f, .m = f->m, .p = p,
		.names = { 0 },
		.block_fns = { .item_size = sizeof(struct fn_item) },
		.block_sites = { .item_size = sizeof(struct site_item) },
		.sync_copy_sites = { .item_size = sizeof(struct site_item) },
		.seqs = { .item_size = sizeof(struct seq_item) },
		.call_fns = { .item_size = sizeof(struct fn_item) },
		.name_ptrs = { .item_size = sizeof(struct name_ptr) },
	};
	struct model_scan w = model_scan_proc(p, 1);
	struct cuda_pass cp = { .g = &g };

	w.brief = 1;
	struct findings_proc *fp = NULL;
	int64_t recorded = 0;
	int err, have_cpu = 0;

	err = load(&g);
	if (err || (!g.nops && !p->gpu_status))
		goto out;
	if (g.nops) {
		err = devices(&g);
		for (size_t i = 0; !err && !g.sampled && i < g.ndevs; i++)
			if (g.devs[i].span.n)
				err = gaps_and_chunks(&g, &g.devs[i]);
		if (!err)
			err = boundaries(&g);
		if (!err && g.steps->n && !(g.step_blocked = calloc(g.steps->n, sizeof(int64_t))))
			err = -ENOMEM;
	}
	if (!err)
		err = model_cuda_calls_each(f->m, &w, cuda_cb, &cp);
	if (!err && g.nwatches)
		err = cpu_watches(&g, &have_cpu);
	if (err)
		goto out;
	if (!g.nops) {
		/* a process that used CUDA but whose GPU work was not recorded */
		if (g.blocked_ns > 0)
			findings_withhold(f, "sync", p, "no GPU activity was recorded (GPU tracing %s):"
					  " the time blocked in CUDA calls cannot be weighed against"
					  " the GPU's", p->gpu_status ? p->gpu_status : "off");
		goto out;
	}
	if (array_grow(&f->procs, &f->procs_cap, f->nprocs, sizeof(*f->procs)) < 0) {
		err = -ENOMEM;
		goto out;
	}
	fp = &f->procs[f->nprocs++];
	memset(fp, 0, sizeof(*fp));
	fp->p = p;
	fp->sampled = g.sampled;
	fp->blocked_ns = g.blocked_ns;
	for (size_t i = 0; i < g.ndevs; i++) {
		struct dev *d = &g.devs[i];
		struct ivs both = { 0 };

		fp->span_ns += d->span_ns;
		fp->busy_ns += d->busy_ns;
		fp->hw_ns += d->hw_ns;
		fp->kw_ns += d->kw_ns;
		fp->other_ns += d->other_ns;
		fp->compute_ns += ivs_overlap(&d->compute, &d->span);
		fp->comm_ns += ivs_overlap(&d->comm, &d->span);
		fp->mem_ns += ivs_overlap(&d->mem, &d->span);
		err = ivs_intersect(&d->comm, &d->compute, &both);
		if (!err)
			fp->overlap_ns += ivs_overlap(&both, &d->span);
		ivs_free(&both);
		if (err)
			goto out;
	}
	/* each device's busy share over the run, for the report */
	fp->busy = calloc(g.ndevs + 1, sizeof(*fp->busy));
	if (!fp->busy) {
		err = -ENOMEM;
		goto out;
	}
	fp->nbusy = g.ndevs;
	for (size_t i = 0; i < g.ndevs; i++) {
		const struct dev *d = &g.devs[i];
		struct findings_busy *fb = &fp->busy[i];
		size_t from = 0, wfrom = 0;

		fb->device = d->device;
		fb->a = d->busy.n ? d->busy.v[0].a : 0;
		fb->b = d->busy.n ? d->busy.v[d->busy.n - 1].b : 0;
		for (int k = 0; k < FINDINGS_BUSY_BINS; k++) {
			int64_t a = fb->a + (fb->b - fb->a) * k / FINDINGS_BUSY_BINS;
			int64_t b = fb->a + (fb->b - fb->a) * (k + 1) / FINDINGS_BUSY_BINS;
			int64_t rec = g.sampled ? ivs_overlap_one(&g.windows, &wfrom, a, b) : b - a;

			/* sampled: busy within what was recorded of the bin */
			fb->share[k] = rec <= 0 ? NAN :
				       (float)((double)ivs_overlap_one(&d->busy, &from, a, b) /
					       (double)rec);
		}
	}
	/* kernel time by launching line, for the report */
	err = launch_sites(&g, fp);
	if (err)
		goto out;
	/* when each collective was launched (the kernel's start without its call) */
	for (size_t i = 0, cap = 0; i < g.nops; i++) {
		const struct op *o = &g.ops[i];
		const struct api_item *a = op_api(&g, o);

		if (!(o->flags & OPF_NCCL))
			continue;
		if (array_grow(&fp->arrivals, &cap, fp->narrivals, sizeof(*fp->arrivals)) < 0) {
			err = -ENOMEM;
			goto out;
		}
		fp->arrivals[fp->narrivals++] = a ? a->start : o->start;
	}
	array_sort(fp->arrivals, fp->narrivals, sizeof(*fp->arrivals), cmp_i64);
	/* CUPTI lost records: idle and launch gaps would be made of them */
	recorded = (int64_t)g.nops;
	if (p->dropped_gpu * 100 > recorded) {
		findings_withhold(f, "gpu_idle", p, "CUPTI lost %lld records against %lld recorded:"
				  " idle time would be overstated", (long long)p->dropped_gpu,
				  (long long)recorded);
		findings_withhold(f, "launch_bound", p, "CUPTI lost %lld records",
				  (long long)p->dropped_gpu);
	} else {
		for (size_t i = 0; !err && i < g.ndevs; i++)
			err = rule_idle(&g, &g.devs[i], have_cpu);
		if (!err)
			err = rule_launch(&g);
	}
	if (!err)
		err = rule_sync(&g);
	if (!err)
		err = rule_copies(&g, OPF_PAGEABLE);
	if (!err)
		err = rule_copies(&g, OPF_SYNCMEM);
	if (!err)
		err = rule_sync_copies(&g);
	if (!err)
		err = rule_loading(&g);
	if (!err)
		err = rule_comm(&g, fp);
	if (!err)
		err = rule_hot_kernels(&g);
	if (!err)
		err = rule_hot_api(&g);
out:
	gproc_free(&g);
	return err;
}

/* ---- ranks ------------------------------------------------------------------------------ */

static const struct emit_col rank_cols[] = {
	{ "rank", "RANK", EMIT_INT, 5, 0, 0, 0 },
	{ "pid", "PID", EMIT_INT, 8, 0, 0, 0 },
	{ "median_step_ns", "MEDIAN STEP", EMIT_NS, 11, 0, 0, 0 },
	{ "slowest_steps", "SLOWEST IN", EMIT_INT, 10, 0, 0, 0 },
	{ "late_ns", "LATE AT COLLECTIVES", EMIT_NS, 19, 0, 0, 0 },
	{ "latest", "LATEST IN", EMIT_INT, 9, 0, 0, 0 },
};

static const struct emit_table rank_table = { "items", rank_cols, 6, 4, 0 };

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return (a > b) - (a < b);
}

struct rank {
	int64_t rank;
	const struct model_proc *p;
	const struct model_steps *s;
	const struct findings_proc *fp;
	size_t slowest, latest;
	double late, median;
};

/* The median of s's steps after the first. */
static int median_step(const struct model_steps *s, double *out)
{
	double *d = malloc(s->n * sizeof(*d));
	size_t n = 0;

	if (!d)
		return -ENOMEM;
	for (size_t i = 1; i < s->n; i++)
		d[n++] = (double)(s->end[i] - s->start[i]);
	array_sort(d, n, sizeof(*d), cmp_double);
	*out = n ? (n % 2 ? d[n / 2] : (d[n / 2 - 1] + d[n / 2]) / 2) : 0;
	free(d);
	return 0;
}

static int cmp_rank(const void *x, const void *y)
{
	const struct rank *a = x, *b = y;

	return (a->rank > b->rank) - (a->rank < b->rank);
}

/*
 * A straggler: a rank slowest in two thirds of the steps, whose median step
 * is FINDINGS_STRAGGLER_MARGIN or more above the median rank's; or, on one
 * host (one clock), a rank that launched the same collective last in two
 * thirds of them, on average that margin of the median step (or of the
 * collectives' spacing, without steps) after the median rank.
 */
static int rule_ranks(struct findings *f)
{
	struct rank *r = NULL;
	size_t nr = 0, cap = 0, nsteps = SIZE_MAX, ncoll = SIZE_MAX, best = 0, late_best = 0;
	double *means = NULL, med = 0, excess = 0, late_share = 0, spacing = 0;
	const char *host = NULL;
	int one_host = 1, err = 0;
	char b[3][FMT_UNIT_MAX];

	/* one process per rank: the one with the most steps */
	for (size_t i = 0; i < model_nprocs(f->m) && !err; i++) {
		const struct model_proc *p = model_proc(f->m, i);
		const struct model_steps *s;
		size_t k;

		if (!p->selected || p->rank < 0)
			continue;
		if ((err = model_steps(f->m, p, NULL, &s)))
			break;
		for (k = 0; k < nr && r[k].rank != p->rank; k++)
			;
		if (k == nr) {
			if (array_grow(&r, &cap, nr, sizeof(*r)) < 0) {
				err = -ENOMEM;
				break;
			}
			memset(&r[nr], 0, sizeof(r[0]));
			r[nr].rank = p->rank;
			nr++;
		}
		if (!r[k].p || s->n > r[k].s->n) {
			r[k].p = p;
			r[k].s = s;
		}
	}
	if (err || nr < 2)
		goto out;
	array_sort(r, nr, sizeof(*r), cmp_rank);
	for (size_t k = 0; k < nr; k++) {
		for (size_t j = 0; j < f->nprocs; j++)
			if (f->procs[j].p == r[k].p)
				r[k].fp = &f->procs[j];
		if (r[k].s->n < nsteps)
			nsteps = r[k].s->n;
		ncoll = r[k].fp && r[k].fp->narrivals < ncoll ? r[k].fp->narrivals :
			!r[k].fp ? 0 : ncoll;
		if (host && r[k].p->host && strcmp(host, r[k].p->host))
			one_host = 0;
		host = r[k].p->host;
	}
	if (!(means = calloc(nr, sizeof(*means)))) {
		err = -ENOMEM;
		goto out;
	}
	/* steps after the first (a warm-up), each rank's median */
	if (nsteps != SIZE_MAX && nsteps >= 4) {
		nsteps--;
		for (size_t i = 1; i <= nsteps; i++) {
			size_t w = 0;

			for (size_t k = 1; k < nr; k++)
				if (r[k].s->end[i] - r[k].s->start[i] > r[w].s->end[i] - r[w].s->start[i])
					w = k;
			r[w].slowest++;
		}
		for (size_t k = 0; k < nr && !err; k++)
			err = median_step(r[k].s, &r[k].median);
		for (size_t k = 0; k < nr; k++)
			means[k] = r[k].median;
		for (size_t k = 1; k < nr; k++)
			if (r[k].slowest > r[best].slowest)
				best = k;
		array_sort(means, nr, sizeof(*means), cmp_double);
		med = nr % 2 ? means[nr / 2] : (means[nr / 2 - 1] + means[nr / 2]) / 2;
		if (med > 0)
			excess = r[best].median / med - 1;
	} else {
		nsteps = 0;
	}
	if (err)
		goto out;
	if (one_host && ncoll != SIZE_MAX && ncoll >= 3) {
		double *t = calloc(nr, sizeof(*t)), *sorted = calloc(nr, sizeof(*sorted));

		if (!t || !sorted) {
			free(t);
			free(sorted);
			err = -ENOMEM;
			goto out;
		}
		/* each rank's lateness against the median rank's launch of the
		 * same collective: jitter averages out, a straggler's does not */
		for (size_t i = 0; i < ncoll; i++) {
			size_t w = 0;
			double med_t;

			for (size_t k = 0; k < nr; k++) {
				t[k] = sorted[k] = (double)r[k].fp->arrivals[i];
				if (t[k] > t[w])
					w = k;
			}
			array_sort(sorted, nr, sizeof(*sorted), cmp_double);
			med_t = nr % 2 ? sorted[nr / 2] : (sorted[nr / 2 - 1] + sorted[nr / 2]) / 2;
			for (size_t k = 0; k < nr; k++)
				r[k].late += t[k] - med_t;
			r[w].latest++;
		}
		free(t);
		free(sorted);
		for (size_t k = 0; k < nr; k++)
			r[k].late /= (double)ncoll;
		for (size_t k = 1; k < nr; k++)
			if (r[k].latest > r[late_best].latest)
				late_best = k;
		spacing = med > 0 ? med :
			  (double)(r[0].fp->arrivals[ncoll - 1] - r[0].fp->arrivals[0]) /
				  (double)(ncoll - 1);
		if (spacing > 0)
			late_share = r[late_best].late / spacing;
	}
	{
		/* consistently: the slowest (the latest) in two thirds of them */
		int by_steps = nsteps >= 3 && 3 * r[best].slowest >= 2 * nsteps &&
			       excess >= FINDINGS_STRAGGLER_MARGIN;
		int by_coll = ncoll >= 3 && ncoll != SIZE_MAX && one_host &&
			      3 * r[late_best].latest >= 2 * ncoll &&
			      late_share >= FINDINGS_STRAGGLER_MARGIN;
		size_t who = by_steps ? best : late_best;
		double share = by_steps ? excess : late_share;
		struct finding *x;

		if (!by_steps && !by_coll)
			goto out;
		x = finding_new(f, "straggler", NULL, share > 1 ? 1 : share,
				"rank %lld is the straggler: %.0f%% behind the median rank",
				(long long)r[who].rank, 100 * share);
		if (!x) {
			err = -ENOMEM;
			goto out;
		}
		if (nsteps >= 3)
			finding_detail(x, "Over %zu '%s' steps (after the first), rank %lld was the"
				       " slowest in %zu; its median step %s against %s for the median"
				       " rank (%+.0f%%).", nsteps,
				       r[best].s->name ? r[best].s->name : "?", (long long)r[best].rank,
				       r[best].slowest, dur(b[0], r[best].median), dur(b[1], med),
				       100 * excess);
		if (ncoll >= 3 && ncoll != SIZE_MAX && one_host)
			finding_detail(x, "At %zu NCCL collectives, rank %lld launched last in %zu, on"
				       " average %s after the median rank: the others wait for it inside"
				       " the collective.", ncoll, (long long)r[late_best].rank,
				       r[late_best].latest, dur(b[2], r[late_best].late));
		finding_kv(x, "rank", EMIT_INT, ev_int(r[who].rank));
		finding_kv(x, "ranks", EMIT_INT, ev_int((int64_t)nr));
		finding_kv(x, "steps", EMIT_INT, ev_int(nsteps == SIZE_MAX ? 0 : (int64_t)nsteps));
		finding_kv(x, "median_step_ns", EMIT_NS, ev_real(med));
		finding_kv(x, "excess", EMIT_REAL, ev_real(excess));
		finding_kv(x, "collectives", EMIT_INT,
			   ev_int(ncoll == SIZE_MAX ? 0 : (int64_t)ncoll));
		finding_table(x, &rank_table);
		for (size_t k = 0; k < nr; k++)
			finding_row(x, (struct emit_val[]){
					       ev_int(r[k].rank), ev_int(r[k].p->pid),
					       nsteps >= 3 ? ev_real(r[k].median) : ev_none(),
					       nsteps >= 3 ? ev_int((int64_t)r[k].slowest) : ev_none(),
					       ncoll >= 3 && ncoll != SIZE_MAX && one_host ?
						       ev_real(r[k].late) : ev_none(),
					       ncoll >= 3 && ncoll != SIZE_MAX && one_host ?
						       ev_int((int64_t)r[k].latest) : ev_none() });
		finding_coverage(x, "Steps are each rank's most frequent top-level range, matched by"
				 " order.");
		if (!one_host)
			finding_coverage(x, "The ranks ran on several hosts, whose clocks differ:"
					 " collective launch times are not compared.");
		finding_advice(x, "Find what rank %lld does differently: its data (uneven shards or"
			       " sample lengths: balance them, bucket by length), its GPU (a slower or"
			       " throttled device: nvidia-smi -q -d PERFORMANCE), or work only it does"
			       " (logging, evaluation, checkpoints: move them off the step).",
			       (long long)r[who].rank);
	}
out:
	free(r);
	free(means);
	return err;
}

int findings_gpu(struct findings *f)
{
	int err = 0;

	if (model_schema_version(f->m) < 2)
		return 0;
	for (size_t i = 0; i < model_nprocs(f->m) && !err; i++)
		if (model_proc(f->m, i)->selected)
			err = process(f, model_proc(f->m, i));
	if (!err)
		err = rule_ranks(f);
	return err;
}
