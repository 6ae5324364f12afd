/*
 * leaks: a real store in a temporary file, made with the embedded schema;
 * stacks point into modules whose files are gone, so every call site has a
 * name this file knows (`app+0x1234 [file gone]`) without depending on
 * how the compiler laid out a binary (test_symbolize checks real symbols).
 * The expected figures are computed here from the same rows in another
 * way: sums per expected site, live bytes at each step end by testing
 * every row, and the regression from the textbook sums.
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
#include "tools/leaks.h"
#include "tools/model.h"
#include "tools/present.h"

#define MIB (1024.0 * 1024.0)

/* Stacks of every process: A enters through libcudart, B and C are plain. */
static const char stacks_sql[] =
	"INSERT INTO strings VALUES (%d, 1, '/gone/app', NULL), (%d, 2, '/gone/libcudart.so.12', NULL),"
	" (%d, 3, 'train.py', NULL), (%d, 4, 'step', NULL), (%d, 5, 'main.py', NULL),"
	" (%d, 6, '<module>', NULL), (%d, 7, 'step', NULL), (%d, 8, 'fwd', NULL), (%d, 9, 'init', NULL),"
	" (%d, 10, '/usr/lib/python3/dist-packages/torch/nn/modules/linear.py', NULL),"
	" (%d, 11, 'Linear.forward', NULL);"
	"INSERT INTO modules (proc_id, path_id, bias, lo, hi, build_id, loaded_ns) VALUES"
	" (%d, 1, 4194304, 4194304, 5242880, 'ab', 0), (%d, 2, 139637976727552, 139637976727552,"
	" 139637977776128, NULL, 0);"
	"INSERT INTO python_frames VALUES (%d, 1, 0, 10, 11, 125), (%d, 1, 1, 3, 4, 42),"
	" (%d, 1, 2, 5, 6, 7);";

/* What those stacks are called: the Python stack's innermost frame is in an
 * installed package (torch), so its call site is the script's frame below. */
#define SITE_A "app+0x1234 [file gone]"
#define FOLD_A "app+0x2000 [file gone];app+0x1234 [file gone]"
#define SITE_B "app+0x1500 [file gone]"
#define SITE_C "0x999"
#define SITE_PY "step (train.py:42)"
#define FOLD_PY "<module> (main.py:7);step (train.py:42);Linear.forward (linear.py:125)"

static void add_proc(sqlite3 *db, int id, int pid, const char *mode, int64_t start, int64_t end)
{
	exec(db, "INSERT INTO processes (proc_id, pid, ppid, uid, exe, malloc_mode, sample_bytes,"
		 " lossless, start_wall_ns, start_ns, end_ns) VALUES (%d, %d, 1, 0, '/gone/app', %Q,"
		 " %s, 0, 0, %lld, %lld)", id, pid, mode, strcmp(mode, "sample") ? "NULL" : "4096",
	     (long long)start, (long long)end);
	exec(db, stacks_sql, id, id, id, id, id, id, id, id, id, id, id, id, id, id, id, id);
	stack_add(db, id, 1, 3, (const int64_t[]){ 139637976731648, 4198964, 4202496 });
	stack_add(db, id, 2, 1, (const int64_t[]){ 4199680 });
	stack_add(db, id, 3, 1, (const int64_t[]){ 2457 });
}

struct alloc {
	int proc;
	const char *space;
	int device;
	int stack, pystack; /* 0: NULL */
	int64_t size;
	double weight;
	int64_t at, freed; /* freed 0: live */
	const char *label, *site; /* what the test expects it to count under */
};

static void add_alloc(sqlite3 *db, const struct alloc *a)
{
	char st[24], py[24], fr[24];

	snprintf(st, sizeof(st), a->stack ? "%d" : "NULL", a->stack);
	snprintf(py, sizeof(py), a->pystack ? "%d" : "NULL", a->pystack);
	snprintf(fr, sizeof(fr), a->freed ? "%lld" : "NULL", (long long)a->freed);
	exec(db, "INSERT INTO allocations (proc_id, space, device, ptr, size, sampled, weight,"
		 " alloc_fn, alloc_tid, alloc_ns, free_ns, stack_id, pystack_id) VALUES"
		 " (%d, %Q, %d, 4096, %lld, %d, %.17g, 1, 1, %lld, %s, %s, %s)",
	     a->proc, a->space, a->device, (long long)a->size, a->weight != (double)a->size,
	     a->weight, (long long)a->at, fr, st, py);
}

