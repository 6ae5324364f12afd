/*
 * peak: a real store in a temporary file, made with the embedded schema
 * and filled with pseudo-random allocations (a fixed LCG) on two memories
 * and four stacks.  The test finds each peak by brute force, evaluating the
 * live bytes at every allocation instant, and the call sites live at it by
 * testing every row; the CSV must agree, and the sites must add up to the
 * peak.
 */
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
#include "tools/present.h"

#define NALLOCS 300
#define START 5000

struct alloc {
	int device; /* -1 host */
	int stack;  /* 1..4; stack s is the single pc 0x1000 * s + 1, in no module */
	int64_t size, at, freed; /* freed 0: live */
};

static struct alloc allocs[NALLOCS];
static uint64_t seed = 12345;

static uint64_t rnd(uint64_t n)
{
	seed = seed * 6364136223846793005ull + 1442695040888963407ull;
	return (seed >> 33) % n;
}

static int setup(void **state)
{
	struct store_fixture *f = store_fixture_new("/tmp/test_peak.XXXXXX");

	exec(f->db, "INSERT INTO processes (proc_id, pid, ppid, uid, exe, malloc_mode, lossless,"
		    " start_wall_ns, start_ns, end_ns) VALUES (1, 77, 1, 0, 'w', 'all', 0, 0, %d, NULL)",
	     START);
	for (int s = 1; s <= 4; s++)
		stack_add(f->db, 1, s, 1, (const int64_t[]){ 0x1000 * s + 1 });
	exec(f->db, "BEGIN");
	for (int i = 0; i < NALLOCS; i++) {
		struct alloc *a = &allocs[i];
		char freed[24];

		a->device = rnd(2) ? -1 : 0;
		a->stack = 1 + (int)rnd(4);
		a->size = 1 + (int64_t)rnd(100000);
		/* Coarse times: many allocations and frees share an instant. */
		a->at = START + 10 * (int64_t)rnd(200);
		a->freed = rnd(3) ? a->at + 10 * (int64_t)rnd(50) : 0;
		snprintf(freed, sizeof(freed), a->freed ? "%lld" : "NULL", (long long)a->freed);
		exec(f->db, "INSERT INTO allocations (proc_id, space, device, ptr, size, sampled, weight,"
			    " alloc_fn, alloc_tid, alloc_ns, free_ns, stack_id) VALUES (1, %Q, %d, %d,"
			    " %lld, 0, %lld, 1, 1, %lld, %s, %d)",
		     a->device < 0 ? "host" : "device", a->device, i, (long long)a->size,
		     (long long)a->size, (long long)a->at,
		     freed, a->stack);
	}
	exec(f->db, "COMMIT");
	*state = f;
	return 0;
}

static int live_at(const struct alloc *a, int64_t t)
{
	return a->at <= t && (!a->freed || a->freed > t);
}

static char *run(sqlite3 *db, int fmt)
{
	struct model_filter flt = model_filter_all();
	struct model *m;
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	assert_non_null(out);
	assert_int_equal(model_load(db, &flt, &m), 0);
	assert_int_equal(peak_write(m, out, fmt), 0);
	model_close(m);
	fclose(out);
	return buf;
}

static void check_peaks(struct store_fixture *f)
{
	char *csv = run(f->db, EMIT_CSV), *folded = run(f->db, PRESENT_FOLDED);

	for (int dev = -1; dev <= 0; dev++) {
		int64_t peak = -1, at = 0;
		char want[256];

		for (int i = 0; i < NALLOCS; i++) {
			int64_t t = allocs[i].at, live = 0;

			if (allocs[i].device != dev)
				continue;
			for (int j = 0; j < NALLOCS; j++)
				if (allocs[j].device == dev && live_at(&allocs[j], t))
					live += allocs[j].size;
			if (live > peak || (live == peak && t < at)) {
				peak = live;
				at = t;
			}
		}
		for (int s = 1; s <= 4; s++) {
			int64_t bytes = 0, count = 0;

			for (int j = 0; j < NALLOCS; j++)
				if (allocs[j].device == dev && allocs[j].stack == s &&
				    live_at(&allocs[j], at)) {
					bytes += allocs[j].size;
					count++;
				}
			snprintf(want, sizeof(want), "77,1,%s,%lld,%lld,0,1,0,0,%lld,%lld,0x%x\n",
				 dev < 0 ? "host" : "cuda:0", (long long)peak, (long long)(at - START),
				 (long long)count, (long long)bytes, 0x1000 * s + 1);
			if (count && !strstr(csv, want))
				fail_msg("missing %s in\n%s", want, csv);
			snprintf(want, sizeof(want), "pid 77;%s;0x%x %lld\n",
				 dev < 0 ? "host" : "cuda:0", 0x1000 * s + 1, (long long)bytes);
			if (count && !strstr(folded, want))
				fail_msg("missing %s in\n%s", want, folded);
		}
	}
	free(csv);
	free(folded);
}

static void test_peak_sites_at_the_peak(void **state)
{
	check_peaks(*state);
}

/* Events past the recorded end (they share the last time bucket) and
 * many events per bucket: the same peaks. */
static void test_peak_events_outside_the_lifetime(void **state)
{
	struct store_fixture *f = *state;

	exec(f->db, "UPDATE processes SET start_ns = %d, end_ns = %d", START, START + 700);
	check_peaks(f);
	exec(f->db, "UPDATE processes SET end_ns = %d", START + 100000000);
	check_peaks(f);
}

static void test_peak_json_reads_back(void **state)
{
	struct store_fixture *f = *state;
	char *json = run(f->db, EMIT_JSON);
	sqlite3_stmt *st;

	/* Per peak, the sites add up to it. */
	assert_int_equal(sqlite3_prepare_v2(f->db,
		"SELECT json_extract(p.value, '$.peak_bytes'),"
		" (SELECT sum(json_extract(s.value, '$.bytes')) FROM json_each(p.value, '$.sites') s)"
		" FROM json_each(json_extract(?, '$.processes[0].peaks')) p", -1, &st, NULL), SQLITE_OK);
	sqlite3_bind_text(st, 1, json, -1, SQLITE_STATIC);
	for (int n = 0; n < 2; n++) {
		assert_int_equal(sqlite3_step(st), SQLITE_ROW);
		assert_int_equal(sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1));
	}
	assert_int_equal(sqlite3_step(st), SQLITE_DONE);
	sqlite3_finalize(st);
	free(json);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, store_fixture_teardown)
		T(test_peak_sites_at_the_peak),
		T(test_peak_events_outside_the_lifetime),
		T(test_peak_json_reads_back),
#undef T
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
