/*
 * shimmer export --format chrome: Trace Event Format JSON, as the Perfetto
 * UI and chrome://tracing load it (docs/usage.md has the layout).
 *
 * Tracks: each traced process is a trace process (named "exe rank R" with
 * its pid); each CPU thread a thread track (the CUDA runtime calls the
 * shim intercepted, the API calls CUPTI saw start GPU work nested inside
 * them, NVTX/shimmer push ranges, markers); each GPU stream a thread track
 * of its own, numbered above any real tid (GPU_TID); the GPU sampling
 * windows another.  Start/end ranges, which may cross threads, are async
 * events of the process.  A flow joins each API call to the kernel, copy
 * or memset it launched (same process and correlation id).  Live memory is
 * a counter per process and memory (host, cuda:N, ...), the model's live
 * bytes (model_mem_events, the peak's own definition): every change would
 * be millions of samples, so each track keeps, per time bucket of
 * COUNTER_BUCKETS per process life, the highest value and the last one,
 * and the peak is always among them.  A process whose recording is
 * incomplete (events lost, or cut short by a lost collector) gets a
 * warning track first in it and a label that says so (warnings()), as
 * export.c says it on stderr: a trace is looked at, its stderr not.
 *
 * Before writing anything, the file's size is estimated from row counts;
 * above --max-mb (500 MB, about what a browser tab loads) the export is
 * refused with advice.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "export.h"
#include "fmt.h"
#include "present.h"
#include "store.h"

#define COUNTER_BUCKETS 20000
/* Thread ids of the tracks that are no thread: above any Linux tid. */
#define GPU_TID(dev, stream) \
	((int64_t)(1 << 30) + (((int64_t)(dev) & 0x3ff) << 20) + ((int64_t)(stream) & 0xfffff))
#define WINDOWS_TID ((int64_t)(1 << 30) - 1)
#define WARNING_TID ((int64_t)(1 << 30) - 2)

struct chrome {
	struct export *x;
	struct xout *w;
	int first;
	int64_t flows;
	struct launch *launches; /* the API calls written, by (proc, correlation) */
	size_t nlaunches, launches_cap, hint;
	int unsorted;
	struct map streams; /* (proc, device, stream) -> struct stream_item */
	struct gop *gops;   /* the GPU operations while planning their lanes */
	size_t gops_cap;
	int overlaps;
	uint32_t *lane;     /* each GPU operation's lane, in the order written; NULL: all 0 */
	size_t nops, nkernels; /* GPU operations planned, of which kernels */
	size_t seq, seq_end;   /* the next operation written, the end of its table's */
	struct map ranges;  /* (proc, push range id, 0) -> struct range_item */
	struct map jnames;  /* (proc, string id) -> index into jtext */
	struct strtab jtext; /* names as JSON literals */
	sqlite3_stmt *name_st;
};

/* A push range written: its end, the range it was pushed inside (-1:
 * none) and whether it went on its thread's track. */
struct range_item {
	struct map_key k;
	int64_t end, parent;
	int slice;
};

/* An API call that started GPU work, where a flow to its work starts. */
struct launch {
	int64_t proc_id, corr, tid, start;
};

static int cmp_launch(const void *x, const void *y)
{
	const struct launch *a = x, *b = y;

	if (a->proc_id != b->proc_id)
		return a->proc_id < b->proc_id ? -1 : 1;
	return a->corr < b->corr ? -1 : a->corr > b->corr;
}

/* A GPU stream: its operations' latest end while planning, and its lanes
 * (lane 0 is the stream's own track; lane L > 0 is track lane_tid + L - 1). */
/* A GPU operation while planning: when it ran, its stream (its item's
 * index in streams) and its place among the operations written. */
struct gop {
	int64_t start, end;
	uint32_t stream, seq;
};

struct stream_item {
	struct map_key key;
	int64_t max_end;
	int64_t lane_tid;
	uint32_t nlanes;
	int any, overlaps;
};

struct jname_item {
	struct map_key key;
	int64_t idx;
};

/* ---- writing events ---- */

static void sep(struct chrome *c)
{
	if (c->first)
		c->first = 0;
	else
		xout_lit(c->w, ",\n");
}

/* ns of p's clock on the export's, as microseconds */
static void ts(struct chrome *c, const struct xproc *p, int64_t ns)
{
	xout_us(c->w, ns + p->offset_ns - c->x->origin_ns);
}

/* {"ph":PH,"pid":P,"tid":T,"ts":TS  (the caller closes it) */
static void ev(struct chrome *c, const char *ph, const struct xproc *p, int64_t tid, int64_t ns)
{
	struct xout *w = c->w;

	sep(c);
	xout_lit(w, "{\"ph\":\"");
	xout_str(w, ph);
	xout_lit(w, "\",\"pid\":");
	xout_i64(w, p->trace_pid);
	xout_lit(w, ",\"tid\":");
	xout_i64(w, tid);
	xout_lit(w, ",\"ts\":");
	ts(c, p, ns);
}

static void dur(struct chrome *c, int64_t start, int64_t end)
{
	xout_lit(c->w, ",\"dur\":");
	xout_us(c->w, end > start ? end - start : 0);
}

static void arg_i(struct xout *w, const char *key, int64_t v, int *n)
{
	xout_str(w, *n ? ",\"" : "\"");
	xout_str(w, key);
	xout_lit(w, "\":");
	xout_i64(w, v);
	(*n)++;
}

static void arg_s(struct xout *w, const char *key, const char *v, int *n)
{
	xout_str(w, *n ? ",\"" : "\"");
	xout_str(w, key);
	xout_lit(w, "\":");
	xout_json(w, v);
	(*n)++;
}

