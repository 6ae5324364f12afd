/*
 * model: real stores in temporary files, made with the embedded schema.
 * Every figure is checked against one computed here another way: peaks by
 * brute force (the live bytes at every instant, tested block by block),
 * series likewise, steps' statistics by sorting, and the parallel pass
 * over a large table against a closed form of its known pattern.  That
 * `summary` and `peak` agree is checked on their written outputs.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "sqlexec.h"

#include "tools/emit.h"
#include "tools/model.h"
#include "tools/peak.h"
#include "tools/summary.h"

static int setup(void **state)
{
	*state = store_fixture_new("/tmp/test_model.XXXXXX");
	return 0;
}

static void add_proc(sqlite3 *db, int id, int pid, int rank, const char *mode, int64_t start,
		     int64_t end)
{
	char e[24], r[24];

	snprintf(e, sizeof(e), end >= 0 ? "%lld" : "NULL", (long long)end);
	snprintf(r, sizeof(r), rank >= 0 ? "%d" : "NULL", rank);
	exec(db, "INSERT INTO processes (proc_id, pid, ppid, uid, exe, malloc_mode, lossless,"
		 " start_wall_ns, start_ns, end_ns, end_reason, rank) VALUES (%d, %d, 1, 0,"
		 " '/bin/w%d', %Q, 0, 0, %lld, %s, %s, %s)",
	     id, pid, id, mode, (long long)start, e, end >= 0 ? "'exit'" : "NULL", r);
}

/* free_ns 0: never freed. */
static void add_block(sqlite3 *db, int proc, const char *space, int device, int64_t size,
		      int64_t at, int64_t freed, int stack)
{
	char f[24];

	snprintf(f, sizeof(f), freed ? "%lld" : "NULL", (long long)freed);
	exec(db, "INSERT INTO allocations (proc_id, space, device, ptr, size, sampled, weight,"
		 " alloc_fn, alloc_tid, alloc_ns, free_ns, stack_id) VALUES (%d, %Q, %d, 1, %lld,"
		 " 0, %lld, 1, 1, %lld, %s, %d)",
	     proc, space, device, (long long)size, (long long)size, (long long)at, f, stack);
}

static struct model *load(sqlite3 *db, int64_t pid, int64_t rank)
{
	struct model_filter f = model_filter_all();
	struct model *m;

	f.pid = pid;
	f.rank = rank;
	assert_int_equal(model_load(db, &f, &m), 0);
	return m;
}

static const struct model_mem *mem_of(struct model *m, int64_t pid, const char *label)
{
	struct model_mem *const *v;
	size_t n;

	assert_int_equal(model_memories(m, &v, &n), 0);
	for (size_t i = 0; i < n; i++)
		if (v[i]->proc->pid == pid && strcmp(v[i]->label, label) == 0)
			return v[i];
	return NULL;
}

/* The distribution of kind of memory label (of any process). */
static const struct model_hist *hist_of(struct model *m, enum model_hist_kind kind,
					const char *label)
{
	const struct model_hist *v;
	size_t n;

	assert_int_equal(model_heap_hist(m, kind, &v, &n), 0);
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i].mem->label, label) == 0)
			return &v[i];
	return NULL;
}

/* ---- the peak --------------------------------------------------------------- */

/*
 * A free and an allocation at the same instant are never both live, and a
 * block freed the instant it was made is never live: whatever order the
 * rows come in.  The peak is taken over instants, not over events.
 */
static void test_model_peak_ties(void **state)
{
	struct store_fixture *f = *state;
	const struct model_mem *mm;
	struct model *m;

	add_proc(f->db, 1, 10, -1, "all", 0, 1000);
	/* A [10, 20) 100 B, then B [20, 30) 150 B: 150, not 250. */
	add_block(f->db, 1, "host", -1, 150, 20, 30, 1);
	add_block(f->db, 1, "host", -1, 100, 10, 20, 1);
	/* C lives no time at all at 25: never counted (else 650). */
	add_block(f->db, 1, "host", -1, 500, 25, 25, 1);
	m = load(f->db, -1, -1);
	mm = mem_of(m, 10, "host");
	assert_non_null(mm);
	assert_float_equal(mm->peak, 150, 0);
	assert_int_equal(mm->peak_ns, 20);
	assert_float_equal(mm->live_end, 0, 0);
	model_close(m);

	/* The first instant of the highest total wins: D [40, 50) 150 B. */
	add_block(f->db, 1, "host", -1, 150, 40, 50, 1);
	m = load(f->db, -1, -1);
	mm = mem_of(m, 10, "host");
	assert_float_equal(mm->peak, 150, 0);
	assert_int_equal(mm->peak_ns, 20);
	model_close(m);
}

