/*
 * Ingestion speed comes from: one open transaction per batch, statements
 * prepared once and reset after each step, no secondary index to
 * maintain, static text bound without a copy, a modest page cache (8 MiB:
 * rows are appended, so the hot pages are few; a 64 MiB cache measured
 * slower, its growth costing mallocs and page faults), and a WAL
 * checkpointed in large steps.
 * Durability comes from WAL with synchronous=NORMAL: a committed batch
 * survives the daemon's death; a power cut may lose the last commits but
 * never corrupts the file.
 *
 * Allocation rows, most of the volume, are held back until the batch
 * ends (struct pending): a block freed within its batch (most blocks in
 * an allocation-heavy program) is then written once, complete, instead of
 * inserted and updated, and the rows go in ALLOC_ROWS to a statement.  A
 * batch begins with BEGIN IMMEDIATE and reads max(allocations.id): holding
 * the write lock, it can hand out the next ids itself, so an id returned
 * by store_alloc_add() is the row's final rowid whether the row is still
 * pending or not.  At most PEND_MAX rows wait; beyond that they are
 * written early (their frees then UPDATE, as for rows of earlier batches).
 */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock_ns.h"

#include "log.h"
#include "lost.h"

/* common/embed-sql: schema/NNN_*.sql, one string per file, NULL-terminated;
 * element i takes a store from version i to i + 1. */
extern const char *const shimmer_schema_steps[];

#define ALLOC_ROWS 32         /* allocations rows per multi-row INSERT */
#define ALLOC_COLS 18         /* bound values per allocations row */
#define PEND_MAX (1u << 16)   /* allocations rows held back, at most */

enum {
	ST_BEGIN,
	ST_COMMIT,
	ST_ALLOC_MAX,
	ST_PROC,
	ST_PROC_END,
	ST_PROC_CPU,
	ST_PROC_FIND,
	ST_PROC_EXEC,
	ST_PROC_RESUME,
	ST_THREAD,
	ST_CUDA,
	ST_ALLOC,
	ST_FREE,
	ST_COUNT,
	ST_DROP,
	ST_CPU_TIME,
	ST_STRING,
	ST_GPU_STATUS,
	ST_GPU_SAMPLED,
	ST_KERNEL,
	ST_COPY,
	ST_SYNC,
	ST_API,
	ST_RANGE,
	ST_RANGE_END,
	ST_MARK,
	ST_COUNTER,
	ST_STACK_HAS,
	ST_STACK,
	ST_STACK_LEAF,
	ST_STACK_TOP,
	ST_PYSTACK_HAS,
	ST_PYSTACK,
	ST_MODULE,
	ST_MODULE_END,
	ST_GPU_WINDOW,
	ST_OFFCPU,
	ST_OFFCPU_STATUS,
	ST_HEAP_TOTALS,
	ST_HEAP_SITE,
	ST_HEAP_HIST,
	ST_HEAP_CALL,
	ST_HEAP_TL_CLEAR,
	ST_HEAP_SERIES_CLEAR,
	ST_HEAP_POINTS_CLEAR,
	ST_HEAP_POINT,
	ST_HEAP_TL,
	ST_HEAP_SERIES,
	ST_HEAP_STEP,
	ST_LAST_COMMIT,
	ST_ALLOC_N, /* ALLOC_ROWS rows of ST_ALLOC's columns, built in prepare_db() */
	ST_N
};

#define ALLOC_COLUMNS                                                        \
	"id, proc_id, space, device, ptr, size, sampled, weight, alloc_fn, "   \
	"alloc_tid, alloc_ns, alloc_end_ns, free_fn, free_tid, free_ns, "      \
	"free_end_ns, stack_id, pystack_id"

static const char *const sql[ST_N] = {
	/* IMMEDIATE: the batch hands out allocations ids (see above). */
	[ST_BEGIN] = "BEGIN IMMEDIATE",
	[ST_COMMIT] = "COMMIT",
	[ST_ALLOC_MAX] = "SELECT coalesce(max(id), 0) FROM allocations",
	[ST_PROC] = "INSERT INTO processes (pid, ppid, parent_proc_id, uid, "
		    "hostname, exe, argv, rank, local_rank, malloc_mode, "
		    "sample_bytes, lossless, start_wall_ns, start_ns, traced_by, argv_bytes) "
		    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
	[ST_PROC_END] = "UPDATE processes SET end_ns = ?2, end_reason = ?3, end_signal = ?4 "
			"WHERE proc_id = ?1",
	[ST_PROC_CPU] = "UPDATE processes SET exit_cpu_ns = ?2, exit_user_ns = ?3, "
			"exit_sys_ns = ?4 WHERE proc_id = ?1",
	[ST_PROC_FIND] = "SELECT proc_id FROM processes WHERE pid = ?1 AND "
			 "hostname = ?2 AND uid = ?3 ORDER BY proc_id DESC LIMIT 1",
	[ST_PROC_EXEC] = "UPDATE processes SET end_reason = 'exec', end_ns = "
			 "max(start_ns, min(end_ns, ?5)) WHERE proc_id = "
			 "(SELECT max(proc_id) FROM processes WHERE pid = ?1 AND "
			 "hostname = ?2) AND uid = ?4 AND end_reason = 'disconnect' AND end_ns >= ?3",
	/* The latest row of the pid on the host, only if it is uid's, started
	 * when the process says it did and was ended by store_recover(). */
	[ST_PROC_RESUME] = "UPDATE processes SET end_ns = NULL, end_reason = NULL, "
			   "end_signal = NULL WHERE proc_id = (SELECT max(proc_id) FROM "
			   "processes WHERE pid = ?1 AND hostname = ?2) AND uid = ?3 AND "
			   "start_ns = ?4 AND end_reason = 'collector_lost' RETURNING proc_id",
	[ST_THREAD] = "INSERT OR IGNORE INTO threads (proc_id, tid, name, first_ns) "
		      "VALUES (?1, ?2, (SELECT text FROM strings WHERE proc_id = ?1 "
		      "AND id = ?3), ?4)",
	[ST_CUDA] = "INSERT INTO cuda_calls (proc_id, tid, fn_id, start_ns, end_ns, "
		    "ret, device, ptr, bytes, stream, copy_kind, aux, aux2, "
		    "grid_x, grid_y, grid_z, block_x, block_y, block_z, "
		    "per_thread_stream, stack_id, pystack_id) VALUES (?1, ?2, ?3, ?4, "
		    "?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, "
		    "?19, ?20, ?21, ?22)",
	[ST_ALLOC] = "INSERT INTO allocations (" ALLOC_COLUMNS ") VALUES "
		     "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
	[ST_FREE] = "UPDATE allocations SET free_fn = ?2, free_tid = ?3, "
		    "free_ns = ?4, free_end_ns = ?5 WHERE id = ?1",
	[ST_COUNT] = "INSERT INTO function_counts (proc_id, tid, fn_id, count, bytes) "
		     "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (proc_id, tid, fn_id) "
		     "DO UPDATE SET count = count + excluded.count, "
		     "bytes = bytes + excluded.bytes",
	[ST_CPU_TIME] = "INSERT OR REPLACE INTO cpu_time (proc_id, tid, ts_ns, cpu_ns, wait_ns) "
			"VALUES (?1, ?2, ?3, ?4, ?5)",
	[ST_DROP] = "INSERT INTO drops (proc_id, tid, reason, events) "
		    "VALUES (?1, ?2, ?3, ?4) ON CONFLICT (proc_id, tid, reason) "
		    "DO UPDATE SET events = events + excluded.events",
	[ST_STRING] = "INSERT OR REPLACE INTO strings (proc_id, id, text, demangled) "
		      "VALUES (?1, ?2, ?3, ?4)",
	[ST_GPU_STATUS] = "UPDATE processes SET gpu_status = ?2, gpu_status_detail = ?3 "
			  "WHERE proc_id = ?1",
	[ST_GPU_SAMPLED] = "UPDATE processes SET gpu_sampled_since_ns = ?2 WHERE proc_id = ?1",
	[ST_KERNEL] = "INSERT INTO kernels (proc_id, device, context, stream, "
		      "correlation, name_id, start_ns, end_ns, grid_x, grid_y, grid_z, "
		      "block_x, block_y, block_z, registers, static_smem, dynamic_smem, "
		      "graph_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, "
		      "?12, ?13, ?14, ?15, ?16, ?17, ?18)",
	[ST_COPY] = "INSERT INTO gpu_copies (proc_id, op, device, context, stream, "
		    "correlation, start_ns, end_ns, bytes, copy_kind, src_kind, dst_kind, "
		    "async, value) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, "
		    "?12, ?13, ?14)",
	[ST_SYNC] = "INSERT INTO gpu_syncs (proc_id, type, context, stream, event, "
		    "correlation, start_ns, end_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
	[ST_API] = "INSERT INTO gpu_api (proc_id, tid, domain, name_id, cbid, "
		   "correlation, start_ns, end_ns, stack_id, pystack_id) "
		   "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
	[ST_RANGE] = "INSERT INTO ranges (proc_id, tid, kind, domain_id, name_id, "
		     "start_ns, depth, parent_id, color, category) "
		     "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
	[ST_RANGE_END] = "UPDATE ranges SET end_ns = ?2 WHERE id = ?1",
	[ST_MARK] = "INSERT INTO markers (proc_id, tid, domain_id, name_id, ts_ns) "
		    "VALUES (?1, ?2, ?3, ?4, ?5)",
	[ST_COUNTER] = "INSERT INTO counters (proc_id, tid, domain_id, name_id, ts_ns, "
		       "value) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
	[ST_STACK_HAS] = "SELECT 1 FROM stacks WHERE proc_id = ?1 AND stack_id = ?2",
	[ST_STACK] = "INSERT INTO stack_nodes (proc_id, node_id, parent_id, pc) "
		     "VALUES (?1, ?2, ?3, ?4)",
	[ST_STACK_LEAF] = "INSERT INTO stacks (proc_id, stack_id, node_id) VALUES (?1, ?2, ?3)",
	[ST_STACK_TOP] = "SELECT max(node_id) FROM stack_nodes WHERE proc_id = ?1",
	[ST_PYSTACK_HAS] = "SELECT 1 FROM python_frames WHERE proc_id = ?1 AND "
			   "pystack_id = ?2 LIMIT 1",
	[ST_PYSTACK] = "INSERT OR IGNORE INTO python_frames (proc_id, pystack_id, level, "
		       "file_id, func_id, line) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
	[ST_MODULE] = "INSERT INTO modules (proc_id, path_id, bias, lo, hi, build_id, "
		      "loaded_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
	[ST_MODULE_END] = "UPDATE modules SET unloaded_ns = ?4 WHERE id = "
			  "(SELECT max(id) FROM modules WHERE proc_id = ?1 AND "
			  "path_id = ?2 AND lo = ?3 AND unloaded_ns IS NULL)",
	[ST_OFFCPU] = "INSERT INTO offcpu (proc_id, tid, start_ns, end_ns, state, stack_id, "
		      "open) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
	[ST_OFFCPU_STATUS] = "UPDATE processes SET offcpu = ?2, offcpu_detail = ?3 "
			     "WHERE proc_id = ?1",
	[ST_GPU_WINDOW] = "INSERT INTO gpu_windows (proc_id, start_ns, end_ns, calls, whole) "
			  "VALUES (?1, ?2, ?3, ?4, ?5)",
	[ST_HEAP_TOTALS] = "INSERT OR REPLACE INTO heap_totals (proc_id, final, allocs, "
			   "alloc_bytes, frees, freed_bytes, live_count, live_bytes, "
			   "peak_bytes, peak_count, peak_ns, temp_count, temp_bytes, "
			   "short_ns, short_count, short_bytes, row_ns, point_allocs, late_events, "
			   "late_steps) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, "
			   "?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)",
	[ST_HEAP_SITE] = "INSERT OR REPLACE INTO heap_sites (proc_id, stack_id, pystack_id, "
			 "allocs, alloc_bytes, frees, freed_bytes, live_count, live_bytes, "
			 "peak_count, peak_bytes, temp_count, temp_bytes, short_count, "
			 "short_bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, "
			 "?11, ?12, ?13, ?14, ?15)",
	[ST_HEAP_HIST] = "INSERT OR REPLACE INTO heap_histograms (proc_id, stack_id, "
			 "pystack_id, kind, bucket, count, bytes) "
			 "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
	[ST_HEAP_CALL] = "INSERT OR REPLACE INTO heap_calls (proc_id, fn_id, side, timed, "
			 "total_ns, m2, min_ns, max_ns) "
			 "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
	[ST_HEAP_TL_CLEAR] = "DELETE FROM heap_timeline WHERE proc_id = ?1",
	[ST_HEAP_SERIES_CLEAR] = "DELETE FROM heap_series WHERE proc_id = ?1",
	[ST_HEAP_POINTS_CLEAR] = "DELETE FROM heap_points WHERE proc_id = ?1",
	[ST_HEAP_POINT] = "INSERT INTO heap_points (proc_id, idx, ns) VALUES (?1, ?2, ?3)",
	[ST_HEAP_SERIES] = "INSERT INTO heap_series (proc_id, stack_id, pystack_id, kind, idx, "
			   "bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
	[ST_HEAP_STEP] = "INSERT OR REPLACE INTO heap_steps (proc_id, idx, ns, range_id) "
			 "VALUES (?1, ?2, ?3, ?4)",
	[ST_HEAP_TL] = "INSERT INTO heap_timeline (proc_id, start_ns, end_ns, min_bytes, "
		       "max_bytes, end_bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
	/* When the last batch was committed: where a process's recording ends
	 * if this collector dies (store_recover()). */
	[ST_LAST_COMMIT] = "INSERT OR REPLACE INTO meta (key, value) VALUES ('last_commit_ns', ?1)",
};

