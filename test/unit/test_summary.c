/*
 * summary: a real store in a temporary file, made with the embedded schema
 * and filled from the arrays below; the CSV and JSON outputs are checked
 * against values this file computes from the same arrays in its own way
 * (two-pass statistics, a brute-force sweep for peaks).
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

#include "tools/store.h"
#include "tools/summary.h"

extern const char shimmer_schema_sql[];

enum { MALLOC = 1, FREE = 2, CALLOC = 3, REALLOC = 4, CUDA_MALLOC = 11, CUDA_FREE = 12,
       CUDA_MEMCPY = 21, CUDA_LAUNCH = 22 };

static const struct {
	int fn;
	const char *name;
	const char *family;
} fns[] = {
	{ MALLOC, "malloc", "heap" },	     { FREE, "free", "heap" },
	{ CALLOC, "calloc", "heap" },	     { REALLOC, "realloc", "heap" },
	{ CUDA_MALLOC, "cudaMalloc", "cuda" }, { CUDA_FREE, "cudaFree", "cuda" },
	{ CUDA_MEMCPY, "cudaMemcpy", "cuda" }, { CUDA_LAUNCH, "cudaLaunchKernel", "cuda" },
};

#define NFNS (sizeof(fns) / sizeof(fns[0]))

static const struct proc {
	int id;
	int pid;
	int rank; /* -1: NULL */
	const char *mode;
	int64_t start;
	int64_t end; /* -1: NULL */
	const char *argv;
} procs[] = {
	{ 1, 100, 0, "all", 1000000, 1001000000, "[\"train\",\"--lr=0.1\"]" },
	{ 2, 200, -1, "sample", 5000, 2000005000, "[\"w\",\"a,b \\\"q\\\"\"]" },
	{ 3, 300, 7, "off", 9000, -1, "[\"idle\"]" },
};

static const struct count {
	int proc, tid, fn;
	int64_t count, bytes;
} counts[] = {
	{ 1, 1, MALLOC, 3, 300 },      { 1, 2, MALLOC, 2, 200 },    { 1, 1, FREE, 3, 0 },
	{ 1, 1, CALLOC, 1, 10 },       { 1, 1, REALLOC, 1, 50 },    { 1, 1, CUDA_MALLOC, 3, 4777 },
	{ 1, 1, CUDA_FREE, 2, 0 },     { 1, 2, CUDA_MEMCPY, 4, 4096 }, { 1, 1, CUDA_LAUNCH, 0, 0 },
	{ 2, 1, MALLOC, 100, 12345 },  { 2, 1, FREE, 50, 0 },       { 2, 1, CUDA_LAUNCH, 2, 0 },
	{ 3, 1, CUDA_LAUNCH, 0, 0 },
};

static const struct call {
	int proc, fn;
	int64_t start, dur;
} calls[] = {
	{ 1, CUDA_MEMCPY, 1000010, 100 },   { 1, CUDA_MEMCPY, 1000020, 200 },
	{ 1, CUDA_MEMCPY, 1000030, 300 },   { 1, CUDA_MEMCPY, 1000040, 999999999 },
	{ 1, CUDA_MALLOC, 1000150, 5000 },  { 1, CUDA_MALLOC, 1000200, 7000 },
	{ 1, CUDA_MALLOC, 1000300, 6000 },  { 1, CUDA_FREE, 1000250, 3000 },
	{ 1, CUDA_FREE, 1000950, 3001 },    { 2, CUDA_LAUNCH, 6000, 10 },
	{ 2, CUDA_LAUNCH, 7000, 20 },
};