static const struct alloc grouping[] = {
	{ 1, "host", -1, 2, 0, 100, 100, 10, 0, "host", SITE_B },
	{ 1, "host", -1, 2, 0, 200, 200, 20, 0, "host", SITE_B },
	{ 1, "host", -1, 2, 0, 300, 300, 30, 40, "host", SITE_B },
	{ 1, "device", 0, 1, 0, 1000, 1000, 50, 0, "cuda:0", SITE_A },
	{ 1, "device", 0, 1, 0, 3000, 3000, 60, 0, "cuda:0", SITE_A },
	{ 1, "device", 1, 1, 0, 500, 500, 70, 0, "cuda:1", SITE_A },
	{ 1, "device", 0, 1, 1, 7000, 7000, 80, 0, "cuda:0", SITE_PY },
	/* Python frames name host allocations too (SITE_C with --native). */
	{ 1, "host", -1, 3, 1, 50, 50, 90, 0, "host", SITE_PY },
	{ 1, "host", -1, 0, 0, 60, 60, 95, 0, "host", "(no stack)" },
	{ 2, "host", -1, 2, 0, 100, 4096.5, 10, 0, "host", SITE_B },
	{ 2, "host", -1, 2, 0, 1000, 10000, 20, 0, "host", SITE_B },
	{ 2, "host", -1, 2, 0, 1000, 10000, 30, 35, "host", SITE_B },
	{ 2, "device", 0, 2, 0, 8192, 8192, 40, 0, "cuda:0", SITE_B },
};

#define NGROUPING (sizeof(grouping) / sizeof(grouping[0]))

static int setup(void **state)
{
	*state = store_fixture_new("/tmp/test_leaks.XXXXXX");
	return 0;
}

/* Run leaks_write with o on the processes of pid (-1: all) into a string
 * the caller frees. */
static char *run_sites(sqlite3 *db, const struct leaks_opts *o, int64_t pid, int native)
{
	struct model_filter flt = model_filter_all();
	struct model *m;
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	assert_non_null(out);
	flt.pid = pid;
	assert_int_equal(model_load(db, &flt, &m), 0);
	model_set_native(m, native);
	assert_int_equal(leaks_write(m, out, o), 0);
	model_close(m);
	fclose(out);
	return buf;
}

static char *run_pid(sqlite3 *db, const struct leaks_opts *o, int64_t pid)
{
	return run_sites(db, o, pid, 0);
}

static char *run(sqlite3 *db, const struct leaks_opts *o)
{
	return run_pid(db, o, -1);
}

/* CSV fields of the test's rows: none holds a comma or quote. */
#define NF 16
static int split(char *line, char **field)
{
	int n = 0;

	for (char *p = line; n < NF; p++) {
		field[n++] = p;
		p = strchr(p, ',');
		if (!p)
			break;
		*p = 0;
	}
	return n;
}

/* The CSV row of (pid, label, site), fields into field; 0 when absent. */
static int find_row(char *csv, int pid, const char *label, const char *site, char **field)
{
	char *copy = strdup(csv), *save = NULL;
	static char keep[4096];
	int found = 0;

	assert_non_null(copy);
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char tmp[4096];

		snprintf(tmp, sizeof(tmp), "%s", line);
		assert_int_equal(split(tmp, field), NF);
		if (atoi(field[0]) == pid && strcmp(field[2], label) == 0 &&
		    strcmp(field[6], site) == 0) {
			snprintf(keep, sizeof(keep), "%s", line);
			found++;
		}
	}
	free(copy);
	assert_true(found <= 1);
	if (found)
		assert_int_equal(split(keep, field), NF);
	return found;
}