static void arg_dim(struct xout *w, const char *key, sqlite3_stmt *st, int col, int *n)
{
	xout_str(w, *n ? ",\"" : "\"");
	xout_str(w, key);
	xout_lit(w, "\":[");
	for (int i = 0; i < 3; i++) {
		if (i)
			xout_lit(w, ",");
		xout_i64(w, sqlite3_column_int64(st, col + i));
	}
	xout_lit(w, "]");
	(*n)++;
}

/* A metadata event naming or ordering a process or thread. */
static void meta(struct chrome *c, const struct xproc *p, int64_t tid, const char *what,
		 const char *key, const char *sval, int64_t ival)
{
	struct xout *w = c->w;

	sep(c);
	xout_lit(w, "{\"ph\":\"M\",\"pid\":");
	xout_i64(w, p->trace_pid);
	xout_lit(w, ",\"tid\":");
	xout_i64(w, tid);
	xout_lit(w, ",\"name\":\"");
	xout_str(w, what);
	xout_lit(w, "\",\"args\":{\"");
	xout_str(w, key);
	xout_lit(w, "\":");
	if (sval)
		xout_json(w, sval);
	else
		xout_i64(w, ival);
	xout_lit(w, "}}");
}

/* A JSON literal of a process's string: escaped once per name (as
 * xout_json() writes it: fmt.h). */
static char *json_dup(const char *s)
{
	size_t n = strlen(s), i = 0, o = 0;
	/* each byte of s at most FMT_JSON_CHAR_MAX bytes, the quotes, the end */
	char *out = malloc(n * FMT_JSON_CHAR_MAX + 3);

	if (!out)
		return NULL;
	out[o++] = '"';
	while (i < n) {
		size_t plain = fmt_json_plain(s + i, n - i, 0), len;

		memcpy(out + o, s + i, plain);
		o += plain;
		i += plain;
		if (i < n) {
			i += fmt_json_char(s + i, n - i, 0, out + o, &len);
			o += len;
		}
	}
	out[o++] = '"';
	out[o] = 0;
	return out;
}

static int jname(struct chrome *c, int64_t proc_id, int64_t id, const char **lit)
{
	struct map_key k = { proc_id, id, 0 };
	struct jname_item *it = map_find(&c->jnames, &k);
	const char *s;
	char *j;
	int64_t idx;
	int err = 0, r;

	if (!it) {
		sqlite3_reset(c->name_st);
		sqlite3_bind_int64(c->name_st, 1, proc_id);
		sqlite3_bind_int64(c->name_st, 2, id);
		r = store_step(c->x->db, c->name_st);
		if (r < 0)
			return r;
		s = r > 0 ? (const char *)sqlite3_column_text(c->name_st, 0) : NULL;
		j = json_dup(s ? s : "?");
		if (!j)
			return -ENOMEM;
		err = strtab_index(&c->jtext, j, &idx);
		free(j);
		if (err)
			return err;
		it = map_get(&c->jnames, &k);
		if (!it)
			return -ENOMEM;
		it->idx = idx;
	}
	*lit = c->jtext.v[it->idx];
	return 0;
}

static void name_lit(struct chrome *c, const char *lit, const char *cat)
{
	xout_lit(c->w, ",\"name\":");
	xout_str(c->w, lit);
	xout_lit(c->w, ",\"cat\":\"");
	xout_str(c->w, cat);
	xout_lit(c->w, "\"");
}

static void name_raw(struct chrome *c, const char *name, const char *cat)
{
	xout_lit(c->w, ",\"name\":");
	xout_json(c->w, name);
	xout_lit(c->w, ",\"cat\":\"");
	xout_str(c->w, cat);
	xout_lit(c->w, "\"");
}

/* ---- size estimate ---- */

struct est_table {
	int min_schema;
	const char *sql; /* proc_id, count(*) of rows overlapping [?1, ?2] */
	double bytes;    /* per row */
};

static const struct est_table est_tables[] = {
	{ 1, "SELECT proc_id, count(*) FROM cuda_calls WHERE end_ns >= ?1 AND start_ns <= ?2"
	     " GROUP BY proc_id", 190 },
	/* the call, and its flow's two ends */
	{ 2, "SELECT proc_id, count(*) FROM gpu_api WHERE end_ns >= ?1 AND start_ns <= ?2"
	     " GROUP BY proc_id", 200 + 2 * 110 },
	{ 2, "SELECT proc_id, count(*) FROM kernels WHERE end_ns >= ?1 AND start_ns <= ?2"
	     " GROUP BY proc_id", 420 },
	{ 2, "SELECT proc_id, count(*) FROM gpu_copies WHERE end_ns >= ?1 AND start_ns <= ?2"
	     " GROUP BY proc_id", 260 },
	{ 2, "SELECT proc_id, count(*) FROM ranges WHERE coalesce(end_ns, start_ns) >= ?1"
	     " AND start_ns <= ?2 GROUP BY proc_id", 160 },
	{ 2, "SELECT proc_id, count(*) FROM markers WHERE ts_ns >= ?1 AND ts_ns <= ?2"
	     " GROUP BY proc_id", 130 },
	{ 2, "SELECT proc_id, count(*) FROM counters WHERE ts_ns >= ?1 AND ts_ns <= ?2"
	     " GROUP BY proc_id", 120 },
};

/* Memory counters: two samples a bucket at most, per memory (the model's
 * memories, read by the heap pass that makes the counters anyway). */
#define COUNTER_BYTES 110

