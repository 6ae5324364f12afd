/*
 * The GPU part of shimmer summary; see gpu.h.
 *
 * Like the rest of the summary, each table is read with one plain scan and
 * aggregated here in maps: kernels by (process, name id), copies by
 * (process, kind), ranges by (process, domain id, name id), and activity
 * by (process, device, stream) and (process, device).  Names are resolved
 * once per group at the end from the strings table, and groups whose
 * resolved names coincide (two mangled names with one demangling) are
 * merged, so that each name is one row.
 *
 * Busy time is the union of the kernel, copy and memset intervals: kernels
 * on concurrent streams overlap, and a sum would count that time twice.
 * Every interval is kept (24 bytes each) and sorted once by (device,
 * start); one sweep then merges overlapping intervals per device and, as
 * each stream's intervals are a subsequence of that order, per stream.
 *
 * A process whose GPU activity was sampled (schema 4: a row in the
 * gpu_sampling view) has kernels and copies only for work launched inside
 * its windows.  Its counts, bytes, totals and busy times are written
 * scaled by the view's scale and marked as estimates; means, extremes and
 * shares of the kernel time are ratios of the sample and are written as
 * recorded; a share of time is taken of the traced time, not of the wall.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fmt.h"
#include "gpu.h"
#include "map.h"
#include "stats.h"
#include "store.h"

/* A kernel name, copy kind or range name in one process. */
struct agg {
	struct map_key key;
	struct stats st; /* durations (ranges: the closed ones) */
	int64_t sum;     /* exact total of the durations */
	int64_t bytes;
	int64_t open; /* ranges left open */
	const char *label;
	char *owned; /* label, when composed here */
	int dead;    /* merged into another group */
};

struct string_item {
	struct map_key key; /* process, strings.id, 0 */
	char *text;
	char *demangled;
};

struct stream_item {
	struct map_key key; /* process, device, stream (-1: NULL) */
	int64_t kernels;
	int64_t copies;
	int64_t busy;
	int64_t cur_start, cur_end; /* the merged interval being grown */
	int started;
};

struct dev_item {
	struct map_key key; /* process, device, 0 */
	int64_t kernels;
	int64_t copies;
	int64_t busy;
};

/* A sampled process, from the gpu_sampling view. */
struct samp_item {
	struct map_key key; /* process, 0, 0 */
	int64_t windows;
	int64_t traced_ns;
	int64_t span_ns;
	double share; /* traced_ns / span_ns; 0 when the view has NULL */
	int64_t calls, calls_traced; /* GPU-work runtime calls: all, in windows */
	double scale; /* recorded -> estimate; 0 when the view has NULL */
};

struct span {
	int64_t start;
	int64_t end;
	uint32_t dev;    /* index into gpu.devs */
	uint32_t stream; /* index into gpu.streams */
};

struct list {
	struct agg **v;
	size_t n;
};

struct gpu {
	sqlite3 *db;
	struct map strings;
	struct map kernels;
	struct map copies;
	struct map ranges;
	struct map streams;
	struct map devs;
	struct map sampling;
	struct strtab kinds; /* copy kind labels, indexed by copies' key.a */
	struct span *spans;
	size_t nspans;
	size_t spans_cap;
	/* Sorted for output: by process, then total time, then name. */
	struct list kernel_list, copy_list, range_list;
	/* By process, device, stream. */
	struct map_key **stream_list;
	struct map_key **dev_list;
};

static const char *const sync_fns[] = {
	"cudaStreamSynchronize",
	"cudaDeviceSynchronize",
	"cudaEventSynchronize",
	"cudaMemcpy",
};

int gpu_is_sync_fn(const char *name)
{
	for (size_t i = 0; i < sizeof(sync_fns) / sizeof(sync_fns[0]); i++)
		if (name && strcmp(name, sync_fns[i]) == 0)
			return 1;
	return 0;
}

/* ---- reading --------------------------------------------------------- */

static int string_row(void *ctx, sqlite3_stmt *st)
{
	struct gpu *g = ctx;
	struct map_key k = { sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1), 0 };
	struct string_item *s = map_get(&g->strings, &k);
	int err = 0;

	if (!s)
		return -ENOMEM;
	free(s->text);
	free(s->demangled);
	s->text = store_column_dup(st, 2, &err);
	s->demangled = store_column_dup(st, 3, &err);
	return err;
}

/* Count one interval of device activity and keep it for the sweep. */
static int activity(struct gpu *g, int64_t proc_id, sqlite3_stmt *st, int kernel)
{
	struct map_key dk = { proc_id, sqlite3_column_int64(st, 1), 0 };
	struct map_key sk = { proc_id, dk.a,
			      sqlite3_column_type(st, 2) == SQLITE_NULL ? -1
									 : sqlite3_column_int64(st, 2) };
	struct dev_item *d = map_get(&g->devs, &dk);
	struct stream_item *s = map_get(&g->streams, &sk);
	struct span *sp;

	if (!d || !s || array_grow(&g->spans, &g->spans_cap, g->nspans, sizeof(*g->spans)) < 0)
		return -ENOMEM;
	if (kernel)
		d->kernels++, s->kernels++;
	else
		d->copies++, s->copies++;
	sp = &g->spans[g->nspans++];
	sp->start = sqlite3_column_int64(st, 3);
	sp->end = sqlite3_column_int64(st, 4);
	sp->dev = (uint32_t)(d - (struct dev_item *)g->devs.items);
	sp->stream = (uint32_t)(s - (struct stream_item *)g->streams.items);
	return 0;
}

static void agg_add(struct agg *a, int64_t ns)
{
	stats_add(&a->st, (double)ns);
	a->sum += ns;
}

/* Columns 1-4 are what activity() reads. */
static const char kernels_sql[] =
	"SELECT proc_id, device, stream, start_ns, end_ns, name_id FROM kernels";

