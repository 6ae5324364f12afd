/*
 * The GPU aggregates of the model; see model.h (model_gpu).
 *
 * Each GPU table is read with one plain scan and aggregated in maps:
 * kernels by (process, name id), copies by (process, kind), ranges by
 * (process, domain id, name id), and activity by (process, device, stream)
 * and (process, device).  Names are resolved once per group at the end,
 * and groups whose resolved names coincide (two mangled names with one
 * demangling) are merged, so that each name is one row.
 *
 * Busy time is the union of the kernel, copy and memset intervals: kernels
 * on concurrent streams overlap, and a sum would count that time twice.
 * Every interval is kept (24 bytes each) and sorted once by (device,
 * start); one sweep then merges overlapping intervals per device and, as
 * each stream's intervals are a subsequence of that order, per stream.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_int.h"
#include "store.h"

struct agg {
	struct map_key key;
	struct model_gpu_agg a;
	char *owned; /* the name, when composed here */
	int dead;    /* merged into another group */
};

struct stream_item {
	struct map_key key; /* process, device, stream (-1: NULL) */
	struct model_busy b;
	int64_t cur_start, cur_end; /* the merged interval being grown */
	int started;
};

struct dev_item {
	struct map_key key; /* process, device, 0 */
	struct model_busy b;
};

struct span {
	int64_t start;
	int64_t end;
	uint32_t dev;    /* index into devs */
	uint32_t stream; /* index into streams */
};

struct list {
	struct agg **v;
	struct model_gpu_agg **pub; /* the public parts of v, in v's order */
	size_t n;
};

struct model_gpu_data {
	struct map kernels, copies, ranges, streams, devs;
	struct strtab kinds; /* copy kind labels, indexed by copies' key.a */
	struct span *spans;
	size_t nspans, spans_cap;
	/* By process, then total time, then name. */
	struct list kernel_list, copy_list, range_list;
	/* By process, device, stream; and their public parts. */
	struct map_key **stream_list, **dev_list;
	struct model_busy **stream_pub, **dev_pub;
};

/* ---- reading --------------------------------------------------------- */

/* Count one interval of device activity and keep it for the sweep. */
static int activity(struct model_gpu_data *g, int64_t proc_id, sqlite3_stmt *st, int kernel)
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
	d->b.device = dk.a;
	s->b.device = sk.a;
	s->b.stream = sk.b;
	if (kernel)
		d->b.kernels++, s->b.kernels++;
	else
		d->b.copies++, s->b.copies++;
	sp = &g->spans[g->nspans++];
	sp->start = sqlite3_column_int64(st, 3);
	sp->end = sqlite3_column_int64(st, 4);
	sp->dev = (uint32_t)(d - (struct dev_item *)g->devs.items);
	sp->stream = (uint32_t)(s - (struct stream_item *)g->streams.items);
	return 0;
}

static void agg_add(struct agg *a, int64_t ns)
{
	stats_add(&a->a.st, (double)ns);
	a->a.sum += ns;
}

static int kernel_row(struct model *m, struct model_gpu_data *g, sqlite3_stmt *st)
{
	int64_t proc_id = sqlite3_column_int64(st, 0);
	struct map_key k = { proc_id, sqlite3_column_int64(st, 5), 0 };
	struct agg *a;

	if (!model_selected(m, proc_id))
		return 0;
	a = map_get(&g->kernels, &k);
	if (!a)
		return -ENOMEM;
	agg_add(a, sqlite3_column_int64(st, 4) - sqlite3_column_int64(st, 3));
	a->a.graph += sqlite3_column_type(st, 6) != SQLITE_NULL;
	return activity(g, proc_id, st, 1);
}