static int estimate(struct chrome *c, double *bytes)
{
	struct export *x = c->x;
	int64_t lo = INT64_MAX, hi = INT64_MIN;
	int err = 0, r;

	*bytes = 0;
	for (size_t i = 0; i < x->nprocs; i++) {
		if (x->procs[i].begin_abs < lo)
			lo = x->procs[i].begin_abs;
		if (x->procs[i].end_abs > hi)
			hi = x->procs[i].end_abs;
	}
	for (size_t t = 0; !err && t < sizeof(est_tables) / sizeof(est_tables[0]); t++) {
		sqlite3_stmt *st = NULL;

		if (x->schema < est_tables[t].min_schema)
			continue;
		err = store_prepare(x->db, est_tables[t].sql, &st);
		if (err)
			break;
		sqlite3_bind_int64(st, 1, lo);
		sqlite3_bind_int64(st, 2, hi);
		while ((r = store_step(x->db, st)) > 0)
			if (export_proc(x, sqlite3_column_int64(st, 0)))
				*bytes += (double)sqlite3_column_int64(st, 1) * est_tables[t].bytes;
		if (r < 0)
			err = r;
		sqlite3_finalize(st);
	}
	if (!err) {
		struct model_mem *const *mems;
		size_t n;

		err = model_memories(x->m, &mems, &n);
		for (size_t i = 0; !err && i < n; i++) {
			double rows = 2.0 * (double)mems[i]->rows;

			if (export_proc(x, mems[i]->proc->proc_id))
				*bytes += (rows < 2.0 * COUNTER_BUCKETS ? rows : 2.0 * COUNTER_BUCKETS) *
					  COUNTER_BYTES;
		}
	}
	return err;
}

/* ---- the tables ---- */

/* Rows of sql (proc_id, start, end first) on db of selected processes
 * within the time window, each to row(). */
static int each_on(struct chrome *c, sqlite3 *db, int min_schema, const char *sql,
		   int (*row)(struct chrome *c, const struct xproc *p, sqlite3_stmt *st))
{
	sqlite3_stmt *st = NULL;
	int err, r;

	if (c->x->schema < min_schema)
		return 0;
	err = store_prepare(db, sql, &st);
	if (err)
		return err;
	while ((r = store_step(db, st)) > 0) {
		const struct xproc *p = export_proc(c->x, sqlite3_column_int64(st, 0));
		int64_t start = sqlite3_column_int64(st, 1);
		int64_t end = sqlite3_column_type(st, 2) == SQLITE_NULL ? INT64_MAX
									 : sqlite3_column_int64(st, 2);

		if (!p || !export_in(p, start, end))
			continue;
		r = row(c, p, st);
		if (r < 0)
			break;
	}
	sqlite3_finalize(st);
	return r < 0 ? r : 0;
}

static int each(struct chrome *c, int min_schema, const char *sql,
		int (*row)(struct chrome *c, const struct xproc *p, sqlite3_stmt *st))
{
	return each_on(c, c->x->db, min_schema, sql, row);
}

static int cuda_row(struct chrome *c, const struct xproc *p, sqlite3_stmt *st)
{
	struct xout *w = c->w;
	int n = 0;

	ev(c, "X", p, sqlite3_column_int64(st, 3), sqlite3_column_int64(st, 1));
	dur(c, sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2));
	name_raw(c, (const char *)sqlite3_column_text(st, 4), "cuda");
	xout_lit(w, ",\"args\":{");
	arg_i(w, "ret", sqlite3_column_int64(st, 5), &n);
	if (sqlite3_column_type(st, 6) != SQLITE_NULL)
		arg_i(w, "device", sqlite3_column_int64(st, 6), &n);
	if (sqlite3_column_int64(st, 7))
		arg_i(w, "stream", sqlite3_column_int64(st, 7), &n);
	if (sqlite3_column_int64(st, 8))
		arg_i(w, "bytes", sqlite3_column_int64(st, 8), &n);
	xout_lit(w, "}}");
	return 0;
}

static int api_row(struct chrome *c, const struct xproc *p, sqlite3_stmt *st)
{
	struct launch *a;
	const char *lit;
	int n = 0, err = jname(c, p->proc_id, sqlite3_column_int64(st, 4), &lit);

	if (!err)
		err = array_grow(&c->launches, &c->launches_cap, c->nlaunches, sizeof(*a));
	if (err)
		return err;
	a = &c->launches[c->nlaunches++];
	*a = (struct launch){ p->proc_id, sqlite3_column_int64(st, 5), sqlite3_column_int64(st, 3),
			      sqlite3_column_int64(st, 1) };
	/* stored by id: in correlation order, unless the store says otherwise */
	if (c->nlaunches > 1 && cmp_launch(a - 1, a) > 0)
		c->unsorted = 1;
	ev(c, "X", p, a->tid, a->start);
	dur(c, a->start, sqlite3_column_int64(st, 2));
	name_lit(c, lit, "cuda_api");
	xout_lit(c->w, ",\"args\":{");
	arg_s(c->w, "domain", (const char *)sqlite3_column_text(st, 6), &n);
	arg_i(c->w, "correlation", a->corr, &n);
	xout_lit(c->w, "}}");
	return 0;
}

/* The track of the next GPU operation written (kernels, then copies and
 * memsets, in the order lanes() planned them): its stream's, or one of its
 * stream's overlap lanes. */
static int gpu_track(struct chrome *c, const struct xproc *p, int64_t dev, int64_t stream,
		     int64_t *tid)
{
	struct map_key k = { p->proc_id, dev, stream };
	const struct stream_item *s = map_get(&c->streams, &k);
	uint32_t lane = c->lane && c->seq < c->seq_end ? c->lane[c->seq] : 0;

	if (!s)
		return -ENOMEM;
	c->seq++;
	*tid = lane ? s->lane_tid + lane - 1 : GPU_TID(dev, stream);
	return 0;
}

/* The launching call of (proc, corr), or NULL.  Work is stored nearly in
 * the order of its calls, so the search starts where the last one ended. */