#define NRAND 3000

struct blk {
	int proc, device;
	int64_t size, at, freed;
};

static uint64_t seed = 42;

static uint64_t rnd(uint64_t n)
{
	seed = seed * 6364136223846793005ull + 1442695040888963407ull;
	return (seed >> 33) % n;
}

static int live_at(const struct blk *b, int64_t t)
{
	return b->at <= t && (!b->freed || b->freed > t);
}

/* Brute force: the highest total over every instant, and its first. */
static void brute_peak(const struct blk *v, size_t n, int proc, int dev, double *peak,
		       int64_t *at)
{
	*peak = -1;
	*at = 0;
	for (size_t i = 0; i < n; i++) {
		int64_t ts[2] = { v[i].at, v[i].freed };

		for (int k = 0; k < 2; k++) {
			double live = 0;

			if (v[i].proc != proc || v[i].device != dev || (k == 1 && !v[i].freed))
				continue;
			for (size_t j = 0; j < n; j++)
				if (v[j].proc == proc && v[j].device == dev && live_at(&v[j], ts[k]))
					live += (double)v[j].size;
			if (live > *peak || (live == *peak && ts[k] < *at)) {
				*peak = live;
				*at = ts[k];
			}
		}
	}
}

static size_t random_store(sqlite3 *db, struct blk *v)
{
	size_t n = 0;

	add_proc(db, 1, 100, 0, "all", 0, 100000);
	add_proc(db, 2, 200, 1, "all", 0, 100000);
	exec(db, "BEGIN");
	for (; n < NRAND; n++) {
		struct blk *b = &v[n];

		b->proc = 1 + (int)rnd(2);
		b->device = rnd(3) ? -1 : 0;
		b->size = 1 + (int64_t)rnd(10000);
		/* Coarse times: many events share an instant. */
		b->at = 10 * (int64_t)rnd(5000);
		b->freed = rnd(4) ? b->at + 10 * (int64_t)rnd(300) : 0;
		add_block(db, b->proc, b->device < 0 ? "host" : "device", b->device, b->size, b->at,
			  b->freed, 1 + (int)rnd(3));
	}
	exec(db, "COMMIT");
	return n;
}

static void test_model_peak_brute_force(void **state)
{
	struct store_fixture *f = *state;
	struct blk *v = calloc(NRAND, sizeof(*v));
	struct model *m;
	size_t n;

	assert_non_null(v);
	n = random_store(f->db, v);
	m = load(f->db, -1, -1);
	for (int p = 1; p <= 2; p++)
		for (int d = -1; d <= 0; d++) {
			const struct model_mem *mm = mem_of(m, 100 * p, d < 0 ? "host" : "cuda:0");
			double peak;
			int64_t at;

			brute_peak(v, n, p, d, &peak, &at);
			assert_non_null(mm);
			assert_float_equal(mm->peak, peak, 0);
			assert_int_equal(mm->peak_ns, at);
		}
	model_close(m);
	free(v);
}

/* summary and peak print the same peak, at the same instant, for every
 * memory: they are one computation. */
