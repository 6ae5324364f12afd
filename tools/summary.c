/*
 * shimmer summary; see summary.h.
 *
 * Every table is read with one plain scan and aggregated here, in hash maps
 * keyed by (process, function) or (process, device, space): SQLite's
 * GROUP BY sorts its input first, which costs several times the scan on a
 * store of 1e7 rows.  Peaks need time order, so they read two sorted
 * streams, allocations by alloc_ns and frees by free_ns, and merge them,
 * frees first on equal times (a block freed and another allocated at the
 * same instant are not both live).
 *
 * Timing sources: CUDA calls from cuda_calls; heap allocation functions
 * from allocations' alloc side; free from allocations freed by free.  The
 * realloc family is timed on its allocation side only, since its free side
 * is the same call.
 *
 * The GPU tables are read and written by gpu.c; this file hands it each
 * process's GPU status and synchronizing calls.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fmt.h"
#include "gpu.h"
#include "map.h"
#include "stats.h"
#include "store.h"
#include "summary.h"

struct fn_item {
	struct map_key key;
	int64_t count; /* exact, from function_counts */
	int64_t bytes;
	struct stats st; /* durations of the timed calls */
	long double sum; /* exact up to 2^64 ns: a long double has 64 mantissa bits */
};

struct peak_item {
	struct map_key key;
	double cur;
	double peak;
	int64_t at; /* record clock when peak was reached */
	int seen;
};

struct fn_name {
	int64_t fn_id;
	char *name;
	int heap; /* family 'heap' */
};

struct proc {
	int64_t proc_id;
	int64_t pid;
	int64_t ppid;
	int64_t rank;
	int has_rank;
	int64_t start_ns;
	int64_t end_ns;
	int has_end;
	int64_t sample_bytes;
	int has_sample_bytes;
	char *host;
	char *exe;
	char *args;      /* argv joined with spaces, for tables */
	char *argv_json; /* a valid JSON array, or NULL */
	char *mode;
	char *end_reason;
	char *gpu_status; /* NULL: CUDA never started, or a version 1 store */
	char *gpu_detail;
};

struct drop {
	int64_t proc_id;
	char *reason;
	int64_t events;
};

struct summary {
	sqlite3 *db;
	struct fn_name *names; /* sorted by fn_id */
	size_t nnames;
	size_t names_cap;
	int64_t free_fn; /* fn_id of free, -1 when the store has none */
	struct proc *procs; /* sorted by proc_id */
	size_t nprocs;
	size_t procs_cap;
	struct map fns;
	struct map peaks;
	struct strtab spaces;
	struct drop *drops; /* sorted by proc_id */
	size_t ndrops;
	size_t drops_cap;
	/* Sorted views of the maps for output. */
	struct fn_item **fn_list;
	size_t nfn_list;
	struct peak_item **peak_list;
	struct gpu *gpu;
};

/* ---- reading the store ------------------------------------------------ */

static const char names_sql[] = "SELECT fn_id, name, family FROM functions ORDER BY fn_id";

static int name_row(void *ctx, sqlite3_stmt *st)
{
	struct summary *s = ctx;
	const char *family = (const char *)sqlite3_column_text(st, 2);
	struct fn_name *f;
	int err;

	err = array_grow(&s->names, &s->names_cap, s->nnames, sizeof(*s->names));
	if (err)
		return err;
	f = &s->names[s->nnames++];
	f->fn_id = sqlite3_column_int64(st, 0);
	f->heap = family && strcmp(family, "heap") == 0;
	f->name = store_column_dup(st, 1, &err);
	if (f->name && strcmp(f->name, "free") == 0)
		s->free_fn = f->fn_id;
	return err;
}