/* An allocations row not yet written, with its free if one came. */
struct pending {
	struct store_alloc a;
	int freed;
	uint16_t free_fn;
	uint32_t free_tid;
	int64_t free_ns, free_end_ns;
};

struct store {
	sqlite3 *db;
	sqlite3_stmt *st[ST_N];
	int in_tx;
	/* Rows pend_base .. pend_base + npend - 1 wait in pend; next_id is
	 * the id the next allocations row gets (valid inside a batch). */
	struct pending *pend;
	uint32_t npend, pend_cap;
	int64_t pend_base, next_id;
	int broken; /* 0 or the negative errno every call now returns */
	int lock_fd; /* flock()ed shared while we have the store open */
	int sole;    /* no other collector had it open when we opened it */
	char *path;
};

/* Logs the failure, rolls the batch back and breaks the store. */
static int fail(struct store *s, int rc)
{
	int err = rc == SQLITE_FULL ? -ENOSPC
		  : (rc & 0xff) == SQLITE_IOERR ? -EIO
		  : rc == SQLITE_NOMEM ? -ENOMEM : -EPROTO;

	log_error("cannot write %s: %s; the batch in progress was rolled back, "
		  "every earlier batch is intact", s->path, sqlite3_errmsg(s->db));
	if (!sqlite3_get_autocommit(s->db))
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	s->in_tx = 0;
	s->npend = 0;
	s->broken = err;
	return err;
}

static int step(struct store *s, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	sqlite3_reset(st);
	return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : fail(s, rc);
}

/* Every write calls this first: it joins the batch or opens one, and then
 * learns the next allocations id under the write lock. */
static int tx(struct store *s)
{
	sqlite3_stmt *st = s->st[ST_ALLOC_MAX];
	int err, rc;

	if (s->broken || s->in_tx)
		return s->broken;
	err = step(s, s->st[ST_BEGIN]);
	if (err)
		return err;
	s->in_tx = 1;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		s->next_id = sqlite3_column_int64(st, 0) + 1;
	sqlite3_reset(st);
	if (rc != SQLITE_ROW)
		return fail(s, rc);
	s->pend_base = s->next_id;
	s->npend = 0;
	return 0;
}

/* 0 means "none" on the wire for these. */
static void bind_nonzero(sqlite3_stmt *st, int i, int64_t v)
{
	if (v)
		sqlite3_bind_int64(st, i, v);
	else
		sqlite3_bind_null(st, i);
}

/* Binds pending row p as the row whose first value is ?base. */
static void bind_alloc(sqlite3_stmt *st, int base, int64_t id, const struct pending *p)
{
	const struct store_alloc *a = &p->a;

	sqlite3_bind_int64(st, base, id);
	sqlite3_bind_int64(st, base + 1, a->proc_id);
	sqlite3_bind_text(st, base + 2, a->space, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, base + 3, a->device);
	sqlite3_bind_int64(st, base + 4, (int64_t)a->ptr);
	sqlite3_bind_int64(st, base + 5, (int64_t)a->size);
	sqlite3_bind_int(st, base + 6, a->sampled);
	sqlite3_bind_double(st, base + 7, a->weight);
	sqlite3_bind_int(st, base + 8, a->fn);
	sqlite3_bind_int64(st, base + 9, a->tid);
	sqlite3_bind_int64(st, base + 10, a->ns);
	if (a->end_ns >= 0)
		sqlite3_bind_int64(st, base + 11, a->end_ns);
	else
		sqlite3_bind_null(st, base + 11);
	if (p->freed) {
		sqlite3_bind_int(st, base + 12, p->free_fn);
		sqlite3_bind_int64(st, base + 13, p->free_tid);
		sqlite3_bind_int64(st, base + 14, p->free_ns);
	} else {
		sqlite3_bind_null(st, base + 12);
		sqlite3_bind_null(st, base + 13);
		sqlite3_bind_null(st, base + 14);
	}
	if (p->freed && p->free_end_ns >= 0)
		sqlite3_bind_int64(st, base + 15, p->free_end_ns);
	else
		sqlite3_bind_null(st, base + 15);
	bind_nonzero(st, base + 16, a->stack_id);
	bind_nonzero(st, base + 17, a->pystack_id);
}

/* Writes the pending allocations rows, in id order: ALLOC_ROWS at a time,
 * then the rest one by one. */
static int flush_pending(struct store *s)
{
	uint32_t i = 0;
	int err = 0;

	for (; !err && s->npend - i >= ALLOC_ROWS; i += ALLOC_ROWS) {
		for (uint32_t k = 0; k < ALLOC_ROWS; k++)
			bind_alloc(s->st[ST_ALLOC_N], 1 + (int)k * ALLOC_COLS,
				   s->pend_base + i + k, &s->pend[i + k]);
		err = step(s, s->st[ST_ALLOC_N]);
	}
	for (; !err && i < s->npend; i++) {
		bind_alloc(s->st[ST_ALLOC], 1, s->pend_base + i, &s->pend[i]);
		err = step(s, s->st[ST_ALLOC]);
	}
	if (err)
		return err;
	s->npend = 0;
	s->pend_base = s->next_id;
	return 0;
}

static void (*commit_hook)(void *ctx, struct store *s);
static void *commit_ctx;

void store_on_commit(void (*fn)(void *ctx, struct store *s), void *ctx)
{
	commit_hook = fn;
	commit_ctx = ctx;
}