/* alloc_dur / free_dur -1: not timed (NULL end); free_fn 0: still live. */
static const struct alloc {
	int proc;
	const char *space;
	int device;
	int64_t size;
	double weight;
	int alloc_fn;
	int64_t alloc_ns, alloc_dur;
	int free_fn;
	int64_t free_ns, free_dur;
} allocs[] = {
	{ 1, "host", -1, 100, 100, MALLOC, 1000100, 10, FREE, 1000500, 5 },
	{ 1, "host", -1, 100, 100, MALLOC, 1000200, 20, FREE, 1000300, 6 },
	{ 1, "host", -1, 100, 100, MALLOC, 1000400, 30, FREE, 1000900, 7 },
	/* Freed by realloc: that free side is not a timed free. */
	{ 1, "host", -1, 100, 100, MALLOC, 1000600, 40, REALLOC, 1000800, 99 },
	{ 1, "host", -1, 100, 100, MALLOC, 1000700, 50, 0, 0, 0 },
	{ 1, "host", -1, 50, 50, REALLOC, 1000800, 70, 0, 0, 0 },
	{ 1, "host", -1, 10, 10, CALLOC, 1000050, -1, 0, 0, 0 },
	/* CUDA blocks are timed from cuda_calls, never from here. */
	{ 1, "device", 0, 1000, 1000, CUDA_MALLOC, 1000150, 5000, CUDA_FREE, 1000250, 3000 },
	{ 1, "device", 0, 3000, 3000, CUDA_MALLOC, 1000200, 7000, CUDA_FREE, 1000950, 3001 },
	{ 1, "device", 1, 777, 777, CUDA_MALLOC, 1000300, 6000, 0, 0, 0 },
	{ 2, "host", -1, 64, 4096, MALLOC, 5100, 100, FREE, 5400, 50 },
	{ 2, "host", -1, 64, 4096, MALLOC, 5200, 200, FREE, 5300, 70 },
	{ 2, "host", -1, 64, 4096, MALLOC, 5250, 600, 0, 0, 0 },
};

static const struct drop {
	int proc, tid;
	const char *reason;
	int64_t events;
} drops[] = {
	{ 2, 1, "ring_full", 7 },
	{ 2, 2, "ring_full", 3 },
	{ 2, 0, "no_slot", 2 },
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

struct fixture {
	char path[64];
	sqlite3 *db;
};

static void exec(sqlite3 *db, const char *sql)
{
	char *msg = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		print_error("%s: %s\n", sql, msg);
		fail();
	}
}

static void bind_opt(sqlite3_stmt *st, int col, int64_t v, int present)
{
	if (present)
		sqlite3_bind_int64(st, col, v);
	else
		sqlite3_bind_null(st, col);
}