static const struct fn_name *fn_lookup(const struct summary *s, int64_t fn_id)
{
	size_t lo = 0, hi = s->nnames;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->names[mid].fn_id == fn_id)
			return &s->names[mid];
		if (s->names[mid].fn_id < fn_id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* argv is a JSON array; SQLite's JSON functions check and join it.  Stores
 * before schema version 2 have no GPU status columns. */
#define PROCS_SQL(gpu_columns)                                                        \
	"SELECT proc_id, pid, ppid, rank, start_ns, end_ns, sample_bytes,"                \
	" hostname, exe,"                                                                 \
	" CASE WHEN json_valid(argv) AND json_type(argv) = 'array'"                       \
	"  THEN (SELECT group_concat(value, ' ') FROM json_each(processes.argv))"         \
	"  ELSE argv END,"                                                                \
	" CASE WHEN json_valid(argv) AND json_type(argv) = 'array' THEN json(argv) END,"  \
	" malloc_mode, end_reason, " gpu_columns " FROM processes ORDER BY proc_id"

static int proc_row(void *ctx, sqlite3_stmt *st)
{
	struct summary *s = ctx;
	struct proc *p;
	int err;

	err = array_grow(&s->procs, &s->procs_cap, s->nprocs, sizeof(*s->procs));
	if (err)
		return err;
	p = &s->procs[s->nprocs++];
	*p = (struct proc){
		.proc_id = sqlite3_column_int64(st, 0),
		.pid = sqlite3_column_int64(st, 1),
		.ppid = sqlite3_column_int64(st, 2),
		.rank = sqlite3_column_int64(st, 3),
		.has_rank = sqlite3_column_type(st, 3) != SQLITE_NULL,
		.start_ns = sqlite3_column_int64(st, 4),
		.end_ns = sqlite3_column_int64(st, 5),
		.has_end = sqlite3_column_type(st, 5) != SQLITE_NULL,
		.sample_bytes = sqlite3_column_int64(st, 6),
		.has_sample_bytes = sqlite3_column_type(st, 6) != SQLITE_NULL,
	};
	p->host = store_column_dup(st, 7, &err);
	p->exe = store_column_dup(st, 8, &err);
	p->args = store_column_dup(st, 9, &err);
	p->argv_json = store_column_dup(st, 10, &err);
	p->mode = store_column_dup(st, 11, &err);
	p->end_reason = store_column_dup(st, 12, &err);
	p->gpu_status = store_column_dup(st, 13, &err);
	p->gpu_detail = store_column_dup(st, 14, &err);
	return err;
}

static struct fn_item *fn_get(struct summary *s, int64_t proc_id, int64_t fn_id)
{
	struct map_key k = { proc_id, fn_id, 0 };

	return map_get(&s->fns, &k);
}

static const char counts_sql[] = "SELECT proc_id, fn_id, count, bytes FROM function_counts";

static int count_row(void *ctx, sqlite3_stmt *st)
{
	struct summary *s = ctx;
	struct fn_item *f = fn_get(s, sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1));

	if (!f)
		return -ENOMEM;
	f->count += sqlite3_column_int64(st, 2);
	f->bytes += sqlite3_column_int64(st, 3);
	return 0;
}

static int timed_add(struct summary *s, int64_t proc_id, int64_t fn_id, int64_t ns)
{
	struct fn_item *f = fn_get(s, proc_id, fn_id);

	if (!f)
		return -ENOMEM;
	stats_add(&f->st, (double)ns);
	f->sum += ns;
	return 0;
}

static const char cuda_sql[] = "SELECT proc_id, fn_id, end_ns - start_ns FROM cuda_calls";

static int cuda_row(void *ctx, sqlite3_stmt *st)
{
	struct summary *s = ctx;
	return timed_add(s, sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
			 sqlite3_column_int64(st, 2));
}

static const char heap_sql[] = "SELECT proc_id, alloc_fn, alloc_end_ns - alloc_ns, free_fn,"
			       " free_end_ns - free_ns FROM allocations";

static int heap_row(void *ctx, sqlite3_stmt *st)
{
	struct summary *s = ctx;
	int64_t proc_id = sqlite3_column_int64(st, 0);
	int64_t fn = sqlite3_column_int64(st, 1);
	const struct fn_name *f;
	int err;

	/* CUDA allocations are timed from cuda_calls instead. */
	if (sqlite3_column_type(st, 2) != SQLITE_NULL && (f = fn_lookup(s, fn)) && f->heap) {
		err = timed_add(s, proc_id, fn, sqlite3_column_int64(st, 2));
		if (err)
			return err;
	}
	if (sqlite3_column_type(st, 4) != SQLITE_NULL && sqlite3_column_int64(st, 3) == s->free_fn)
		return timed_add(s, proc_id, s->free_fn, sqlite3_column_int64(st, 4));
	return 0;
}

/* Columns of st: time, proc_id, space, device, weight. */
static int peak_event(struct summary *s, sqlite3_stmt *st, double sign)
{
	struct map_key k = { sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 3), 0 };
	const char *name;
	struct peak_item *p;
	int err;

	name = (const char *)sqlite3_column_text(st, 2);
	err = strtab_index(&s->spaces, name ? name : "", &k.b);
	if (err)
		return err;
	p = map_get(&s->peaks, &k);
	if (!p)
		return -ENOMEM;
	p->cur += sign * sqlite3_column_double(st, 4);
	if (!p->seen || p->cur > p->peak) {
		p->peak = p->cur;
		p->at = sqlite3_column_int64(st, 0);
		p->seen = 1;
	}
	return 0;
}

