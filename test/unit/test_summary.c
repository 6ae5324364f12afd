/*
 * summary: a real store in a temporary file, made with the embedded schema
 * and filled from the arrays below; the CSV and JSON outputs are checked
 * against values this file computes from the same arrays in its own way
 * (two-pass statistics, a brute-force sweep for peaks, busy time as the
 * measure of a union found by testing every elementary segment).  The
 * JSON is read back through SQLite's JSON functions, an independent parser.
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

#include "tools/fmt.h"
#include "tools/store.h"
#include "tools/model.h"
#include "tools/summary.h"

enum { MALLOC = 1, FREE = 2, CALLOC = 3, REALLOC = 4, CUDA_MALLOC = 11, CUDA_FREE = 12,
       CUDA_MEMCPY = 21, CUDA_LAUNCH = 22, STREAM_SYNC = 31, DEVICE_SYNC = 32,
       EVENT_SYNC = 33 };

static const struct {
	int fn;
	const char *name;
	const char *family;
} fns[] = {
	{ MALLOC, "malloc", "heap" },	     { FREE, "free", "heap" },
	{ CALLOC, "calloc", "heap" },	     { REALLOC, "realloc", "heap" },
	{ CUDA_MALLOC, "cudaMalloc", "cuda" }, { CUDA_FREE, "cudaFree", "cuda" },
	{ CUDA_MEMCPY, "cudaMemcpy", "cuda" }, { CUDA_LAUNCH, "cudaLaunchKernel", "cuda" },
	{ STREAM_SYNC, "cudaStreamSynchronize", "cuda" },
	{ DEVICE_SYNC, "cudaDeviceSynchronize", "cuda" },
	{ EVENT_SYNC, "cudaEventSynchronize", "cuda" },
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
	const char *gpu_status, *gpu_detail;
} procs[] = {
	{ 1, 100, 0, "all", 1000000, 1001000000, "[\"train\",\"--lr=0.1\"]", "active",
	  "CUPTI 12.4" },
	{ 2, 200, -1, "sample", 5000, 2000005000, "[\"w\",\"a,b \\\"q\\\"\"]", "busy",
	  "held by nsys" },
	{ 3, 300, 7, "off", 9000, -1, "[\"idle\"]", NULL, NULL },
};

static const struct count {
	int proc, tid, fn;
	int64_t count, bytes;
} counts[] = {
	{ 1, 1, MALLOC, 3, 300 },      { 1, 2, MALLOC, 2, 200 },    { 1, 1, FREE, 3, 0 },
	{ 1, 1, CALLOC, 1, 10 },       { 1, 1, REALLOC, 1, 50 },    { 1, 1, CUDA_MALLOC, 3, 4777 },
	{ 1, 1, CUDA_FREE, 2, 0 },     { 1, 2, CUDA_MEMCPY, 4, 4096 }, { 1, 1, CUDA_LAUNCH, 0, 0 },
	{ 2, 1, MALLOC, 100, 12345 },  { 2, 1, FREE, 50, 0 },       { 2, 1, CUDA_LAUNCH, 2, 0 },
	{ 3, 1, CUDA_LAUNCH, 0, 0 },    { 1, 1, STREAM_SYNC, 2, 0 }, { 1, 2, DEVICE_SYNC, 1, 0 },
	/* Three calls, one timed: an estimated total. */
	{ 2, 1, STREAM_SYNC, 3, 0 },
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
	{ 2, CUDA_LAUNCH, 7000, 20 },      { 1, STREAM_SYNC, 2000900, 1000 },
	{ 1, STREAM_SYNC, 3002100, 3000 }, { 1, DEVICE_SYNC, 3100000, 50000 },
	{ 2, STREAM_SYNC, 8000, 400 },
};

/* ---- GPU activity (schema 2) ---------------------------------------------- */

static const struct string {
	int proc, id;
	const char *text, *demangled;
} strings[] = {
	{ 1, 1, "_Z4gemmPfS_", "gemm(float*, float*)" },
	{ 1, 2, "relu_kernel", NULL },
	/* Another mangling with the same demangled name: one row. */
	{ 1, 3, "_Z4gemmPfS_i", "gemm(float*, float*)" },
	{ 1, 4, "train", NULL },
	{ 1, 5, "step", NULL },
	{ 1, 6, "fwd", NULL },
	{ 1, 7, "io", NULL },
	{ 1, 8, "load", NULL },
	{ 1, 9, "_Z1kILi2EEvPi", "void k<int, 2>(int*)" },
};

/* stream -1: NULL */
static const struct kernel {
	int proc, device, stream, name;
	int64_t start, end;
} kernels[] = {
	{ 1, 0, 7, 1, 2000000, 2000100 }, { 1, 0, 7, 1, 2000200, 2000500 },
	/* Overlaps both kernels on stream 7. */
	{ 1, 0, 8, 2, 2000050, 2000300 }, { 1, 0, 8, 3, 2000600, 2000700 },
	{ 1, 0, 8, 9, 2000700, 2000800 }, { 1, 1, 9, 2, 3000000, 3001000 },
	{ 1, 1, -1, 9, 3000500, 3002000 },
};

static const struct copy {
	int proc, device, stream;
	const char *op, *kind;
	int64_t bytes, start, end;
} copies[] = {
	{ 1, 0, 7, "memcpy", "HtoD", 1048576, 1900000, 1950000 },
	{ 1, 0, 8, "memcpy", "HtoD", 2097152, 2000400, 2000900 },
	{ 1, 0, 7, "memcpy", "DtoH", 4096, 2001000, 2001100 },
	{ 1, 0, 7, "memset", NULL, 1000, 2001200, 2001210 },
	{ 1, 1, 9, "memset", NULL, 64, 3000900, 3001100 },
};

/* end -1: still open; domain 0 is NVTX's default. */
static const struct range {
	int proc, domain, name;
	int64_t start, end;
	int depth;
} ranges[] = {
	{ 1, 0, 4, 1500000, 5000000, 0 }, { 1, 0, 5, 1600000, 2500000, 1 },
	{ 1, 0, 5, 2600000, 3500000, 1 }, { 1, 0, 6, 1700000, 1800000, 2 },
	{ 1, 0, 5, 4000000, -1, 1 },	  { 1, 7, 8, 1100000, 1400000, 0 },
	{ 1, 7, 8, 6000000, -1, 0 },
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
	{ 2, 0, "stack_full", 11 }, /* stored without a stack: not dropped */
};