static const struct launch *launch_of(struct chrome *c, int64_t proc_id, int64_t corr)
{
	struct launch k = { proc_id, corr, 0, 0 };
	size_t lo = 0, hi = c->nlaunches, h = c->hint;

	if (h < c->nlaunches && cmp_launch(&c->launches[h], &k) <= 0) {
		lo = h;
		/* gallop forward from the hint */
		for (size_t step = 1; lo + step < hi && cmp_launch(&c->launches[lo + step], &k) <= 0;
		     step *= 2)
			lo += step;
	}
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (cmp_launch(&c->launches[mid], &k) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < c->nlaunches && cmp_launch(&c->launches[lo], &k) == 0) {
		c->hint = lo + 1;
		return &c->launches[lo];
	}
	return NULL;
}

/* The flow's two ends, when the launching call was written. */
static void flow(struct chrome *c, const struct xproc *p, int64_t corr, int64_t tid, int64_t ns)
{
	const struct launch *a = launch_of(c, p->proc_id, corr);
	int64_t id;

	if (!a)
		return;
	id = ++c->flows;
	ev(c, "s", p, a->tid, a->start);
	xout_lit(c->w, ",\"id\":");
	xout_i64(c->w, id);
	xout_lit(c->w, ",\"name\":\"launch\",\"cat\":\"launch\"}");
	ev(c, "f", p, tid, ns);
	xout_lit(c->w, ",\"bp\":\"e\",\"id\":");
	xout_i64(c->w, id);
	xout_lit(c->w, ",\"name\":\"launch\",\"cat\":\"launch\"}");
}

/* The stream column of a GPU row: -1 when unknown. */
static int64_t col_stream(sqlite3_stmt *st, int col)
{
	return sqlite3_column_type(st, col) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, col);
}

/* What every GPU row ends with: where it ran, its correlation, the closing
 * braces, and the flow from its launching call. */
static void gpu_row_end(struct chrome *c, const struct xproc *p, int64_t dev, int64_t stream,
			int64_t corr, int64_t tid, int64_t start, int *n)
{
	arg_i(c->w, "device", dev, n);
	arg_i(c->w, "stream", stream, n);
	arg_i(c->w, "correlation", corr, n);
	xout_lit(c->w, "}}");
	flow(c, p, corr, tid, start);
}

static int kernel_row(struct chrome *c, const struct xproc *p, sqlite3_stmt *st)
{
	struct xout *w = c->w;
	int64_t dev = sqlite3_column_int64(st, 3);
	int64_t stream = col_stream(st, 4);
	int64_t start = sqlite3_column_int64(st, 1), corr = sqlite3_column_int64(st, 5), tid;
	const char *lit;
	int n = 0, err = jname(c, p->proc_id, sqlite3_column_int64(st, 6), &lit);

	if (!err)
		err = gpu_track(c, p, dev, stream, &tid);
	if (err)
		return err;
	ev(c, "X", p, tid, start);
	dur(c, start, sqlite3_column_int64(st, 2));
	name_lit(c, lit, "kernel");
	xout_lit(w, ",\"args\":{");
	arg_dim(w, "grid", st, 7, &n);
	arg_dim(w, "block", st, 10, &n);
	arg_i(w, "registers", sqlite3_column_int64(st, 13), &n);
	arg_i(w, "static_smem", sqlite3_column_int64(st, 14), &n);
	arg_i(w, "dynamic_smem", sqlite3_column_int64(st, 15), &n);
	if (sqlite3_column_type(st, 16) != SQLITE_NULL)
		arg_i(w, "graph_id", sqlite3_column_int64(st, 16), &n);
	gpu_row_end(c, p, dev, stream, corr, tid, start, &n);
	return 0;
}

static int copy_row(struct chrome *c, const struct xproc *p, sqlite3_stmt *st)
{
	struct xout *w = c->w;
	const char *op = (const char *)sqlite3_column_text(st, 3);
	const char *kind = (const char *)sqlite3_column_text(st, 8);
	int64_t dev = sqlite3_column_int64(st, 4);
	int64_t stream = col_stream(st, 5);
	int64_t start = sqlite3_column_int64(st, 1), corr = sqlite3_column_int64(st, 6), tid;
	int memset_ = op && strcmp(op, "memset") == 0, n = 0;
	char name[64];
	int err = gpu_track(c, p, dev, stream, &tid);

	if (err)
		return err;
	if (memset_)
		snprintf(name, sizeof(name), "memset");
	else
		snprintf(name, sizeof(name), "memcpy %.40s", kind ? kind : "?");
	ev(c, "X", p, tid, start);
	dur(c, start, sqlite3_column_int64(st, 2));
	name_raw(c, name, memset_ ? "memset" : "memcpy");
	xout_lit(w, ",\"args\":{");
	arg_i(w, "bytes", sqlite3_column_int64(st, 7), &n);
	if (memset_) {
		arg_i(w, "value", sqlite3_column_int64(st, 11), &n);
		arg_s(w, "memory", (const char *)sqlite3_column_text(st, 10), &n);
	} else {
		arg_s(w, "copy_kind", kind, &n);
		arg_s(w, "src_kind", (const char *)sqlite3_column_text(st, 9), &n);
		arg_s(w, "dst_kind", (const char *)sqlite3_column_text(st, 10), &n);
	}
	gpu_row_end(c, p, dev, stream, corr, tid, start, &n);
	return 0;
}

/*
 * Whether a push range nests in the slices of its thread: it ends no later
 * than each range on the thread's track that was open when it began.  NVTX
 * pops the innermost range of the pop's own domain, so where domains
 * interleave (an application's ranges and a library's, NCCL's) a range
 * can outlive one that enclosed it, and a thread's slices must nest: such
 * a range is written as an async slice, as start/end ranges are.  Every
 * range open at a push is on the pushed range's parent_id chain (with
 * some that closed since); rows come in id order, parents first.
 */