static int load_peaks(struct summary *s)
{
	sqlite3_stmt *a = NULL, *f = NULL;
	int err, ra, rf;

	err = store_prepare(s->db, "SELECT alloc_ns, proc_id, space, device, weight"
			 " FROM allocations ORDER BY alloc_ns", &a);
	if (err)
		goto out;
	err = store_prepare(s->db, "SELECT free_ns, proc_id, space, device, weight"
			 " FROM allocations WHERE free_ns IS NOT NULL ORDER BY free_ns", &f);
	if (err)
		goto out;
	ra = store_step(s->db, a);
	rf = store_step(s->db, f);
	while (ra >= 0 && rf >= 0 && (ra > 0 || rf > 0)) {
		int take_free = rf > 0 && (ra == 0 || sqlite3_column_int64(f, 0) <=
							      sqlite3_column_int64(a, 0));

		err = peak_event(s, take_free ? f : a, take_free ? -1.0 : 1.0);
		if (err)
			goto out;
		if (take_free)
			rf = store_step(s->db, f);
		else
			ra = store_step(s->db, a);
	}
	err = ra < 0 || rf < 0 ? -EIO : 0;
out:
	sqlite3_finalize(a);
	sqlite3_finalize(f);
	return err;
}

static const char drops_sql[] = "SELECT proc_id, reason, sum(events) FROM drops"
				" GROUP BY proc_id, reason HAVING sum(events) > 0"
				" ORDER BY proc_id, reason";

static int drop_row(void *ctx, sqlite3_stmt *st)
{
	struct summary *s = ctx;
	struct drop *d;
	int err;

	err = array_grow(&s->drops, &s->drops_cap, s->ndrops, sizeof(*s->drops));
	if (err)
		return err;
	d = &s->drops[s->ndrops++];
	d->proc_id = sqlite3_column_int64(st, 0);
	d->events = sqlite3_column_int64(st, 2);
	d->reason = store_column_dup(st, 1, &err);
	return err;
}

/* ---- derived values ---------------------------------------------------- */

/* Calls: the exact counter, unless more calls were timed than counted. */
static int64_t fn_count(const struct fn_item *f)
{
	return (uint64_t)f->count > f->st.n ? f->count : (int64_t)f->st.n;
}

static int fn_exact(const struct fn_item *f)
{
	return f->st.n > 0 && f->st.n >= (uint64_t)f->count;
}

/* Total time: exact when every call was timed, else mean x count. */
static double fn_total(const struct fn_item *f)
{
	if (fn_exact(f))
		return (double)f->sum;
	return f->st.mean * (double)fn_count(f);
}

static const char *fn_label(const struct summary *s, const struct fn_item *f, char *buf,
			    size_t len)
{
	const struct fn_name *n = fn_lookup(s, f->key.a);

	if (n && n->name)
		return n->name;
	snprintf(buf, len, "fn%lld", (long long)f->key.a);
	return buf;
}

static int fn_heap(const struct summary *s, const struct fn_item *f)
{
	const struct fn_name *n = fn_lookup(s, f->key.a);

	return n && n->heap;
}

static const char *fn_kind(const struct summary *s, const struct fn_item *f)
{
	return fn_heap(s, f) ? "heap" : "api";
}

/*
 * Whether mean x count estimates the total.  In sample mode the timed heap
 * calls are the byte-sampled ones, biased towards large blocks (slower to
 * allocate and free), so their mean says nothing of the other calls: no
 * total.  `all` mode times a steady 1 in 8, an unbiased subset.
 */
static int fn_estimable(const struct summary *s, const struct proc *p, const struct fn_item *f)
{
	return fn_exact(f) || !p->mode || strcmp(p->mode, "sample") != 0 || !fn_heap(s, f);
}

/* Wall time of p in ns, or -1 while unknown (the process never ended). */
static double proc_wall(const struct proc *p)
{
	return p->has_end ? (double)(p->end_ns - p->start_ns) : -1.0;
}

static int peak_estimated(const struct summary *s, const struct proc *p,
			  const struct peak_item *k)
{
	return strcmp(s->spaces.v[k->key.b], "host") == 0 && p->mode &&
	       strcmp(p->mode, "sample") == 0;
}

/* qsort has no context argument; the comparators need the names. */
static const struct summary *sort_ctx;

static int cmp_fn(const void *x, const void *y)
{
	const struct fn_item *a = *(struct fn_item *const *)x;
	const struct fn_item *b = *(struct fn_item *const *)y;
	char ba[32], bb[32];
	double ta, tb;

	if (a->key.proc_id != b->key.proc_id)
		return a->key.proc_id < b->key.proc_id ? -1 : 1;
	ta = fn_total(a);
	tb = fn_total(b);
	if (ta != tb)
		return ta > tb ? -1 : 1;
	if (fn_count(a) != fn_count(b))
		return fn_count(a) > fn_count(b) ? -1 : 1;
	return strcmp(fn_label(sort_ctx, a, ba, sizeof(ba)), fn_label(sort_ctx, b, bb, sizeof(bb)));
}