/* Whether a drop row counts as dropped events (docs/schema.md). */
static int is_loss(const struct drop *d)
{
	return strcmp(d->reason, "stack_full") != 0;
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

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
	sqlite3_bind_text(st, 9, p->gpu_status, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 10, p->gpu_detail, -1, SQLITE_STATIC);
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

static void bind_string(sqlite3_stmt *st, size_t i)
{
	sqlite3_bind_int(st, 1, strings[i].proc);
	sqlite3_bind_int(st, 2, strings[i].id);
	sqlite3_bind_text(st, 3, strings[i].text, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, strings[i].demangled, -1, SQLITE_STATIC);
}

static void bind_kernel(sqlite3_stmt *st, size_t i)
{
	const struct kernel *k = &kernels[i];

	sqlite3_bind_int(st, 1, k->proc);
	sqlite3_bind_int(st, 2, k->device);
	bind_opt(st, 3, k->stream, k->stream >= 0);
	sqlite3_bind_int64(st, 4, (int64_t)i);
	sqlite3_bind_int(st, 5, k->name);
	sqlite3_bind_int64(st, 6, k->start);
	sqlite3_bind_int64(st, 7, k->end);
}

static void bind_copy(sqlite3_stmt *st, size_t i)
{
	const struct copy *c = &copies[i];

	sqlite3_bind_int(st, 1, c->proc);
	sqlite3_bind_text(st, 2, c->op, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 3, c->device);
	sqlite3_bind_int(st, 4, c->stream);
	sqlite3_bind_int64(st, 5, (int64_t)i + 100);
	sqlite3_bind_int64(st, 6, c->start);
	sqlite3_bind_int64(st, 7, c->end);
	sqlite3_bind_int64(st, 8, c->bytes);
	sqlite3_bind_text(st, 9, c->kind, -1, SQLITE_STATIC);
}

static void bind_range(sqlite3_stmt *st, size_t i)
{
	const struct range *r = &ranges[i];

	sqlite3_bind_int(st, 1, r->proc);
	sqlite3_bind_text(st, 2, r->domain ? "startend" : "push", -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 3, r->domain);
	sqlite3_bind_int(st, 4, r->name);
	sqlite3_bind_int64(st, 5, r->start);
	bind_opt(st, 6, r->end, r->end >= 0);
	sqlite3_bind_int(st, 7, r->depth);
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
	struct store_fixture *f = store_fixture_new("/tmp/test_summary.XXXXXX");

	exec(f->db, "BEGIN");
	insert(f->db, "INSERT INTO functions (fn_id, name, family) VALUES (?, ?, ?)", bind_fn, NFNS);
	insert(f->db,
	       "INSERT INTO processes (proc_id, pid, ppid, uid, hostname, exe, rank,"
	       " malloc_mode, sample_bytes, lossless, start_wall_ns, start_ns, end_ns,"
	       " end_reason, argv, gpu_status, gpu_status_detail) VALUES (?1, ?2, 1, 0, 'node',"
	       " '/bin/x', ?3, ?4, ?5, 0, 0, ?6, ?7, CASE WHEN ?7 IS NULL THEN NULL ELSE 'exit'"
	       " END, ?8, ?9, ?10)",
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
	insert(f->db, "INSERT INTO strings (proc_id, id, text, demangled) VALUES (?, ?, ?, ?)",
	       bind_string, N(strings));
	insert(f->db,
	       "INSERT INTO kernels (proc_id, device, stream, correlation, name_id, start_ns,"
	       " end_ns) VALUES (?, ?, ?, ?, ?, ?, ?)",
	       bind_kernel, N(kernels));
	insert(f->db,
	       "INSERT INTO gpu_copies (proc_id, op, device, stream, correlation, start_ns,"
	       " end_ns, bytes, copy_kind) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
	       bind_copy, N(copies));
	insert(f->db,
	       "INSERT INTO ranges (proc_id, tid, kind, domain_id, name_id, start_ns, end_ns,"
	       " depth) VALUES (?1, 1, ?2, ?3, ?4, ?5, ?6, ?7)",
	       bind_range, N(ranges));
	exec(f->db, "COMMIT");
	*state = f;
	return 0;
}

/* The summary of every process of db, in fmt (the command's own path:
 * the model, then the writer). */
static char *render(sqlite3 *db, enum emit_format fmt)
{
	struct model_filter f = model_filter_all();
	struct summary_opts o;
	struct model *m;
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	assert_non_null(out);
	summary_opts_init(&o);
	o.fmt = fmt;
	assert_int_equal(model_load(db, &f, &m), 0);
	assert_int_equal(summary_write(m, out, &o), 0);
	model_close(m);
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

/* Sum, min, max, mean and (two-pass) population std dev of durs[0..e->n). */
static void finish(struct expect *e, const int64_t *durs)
{
	double ss = 0;

	for (int64_t i = 0; i < e->n; i++) {
		e->sum += durs[i];
		if (i == 0 || durs[i] < e->min)
			e->min = durs[i];
		if (i == 0 || durs[i] > e->max)
			e->max = durs[i];
	}
	if (e->n) {
		e->mean = (double)e->sum / (double)e->n;
		for (int64_t i = 0; i < e->n; i++)
			ss += (durs[i] - e->mean) * (durs[i] - e->mean);
		e->sd = sqrt(ss / (double)e->n);
	}
}

static struct expect expected(int proc, int fn)
{
	struct expect e = { 0 };
	int64_t durs[64];

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
	finish(&e, durs);
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
	struct store_fixture *fx = *state;
	char *csv = render(fx->db, EMIT_CSV);
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
	for (const char *line = strchr(csv, '\n') + 1; *line; line = strchr(line, '\n') + 1) {
		char f[NCOLS][64];

		assert_int_equal(split(line, f), NCOLS);
		rows += !strcmp(f[C_KIND], "api") || !strcmp(f[C_KIND], "heap");
	}
	/* Functions counted zero times (cudaLaunchKernel in 1 and 3) are absent. */
	assert_int_equal(rows, want);
	free(csv);
}

/*
 * The first column of sql's first row as text (malloc'd), run with ?1 the
 * JSON document, ?2 the process's pid and ?3 key; NULL for no row or NULL.
 */
static char *jq(sqlite3 *db, const char *json, const char *sql, int pid, const char *key)
{
	sqlite3_stmt *st;
	char *v = NULL;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		print_error("%s: %s\n", sql, sqlite3_errmsg(db));
		fail();
	}
	sqlite3_bind_text(st, 1, json, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, pid);
	sqlite3_bind_text(st, 3, key, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
		v = strdup((const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	return v;
}

static void test_summary_estimated_when_sampled(void **state)
{
	struct store_fixture *fx = *state;
	char *csv = render(fx->db, EMIT_CSV), *table = render(fx->db, EMIT_TABLE);
	struct expect e = expected(2, MALLOC);
	char f[NCOLS][64];

	/* The fixture really is the sampled case, whatever the checks above did. */
	assert_true(e.n > 0 && e.n < e.count);
	find_row(csv, 200, "malloc", f);
	assert_string_equal(f[C_TOTAL], "");
	/* Sampled heap calls are biased towards large blocks: no total at
	 * all, and a footnote saying why; a partly timed CUDA call of the same
	 * process is still estimated as mean x count. */
	assert_non_null(strstr(table, "no total: in sample mode"));
	assert_non_null(strstr(table, "estimated as mean x count"));
	find_row(csv, 200, "cudaStreamSynchronize", f);
	assert_string_equal(f[C_TOTAL], "");
	free(csv);
	free(table);
	{
		char *json = render(fx->db, EMIT_JSON);
		/* total_ns_estimated null?  cudaStreamSynchronize no, malloc yes */
		char *v = jq(fx->db, json,
			     "SELECT group_concat(x, ',') FROM (SELECT json_extract(f.value,"
			     " '$.total_ns_estimated') IS NULL AS x"
			     " FROM json_each(?1, '$.processes') p,"
			     " json_each(p.value, '$.functions') f"
			     " WHERE json_extract(p.value, '$.pid') = ?2"
			     " AND json_extract(f.value, '$.event')"
			     " IN ('malloc', 'cudaStreamSynchronize')"
			     " ORDER BY json_extract(f.value, '$.event'))", 200, NULL);

		assert_non_null(v);
		assert_string_equal(v, "0,1");
		free(v);
		free(json);
	}
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
		 "\"space\":\"%s\",\"device\":%d,\"peak_bytes\":%.0f,\"at_ns\":%lld,"
		 "\"live_end_bytes\":",
		 space, device, peak, (long long)(at - p->start));
	if (!strstr(json, want)) {
		print_error("missing %s in %s\n", want, json);
		fail();
	}
	snprintf(want, sizeof(want), "\"estimated\":%s,\"complete\":%s}",
		 estimated ? "true" : "false", p->id == 2 ? "false" : "true");
	if (!strstr(json, want)) {
		print_error("missing %s in %s\n", want, json);
		fail();
	}
}

static void test_summary_json_peaks_and_drops(void **state)
{
	struct store_fixture *fx = *state;
	char *json = render(fx->db, EMIT_JSON);
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
		dropped += is_loss(&drops[i]) ? drops[i].events : 0;
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
	assert_non_null(strstr(json, "\"stack_captures_refused\":11,"));
	assert_non_null(strstr(json, "\"stack_captures_refused\":0,"));
	free(json);
}

static void test_summary_table_warns_of_drops(void **state)
{
	struct store_fixture *fx = *state;
	char *table = render(fx->db, EMIT_TABLE);
	char want[64];
	int64_t dropped = 0;

	for (size_t i = 0; i < N(drops); i++)
		dropped += is_loss(&drops[i]) ? drops[i].events : 0;
	snprintf(want, sizeof(want), "WARNING: %lld events were dropped (", (long long)dropped);
	assert_non_null(strstr(table, want));
	/* the refused stack captures in a line of their own, not as drops */
	assert_non_null(strstr(table, "WARNING: 11 stack captures were refused because the"
				      " shim's stack table was full: those allocations are shown"
				      " as (no stack)"));
	assert_null(strstr(table, "stack_full"));
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

/* ---- GPU: the expected values, from the arrays ------------------------- */

static const char *string_of(int proc, int id, int demangled)
{
	for (size_t i = 0; i < N(strings); i++)
		if (strings[i].proc == proc && strings[i].id == id)
			return demangled && strings[i].demangled ? strings[i].demangled
								 : strings[i].text;
	return NULL;
}

static void range_label(const struct range *r, char *buf, size_t len)
{
	if (r->domain)
		snprintf(buf, len, "%s:%s", string_of(r->proc, r->domain, 0),
			 string_of(r->proc, r->name, 0));
	else
		snprintf(buf, len, "%s", string_of(r->proc, r->name, 0));
}

static const char *copy_label(const struct copy *c)
{
	return strcmp(c->op, "memset") == 0 ? "memset" : c->kind;
}

/* The GPU groups of proc: kernel names, copy kinds, range labels. */
enum group { G_KERNEL, G_COPY, G_RANGE };

static size_t group_labels(int proc, enum group g, char labels[][64])
{
	size_t n = 0, total = g == G_KERNEL ? N(kernels) : g == G_COPY ? N(copies) : N(ranges);

	for (size_t i = 0; i < total; i++) {
		char l[64];
		size_t j;

		if (g == G_KERNEL && kernels[i].proc == proc)
			snprintf(l, sizeof(l), "%s", string_of(proc, kernels[i].name, 1));
		else if (g == G_COPY && copies[i].proc == proc)
			snprintf(l, sizeof(l), "%s", copy_label(&copies[i]));
		else if (g == G_RANGE && ranges[i].proc == proc)
			range_label(&ranges[i], l, sizeof(l));
		else
			continue;
		for (j = 0; j < n && strcmp(labels[j], l); j++)
			;
		if (j == n)
			snprintf(labels[n++], 64, "%s", l);
	}
	return n;
}

/* Durations of a group; bytes for copies, count = ranges opened. */
static struct expect expect_group(int proc, enum group g, const char *label, int64_t *open)
{
	struct expect e = { 0 };
	int64_t durs[64];

	*open = 0;
	for (size_t i = 0; g == G_KERNEL && i < N(kernels); i++)
		if (kernels[i].proc == proc && !strcmp(string_of(proc, kernels[i].name, 1), label))
			add(&e, kernels[i].end - kernels[i].start, durs);
	for (size_t i = 0; g == G_COPY && i < N(copies); i++) {
		if (copies[i].proc == proc && !strcmp(copy_label(&copies[i]), label)) {
			add(&e, copies[i].end - copies[i].start, durs);
			e.bytes += copies[i].bytes;
		}
	}
	for (size_t i = 0; g == G_RANGE && i < N(ranges); i++) {
		char l[64];

		range_label(&ranges[i], l, sizeof(l));
		if (ranges[i].proc != proc || strcmp(l, label))
			continue;
		if (ranges[i].end < 0)
			(*open)++;
		else
			add(&e, ranges[i].end - ranges[i].start, durs);
	}
	finish(&e, durs);
	e.count = e.n + *open;
	return e;
}

static int64_t kernel_total(int proc)
{
	int64_t t = 0;

	for (size_t i = 0; i < N(kernels); i++)
		if (kernels[i].proc == proc)
			t += kernels[i].end - kernels[i].start;
	return t;
}

struct ivl {
	int64_t s, e;
};

/*
 * The measure of the union of v[0..n), the slow way: every segment between
 * two consecutive endpoints counts when some interval covers it.
 */
static int64_t union_len(const struct ivl *v, size_t n)
{
	int64_t pts[128], total = 0;
	size_t np = 0;

	for (size_t i = 0; i < n; i++) {
		pts[np++] = v[i].s;
		pts[np++] = v[i].e;
	}
	for (size_t i = 1; i < np; i++)
		for (size_t j = i; j > 0 && pts[j - 1] > pts[j]; j--) {
			int64_t t = pts[j];

			pts[j] = pts[j - 1];
			pts[j - 1] = t;
		}
	for (size_t j = 0; j + 1 < np; j++) {
		int covered = 0;

		for (size_t i = 0; i < n; i++)
			covered |= v[i].s <= pts[j] && pts[j + 1] <= v[i].e;
		if (covered)
			total += pts[j + 1] - pts[j];
	}
	return total;
}

#define ANY_STREAM (-2)

/* Busy time of proc's device (one stream, or ANY_STREAM), and the kernels
 * and copies counted. */
static int64_t expect_busy(int proc, int device, int stream, int64_t *nk, int64_t *nc)
{
	struct ivl v[64];
	size_t n = 0;

	*nk = *nc = 0;
	for (size_t i = 0; i < N(kernels); i++) {
		const struct kernel *k = &kernels[i];

		if (k->proc == proc && k->device == device &&
		    (stream == ANY_STREAM || k->stream == stream)) {
			v[n++] = (struct ivl){ k->start, k->end };
			++*nk;
		}
	}
	for (size_t i = 0; i < N(copies); i++) {
		const struct copy *c = &copies[i];

		if (c->proc == proc && c->device == device &&
		    (stream == ANY_STREAM || c->stream == stream)) {
			v[n++] = (struct ivl){ c->start, c->end };
			++*nc;
		}
	}
	return union_len(v, n);
}

/* (device, stream) pairs of proc's GPU activity, distinct. */
static size_t streams_of(int proc, int pairs[][2])
{
	size_t n = 0;

	for (size_t i = 0; i < N(kernels) + N(copies); i++) {
		int p = i < N(kernels) ? kernels[i].proc : copies[i - N(kernels)].proc;
		int d = i < N(kernels) ? kernels[i].device : copies[i - N(kernels)].device;
		int s = i < N(kernels) ? kernels[i].stream : copies[i - N(kernels)].stream;
		size_t j;

		if (p != proc)
			continue;
		for (j = 0; j < n && !(pairs[j][0] == d && pairs[j][1] == s); j++)
			;
		if (j == n) {
			pairs[n][0] = d;
			pairs[n++][1] = s;
		}
	}
	return n;
}

static size_t devices_of(int proc, int *devs)
{
	int pairs[64][2];
	size_t n = 0, ns = streams_of(proc, pairs);

	for (size_t i = 0; i < ns; i++) {
		size_t j;

		for (j = 0; j < n && devs[j] != pairs[i][0]; j++)
			;
		if (j == n)
			devs[n++] = pairs[i][0];
	}
	return n;
}

static int is_sync(int fn)
{
	return fn == STREAM_SYNC || fn == DEVICE_SYNC || fn == EVENT_SYNC || fn == CUDA_MEMCPY;
}

/* CPU time blocked in synchronizing calls; *exact: every call was timed. */
static double expect_sync(int proc, int64_t *count, int *exact)
{
	double total = 0;

	*count = 0;
	*exact = 1;
	for (size_t i = 0; i < NFNS; i++) {
		struct expect e;

		if (!is_sync(fns[i].fn))
			continue;
		e = expected(proc, fns[i].fn);
		*count += e.count > e.n ? e.count : e.n;
		if (e.n < e.count) {
			*exact = 0;
			total += e.mean * (double)e.count;
		} else {
			total += (double)e.sum;
		}
	}
	return total;
}

static const struct proc *proc_of(int id)
{
	for (size_t i = 0; i < N(procs); i++)
		if (procs[i].id == id)
			return &procs[i];
	fail();
	return NULL;
}

/* ---- GPU: csv ---------------------------------------------------------- */

static void check_csv_times(char f[][64], const struct expect *e, double wall)
{
	assert_int_equal(strtoll(f[C_TIMED], NULL, 10), e->n);
	if (e->n == 0) {
		assert_string_equal(f[C_TOTAL], "");
		assert_string_equal(f[C_MEAN], "");
		return;
	}
	assert_int_equal(strtoll(f[C_TOTAL], NULL, 10), e->sum);
	check_near(f[C_MEAN], e->mean, 0.5 + 1e-9, "mean");
	check_near(f[C_SD], e->sd, 0.5 + 1e-9, "stddev");
	assert_int_equal(strtoll(f[C_MIN], NULL, 10), e->min);
	assert_int_equal(strtoll(f[C_MAX], NULL, 10), e->max);
	check_near(f[C_SHARE], (double)e->sum / wall, 1e-6, "wall share");
}

/* Every GPU row of proc; returns how many there should be. */
static size_t check_gpu_csv(const char *csv, const struct proc *p)
{
	static const char *const kinds[] = { "kernel", "memcpy", "range" };
	double wall = (double)(p->end - p->start);
	char labels[32][64], f[NCOLS][64], event[64];
	int pairs[64][2], devs[64];
	size_t rows = 0, n;
	int64_t count, open, nk, nc;
	int exact;
	double sync;

	for (enum group g = G_KERNEL; g <= G_RANGE; g++) {
		n = group_labels(p->id, g, labels);
		rows += n;
		for (size_t i = 0; i < n; i++) {
			struct expect e = expect_group(p->id, g, labels[i], &open);
			const char *kind = g == G_COPY && !strcmp(labels[i], "memset") ? "memset"
											: kinds[g];

			find_row(csv, p->pid, labels[i], f);
			assert_string_equal(f[C_KIND], kind);
			assert_int_equal(strtoll(f[C_COUNT], NULL, 10), e.count);
			if (g == G_COPY)
				assert_int_equal(strtoll(f[C_BYTES], NULL, 10), e.bytes);
			else
				assert_string_equal(f[C_BYTES], "");
			check_csv_times(f, &e, wall);
		}
	}
	n = streams_of(p->id, pairs);
	rows += n;
	for (size_t i = 0; i < n; i++) {
		int64_t busy = expect_busy(p->id, pairs[i][0], pairs[i][1], &nk, &nc);

		if (pairs[i][1] < 0)
			snprintf(event, sizeof(event), "device %d stream ?", pairs[i][0]);
		else
			snprintf(event, sizeof(event), "device %d stream %d", pairs[i][0], pairs[i][1]);
		find_row(csv, p->pid, event, f);
		assert_string_equal(f[C_KIND], "stream");
		assert_int_equal(strtoll(f[C_COUNT], NULL, 10), nk + nc);
		assert_int_equal(strtoll(f[C_TOTAL], NULL, 10), busy);
		check_near(f[C_SHARE], (double)busy / wall, 1e-6, "stream share");
	}
	n = devices_of(p->id, devs);
	rows += n;
	for (size_t i = 0; i < n; i++) {
		int64_t busy = expect_busy(p->id, devs[i], ANY_STREAM, &nk, &nc);

		snprintf(event, sizeof(event), "device %d", devs[i]);
		find_row(csv, p->pid, event, f);
		assert_string_equal(f[C_KIND], "gpu");
		assert_int_equal(strtoll(f[C_COUNT], NULL, 10), nk + nc);
		assert_int_equal(strtoll(f[C_TOTAL], NULL, 10), busy);
		check_near(f[C_SHARE], (double)busy / wall, 1e-6, "busy share");
	}
	sync = expect_sync(p->id, &count, &exact);
	if (count > 0) {
		rows++;
		find_row(csv, p->pid, "sync", f);
		assert_string_equal(f[C_KIND], "gpu");
		assert_int_equal(strtoll(f[C_COUNT], NULL, 10), count);
		if (exact) {
			check_near(f[C_TOTAL], sync, 0.5, "sync total");
			check_near(f[C_SHARE], sync / wall, 1e-6, "sync share");
		} else {
			assert_string_equal(f[C_TOTAL], "");
			assert_string_equal(f[C_SHARE], "");
		}
	}
	if (p->gpu_status) {
		snprintf(event, sizeof(event), "status:%s", p->gpu_status);
		find_row(csv, p->pid, event, f);
		assert_string_equal(f[C_KIND], "gpu");
		rows++;
	}
	return rows;
}

static int is_gpu_kind(const char *k)
{
	static const char *const kinds[] = { "kernel", "memcpy", "memset", "range", "stream",
					     "gpu" };

	for (size_t i = 0; i < N(kinds); i++)
		if (!strcmp(k, kinds[i]))
			return 1;
	return 0;
}

static void test_summary_gpu_csv(void **state)
{
	struct store_fixture *fx = *state;
	char *csv = render(fx->db, EMIT_CSV);
	size_t want = 0, rows = 0;

	for (size_t i = 0; i < N(procs); i++)
		if (procs[i].end >= 0)
			want += check_gpu_csv(csv, &procs[i]);
	/* Process 3 never used CUDA: no GPU rows at all. */
	for (const char *line = strchr(csv, '\n') + 1; *line; line = strchr(line, '\n') + 1) {
		char f[NCOLS][64];

		assert_int_equal(split(line, f), NCOLS);
		if (is_gpu_kind(f[C_KIND])) {
			assert_int_not_equal(atoi(f[C_PID]), 300);
			rows++;
		}
	}
	assert_int_equal(rows, want);
	free(csv);
}

/* ---- GPU: json ----------------------------------------------------------- */

/* Field `field` of the element of processes[pid=?2].gpu.<array> whose
 * <match> is ?3. */
static double jfield(sqlite3 *db, const char *json, int pid, const char *array,
		     const char *match, const char *key, const char *field)
{
	char sql[512], *v;
	double d;

	snprintf(sql, sizeof(sql),
		 "SELECT json_extract(e.value, '$.%s') FROM json_each(?1, '$.processes') p,"
		 " json_each(p.value, '$.gpu.%s') e WHERE json_extract(p.value, '$.pid') = ?2"
		 " AND CAST(json_extract(e.value, '$.%s') AS TEXT) = ?3",
		 field, array, match);
	v = jq(db, json, sql, pid, key);
	if (!v) {
		print_error("no %s.%s for %s in %s\n", array, field, key, json);
		fail();
	}
	d = strtod(v, NULL);
	free(v);
	return d;
}

/* processes[pid].gpu<path> as text (malloc'd), NULL for JSON null. */
static char *jproc(sqlite3 *db, const char *json, int pid, const char *path)
{
	char sql[256];

	snprintf(sql, sizeof(sql),
		 "SELECT json_extract(p.value, '$.gpu%s') FROM json_each(?1, '$.processes') p"
		 " WHERE json_extract(p.value, '$.pid') = ?2 AND ?3 IS NULL",
		 path);
	return jq(db, json, sql, pid, NULL);
}

static double jproc_num(sqlite3 *db, const char *json, int pid, const char *path)
{
	char *v = jproc(db, json, pid, path);
	double d;

	assert_non_null(v);
	d = strtod(v, NULL);
	free(v);
	return d;
}

static void check_json_group(sqlite3 *db, const char *json, const struct proc *p, enum group g)
{
	static const char *const arrays[] = { "kernels", "copies", "ranges" };
	static const char *const keys[] = { "name", "kind", "name" };
	double wall = (double)(p->end - p->start);
	char labels[32][64];
	size_t n = group_labels(p->id, g, labels);
	const char *a = arrays[g], *k = keys[g];
	int64_t open, open_all = 0;

	{
		char sql[256], *v;

		snprintf(sql, sizeof(sql),
			 "SELECT json_array_length(p.value, '$.gpu.%s') FROM json_each(?1,"
			 " '$.processes') p WHERE json_extract(p.value, '$.pid') = ?2"
			 " AND ?3 IS NULL", a);
		v = jq(db, json, sql, p->pid, NULL);
		assert_non_null(v);
		assert_int_equal(atoi(v), n);
		free(v);
	}
	for (size_t i = 0; i < n; i++) {
		struct expect e = expect_group(p->id, g, labels[i], &open);

		open_all += open;
		assert_int_equal(jfield(db, json, p->pid, a, k, labels[i], "count"), e.n);
		assert_int_equal(jfield(db, json, p->pid, a, k, labels[i], "total_ns"), e.sum);
		assert_true(fabs(jfield(db, json, p->pid, a, k, labels[i], "mean_ns") - e.mean) <
			    1e-3);
		assert_true(fabs(jfield(db, json, p->pid, a, k, labels[i], "stddev_ns") - e.sd) <
			    1e-3);
		assert_int_equal(jfield(db, json, p->pid, a, k, labels[i], "min_ns"), e.min);
		assert_int_equal(jfield(db, json, p->pid, a, k, labels[i], "max_ns"), e.max);
		if (g == G_KERNEL) {
			assert_true(fabs(jfield(db, json, p->pid, a, k, labels[i], "kernel_share") -
					 (double)e.sum / (double)kernel_total(p->id)) < 1e-6);
			assert_true(fabs(jfield(db, json, p->pid, a, k, labels[i], "wall_share") -
					 (double)e.sum / wall) < 1e-6);
		} else if (g == G_COPY) {
			assert_int_equal(jfield(db, json, p->pid, a, k, labels[i], "bytes"), e.bytes);
			/* bytes per ns is GB/s (1e9 bytes per second). */
			assert_true(fabs(jfield(db, json, p->pid, a, k, labels[i], "gb_per_s") -
					 (double)e.bytes / (double)e.sum) < 1e-6);
		} else {
			assert_int_equal(jfield(db, json, p->pid, a, k, labels[i], "open"), open);
		}
	}
	if (g == G_RANGE)
		assert_int_equal(jproc_num(db, json, p->pid, ".open_ranges"), open_all);
}

static void test_summary_gpu_json(void **state)
{
	struct store_fixture *fx = *state;
	char *json = render(fx->db, EMIT_JSON), *v;
	const struct proc *p = proc_of(1), *busy = proc_of(2), *idle = proc_of(3);
	double wall = (double)(p->end - p->start), sync;
	int pairs[64][2], devs[64], exact;
	int64_t nk, nc, count;
	char key[16];

	for (enum group g = G_KERNEL; g <= G_RANGE; g++)
		check_json_group(fx->db, json, p, g);
	assert_int_equal(jproc_num(fx->db, json, p->pid, ".kernel_total_ns"), kernel_total(p->id));
	for (size_t i = 0, n = streams_of(p->id, pairs); i < n; i++) {
		char sql[512];
		int64_t b = expect_busy(p->id, pairs[i][0], pairs[i][1], &nk, &nc);

		snprintf(sql, sizeof(sql),
			 "SELECT json_extract(e.value, '$.busy_ns') || ' ' ||"
			 " json_extract(e.value, '$.kernels') || ' ' || json_extract(e.value, '$.copies')"
			 " FROM json_each(?1, '$.processes') p, json_each(p.value, '$.gpu.streams') e"
			 " WHERE json_extract(p.value, '$.pid') = ?2 AND json_extract(e.value,"
			 " '$.device') = %d AND coalesce(CAST(json_extract(e.value, '$.stream')"
			 " AS TEXT), 'null') = ?3",
			 pairs[i][0]);
		if (pairs[i][1] < 0)
			snprintf(key, sizeof(key), "null");
		else
			snprintf(key, sizeof(key), "%d", pairs[i][1]);
		v = jq(fx->db, json, sql, p->pid, key);
		assert_non_null(v);
		{
			char want[64];

			snprintf(want, sizeof(want), "%lld %lld %lld", (long long)b, (long long)nk,
				 (long long)nc);
			assert_string_equal(v, want);
		}
		free(v);
	}
	for (size_t i = 0, n = devices_of(p->id, devs); i < n; i++) {
		int64_t b = expect_busy(p->id, devs[i], ANY_STREAM, &nk, &nc);

		snprintf(key, sizeof(key), "%d", devs[i]);
		assert_int_equal(jfield(fx->db, json, p->pid, "devices", "device", key, "busy_ns"), b);
		assert_true(fabs(jfield(fx->db, json, p->pid, "devices", "device", key,
					"wall_share") - (double)b / wall) < 1e-6);
	}
	sync = expect_sync(p->id, &count, &exact);
	assert_true(exact);
	assert_true(fabs(jproc_num(fx->db, json, p->pid, ".sync.total_ns") - sync) <= 0.5);
	assert_int_equal(jproc_num(fx->db, json, p->pid, ".sync.count"), count);
	assert_true(fabs(jproc_num(fx->db, json, p->pid, ".sync.wall_share") - sync / wall) < 1e-6);
	assert_true(fabs(jfield(fx->db, json, p->pid, "sync.functions", "event",
				"cudaStreamSynchronize", "total_ns") -
			 (double)expected(p->id, STREAM_SYNC).sum) <= 0.5);
	v = jproc(fx->db, json, p->pid, ".traced");
	assert_string_equal(v, "1");
	free(v);
	assert_null(jproc(fx->db, json, p->pid, ".not_traced_reason"));

	/* Not traced: said so, with the reason and the detail. */
	v = jproc(fx->db, json, busy->pid, ".traced");
	assert_string_equal(v, "0");
	free(v);
	v = jproc(fx->db, json, busy->pid, ".not_traced_reason");
	assert_string_equal(v, "another profiler owns CUPTI");
	free(v);
	v = jproc(fx->db, json, busy->pid, ".status_detail");
	assert_string_equal(v, busy->gpu_detail);
	free(v);
	sync = expect_sync(busy->id, &count, &exact);
	assert_false(exact);
	v = jproc(fx->db, json, busy->pid, ".sync.estimated");
	assert_string_equal(v, "1");
	free(v);
	assert_true(fabs(jproc_num(fx->db, json, busy->pid, ".sync.total_ns") - sync) <= 0.5);
	assert_int_equal(jproc_num(fx->db, json, busy->pid, ".sync.count"), count);

	/* Never used CUDA: nothing is missing, nothing to explain. */
	assert_null(jproc(fx->db, json, idle->pid, ".status"));
	assert_null(jproc(fx->db, json, idle->pid, ".not_traced_reason"));
	free(json);
}

/* ---- GPU: table ----------------------------------------------------------- */

static void want_in(const char *text, const char *want)
{
	if (strstr(text, want))
		return;
	print_error("missing '%s' in\n%s\n", want, text);
	fail();
}

static void test_summary_gpu_table(void **state)
{
	struct store_fixture *fx = *state;
	char *table = render(fx->db, EMIT_TABLE);
	const struct proc *p = proc_of(1), *busy = proc_of(2);
	double wall = (double)(p->end - p->start), sync;
	char labels[32][64], want[256], u[2][FMT_UNIT_MAX];
	int devs[64], exact;
	int64_t open, nk, nc, count, open_all = 0;
	size_t n;

	snprintf(want, sizeof(want), "GPU activity: traced: %s\n", p->gpu_detail);
	want_in(table, want);
	snprintf(want, sizeof(want), "GPU activity: NOT traced: another profiler owns CUPTI: %s;",
		 busy->gpu_detail);
	want_in(table, want);
	/* Each kernel's share of the kernel time, right before its name. */
	n = group_labels(p->id, G_KERNEL, labels);
	for (size_t i = 0; i < n; i++) {
		struct expect e = expect_group(p->id, G_KERNEL, labels[i], &open);

		char shortname[64];

		/* Tables show kernels by their short names (fmt_short_name). */
		snprintf(want, sizeof(want), " %.1f%%  %s\n",
			 100.0 * (double)e.sum / (double)kernel_total(p->id),
			 fmt_short_name(shortname, sizeof(shortname), labels[i]));
		want_in(table, want);
	}
	/* GB/s ends each copy line. */
	n = group_labels(p->id, G_COPY, labels);
	for (size_t i = 0; i < n; i++) {
		struct expect e = expect_group(p->id, G_COPY, labels[i], &open);
		const char *line;

		snprintf(want, sizeof(want), "\n  %-10s ", labels[i]);
		line = strstr(table, want);
		assert_non_null(line);
		snprintf(want, sizeof(want), " %.2f\n", (double)e.bytes / (double)e.sum);
		assert_true(strstr(line + 1, want) == strchr(line + 1, '\n') - strlen(want) + 1);
	}
	n = group_labels(p->id, G_RANGE, labels);
	for (size_t i = 0; i < n; i++) {
		expect_group(p->id, G_RANGE, labels[i], &open);
		open_all += open;
	}
	snprintf(want, sizeof(want), "%lld ranges were left open", (long long)open_all);
	want_in(table, want);
	for (size_t i = 0, nd = devices_of(p->id, devs); i < nd; i++) {
		int64_t b = expect_busy(p->id, devs[i], ANY_STREAM, &nk, &nc);

		snprintf(want, sizeof(want), "  %-8d %18s %10lld %10lld %11s %6.1f%%\n", devs[i],
			 "all (GPU busy)", (long long)nk, (long long)nc,
			 fmt_duration(u[0], FMT_UNIT_MAX, (double)b), 100.0 * (double)b / wall);
		want_in(table, want);
	}
	sync = expect_sync(p->id, &count, &exact);
	snprintf(want, sizeof(want), "CPU blocked in synchronizing calls: %s, %.1f%% of wall\n",
		 fmt_duration(u[1], FMT_UNIT_MAX, sync), 100.0 * sync / wall);
	want_in(table, want);
	sync = expect_sync(busy->id, &count, &exact);
	snprintf(want, sizeof(want), "CPU blocked in synchronizing calls: ~%s, ~%.1f%% of wall\n",
		 fmt_duration(u[1], FMT_UNIT_MAX, sync),
		 100.0 * sync / (double)(busy->end - busy->start));
	want_in(table, want);
	free(table);
}

/* A version 1 store (no GPU tables, no status columns) still summarises. */
static void test_summary_schema_v1_store(void **state)
{
	char path[] = "/tmp/test_summary_v1.XXXXXX";
	char *out;
	sqlite3 *db;
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	exec(db, "%s", shimmer_schema_steps[0]); /* schema 001 alone */
	exec(db, "INSERT INTO functions VALUES (1, 'cudaDeviceSynchronize', 'cuda');"
		 "INSERT INTO processes (proc_id, pid, ppid, uid, malloc_mode, lossless,"
		 " start_wall_ns, start_ns, end_ns) VALUES (1, 42, 1, 0, 'off', 0, 0, 0, 1000);"
		 "INSERT INTO function_counts VALUES (1, 1, 1, 1, 0);"
		 "INSERT INTO cuda_calls (proc_id, tid, fn_id, start_ns, end_ns, ret,"
		 " per_thread_stream) VALUES (1, 1, 1, 100, 350, 0, 0)");
	out = render(db, EMIT_TABLE);
	want_in(out, "GPU activity: NOT traced: no GPU status was recorded");
	want_in(out, "CPU blocked in synchronizing calls: 250 ns, 25.0% of wall\n");
	free(out);
	out = render(db, EMIT_CSV);
	want_in(out, "\n42,,sync,1,,250,,,,,,0.250000,gpu,1\n");
	free(out);
	store_remove(db, path);
}

/* ---- GPU sampling (schema 4) ------------------------------------------------ */

/*
 * A store of its own: a process sampled in 4 windows of 250 ms over 10 s
 * (a traced share of 10%), one sampled process that traced no window, one
 * still running with no window and so no span (a NULL traced share) but a
 * kernel all the same, and one recorded whole.  The estimates are checked
 * against the figures computed here from the arrays: recorded x span /
 * traced.
 */
enum { S_PROC = 10, S_EMPTY = 11, S_WHOLE = 12, S_NOSPAN = 13 };

static const struct sproc {
	int id, pid;
	int64_t end;   /* -1: NULL */
	int64_t since; /* -1: not sampled */
} sprocs[] = {
	{ S_PROC, 1000, 10000000000, 0 },
	{ S_EMPTY, 1100, 5000000000, 0 },
	{ S_WHOLE, 1200, 10000000000, -1 },
	{ S_NOSPAN, 1300, -1, 1000 },
};

static const struct ivl swindows[] = {
	{ 1000000000, 1250000000 }, { 3500000000, 3750000000 },
	{ 6000000000, 6250000000 }, { 8500000000, 8750000000 },
};

static const struct kernel skernels[] = {
	{ S_PROC, 0, 7, 1, 1000000000, 1001000000 },
	{ S_PROC, 0, 7, 1, 3500000000, 3501000000 },
	{ S_PROC, 0, 7, 1, 6000000000, 6001000000 },
	/* Overlaps the last gemm on another stream: busy time counts it once. */
	{ S_PROC, 0, 8, 2, 6000500000, 6003500000 },
	{ S_WHOLE, 0, 7, 1, 1000000000, 1002000000 },
	{ S_NOSPAN, 0, 7, 1, 1000000000, 1002000000 },
};

static const struct copy scopies[] = {
	{ S_PROC, 0, 7, "memcpy", "HtoD", 1048576, 1100000000, 1100500000 },
	{ S_PROC, 0, 7, "memcpy", "HtoD", 1048576, 8500000000, 8500500000 },
};

#define GEMM "gemm(float*, float*)"

static int setup_sampled(void **state)
{
	struct store_fixture *f = store_fixture_new("/tmp/test_summary_sampled.XXXXXX");

	exec(f->db, "BEGIN");
	for (size_t i = 0; i < N(sprocs); i++) {
		const struct sproc *p = &sprocs[i];

		exec(f->db,
		     "INSERT INTO processes (proc_id, pid, ppid, uid, hostname, exe, malloc_mode,"
		     " lossless, start_wall_ns, start_ns, end_ns, end_reason, gpu_status,"
		     " gpu_sampled_since_ns) VALUES (%d, %d, 1, 0, 'node', '/bin/x', 'off', 0, 0, 0,"
		     " nullif(%lld, -1), 'exit', 'active', nullif(%lld, -1))",
		     p->id, p->pid, (long long)p->end, (long long)p->since);
		exec(f->db, "INSERT INTO strings (proc_id, id, text, demangled) VALUES"
			    " (%d, 1, '_Z4gemmPfS_', %Q), (%d, 2, 'relu_kernel', NULL)",
		     p->id, GEMM, p->id);
	}
	for (size_t i = 0; i < N(swindows); i++)
		exec(f->db, "INSERT INTO gpu_windows (proc_id, start_ns, end_ns) VALUES (%d, %lld, %lld)",
		     S_PROC, (long long)swindows[i].s, (long long)swindows[i].e);
	for (size_t i = 0; i < N(skernels); i++) {
		const struct kernel *k = &skernels[i];

		exec(f->db,
		     "INSERT INTO kernels (proc_id, device, stream, correlation, name_id, start_ns,"
		     " end_ns) VALUES (%d, %d, %d, %d, %d, %lld, %lld)",
		     k->proc, k->device, k->stream, (int)i, k->name, (long long)k->start,
		     (long long)k->end);
	}
	for (size_t i = 0; i < N(scopies); i++) {
		const struct copy *c = &scopies[i];

		exec(f->db,
		     "INSERT INTO gpu_copies (proc_id, op, device, stream, correlation, start_ns,"
		     " end_ns, bytes, copy_kind) VALUES (%d, %Q, %d, %d, %d, %lld, %lld, %lld, %Q)",
		     c->proc, c->op, c->device, c->stream, (int)i + 100, (long long)c->start,
		     (long long)c->end, (long long)c->bytes, c->kind);
	}
	exec(f->db, "COMMIT");
	*state = f;
	return 0;
}

/* What the arrays say of S_PROC, computed without the store. */
struct sexpect {
	int64_t traced, span;
	double scale;         /* span / traced */
	int64_t gemm_n, gemm_sum, relu_n, relu_sum;
	int64_t copy_n, copy_bytes, copy_sum;
	int64_t dev_n, dev_busy; /* device 0, all streams */
	int64_t s7_n, s7_busy;   /* device 0 stream 7 */
};

static struct sexpect sampled_expect(void)
{
	struct sexpect e = { 0 };
	struct ivl all[16], s7[16];
	size_t na = 0, n7 = 0;
	int64_t last = 0;

	for (size_t i = 0; i < N(swindows); i++) {
		e.traced += swindows[i].e - swindows[i].s;
		if (swindows[i].e > last)
			last = swindows[i].e;
	}
	e.span = (sprocs[0].end > last ? sprocs[0].end : last) - sprocs[0].since;
	e.scale = (double)e.span / (double)e.traced;
	for (size_t i = 0; i < N(skernels); i++) {
		const struct kernel *k = &skernels[i];

		if (k->proc != S_PROC)
			continue;
		if (k->name == 1)
			e.gemm_n++, e.gemm_sum += k->end - k->start;
		else
			e.relu_n++, e.relu_sum += k->end - k->start;
		all[na++] = (struct ivl){ k->start, k->end };
		if (k->stream == 7)
			s7[n7++] = (struct ivl){ k->start, k->end };
	}
	for (size_t i = 0; i < N(scopies); i++) {
		const struct copy *c = &scopies[i];

		e.copy_n++, e.copy_bytes += c->bytes, e.copy_sum += c->end - c->start;
		all[na++] = (struct ivl){ c->start, c->end };
		if (c->stream == 7)
			s7[n7++] = (struct ivl){ c->start, c->end };
	}
	e.dev_n = (int64_t)na;
	e.dev_busy = union_len(all, na);
	e.s7_n = (int64_t)n7;
	e.s7_busy = union_len(s7, n7);
	return e;
}

/* The text of pid's process section (up to the next "Process "), malloc'd. */
static char *section(const char *table, int pid)
{
	char head[32];
	const char *a, *b;

	snprintf(head, sizeof(head), "Process %d ", pid);
	a = strstr(table, head);
	assert_non_null(a);
	b = strstr(a + 1, "\nProcess ");
	return strndup(a, b ? (size_t)(b - a) : strlen(a));
}

static void want_no_nan(const char *text)
{
	if (strstr(text, "nan") || strstr(text, "inf"))
		fail_msg("nan or inf in\n%s", text);
}

static void test_summary_sampled_table(void **state)
{
	struct store_fixture *fx = *state;
	char *table = render(fx->db, EMIT_TABLE), *sec;
	struct sexpect e = sampled_expect();
	char want[512], u[5][FMT_UNIT_MAX], c[3][32];

	/* The fixture is the case of the brief: 10% traced, so a factor of 10. */
	assert_true(fabs(e.scale - 10.0) < 1e-12);
	want_no_nan(table);
	sec = section(table, 1000);
	snprintf(want, sizeof(want),
		 "  GPU activity: traced\n"
		 "  GPU activity sampled: %d windows, %s traced of %s (%.2f%%); kernel and copy"
		 " counts and totals are estimates (~), scaled by %.4g; SHIMMER_GPU=all records"
		 " every kernel\n\n",
		 (int)N(swindows), fmt_duration(u[0], FMT_UNIT_MAX, (double)e.traced),
		 fmt_duration(u[1], FMT_UNIT_MAX, (double)e.span),
		 100.0 * (double)e.traced / (double)e.span, e.scale);
	want_in(sec, want);
	snprintf(want, sizeof(want), "GPU kernels: ~%s in all\n",
		 fmt_duration(u[0], FMT_UNIT_MAX, (double)(e.gemm_sum + e.relu_sum) * e.scale));
	want_in(sec, want);
	/* Count and total scaled; mean, std dev, min, max and share as recorded. */
	snprintf(c[0], sizeof(c[0]), "~%.0f", (double)e.gemm_n * e.scale);
	{
		char total[FMT_UNIT_MAX + 1];

		snprintf(total, sizeof(total), "~%s",
			 fmt_duration(u[0], FMT_UNIT_MAX, (double)e.gemm_sum * e.scale));
		snprintf(want, sizeof(want), "  %10s %11s %10s %10s %10s %10s %6.1f%%  %s\n", c[0],
			 total, fmt_duration(u[1], FMT_UNIT_MAX, (double)e.gemm_sum / (double)e.gemm_n),
			 fmt_duration(u[2], FMT_UNIT_MAX, 0), fmt_duration(u[3], FMT_UNIT_MAX, 1e6),
			 fmt_duration(u[4], FMT_UNIT_MAX, 1e6),
			 100.0 * (double)e.gemm_sum / (double)(e.gemm_sum + e.relu_sum), "gemm");
		want_in(sec, want);
		assert_string_equal(c[0], "~30");
		assert_string_equal(total, "~30.00 ms");
	}
	/* Copies: count, bytes (a column one wider for the ~) and total scaled, GB/s as
	 * recorded. */
	{
		char bytes[FMT_UNIT_MAX + 1], total[FMT_UNIT_MAX + 1];

		snprintf(c[1], sizeof(c[1]), "~%.0f", (double)e.copy_n * e.scale);
		snprintf(bytes, sizeof(bytes), "~%s",
			 fmt_bytes(u[0], FMT_UNIT_MAX, (double)e.copy_bytes * e.scale));
		snprintf(total, sizeof(total), "~%s",
			 fmt_duration(u[1], FMT_UNIT_MAX, (double)e.copy_sum * e.scale));
		snprintf(want, sizeof(want), "  %-10s %10s %11s %11s %10s", "HtoD", c[1], bytes, total,
			 fmt_duration(u[2], FMT_UNIT_MAX, (double)e.copy_sum / (double)e.copy_n));
		want_in(sec, want);
		snprintf(want, sizeof(want), " %10.2f\n", (double)e.copy_bytes / (double)e.copy_sum);
		want_in(sec, want);
	}
	/* Busy: counts and time scaled, the share of the traced time, all marked. */
	{
		char total[FMT_UNIT_MAX + 1], share[16];

		snprintf(c[2], sizeof(c[2]), "~%.0f", (double)(e.dev_n - e.copy_n) * e.scale);
		snprintf(c[1], sizeof(c[1]), "~%.0f", (double)e.copy_n * e.scale);
		snprintf(total, sizeof(total), "~%s",
			 fmt_duration(u[0], FMT_UNIT_MAX, (double)e.dev_busy * e.scale));
		snprintf(share, sizeof(share), "~%.1f%%", 100.0 * (double)e.dev_busy / (double)e.traced);
		snprintf(want, sizeof(want), "  %-8d %18s %10s %10s %11s %7s\n", 0, "all (GPU busy)", c[2],
			 c[1], total, share);
		want_in(sec, want);
	}
	free(sec);

	/* Recorded whole beside it: nothing scaled, nothing marked. */
	sec = section(table, 1200);
	want_in(sec, "  GPU activity: traced\n\n  GPU kernels: 2.00 ms in all\n");
	assert_null(strstr(sec, "~"));
	assert_null(strstr(sec, "sampled"));
	free(sec);

	/* No window: said so, and no estimate from nothing. */
	sec = section(table, 1100);
	snprintf(want, sizeof(want),
		 "  GPU activity: traced; no kernels ran in a window\n"
		 "  GPU activity sampled: no window was traced in %s; no traced share to estimate"
		 " from: kernel and copy counts and totals (~) are only what was recorded;"
		 " SHIMMER_GPU=all records every kernel\n",
		 fmt_duration(u[0], FMT_UNIT_MAX, (double)sprocs[1].end));
	want_in(sec, want);
	free(sec);

	/* No span either: nothing to scale by, what was recorded is shown as such. */
	sec = section(table, 1300);
	want_in(sec, "  GPU activity sampled: no window was traced; no traced share to estimate"
		     " from: kernel and copy counts and totals (~) are only what was recorded;"
		     " SHIMMER_GPU=all records every kernel\n");
	want_in(sec, "GPU kernels: ~2.00 ms in all\n");
	snprintf(want, sizeof(want), "  %10s %11s ", "~1", "~2.00 ms");
	want_in(sec, want);
	free(sec);
	free(table);
}

static void test_summary_sampled_csv(void **state)
{
	struct store_fixture *fx = *state;
	char *csv = render(fx->db, EMIT_CSV);
	struct sexpect e = sampled_expect();
	char f[NCOLS][64];

	want_no_nan(csv);
	find_row(csv, 1000, "windows", f);
	assert_string_equal(f[C_KIND], "sampling");
	assert_int_equal(strtoll(f[C_COUNT], NULL, 10), N(swindows));
	assert_int_equal(strtoll(f[C_TOTAL], NULL, 10), e.traced);
	check_near(f[C_SHARE], (double)e.traced / (double)e.span, 1e-9, "traced share");
	find_row(csv, 1000, "span", f);
	assert_string_equal(f[C_KIND], "sampling");
	assert_int_equal(strtoll(f[C_TOTAL], NULL, 10), e.span);
	check_near(f[C_SHARE], (double)e.span / (double)sprocs[0].end, 1e-6, "span share");

	/* Kernels: count and total scaled, timed = recorded, the rest as recorded. */
	find_row(csv, 1000, GEMM, f);
	assert_string_equal(f[C_KIND], "kernel");
	assert_int_equal(strtoll(f[C_COUNT], NULL, 10), llround((double)e.gemm_n * e.scale));
	assert_int_equal(strtoll(f[C_COUNT], NULL, 10), 30);
	assert_int_equal(strtoll(f[C_TOTAL], NULL, 10), llround((double)e.gemm_sum * e.scale));
	assert_int_equal(strtoll(f[C_TOTAL], NULL, 10), 30000000);
	assert_int_equal(strtoll(f[C_TIMED], NULL, 10), e.gemm_n);
	check_near(f[C_MEAN], (double)e.gemm_sum / (double)e.gemm_n, 0.5, "mean");
	assert_int_equal(strtoll(f[C_MIN], NULL, 10), 1000000);
	assert_int_equal(strtoll(f[C_MAX], NULL, 10), 1000000);
	check_near(f[C_SHARE], (double)e.gemm_sum / (double)e.traced, 1e-6, "kernel share");
	find_row(csv, 1000, "HtoD", f);
	assert_int_equal(strtoll(f[C_COUNT], NULL, 10), llround((double)e.copy_n * e.scale));
	assert_int_equal(strtoll(f[C_BYTES], NULL, 10), llround((double)e.copy_bytes * e.scale));
	assert_int_equal(strtoll(f[C_TOTAL], NULL, 10), llround((double)e.copy_sum * e.scale));
	assert_int_equal(strtoll(f[C_TIMED], NULL, 10), e.copy_n);
	find_row(csv, 1000, "device 0", f);
	assert_string_equal(f[C_KIND], "gpu");
	assert_int_equal(strtoll(f[C_COUNT], NULL, 10), llround((double)e.dev_n * e.scale));
	assert_int_equal(strtoll(f[C_TOTAL], NULL, 10), llround((double)e.dev_busy * e.scale));
	check_near(f[C_SHARE], (double)e.dev_busy / (double)e.traced, 1e-6, "busy share");
	find_row(csv, 1000, "device 0 stream 7", f);
	assert_int_equal(strtoll(f[C_COUNT], NULL, 10), llround((double)e.s7_n * e.scale));
	assert_int_equal(strtoll(f[C_TOTAL], NULL, 10), llround((double)e.s7_busy * e.scale));

	/* Recorded whole: as recorded, and no sampling rows. */
	find_row(csv, 1200, GEMM, f);
	assert_int_equal(strtoll(f[C_COUNT], NULL, 10), 1);
	assert_int_equal(strtoll(f[C_TOTAL], NULL, 10), 2000000);
	check_near(f[C_SHARE], 2e6 / (double)sprocs[2].end, 1e-6, "unsampled share");
	assert_null(strstr(csv, "\n1200,,windows,"));
	assert_null(strstr(csv, "\n1200,,span,"));

	/* No window: zero traced, a zero share, not a division by it. */
	want_in(csv, "\n1100,,windows,0,,0,,,,,,0,sampling,11\n");
	/* No span: no share, and the recorded kernel as recorded. */
	want_in(csv, "\n1300,,windows,0,,0,,,,,,,sampling,13\n");
	want_in(csv, "\n1300,,span,,,,,,,,,,sampling,13\n");
	want_in(csv, "\n1300,,\"" GEMM "\",1,,2000000,2000000,0,2000000,2000000,1,,kernel,13\n");
	free(csv);
}

/* processes[pid].gpu<path> as a number, or fail. */
static void want_json_num(sqlite3 *db, const char *json, int pid, const char *path, double want,
			  double tol)
{
	double got = jproc_num(db, json, pid, path);

	if (fabs(got - want) > tol)
		fail_msg("pid %d %s: got %f, want %f", pid, path, got, want);
}

/* With GPU-work calls counted in and out of the windows, the estimates
 * scale by their ratio, not by the traced time: the process ran slower
 * inside its windows.  Only launch, copy and memset calls count. */
static void test_summary_sampled_by_calls(void **state)
{
	struct store_fixture *fx = *state;
	struct sexpect e = sampled_expect();
	const int64_t all_calls = 120, in_windows[N(swindows)] = { 2, 3, 1, 2 };
	int64_t traced_calls = 0;
	char *table, *json, *sec, want[512], u[2][FMT_UNIT_MAX];
	double scale;

	for (size_t i = 0; i < N(swindows); i++) {
		exec(fx->db, "UPDATE gpu_windows SET calls = %lld WHERE proc_id = %d AND start_ns = %lld",
		     (long long)in_windows[i], S_PROC, (long long)swindows[i].s);
		traced_calls += in_windows[i];
	}
	scale = (double)all_calls / (double)traced_calls;
	exec(fx->db, "INSERT OR IGNORE INTO functions VALUES (30, 'cudaLaunchKernelExC', 'cuda', 1),"
		     " (31, 'cudaMemcpyAsync', 'cuda', 1), (32, 'cudaMalloc', 'cuda', 0)");
	exec(fx->db, "INSERT INTO function_counts VALUES (%d, 1, 30, %lld, 0), (%d, 2, 31, %lld, 0),"
		     " (%d, 1, 32, 999, 0)", S_PROC, (long long)(all_calls - 20), S_PROC, 20LL, S_PROC);

	table = render(fx->db, EMIT_TABLE);
	sec = section(table, 1000);
	snprintf(want, sizeof(want),
		 "  GPU activity sampled: %d windows, %s traced of %s (%.2f%%), with %lld of the"
		 " process's %lld launch, copy and memset calls; kernel and copy counts and totals"
		 " are estimates (~), scaled by %.4g; SHIMMER_GPU=all records every kernel\n",
		 (int)N(swindows), fmt_duration(u[0], FMT_UNIT_MAX, (double)e.traced),
		 fmt_duration(u[1], FMT_UNIT_MAX, (double)e.span),
		 100.0 * (double)e.traced / (double)e.span, (long long)traced_calls,
		 (long long)all_calls, scale);
	want_in(sec, want);
	free(sec);
	free(table);

	json = render(fx->db, EMIT_JSON);
	want_json_num(fx->db, json, 1000, ".sampling.calls", (double)all_calls, 0);
	want_json_num(fx->db, json, 1000, ".sampling.calls_traced", (double)traced_calls, 0);
	want_json_num(fx->db, json, 1000, ".sampling.scale", scale, 1e-9);
	assert_int_equal(jfield(fx->db, json, 1000, "kernels", "name", GEMM, "count"),
			 llround((double)e.gemm_n * scale));
	assert_int_equal(jfield(fx->db, json, 1000, "copies", "kind", "HtoD", "bytes"),
			 llround((double)e.copy_bytes * scale));
	free(json);
}

static void test_summary_sampled_json(void **state)
{
	struct store_fixture *fx = *state;
	char *json = render(fx->db, EMIT_JSON), *v;
	struct sexpect e = sampled_expect();

	want_no_nan(json);
	v = jq(fx->db, json, "SELECT json_valid(?1) WHERE ?2 AND ?3 IS NULL", 1, NULL);
	assert_string_equal(v, "1");
	free(v);
	want_json_num(fx->db, json, 1000, ".sampling.windows", (double)N(swindows), 0);
	want_json_num(fx->db, json, 1000, ".sampling.traced_ns", (double)e.traced, 0);
	want_json_num(fx->db, json, 1000, ".sampling.span_ns", (double)e.span, 0);
	want_json_num(fx->db, json, 1000, ".sampling.traced_share",
		      (double)e.traced / (double)e.span, 1e-9);
	want_json_num(fx->db, json, 1000, ".kernel_total_ns",
		      (double)(e.gemm_sum + e.relu_sum) * e.scale, 0.5);
	assert_int_equal(jfield(fx->db, json, 1000, "kernels", "name", GEMM, "estimated"), 1);
	assert_int_equal(jfield(fx->db, json, 1000, "kernels", "name", GEMM, "count"), 30);
	assert_int_equal(jfield(fx->db, json, 1000, "kernels", "name", GEMM, "timed"), e.gemm_n);
	assert_int_equal(jfield(fx->db, json, 1000, "kernels", "name", GEMM, "total_ns"),
			 llround((double)e.gemm_sum * e.scale));
	assert_true(fabs(jfield(fx->db, json, 1000, "kernels", "name", GEMM, "mean_ns") - 1e6) <
		    1e-3);
	assert_true(fabs(jfield(fx->db, json, 1000, "kernels", "name", GEMM, "kernel_share") -
			 (double)e.gemm_sum / (double)(e.gemm_sum + e.relu_sum)) < 1e-6);
	assert_true(fabs(jfield(fx->db, json, 1000, "kernels", "name", GEMM, "wall_share") -
			 (double)e.gemm_sum / (double)e.traced) < 1e-6);
	assert_int_equal(jfield(fx->db, json, 1000, "copies", "kind", "HtoD", "estimated"), 1);
	assert_int_equal(jfield(fx->db, json, 1000, "copies", "kind", "HtoD", "bytes"),
			 llround((double)e.copy_bytes * e.scale));
	assert_true(fabs(jfield(fx->db, json, 1000, "copies", "kind", "HtoD", "gb_per_s") -
			 (double)e.copy_bytes / (double)e.copy_sum) < 1e-6);
	assert_int_equal(jfield(fx->db, json, 1000, "devices", "device", "0", "estimated"), 1);
	assert_int_equal(jfield(fx->db, json, 1000, "devices", "device", "0", "busy_ns"),
			 llround((double)e.dev_busy * e.scale));
	assert_true(fabs(jfield(fx->db, json, 1000, "devices", "device", "0", "wall_share") -
			 (double)e.dev_busy / (double)e.traced) < 1e-6);

	/* Recorded whole: no sampling object, nothing estimated. */
	assert_null(jproc(fx->db, json, 1200, ".sampling"));
	assert_null(jproc(fx->db, json, 1200, ".kernels[0].estimated"));
	assert_null(jproc(fx->db, json, 1200, ".devices[0].estimated"));
	want_json_num(fx->db, json, 1200, ".kernels[0].total_ns", 2e6, 0);

	/* No window: zero traced, a zero share. */
	want_json_num(fx->db, json, 1100, ".sampling.windows", 0, 0);
	want_json_num(fx->db, json, 1100, ".sampling.traced_ns", 0, 0);
	want_json_num(fx->db, json, 1100, ".sampling.traced_share", 0, 0);
	/* No span: null, and the recorded kernel as recorded. */
	assert_null(jproc(fx->db, json, 1300, ".sampling.span_ns"));
	assert_null(jproc(fx->db, json, 1300, ".sampling.traced_share"));
	want_json_num(fx->db, json, 1300, ".sampling.windows", 0, 0);
	want_json_num(fx->db, json, 1300, ".kernels[0].count", 1, 0);
	want_json_num(fx->db, json, 1300, ".kernels[0].total_ns", 2e6, 0);
	want_json_num(fx->db, json, 1300, ".kernels[0].estimated", 1, 0);
	assert_null(jproc(fx->db, json, 1300, ".kernels[0].wall_share"));
	free(json);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, store_fixture_teardown)
		T(test_summary_csv_matches_rows),
		T(test_summary_estimated_when_sampled),
		T(test_summary_json_peaks_and_drops),
		T(test_summary_table_warns_of_drops),
		T(test_summary_gpu_csv),
		T(test_summary_gpu_json),
		T(test_summary_gpu_table),
		cmocka_unit_test_setup_teardown(test_summary_sampled_table, setup_sampled,
						store_fixture_teardown),
		cmocka_unit_test_setup_teardown(test_summary_sampled_csv, setup_sampled,
						store_fixture_teardown),
		cmocka_unit_test_setup_teardown(test_summary_sampled_by_calls, setup_sampled,
						store_fixture_teardown),
		cmocka_unit_test_setup_teardown(test_summary_sampled_json, setup_sampled,
						store_fixture_teardown),
		cmocka_unit_test(test_summary_schema_v1_store),
		cmocka_unit_test(test_summary_missing_store_is_not_created),
		cmocka_unit_test(test_summary_foreign_file_is_refused),
#undef T
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