int store_commit(struct store *s)
{
	int err;

	if (s->broken || !s->in_tx)
		return s->broken;
	err = flush_pending(s);
	if (!err) {
		sqlite3_bind_int64(s->st[ST_LAST_COMMIT], 1, (int64_t)clock_ns(CLOCK_MONOTONIC));
		err = step(s, s->st[ST_LAST_COMMIT]);
	}
	if (!err)
		err = step(s, s->st[ST_COMMIT]);
	if (!err) {
		s->in_tx = 0;
		if (commit_hook)
			commit_hook(commit_ctx, s);
	}
	return err;
}

static void bind_text(sqlite3_stmt *st, int i, const char *text, size_t len)
{
	if (text)
		sqlite3_bind_text(st, i, text, (int)len, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, i);
}

int store_process_add(struct store *s, const struct store_proc *p, int64_t *proc_id)
{
	sqlite3_stmt *st = s->st[ST_PROC];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, p->pid);
	sqlite3_bind_int64(st, 2, p->ppid);
	if (p->parent_proc_id)
		sqlite3_bind_int64(st, 3, p->parent_proc_id);
	else
		sqlite3_bind_null(st, 3);
	sqlite3_bind_int64(st, 4, p->uid);
	bind_text(st, 5, p->host, p->host_len);
	bind_text(st, 6, p->exe, p->exe_len);
	bind_text(st, 7, p->argv_json, p->argv_json_len);
	if (p->rank == SHM_NO_RANK)
		sqlite3_bind_null(st, 8);
	else
		sqlite3_bind_int(st, 8, p->rank);
	if (p->local_rank == SHM_NO_RANK)
		sqlite3_bind_null(st, 9);
	else
		sqlite3_bind_int(st, 9, p->local_rank);
	sqlite3_bind_text(st, 10, p->malloc_mode, -1, SQLITE_STATIC);
	if (p->sample_bytes >= 0)
		sqlite3_bind_int64(st, 11, p->sample_bytes);
	else
		sqlite3_bind_null(st, 11);
	sqlite3_bind_int(st, 12, p->lossless);
	sqlite3_bind_int64(st, 13, p->start_wall_ns);
	sqlite3_bind_int64(st, 14, p->start_ns);
	sqlite3_bind_text(st, 15, p->traced_by ? p->traced_by : "preload", -1, SQLITE_STATIC);
	if (p->argv_bytes > 0)
		sqlite3_bind_int64(st, 16, p->argv_bytes);
	else
		sqlite3_bind_null(st, 16);
	err = step(s, st);
	if (!err)
		*proc_id = sqlite3_last_insert_rowid(s->db);
	return err;
}

int store_process_end(struct store *s, int64_t proc_id, int64_t end_ns,
		      const char *reason, int signo)
{
	sqlite3_stmt *st = s->st[ST_PROC_END];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int64(st, 2, end_ns);
	sqlite3_bind_text(st, 3, reason, -1, SQLITE_STATIC);
	if (signo)
		sqlite3_bind_int(st, 4, signo);
	else
		sqlite3_bind_null(st, 4);
	return step(s, st);
}

int store_process_exit_cpu(struct store *s, int64_t proc_id, int64_t cpu_ns, int64_t user_ns,
			   int64_t sys_ns)
{
	sqlite3_stmt *st = s->st[ST_PROC_CPU];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int64(st, 2, cpu_ns);
	sqlite3_bind_int64(st, 3, user_ns);
	sqlite3_bind_int64(st, 4, sys_ns);
	return step(s, st);
}

/*
 * A collector that dies (SIGKILL, a crash, power) leaves its live
 * processes with no end.  Only when no other collector has the store open
 * (sole: our flock() was the only one) are such rows its leftovers: they
 * end as 'collector_lost' at the last commit (meta.last_commit_ns; what
 * came after it was never stored), never before they started.
 */
int store_recover(struct store *s, unsigned *lost)
{
	sqlite3_stmt *st = NULL;
	int rc, err;

	*lost = 0;
	if (!s->sole)
		return 0;
	err = tx(s);
	if (err)
		return err;
	rc = sqlite3_prepare_v2(s->db, LOST_END_SQL, -1, &st, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return fail(s, rc);
	*lost = (unsigned)sqlite3_changes(s->db);
	return store_commit(s);
}

int store_each_lost(struct store *s,
		    int (*fn)(void *ctx, const struct store_lost *l), void *ctx)
{
	sqlite3_stmt *st = NULL;
	int rc, err = 0;

	if (s->broken)
		return s->broken;
	rc = sqlite3_prepare_v2(s->db, "SELECT pid, uid, hostname, start_ns FROM processes "
				"WHERE end_reason = 'collector_lost' AND start_ns IS NOT NULL",
				-1, &st, NULL);
	while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct store_lost l = {
			.pid = (uint32_t)sqlite3_column_int64(st, 0),
			.uid = (uint32_t)sqlite3_column_int64(st, 1),
			.host = (const char *)sqlite3_column_text(st, 2),
			.start_ns = sqlite3_column_int64(st, 3),
		};

		if (!l.host)
			l.host = "";
		if ((err = fn(ctx, &l)))
			break;
		rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	if (err)
		return err;
	return rc == SQLITE_DONE ? 0 : fail(s, rc);
}

int store_process_find(struct store *s, uint32_t pid, uint32_t uid, const char *host,
		       size_t host_len, int64_t *proc_id)
{
	sqlite3_stmt *st = s->st[ST_PROC_FIND];
	int rc;

	if (s->broken)
		return s->broken;
	sqlite3_bind_int64(st, 1, pid);
	sqlite3_bind_text(st, 2, host, (int)host_len, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, uid);
	rc = sqlite3_step(st);
	*proc_id = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
	sqlite3_reset(st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : fail(s, rc);
}

int store_process_exec(struct store *s, uint32_t pid, uint32_t uid, const char *host,
		       size_t host_len, int64_t since_ns, int64_t next_ns)
{
	sqlite3_stmt *st = s->st[ST_PROC_EXEC];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, pid);
	sqlite3_bind_text(st, 2, host, (int)host_len, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, since_ns);
	sqlite3_bind_int64(st, 4, uid);
	sqlite3_bind_int64(st, 5, next_ns);
	return step(s, st);
}

int store_process_resume(struct store *s, uint32_t pid, uint32_t uid, const char *host,
			 size_t host_len, int64_t start_ns, int64_t *proc_id)
{
	sqlite3_stmt *st = s->st[ST_PROC_RESUME];
	int err = tx(s), rc;

	*proc_id = 0;
	if (err)
		return err;
	sqlite3_bind_int64(st, 1, pid);
	sqlite3_bind_text(st, 2, host, (int)host_len, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, uid);
	sqlite3_bind_int64(st, 4, start_ns);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*proc_id = sqlite3_column_int64(st, 0);
		rc = sqlite3_step(st);
	}
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : fail(s, rc);
}

int store_thread_add(struct store *s, int64_t proc_id, uint32_t tid,
		     uint32_t name_id, int64_t first_ns)
{
	sqlite3_stmt *st = s->st[ST_THREAD];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int64(st, 2, tid);
	sqlite3_bind_int64(st, 3, name_id);
	sqlite3_bind_int64(st, 4, first_ns);
	return step(s, st);
}

int store_string_add(struct store *s, int64_t proc_id, uint32_t id,
		     const char *text, size_t len, const char *demangled)
{
	sqlite3_stmt *st = s->st[ST_STRING];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int64(st, 2, id);
	/* Never NULL: an empty string is still a string. */
	sqlite3_bind_text(st, 3, text ? text : "", (int)len, SQLITE_STATIC);
	bind_text(st, 4, demangled, demangled ? strlen(demangled) : 0);
	return step(s, st);
}

int store_process_gpu_status(struct store *s, int64_t proc_id, uint32_t status,
			     const char *detail, size_t len)
{
	static const char *const names[] = {
		[SHM_GPU_ACTIVE] = "active", [SHM_GPU_NO_CUPTI] = "no_cupti",
		[SHM_GPU_BUSY] = "busy", [SHM_GPU_ERROR] = "error",
		[SHM_GPU_DISABLED] = "disabled", [SHM_GPU_ATTACHED] = "attached",
	};
	sqlite3_stmt *st = s->st[ST_GPU_STATUS];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, proc_id);
	if (status >= sizeof(names) / sizeof(names[0]) || !names[status])
		return -EINVAL;
	sqlite3_bind_text(st, 2, names[status], -1, SQLITE_STATIC);
	bind_text(st, 3, detail, len);
	return step(s, st);
}

int store_process_gpu_sampled(struct store *s, int64_t proc_id, int64_t since_ns)
{
	sqlite3_stmt *st = s->st[ST_GPU_SAMPLED];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int64(st, 2, since_ns);
	return step(s, st);
}

int store_cuda_add(struct store *s, int64_t proc_id, uint32_t tid,
		   const struct shm_rec_cuda *r, int64_t start_ns, int64_t end_ns)
{
	sqlite3_stmt *st = s->st[ST_CUDA];
	unsigned flags = shm_fn_info[r->hdr.fn].flags;
	int has_kind = (flags & SHM_FNF_COPY) || r->hdr.fn == SHM_FN_CUDA_STREAM_WAIT_EVENT;
	int has_dims = (flags & SHM_FNF_LAUNCH) && r->hdr.fn != SHM_FN_CUDA_GRAPH_LAUNCH;
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int64(st, 2, tid);
	sqlite3_bind_int(st, 3, r->hdr.fn);
	sqlite3_bind_int64(st, 4, start_ns);
	sqlite3_bind_int64(st, 5, end_ns);
	sqlite3_bind_int(st, 6, r->ret);
	if (r->device >= 0)
		sqlite3_bind_int(st, 7, r->device);
	else
		sqlite3_bind_null(st, 7);
	sqlite3_bind_int64(st, 8, (int64_t)r->ptr);
	sqlite3_bind_int64(st, 9, (int64_t)r->bytes);
	sqlite3_bind_int64(st, 10, (int64_t)r->stream);
	if (has_kind)
		sqlite3_bind_int64(st, 11, r->kind);
	else
		sqlite3_bind_null(st, 11);
	sqlite3_bind_int64(st, 12, (int64_t)r->aux);
	sqlite3_bind_int64(st, 13, (int64_t)r->aux2);
	for (int i = 0; i < 3; i++) {
		if (has_dims) {
			sqlite3_bind_int64(st, 14 + i, r->grid[i]);
			sqlite3_bind_int64(st, 17 + i, r->block[i]);
		} else {
			sqlite3_bind_null(st, 14 + i);
			sqlite3_bind_null(st, 17 + i);
		}
	}
	sqlite3_bind_int(st, 20, !!(r->hdr.flags & SHM_F_PTSZ));
	/* an allocation's stacks go with its allocations row */
	bind_nonzero(st, 21, flags & SHM_FNF_ALLOC ? 0 : r->stack_id);
	bind_nonzero(st, 22, flags & SHM_FNF_ALLOC ? 0 : r->pystack_id);
	return step(s, st);
}