static int copy_row(struct model *m, struct model_gpu_data *g, sqlite3_stmt *st)
{
	int64_t proc_id = sqlite3_column_int64(st, 0);
	const char *op = (const char *)sqlite3_column_text(st, 5);
	const char *kind = (const char *)sqlite3_column_text(st, 6);
	struct map_key k = { proc_id, 0, 0 };
	struct agg *a;
	int err;

	if (!model_selected(m, proc_id))
		return 0;
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
	a->a.bytes += sqlite3_column_int64(st, 7);
	return activity(g, proc_id, st, 0);
}

static int range_row(struct model *m, struct model_gpu_data *g, sqlite3_stmt *st)
{
	struct map_key k = { sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
			     sqlite3_column_int64(st, 2) };
	struct agg *a;

	if (!model_selected(m, k.proc_id))
		return 0;
	a = map_get(&g->ranges, &k);
	if (!a)
		return -ENOMEM;
	if (sqlite3_column_type(st, 4) == SQLITE_NULL)
		a->a.open++;
	else
		agg_add(a, sqlite3_column_int64(st, 4) - sqlite3_column_int64(st, 3));
	return 0;
}

static int each(struct model *m, struct model_gpu_data *g, const char *sql,
		int (*row)(struct model *, struct model_gpu_data *, sqlite3_stmt *))
{
	sqlite3_stmt *st = NULL;
	int err, r;

	err = model_prepare(m, sql, &st);
	if (err)
		return err;
	while ((r = store_step(model_db(m), st)) > 0)
		if ((err = row(m, g, st)))
			break;
	sqlite3_finalize(st);
	return err ? err : r;
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
static void sort_spans(struct model_gpu_data *g)
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

static void sweep(struct model_gpu_data *g)
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

			prev->b.busy_ns += ce - cs;
			started = 0;
		}
		merge_interval(&cs, &ce, &d->b.busy_ns, &started, sp->start, sp->end);
		merge_interval(&s->cur_start, &s->cur_end, &s->b.busy_ns, &s->started, sp->start,
			       sp->end);
	}
	if (g->nspans > 0) {
		struct dev_item *last = map_item(&g->devs, g->spans[g->nspans - 1].dev);

		last->b.busy_ns += ce - cs;
	}
	for (size_t i = 0; i < g->streams.n; i++) {
		struct stream_item *s = map_item(&g->streams, i);

		if (s->started)
			s->b.busy_ns += s->cur_end - s->cur_start;
	}
	/* The intervals are not needed past this point. */
	free(g->spans);
	g->spans = NULL;
	g->nspans = g->spans_cap = 0;
}

/* ---- names and order ------------------------------------------------------ */

static int kernel_label(struct model *m, struct agg *a)
{
	const char *s = model_string(m, a->key.proc_id, a->key.a);

	if (s) {
		a->a.name = s;
		return 0;
	}
	if (asprintf(&a->owned, "kernel#%lld", (long long)a->key.a) < 0)
		return a->owned = NULL, -ENOMEM;
	a->a.name = a->owned;
	return 0;
}

/* "name", or "domain:name" outside NVTX's default domain (id 0). */
static int range_label(struct model *m, struct agg *a)
{
	const char *d = a->key.a ? model_string(m, a->key.proc_id, a->key.a) : NULL;
	const char *n = model_string(m, a->key.proc_id, a->key.b);
	char dbuf[32], nbuf[32];
	const char *dom = d ? d : dbuf, *name = n ? n : nbuf;
	int r;

	snprintf(dbuf, sizeof(dbuf), "domain#%lld", (long long)a->key.a);
	snprintf(nbuf, sizeof(nbuf), "range#%lld", (long long)a->key.b);
	if (a->key.a == 0)
		r = asprintf(&a->owned, "%s", name);
	else
		r = asprintf(&a->owned, "%s:%s", dom, name);
	if (r < 0)
		return a->owned = NULL, -ENOMEM;
	a->a.name = a->owned;
	a->a.domain = a->key.a ? dom : NULL;
	return 0;
}