static void test_model_summary_and_peak_agree(void **state)
{
	struct store_fixture *f = *state;
	struct blk *v = calloc(NRAND, sizeof(*v));
	char *sum = NULL, *pk = NULL;
	size_t ls = 0, lp = 0;
	FILE *out;
	struct summary_opts o;
	struct model *m;
	sqlite3_stmt *st;
	int rows = 0;

	assert_non_null(v);
	random_store(f->db, v);
	summary_opts_init(&o);
	o.fmt = EMIT_JSON;
	out = open_memstream(&sum, &ls);
	m = load(f->db, -1, -1);
	assert_int_equal(summary_write(m, out, &o), 0);
	model_close(m);
	fclose(out);
	out = open_memstream(&pk, &lp);
	m = load(f->db, -1, -1);
	assert_int_equal(peak_write(m, out, EMIT_JSON), 0);
	model_close(m);
	fclose(out);
	assert_int_equal(sqlite3_prepare_v2(f->db,
		"SELECT s.pid, s.memory, s.peak, s.at, p.peak, p.at FROM"
		" (SELECT json_extract(pr.value, '$.pid') AS pid,"
		"  json_extract(k.value, '$.memory') AS memory,"
		"  json_extract(k.value, '$.peak_bytes') AS peak,"
		"  json_extract(k.value, '$.at_ns') AS at"
		"  FROM json_each(?1, '$.processes') pr, json_each(pr.value, '$.peaks') k) s"
		" FULL JOIN"
		" (SELECT json_extract(pr.value, '$.pid') AS pid,"
		"  json_extract(k.value, '$.memory') AS memory,"
		"  json_extract(k.value, '$.peak_bytes') AS peak,"
		"  json_extract(k.value, '$.peak_at_ns') AS at"
		"  FROM json_each(?2, '$.processes') pr, json_each(pr.value, '$.peaks') k) p"
		" USING (pid, memory)", -1, &st, NULL), SQLITE_OK);
	sqlite3_bind_text(st, 1, sum, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, pk, -1, SQLITE_STATIC);
	while (sqlite3_step(st) == SQLITE_ROW) {
		rows++;
		assert_int_equal(sqlite3_column_type(st, 2), SQLITE_INTEGER);
		assert_int_equal(sqlite3_column_type(st, 4), SQLITE_INTEGER);
		assert_int_equal(sqlite3_column_int64(st, 2), sqlite3_column_int64(st, 4));
		assert_int_equal(sqlite3_column_int64(st, 3), sqlite3_column_int64(st, 5));
	}
	sqlite3_finalize(st);
	assert_int_equal(rows, 4);
	free(sum);
	free(pk);
	free(v);
}

/* ---- the parallel pass ------------------------------------------------------------ */

/*
 * Enough rows for the pass to split among threads: block i lives [10 i,
 * 10 i + 35) with size 1 + i % 7, so at instant 10 k the live blocks are
 * k-3 .. k; the highest sum is over the four blocks ending with i % 7 == 6.
 */
#define NBIG 250000

static void test_model_parallel_pass(void **state)
{
	struct store_fixture *f = *state;
	const struct model_mem *mm;
	double best = 0, allocated = 0, sizes[4] = { 0 };
	int64_t best_t = 0;
	struct model *m;

	add_proc(f->db, 1, 10, -1, "all", 0, 10 * (int64_t)NBIG + 100);
	exec(f->db, "WITH RECURSIVE i(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM i WHERE n < %d)"
		    " INSERT INTO allocations (proc_id, space, device, ptr, size, sampled, weight,"
		    " alloc_fn, alloc_tid, alloc_ns, free_ns, stack_id)"
		    " SELECT 1, 'host', -1, n, 1 + n %% 7, 0, 1 + n %% 7, 1, 1, 10 * n,"
		    " CASE WHEN n < %d THEN 10 * n + 35 END, 1 + n %% 3 FROM i",
	     NBIG - 1, NBIG - 1);
	for (int64_t k = 0; k < NBIG; k++) {
		double live = 0;

		for (int64_t i = k - 3; i <= k; i++)
			if (i >= 0)
				live += (double)(1 + i % 7);
		if (live > best) {
			best = live;
			best_t = 10 * k;
		}
		allocated += (double)(1 + k % 7);
		sizes[1 + k % 7 < 2 ? 1 : 1 + k % 7 < 4 ? 2 : 3]++;
	}
	m = load(f->db, -1, -1);
	model_want(m, MODEL_WANT_SITES | MODEL_WANT_SIZES);
	mm = mem_of(m, 10, "host");
	assert_non_null(mm);
	assert_int_equal(mm->rows, NBIG);
	assert_float_equal(mm->allocated, allocated, 0);
	assert_float_equal(mm->peak, best, 0);
	assert_int_equal(mm->peak_ns, best_t);
	assert_float_equal(mm->live_end, (double)(1 + (NBIG - 1) % 7), 0);
	{
		/* Three stacks, split among the threads; none has frames, so
		 * all are one site, "(no stack)", which every block is in. */
		struct model_groups g;
		double rows = 0;

		assert_int_equal(model_heap_groups(m, MODEL_ALLOCATED, MODEL_BY_SITE, 0, &g), 0);
		assert_int_equal(g.n, 1);
		assert_string_equal(g.v[0].name, "(no stack)");
		for (size_t i = 0; i < g.n; i++)
			rows += (double)g.v[i].rows;
		assert_float_equal(rows, NBIG, 0);
		model_groups_free(&g);
	}
	{
		/* each thread's sizes merged: 1, 2-3, 4-7 B; every freed
		 * block lived 35 ns, in [32, 64) */
		const struct model_hist *h = hist_of(m, MODEL_HIST_SIZE, "host");

		for (unsigned b = 1; b < 4; b++)
			assert_float_equal(h->count[b], sizes[b], 0);
		assert_float_equal(h->total_bytes, allocated, 0);
		h = hist_of(m, MODEL_HIST_LIFETIME, "host");
		assert_float_equal(h->count[6], NBIG - 1, 0);
		assert_float_equal(h->live_count, 1, 0);
	}
	model_close(m);
}