static int space_rank(const char *name)
{
	static const char *const order[] = { "device", "managed", "pinned", "host" };

	for (int i = 0; i < 4; i++)
		if (strcmp(name, order[i]) == 0)
			return i;
	return 4;
}

static int cmp_peak(const void *x, const void *y)
{
	const struct peak_item *a = *(struct peak_item *const *)x;
	const struct peak_item *b = *(struct peak_item *const *)y;
	const char *sa = sort_ctx->spaces.v[a->key.b], *sb = sort_ctx->spaces.v[b->key.b];

	if (a->key.proc_id != b->key.proc_id)
		return a->key.proc_id < b->key.proc_id ? -1 : 1;
	if (space_rank(sa) != space_rank(sb))
		return space_rank(sa) - space_rank(sb);
	if (strcmp(sa, sb))
		return strcmp(sa, sb);
	return a->key.a < b->key.a ? -1 : a->key.a > b->key.a;
}

static int sort_lists(struct summary *s)
{
	s->fn_list = calloc(s->fns.n + 1, sizeof(*s->fn_list));
	s->peak_list = calloc(s->peaks.n + 1, sizeof(*s->peak_list));
	if (!s->fn_list || !s->peak_list)
		return -ENOMEM;
	for (size_t i = 0; i < s->fns.n; i++) {
		struct fn_item *f = (struct fn_item *)map_item(&s->fns, i);

		/* A counter row of zero calls is a function that was not called. */
		if (fn_count(f) > 0)
			s->fn_list[s->nfn_list++] = f;
	}
	for (size_t i = 0; i < s->peaks.n; i++)
		s->peak_list[i] = (struct peak_item *)map_item(&s->peaks, i);
	sort_ctx = s;
	qsort(s->fn_list, s->nfn_list, sizeof(*s->fn_list), cmp_fn);
	qsort(s->peak_list, s->peaks.n, sizeof(*s->peak_list), cmp_peak);
	sort_ctx = NULL;
	return 0;
}

/* Per-process slices of the sorted lists, walked in step with procs. */
struct cursor {
	size_t fn, peak, drop;
};

struct slice {
	struct fn_item **fns;
	size_t nfns;
	struct peak_item **peaks;
	size_t npeaks;
	struct drop *drops;
	size_t ndrops;
};

static struct slice proc_slice(const struct summary *s, const struct proc *p, struct cursor *c)
{
	struct slice sl = { 0 };

	/* Rows of proc_ids missing from processes cannot be placed: skip them. */
	while (c->fn < s->nfn_list && s->fn_list[c->fn]->key.proc_id < p->proc_id)
		c->fn++;
	sl.fns = s->fn_list + c->fn;
	while (c->fn < s->nfn_list && s->fn_list[c->fn]->key.proc_id == p->proc_id)
		c->fn++, sl.nfns++;
	while (c->peak < s->peaks.n && s->peak_list[c->peak]->key.proc_id < p->proc_id)
		c->peak++;
	sl.peaks = s->peak_list + c->peak;
	while (c->peak < s->peaks.n && s->peak_list[c->peak]->key.proc_id == p->proc_id)
		c->peak++, sl.npeaks++;
	while (c->drop < s->ndrops && s->drops[c->drop].proc_id < p->proc_id)
		c->drop++;
	sl.drops = s->drops + c->drop;
	while (c->drop < s->ndrops && s->drops[c->drop].proc_id == p->proc_id)
		c->drop++, sl.ndrops++;
	return sl;
}

/* Events dropped in the process of sl, whatever the reason. */
static int64_t slice_dropped(const struct slice *sl)
{
	int64_t n = 0;

	for (size_t i = 0; i < sl->ndrops; i++)
		n += sl->drops[i].events;
	return n;
}

/* Room for every synchronizing function gpu_is_sync_fn() names. */
#define SYNC_MAX 8

/*
 * What the GPU writers need of p: its GPU status and the synchronizing
 * calls among its functions (in the slice's order, by total time).  sync
 * has room for SYNC_MAX entries; the names point into s.
 */
static struct gpu_proc gpu_proc_of(const struct summary *s, const struct proc *p,
				   const struct slice *sl, struct gpu_sync_fn *sync)
{
	struct gpu_proc g = {
		.proc_id = p->proc_id,
		.pid = p->pid,
		.rank = p->rank,
		.has_rank = p->has_rank,
		.wall_ns = proc_wall(p),
		.status = p->gpu_status,
		.detail = p->gpu_detail,
		.sync = sync,
	};

	for (size_t i = 0; i < sl->nfns; i++) {
		const struct fn_item *f = sl->fns[i];
		const struct fn_name *n = fn_lookup(s, f->key.a);

		if (!n || n->heap)
			continue;
		g.used_cuda = 1;
		if (gpu_is_sync_fn(n->name) && g.nsync < SYNC_MAX)
			sync[g.nsync++] = (struct gpu_sync_fn){
				.name = n->name,
				.count = fn_count(f),
				.total_ns = fn_total(f),
				.exact = fn_exact(f),
			};
	}
	return g;
}