static int kernel_row(void *ctx, sqlite3_stmt *st)
{
	struct gpu *g = ctx;
	int64_t proc_id = sqlite3_column_int64(st, 0);
	struct map_key k = { proc_id, sqlite3_column_int64(st, 5), 0 };
	struct agg *a = map_get(&g->kernels, &k);

	if (!a)
		return -ENOMEM;
	agg_add(a, sqlite3_column_int64(st, 4) - sqlite3_column_int64(st, 3));
	return activity(g, proc_id, st, 1);
}

static const char copies_sql[] =
	"SELECT proc_id, device, stream, start_ns, end_ns, op, copy_kind, bytes FROM gpu_copies";

static int copy_row(void *ctx, sqlite3_stmt *st)
{
	struct gpu *g = ctx;
	int64_t proc_id = sqlite3_column_int64(st, 0);
	const char *op = (const char *)sqlite3_column_text(st, 5);
	const char *kind = (const char *)sqlite3_column_text(st, 6);
	struct map_key k = { proc_id, 0, 0 };
	struct agg *a;
	int err;

	/* Memsets are one row of their own, whatever memory they set. */
	if (op && strcmp(op, "memset") == 0)
		kind = "memset";
	else if (!kind)
		kind = "unknown";
	err = strtab_index(&g->kinds, kind, &k.a);
	if (err)
		return err;
	a = map_get(&g->copies, &k);
	if (!a)
		return -ENOMEM;
	agg_add(a, sqlite3_column_int64(st, 4) - sqlite3_column_int64(st, 3));
	a->bytes += sqlite3_column_int64(st, 7);
	return activity(g, proc_id, st, 0);
}

static const char ranges_sql[] =
	"SELECT proc_id, domain_id, name_id, start_ns, end_ns FROM ranges";

static int range_row(void *ctx, sqlite3_stmt *st)
{
	struct gpu *g = ctx;
	struct map_key k = { sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
			     sqlite3_column_int64(st, 2) };
	struct agg *a = map_get(&g->ranges, &k);

	if (!a)
		return -ENOMEM;
	if (sqlite3_column_type(st, 4) == SQLITE_NULL)
		a->open++;
	else
		agg_add(a, sqlite3_column_int64(st, 4) - sqlite3_column_int64(st, 3));
	return 0;
}

static int sampling_row(void *ctx, sqlite3_stmt *st)
{
	struct gpu *g = ctx;
	struct map_key k = { sqlite3_column_int64(st, 0), 0, 0 };
	struct samp_item *s = map_get(&g->sampling, &k);

	if (!s)
		return -ENOMEM;
	s->windows = sqlite3_column_int64(st, 1);
	s->traced_ns = sqlite3_column_int64(st, 2);
	s->span_ns = sqlite3_column_int64(st, 3);
	s->share = sqlite3_column_double(st, 4); /* NULL reads as 0 */
	s->calls = sqlite3_column_int64(st, 5);
	s->calls_traced = sqlite3_column_int64(st, 6);
	s->scale = sqlite3_column_double(st, 7);
	return 0;
}

/* ---- busy time ---------------------------------------------------------- */

static int cmp_span(const void *x, const void *y)
{
	const struct span *a = x, *b = y;

	if (a->dev != b->dev)
		return a->dev < b->dev ? -1 : 1;
	return (a->start > b->start) - (a->start < b->start);
}

static int bits_of(uint64_t v)
{
	return v ? 64 - __builtin_clzll(v) : 0;
}

/*
 * Sort the spans by (device, start).  qsort spends most of a 1e7-span
 * summary in comparisons, so this is an LSD radix sort, 16 bits a pass, of
 * the key device << b | (start - min start), which needs 3 passes for a
 * run of hours on a few devices.  Already sorted input (one device, one
 * stream) is left alone; keys too wide for 64 bits or no memory for the
 * second buffer fall back to qsort.
 */