/* ---- processes ------------------------------------------------------------------ */

static void test_model_processes(void **state)
{
	struct store_fixture *f = *state;
	struct model *m;
	const struct model_proc *p;

	add_proc(f->db, 1, 10, 0, "all", 100, 900);
	add_proc(f->db, 2, 20, 1, "sample", 200, -1);
	add_proc(f->db, 3, 30, 1, "off", 300, 400);
	exec(f->db, "UPDATE processes SET parent_proc_id = 2 WHERE proc_id = 3");
	/* Process 2 never ended: its end is its last event, here a free. */
	add_block(f->db, 2, "host", -1, 10, 250, 7000, 1);
	exec(f->db, "INSERT INTO cuda_calls (proc_id, tid, fn_id, start_ns, end_ns, ret,"
		    " per_thread_stream) VALUES (2, 1, 1, 300, 6500, 0, 0)");
	exec(f->db, "INSERT INTO drops VALUES (2, 1, 'ring_full', 5), (2, 0, 'cupti', 3),"
		    " (3, 1, 'no_slot', 0), (1, 1, 'stack_collision', 2),"
		    " (1, 0, 'stack_full', 7), (1, 0, 'pystack_full', 4), (2, 0, 'stack_full', 9)");
	m = load(f->db, -1, -1);
	assert_int_equal(model_nprocs(m), 3);
	assert_int_equal(model_nselected(m), 3);
	p = model_proc_by_id(m, 2);
	assert_int_equal(p->end_ns, 7000);
	assert_false(p->end_known);
	assert_int_equal(p->rank, 1);
	assert_int_equal(p->mode, MODEL_MALLOC_SAMPLE);
	assert_int_equal(p->dropped_host, 5);
	assert_int_equal(p->dropped_gpu, 3);
	assert_false(model_proc_complete(p));
	assert_int_equal(p->nchildren, 1);
	assert_ptr_equal(p->children[0], model_proc_by_id(m, 3));
	assert_ptr_equal(model_proc_by_id(m, 3)->parent, p);
	assert_true(model_proc_complete(model_proc_by_id(m, 3)));
	assert_int_equal(model_proc_by_id(m, 1)->end_ns, 900);
	assert_true(model_proc_by_id(m, 1)->end_known);
	/* stored without a stack: listed, not lost; the shim's refused
	 * captures counted per table */
	assert_int_equal(model_proc_by_id(m, 1)->ndrops, 3);
	assert_int_equal(model_proc_by_id(m, 1)->dropped, 0);
	assert_int_equal(model_proc_by_id(m, 1)->dropped_host, 0);
	assert_true(model_proc_complete(model_proc_by_id(m, 1)));
	assert_int_equal(model_proc_by_id(m, 1)->stacks_refused, 7);
	assert_int_equal(model_proc_by_id(m, 1)->pystacks_refused, 4);
	assert_int_equal(p->stacks_refused, 9);
	assert_int_equal(p->pystacks_refused, 0);
	assert_int_equal(p->dropped, 8);
	assert_int_equal(model_proc_by_id(m, 3)->stacks_refused, 0);
	model_close(m);

	/* --rank 1 keeps two; --pid 30 one; both: one. */
	m = load(f->db, -1, 1);
	assert_int_equal(model_nselected(m), 2);
	assert_false(model_proc_by_id(m, 1)->selected);
	model_close(m);
	m = load(f->db, 30, -1);
	assert_int_equal(model_nselected(m), 1);
	assert_true(model_proc_by_id(m, 3)->selected);
	model_close(m);
	m = load(f->db, 30, 0);
	assert_int_equal(model_nselected(m), 0);
	model_close(m);
}