/* ---- table ------------------------------------------------------------- */

static void peak_label(const struct summary *s, const struct peak_item *k, char *buf, size_t len)
{
	const char *sp = s->spaces.v[k->key.b];

	if (strcmp(sp, "host") == 0)
		snprintf(buf, len, "host heap");
	else if (strcmp(sp, "pinned") == 0)
		snprintf(buf, len, "pinned host");
	else if (k->key.a >= 0)
		snprintf(buf, len, "%s %lld", sp, (long long)k->key.a);
	else
		snprintf(buf, len, "%s", sp);
}

static void table_proc(const struct summary *s, FILE *out, const struct proc *p,
		       const struct slice *sl)
{
	char u[6][FMT_UNIT_MAX], name[32];
	struct gpu_sync_fn sync[SYNC_MAX];
	struct gpu_proc gpu;
	double wall = proc_wall(p);
	int64_t dropped = slice_dropped(sl);
	int estimated = 0, biased = 0;

	fprintf(out, "Process %lld", (long long)p->pid);
	if (p->has_rank)
		fprintf(out, " (rank %lld)", (long long)p->rank);
	fprintf(out, " on %s: %s\n", p->host ? p->host : "?", p->exe ? p->exe : "?");
	if (p->args)
		fprintf(out, "  command: %s\n", p->args);
	fprintf(out, "  wall: %s   malloc: %s", wall >= 0 ? fmt_duration(u[0], FMT_UNIT_MAX, wall) : "unknown",
		p->mode ? p->mode : "?");
	if (p->mode && strcmp(p->mode, "sample") == 0 && p->has_sample_bytes)
		fprintf(out, " (one sample per %s on average)",
			fmt_bytes(u[1], FMT_UNIT_MAX, (double)p->sample_bytes));
	fprintf(out, "   end: %s\n", p->end_reason ? p->end_reason : "still running");
	if (dropped > 0) {
		int host = 0, cupti = 0, noslot = 0;

		fprintf(out, "  WARNING: %lld events were dropped (", (long long)dropped);
		for (size_t i = 0; i < sl->ndrops; i++) {
			fprintf(out, "%s%s %lld", i ? ", " : "", sl->drops[i].reason,
				(long long)sl->drops[i].events);
			/* What CUPTI lost is GPU activity: no call time, no peak. */
			if (strcmp(sl->drops[i].reason, "cupti") == 0)
				cupti = 1;
			else
				host = 1;
			/* a thread without a ring has no exact counters either */
			if (strcmp(sl->drops[i].reason, "no_slot") == 0)
				noslot = 1;
		}
		fputc(')', out);
		if (host)
			fprintf(out, "; the %stime statistics and peaks below miss them",
				noslot ? "counts, " : "");
		if (cupti)
			fprintf(out, "%s the GPU's counts miss the records CUPTI lost",
				host ? ", and" : ";");
		fputc('\n', out);
	}
	fputc('\n', out);
	if (sl->nfns == 0) {
		fprintf(out, "  no intercepted calls\n\n");
	} else {
		fprintf(out, "  %-28s %10s %10s %10s %11s %10s %10s %10s %10s %7s\n", "Function",
			"Count", "Bytes", "Timed", "Total", "Mean", "Std dev", "Min", "Max", "Wall%");
		for (size_t i = 0; i < sl->nfns; i++) {
			const struct fn_item *f = sl->fns[i];
			int exact = fn_exact(f);
			char total[FMT_UNIT_MAX + 2], share[16];

			fprintf(out, "  %-28s %10lld %10s %10llu", fn_label(s, f, name, sizeof(name)),
				(long long)fn_count(f), fmt_bytes(u[0], FMT_UNIT_MAX, (double)f->bytes),
				(unsigned long long)f->st.n);
			if (f->st.n == 0) {
				fprintf(out, " %11s %10s %10s %10s %10s %7s\n", "-", "-", "-", "-", "-",
					"-");
				continue;
			}
			snprintf(total, sizeof(total), "-");
			snprintf(share, sizeof(share), "-");
			if (!fn_estimable(s, p, f)) {
				biased = 1;
			} else {
				estimated |= !exact;
				snprintf(total, sizeof(total), "%s%s", exact ? "" : "~",
					 fmt_duration(u[0], FMT_UNIT_MAX, fn_total(f)));
				if (wall > 0)
					snprintf(share, sizeof(share), "%s%.1f%%", exact ? "" : "~",
						 100.0 * fn_total(f) / wall);
			}
			fprintf(out, " %11s %10s %10s %10s %10s %7s\n", total,
				fmt_duration(u[1], FMT_UNIT_MAX, f->st.mean),
				fmt_duration(u[2], FMT_UNIT_MAX, stats_stddev(&f->st)),
				fmt_duration(u[3], FMT_UNIT_MAX, f->st.min),
				fmt_duration(u[4], FMT_UNIT_MAX, f->st.max), share);
		}
		if (estimated)
			fprintf(out, "\n  ~ estimated as mean x count: only the Timed calls were timed"
				     " (one heap call in 8 in `all` mode, or frees of blocks"
				     " allocated before tracing)\n");
		if (biased)
			fprintf(out, "%s  - no total: in sample mode only sampled heap calls are timed,"
				     " and sampling favours large blocks; their mean is not that of"
				     " all calls\n", estimated ? "" : "\n");
		fputc('\n', out);
	}
	gpu = gpu_proc_of(s, p, sl, sync);
	gpu_table(s->gpu, out, &gpu);
	if (sl->npeaks > 0) {
		fprintf(out, "  %-28s %10s %12s\n", "Peak live memory", "Peak", "At");
		for (size_t i = 0; i < sl->npeaks; i++) {
			const struct peak_item *k = sl->peaks[i];

			peak_label(s, k, name, sizeof(name));
			fprintf(out, "  %-28s %10s %12s%s\n", name,
				fmt_bytes(u[0], FMT_UNIT_MAX, k->peak),
				fmt_duration(u[1], FMT_UNIT_MAX, (double)(k->at - p->start_ns)),
				peak_estimated(s, p, k) ? "   (estimated from weighted samples)"
							: "");
		}
		fputc('\n', out);
	}
}