int store_alloc_add(struct store *s, const struct store_alloc *a, int64_t *id)
{
	int err = tx(s);

	if (err)
		return err;
	if (s->npend == PEND_MAX && (err = flush_pending(s)))
		return err;
	if (s->npend == s->pend_cap) {
		uint32_t cap = s->pend_cap ? s->pend_cap * 2 : 1024;
		struct pending *grown = realloc(s->pend, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		s->pend = grown;
		s->pend_cap = cap;
	}
	s->pend[s->npend++] = (struct pending){ .a = *a };
	*id = s->next_id++;
	return 0;
}

int store_alloc_free(struct store *s, int64_t id, uint16_t fn, uint32_t tid,
		     int64_t ns, int64_t end_ns)
{
	sqlite3_stmt *st = s->st[ST_FREE];
	int err = tx(s);

	if (err)
		return err;
	if (id >= s->pend_base && id - s->pend_base < s->npend) {
		struct pending *p = &s->pend[id - s->pend_base];

		p->freed = 1;
		p->free_fn = fn;
		p->free_tid = tid;
		p->free_ns = ns;
		p->free_end_ns = end_ns;
		return 0;
	}
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int(st, 2, fn);
	sqlite3_bind_int64(st, 3, tid);
	sqlite3_bind_int64(st, 4, ns);
	if (end_ns >= 0)
		sqlite3_bind_int64(st, 5, end_ns);
	else
		sqlite3_bind_null(st, 5);
	return step(s, st);
}

/* ---- the aggregated heap ---- */

static void bind_int64s(sqlite3_stmt *st, int first, const int64_t *v, int n)
{
	for (int i = 0; i < n; i++)
		sqlite3_bind_int64(st, first + i, v[i]);
}

int store_heap_totals(struct store *s, const struct store_heap_totals *t)
{
	sqlite3_stmt *st = s->st[ST_HEAP_TOTALS];
	const int64_t a[] = { t->allocs, t->alloc_bytes, t->frees, t->freed_bytes,
			      t->live_count, t->live_bytes, t->peak_bytes, t->peak_count };
	const int64_t b[] = { t->temp_count, t->temp_bytes, t->short_ns, t->short_count,
			      t->short_bytes, t->row_ns, t->point_allocs, t->late_events,
			      t->late_steps };
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, t->proc_id);
	sqlite3_bind_int(st, 2, t->final);
	bind_int64s(st, 3, a, 8);
	if (t->peak_ns >= 0)
		sqlite3_bind_int64(st, 11, t->peak_ns);
	else
		sqlite3_bind_null(st, 11);
	bind_int64s(st, 12, b, 9);
	return step(s, st);
}

int store_heap_site(struct store *s, int64_t proc_id, const struct store_heap_site *site)
{
	sqlite3_stmt *st = s->st[ST_HEAP_SITE];
	const int64_t v[] = { site->allocs, site->alloc_bytes, site->frees, site->freed_bytes,
			      site->live_count, site->live_bytes, site->peak_count,
			      site->peak_bytes, site->temp_count, site->temp_bytes,
			      site->short_count, site->short_bytes };
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int64(st, 2, site->stack_id);
	sqlite3_bind_int64(st, 3, site->pystack_id);
	bind_int64s(st, 4, v, 12);
	return step(s, st);
}

int store_heap_hist(struct store *s, int64_t proc_id, uint32_t stack_id, uint32_t pystack_id,
		    const char *kind, uint32_t bucket, int64_t count, int64_t bytes)
{
	sqlite3_stmt *st = s->st[ST_HEAP_HIST];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int64(st, 2, stack_id);
	sqlite3_bind_int64(st, 3, pystack_id);
	sqlite3_bind_text(st, 4, kind, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 5, bucket);
	sqlite3_bind_int64(st, 6, count);
	sqlite3_bind_int64(st, 7, bytes);
	return step(s, st);
}

int store_heap_call(struct store *s, int64_t proc_id, uint16_t fn, const char *side,
		    int64_t timed, int64_t total_ns, double m2, int64_t min_ns,
		    int64_t max_ns)
{
	sqlite3_stmt *st = s->st[ST_HEAP_CALL];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int(st, 2, fn);
	sqlite3_bind_text(st, 3, side, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, timed);
	sqlite3_bind_int64(st, 5, total_ns);
	sqlite3_bind_double(st, 6, m2);
	sqlite3_bind_int64(st, 7, min_ns);
	sqlite3_bind_int64(st, 8, max_ns);
	return step(s, st);
}

int store_heap_clear(struct store *s, int64_t proc_id)
{
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(s->st[ST_HEAP_TL_CLEAR], 1, proc_id);
	err = step(s, s->st[ST_HEAP_TL_CLEAR]);
	if (err)
		return err;
	sqlite3_bind_int64(s->st[ST_HEAP_SERIES_CLEAR], 1, proc_id);
	err = step(s, s->st[ST_HEAP_SERIES_CLEAR]);
	if (err)
		return err;
	sqlite3_bind_int64(s->st[ST_HEAP_POINTS_CLEAR], 1, proc_id);
	return step(s, s->st[ST_HEAP_POINTS_CLEAR]);
}

int store_heap_point(struct store *s, int64_t proc_id, uint32_t idx, int64_t ns)
{
	sqlite3_stmt *st = s->st[ST_HEAP_POINT];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int64(st, 2, idx);
	sqlite3_bind_int64(st, 3, ns);
	return step(s, st);
}

int store_heap_series(struct store *s, int64_t proc_id, uint32_t stack_id, uint32_t pystack_id,
		      const char *kind, uint32_t idx, int64_t bytes)
{
	sqlite3_stmt *st = s->st[ST_HEAP_SERIES];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int64(st, 2, stack_id);
	sqlite3_bind_int64(st, 3, pystack_id);
	sqlite3_bind_text(st, 4, kind, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 5, idx);
	sqlite3_bind_int64(st, 6, bytes);
	return step(s, st);
}

int store_heap_step(struct store *s, int64_t proc_id, uint32_t idx, int64_t ns, int64_t range_id)
{
	sqlite3_stmt *st = s->st[ST_HEAP_STEP];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int64(st, 2, idx);
	sqlite3_bind_int64(st, 3, ns);
	bind_nonzero(st, 4, range_id);
	return step(s, st);
}

int store_heap_timeline(struct store *s, int64_t proc_id, int64_t start_ns, int64_t end_ns,
			int64_t min_bytes, int64_t max_bytes, int64_t end_bytes)
{
	sqlite3_stmt *st = s->st[ST_HEAP_TL];
	const int64_t v[] = { proc_id, start_ns, end_ns, min_bytes, max_bytes, end_bytes };
	int err = tx(s);

	if (err)
		return err;
	bind_int64s(st, 1, v, 6);
	return step(s, st);
}

/*
 * CUPTI's enums, by value.  The values are CUPTI's ABI, so they are written
 * here and the collector builds without the CUDA toolkit; where the toolkit
 * is installed the build checks them against cupti_activity.h.  A value
 * from a newer CUPTI that this table lacks is stored as 'unknown', never
 * refused: the record is otherwise fine.
 */
static const char *const copy_kinds[] = {
	[1] = "HtoD", [2] = "DtoH", [3] = "HtoA", [4] = "AtoH", [5] = "AtoA",
	[6] = "AtoD", [7] = "DtoA", [8] = "DtoD", [9] = "HtoH", [10] = "PtoP",
};
static const char *const mem_kinds[] = {
	[1] = "pageable", [2] = "pinned", [3] = "device", [4] = "array",
	[5] = "managed", [6] = "device_static", [7] = "managed_static",
};
static const char *const sync_types[] = {
	[1] = "event", [2] = "stream_wait_event", [3] = "stream", [4] = "context",
};
#define SYNC_INVALID 0xffffffffu /* CUPTI_SYNCHRONIZATION_INVALID_VALUE */

#if defined(__has_include)
#if __has_include(<cupti_activity.h>)
#include <cupti_activity.h>
_Static_assert(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD == 1 && CUPTI_ACTIVITY_MEMCPY_KIND_DTOH == 2 &&
	       CUPTI_ACTIVITY_MEMCPY_KIND_HTOA == 3 && CUPTI_ACTIVITY_MEMCPY_KIND_ATOH == 4 &&
	       CUPTI_ACTIVITY_MEMCPY_KIND_ATOA == 5 && CUPTI_ACTIVITY_MEMCPY_KIND_ATOD == 6 &&
	       CUPTI_ACTIVITY_MEMCPY_KIND_DTOA == 7 && CUPTI_ACTIVITY_MEMCPY_KIND_DTOD == 8 &&
	       CUPTI_ACTIVITY_MEMCPY_KIND_HTOH == 9 && CUPTI_ACTIVITY_MEMCPY_KIND_PTOP == 10,
	       "CUpti_ActivityMemcpyKind");