/* The synchronizing functions are the wire format's list (common/wire.h). */
static void test_model_sync_functions(void **state)
{
	struct store_fixture *f = *state;
	static const struct {
		const char *name;
		int syncs, launches;
	} want[] = {
		{ "cudaMemcpy", 1, 0 },		   { "cudaStreamSynchronize", 1, 0 },
		{ "cudaDeviceSynchronize", 1, 0 }, { "cudaEventSynchronize", 1, 0 },
		{ "cudaStreamWaitEvent", 0, 0 },   { "cudaMemcpyAsync", 0, 0 },
		{ "cudaLaunchKernel", 0, 1 },	   { "malloc", 0, 0 },
	};
	struct model *m;

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		exec(f->db, "INSERT INTO functions (fn_id, name, family) VALUES (%d, %Q, 'cuda')",
		     (int)i + 1, want[i].name);
	m = load(f->db, -1, -1);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct model_fn *fn = model_fn(m, (int64_t)i + 1);

		assert_non_null(fn);
		assert_string_equal(fn->name, want[i].name);
		assert_int_equal(model_fn_syncs(fn), want[i].syncs);
		assert_int_equal(model_fn_launches(fn), want[i].launches);
	}
	model_close(m);
}

/* ---- memories: names, series, timeline -------------------------------------------- */

static int count_events(void *ctx, int64_t t, double live)
{
	double *v = ctx;

	(void)t;
	v[0]++;
	if (live > v[1])
		v[1] = live;
	return 0;
}

static void test_model_memories(void **state)
{
	struct store_fixture *f = *state;
	struct model_mem *const *v;
	struct model *m;
	size_t n;
	int64_t t[4] = { 5, 15, 25, 1000 };
	double live[4], ev[2] = { 0, 0 };

	add_proc(f->db, 1, 10, -1, "all", 0, 1000);
	add_block(f->db, 1, "pinned", 0, 4, 10, 0, 1);
	add_block(f->db, 1, "managed", 1, 8, 10, 20, 1);
	add_block(f->db, 1, "device", 0, 16, 10, 20, 1);
	add_block(f->db, 1, "device", 0, 32, 15, 30, 1);
	add_block(f->db, 1, "host", -1, 64, 10, 0, 1);
	m = load(f->db, -1, -1);
	assert_int_equal(model_memories(m, &v, &n), 0);
	/* One naming everywhere, in one order: host, cuda, managed, pinned. */
	assert_int_equal(n, 4);
	assert_string_equal(v[0]->label, "host");
	assert_string_equal(v[1]->label, "cuda:0");
	assert_string_equal(v[2]->label, "managed:1");
	assert_string_equal(v[3]->label, "pinned");
	assert_float_equal(v[1]->peak, 48, 0);
	assert_int_equal(v[1]->peak_ns, 15);
	assert_int_equal(model_mem_series(m, v[1], t, 4, live), 0);
	assert_float_equal(live[0], 0, 0);
	assert_float_equal(live[1], 48, 0);
	assert_float_equal(live[2], 32, 0);
	assert_float_equal(live[3], 0, 0);
	/* Instants 10, 15, 20, 30: four changes, highest 48. */
	assert_int_equal(model_mem_events(m, v[1], count_events, ev), 0);
	assert_float_equal(ev[0], 4, 0);
	assert_float_equal(ev[1], 48, 0);
	model_close(m);
}

/* ---- distributions ----------------------------------------------------------------- */

/* Bucket edges: a value of bit length b is in bucket b, 2^k - 1 and 2^k
 * apart; a lifetime of 0, or stamped below 0, is 0; blocks never freed
 * are live, not in a bucket; a sampled row stands for weight / size. */