static void insert(sqlite3 *db, const char *sql, void (*bind)(sqlite3_stmt *, size_t), size_t n)
{
	sqlite3_stmt *st;

	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	for (size_t i = 0; i < n; i++) {
		bind(st, i);
		assert_int_equal(sqlite3_step(st), SQLITE_DONE);
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
}

static void bind_fn(sqlite3_stmt *st, size_t i)
{
	sqlite3_bind_int(st, 1, fns[i].fn);
	sqlite3_bind_text(st, 2, fns[i].name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, fns[i].family, -1, SQLITE_STATIC);
}

static void bind_proc(sqlite3_stmt *st, size_t i)
{
	const struct proc *p = &procs[i];

	sqlite3_bind_int(st, 1, p->id);
	sqlite3_bind_int(st, 2, p->pid);
	bind_opt(st, 3, p->rank, p->rank >= 0);
	sqlite3_bind_text(st, 4, p->mode, -1, SQLITE_STATIC);
	bind_opt(st, 5, 4096, strcmp(p->mode, "sample") == 0);
	sqlite3_bind_int64(st, 6, p->start);
	bind_opt(st, 7, p->end, p->end >= 0);
	sqlite3_bind_text(st, 8, p->argv, -1, SQLITE_STATIC);
}

static void bind_count(sqlite3_stmt *st, size_t i)
{
	sqlite3_bind_int(st, 1, counts[i].proc);
	sqlite3_bind_int(st, 2, counts[i].tid);
	sqlite3_bind_int(st, 3, counts[i].fn);
	sqlite3_bind_int64(st, 4, counts[i].count);
	sqlite3_bind_int64(st, 5, counts[i].bytes);
}

static void bind_call(sqlite3_stmt *st, size_t i)
{
	sqlite3_bind_int(st, 1, calls[i].proc);
	sqlite3_bind_int(st, 2, calls[i].fn);
	sqlite3_bind_int64(st, 3, calls[i].start);
	sqlite3_bind_int64(st, 4, calls[i].start + calls[i].dur);
}

static void bind_alloc(sqlite3_stmt *st, size_t i)
{
	const struct alloc *a = &allocs[i];

	sqlite3_bind_int(st, 1, a->proc);
	sqlite3_bind_text(st, 2, a->space, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 3, a->device);
	sqlite3_bind_int64(st, 4, (int64_t)i + 1);
	sqlite3_bind_int64(st, 5, a->size);
	sqlite3_bind_int(st, 6, a->weight != (double)a->size);
	sqlite3_bind_double(st, 7, a->weight);
	sqlite3_bind_int(st, 8, a->alloc_fn);
	sqlite3_bind_int64(st, 9, a->alloc_ns);
	bind_opt(st, 10, a->alloc_ns + a->alloc_dur, a->alloc_dur >= 0);
	bind_opt(st, 11, a->free_fn, a->free_fn != 0);
	bind_opt(st, 12, a->free_ns, a->free_fn != 0);
	bind_opt(st, 13, a->free_ns + a->free_dur, a->free_fn != 0 && a->free_dur >= 0);
}

static void bind_drop(sqlite3_stmt *st, size_t i)
{
	sqlite3_bind_int(st, 1, drops[i].proc);
	sqlite3_bind_int(st, 2, drops[i].tid);
	sqlite3_bind_text(st, 3, drops[i].reason, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, drops[i].events);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	int fd;

	assert_non_null(f);
	snprintf(f->path, sizeof(f->path), "/tmp/test_summary.XXXXXX");
	fd = mkstemp(f->path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(sqlite3_open(f->path, &f->db), SQLITE_OK);
	exec(f->db, shimmer_schema_sql);
	exec(f->db, "BEGIN");
	insert(f->db, "INSERT INTO functions VALUES (?, ?, ?)", bind_fn, NFNS);
	insert(f->db,
	       "INSERT INTO processes (proc_id, pid, ppid, uid, hostname, exe, rank,"
	       " malloc_mode, sample_bytes, lossless, start_wall_ns, start_ns, end_ns,"
	       " end_reason, argv) VALUES (?1, ?2, 1, 0, 'node', '/bin/x', ?3, ?4, ?5, 0, 0,"
	       " ?6, ?7, CASE WHEN ?7 IS NULL THEN NULL ELSE 'exit' END, ?8)",
	       bind_proc, N(procs));
	insert(f->db, "INSERT INTO function_counts VALUES (?, ?, ?, ?, ?)", bind_count,
	       N(counts));
	insert(f->db,
	       "INSERT INTO cuda_calls (proc_id, tid, fn_id, start_ns, end_ns, ret,"
	       " per_thread_stream) VALUES (?, 1, ?, ?, ?, 0, 0)",
	       bind_call, N(calls));
	insert(f->db,
	       "INSERT INTO allocations (proc_id, space, device, ptr, size, sampled, weight,"
	       " alloc_fn, alloc_tid, alloc_ns, alloc_end_ns, free_fn, free_tid, free_ns,"
	       " free_end_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 1, ?9, ?10, ?11,"
	       " CASE WHEN ?11 IS NULL THEN NULL ELSE 1 END, ?12, ?13)",
	       bind_alloc, N(allocs));
	insert(f->db, "INSERT INTO drops VALUES (?, ?, ?, ?)", bind_drop, N(drops));
	exec(f->db, "COMMIT");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	sqlite3_close(f->db);
	unlink(f->path);
	free(f);
	return 0;
}

static char *render(sqlite3 *db, enum summary_format fmt)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	assert_non_null(out);
	assert_int_equal(summary_write(db, out, fmt), 0);
	assert_int_equal(fclose(out), 0);
	return buf;
}

/* ---- the expected values, from the arrays ----------------------------- */

struct expect {
	int64_t count, bytes;
	int64_t n, sum, min, max;
	double mean, sd;
};

static int is_heap(int fn)
{
	for (size_t i = 0; i < NFNS; i++)
		if (fns[i].fn == fn)
			return strcmp(fns[i].family, "heap") == 0;
	return 0;
}

static void add(struct expect *e, int64_t d, int64_t *durs)
{
	durs[e->n++] = d;
}

static struct expect expected(int proc, int fn)
{
	struct expect e = { 0 };
	int64_t durs[64];
	double ss = 0;

	for (size_t i = 0; i < N(counts); i++) {
		if (counts[i].proc == proc && counts[i].fn == fn) {
			e.count += counts[i].count;
			e.bytes += counts[i].bytes;
		}
	}
	for (size_t i = 0; i < N(calls); i++)
		if (calls[i].proc == proc && calls[i].fn == fn)
			add(&e, calls[i].dur, durs);
	for (size_t i = 0; i < N(allocs); i++) {
		const struct alloc *a = &allocs[i];

		if (a->proc != proc)
			continue;
		if (is_heap(fn) && a->alloc_fn == fn && a->alloc_dur >= 0)
			add(&e, a->alloc_dur, durs);
		if (fn == FREE && a->free_fn == FREE && a->free_dur >= 0)
			add(&e, a->free_dur, durs);
	}
	for (int64_t i = 0; i < e.n; i++) {
		e.sum += durs[i];
		if (i == 0 || durs[i] < e.min)
			e.min = durs[i];
		if (i == 0 || durs[i] > e.max)
			e.max = durs[i];
	}
	if (e.n) {
		e.mean = (double)e.sum / (double)e.n;
		for (int64_t i = 0; i < e.n; i++)
			ss += (durs[i] - e.mean) * (durs[i] - e.mean);
		e.sd = sqrt(ss / (double)e.n);
	}
	return e;
}

/* Peak by brute force: the live weight after everything at each alloc time. */
static void expected_peak(int proc, const char *space, int device, double *peak, int64_t *at)
{
	*peak = -1;
	for (size_t i = 0; i < N(allocs); i++) {
		int64_t t = allocs[i].alloc_ns;
		double live = 0;

		if (allocs[i].proc != proc || strcmp(allocs[i].space, space) ||
		    allocs[i].device != device)
			continue;
		for (size_t j = 0; j < N(allocs); j++) {
			const struct alloc *a = &allocs[j];

			if (a->proc == proc && !strcmp(a->space, space) && a->device == device &&
			    a->alloc_ns <= t && !(a->free_fn && a->free_ns <= t))
				live += a->weight;
		}
		if (live > *peak || (live == *peak && t < *at)) {
			*peak = live;
			*at = t;
		}
	}
}

/* ---- csv parsing -------------------------------------------------------- */

#define NCOLS 14
enum { C_PID, C_RANK, C_EVENT, C_COUNT, C_BYTES, C_TOTAL, C_MEAN, C_SD, C_MIN, C_MAX,
       C_TIMED, C_SHARE, C_KIND, C_PROC };

/* Split one CSV line (RFC 4180 quoting) into fields; returns the count. */
static int split(const char *line, char fields[][64])
{
	int n = 0;

	for (;;) {
		size_t k = 0;

		if (*line == '"') {
			for (line++; *line && !(line[0] == '"' && line[1] != '"'); line++) {
				if (*line == '"')
					line++;
				fields[n][k++] = *line;
			}
			line++;
		} else {
			while (*line && *line != ',' && *line != '\n')
				fields[n][k++] = *line++;
		}
		fields[n++][k] = '\0';
		if (*line != ',')
			return n;
		line++;
	}
}

/* The row of pid and event, or fail. */
static void find_row(const char *csv, int pid, const char *event, char fields[][64])
{
	const char *line = strchr(csv, '\n') + 1;

	for (; *line; line = strchr(line, '\n') + 1) {
		assert_int_equal(split(line, fields), NCOLS);
		if (atoi(fields[C_PID]) == pid && strcmp(fields[C_EVENT], event) == 0)
			return;
	}
	print_error("no csv row for pid %d event %s\n", pid, event);
	fail();
}

static void check_near(const char *field, double want, double tol, const char *what)
{
	double got = strtod(field, NULL);

	if (*field && fabs(got - want) <= tol)
		return;
	print_error("%s: got '%s', want %.6f\n", what, field, want);
	fail();
}

static void check_row(const char *csv, const struct proc *p, int fn, const char *name)
{
	struct expect e = expected(p->id, fn);
	char f[NCOLS][64];
	int exact = e.n >= e.count;

	find_row(csv, p->pid, name, f);
	if (p->rank >= 0)
		assert_int_equal(atoi(f[C_RANK]), p->rank);
	else
		assert_string_equal(f[C_RANK], "");
	assert_int_equal(strtoll(f[C_COUNT], NULL, 10), e.count);
	assert_int_equal(strtoll(f[C_BYTES], NULL, 10), e.bytes);
	assert_int_equal(strtoll(f[C_TIMED], NULL, 10), e.n);
	assert_string_equal(f[C_KIND], is_heap(fn) ? "heap" : "api");
	assert_int_equal(atoi(f[C_PROC]), p->id);
	if (e.n == 0) {
		assert_string_equal(f[C_TOTAL], "");
		assert_string_equal(f[C_MEAN], "");
		assert_string_equal(f[C_MIN], "");
		return;
	}
	/* Integers in ns: the mean and std dev are rounded. */
	check_near(f[C_MEAN], e.mean, 0.5 + 1e-9, "mean");
	check_near(f[C_SD], e.sd, 0.5 + 1e-9, "stddev");
	assert_int_equal(strtoll(f[C_MIN], NULL, 10), e.min);
	assert_int_equal(strtoll(f[C_MAX], NULL, 10), e.max);
	if (exact) {
		assert_int_equal(strtoll(f[C_TOTAL], NULL, 10), e.sum);
		check_near(f[C_SHARE], (double)e.sum / (double)(p->end - p->start), 1e-6, "share");
	} else {
		assert_string_equal(f[C_TOTAL], "");
		assert_string_equal(f[C_SHARE], "");
	}
}

static void test_summary_csv_matches_rows(void **state)
{
	struct fixture *fx = *state;
	char *csv = render(fx->db, SUMMARY_CSV);
	size_t rows = 0, want = 0;

	assert_true(strncmp(csv, "pid,rank,event,count,bytes,total_ns,mean_ns,stddev_ns,min_ns,"
				 "max_ns,timed,wall_share,kind,proc_id\n", 84) == 0);
	for (size_t p = 0; p < N(procs); p++) {
		for (size_t i = 0; i < NFNS; i++) {
			struct expect e = expected(procs[p].id, fns[i].fn);

			if (e.count == 0 && e.n == 0)
				continue;
			want++;
			check_row(csv, &procs[p], fns[i].fn, fns[i].name);
		}
	}
	for (const char *c = csv; *c; c++)
		rows += *c == '\n';
	/* Functions counted zero times (cudaLaunchKernel in 1 and 3) are absent. */
	assert_int_equal(rows - 1, want);
	free(csv);
}

static void test_summary_estimated_when_sampled(void **state)
{
	struct fixture *fx = *state;
	char *csv = render(fx->db, SUMMARY_CSV), *table = render(fx->db, SUMMARY_TABLE);
	struct expect e = expected(2, MALLOC);
	char f[NCOLS][64];

	/* The fixture really is the sampled case, whatever the checks above did. */
	assert_true(e.n > 0 && e.n < e.count);
	find_row(csv, 200, "malloc", f);
	assert_string_equal(f[C_TOTAL], "");
	/* The table shows the estimate mean x count with its marker. */
	assert_non_null(strstr(table, "~"));
	assert_non_null(strstr(table, "estimated as mean x count"));
	free(csv);
	free(table);
}

static void check_peak(const char *json, const struct proc *p, const char *space, int device,
		       int estimated)
{
	char want[256];
	double peak;
	int64_t at = 0;

	expected_peak(p->id, space, device, &peak, &at);
	assert_true(peak > 0);
	snprintf(want, sizeof(want),
		 "{\"space\":\"%s\",\"device\":%d,\"peak_bytes\":%.0f,\"at_ns\":%lld,"
		 "\"estimated\":%s}",
		 space, device, peak, (long long)(at - p->start), estimated ? "true" : "false");
	if (!strstr(json, want)) {
		print_error("missing %s in %s\n", want, json);
		fail();
	}
}

static void test_summary_json_peaks_and_drops(void **state)
{
	struct fixture *fx = *state;
	char *json = render(fx->db, SUMMARY_JSON);
	sqlite3_stmt *st;
	char want[128];
	int64_t dropped = 0, ring_full = 0;

	/* SQLite's JSON parser is the independent judge of validity. */
	assert_int_equal(sqlite3_prepare_v2(fx->db, "SELECT json_valid(?)", -1, &st, NULL),
			 SQLITE_OK);
	sqlite3_bind_text(st, 1, json, -1, SQLITE_STATIC);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int(st, 0), 1);
	sqlite3_finalize(st);

	check_peak(json, &procs[0], "host", -1, 0);
	check_peak(json, &procs[0], "device", 0, 0);
	check_peak(json, &procs[0], "device", 1, 0);
	check_peak(json, &procs[1], "host", -1, 1);

	for (size_t i = 0; i < N(drops); i++) {
		dropped += drops[i].events;
		if (!strcmp(drops[i].reason, "ring_full"))
			ring_full += drops[i].events;
	}
	snprintf(want, sizeof(want), "{\"reason\":\"ring_full\",\"events\":%lld}",
		 (long long)ring_full);
	assert_non_null(strstr(json, want));
	snprintf(want, sizeof(want), "\"dropped_events\":%lld", (long long)dropped);
	assert_non_null(strstr(json, want));
	assert_non_null(strstr(json, "\"argv\":[\"w\",\"a,b \\\"q\\\"\"]"));
	assert_non_null(strstr(json, "\"rank\":null"));
	free(json);
}