_Static_assert(CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE == 1 && CUPTI_ACTIVITY_MEMORY_KIND_PINNED == 2 &&
	       CUPTI_ACTIVITY_MEMORY_KIND_DEVICE == 3 && CUPTI_ACTIVITY_MEMORY_KIND_ARRAY == 4 &&
	       CUPTI_ACTIVITY_MEMORY_KIND_MANAGED == 5 &&
	       CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC == 6 &&
	       CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC == 7, "CUpti_ActivityMemoryKind");
_Static_assert(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE == 1 &&
	       CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT == 2 &&
	       CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE == 3 &&
	       CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE == 4 &&
	       CUPTI_SYNCHRONIZATION_INVALID_VALUE == SYNC_INVALID,
	       "CUpti_ActivitySynchronizationType");
#endif
#endif

#define ENUM_NAME(table, v)                                                  \
	((v) < sizeof(table) / sizeof(table[0]) && table[v] ? table[v] : "unknown")

int store_kernel_add(struct store *s, int64_t proc_id, const struct shm_rec_kernel *r,
		     int64_t start_ns, int64_t end_ns)
{
	sqlite3_stmt *st = s->st[ST_KERNEL];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int(st, 2, r->device);
	sqlite3_bind_int64(st, 3, r->context);
	sqlite3_bind_int64(st, 4, r->stream);
	sqlite3_bind_int64(st, 5, r->correlation);
	sqlite3_bind_int64(st, 6, r->name_id);
	sqlite3_bind_int64(st, 7, start_ns);
	sqlite3_bind_int64(st, 8, end_ns);
	for (int i = 0; i < 3; i++) {
		sqlite3_bind_int64(st, 9 + i, r->grid[i]);
		sqlite3_bind_int64(st, 12 + i, r->block[i]);
	}
	sqlite3_bind_int64(st, 15, r->registers);
	sqlite3_bind_int64(st, 16, r->static_smem);
	sqlite3_bind_int64(st, 17, r->dynamic_smem);
	if (r->graph_id)
		sqlite3_bind_int64(st, 18, r->graph_id);
	else
		sqlite3_bind_null(st, 18);
	return step(s, st);
}

/* The columns memcpy and memset rows share; the caller binds 10 to 14. */
static void bind_copy(sqlite3_stmt *st, int64_t proc_id, const char *op, int32_t device,
		      uint32_t context, uint32_t stream, uint64_t correlation,
		      int64_t start_ns, int64_t end_ns, uint64_t bytes)
{
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_text(st, 2, op, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 3, device);
	sqlite3_bind_int64(st, 4, context);
	sqlite3_bind_int64(st, 5, stream);
	sqlite3_bind_int64(st, 6, correlation);
	sqlite3_bind_int64(st, 7, start_ns);
	sqlite3_bind_int64(st, 8, end_ns);
	sqlite3_bind_int64(st, 9, (int64_t)bytes);
}

int store_memcpy_add(struct store *s, int64_t proc_id, const struct shm_rec_memcpy *r,
		     int64_t start_ns, int64_t end_ns)
{
	sqlite3_stmt *st = s->st[ST_COPY];
	int err = tx(s);

	if (err)
		return err;
	bind_copy(st, proc_id, "memcpy", r->device, r->context, r->stream, r->correlation,
		  start_ns, end_ns, r->bytes);
	sqlite3_bind_text(st, 10, ENUM_NAME(copy_kinds, r->copy_kind), -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 11, ENUM_NAME(mem_kinds, r->src_kind), -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 12, ENUM_NAME(mem_kinds, r->dst_kind), -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 13, !!r->async);
	sqlite3_bind_null(st, 14);
	return step(s, st);
}

int store_memset_add(struct store *s, int64_t proc_id, const struct shm_rec_memset *r,
		     int64_t start_ns, int64_t end_ns)
{
	sqlite3_stmt *st = s->st[ST_COPY];
	int err = tx(s);

	if (err)
		return err;
	bind_copy(st, proc_id, "memset", r->device, r->context, r->stream, r->correlation,
		  start_ns, end_ns, r->bytes);
	sqlite3_bind_null(st, 10);
	sqlite3_bind_null(st, 11);
	sqlite3_bind_text(st, 12, ENUM_NAME(mem_kinds, r->mem_kind), -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 13, !!r->async);
	sqlite3_bind_int64(st, 14, r->value);
	return step(s, st);
}

int store_gpu_sync_add(struct store *s, int64_t proc_id, const struct shm_rec_gpu_sync *r,
		       int64_t start_ns, int64_t end_ns)
{
	sqlite3_stmt *st = s->st[ST_SYNC];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_text(st, 2, ENUM_NAME(sync_types, r->type), -1, SQLITE_STATIC);
	if (r->context != SYNC_INVALID)
		sqlite3_bind_int64(st, 3, r->context);
	else
		sqlite3_bind_null(st, 3);
	if (r->stream != SYNC_INVALID)
		sqlite3_bind_int64(st, 4, r->stream);
	else
		sqlite3_bind_null(st, 4);
	/* CUPTI's event id is 32-bit; its "none" may arrive widened either way. */
	if (r->event != SYNC_INVALID && r->event != UINT64_MAX)
		sqlite3_bind_int64(st, 5, (int64_t)r->event);
	else
		sqlite3_bind_null(st, 5);
	sqlite3_bind_int64(st, 6, r->correlation);
	sqlite3_bind_int64(st, 7, start_ns);
	sqlite3_bind_int64(st, 8, end_ns);
	return step(s, st);
}

int store_api_add(struct store *s, int64_t proc_id, uint32_t tid,
		  const struct shm_rec_api *r, int64_t start_ns, int64_t end_ns)
{
	sqlite3_stmt *st = s->st[ST_API];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int64(st, 2, tid);
	sqlite3_bind_text(st, 3, r->domain == SHM_API_DRIVER ? "driver" : "runtime", -1,
			  SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, r->name_id);
	sqlite3_bind_int64(st, 5, r->cbid);
	sqlite3_bind_int64(st, 6, r->correlation);
	sqlite3_bind_int64(st, 7, start_ns);
	sqlite3_bind_int64(st, 8, end_ns);
	bind_nonzero(st, 9, r->stack_id);
	bind_nonzero(st, 10, r->pystack_id);
	return step(s, st);
}

int store_range_open(struct store *s, int64_t proc_id, uint32_t tid, const char *kind,
		     const struct shm_rec_range *r, int64_t ns, uint32_t depth,
		     int64_t parent_id, int64_t *id)
{
	sqlite3_stmt *st = s->st[ST_RANGE];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int64(st, 2, tid);
	sqlite3_bind_text(st, 3, kind, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, r->domain_id);
	sqlite3_bind_int64(st, 5, r->name_id);
	sqlite3_bind_int64(st, 6, ns);
	sqlite3_bind_int64(st, 7, depth);
	bind_nonzero(st, 8, parent_id);
	bind_nonzero(st, 9, r->color);
	bind_nonzero(st, 10, r->category);
	err = step(s, st);
	if (!err)
		*id = sqlite3_last_insert_rowid(s->db);
	return err;
}

int store_range_close(struct store *s, int64_t id, int64_t end_ns)
{
	sqlite3_stmt *st = s->st[ST_RANGE_END];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int64(st, 2, end_ns);
	return step(s, st);
}

int store_gpu_window_add(struct store *s, int64_t proc_id, int64_t start_ns,
			 int64_t end_ns, uint64_t calls, int whole)
{
	sqlite3_stmt *st = s->st[ST_GPU_WINDOW];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int64(st, 2, start_ns);
	sqlite3_bind_int64(st, 3, end_ns);
	sqlite3_bind_int64(st, 4, (sqlite3_int64)calls);
	sqlite3_bind_int(st, 5, whole != 0);
	return step(s, st);
}

int store_offcpu_add(struct store *s, int64_t proc_id, uint32_t tid,
		     const struct shm_rec_offcpu *r, int64_t start_ns, int64_t end_ns)
{
	static const char *const states[] = {
		[SHM_OFFCPU_PREEMPTED] = "preempted", [SHM_OFFCPU_SLEEP] = "sleep",
		[SHM_OFFCPU_DISK] = "disk", [SHM_OFFCPU_OTHER] = "other",
	};
	sqlite3_stmt *st = s->st[ST_OFFCPU];
	int err = tx(s);

	if (err)
		return err;
	if (r->state >= sizeof(states) / sizeof(states[0]) || !states[r->state])
		return -EINVAL;
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int64(st, 2, tid);
	sqlite3_bind_int64(st, 3, start_ns);
	sqlite3_bind_int64(st, 4, end_ns);
	sqlite3_bind_text(st, 5, states[r->state], -1, SQLITE_STATIC);
	if (r->stack_id)
		sqlite3_bind_int64(st, 6, r->stack_id);
	else
		sqlite3_bind_null(st, 6);
	sqlite3_bind_int(st, 7, !!(r->hdr.flags & SHM_F_OPEN));
	return step(s, st);
}

int store_process_offcpu(struct store *s, int64_t proc_id, int traced, const char *detail)
{
	sqlite3_stmt *st = s->st[ST_OFFCPU_STATUS];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_text(st, 2, traced ? "traced" : "unavailable", -1, SQLITE_STATIC);
	bind_text(st, 3, detail, detail ? strlen(detail) : 0);
	return step(s, st);
}

/* The columns markers and counters share: who, what and when. */
static void bind_instant(sqlite3_stmt *st, int64_t proc_id, uint32_t tid,
			 uint32_t domain_id, uint32_t name_id, int64_t ns)
{
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int64(st, 2, tid);
	sqlite3_bind_int64(st, 3, domain_id);
	sqlite3_bind_int64(st, 4, name_id);
	sqlite3_bind_int64(st, 5, ns);
}