static void test_model_hist_rows(void **state)
{
	static const int64_t size[] = { 0, 1, 2, 3, 4, 1023, 1024, (int64_t)1 << 40 };
	static const unsigned size_b[] = { 0, 1, 2, 2, 3, 10, 11, 41 };
	/* lifetime, its bucket (-1: never freed) */
	static const int64_t life[][2] = { { 0, 0 }, { -5, 0 }, { 1, 1 }, { 7, 3 }, { 8, 4 },
					  { 1000000000, 30 }, { 1073741824, 31 }, { -1, -1 } };
	struct store_fixture *f = *state;
	const struct model_hist *h;
	double want_c[MODEL_HIST_BUCKETS] = { 0 }, want_b[MODEL_HIST_BUCKETS] = { 0 };
	struct model *m;
	uint64_t lo, hi;

	add_proc(f->db, 1, 10, -1, "all", 0, 1 << 30);
	for (size_t i = 0; i < sizeof(size) / sizeof(size[0]); i++) {
		add_block(f->db, 1, "host", -1, size[i], 100, 200, 1);
		want_c[size_b[i]]++;
		want_b[size_b[i]] += (double)size[i];
	}
	for (size_t i = 0; i < sizeof(life) / sizeof(life[0]); i++)
		add_block(f->db, 1, "device", 0, 16, 100, life[i][0] >= 0 ? 100 + life[i][0] :
					  life[i][0] == -1 ? 0 : 100 + life[i][0], 1);
	/* sampled: 3 blocks of 10 B (weight 30) */
	exec(f->db, "INSERT INTO allocations (proc_id, space, device, ptr, size, sampled, weight,"
		    " alloc_fn, alloc_tid, alloc_ns, free_ns) VALUES (1, 'host', -1, 1, 10, 1, 30, 1,"
		    " 1, 100, 400)");
	want_c[4] += 3;
	want_b[4] += 30;
	m = load(f->db, -1, -1);
	h = hist_of(m, MODEL_HIST_SIZE, "host");
	assert_non_null(h);
	for (unsigned b = 0; b < MODEL_HIST_BUCKETS; b++) {
		assert_float_equal(h->count[b], want_c[b], 1e-6);
		assert_float_equal(h->bytes[b], want_b[b], 0);
	}
	assert_float_equal(h->total_count, 11, 1e-6);
	h = hist_of(m, MODEL_HIST_LIFETIME, "cuda:0");
	assert_non_null(h);
	assert_float_equal(h->count[0], 2, 0);
	assert_float_equal(h->count[1], 1, 0);
	assert_float_equal(h->count[3], 1, 0);
	assert_float_equal(h->count[4], 1, 0);
	assert_float_equal(h->count[30], 1, 0);
	assert_float_equal(h->count[31], 1, 0);
	assert_float_equal(h->live_count, 1, 0);
	assert_float_equal(h->live_bytes, 16, 0);
	assert_float_equal(h->total_count, 8, 0);
	assert_float_equal(h->total_bytes, 128, 0);
	/* 100 ns each, and the sampled row's 300 ns: 3 blocks in [256, 512) */
	h = hist_of(m, MODEL_HIST_LIFETIME, "host");
	assert_float_equal(h->count[7], 8, 0);
	assert_float_equal(h->count[9], 3, 1e-6);
	assert_float_equal(h->bytes[9], 30, 0);
	model_close(m);
	model_hist_bounds(0, &lo, &hi);
	assert_true(lo == 0 && hi == 0);
	model_hist_bounds(1, &lo, &hi);
	assert_true(lo == 1 && hi == 1);
	model_hist_bounds(11, &lo, &hi);
	assert_true(lo == 1024 && hi == 2047);
	model_hist_bounds(64, &lo, &hi);
	assert_true(lo == (uint64_t)1 << 63 && hi == UINT64_MAX);
}

/*
 * An aggregated heap: sizes from the collector's histograms alone (its
 * kept rows are also in them), lifetimes from its quarter-octave
 * histogram up to row_ns and from its rows beyond (the rows of a
 * SHIMMER_HEAP_ROWS=both store within row_ns are in the histogram).
 */