static void test_leaks_groups_by_site_and_device(void **state)
{
	struct store_fixture *f = *state;
	struct leaks_opts o;
	char *csv, *field[NF];

	add_proc(f->db, 1, 100, "all", 0, 1000);
	add_proc(f->db, 2, 200, "sample", 0, 1000);
	for (size_t i = 0; i < NGROUPING; i++)
		add_alloc(f->db, &grouping[i]);
	leaks_opts_init(&o);
	o.fmt = EMIT_CSV;
	csv = run(f->db, &o);
	assert_non_null(strstr(csv, "pid,proc_id,memory,count,bytes,estimated,frame,fit,"));
	/* Every expected group, with its sums taken here. */
	for (size_t i = 0; i < NGROUPING; i++) {
		const struct alloc *g = &grouping[i];
		double count = 0, bytes = 0;
		int pid = g->proc * 100, est = g->proc == 2 && strcmp(g->label, "host") == 0;

		for (size_t j = 0; j < NGROUPING; j++) {
			const struct alloc *a = &grouping[j];

			if (a->proc == g->proc && !a->freed && strcmp(a->label, g->label) == 0 &&
			    strcmp(a->site, g->site) == 0) {
				count += a->weight / (double)a->size;
				bytes += a->weight;
			}
		}
		if (bytes == 0) {
			assert_int_equal(find_row(csv, pid, g->label, g->site, field), 0);
			continue;
		}
		if (!find_row(csv, pid, g->label, g->site, field))
			fail_msg("no row for %d %s %s in\n%s", pid, g->label, g->site, csv);
		assert_int_equal(atoll(field[3]), llround(count));
		assert_int_equal(atoll(field[4]), llround(bytes));
		assert_int_equal(atoi(field[5]), est);
		/* No ranges: fitted over time; nothing grows after 20% of it. */
		assert_string_equal(field[7], "time");
	}
	free(csv);

	/* --native: the host block with Python frames by its native site;
	 * CUDA memory keeps its Python line. */
	csv = run_sites(f->db, &o, -1, 1);
	if (!find_row(csv, 100, "host", SITE_C, field))
		fail_msg("--native: no host row for " SITE_C " in\n%s", csv);
	assert_int_equal(atoll(field[3]), 1);
	assert_int_equal(atoll(field[4]), 50);
	assert_int_equal(find_row(csv, 100, "host", SITE_PY, field), 0);
	assert_int_equal(find_row(csv, 100, "cuda:0", SITE_PY, field), 1);
	assert_int_equal(atoll(field[4]), 7000);
	free(csv);

	/* Folded: outermost first, leaked bytes. */
	o.fmt = PRESENT_FOLDED;
	csv = run(f->db, &o);
	assert_non_null(strstr(csv, "pid 100;cuda:0;" FOLD_A " 4000\n"));
	assert_non_null(strstr(csv, "pid 100;cuda:0;" FOLD_PY " 7000\n"));
	assert_non_null(strstr(csv, "pid 100;host;" SITE_B " 300\n"));
	free(csv);
	o.all_allocations = 1;
	csv = run(f->db, &o);
	assert_non_null(strstr(csv, "pid 100;host;" SITE_B " 600\n"));
	free(csv);

	/* --pid keeps one process. */
	o.fmt = EMIT_CSV;
	o.all_allocations = 0;
	csv = run_pid(f->db, &o, 200);
	assert_null(strstr(csv, "\n100,"));
	assert_non_null(strstr(csv, "\n200,"));
	free(csv);
}

/* ---- regression ------------------------------------------------------------ */

#define NSTEPS 50
#define STEP0 1000000000LL
#define STEP_NS 100000000LL
#define STEP_LEN 90000000LL

static int64_t step_end(int k)
{
	return STEP0 + k * STEP_NS + STEP_LEN;
}

/* A steady leak (stack B, 2 MiB a step), a caching warm-up (stack A: 10 MiB
 * kept in each of the first 5 steps, then only temporaries) and a steady
 * but small leak (stack C, 1 KiB a step). */