int store_mark_add(struct store *s, int64_t proc_id, uint32_t tid,
		   const struct shm_rec_mark *r, int64_t ns)
{
	sqlite3_stmt *st = s->st[ST_MARK];
	int err = tx(s);

	if (err)
		return err;
	bind_instant(st, proc_id, tid, r->domain_id, r->name_id, ns);
	return step(s, st);
}

int store_counter_add(struct store *s, int64_t proc_id, uint32_t tid,
		      const struct shm_rec_counter *r, int64_t ns)
{
	sqlite3_stmt *st = s->st[ST_COUNTER];
	int err = tx(s);

	if (err)
		return err;
	bind_instant(st, proc_id, tid, r->domain_id, r->name_id, ns);
	/* SQLite would bind NaN as NULL itself; say so rather than rely on it. */
	if (r->value == r->value)
		sqlite3_bind_double(st, 6, r->value);
	else
		sqlite3_bind_null(st, 6);
	return step(s, st);
}

/* Opens the batch and, unless stack id of the process already has
 * frames (statement `has`; *known is then 1), binds proc_id and the id as
 * ?1 and ?2 of the frame statement st (if any). */
static int stack_begin(struct store *s, sqlite3_stmt *has, sqlite3_stmt *st,
		       int64_t proc_id, uint32_t stack_id, int *known)
{
	int rc, err = tx(s);

	*known = 0;
	if (err)
		return err;
	sqlite3_bind_int64(has, 1, proc_id);
	sqlite3_bind_int64(has, 2, stack_id);
	rc = sqlite3_step(has);
	sqlite3_reset(has);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return fail(s, rc);
	*known = rc == SQLITE_ROW;
	if (st) {
		sqlite3_bind_int64(st, 1, proc_id);
		sqlite3_bind_int64(st, 2, stack_id);
	}
	return 0;
}

/* The node of pc called from parent in t, made (a stack_nodes row) when t
 * does not remember one. */
static int stack_node(struct store *s, int64_t proc_id, struct stacktree *t, uint32_t parent,
		      uint64_t pc, uint32_t *node)
{
	sqlite3_stmt *st = s->st[ST_STACK];
	int err;

	*node = stacktree_find(t, parent, pc);
	if (*node)
		return 0;
	if (t->next == UINT32_MAX)
		return -EOVERFLOW;
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int64(st, 2, t->next);
	sqlite3_bind_int64(st, 3, parent);
	sqlite3_bind_int64(st, 4, (int64_t)pc);
	err = step(s, st);
	if (!err)
		err = stacktree_remember(t, parent, pc, t->next);
	if (!err)
		*node = t->next++;
	return err;
}

/* Numbers t's new nodes after those the process already has in the
 * store (a process stored again, or by an earlier collector). */
static int stack_tree_start(struct store *s, int64_t proc_id, struct stacktree *t)
{
	sqlite3_stmt *st = s->st[ST_STACK_TOP];
	int64_t top = 0;
	int rc;

	sqlite3_bind_int64(st, 1, proc_id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		top = sqlite3_column_int64(st, 0);
	sqlite3_reset(st);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return fail(s, rc);
	if (top < 0 || top >= UINT32_MAX)
		return -EOVERFLOW;
	t->next = (uint32_t)top + 1;
	return 0;
}

int store_stack_add(struct store *s, int64_t proc_id, struct stacktree *t, uint32_t stack_id,
		    const uint64_t *pc, uint32_t depth)
{
	sqlite3_stmt *leaf = s->st[ST_STACK_LEAF];
	uint32_t node = 0;
	int known, err = stack_begin(s, s->st[ST_STACK_HAS], NULL, proc_id, stack_id, &known);

	if (err || known || !depth)
		return err;
	if (!t->next)
		err = stack_tree_start(s, proc_id, t);
	/* From the outermost frame in: each frame's node is a child of its
	 * caller's. */
	for (uint32_t i = depth; !err && i-- > 0;)
		err = stack_node(s, proc_id, t, node, pc[i], &node);
	if (err)
		return err;
	sqlite3_bind_int64(leaf, 1, proc_id);
	sqlite3_bind_int64(leaf, 2, stack_id);
	sqlite3_bind_int64(leaf, 3, node);
	return step(s, leaf);
}

int store_pystack_add(struct store *s, int64_t proc_id, uint32_t stack_id,
		      const struct shm_pyframe *frames, uint32_t depth)
{
	sqlite3_stmt *st = s->st[ST_PYSTACK];
	int known, err = stack_begin(s, s->st[ST_PYSTACK_HAS], st, proc_id, stack_id, &known);

	for (uint32_t i = 0; !err && !known && i < depth; i++) {
		sqlite3_bind_int64(st, 3, i);
		sqlite3_bind_int64(st, 4, frames[i].file_id);
		sqlite3_bind_int64(st, 5, frames[i].func_id);
		sqlite3_bind_int64(st, 6, frames[i].line);
		err = step(s, st);
	}
	return err;
}

int store_module_add(struct store *s, int64_t proc_id, const struct shm_rec_module *r,
		     int64_t ns)
{
	static const char hex[] = "0123456789abcdef";
	char id[2 * sizeof(r->build_id)];
	sqlite3_stmt *st = s->st[r->unload ? ST_MODULE_END : ST_MODULE];
	size_t n = r->build_id_len < sizeof(r->build_id) ? r->build_id_len : sizeof(r->build_id);
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int64(st, 2, r->path_id);
	if (r->unload) {
		sqlite3_bind_int64(st, 3, (int64_t)r->lo);
		sqlite3_bind_int64(st, 4, ns);
		return step(s, st);
	}
	for (size_t i = 0; i < n; i++) {
		id[2 * i] = hex[r->build_id[i] >> 4];
		id[2 * i + 1] = hex[r->build_id[i] & 0xf];
	}
	sqlite3_bind_int64(st, 3, (int64_t)r->bias);
	sqlite3_bind_int64(st, 4, (int64_t)r->lo);
	sqlite3_bind_int64(st, 5, (int64_t)r->hi);
	if (n)
		sqlite3_bind_text(st, 6, id, (int)(2 * n), SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, 6);
	sqlite3_bind_int64(st, 7, ns);
	return step(s, st);
}

int store_count_add(struct store *s, int64_t proc_id, uint32_t tid, uint16_t fn,
		    uint64_t count, uint64_t bytes)
{
	sqlite3_stmt *st = s->st[ST_COUNT];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int64(st, 2, tid);
	sqlite3_bind_int(st, 3, fn);
	sqlite3_bind_int64(st, 4, (int64_t)count);
	sqlite3_bind_int64(st, 5, (int64_t)bytes);
	return step(s, st);
}

int store_drop_add(struct store *s, int64_t proc_id, uint32_t tid,
		   const char *reason, uint64_t events)
{
	sqlite3_stmt *st = s->st[ST_DROP];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int64(st, 2, tid);
	sqlite3_bind_text(st, 3, reason, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, (int64_t)events);
	return step(s, st);
}

int store_cpu_time_add(struct store *s, int64_t proc_id, uint32_t tid, int64_t ts_ns,
		       int64_t cpu_ns, int64_t wait_ns)
{
	sqlite3_stmt *st = s->st[ST_CPU_TIME];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int64(st, 2, tid);
	sqlite3_bind_int64(st, 3, ts_ns);
	sqlite3_bind_int64(st, 4, cpu_ns);
	if (wait_ns >= 0)
		sqlite3_bind_int64(st, 5, wait_ns);
	else
		sqlite3_bind_null(st, 5);
	return step(s, st);
}

/* One integer from query (0 when it gives no row); 0 or -EIO (logged). */
static int read_int(struct store *s, const char *query, int *out)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(s->db, query, -1, &st, NULL);

	*out = 0;
	if (rc == SQLITE_OK) {
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW)
			*out = sqlite3_column_int(st, 0);
		sqlite3_finalize(st);
	}
	if (rc == SQLITE_ROW || rc == SQLITE_DONE)
		return 0;
	log_error("cannot read %s: %s", s->path, sqlite3_errmsg(s->db));
	return -EIO;
}

/* The store's schema_version, 0 for a new (empty) file.  A database that
 * holds anything but is no shimmer store (no meta table, or no version in
 * it) is refused (-EEXIST, logged) before anything is written to it: it is
 * someone's data, not ours to add ~28 tables and views to.  Returns 0 or
 * a negative errno (logged). */
static int schema_version(struct store *s, int *version)
{
	int objects, has_meta, err;

	*version = 0;
	err = read_int(s, "SELECT count(*) FROM sqlite_master", &objects);
	if (!err && objects)
		err = read_int(s, "SELECT count(*) FROM sqlite_master WHERE type = 'table' "
			       "AND name = 'meta'", &has_meta);
	if (err || !objects)
		return err;
	if (has_meta)
		err = read_int(s, "SELECT value FROM meta WHERE key = 'schema_version'", version);
	if (!err && *version < 1) {
		log_error("%s is an SQLite database but not a shimmer store (%s): "
			  "refusing to write to it; give --db a new file or a store",
			  s->path, has_meta ? "no schema_version in its meta table"
					    : "it has no meta table");
		return -EEXIST;
	}
	return err;
}

/* Whether the build embedded one schema file per version; a mismatch is a
 * build defect, caught before any store is touched. */
static int check_steps(void)
{
	int n = 0;

	while (shimmer_schema_steps[n])
		n++;
	if (n == STORE_SCHEMA_VERSION)
		return 0;
	log_error("this shimmerd embeds %d schema files for schema version %d", n,
		  STORE_SCHEMA_VERSION);
	return -EPROTO;
}