static void test_model_hist_aggregated(void **state)
{
	struct store_fixture *f = *state;
	const struct model_hist *h;
	struct model *m;

	add_proc(f->db, 1, 10, -1, "all", 0, 100000);
	exec(f->db, "INSERT INTO heap_totals (proc_id, final, allocs, alloc_bytes, frees,"
		    " freed_bytes, live_count, live_bytes, peak_bytes, peak_count, peak_ns, temp_count,"
		    " temp_bytes, short_ns, short_count, short_bytes, row_ns, point_allocs,"
		    " late_events, late_steps) VALUES (1, 1, 9, 900, 8, 800, 1, 100, 100, 1, 10, 0, 0,"
		    " 1000, 0, 0, 1000, 1, 0, 0)");
	/* sizes: 2 of [4, 8), 7 of [64, 128), over two sites */
	exec(f->db, "INSERT INTO heap_histograms VALUES (1, 1, 0, 'size', 3, 2, 10),"
		    " (1, 2, 0, 'size', 7, 4, 400), (1, 1, 0, 'size', 7, 3, 490)");
	/* lifetimes: 5 ns (q 5: [4, 8)), 8-9 ns (q 12: [8, 16)), 896-1023 ns
	 * (q 39, [512, 1024)) twice, one of 1000 ns of the two sites */
	exec(f->db, "INSERT INTO heap_histograms VALUES (1, 1, 0, 'life', 5, 1, 100),"
		    " (1, 1, 0, 'life', 12, 1, 100), (1, 1, 0, 'life', 39, 1, 100),"
		    " (1, 2, 0, 'life', 39, 2, 200)");
	/* rows: one within row_ns (in the histogram: skipped), two beyond
	 * (1500 ns: [1024, 2048)), one never freed */
	add_block(f->db, 1, "host", -1, 100, 10, 1010, 1);
	add_block(f->db, 1, "host", -1, 100, 10, 1510, 1);
	add_block(f->db, 1, "host", -1, 100, 20, 1520, 2);
	add_block(f->db, 1, "host", -1, 100, 10, 0, 2);
	m = load(f->db, -1, -1);
	h = hist_of(m, MODEL_HIST_SIZE, "host");
	assert_non_null(h);
	assert_true(h->mem->aggregated);
	assert_float_equal(h->count[3], 2, 0);
	assert_float_equal(h->count[7], 7, 0);
	assert_float_equal(h->bytes[7], 890, 0);
	assert_float_equal(h->total_count, 9, 0);
	h = hist_of(m, MODEL_HIST_LIFETIME, "host");
	assert_float_equal(h->count[3], 1, 0);
	assert_float_equal(h->count[4], 1, 0);
	assert_float_equal(h->count[10], 3, 0);
	assert_float_equal(h->count[11], 2, 0);
	assert_float_equal(h->live_count, 1, 0);
	assert_float_equal(h->total_count, 8, 0);
	model_close(m);
	/* a bucket no collector writes: one error, not a wrong figure */
	exec(f->db, "INSERT INTO heap_histograms VALUES (1, 3, 0, 'life', 9, 1, 1)");
	m = load(f->db, -1, -1);
	{
		const struct model_hist *v;
		size_t n;

		assert_int_equal(model_heap_hist(m, MODEL_HIST_LIFETIME, &v, &n), -EIO);
	}
	model_close(m);
}

/* ---- steps and streams ------------------------------------------------------------- */

static void test_model_steps(void **state)
{
	struct store_fixture *f = *state;
	static const int64_t dur[] = { 50, 10, 40, 20, 30, 100, 60, 70, 80, 90 };
	const struct model_steps *s;
	struct model *m;

	add_proc(f->db, 1, 10, -1, "all", 0, 100000);
	exec(f->db, "INSERT INTO strings VALUES (1, 1, 'step', NULL), (1, 2, 'other', NULL)");
	for (int i = 0; i < 10; i++)
		exec(f->db, "INSERT INTO ranges (proc_id, tid, kind, domain_id, name_id, start_ns,"
			    " end_ns, depth) VALUES (1, 1, 'push', 0, 1, %d, %lld, 0)",
		     1000 * (i + 1), (long long)(1000 * (i + 1) + dur[i]));
	/* Fewer top-level 'other's; a nested 'other' does not count. */
	exec(f->db, "INSERT INTO ranges (proc_id, tid, kind, domain_id, name_id, start_ns, end_ns,"
		    " depth) VALUES (1, 1, 'push', 0, 2, 20000, 20010, 0),"
		    " (1, 1, 'push', 0, 2, 1001, 1002, 1)");
	m = load(f->db, -1, -1);
	assert_int_equal(model_steps(m, model_proc_by_id(m, 1), NULL, &s), 0);
	assert_string_equal(s->name, "step");
	assert_int_equal(s->n, 10);
	assert_float_equal(s->total_ns, 550, 0);
	assert_float_equal(s->mean_ns, 55, 0);
	/* Sorted: 10 .. 100; median between 50 and 60, p90 at 9 * 0.9 = 8.1. */
	assert_float_equal(s->median_ns, 55, 1e-9);
	assert_float_equal(s->p90_ns, 90 + 0.1 * 10, 1e-9);
	assert_float_equal(s->min_ns, 10, 0);
	assert_float_equal(s->max_ns, 100, 0);
	assert_int_equal(s->start[0], 1000);
	assert_int_equal(s->end[9], 10000 + 90);
	model_close(m);
}

/* As many depth-0 ranges of another name, on another thread (PyTorch's
 * autograd thread opens CUB's there once a step), but shorter: the steps
 * are still 'step', not the name that sorts first. */