static void test_summary_table_warns_of_drops(void **state)
{
	struct fixture *fx = *state;
	char *table = render(fx->db, SUMMARY_TABLE);
	char want[64];
	int64_t dropped = 0;

	for (size_t i = 0; i < N(drops); i++)
		dropped += drops[i].events;
	snprintf(want, sizeof(want), "WARNING: %lld events were dropped", (long long)dropped);
	assert_non_null(strstr(table, want));
	assert_non_null(strstr(table, "estimated from weighted samples"));
	assert_non_null(strstr(table, "command: train --lr=0.1"));
	free(table);
}

static void test_summary_missing_store_is_not_created(void **state)
{
	sqlite3 *db = (sqlite3 *)1;

	(void)state;
	unlink("/tmp/test_summary_missing.db");
	assert_int_equal(store_open("/tmp/test_summary_missing.db", &db), -ENOENT);
	assert_null(db);
	assert_int_equal(access("/tmp/test_summary_missing.db", F_OK), -1);
}

static void test_summary_foreign_file_is_refused(void **state)
{
	char path[] = "/tmp/test_summary_foreign.XXXXXX";
	sqlite3 *db;
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "not a database\n", 15), 15);
	close(fd);
	assert_int_equal(store_open(path, &db), -EINVAL);
	assert_null(db);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_summary_csv_matches_rows, setup, teardown),
		cmocka_unit_test_setup_teardown(test_summary_estimated_when_sampled, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_summary_json_peaks_and_drops, setup, teardown),
		cmocka_unit_test_setup_teardown(test_summary_table_warns_of_drops, setup, teardown),
		cmocka_unit_test(test_summary_missing_store_is_not_created),
		cmocka_unit_test(test_summary_foreign_file_is_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