static size_t make_steps(sqlite3 *db, struct alloc *v)
{
	size_t n = 0;

	add_proc(db, 3, 300, "all", 0, STEP0 + NSTEPS * STEP_NS);
	exec(db, "INSERT INTO ranges (proc_id, tid, kind, domain_id, name_id, start_ns, end_ns,"
		 " depth) VALUES (3, 1, 'push', 0, 9, 0, 1000, 0)");
	for (int k = 0; k < NSTEPS; k++) {
		int64_t s = STEP0 + k * STEP_NS;

		exec(db, "INSERT INTO ranges (proc_id, tid, kind, domain_id, name_id, start_ns,"
			 " end_ns, depth) VALUES (3, 1, 'push', 0, 7, %lld, %lld, 0),"
			 " (3, 1, 'push', 0, 8, %lld, %lld, 1), (3, 1, 'push', 0, 8, %lld, %lld, 1)",
		     (long long)s, (long long)step_end(k), (long long)s + 1, (long long)s + 2,
		     (long long)s + 3, (long long)s + 4);
		v[n++] = (struct alloc){ 3, "host", -1, 2, 0, 2 << 20, 2 << 20, s + 10, 0, "host", SITE_B };
		v[n++] = (struct alloc){ 3, "device", 0, 1, 0, 10 << 20, 10 << 20, s + 20,
					 k < 5 ? 0 : s + 30, "cuda:0", SITE_A };
		v[n++] = (struct alloc){ 3, "host", -1, 3, 0, 1024, 1024, s + 40, 0, "host", SITE_C };
	}
	for (size_t i = 0; i < n; i++)
		add_alloc(db, &v[i]);
	return n;
}

/* Slope and R^2 from the textbook sums. */
static void textbook_fit(const double *x, const double *y, int n, double *slope, double *r2)
{
	double sx = 0, sy = 0, sxx = 0, sxy = 0, syy = 0;

	for (int i = 0; i < n; i++) {
		sx += x[i];
		sy += y[i];
		sxx += x[i] * x[i];
		sxy += x[i] * y[i];
		syy += y[i] * y[i];
	}
	*slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
	*r2 = (n * sxy - sx * sy) * (n * sxy - sx * sy) /
	      ((n * sxx - sx * sx) * (n * syy - sy * sy));
}

static void check_fit(char *csv, const struct alloc *v, size_t n, const char *label,
		      const char *site, int warm, const char *verdict)
{
	double xs[NSTEPS], xt[NSTEPS], y[NSTEPS], slope, slope_t, r2, r2_t;
	char *field[NF];
	int m = 0;

	for (int k = warm; k < NSTEPS; k++, m++) {
		xs[m] = k;
		xt[m] = (double)(step_end(k) - step_end(0)) / 1e9;
		y[m] = 0;
		for (size_t i = 0; i < n; i++)
			if (strcmp(v[i].site, site) == 0 && v[i].at <= step_end(k) &&
			    (!v[i].freed || v[i].freed > step_end(k)))
				y[m] += v[i].weight;
	}
	if (!find_row(csv, 300, label, site, field))
		fail_msg("no row for %s in\n%s", site, csv);
	assert_string_equal(field[7], "steps");
	assert_string_equal(field[8], "step");
	assert_int_equal(atoi(field[9]), m);
	assert_string_equal(field[13], verdict);
	if (y[0] == y[m - 1]) {
		/* Flat: no slope, no R^2. */
		assert_true(fabs(strtod(field[10], NULL)) < 1e-6);
		assert_string_equal(field[12], "");
		return;
	}
	textbook_fit(xs, y, m, &slope, &r2);
	textbook_fit(xt, y, m, &slope_t, &r2_t);
	assert_float_equal(strtod(field[10], NULL), slope, fabs(slope) * 1e-9);
	assert_float_equal(strtod(field[11], NULL), slope_t, fabs(slope_t) * 1e-9);
	assert_float_equal(strtod(field[12], NULL), r2, 1e-9);
}

static void test_leaks_regression_flags_steady_growth(void **state)
{
	struct store_fixture *f = *state;
	struct alloc *v = calloc(NSTEPS * 3, sizeof(*v));
	struct leaks_opts o;
	size_t n;
	char *csv;

	assert_non_null(v);
	n = make_steps(f->db, v);
	leaks_opts_init(&o);
	o.fmt = EMIT_CSV;
	csv = run(f->db, &o);
	/* 2 MiB a step from the steady leak: growing. */
	check_fit(csv, v, n, "host", SITE_B, NSTEPS / 5, "growing");
	/* The warm-up rise ends before the fit starts: not growth. */
	check_fit(csv, v, n, "cuda:0", SITE_A, NSTEPS / 5, "ok");
	/* Steady but under the threshold. */
	check_fit(csv, v, n, "host", SITE_C, NSTEPS / 5, "ok");
	free(csv);

	/* Without the warm-up skip, the caching rise is still not steady
	 * enough (R^2 under 0.8) to be called growth. */
	o.warmup_steps = 0;
	csv = run(f->db, &o);
	check_fit(csv, v, n, "cuda:0", SITE_A, 0, "ok");
	free(csv);

	/* A lower threshold flags the small leak too; --steps by name. */
	o.warmup_steps = 10;
	o.threshold_per_step = 1000;
	o.steps = "step";
	csv = run(f->db, &o);
	check_fit(csv, v, n, "host", SITE_C, 10, "growing");
	free(csv);
	free(v);
}