static int range_nests(struct chrome *c, const struct xproc *p, sqlite3_stmt *st,
		       int64_t start, int64_t end, int *nests)
{
	struct map_key k = { p->proc_id, 0, 0 };
	int64_t parent = sqlite3_column_type(st, 8) == SQLITE_NULL ? -1
								     : sqlite3_column_int64(st, 8);
	struct range_item *r;

	*nests = 1;
	for (int64_t up = parent; up >= 0 && *nests;) {
		const struct range_item *a;

		k.a = up;
		a = map_find(&c->ranges, &k);
		if (!a)
			break;
		if (a->slice && a->end > start && end > a->end)
			*nests = 0;
		up = a->parent < up ? a->parent : -1;
	}
	k.a = sqlite3_column_int64(st, 7);
	r = map_get(&c->ranges, &k);
	if (!r)
		return -ENOMEM;
	r->end = end;
	r->parent = parent;
	r->slice = *nests;
	return 0;
}

static int range_row(struct chrome *c, const struct xproc *p, sqlite3_stmt *st)
{
	struct xout *w = c->w;
	int64_t start = sqlite3_column_int64(st, 1);
	int open = sqlite3_column_type(st, 2) == SQLITE_NULL;
	int64_t end = open ? (p->end_ns > start ? p->end_ns : start) : sqlite3_column_int64(st, 2);
	int push = strcmp((const char *)sqlite3_column_text(st, 4), "push") == 0;
	const char *lit, *dom = NULL;
	int n = 0, err = jname(c, p->proc_id, sqlite3_column_int64(st, 5), &lit);

	if (!err && push)
		err = range_nests(c, p, st, start, end, &push);
	if (err)
		return err;
	if (sqlite3_column_int64(st, 6) &&
	    (err = jname(c, p->proc_id, sqlite3_column_int64(st, 6), &dom)))
		return err;
	if (push) {
		ev(c, "X", p, sqlite3_column_int64(st, 3), start);
		dur(c, start, end);
	} else {
		/* may end on another thread: an async slice of the process */
		ev(c, "b", p, sqlite3_column_int64(st, 3), start);
		xout_lit(w, ",\"id\":");
		xout_i64(w, sqlite3_column_int64(st, 7));
	}
	name_lit(c, lit, "range");
	xout_lit(w, ",\"args\":{");
	if (dom) {
		xout_lit(w, "\"domain\":");
		xout_str(w, dom);
		n++;
	}
	if (open)
		arg_i(w, "open", 1, &n);
	xout_lit(w, "}}");
	if (!push) {
		ev(c, "e", p, sqlite3_column_int64(st, 3), end);
		xout_lit(w, ",\"id\":");
		xout_i64(w, sqlite3_column_int64(st, 7));
		name_lit(c, lit, "range");
		xout_lit(w, "}");
	}
	return 0;
}

static int marker_row(struct chrome *c, const struct xproc *p, sqlite3_stmt *st)
{
	const char *lit;
	int err = jname(c, p->proc_id, sqlite3_column_int64(st, 4), &lit);

	if (err)
		return err;
	ev(c, "i", p, sqlite3_column_int64(st, 3), sqlite3_column_int64(st, 1));
	xout_lit(c->w, ",\"s\":\"t\"");
	name_lit(c, lit, "marker");
	xout_lit(c->w, "}");
	return 0;
}

static int counter_row(struct chrome *c, const struct xproc *p, sqlite3_stmt *st)
{
	const char *lit;
	int err = jname(c, p->proc_id, sqlite3_column_int64(st, 3), &lit);

	if (err)
		return err;
	ev(c, "C", p, 0, sqlite3_column_int64(st, 1));
	name_lit(c, lit, "counter");
	xout_lit(c->w, ",\"args\":{\"value\":");
	xout_double(c->w, sqlite3_column_double(st, 4));
	xout_lit(c->w, "}}");
	return 0;
}

static int window_row(struct chrome *c, const struct xproc *p, sqlite3_stmt *st)
{
	int n = 0;

	ev(c, "X", p, WINDOWS_TID, sqlite3_column_int64(st, 1));
	dur(c, sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2));
	name_raw(c, "GPU recorded", "gpu_window");
	xout_lit(c->w, ",\"args\":{");
	arg_i(c->w, "gpu_work_calls", sqlite3_column_int64(st, 3), &n);
	xout_lit(c->w, "}}");
	return 0;
}

/* ---- overlap lanes ---- */

/*
 * Slices on one thread of the Trace Event Format must nest, but a stream's
 * operations may overlap on a real GPU: programmatic dependent launch
 * (Hopper's cudaLaunchAttributeProgrammaticStreamSerialization, used by
 * cuBLAS, cuDNN and PyTorch) starts a kernel before the one before it on
 * its stream has ended, and CUPTI's times of a copy and a kernel may
 * overlap by a few ns.  So, before anything is written, one pass over the
 * GPU operations (the rows and the order of the writing passes) finds the
 * streams where an operation starts before an earlier one ended; only
 * their operations are sorted by start, each to the first lane whose last
 * operation ended by its start (lane 0: the stream's own track), which
 * takes the fewest lanes.  A stream without overlap costs one comparison
 * an operation.
 */
static int plan_row(struct chrome *c, const struct xproc *p, sqlite3_stmt *st, int dev_col)
{
	struct map_key k = { p->proc_id, sqlite3_column_int64(st, dev_col),
			     col_stream(st, dev_col + 1) };
	struct stream_item *s = map_get(&c->streams, &k);
	int64_t start = sqlite3_column_int64(st, 1), end = sqlite3_column_int64(st, 2);
	int err;

	if (!s)
		return -ENOMEM;
	if (end < start)
		end = start; /* written with no duration */
	if (s->any && start < s->max_end)
		s->overlaps = c->overlaps = 1;
	if (!s->any || end > s->max_end)
		s->max_end = end;
	s->any = 1;
	err = array_grow(&c->gops, &c->gops_cap, c->nops, sizeof(*c->gops));
	if (err)
		return err;
	c->gops[c->nops] = (struct gop){ start, end,
					 (uint32_t)(((char *)s - c->streams.items) /
						    (ptrdiff_t)c->streams.item_size),
					 (uint32_t)c->nops };
	c->nops++;
	return 0;
}