/* A store newer than this daemon: its tables may mean what we cannot know. */
static int check_version(struct store *s, int version)
{
	if (version <= STORE_SCHEMA_VERSION)
		return 0;
	log_error("%s has schema version %d, newer than this shimmerd's (%d): "
		  "use a newer shimmerd or another --db", s->path, version,
		  STORE_SCHEMA_VERSION);
	return -EPROTO;
}

/* Applies schema files version + 1 .. STORE_SCHEMA_VERSION (the steps run
 * once each: 002 adds columns, which cannot be added twice) and records
 * the new version.  Inside the caller's transaction. */
static int migrate(struct store *s, int version)
{
	sqlite3_stmt *st;
	char version_text[16];
	int rc = SQLITE_OK;

	/* meta.value is text, as the schema files write it */
	snprintf(version_text, sizeof(version_text), "%d", STORE_SCHEMA_VERSION);
	for (int v = version; rc == SQLITE_OK && v < STORE_SCHEMA_VERSION; v++)
		rc = sqlite3_exec(s->db, shimmer_schema_steps[v], NULL, NULL, NULL);
	/* Each file records its version too; this makes sure of it. */
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(s->db, "INSERT OR REPLACE INTO meta (key, value) "
					"VALUES ('schema_version', ?1)", -1, &st, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_text(st, 1, version_text, -1, SQLITE_TRANSIENT);
		rc = sqlite3_step(st);
		sqlite3_finalize(st);
		if (rc == SQLITE_DONE)
			rc = SQLITE_OK;
	}
	return rc == SQLITE_OK ? 0 : fail(s, rc);
}

/* The functions table, from the wire format (it may have grown); gpu_work
 * is what the gpu_sampling view counts calls of. */
static int add_functions(struct store *s)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(s->db, "INSERT OR REPLACE INTO functions "
				    "(fn_id, name, family, gpu_work) VALUES (?1, ?2, ?3, ?4)",
				    -1, &st, NULL);

	for (int fn = 1; rc == SQLITE_OK && fn < SHM_FN_COUNT; fn++) {
		sqlite3_bind_int(st, 1, fn);
		sqlite3_bind_text(st, 2, shm_fn_info[fn].name, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 3, shm_fn_info[fn].family == SHM_FAMILY_HEAP ?
					 "heap" : "cuda", -1, SQLITE_STATIC);
		sqlite3_bind_int(st, 4, SHM_FN_STARTS_GPU_WORK(fn) ? 1 : 0);
		rc = sqlite3_step(st);
		sqlite3_reset(st);
		if (rc == SQLITE_DONE)
			rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	return rc == SQLITE_OK ? 0 : fail(s, rc);
}

/* ST_ALLOC_N's text: ST_ALLOC's with ALLOC_ROWS rows of values. */
static char *alloc_n_text(void)
{
	static const char row[] = ", (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
	size_t head = strlen(sql[ST_ALLOC]);
	char *text = malloc(head + (ALLOC_ROWS - 1) * (sizeof(row) - 1) + 1);
	char *p = text;

	_Static_assert(sizeof(row) - 1 == 2 + 3 * ALLOC_COLS, "one ? per column");
	if (!text)
		return NULL;
	memcpy(p, sql[ST_ALLOC], head);
	p += head;
	for (int i = 1; i < ALLOC_ROWS; i++, p += sizeof(row) - 1)
		memcpy(p, row, sizeof(row) - 1);
	*p = 0;
	return text;
}

/*
 * The indexes readers need (docs/schema.md): made when a recording closes,
 * never kept during ingest, where each would slow every insert.  A store
 * opened again to record more drops them first; meta 'indexed' = 1 tells
 * the tools they are there.
 */
static const char *const reader_indexes[][2] = {
	{ "kernels_proc_start", "kernels (proc_id, start_ns)" },
	{ "gpu_copies_proc_start", "gpu_copies (proc_id, start_ns)" },
	{ "gpu_api_proc_start", "gpu_api (proc_id, start_ns)" },
	{ "gpu_api_correlation", "gpu_api (proc_id, correlation)" },
	{ "cuda_calls_proc_start", "cuda_calls (proc_id, start_ns)" },
	{ "ranges_proc_start", "ranges (proc_id, start_ns)" },
	{ "ranges_thread", "ranges (proc_id, tid, start_ns)" },
	{ "markers_proc_ts", "markers (proc_id, ts_ns)" },
};

#define NINDEXES (sizeof(reader_indexes) / sizeof(reader_indexes[0]))

/* create: make them (at close) or drop them (at open), in the caller's
 * transaction or one of its own. */
static int reader_indexes_set(struct store *s, int create)
{
	char text[160];
	int rc = SQLITE_OK;

	for (size_t i = 0; rc == SQLITE_OK && i < NINDEXES; i++) {
		if (create)
			snprintf(text, sizeof(text), "CREATE INDEX IF NOT EXISTS %s ON %s",
				 reader_indexes[i][0], reader_indexes[i][1]);
		else
			snprintf(text, sizeof(text), "DROP INDEX IF EXISTS %s", reader_indexes[i][0]);
		rc = sqlite3_exec(s->db, text, NULL, NULL, NULL);
	}
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(s->db, create ? "INSERT OR REPLACE INTO meta (key, value) "
					"VALUES ('indexed', '1')"
				       : "DELETE FROM meta WHERE key = 'indexed'",
				  NULL, NULL, NULL);
	return rc == SQLITE_OK ? 0 : fail(s, rc);
}

/* WAL, the schema migrations and the functions table, in one transaction;
 * then the statements. */
static int prepare_db(struct store *s)
{
	sqlite3_stmt *st = NULL;
	char *alloc_n_sql;
	int version, rc, err;

	/* Refuse a newer store before touching it (WAL mode is persistent). */
	err = check_steps();
	if (!err)
		err = schema_version(s, &version);
	if (!err)
		err = check_version(s, version);
	if (err)
		return err;
	rc = sqlite3_prepare_v2(s->db, "PRAGMA journal_mode = WAL", -1, &st, NULL);
	if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
	    strcmp((const char *)sqlite3_column_text(st, 0), "wal") != 0) {
		log_error("cannot put %s in WAL mode (is it on a network file system?)",
			  s->path);
		sqlite3_finalize(st);
		return -ENOTSUP;
	}
	sqlite3_finalize(st);
	/* IMMEDIATE takes the write lock now, and the version is read again
	 * under it: two daemons opening one old store migrate it once. */
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(s->db, "PRAGMA synchronous = NORMAL; "
				  "PRAGMA cache_size = -8192; "
				  "PRAGMA wal_autocheckpoint = 16384; "
				  "PRAGMA busy_timeout = 5000; BEGIN IMMEDIATE", NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		return fail(s, rc);
	err = schema_version(s, &version);
	if (!err)
		err = check_version(s, version);
	if (!err)
		err = migrate(s, version);
	if (!err)
		err = add_functions(s);
	if (!err)
		err = reader_indexes_set(s, 0);
	if (err) {
		if (!sqlite3_get_autocommit(s->db))
			sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
		return err;
	}
	rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
	alloc_n_sql = alloc_n_text();
	if (!alloc_n_sql)
		return -ENOMEM;
	for (int i = 0; rc == SQLITE_OK && i < ST_N; i++)
		rc = sqlite3_prepare_v3(s->db, i == ST_ALLOC_N ? alloc_n_sql : sql[i], -1,
					SQLITE_PREPARE_PERSISTENT, &s->st[i], NULL);
	free(alloc_n_sql);
	if (rc == SQLITE_OK)
		return 0;
	return fail(s, rc);
}

/*
 * A new store is created here, 0600 and exclusively, before SQLite opens
 * it: it holds other users' command lines, executables and allocations.
 * SQLite gives its -wal and -shm files the database file's mode, so they
 * are private too.  An existing store keeps its mode (its owner chose it),
 * with a warning when others may read it.
 */
static int create_private(const char *path)
{
	struct stat sb;
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);

	if (fd >= 0) {
		close(fd);
		return 0;
	}
	if (errno != EEXIST) {
		log_error("cannot create %s: %s", path, strerror(errno));
		return -errno;
	}
	if (stat(path, &sb) < 0) {
		log_error("cannot open %s: %s", path, strerror(errno));
		return -errno;
	}
	if (!S_ISREG(sb.st_mode)) {
		log_error("%s is not a regular file", path);
		return -EINVAL;
	}
	if (sb.st_mode & 077)
		log_warn("%s may be read by other users (mode %04o): it holds command lines and "
			 "allocations; chmod 600 it", path, (unsigned)(sb.st_mode & 07777));
	return 0;
}

/* Opens path, which exists, as a store (the schema brought up to date);
 * flags: more SQLITE_OPEN_* flags (SQLITE_OPEN_CREATE, or a file that has
 * gone is not made anew). */
static struct store *open_existing(const char *path, int flags)
{
	struct store *s = calloc(1, sizeof(*s));
	int err = -ENOMEM, rc;

	if (s)
		s->lock_fd = -1;
	if (!s || !(s->path = strdup(path)))
		goto out;
	/* Collectors that share a store each hold a shared flock() on it
	 * (independent of SQLite's fcntl() locks); one that gets it
	 * exclusively first is alone (store_recover()). */
	s->lock_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (s->lock_fd >= 0) {
		s->sole = flock(s->lock_fd, LOCK_EX | LOCK_NB) == 0;
		flock(s->lock_fd, LOCK_SH);
	}
	rc = sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | flags,
			     NULL);
	if (rc != SQLITE_OK) {
		log_error("cannot open %s: %s", path,
			  s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
		err = -EIO;
		goto out;
	}
	sqlite3_extended_result_codes(s->db, 1);
	err = prepare_db(s);
out:
	if (!err)
		return s;
	if (s)
		s->broken = err;
	store_close(s);
	errno = -err;
	return NULL;
}