static void sort_spans(struct gpu *g)
{
	size_t n = g->nspans, *count = NULL;
	struct span *src = g->spans, *dst = NULL;
	int64_t lo = 0, hi = 0;
	uint32_t devs = 0;
	int sorted = 1, b, bits;

	for (size_t i = 0; i < n; i++) {
		if (i == 0 || src[i].start < lo)
			lo = src[i].start;
		if (i == 0 || src[i].start > hi)
			hi = src[i].start;
		if (src[i].dev > devs)
			devs = src[i].dev;
		if (i > 0 && sorted && cmp_span(&src[i - 1], &src[i]) > 0)
			sorted = 0;
	}
	if (sorted)
		return;
	b = bits_of((uint64_t)hi - (uint64_t)lo);
	bits = b + bits_of(devs);
	if (bits <= 64) {
		dst = malloc(n * sizeof(*dst));
		count = malloc(65536 * sizeof(*count));
	}
	if (!dst || !count) {
		free(dst);
		free(count);
		qsort(src, n, sizeof(*src), cmp_span);
		return;
	}
	for (int shift = 0; shift < bits; shift += 16) {
		size_t sum = 0;
		struct span *t;

		memset(count, 0, 65536 * sizeof(*count));
		for (size_t i = 0; i < n; i++)
			count[(((uint64_t)src[i].dev << b | (uint64_t)(src[i].start - lo)) >>
			       shift) & 0xffff]++;
		for (size_t d = 0; d < 65536; d++) {
			size_t c = count[d];

			count[d] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			dst[count[(((uint64_t)src[i].dev << b | (uint64_t)(src[i].start - lo)) >>
				   shift) & 0xffff]++] = src[i];
		t = src;
		src = dst;
		dst = t;
	}
	free(count);
	free(dst); /* the buffer the last pass read */
	g->spans = src;
	g->spans_cap = n;
}

/* Grow the merged interval [*cs, *ce) by [start, end), or close it into
 * *busy and start a new one when they do not touch. */
static void merge_interval(int64_t *cs, int64_t *ce, int64_t *busy, int *started,
			   int64_t start, int64_t end)
{
	if (end < start)
		end = start; /* a reversed record covers nothing */
	if (*started && start <= *ce) {
		if (end > *ce)
			*ce = end;
		return;
	}
	if (*started)
		*busy += *ce - *cs;
	*cs = start;
	*ce = end;
	*started = 1;
}

static void sweep(struct gpu *g)
{
	int64_t cs = 0, ce = 0;
	int started = 0;

	sort_spans(g);
	for (size_t i = 0; i < g->nspans; i++) {
		const struct span *sp = &g->spans[i];
		struct stream_item *s = map_item(&g->streams, sp->stream);
		struct dev_item *d = map_item(&g->devs, sp->dev);

		if (i > 0 && sp->dev != g->spans[i - 1].dev) {
			struct dev_item *prev = map_item(&g->devs, g->spans[i - 1].dev);

			prev->busy += ce - cs;
			started = 0;
		}
		merge_interval(&cs, &ce, &d->busy, &started, sp->start, sp->end);
		merge_interval(&s->cur_start, &s->cur_end, &s->busy, &s->started, sp->start,
			       sp->end);
	}
	if (g->nspans > 0) {
		struct dev_item *last = map_item(&g->devs, g->spans[g->nspans - 1].dev);

		last->busy += ce - cs;
	}
	for (size_t i = 0; i < g->streams.n; i++) {
		struct stream_item *s = map_item(&g->streams, i);

		if (s->started)
			s->busy += s->cur_end - s->cur_start;
	}
	/* The intervals are not needed past this point. */
	free(g->spans);
	g->spans = NULL;
	g->nspans = g->spans_cap = 0;
}

/* ---- names and order ------------------------------------------------------ */

static const struct string_item *string_find(const struct gpu *g, int64_t proc_id, int64_t id)
{
	struct map_key k = { proc_id, id, 0 };

	return map_find(&g->strings, &k);
}

static int kernel_label(struct gpu *g, struct agg *a)
{
	const struct string_item *s = string_find(g, a->key.proc_id, a->key.a);

	if (s && (s->demangled || s->text)) {
		a->label = s->demangled ? s->demangled : s->text;
		return 0;
	}
	if (asprintf(&a->owned, "kernel#%lld", (long long)a->key.a) < 0)
		return a->owned = NULL, -ENOMEM;
	a->label = a->owned;
	return 0;
}

/* "name", or "domain:name" outside NVTX's default domain (id 0). */
static int range_label(struct gpu *g, struct agg *a)
{
	const struct string_item *d = string_find(g, a->key.proc_id, a->key.a);
	const struct string_item *n = string_find(g, a->key.proc_id, a->key.b);
	char dbuf[32], nbuf[32];
	const char *dom = d && d->text ? d->text : dbuf, *name = n && n->text ? n->text : nbuf;
	int r;

	snprintf(dbuf, sizeof(dbuf), "domain#%lld", (long long)a->key.a);
	snprintf(nbuf, sizeof(nbuf), "range#%lld", (long long)a->key.b);
	if (a->key.a == 0)
		r = asprintf(&a->owned, "%s", name);
	else
		r = asprintf(&a->owned, "%s:%s", dom, name);
	if (r < 0)
		return a->owned = NULL, -ENOMEM;
	a->label = a->owned;
	return 0;
}

static int cmp_label(const void *x, const void *y)
{
	const struct agg *a = *(struct agg *const *)x, *b = *(struct agg *const *)y;

	if (a->key.proc_id != b->key.proc_id)
		return a->key.proc_id < b->key.proc_id ? -1 : 1;
	return strcmp(a->label, b->label);
}

static int cmp_total(const void *x, const void *y)
{
	const struct agg *a = *(struct agg *const *)x, *b = *(struct agg *const *)y;

	if (a->key.proc_id != b->key.proc_id)
		return a->key.proc_id < b->key.proc_id ? -1 : 1;
	if (a->sum != b->sum)
		return a->sum > b->sum ? -1 : 1;
	return strcmp(a->label, b->label);
}

/* Label every group of m with label(), merge the groups of one process that
 * share a label, and list the rest by process and total time. */
static int make_list(struct gpu *g, struct map *m, int (*label)(struct gpu *, struct agg *),
		     struct list *l)
{
	size_t n = 0;
	int err;

	l->v = calloc(m->n + 1, sizeof(*l->v));
	if (!l->v)
		return -ENOMEM;
	for (size_t i = 0; i < m->n; i++) {
		struct agg *a = map_item(m, i);

		if (label) {
			err = label(g, a);
			if (err)
				return err;
		} else {
			a->label = g->kinds.v[a->key.a];
		}
		l->v[i] = a;
	}
	qsort(l->v, m->n, sizeof(*l->v), cmp_label);
	for (size_t i = 0; i < m->n; i++) {
		struct agg *a = l->v[i];

		if (n > 0 && cmp_label(&l->v[n - 1], &a) == 0) {
			struct agg *keep = l->v[n - 1];

			stats_merge(&keep->st, &a->st);
			keep->sum += a->sum;
			keep->bytes += a->bytes;
			keep->open += a->open;
			a->dead = 1;
			continue;
		}
		l->v[n++] = a;
	}
	l->n = n;
	qsort(l->v, l->n, sizeof(*l->v), cmp_total);
	return 0;
}

static int cmp_key(const void *x, const void *y)
{
	const struct map_key *a = *(struct map_key *const *)x, *b = *(struct map_key *const *)y;

	if (a->proc_id != b->proc_id)
		return a->proc_id < b->proc_id ? -1 : 1;
	if (a->a != b->a)
		return a->a < b->a ? -1 : 1;
	return (a->b > b->b) - (a->b < b->b);
}

static int key_list(const struct map *m, struct map_key ***out)
{
	struct map_key **v = calloc(m->n + 1, sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < m->n; i++)
		v[i] = map_item(m, i);
	qsort(v, m->n, sizeof(*v), cmp_key);
	*out = v;
	return 0;
}

/* ---- loading ---------------------------------------------------------------- */

int gpu_load(sqlite3 *db, struct gpu **out)
{
	struct gpu *g = calloc(1, sizeof(*g));
	int err = -ENOMEM, version;

	*out = NULL;
	if (!g)
		goto out;
	g->db = db;
	g->strings.item_size = sizeof(struct string_item);
	g->kernels.item_size = sizeof(struct agg);
	g->copies.item_size = sizeof(struct agg);
	g->ranges.item_size = sizeof(struct agg);
	g->streams.item_size = sizeof(struct stream_item);
	g->devs.item_size = sizeof(struct dev_item);
	g->sampling.item_size = sizeof(struct samp_item);
	err = 0;
	version = store_schema_version(db);
	/* Version 1 stores have no GPU tables: nothing to report. */
	if (version >= 2) {
		err = store_each_row(db, "SELECT proc_id, id, text, demangled FROM strings",
				     string_row, g);
		if (!err)
			err = store_each_row(db, kernels_sql, kernel_row, g);
		if (!err)
			err = store_each_row(db, copies_sql, copy_row, g);
		if (!err)
			err = store_each_row(db, ranges_sql, range_row, g);
	}
	if (!err && version >= 4)
		err = store_each_row(db, "SELECT proc_id, windows, traced_ns, span_ns, traced_share,"
					 " calls, calls_traced, scale FROM gpu_sampling", sampling_row, g);
	if (err)
		goto out;
	sweep(g);
	err = make_list(g, &g->kernels, kernel_label, &g->kernel_list);
	if (!err)
		err = make_list(g, &g->copies, NULL, &g->copy_list);
	if (!err)
		err = make_list(g, &g->ranges, range_label, &g->range_list);
	if (!err)
		err = key_list(&g->streams, &g->stream_list);
	if (!err)
		err = key_list(&g->devs, &g->dev_list);
out:
	if (err) {
		gpu_free(g);
		return err;
	}
	*out = g;
	return 0;
}

static void free_aggs(struct map *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(((struct agg *)map_item(m, i))->owned);
	map_free(m);
}

void gpu_free(struct gpu *g)
{
	if (!g)
		return;
	for (size_t i = 0; i < g->strings.n; i++) {
		struct string_item *s = map_item(&g->strings, i);

		free(s->text);
		free(s->demangled);
	}
	map_free(&g->strings);
	free_aggs(&g->kernels);
	free_aggs(&g->copies);
	free_aggs(&g->ranges);
	map_free(&g->streams);
	map_free(&g->devs);
	map_free(&g->sampling);
	strtab_free(&g->kinds);
	free(g->spans);
	free(g->kernel_list.v);
	free(g->copy_list.v);
	free(g->range_list.v);
	free(g->stream_list);
	free(g->dev_list);
	free(g);
}

/* ---- per-process views ---------------------------------------------------- */

/* The run of v (sorted by process first) that belongs to proc_id. */
static size_t proc_run(void *const *v, size_t n, int64_t proc_id, size_t *count)
{
	size_t lo = 0, hi = n, end;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (((const struct map_key *)v[mid])->proc_id < proc_id)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (end = lo; end < n && ((const struct map_key *)v[end])->proc_id == proc_id; end++)
		;
	*count = end - lo;
	return lo;
}

struct view {
	struct agg **kernels, **copies, **ranges;
	size_t nkernels, ncopies, nranges;
	struct stream_item **streams;
	struct dev_item **devs;
	size_t nstreams, ndevs;
	int64_t kernel_total;
	int64_t open_ranges;
	double sync_total;
	int64_t sync_count;
	int sync_exact;
	const struct samp_item *samp; /* NULL: GPU activity recorded whole */
	double scale;                 /* recorded count or total -> estimate */
	double whole;                 /* what a time share is of: wall or traced time */
};

/* Whether s traced some share of its span, which makes estimates possible:
 * the view has a scale only then (a window's calls or time). */
static int estimable(const struct samp_item *s)
{
	return s->scale > 0;
}

static struct view proc_view(const struct gpu *g, const struct gpu_proc *p)
{
	struct map_key sk = { p->proc_id, 0, 0 };
	struct view v = { .sync_exact = 1, .scale = 1, .whole = p->wall_ns };
	size_t i;

	v.samp = map_find(&g->sampling, &sk);
	if (v.samp) {
		v.whole = (double)v.samp->traced_ns;
		/* Nothing to scale by: the figures stay as recorded. */
		if (estimable(v.samp))
			v.scale = v.samp->scale;
	}

	i = proc_run((void *const *)g->kernel_list.v, g->kernel_list.n, p->proc_id, &v.nkernels);
	v.kernels = g->kernel_list.v + i;
	i = proc_run((void *const *)g->copy_list.v, g->copy_list.n, p->proc_id, &v.ncopies);
	v.copies = g->copy_list.v + i;
	i = proc_run((void *const *)g->range_list.v, g->range_list.n, p->proc_id, &v.nranges);
	v.ranges = g->range_list.v + i;
	i = proc_run((void *const *)g->stream_list, g->streams.n, p->proc_id, &v.nstreams);
	v.streams = (struct stream_item **)g->stream_list + i;
	i = proc_run((void *const *)g->dev_list, g->devs.n, p->proc_id, &v.ndevs);
	v.devs = (struct dev_item **)g->dev_list + i;
	for (i = 0; i < v.nkernels; i++)
		v.kernel_total += v.kernels[i]->sum;
	for (i = 0; i < v.nranges; i++)
		v.open_ranges += v.ranges[i]->open;
	for (i = 0; i < p->nsync; i++) {
		v.sync_total += p->sync[i].total_ns;
		v.sync_count += p->sync[i].count;
		v.sync_exact &= p->sync[i].exact;
	}
	return v;
}

static int traced(const struct gpu_proc *p)
{
	return p->status && strcmp(p->status, "active") == 0;
}

/* Why GPU activity was not traced, in words; NULL when it was. */
static const char *not_traced_reason(const struct gpu_proc *p)
{
	static const struct {
		const char *status, *why;
	} why[] = {
		{ "no_cupti", "no CUPTI library could be loaded" },
		{ "busy", "another profiler owns CUPTI" },
		{ "error", "CUPTI failed" },
		{ "disabled", "disabled by SHIMMER_CUPTI=0" },
		{ "attached", "traced by shimmer attach, whose probes see no GPU activity" },
	};

	if (traced(p))
		return NULL;
	if (!p->status)
		return "no GPU status was recorded for this process";
	for (size_t i = 0; i < sizeof(why) / sizeof(why[0]); i++)
		if (strcmp(p->status, why[i].status) == 0)
			return why[i].why;
	return p->status;
}

static int has_activity(const struct view *v)
{
	return v->nkernels || v->ncopies || v->nranges || v->ndevs;
}

/* Whether to say anything about the GPU for p. */
static int gpu_relevant(const struct gpu_proc *p, const struct view *v)
{
	return p->status || p->used_cuda || has_activity(v) || p->nsync;
}

/* ---- table ----------------------------------------------------------------- */

/* part / whole as "12.3%", "~12.3%" when estimated, "-" when whole is unknown. */
static void pct_mark(char *buf, size_t len, double part, double whole, int estimated)
{
	if (whole > 0)
		snprintf(buf, len, "%s%.1f%%", estimated ? "~" : "", 100.0 * part / whole);
	else
		snprintf(buf, len, "-");
}

static void pct(char *buf, size_t len, double part, double whole)
{
	pct_mark(buf, len, part, whole, 0);
}

/* "~" before a figure that v estimates; "" when v is NULL (never sampled). */
static const char *mark(const struct view *v)
{
	return v && v->samp ? "~" : "";
}

/* n recorded kernels or copies as v gives them: "3", or "~30" when sampled. */
static void count_str(char *buf, size_t len, const struct view *v, double n)
{
	snprintf(buf, len, "%s%.0f", mark(v), n * v->scale);
}

/* Total, mean, std dev, min and max of a's durations, 11+10+10+10+10 wide;
 * the total as v estimates it (v NULL: ranges, never sampled). */
static void table_times(FILE *out, const struct agg *a, const struct view *v)
{
	char u[5][FMT_UNIT_MAX], total[FMT_UNIT_MAX + 1];

	if (a->st.n == 0) {
		fprintf(out, " %11s %10s %10s %10s %10s", "-", "-", "-", "-", "-");
		return;
	}
	snprintf(total, sizeof(total), "%s%s", mark(v),
		 fmt_duration(u[0], FMT_UNIT_MAX, (double)a->sum * (v ? v->scale : 1.0)));
	fprintf(out, " %11s %10s %10s %10s %10s", total,
		fmt_duration(u[1], FMT_UNIT_MAX, a->st.mean),
		fmt_duration(u[2], FMT_UNIT_MAX, stats_stddev(&a->st)),
		fmt_duration(u[3], FMT_UNIT_MAX, a->st.min),
		fmt_duration(u[4], FMT_UNIT_MAX, a->st.max));
}

static void table_kernels(FILE *out, const struct view *v)
{
	char u[FMT_UNIT_MAX], share[16], count[32];

	fprintf(out, "  GPU kernels: %s%s in all\n", mark(v),
		fmt_duration(u, FMT_UNIT_MAX, (double)v->kernel_total * v->scale));
	fprintf(out, "  %10s %11s %10s %10s %10s %10s %7s  %s\n", "Count", "Total", "Mean",
		"Std dev", "Min", "Max", "Share", "Kernel");
	for (size_t i = 0; i < v->nkernels; i++) {
		const struct agg *a = v->kernels[i];

		pct(share, sizeof(share), (double)a->sum, (double)v->kernel_total);
		count_str(count, sizeof(count), v, (double)a->st.n);
		fprintf(out, "  %10s", count);
		table_times(out, a, v);
		fprintf(out, " %7s  %s\n", share, a->label);
	}
	fputc('\n', out);
}

static void table_copies(FILE *out, const struct view *v)
{
	char u[FMT_UNIT_MAX], rate[32], count[32], bytes[FMT_UNIT_MAX + 1];
	int bw = v->samp ? 11 : 10; /* room for the ~ of "~512.00 MiB" */

	fprintf(out, "  %-10s %10s %*s %11s %10s %10s %10s %10s %10s\n", "GPU copies", "Count", bw,
		"Bytes", "Total", "Mean", "Std dev", "Min", "Max", "GB/s");
	for (size_t i = 0; i < v->ncopies; i++) {
		const struct agg *a = v->copies[i];

		if (a->sum > 0)
			snprintf(rate, sizeof(rate), "%.2f", (double)a->bytes / (double)a->sum);
		else
			snprintf(rate, sizeof(rate), "-");
		count_str(count, sizeof(count), v, (double)a->st.n);
		snprintf(bytes, sizeof(bytes), "%s%s", mark(v),
			 fmt_bytes(u, FMT_UNIT_MAX, (double)a->bytes * v->scale));
		fprintf(out, "  %-10s %10s %*s", a->label, count, bw, bytes);
		table_times(out, a, v);
		fprintf(out, " %10s\n", rate);
	}
	fputc('\n', out);
}

static void table_ranges(FILE *out, const struct view *v)
{
	fprintf(out, "  Ranges (closed ones; Open: still open at the end)\n");
	fprintf(out, "  %10s %6s %11s %10s %10s %10s %10s  %s\n", "Count", "Open", "Total", "Mean",
		"Std dev", "Min", "Max", "Range");
	for (size_t i = 0; i < v->nranges; i++) {
		const struct agg *a = v->ranges[i];

		fprintf(out, "  %10llu %6lld", (unsigned long long)a->st.n, (long long)a->open);
		table_times(out, a, NULL);
		fprintf(out, "  %s\n", a->label);
	}
	if (v->open_ranges > 0)
		fprintf(out, "  %lld range%s left open: not in the times above\n",
			(long long)v->open_ranges, v->open_ranges == 1 ? " was" : "s were");
	fputc('\n', out);
}

/* One line of the busy table. */
static void busy_line(FILE *out, const struct view *v, int64_t dev, const char *stream,
		      int64_t kernels, int64_t copies, int64_t busy)
{
	char u[FMT_UNIT_MAX], share[16], nk[32], nc[32], total[FMT_UNIT_MAX + 1];

	count_str(nk, sizeof(nk), v, (double)kernels);
	count_str(nc, sizeof(nc), v, (double)copies);
	snprintf(total, sizeof(total), "%s%s", mark(v),
		 fmt_duration(u, FMT_UNIT_MAX, (double)busy * v->scale));
	pct_mark(share, sizeof(share), (double)busy, v->whole, v->samp != NULL);
	fprintf(out, "  %-8lld %18s %10s %10s %11s %7s\n", (long long)dev, stream, nk, nc, total,
		share);
}

static void table_busy(FILE *out, const struct view *v)
{
	char stream[24];

	fprintf(out, "  %-8s %18s %10s %10s %11s %7s\n", "Device", "Stream", "Kernels", "Copies",
		"Busy", "Wall%");
	for (size_t i = 0; i < v->nstreams; i++) {
		const struct stream_item *s = v->streams[i];

		if (s->key.b < 0)
			snprintf(stream, sizeof(stream), "?");
		else
			snprintf(stream, sizeof(stream), "%lld", (long long)s->key.b);
		busy_line(out, v, s->key.a, stream, s->kernels, s->copies, s->busy);
	}
	for (size_t i = 0; i < v->ndevs; i++) {
		const struct dev_item *d = v->devs[i];

		busy_line(out, v, d->key.a, "all (GPU busy)", d->kernels, d->copies, d->busy);
	}
	fprintf(out, "  GPU busy: kernels, copies and memsets, overlaps counted once%s\n\n",
		v->samp ? "; Wall%: share of the traced time" : "");
}

static void table_sync(FILE *out, const struct gpu_proc *p, const struct view *v)
{
	char u[FMT_UNIT_MAX], share[16];
	const char *sync_mark = v->sync_exact ? "" : "~";

	pct_mark(share, sizeof(share), v->sync_total, p->wall_ns, !v->sync_exact);
	fprintf(out, "  CPU blocked in synchronizing calls: %s%s, %s of wall\n", sync_mark,
		fmt_duration(u, FMT_UNIT_MAX, v->sync_total), share);
	fprintf(out, "  %-28s %10s %11s %7s\n", "Function", "Count", "Total", "Wall%");
	for (size_t i = 0; i < p->nsync; i++) {
		const struct gpu_sync_fn *f = &p->sync[i];
		char total[FMT_UNIT_MAX + 2];

		snprintf(total, sizeof(total), "%s%s", f->exact ? "" : "~",
			 fmt_duration(u, FMT_UNIT_MAX, f->total_ns));
		pct_mark(share, sizeof(share), f->total_ns, p->wall_ns, !f->exact);
		fprintf(out, "  %-28s %10lld %11s %7s\n", f->name, (long long)f->count, total, share);
	}
	fputc('\n', out);
}

/* How much of a sampled process was traced, and what that makes of the
 * figures below it. */
static void table_sampling(FILE *out, const struct view *v)
{
	const struct samp_item *s = v->samp;
	char u[FMT_UNIT_MAX];

	fputs("  GPU activity sampled: ", out);
	if (s->windows == 0)
		fputs("no window was traced", out);
	else
		fprintf(out, "%lld window%s, %s traced", (long long)s->windows,
			s->windows == 1 ? "" : "s",
			fmt_duration(u, FMT_UNIT_MAX, (double)s->traced_ns));
	if (s->span_ns > 0)
		fprintf(out, " %s %s", s->windows ? "of" : "in",
			fmt_duration(u, FMT_UNIT_MAX, (double)s->span_ns));
	if (estimable(s)) {
		fprintf(out, " (%.2f%%)", 100.0 * s->share);
		if (s->calls_traced > 0)
			fprintf(out, ", with %lld of the process's %lld launch, copy and memset"
				" calls", (long long)s->calls_traced, (long long)s->calls);
		fprintf(out, "; kernel and copy counts and totals are estimates (~), scaled"
			" by %.4g", s->scale);
	} else {
		fputs("; no traced share to estimate from: kernel and copy counts and totals (~)"
		      " are only what was recorded", out);
	}
	fputs("; SHIMMER_GPU=all records every kernel\n", out);
}

void gpu_table(const struct gpu *g, FILE *out, const struct gpu_proc *p)
{
	struct view v = proc_view(g, p);
	const char *why = not_traced_reason(p);

	if (!gpu_relevant(p, &v))
		return;
	if (why)
		fprintf(out, "  GPU activity: NOT traced: %s%s%s; kernels, copies and GPU busy time"
			     " are unknown, not zero\n",
			why, p->detail ? ": " : "", p->detail ? p->detail : "");
	else
		fprintf(out, "  GPU activity: traced%s%s%s\n",
			v.nkernels ? "" : v.samp ? "; no kernels ran in a window" : "; no kernels ran",
			p->detail ? ": " : "", p->detail ? p->detail : "");
	if (v.samp)
		table_sampling(out, &v);
	fputc('\n', out);
	if (v.nkernels)
		table_kernels(out, &v);
	if (v.ncopies)
		table_copies(out, &v);
	if (v.nranges)
		table_ranges(out, &v);
	if (v.ndevs)
		table_busy(out, &v);
	if (p->nsync)
		table_sync(out, p, &v);
}

/* ---- csv -------------------------------------------------------------------- */

/* pid,rank,event, of a row of p. */
static void csv_head(FILE *out, const struct gpu_proc *p, const char *event)
{
	fprintf(out, "%lld,", (long long)p->pid);
	if (p->has_rank)
		fprintf(out, "%lld", (long long)p->rank);
	fputc(',', out);
	fmt_csv(out, event);
	fputc(',', out);
}

static void csv_share(FILE *out, double part, double wall)
{
	if (wall > 0)
		fprintf(out, "%.6f", part / wall);
}

/* A kernel, copy or range row; count is st.n but for ranges (open too).
 * Count, bytes and total as v estimates them, the share of v's whole (v
 * NULL: a range, never sampled); timed is what was recorded. */
static void csv_agg(FILE *out, const struct gpu_proc *p, const struct view *v,
		    const struct agg *a, const char *kind, int with_bytes)
{
	double scale = v ? v->scale : 1.0;

	csv_head(out, p, a->label);
	fprintf(out, "%.0f,", (double)(a->st.n + (uint64_t)a->open) * scale);
	if (with_bytes)
		fprintf(out, "%.0f", (double)a->bytes * scale);
	fputc(',', out);
	if (a->st.n > 0)
		fprintf(out, "%.0f,%.0f,%.0f,%.0f,%.0f,", (double)a->sum * scale, a->st.mean,
			stats_stddev(&a->st), a->st.min, a->st.max);
	else
		fputs(",,,,,", out);
	fprintf(out, "%llu,", (unsigned long long)a->st.n);
	if (a->st.n > 0)
		csv_share(out, (double)a->sum, v ? v->whole : p->wall_ns);
	fprintf(out, ",%s,%lld\n", kind, (long long)p->proc_id);
}

/* A stream or gpu row: a count, a total and its share, as v estimates them. */
static void csv_busy(FILE *out, const struct gpu_proc *p, const struct view *v,
		     const char *event, const char *kind, int64_t count, int64_t busy)
{
	csv_head(out, p, event);
	fprintf(out, "%.0f,,%.0f,,,,,,", (double)count * v->scale, (double)busy * v->scale);
	csv_share(out, (double)busy, v->whole);
	fprintf(out, ",%s,%lld\n", kind, (long long)p->proc_id);
}

/* A sampled process's rows: its windows (count, traced time, traced share),
 * the span they sample (its share of the wall), and the GPU-work calls
 * made in them (count, and their share of all: 1 / the scale). */
static void csv_sampling(FILE *out, const struct gpu_proc *p, const struct samp_item *s)
{
	csv_head(out, p, "windows");
	fprintf(out, "%lld,,%lld,,,,,,", (long long)s->windows, (long long)s->traced_ns);
	if (s->span_ns > 0)
		fprintf(out, "%.9g", s->share);
	fprintf(out, ",sampling,%lld\n", (long long)p->proc_id);
	csv_head(out, p, "span");
	fputs(",,", out);
	if (s->span_ns > 0)
		fprintf(out, "%lld", (long long)s->span_ns);
	fputs(",,,,,,", out);
	if (s->span_ns > 0)
		csv_share(out, (double)s->span_ns, p->wall_ns);
	fprintf(out, ",sampling,%lld\n", (long long)p->proc_id);
	csv_head(out, p, "calls");
	fprintf(out, "%lld,,,,,,,,", (long long)s->calls_traced);
	if (s->scale > 0)
		fprintf(out, "%.9g", 1.0 / s->scale);
	fprintf(out, ",sampling,%lld\n", (long long)p->proc_id);
}

void gpu_csv(const struct gpu *g, FILE *out, const struct gpu_proc *p)
{
	struct view v = proc_view(g, p);
	char event[64];

	if (!gpu_relevant(p, &v))
		return;
	snprintf(event, sizeof(event), "status:%s", p->status ? p->status : "none");
	csv_head(out, p, event);
	fprintf(out, ",,,,,,,,,gpu,%lld\n", (long long)p->proc_id);
	if (v.samp)
		csv_sampling(out, p, v.samp);
	for (size_t i = 0; i < v.nkernels; i++)
		csv_agg(out, p, &v, v.kernels[i], "kernel", 0);
	for (size_t i = 0; i < v.ncopies; i++) {
		const struct agg *a = v.copies[i];
		int memset = strcmp(a->label, "memset") == 0;

		csv_agg(out, p, &v, a, memset ? "memset" : "memcpy", 1);
	}
	for (size_t i = 0; i < v.nranges; i++)
		csv_agg(out, p, NULL, v.ranges[i], "range", 0);
	for (size_t i = 0; i < v.nstreams; i++) {
		const struct stream_item *s = v.streams[i];

		if (s->key.b < 0)
			snprintf(event, sizeof(event), "device %lld stream ?", (long long)s->key.a);
		else
			snprintf(event, sizeof(event), "device %lld stream %lld",
				 (long long)s->key.a, (long long)s->key.b);
		csv_busy(out, p, &v, event, "stream", s->kernels + s->copies, s->busy);
	}
	for (size_t i = 0; i < v.ndevs; i++) {
		const struct dev_item *d = v.devs[i];

		snprintf(event, sizeof(event), "device %lld", (long long)d->key.a);
		csv_busy(out, p, &v, event, "gpu", d->kernels + d->copies, d->busy);
	}
	if (p->nsync) {
		csv_head(out, p, "sync");
		fprintf(out, "%lld,,", (long long)v.sync_count);
		if (v.sync_exact)
			fprintf(out, "%.0f", v.sync_total);
		fputs(",,,,,,", out);
		if (v.sync_exact)
			csv_share(out, v.sync_total, p->wall_ns);
		fprintf(out, ",gpu,%lld\n", (long long)p->proc_id);
	}
}

/* ---- json ---------------------------------------------------------------- */

static void json_share(FILE *out, double part, double whole)
{
	if (whole > 0)
		fprintf(out, "%.6f", part / whole);
	else
		fputs("null", out);
}

/* "estimated":true, when v estimates the figures that follow. */
static void json_estimated(FILE *out, const struct view *v)
{
	if (v && v->samp)
		fputs("\"estimated\":true,", out);
}

/* "count":...,"total_ns":...,...,"max_ns":... of a (closed ranges only);
 * count and total as v estimates them (v NULL: a range, never sampled). */
static void json_times(FILE *out, const struct agg *a, const struct view *v)
{
	double scale = v ? v->scale : 1.0;

	json_estimated(out, v);
	/* How many the mean and extremes are of: the recorded ones. */
	if (v && v->samp)
		fprintf(out, "\"timed\":%llu,", (unsigned long long)a->st.n);
	fprintf(out, "\"count\":%.0f,", (double)a->st.n * scale);
	if (a->st.n == 0) {
		fputs("\"total_ns\":0,\"mean_ns\":null,\"stddev_ns\":null,\"min_ns\":null,"
		      "\"max_ns\":null", out);
		return;
	}
	fprintf(out, "\"total_ns\":%.0f,\"mean_ns\":%.3f,\"stddev_ns\":%.3f,\"min_ns\":%.0f,"
		     "\"max_ns\":%.0f",
		(double)a->sum * scale, a->st.mean, stats_stddev(&a->st), a->st.min, a->st.max);
}

static void json_kernels(FILE *out, const struct view *v)
{
	fputs(",\"kernels\":[", out);
	for (size_t i = 0; i < v->nkernels; i++) {
		const struct agg *a = v->kernels[i];

		fprintf(out, "%s{\"name\":", i ? "," : "");
		fmt_json(out, a->label);
		fputc(',', out);
		json_times(out, a, v);
		fputs(",\"kernel_share\":", out);
		json_share(out, (double)a->sum, (double)v->kernel_total);
		fputs(",\"wall_share\":", out);
		json_share(out, (double)a->sum, v->whole);
		fputc('}', out);
	}
	fputc(']', out);
}

static void json_copies(FILE *out, const struct view *v)
{
	fputs(",\"copies\":[", out);
	for (size_t i = 0; i < v->ncopies; i++) {
		const struct agg *a = v->copies[i];

		fprintf(out, "%s{\"kind\":", i ? "," : "");
		fmt_json(out, a->label);
		fprintf(out, ",\"bytes\":%.0f,", (double)a->bytes * v->scale);
		json_times(out, a, v);
		fputs(",\"gb_per_s\":", out);
		json_share(out, (double)a->bytes, (double)a->sum);
		fputc('}', out);
	}
	fputc(']', out);
}

static void json_ranges(FILE *out, const struct view *v)
{
	fprintf(out, ",\"open_ranges\":%lld,\"ranges\":[", (long long)v->open_ranges);
	for (size_t i = 0; i < v->nranges; i++) {
		const struct agg *a = v->ranges[i];

		fprintf(out, "%s{\"name\":", i ? "," : "");
		fmt_json(out, a->label);
		fprintf(out, ",\"open\":%lld,", (long long)a->open);
		json_times(out, a, NULL);
		fputc('}', out);
	}
	fputc(']', out);
}

/* ,"kernels":...,"copies":...,"busy_ns":...,"wall_share":... as v estimates them. */
static void json_busy_figures(FILE *out, const struct view *v, int64_t kernels, int64_t copies,
			      int64_t busy)
{
	fputc(',', out);
	json_estimated(out, v);
	fprintf(out, "\"kernels\":%.0f,\"copies\":%.0f,\"busy_ns\":%.0f,\"wall_share\":",
		(double)kernels * v->scale, (double)copies * v->scale, (double)busy * v->scale);
	json_share(out, (double)busy, v->whole);
}

static void json_busy(FILE *out, const struct view *v)
{
	fputs(",\"streams\":[", out);
	for (size_t i = 0; i < v->nstreams; i++) {
		const struct stream_item *s = v->streams[i];

		fprintf(out, "%s{\"device\":%lld,\"stream\":", i ? "," : "", (long long)s->key.a);
		if (s->key.b < 0)
			fputs("null", out);
		else
			fprintf(out, "%lld", (long long)s->key.b);
		json_busy_figures(out, v, s->kernels, s->copies, s->busy);
		fputc('}', out);
	}
	fputs("],\"devices\":[", out);
	for (size_t i = 0; i < v->ndevs; i++) {
		const struct dev_item *d = v->devs[i];

		fprintf(out, "%s{\"device\":%lld", i ? "," : "", (long long)d->key.a);
		json_busy_figures(out, v, d->kernels, d->copies, d->busy);
		fputc('}', out);
	}
	fputc(']', out);
}

/* ,"sampling":{...} of a sampled process; null where the view has NULL. */
static void json_sampling(FILE *out, const struct samp_item *s)
{
	fprintf(out, ",\"sampling\":{\"windows\":%lld,\"traced_ns\":%lld,\"span_ns\":",
		(long long)s->windows, (long long)s->traced_ns);
	if (s->span_ns > 0)
		fprintf(out, "%lld,\"traced_share\":%.9g", (long long)s->span_ns, s->share);
	else
		fputs("null,\"traced_share\":null", out);
	fprintf(out, ",\"calls\":%lld,\"calls_traced\":%lld,\"scale\":", (long long)s->calls,
		(long long)s->calls_traced);
	if (s->scale > 0)
		fprintf(out, "%.9g}", s->scale);
	else
		fputs("null}", out);
}

static void json_sync(FILE *out, const struct gpu_proc *p, const struct view *v)
{
	fprintf(out, ",\"sync\":{\"count\":%lld,\"estimated\":%s,\"total_ns\":%.0f,\"wall_share\":",
		(long long)v->sync_count, v->sync_exact ? "false" : "true", v->sync_total);
	json_share(out, v->sync_total, p->wall_ns);
	fputs(",\"functions\":[", out);
	for (size_t i = 0; i < p->nsync; i++) {
		const struct gpu_sync_fn *f = &p->sync[i];

		fprintf(out, "%s{\"event\":", i ? "," : "");
		fmt_json(out, f->name);
		fprintf(out, ",\"count\":%lld,\"estimated\":%s,\"total_ns\":%.0f,\"wall_share\":",
			(long long)f->count, f->exact ? "false" : "true", f->total_ns);
		json_share(out, f->total_ns, p->wall_ns);
		fputc('}', out);
	}
	fputs("]}", out);
}

void gpu_json(const struct gpu *g, FILE *out, const struct gpu_proc *p)
{
	struct view v = proc_view(g, p);

	fputs("\"gpu\":{\"status\":", out);
	fmt_json(out, p->status);
	fputs(",\"status_detail\":", out);
	fmt_json(out, p->detail);
	fprintf(out, ",\"traced\":%s,\"not_traced_reason\":", traced(p) ? "true" : "false");
	/* A process that never touched CUDA has nothing missing to explain. */
	fmt_json(out, gpu_relevant(p, &v) ? not_traced_reason(p) : NULL);
	if (v.samp)
		json_sampling(out, v.samp);
	fprintf(out, ",\"kernel_total_ns\":%.0f", (double)v.kernel_total * v.scale);
	json_kernels(out, &v);
	json_copies(out, &v);
	json_ranges(out, &v);
	json_busy(out, &v);
	json_sync(out, p, &v);
	fputc('}', out);
}