static void table_write(const struct summary *s, FILE *out)
{
	struct cursor c = { 0 };
	int64_t dropped = 0;

	for (size_t i = 0; i < s->ndrops; i++)
		dropped += s->drops[i].events;
	fprintf(out, "shimmer summary: %zu process%s\n", s->nprocs, s->nprocs == 1 ? "" : "es");
	if (dropped > 0)
		fprintf(out, "WARNING: %lld events were dropped in all; see each process\n",
			(long long)dropped);
	fputc('\n', out);
	for (size_t i = 0; i < s->nprocs; i++) {
		struct slice sl = proc_slice(s, &s->procs[i], &c);

		table_proc(s, out, &s->procs[i], &sl);
	}
}

/* ---- csv ------------------------------------------------------------- */

static void csv_write(const struct summary *s, FILE *out)
{
	struct cursor c = { 0 };
	char name[32];

	fputs("pid,rank,event,count,bytes,total_ns,mean_ns,stddev_ns,min_ns,max_ns,"
	      "timed,wall_share,kind,proc_id\n", out);
	for (size_t i = 0; i < s->nprocs; i++) {
		const struct proc *p = &s->procs[i];
		struct slice sl = proc_slice(s, p, &c);
		double wall = proc_wall(p);
		struct gpu_sync_fn sync[SYNC_MAX];
		struct gpu_proc gpu;

		for (size_t j = 0; j < sl.nfns; j++) {
			const struct fn_item *f = sl.fns[j];

			fprintf(out, "%lld,", (long long)p->pid);
			if (p->has_rank)
				fprintf(out, "%lld", (long long)p->rank);
			fputc(',', out);
			fmt_csv(out, fn_label(s, f, name, sizeof(name)));
			fprintf(out, ",%lld,%lld,", (long long)fn_count(f), (long long)f->bytes);
			if (fn_exact(f))
				fprintf(out, "%.0Lf", f->sum);
			if (f->st.n > 0)
				fprintf(out, ",%.0f,%.0f,%.0f,%.0f,", f->st.mean, stats_stddev(&f->st),
					f->st.min, f->st.max);
			else
				fputs(",,,,,", out);
			fprintf(out, "%llu,", (unsigned long long)f->st.n);
			if (fn_exact(f) && wall > 0)
				fprintf(out, "%.6f", (double)f->sum / wall);
			fprintf(out, ",%s,%lld\n", fn_kind(s, f), (long long)p->proc_id);
		}
		gpu = gpu_proc_of(s, p, &sl, sync);
		gpu_csv(s->gpu, out, &gpu);
	}
}

/* ---- json ------------------------------------------------------------ */

static void json_int_or_null(FILE *out, int has, int64_t v)
{
	if (has)
		fprintf(out, "%lld", (long long)v);
	else
		fputs("null", out);
}