/* The rows, in their order, of the kernel and copy passes that write them. */
#define KERNELS_PLAN "SELECT proc_id, start_ns, end_ns, device, stream FROM kernels ORDER BY id"
#define COPIES_PLAN \
	"SELECT proc_id, start_ns, end_ns, op, device, stream FROM gpu_copies ORDER BY id"

static int plan_kernel(struct chrome *c, const struct xproc *p, sqlite3_stmt *st)
{
	return plan_row(c, p, st, 3);
}

static int plan_copy(struct chrome *c, const struct xproc *p, sqlite3_stmt *st)
{
	return plan_row(c, p, st, 4);
}

static int cmp_gop(const void *x, const void *y)
{
	const struct gop *a = x, *b = y;

	if (a->stream != b->stream)
		return a->stream < b->stream ? -1 : 1;
	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* The lanes of the streams that overlap, from db: c->lane, each item's
 * nlanes and lane_tid. */
static int lanes(struct chrome *c, sqlite3 *db)
{
	int64_t *ends = NULL, next_tid = (int64_t)1 << 31;
	size_t m = 0, ends_cap = 0;
	int err = each_on(c, db, 2, KERNELS_PLAN, plan_kernel);

	c->nkernels = c->nops;
	if (!err)
		err = each_on(c, db, 2, COPIES_PLAN, plan_copy);
	if (err || !c->overlaps)
		goto out;
	c->lane = calloc(c->nops, sizeof(*c->lane));
	if (!c->lane) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < c->nops; i++) {
		const struct stream_item *s = map_item(&c->streams, c->gops[i].stream);

		if (s->overlaps)
			c->gops[m++] = c->gops[i];
	}
	array_sort(c->gops, m, sizeof(*c->gops), cmp_gop);
	for (size_t i = 0; !err && i < m;) {
		uint32_t stream = c->gops[i].stream, nl = 0;
		struct stream_item *s;

		for (; i < m && c->gops[i].stream == stream; i++) {
			uint32_t l = 0;

			while (l < nl && ends[l] > c->gops[i].start)
				l++;
			if (l == nl) {
				err = array_grow(&ends, &ends_cap, nl, sizeof(*ends));
				if (err)
					break;
				nl++;
			}
			ends[l] = c->gops[i].end;
			c->lane[c->gops[i].seq] = l;
		}
		s = map_item(&c->streams, stream);
		s->nlanes = nl;
		/* lane tracks' tids: above the streams' (GPU_TID), below 2^32 */
		s->lane_tid = next_tid;
		next_tid += nl - 1;
	}
out:
	free(ends);
	free(c->gops);
	c->gops = NULL;
	return err;
}

/*
 * The lanes are planned on a connection of their own, on a thread of their
 * own, while the CPU threads' calls are written (most of the time on the
 * kernel store of export-bench), so the planning pass costs no wall time
 * where a second CPU is free.  On a store a collector is still writing,
 * the plan may see rows the writing passes do not (or the reverse): rows
 * are planned and written by id, each table's from its own start, so a
 * row the plan missed is written on its stream's track.
 */
struct planner {
	struct chrome *c;
	pthread_t thread;
	int started, err;
};

static void *plan_thread(void *arg)
{
	struct planner *pl = arg;
	sqlite3 *db = NULL;

	/* as the model's heap pass and csv's workers connect */
	if (store_connect(pl->c->x->o->path, &db) != SQLITE_OK) {
		cli_error("cannot open the store again: %s", sqlite3_errmsg(db));
		pl->err = -EIO;
	} else {
		sqlite3_busy_timeout(db, 10000);
		pl->err = lanes(pl->c, db);
	}
	sqlite3_close(db);
	return NULL;
}

static void plan_start(struct planner *pl)
{
	pl->started = store_readers(2) > 1 &&
		      pthread_create(&pl->thread, NULL, plan_thread, pl) == 0;
}

/* The lanes planned: joins the thread, or plans here when none started. */
static int plan_wait(struct planner *pl)
{
	if (!pl->started)
		return lanes(pl->c, pl->c->x->db);
	pthread_join(pl->thread, NULL);
	pl->started = 0;
	return pl->err;
}

/* ---- memory counters ---- */

/* One memory's counter track: the model's live bytes after each instant
 * they change, kept per time bucket as the highest value (its first
 * instant) and the last one, so the peak is always among them. */
struct mem_track {
	struct chrome *c;
	const struct xproc *p;
	char name[64];
	int64_t width, bucket;
	double max, last;
	int64_t max_t, last_t;
	int any;
};

static void counter_point(struct chrome *c, const struct mem_track *tr, int64_t t, double v)
{
	ev(c, "C", tr->p, 0, t);
	xout_lit(c->w, ",\"name\":");
	xout_json(c->w, tr->name);
	xout_lit(c->w, ",\"cat\":\"memory\",\"args\":{\"bytes\":");
	xout_i64(c->w, llround(v));
	xout_lit(c->w, "}}");
}

static void bucket_out(struct mem_track *tr)
{
	if (!tr->any || !export_in(tr->p, tr->max_t, tr->last_t))
		return;
	counter_point(tr->c, tr, tr->max_t, tr->max);
	if (tr->last_t != tr->max_t)
		counter_point(tr->c, tr, tr->last_t, tr->last);
}