static void test_model_steps_tie(void **state)
{
	struct store_fixture *f = *state;
	const struct model_steps *s;
	struct model *m;

	add_proc(f->db, 1, 10, -1, "all", 0, 100000);
	exec(f->db, "INSERT INTO strings VALUES (1, 1, 'step', NULL),"
		    " (1, 2, 'cub::DeviceRadixSort', NULL)");
	for (int i = 0; i < 10; i++)
		exec(f->db, "INSERT INTO ranges (proc_id, tid, kind, domain_id, name_id, start_ns,"
			    " end_ns, depth) VALUES (1, 1, 'push', 0, 1, %d, %d, 0),"
			    " (1, 2, 'push', 0, 2, %d, %d, 0)",
		     1000 * (i + 1), 1000 * (i + 1) + 900, 1000 * (i + 1) + 100,
		     1000 * (i + 1) + 150);
	m = load(f->db, -1, -1);
	assert_int_equal(model_steps(m, model_proc_by_id(m, 1), NULL, &s), 0);
	assert_string_equal(s->name, "step");
	assert_int_equal(s->n, 10);
	assert_float_equal(s->mean_ns, 900, 0);
	model_close(m);
}

struct seen {
	int n;
	int64_t last;
	int ordered;
	int64_t last_of[3]; /* by proc_id */
};

/* In time order within each process. */
static int kernel_cb(void *ctx, const struct model_kernel *k)
{
	struct seen *s = ctx;

	if (k->start_ns < s->last_of[k->proc->proc_id])
		s->ordered = 0;
	s->last_of[k->proc->proc_id] = k->start_ns;
	s->n++;
	assert_string_equal(k->name, "kern(int)");
	return 0;
}

static int range_cb(void *ctx, const struct model_range *r)
{
	struct seen *s = ctx;

	s->n++;
	if (r->end_ns < 0)
		s->last = r->start_ns;
	return 0;
}

static void test_model_streams(void **state)
{
	struct store_fixture *f = *state;
	struct model_scan all = { INT64_MIN, INT64_MAX, 1, 0, 0 }, mid = { 300, 600, 0, 0, 0 };
	struct seen s = { 0, 0, 1, { 0 } };
	struct model *m;

	add_proc(f->db, 1, 10, 0, "all", 0, 1000);
	add_proc(f->db, 2, 20, 1, "all", 0, 1000);
	exec(f->db, "INSERT INTO strings VALUES (1, 1, '_Z4kerni', 'kern(int)'),"
		    " (2, 1, '_Z4kerni', 'kern(int)'), (1, 2, 'r', NULL)");
	/* Stored out of time order. */
	for (int i = 9; i >= 0; i--)
		exec(f->db, "INSERT INTO kernels (proc_id, device, stream, correlation, name_id,"
			    " start_ns, end_ns) VALUES (%d, 0, 7, %d, 1, %d, %d)",
		     1 + i % 2, i, 100 * i, 100 * i + 50);
	exec(f->db, "INSERT INTO ranges (proc_id, tid, kind, domain_id, name_id, start_ns, end_ns,"
		    " depth) VALUES (1, 1, 'push', 0, 2, 100, 200, 0), (1, 1, 'push', 0, 2, 500,"
		    " NULL, 0)");
	m = load(f->db, -1, -1);
	assert_int_equal(model_kernels_each(m, &all, kernel_cb, &s), 0);
	assert_int_equal(s.n, 10);
	assert_true(s.ordered);
	/* [300, 600): kernels starting 300, 400, 500 and the one of 250..300? no:
	 * 200..250 ends before 300. */
	s = (struct seen){ 0, 0, 1, { 0 } };
	assert_int_equal(model_kernels_each(m, &mid, kernel_cb, &s), 0);
	assert_int_equal(s.n, 3);
	/* The open range overlaps every window after its start. */
	s = (struct seen){ 0, 0, 1, { 0 } };
	assert_int_equal(model_ranges_each(m, &mid, range_cb, &s), 0);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.last, 500);
	model_close(m);
	/* --rank 1: the odd ones. */
	m = load(f->db, -1, 1);
	s = (struct seen){ 0, 0, 1, { 0 } };
	assert_int_equal(model_kernels_each(m, &all, kernel_cb, &s), 0);
	assert_int_equal(s.n, 5);
	assert_true(s.ordered);
	model_close(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, store_fixture_teardown)
		T(test_model_peak_ties),
		T(test_model_peak_brute_force),
		T(test_model_summary_and_peak_agree),
		T(test_model_parallel_pass),
		T(test_model_processes),
		T(test_model_sync_functions),
		T(test_model_memories),
		T(test_model_hist_rows),
		T(test_model_hist_aggregated),
		T(test_model_steps),
		T(test_model_steps_tie),
		T(test_model_streams),
#undef T
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