static void json_proc(const struct summary *s, FILE *out, const struct proc *p,
		      const struct slice *sl)
{
	double wall = proc_wall(p);
	struct gpu_sync_fn sync[SYNC_MAX];
	struct gpu_proc gpu;
	char name[32];

	fprintf(out, "{\"proc_id\":%lld,\"pid\":%lld,\"ppid\":%lld,\"rank\":", (long long)p->proc_id,
		(long long)p->pid, (long long)p->ppid);
	json_int_or_null(out, p->has_rank, p->rank);
	fputs(",\"hostname\":", out);
	fmt_json(out, p->host);
	fputs(",\"exe\":", out);
	fmt_json(out, p->exe);
	fprintf(out, ",\"argv\":%s,\"malloc_mode\":", p->argv_json ? p->argv_json : "null");
	fmt_json(out, p->mode);
	fputs(",\"sample_bytes\":", out);
	json_int_or_null(out, p->has_sample_bytes, p->sample_bytes);
	fputs(",\"wall_ns\":", out);
	json_int_or_null(out, p->has_end, p->end_ns - p->start_ns);
	fputs(",\"end_reason\":", out);
	fmt_json(out, p->end_reason);
	fprintf(out, ",\"dropped_events\":%lld,\"functions\":[", (long long)slice_dropped(sl));
	for (size_t i = 0; i < sl->nfns; i++) {
		const struct fn_item *f = sl->fns[i];

		fprintf(out, "%s{\"event\":", i ? "," : "");
		fmt_json(out, fn_label(s, f, name, sizeof(name)));
		fprintf(out, ",\"kind\":\"%s\",\"count\":%lld,\"bytes\":%lld,\"timed\":%llu",
			fn_kind(s, f), (long long)fn_count(f), (long long)f->bytes,
			(unsigned long long)f->st.n);
		if (f->st.n == 0) {
			fputs(",\"estimated\":false,\"total_ns\":null,\"total_ns_estimated\":null,"
			      "\"mean_ns\":null,\"stddev_ns\":null,\"min_ns\":null,\"max_ns\":null,"
			      "\"wall_share\":null}", out);
			continue;
		}
		fprintf(out, ",\"estimated\":%s,\"total_ns\":", fn_exact(f) ? "false" : "true");
		if (fn_exact(f))
			fprintf(out, "%.0Lf", f->sum);
		else
			fputs("null", out);
		fputs(",\"total_ns_estimated\":", out);
		if (fn_estimable(s, p, f))
			fprintf(out, "%.0f", fn_total(f));
		else
			fputs("null", out);
		fprintf(out, ",\"mean_ns\":%.3f,\"stddev_ns\":%.3f,"
			     "\"min_ns\":%.0f,\"max_ns\":%.0f,\"wall_share\":",
			f->st.mean, stats_stddev(&f->st), f->st.min, f->st.max);
		if (fn_exact(f) && wall > 0)
			fprintf(out, "%.6f}", (double)f->sum / wall);
		else
			fputs("null}", out);
	}
	fputs("],\"peaks\":[", out);
	for (size_t i = 0; i < sl->npeaks; i++) {
		const struct peak_item *k = sl->peaks[i];

		fprintf(out, "%s{\"space\":", i ? "," : "");
		fmt_json(out, s->spaces.v[k->key.b]);
		fprintf(out, ",\"device\":%lld,\"peak_bytes\":%.0f,\"at_ns\":%lld,\"estimated\":%s}",
			(long long)k->key.a, k->peak, (long long)(k->at - p->start_ns),
			peak_estimated(s, p, k) ? "true" : "false");
	}
	fputs("],\"drops\":[", out);
	for (size_t i = 0; i < sl->ndrops; i++) {
		fprintf(out, "%s{\"reason\":", i ? "," : "");
		fmt_json(out, sl->drops[i].reason);
		fprintf(out, ",\"events\":%lld}", (long long)sl->drops[i].events);
	}
	fputs("],", out);
	gpu = gpu_proc_of(s, p, sl, sync);
	gpu_json(s->gpu, out, &gpu);
	fputc('}', out);
}

static void json_write(const struct summary *s, FILE *out)
{
	struct cursor c = { 0 };

	fputs("{\"processes\":[", out);
	for (size_t i = 0; i < s->nprocs; i++) {
		struct slice sl = proc_slice(s, &s->procs[i], &c);

		if (i)
			fputc(',', out);
		json_proc(s, out, &s->procs[i], &sl);
	}
	fputs("]}\n", out);
}

/* ---- entry points ------------------------------------------------------- */

static void summary_free(struct summary *s)
{
	for (size_t i = 0; i < s->nnames; i++)
		free(s->names[i].name);
	free(s->names);
	for (size_t i = 0; i < s->nprocs; i++) {
		struct proc *p = &s->procs[i];

		free(p->host);
		free(p->exe);
		free(p->args);
		free(p->argv_json);
		free(p->mode);
		free(p->end_reason);
		free(p->gpu_status);
		free(p->gpu_detail);
	}
	free(s->procs);
	map_free(&s->fns);
	map_free(&s->peaks);
	strtab_free(&s->spaces);
	for (size_t i = 0; i < s->ndrops; i++)
		free(s->drops[i].reason);
	free(s->drops);
	free(s->fn_list);
	free(s->peak_list);
	gpu_free(s->gpu);
}