struct store *store_open(const char *path)
{
	int err = create_private(path);

	if (err) {
		errno = -err;
		return NULL;
	}
	return open_existing(path, SQLITE_OPEN_CREATE);
}

/* path made anew (O_EXCL, never through a link), mode 0660 (0600 when
 * uid is ours), owned by uid and gid. */
static int create_owned(const char *path, uid_t uid, gid_t gid)
{
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600), err = 0;

	if (fd < 0)
		return -errno;
	/* The mode first: once the file is uid's, only uid may change it. */
	if (fchmod(fd, uid == geteuid() ? 0600 : 0660) < 0 ||
	    (uid != geteuid() && fchown(fd, uid, gid) < 0))
		err = -errno;
	close(fd);
	if (err)
		unlink(path);
	return err;
}

/* Unlinks path+ext[i] for each i with made[i]. */
static void unlink_made(const char *path, const char *const *ext, size_t n, const int *made)
{
	char name[PATH_MAX];

	for (size_t i = 0; i < n; i++)
		if (made[i] && (size_t)snprintf(name, sizeof(name), "%s%s", path, ext[i]) <
				       sizeof(name))
			unlink(name);
}

/* create_owned() of path+ext[i] for each i, made[i] set for each one made;
 * one that exists is an error unless exist_ok.  On error, *at is the one
 * that failed and those made are removed again. */
static int create_owned_set(const char *path, const char *const *ext, size_t n, uid_t uid,
			    gid_t gid, int exist_ok, int *made, size_t *at)
{
	char name[PATH_MAX];
	int err = 0;

	for (size_t i = 0; i < n && !err; i++) {
		made[i] = 0;
		if ((size_t)snprintf(name, sizeof(name), "%s%s", path, ext[i]) >= sizeof(name))
			err = -ENAMETOOLONG;
		else if ((err = create_owned(name, uid, gid)) == 0)
			made[i] = 1;
		else if (err == -EEXIST && exist_ok)
			err = 0;
		*at = i;
	}
	if (err)
		unlink_made(path, ext, n, made);
	return err;
}

struct store *store_open_owned(const char *path, uid_t uid, gid_t gid)
{
	static const char *const ext[] = { "", "-wal", "-shm" };
	int made[3] = { 0 }, err;
	size_t at = 0;

	err = create_owned_set(path, ext, 3, uid, gid, 0, made, &at);
	if (err) {
		log_error("cannot create %s%s for uid %u: %s", path, ext[at], (unsigned)uid,
			  strerror(-err));
		errno = -err;
		return NULL;
	}
	/* The directory is the daemon's alone, so no link can appear in it;
	 * refused all the same. */
	return open_existing(path, SQLITE_OPEN_CREATE | SQLITE_OPEN_NOFOLLOW);
}

struct store *store_reopen(const char *path)
{
	return open_existing(path, SQLITE_OPEN_NOFOLLOW);
}

/*
 * A finished store is one file, and a reader that finds no -wal beside it
 * opens it immutable (tools/store.c): no lock, every page read as it is,
 * for as long as it reads; writing under it would tear what it reads.  So
 * the -wal and -shm come first (owned as store_open_owned() makes them,
 * which SQLite does not do for a daemon that is not root, so that the
 * user reads the recording while it is written): a reader from then on
 * opens it as a live store.  Then a reader that came before, and holds
 * its shared flock() while it reads, makes the exclusive one fail: the
 * store stays as it is (-EBUSY), the files made for it removed.
 */
struct store *store_reopen_finished(const char *path, uid_t uid, gid_t gid)
{
	static const char *const ext[] = { "-wal", "-shm" };
	int made[2] = { 0 }, err, fd = -1;
	struct store *s = NULL;
	size_t at;

	err = create_owned_set(path, ext, 2, uid, gid, 1, made, &at);
	if (!err && (fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		err = -errno;
	if (!err && flock(fd, LOCK_EX | LOCK_NB) < 0)
		err = errno == EWOULDBLOCK ? -EBUSY : -errno;
	if (fd >= 0)
		close(fd);
	if (!err && !(s = open_existing(path, SQLITE_OPEN_NOFOLLOW)))
		err = -errno;
	if (err)
		unlink_made(path, ext, 2, made);
	errno = -err;
	return s;
}

int store_set_meta(struct store *s, const char *key, const char *value)
{
	sqlite3_stmt *st = NULL;
	int err = tx(s), rc;

	if (err)
		return err;
	rc = sqlite3_prepare_v2(s->db, "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)",
				-1, &st, NULL);
	if (rc != SQLITE_OK)
		return fail(s, rc);
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, value, -1, SQLITE_STATIC);
	err = step(s, st);
	sqlite3_finalize(st);
	return err;
}

int store_count_processes(struct store *s, uint32_t *processes, uint32_t *ranks)
{
	sqlite3_stmt *st = NULL;
	int rc;

	*processes = *ranks = 0;
	if (s->broken)
		return s->broken;
	rc = sqlite3_prepare_v2(s->db, "SELECT count(*), count(DISTINCT rank) FROM processes",
				-1, &st, NULL);
	if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		*processes = (uint32_t)sqlite3_column_int64(st, 0);
		*ranks = (uint32_t)sqlite3_column_int64(st, 1);
		rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	return rc == SQLITE_OK ? 0 : fail(s, rc);
}

int store_finish(struct store *s)
{
	int err = store_commit(s);

	if (err)
		return err;
	/* Readers may hold the database: then it stays in WAL mode, which
	 * they read as well. */
	sqlite3_wal_checkpoint_v2(s->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
	sqlite3_exec(s->db, "PRAGMA journal_mode = DELETE", NULL, NULL, NULL);
	return 0;
}

/*
 * A store of at most COMPACT_MAX bytes is rewritten at its close with
 * smaller pages (VACUUM): 512 bytes up to COMPACT_TINY, 1 KiB above.  Most
 * of a small recording's ~35 tables and indexes are empty or nearly so,
 * and each takes a whole page (a recording of `true` is 248 KB with 4 KiB
 * pages, 62 KB with 1 KiB, 48 KB with 512 B).  Past a few MB the pages'
 * own overhead outweighs that (gen_store's framework stacks: 1.52 MB with
 * 1 KiB pages against 1.57 with 512 B and 1.59 with 4 KiB; at 9 MB, 4 KiB
 * is the smallest), and larger pages read faster: a larger store is left
 * as it is.  It takes journal mode DELETE (SQLite cannot change the page
 * size of a WAL database; a store in that mode is one file, and the next
 * collector to record in it puts it back in WAL mode), where VACUUM is one
 * transaction like any other: the journal holds the pages it overwrites
 * and is synced first (synchronous FULL), so a collector killed, or a
 * machine that loses power, in the middle leaves a hot journal, and the
 * next opener with write access rolls the store back to the whole
 * recording as it was.  Skipped when another collector shares the store or
 * a reader holds it (both hold a shared flock(); readers also SQLite's
 * lock): no waiting, the store is only larger.
 */
#define COMPACT_MAX (4 << 20)
#define COMPACT_TINY (512 << 10)

static void compact(struct store *s)
{
	sqlite3_stmt *st = NULL;
	int pages = 0, page_size = 0, rc, deleted = 0;
	int64_t bytes;
	char vacuum[64];

	if (s->lock_fd < 0 || flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0)
		return;
	if (read_int(s, "PRAGMA page_count", &pages) == 0 &&
	    read_int(s, "PRAGMA page_size", &page_size) == 0) {
		bytes = (int64_t)pages * page_size;
		snprintf(vacuum, sizeof(vacuum), "PRAGMA page_size = %d; VACUUM",
			 bytes <= COMPACT_TINY ? 512 : 1024);
		if (bytes <= COMPACT_MAX && page_size > (bytes <= COMPACT_TINY ? 512 : 1024) &&
		    sqlite3_exec(s->db, "PRAGMA busy_timeout = 0; PRAGMA synchronous = FULL",
				 NULL, NULL, NULL) == SQLITE_OK &&
		    sqlite3_prepare_v2(s->db, "PRAGMA journal_mode = DELETE", -1, &st,
				       NULL) == SQLITE_OK &&
		    sqlite3_step(st) == SQLITE_ROW)
			deleted = strcmp((const char *)sqlite3_column_text(st, 0), "delete") == 0;
	}
	sqlite3_finalize(st);
	if (deleted) {
		rc = sqlite3_exec(s->db, vacuum, NULL, NULL, NULL);
		if (rc != SQLITE_OK)
			log_info("%s not compacted: %s", s->path, sqlite3_errmsg(s->db));
	}
	flock(s->lock_fd, LOCK_SH);
}

int store_close(struct store *s)
{
	int err;

	if (!s)
		return 0;
	err = store_commit(s);
	for (int i = 0; i < ST_N; i++)
		sqlite3_finalize(s->st[i]);
	/* The recording is over: the readers' indexes, in one transaction. */
	if (!err && s->db && !s->broken) {
		int rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);

		if (rc == SQLITE_OK && reader_indexes_set(s, 1) == 0)
			rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
		if (!sqlite3_get_autocommit(s->db))
			sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
		if (rc != SQLITE_OK)
			log_error("cannot index %s: %s", s->path, sqlite3_errmsg(s->db));
	}
	if (s->db && !s->broken)
		sqlite3_wal_checkpoint_v2(s->db, NULL, SQLITE_CHECKPOINT_TRUNCATE,
					  NULL, NULL);
	if (!err && s->db && !s->broken)
		compact(s);
	sqlite3_close(s->db);
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	free(s->pend);
	free(s->path);
	free(s);
	return err;
}