static int cmp_label(const void *x, const void *y)
{
	const struct agg *a = *(struct agg *const *)x, *b = *(struct agg *const *)y;

	if (a->key.proc_id != b->key.proc_id)
		return a->key.proc_id < b->key.proc_id ? -1 : 1;
	return strcmp(a->a.name, b->a.name);
}

static int cmp_total(const void *x, const void *y)
{
	const struct agg *a = *(struct agg *const *)x, *b = *(struct agg *const *)y;

	if (a->key.proc_id != b->key.proc_id)
		return a->key.proc_id < b->key.proc_id ? -1 : 1;
	if (a->a.sum != b->a.sum)
		return a->a.sum > b->a.sum ? -1 : 1;
	return strcmp(a->a.name, b->a.name);
}

/* Name every group of groups with label(), merge the groups of one process
 * that share a name, and list the rest by process and total time. */
static int make_list(struct model *m, struct model_gpu_data *g, struct map *groups,
		     int (*label)(struct model *, struct agg *), struct list *l)
{
	size_t n = 0;
	int err;

	l->v = calloc(groups->n + 1, sizeof(*l->v));
	if (!l->v)
		return -ENOMEM;
	for (size_t i = 0; i < groups->n; i++) {
		struct agg *a = map_item(groups, i);

		if (label) {
			err = label(m, a);
			if (err)
				return err;
		} else {
			a->a.name = g->kinds.v[a->key.a];
		}
		l->v[i] = a;
	}
	qsort(l->v, groups->n, sizeof(*l->v), cmp_label);
	for (size_t i = 0; i < groups->n; i++) {
		struct agg *a = l->v[i];

		if (n > 0 && cmp_label(&l->v[n - 1], &a) == 0) {
			struct agg *keep = l->v[n - 1];

			stats_merge(&keep->a.st, &a->a.st);
			keep->a.sum += a->a.sum;
			keep->a.bytes += a->a.bytes;
			keep->a.open += a->a.open;
			keep->a.graph += a->a.graph;
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

static int key_list(const struct map *groups, struct map_key ***out)
{
	struct map_key **v = calloc(groups->n + 1, sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < groups->n; i++)
		v[i] = map_item(groups, i);
	qsort(v, groups->n, sizeof(*v), cmp_key);
	*out = v;
	return 0;
}

/* ---- loading ---------------------------------------------------------------- */

static int load(struct model *m)
{
	struct model_gpu_data *g = calloc(1, sizeof(*g));
	int err = 0;

	if (!g)
		return -ENOMEM;
	m->gpu = g;
	/* Names come from the strings table: read before the groups. */
	(void)model_string(m, 0, 0);
	g->kernels.item_size = sizeof(struct agg);
	g->copies.item_size = sizeof(struct agg);
	g->ranges.item_size = sizeof(struct agg);
	g->streams.item_size = sizeof(struct stream_item);
	g->devs.item_size = sizeof(struct dev_item);
	/* Version 1 stores have no GPU tables: nothing to report. */
	if (model_schema_version(m) >= 2 && model_nselected(m) > 0) {
		err = each(m, g, "SELECT proc_id, device, stream, start_ns, end_ns, name_id,"
			   " graph_id FROM kernels", kernel_row);
		if (!err)
			err = each(m, g, "SELECT proc_id, device, stream, start_ns, end_ns, op,"
				   " copy_kind, bytes FROM gpu_copies", copy_row);
		if (!err)
			err = each(m, g, "SELECT proc_id, domain_id, name_id, start_ns, end_ns"
				   " FROM ranges", range_row);
	}
	if (err)
		return err;
	sweep(g);
	err = make_list(m, g, &g->kernels, kernel_label, &g->kernel_list);
	if (!err)
		err = make_list(m, g, &g->copies, NULL, &g->copy_list);
	if (!err)
		err = make_list(m, g, &g->ranges, range_label, &g->range_list);
	if (!err)
		err = key_list(&g->streams, &g->stream_list);
	if (!err)
		err = key_list(&g->devs, &g->dev_list);
	return err;
}

static void free_aggs(struct map *groups)
{
	for (size_t i = 0; i < groups->n; i++)
		free(((struct agg *)map_item(groups, i))->owned);
	map_free(groups);
}

void model_gpu_free(struct model_gpu_data *g)
{
	if (!g)
		return;
	free_aggs(&g->kernels);
	free_aggs(&g->copies);
	free_aggs(&g->ranges);
	map_free(&g->streams);
	map_free(&g->devs);
	strtab_free(&g->kinds);
	free(g->spans);
	free(g->kernel_list.v);
	free(g->copy_list.v);
	free(g->range_list.v);
	free(g->kernel_list.pub);
	free(g->copy_list.pub);
	free(g->range_list.pub);
	free(g->stream_list);
	free(g->dev_list);
	free(g->stream_pub);
	free(g->dev_pub);
	free(g);
}

/* ---- per process -------------------------------------------------------------- */

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

/* The public parts of l's groups, and of the busy items of keys. */
static int publish(struct model_gpu_data *g)
{
	struct list *l[] = { &g->kernel_list, &g->copy_list, &g->range_list };

	for (size_t k = 0; k < 3; k++) {
		l[k]->pub = calloc(l[k]->n + 1, sizeof(*l[k]->pub));
		if (!l[k]->pub)
			return -ENOMEM;
		for (size_t i = 0; i < l[k]->n; i++)
			l[k]->pub[i] = &l[k]->v[i]->a;
	}
	g->stream_pub = calloc(g->streams.n + 1, sizeof(*g->stream_pub));
	g->dev_pub = calloc(g->devs.n + 1, sizeof(*g->dev_pub));
	if (!g->stream_pub || !g->dev_pub)
		return -ENOMEM;
	for (size_t i = 0; i < g->streams.n; i++)
		g->stream_pub[i] = &((struct stream_item *)g->stream_list[i])->b;
	for (size_t i = 0; i < g->devs.n; i++)
		g->dev_pub[i] = &((struct dev_item *)g->dev_list[i])->b;
	return 0;
}

int model_gpu(struct model *m, const struct model_proc *p, struct model_gpu *out)
{
	struct model_gpu_data *g;
	size_t i, n;
	int err;

	memset(out, 0, sizeof(*out));
	out->proc = p;
	out->scale = 1;
	if (!m->gpu) {
		err = load(m);
		if (!err)
			err = publish(m->gpu);
		if (err) {
			model_gpu_free(m->gpu);
			m->gpu = NULL;
			return err;
		}
	}
	g = m->gpu;
	if (p->sampling && p->sampling->scale > 0)
		out->scale = p->sampling->scale;
	i = proc_run((void *const *)g->kernel_list.v, g->kernel_list.n, p->proc_id, &n);
	out->kernels = g->kernel_list.pub + i;
	out->nkernels = n;
	i = proc_run((void *const *)g->copy_list.v, g->copy_list.n, p->proc_id, &n);
	out->copies = g->copy_list.pub + i;
	out->ncopies = n;
	i = proc_run((void *const *)g->range_list.v, g->range_list.n, p->proc_id, &n);
	out->ranges = g->range_list.pub + i;
	out->nranges = n;
	i = proc_run((void *const *)g->stream_list, g->streams.n, p->proc_id, &n);
	out->streams = (const struct model_busy *const *)g->stream_pub + i;
	out->nstreams = n;
	i = proc_run((void *const *)g->dev_list, g->devs.n, p->proc_id, &n);
	out->devices = (const struct model_busy *const *)g->dev_pub + i;
	out->ndevices = n;
	for (i = 0; i < out->nkernels; i++) {
		out->kernel_total += out->kernels[i]->sum;
		out->kernel_count += (int64_t)out->kernels[i]->st.n;
		out->graph_kernels += out->kernels[i]->graph;
	}
	for (i = 0; i < out->nranges; i++)
		out->open_ranges += out->ranges[i]->open;
	return 0;
}