static void test_leaks_table_and_json(void **state)
{
	struct store_fixture *f = *state;
	struct alloc *v = calloc(NSTEPS * 3, sizeof(*v));
	struct leaks_opts o;
	sqlite3_stmt *st;
	char *out;

	assert_non_null(v);
	make_steps(f->db, v);
	leaks_opts_init(&o);
	out = run(f->db, &o);
	assert_non_null(strstr(out, "growth fitted over 40 of 50 'step' ranges (first 10 skipped"));
	assert_non_null(strstr(out, "growing  " SITE_B));
	free(out);
	o.fmt = EMIT_JSON;
	out = run(f->db, &o);
	/* Read back through SQLite's JSON functions. */
	assert_int_equal(sqlite3_prepare_v2(f->db,
		"SELECT json_extract(value, '$.bytes'), json_extract(value, '$.verdict')"
		" FROM json_each(json_extract(?, '$.processes[0].sites'))"
		" WHERE json_extract(value, '$.frame') = '" SITE_B "'", -1, &st, NULL), SQLITE_OK);
	sqlite3_bind_text(st, 1, out, -1, SQLITE_STATIC);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int64(st, 0), (int64_t)NSTEPS * (2 << 20));
	assert_string_equal((const char *)sqlite3_column_text(st, 1), "growing");
	sqlite3_finalize(st);
	free(out);
	free(v);
}

static void test_leaks_needs_stacks(void **state)
{
	struct store_fixture *f = *state;
	struct leaks_opts o;
	struct model_filter flt = model_filter_all();
	FILE *out = fopen("/dev/null", "w");
	struct model *m;

	exec(f->db, "UPDATE meta SET value = '2' WHERE key = 'schema_version'");
	leaks_opts_init(&o);
	assert_int_equal(model_load(f->db, &flt, &m), 0);
	assert_int_equal(leaks_write(m, out, &o), -EINVAL);
	model_close(m);
	fclose(out);
}

/* A store of schema 9 keeps its frames in a stack_frames table: the
 * readers give the same stacks from it as from the tree. */
static void test_leaks_reads_schema_9_stacks(void **state)
{
	struct store_fixture *f = *state;
	struct leaks_opts o;
	char *tree, *table;

	add_proc(f->db, 1, 100, "all", 0, 1000);
	for (size_t i = 0; i < NGROUPING; i++)
		if (grouping[i].proc == 1)
			add_alloc(f->db, &grouping[i]);
	leaks_opts_init(&o);
	o.fmt = PRESENT_FOLDED;
	tree = run(f->db, &o);
	assert_non_null(strstr(tree, "pid 100;cuda:0;" FOLD_A " 4000\n"));
	exec(f->db, "CREATE TABLE old (proc_id INTEGER NOT NULL, stack_id INTEGER NOT NULL,"
		    " level INTEGER NOT NULL, pc INTEGER NOT NULL,"
		    " PRIMARY KEY (proc_id, stack_id, level)) WITHOUT ROWID;"
		    "INSERT INTO old SELECT * FROM stack_frames; DROP VIEW stack_frames;"
		    "DROP TABLE stack_nodes; DROP TABLE stacks; ALTER TABLE old RENAME TO stack_frames;"
		    "UPDATE meta SET value = '9' WHERE key = 'schema_version'");
	assert_int_equal(query_int(f->path, "SELECT count(*) FROM stack_frames"), 5);
	table = run(f->db, &o);
	assert_string_equal(tree, table);
	free(tree);
	free(table);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, store_fixture_teardown)
		T(test_leaks_groups_by_site_and_device),
		T(test_leaks_regression_flags_steady_growth),
		T(test_leaks_table_and_json),
		T(test_leaks_needs_stacks),
		T(test_leaks_reads_schema_9_stacks),
#undef T
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
