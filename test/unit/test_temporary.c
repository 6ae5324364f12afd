/*
 * temporary: a real store in a temporary file, made with the embedded
 * schema, with allocations of known lifetimes on three stacks (in no
 * module, so each site is its pc) in an exact and a sampled process.  The
 * counts, bytes and medians expected are computed here from the same
 * arrays.
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
#include "tools/temporary.h"

static const struct alloc {
	int proc, stack;
	const char *space;
	int64_t size;
	double weight;
	int64_t life; /* -1: never freed */
} allocs[] = {
	{ 1, 1, "host", 100, 100, 1000 },	  { 1, 1, "host", 200, 200, 3000 },
	{ 1, 1, "host", 300, 300, 2000 },	  { 1, 1, "host", 400, 400, 1000000 },
	{ 1, 1, "host", 500, 500, 1000001 },	  { 1, 1, "host", 600, 600, -1 },
	{ 1, 2, "host", 10, 10, 0 },		  { 1, 2, "host", 20, 20, 500 },
	{ 1, 3, "device", 1 << 20, 1 << 20, 700 }, { 1, 3, "device", 1 << 20, 1 << 20, 900 },
	{ 1, 3, "device", 1 << 20, 1 << 20, 800 }, { 1, 3, "device", 1 << 20, 1 << 20, 100 },
	{ 2, 1, "host", 64, 4128.4, 50 },	  { 2, 1, "host", 8000, 9000, 70 },
};

#define NALLOCS (sizeof(allocs) / sizeof(allocs[0]))

static int setup(void **state)
{
	struct store_fixture *f = store_fixture_new("/tmp/test_temporary.XXXXXX");

	for (int p = 1; p <= 2; p++) {
		exec(f->db, "INSERT INTO processes (proc_id, pid, ppid, uid, exe, malloc_mode, lossless,"
			    " start_wall_ns, start_ns, end_ns) VALUES (%d, %d, 1, 0, 'w', %Q, 0, 0, 0,"
			    " 99999999)", p, 10 * p, p == 1 ? "all" : "sample");
		for (int s = 1; s <= 3; s++)
			stack_add(f->db, p, s, 1, (const int64_t[]){ 0x100 * s });
	}
	for (size_t i = 0; i < NALLOCS; i++) {
		const struct alloc *a = &allocs[i];
		char freed[24];

		snprintf(freed, sizeof(freed), a->life >= 0 ? "%lld" : "NULL",
			 (long long)(1000 + a->life));
		exec(f->db, "INSERT INTO allocations (proc_id, space, device, ptr, size, sampled, weight,"
			    " alloc_fn, alloc_tid, alloc_ns, free_ns, stack_id) VALUES (%d, %Q, %d, 1,"
			    " %lld, %d, %.17g, 1, 1, 1000, %s, %d)",
		     a->proc, a->space, strcmp(a->space, "host") ? 0 : -1, (long long)a->size,
		     a->weight != (double)a->size, a->weight, freed, a->stack);
	}
	*state = f;
	return 0;
}

static char *run(sqlite3 *db, int fmt, int64_t max_ns)
{
	struct model_filter flt = model_filter_all();
	struct model *m;
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	assert_non_null(out);
	assert_int_equal(model_load(db, &flt, &m), 0);
	assert_int_equal(temporary_write(m, out, fmt, max_ns), 0);
	model_close(m);
	fclose(out);
	return buf;
}

/* Median by counting: the value with as many below as above. */
static double median_of(const int64_t *v, int n)
{
	int64_t lo = -1, hi = -1;

	for (int i = 0; i < n; i++) {
		int below = 0, equal = 0;

		for (int j = 0; j < n; j++) {
			below += v[j] < v[i];
			equal += v[j] == v[i];
		}
		/* v[i] fills ranks below .. below + equal - 1 (0-based). */
		if (below <= (n - 1) / 2 && (n - 1) / 2 < below + equal)
			lo = v[i];
		if (below <= n / 2 && n / 2 < below + equal)
			hi = v[i];
	}
	return ((double)lo + (double)hi) / 2;
}

static void check(const char *csv, int64_t max_ns)
{
	for (int p = 1; p <= 2; p++)
		for (int s = 1; s <= 3; s++) {
			int64_t lives[NALLOCS];
			double count = 0, bytes = 0;
			const char *label = "host";
			char want[256];
			int n = 0;

			for (size_t i = 0; i < NALLOCS; i++) {
				const struct alloc *a = &allocs[i];

				if (a->proc != p || a->stack != s || a->life < 0 || a->life > max_ns)
					continue;
				lives[n++] = a->life;
				count += a->weight / (double)a->size;
				bytes += a->weight;
				if (strcmp(a->space, "host"))
					label = "cuda:0";
			}
			snprintf(want, sizeof(want), "%d,%d,%s,%lld,%lld,%d,1,0,0,%.17g,0x%x\n", 10 * p, p,
				 label, (long long)llround(count), (long long)llround(bytes),
				 p == 2 && strcmp(label, "host") == 0, n ? median_of(lives, n) : 0,
				 0x100 * s);
			if (n && !strstr(csv, want))
				fail_msg("missing %s in\n%s", want, csv);
			/* No row for a site without temporaries. */
			snprintf(want, sizeof(want), "\n%d,%d,", 10 * p, p);
			for (const char *l = strstr(csv, want); !n && l; l = strstr(l + 1, want)) {
				char end[16];
				const char *nl = strchr(l + 1, '\n');

				snprintf(end, sizeof(end), ",0x%x\n", 0x100 * s);
				if (nl && nl - l + 1 >= (ptrdiff_t)strlen(end) &&
				    strncmp(nl + 1 - strlen(end), end, strlen(end)) == 0)
					fail_msg("unexpected site 0x%x in\n%s", 0x100 * s, csv);
			}
		}
}

static void test_temporary_counts_bytes_and_median(void **state)
{
	struct store_fixture *f = *state;
	const int64_t limits[] = { 1000000, 1000001, 600, 0 };

	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
		char *csv = run(f->db, EMIT_CSV, limits[i]);

		check(csv, limits[i]);
		free(csv);
	}
}

static void test_temporary_json(void **state)
{
	struct store_fixture *f = *state;
	char *json = run(f->db, EMIT_JSON, 1000000);
	sqlite3_stmt *st;

	assert_int_equal(sqlite3_prepare_v2(f->db,
		"SELECT json_extract(value, '$.count'), json_extract(value, '$.median_lifetime_ns')"
		" FROM json_each(json_extract(?, '$.processes[0].sites'))"
		" WHERE json_extract(value, '$.memory') = 'cuda:0'", -1, &st, NULL), SQLITE_OK);
	sqlite3_bind_text(st, 1, json, -1, SQLITE_STATIC);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int64(st, 0), 4);
	assert_float_equal(sqlite3_column_double(st, 1), 750.0, 0);
	sqlite3_finalize(st);
	free(json);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, store_fixture_teardown)
		T(test_temporary_counts_bytes_and_median),
		T(test_temporary_json),
#undef T
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