static int mem_instant(void *ctx, int64_t t, double live)
{
	struct mem_track *tr = ctx;
	int64_t b = (t - tr->p->start_ns) / tr->width;

	if (!tr->any || b != tr->bucket) {
		bucket_out(tr);
		tr->any = 1;
		tr->bucket = b;
		tr->max = live;
		tr->max_t = t;
	} else if (live > tr->max) {
		tr->max = live;
		tr->max_t = t;
	}
	tr->last = live;
	tr->last_t = t;
	return tr->c->w->err ? -EIO : 0;
}

static int memory(struct chrome *c)
{
	struct model_mem *const *mems;
	size_t n;
	int err = model_memories(c->x->m, &mems, &n);

	for (size_t i = 0; !err && i < n; i++) {
		struct mem_track tr = { .c = c, .p = export_proc(c->x, mems[i]->proc->proc_id) };
		int64_t span;

		if (!tr.p)
			continue;
		span = tr.p->end_ns - tr.p->start_ns;
		tr.width = span / COUNTER_BUCKETS < 1000 ? 1000 : span / COUNTER_BUCKETS;
		snprintf(tr.name, sizeof(tr.name), "memory %s", mems[i]->label);
		counter_point(c, &tr, tr.p->start_ns, 0);
		err = model_mem_events(c->x->m, mems[i], mem_instant, &tr);
		if (!err)
			bucket_out(&tr);
	}
	return err;
}

/* ---- what the trace misses ---- */

/* Whether p's trace is incomplete: a recording cut short, or events lost
 * (the rings' or CUPTI's: the trace has GPU tracks too). */
static int incomplete(const struct xproc *p)
{
	return p->mp->cut || p->mp->dropped;
}

/*
 * Said where a person looking at the timeline sees it, as the stderr
 * lines say it (export.c): on a track of its own, first in the process,
 * a slice over the process's life (within --begin/--end) for the lost
 * events, which may be anywhere in it, and an instant at its recorded end
 * for a cut recording; each with the sentence in its args.  The process's
 * label says it too (names()).
 */
static void warnings(struct chrome *c)
{
	for (size_t i = 0; i < c->x->nprocs; i++) {
		const struct xproc *p = &c->x->procs[i];
		int64_t lo = p->start_ns > p->begin_abs ? p->start_ns : p->begin_abs;
		int64_t hi = p->end_ns < p->end_abs ? p->end_ns : p->end_abs;
		char line[PRESENT_LOST_LINE], name[96];
		int n = 0;

		if (present_lost_line(line, sizeof(line), p->mp, 1, EXPORT_LOST_CHROME) && lo <= hi) {
			snprintf(name, sizeof(name), "WARNING: %lld events lost",
				 (long long)p->mp->dropped);
			ev(c, "X", p, WARNING_TID, lo);
			dur(c, lo, hi);
			name_raw(c, name, "warning");
			xout_lit(c->w, ",\"args\":{");
			arg_s(c->w, "warning", line, &n);
			xout_lit(c->w, "}}");
		}
		n = 0;
		if (p->mp->cut && export_in(p, p->end_ns, p->end_ns)) {
			ev(c, "i", p, WARNING_TID, p->end_ns);
			xout_lit(c->w, ",\"s\":\"t\"");
			name_raw(c, "WARNING: recording cut here", "warning");
			xout_lit(c->w, ",\"args\":{");
			arg_s(c->w, "warning", PRESENT_CUT ": " EXPORT_CUT_CHROME, &n);
			xout_lit(c->w, "}}");
		}
	}
}

/* ---- names of processes and tracks ---- */

static int gpu_names(struct chrome *c);

static int names(struct chrome *c)
{
	struct export *x = c->x;
	sqlite3_stmt *st = NULL;
	char buf[600];
	int err, r;

	for (size_t i = 0; i < x->nprocs; i++) {
		const struct xproc *p = &x->procs[i];

		meta(c, p, 0, "process_name", "name", p->label, 0);
		snprintf(buf, sizeof(buf), "pid %lld%s%.200s%s%s%s", (long long)p->pid,
			 p->host ? " on " : "", p->host ? p->host : "",
			 p->sampled ? ", GPU sampled: see its GPU sampling track" : "",
			 p->mp->dropped ? ", INCOMPLETE: events were lost" : "",
			 p->mp->cut ? ", INCOMPLETE: the recording was cut short" : "");
		meta(c, p, 0, "process_labels", "labels", buf, 0);
		meta(c, p, 0, "process_sort_index", "sort_index", NULL, (int64_t)i);
		if (incomplete(p)) {
			meta(c, p, WARNING_TID, "thread_name", "name",
			     "WARNING: this process's recording is incomplete (see its events)", 0);
			meta(c, p, WARNING_TID, "thread_sort_index", "sort_index", NULL, -1);
		}
		if (p->sampled) {
			meta(c, p, WINDOWS_TID, "thread_name", "name",
			     "GPU sampling: recorded windows (GPU work outside them is not shown)", 0);
			meta(c, p, WINDOWS_TID, "thread_sort_index", "sort_index", NULL, 1 << 30);
		}
	}
	err = store_prepare(x->db, "SELECT proc_id, tid, name FROM threads", &st);
	if (err)
		return err;
	while ((r = store_step(x->db, st)) > 0) {
		const struct xproc *p = export_proc(x, sqlite3_column_int64(st, 0));
		const char *name = (const char *)sqlite3_column_text(st, 2);
		int64_t tid = sqlite3_column_int64(st, 1);

		if (!p)
			continue;
		/* viewers show the tid beside the name */
		meta(c, p, tid, "thread_name", "name", name ? name : "thread", 0);
	}
	sqlite3_finalize(st);
	if (r < 0)
		return r;
	return gpu_names(c);
}

static int cmp_track(const void *x, const void *y)
{
	const struct stream_item *a = *(const struct stream_item *const *)x;
	const struct stream_item *b = *(const struct stream_item *const *)y;
	int64_t ta = GPU_TID(a->key.a, a->key.b), tb = GPU_TID(b->key.a, b->key.b);

	if (a->key.proc_id != b->key.proc_id)
		return a->key.proc_id < b->key.proc_id ? -1 : 1;
	return ta < tb ? -1 : ta > tb;
}