int summary_write(sqlite3 *db, FILE *out, enum summary_format fmt)
{
	struct summary s = {
		.db = db,
		.free_fn = -1,
		.fns = { .item_size = sizeof(struct fn_item) },
		.peaks = { .item_size = sizeof(struct peak_item) },
	};
	int own_txn = sqlite3_get_autocommit(db);
	int err;

	/* A read transaction makes the tables agree while a collector writes. */
	if (own_txn && sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
		cli_error("cannot read the store: %s", sqlite3_errmsg(db));
		return -EIO;
	}
	/* names first: heap_row needs to know which functions are the heap's. */
	err = store_each_row(db, names_sql, name_row, &s);
	if (!err)
		err = store_each_row(db, store_schema_version(db) >= 2
					     ? PROCS_SQL("gpu_status, gpu_status_detail")
					     : PROCS_SQL("NULL, NULL"),
				     proc_row, &s);
	if (!err)
		err = store_each_row(db, counts_sql, count_row, &s);
	if (!err)
		err = store_each_row(db, cuda_sql, cuda_row, &s);
	if (!err)
		err = store_each_row(db, heap_sql, heap_row, &s);
	if (!err)
		err = load_peaks(&s);
	if (!err)
		err = store_each_row(db, drops_sql, drop_row, &s);
	if (!err)
		err = gpu_load(db, &s.gpu);
	if (!err)
		err = sort_lists(&s);
	if (err == -ENOMEM)
		cli_error("out of memory reading the store");
	if (err)
		goto out;
	if (fmt == SUMMARY_CSV)
		csv_write(&s, out);
	else if (fmt == SUMMARY_JSON)
		json_write(&s, out);
	else
		table_write(&s, out);
	if (fflush(out) == EOF || ferror(out)) {
		err = -EIO;
		cli_error("cannot write the summary: %s", strerror(errno));
	}
out:
	if (own_txn)
		sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	summary_free(&s);
	return err;
}

static const char *const summary_formats[] = {
	[SUMMARY_TABLE] = "table", [SUMMARY_CSV] = "csv", [SUMMARY_JSON] = "json", NULL,
};

static int summary_main(int argc, char **argv)
{
	int fmt = SUMMARY_TABLE;
	const char *path = NULL;
	sqlite3 *db = NULL;
	int r, rc;

	for (int i = 1; i < argc; i++) {
		if (cli_is_help(argv[i]))
			return cli_help(&summary_command);
		if ((r = cli_format_opt(&summary_command, argc, argv, &i, summary_formats,
					&fmt)) != 0) {
			if (r < 0)
				return CLI_EXIT_USAGE;
		} else if ((rc = cli_store_arg(&summary_command, argv[i], &path)) != 0) {
			return rc;
		}
	}
	if (!path)
		return cli_usage_error(&summary_command, "no store given");
	if (store_open(path, &db) < 0)
		return CLI_EXIT_ERROR;
	rc = summary_write(db, stdout, fmt) < 0 ? CLI_EXIT_ERROR : CLI_EXIT_OK;
	sqlite3_close(db);
	return rc;
}

const struct command summary_command = {
	.name = "summary",
	.brief = "per-process call statistics, GPU activity, peak memory and drops of a store",
	.usage =
		"usage: shimmer summary DB [--format table|csv|json]\n"
		"\n"
		"For each traced process in the store DB: every intercepted function\n"
		"that was called, with its exact count and bytes and the time statistics\n"
		"of the calls that were timed (std dev is the population one); whether\n"
		"GPU activity was traced, kernels per name, copies per kind, memsets,\n"
		"ranges, per-stream and per-device GPU busy time (overlaps counted once)\n"
		"and CPU time blocked in synchronizing calls; peak live memory per\n"
		"device, pinned, managed and host heap; dropped events.  Where GPU\n"
		"activity was sampled (the default), kernel and copy counts and totals\n"
		"are estimates from the sampling windows, marked ~ (SHIMMER_GPU=all\n"
		"records everything).\n"
		"Output goes to stdout; see docs/usage.md for the columns.\n"
		"\n"
		"  --format table   aligned tables in human units (default)\n"
		"  --format csv     one row per process and function, times in ns\n"
		"  --format json    one object with processes[]\n"
		"\n"
		"exit codes: 0 ok, 1 error (missing or unreadable store), 2 usage\n",
	.main = summary_main,
};