/* The streams' tracks, in the order of their tids (device, then stream),
 * each stream's overlap lanes right after it. */
static int gpu_names(struct chrome *c)
{
	const struct stream_item **v = malloc((c->streams.n ? c->streams.n : 1) * sizeof(*v));
	int64_t rank = (1 << 30) + 1;
	char buf[96], sname[64];

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < c->streams.n; i++)
		v[i] = map_item(&c->streams, i);
	array_sort(v, c->streams.n, sizeof(*v), cmp_track);
	for (size_t i = 0; i < c->streams.n; i++) {
		const struct stream_item *s = v[i];
		const struct xproc *p = export_proc(c->x, s->key.proc_id);
		int64_t tid = GPU_TID(s->key.a, s->key.b);

		if (s->key.b >= 0)
			snprintf(sname, sizeof(sname), "stream %lld", (long long)s->key.b);
		else
			snprintf(sname, sizeof(sname), "stream ?");
		snprintf(buf, sizeof(buf), "GPU %lld %s", (long long)s->key.a, sname);
		meta(c, p, tid, "thread_name", "name", buf, 0);
		meta(c, p, tid, "thread_sort_index", "sort_index", NULL, rank++);
		for (uint32_t l = 1; l < s->nlanes; l++) {
			snprintf(buf, sizeof(buf), "GPU %lld %s (overlap %u)", (long long)s->key.a,
				 sname, l);
			meta(c, p, s->lane_tid + l - 1, "thread_name", "name", buf, 0);
			meta(c, p, s->lane_tid + l - 1, "thread_sort_index", "sort_index", NULL,
			     rank++);
		}
	}
	free(v);
	return 0;
}

int export_chrome(struct export *x, struct xout *w)
{
	struct chrome c = {
		.x = x, .w = w, .first = 1,
		.streams = { .item_size = sizeof(struct stream_item) },
		.ranges = { .item_size = sizeof(struct range_item) },
		.jnames = { .item_size = sizeof(struct jname_item) },
	};
	struct planner pl = { .c = &c };
	double bytes;
	int r, err = estimate(&c, &bytes);

	if (err)
		return err;
	if (bytes > x->o->max_mb * 1e6) {
		cli_error("the trace would be about %.3g MB, more than a browser loads (--max-mb %g):"
			  " export a time span (--begin S --end S) or one process (--pid, --rank),"
			  " or write csv", bytes / 1e6, x->o->max_mb);
		return -EFBIG;
	}
	/* Named rows (kernels, ranges, GPU API calls) came with strings in
	 * schema 2: a version-1 store has neither. */
	if (x->schema >= 2)
		err = store_prepare(x->db, "SELECT coalesce(demangled, text) FROM strings"
				    " WHERE proc_id = ?1 AND id = ?2", &c.name_st);
	if (err)
		return err;
	xout_lit(w, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"exporter\":\"shimmer\","
		    "\"clock\":\"microseconds since the first process started\"},\n\"traceEvents\":[\n");
	plan_start(&pl);
	err = each(&c, 1, "SELECT c.proc_id, c.start_ns, c.end_ns, c.tid, f.name, c.ret, c.device,"
		   " c.stream, c.bytes FROM cuda_calls c LEFT JOIN functions f USING (fn_id)",
		   cuda_row);
	if (!err)
		err = each(&c, 2, "SELECT proc_id, start_ns, end_ns, tid, name_id, correlation, domain"
			   " FROM gpu_api", api_row);
	if (!err && c.unsorted)
		qsort(c.launches, c.nlaunches, sizeof(*c.launches), cmp_launch);
	r = plan_wait(&pl);
	if (!err)
		err = r;
	if (!err)
		c.seq_end = c.nkernels;
	/* the rows and order the lanes were planned for (KERNELS_PLAN) */
	if (!err)
		err = each(&c, 2, "SELECT proc_id, start_ns, end_ns, device, stream, correlation,"
			   " name_id, grid_x, grid_y, grid_z, block_x, block_y, block_z,"
			   " coalesce(registers, 0), coalesce(static_smem, 0),"
			   " coalesce(dynamic_smem, 0), graph_id FROM kernels ORDER BY id", kernel_row);
	c.seq = c.nkernels;
	c.seq_end = c.nops;
	if (!err)
		err = each(&c, 2, "SELECT proc_id, start_ns, end_ns, op, device, stream, correlation,"
			   " bytes, copy_kind, src_kind, dst_kind, coalesce(value, 0)"
			   " FROM gpu_copies ORDER BY id", copy_row);
	if (!err)
		err = each(&c, 2, "SELECT proc_id, start_ns, end_ns, tid, kind, name_id, domain_id, id,"
			   " parent_id FROM ranges ORDER BY id", range_row);
	if (!err)
		err = each(&c, 2, "SELECT proc_id, ts_ns, ts_ns, tid, name_id FROM markers",
			   marker_row);
	if (!err)
		err = each(&c, 2, "SELECT proc_id, ts_ns, ts_ns, name_id, coalesce(value, 0)"
			   " FROM counters", counter_row);
	if (!err)
		err = each(&c, 4, "SELECT proc_id, start_ns, end_ns, calls FROM gpu_windows",
			   window_row);
	if (!err)
		err = memory(&c);
	if (!err)
		warnings(&c);
	if (!err)
		err = names(&c);
	xout_lit(w, "\n]}\n");
	sqlite3_finalize(c.name_st);
	free(c.launches);
	free(c.lane);
	map_free(&c.streams);
	map_free(&c.ranges);
	map_free(&c.jnames);
	strtab_free(&c.jtext);
	return err;
}
