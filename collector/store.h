/*
 * The SQLite store (schema/, documented in docs/schema.md): one
 * connection in WAL mode, written in batches.  Every write joins the open
 * transaction (begun on demand, holding the write lock); store_commit()
 * ends it.  The daemon commits at least every 100 ms and whenever a client
 * ends, so a crash of the daemon loses at most the open batch.
 *
 * Allocation rows are the bulk of the data and most blocks die young, so
 * a new allocations row waits in memory until the batch ends (or the
 * pending buffer fills): a free of a pending row completes it there, and
 * the pair costs one INSERT instead of an INSERT and an UPDATE.  The row's
 * id is fixed when it is added (the batch holds the write lock, so no
 * other writer can take it), so callers never see the difference.
 *
 * Errors: functions return 0 or a negative errno.  A failed write (full
 * disk, I/O error, anything SQLite refuses) has already been logged as one
 * line and rolled back when it returns; the store is then broken, every
 * later call returns the same error, and the caller should store_close()
 * and exit.  Not thread-safe: one thread owns a store.
 */
#ifndef SHIMMER_COLLECTOR_STORE_H
#define SHIMMER_COLLECTOR_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "stacktree.h"
#include "version.h"
#include "wire.h"

/* The schema_version that the schema files leave in meta: one per
 * schema/NNN_*.sql file, counted at build time (common/version.h); the
 * tools read up to the same number. */
#define STORE_SCHEMA_VERSION shimmer_schema_version

struct store;

/* Opens or creates the store at path and brings it to
 * STORE_SCHEMA_VERSION: applies, in order and in one transaction, each
 * embedded schema file numbered above the store's meta.schema_version (all
 * of them for a new file).  Refuses (-EPROTO, logged) a store of a newer
 * schema.  NULL on error, errno set. */
struct store *store_open(const char *path);

/* store_open() for a store the caller hands to another user: path and its
 * -wal and -shm are made anew (never an existing file, never through a
 * symbolic link), mode 0660, owned by uid and group gid (needs CAP_CHOWN
 * when uid is not ours; then 0600), so that the user reads the store while
 * it is written and the daemon, of group gid, writes it.  NULL on error
 * (logged; nothing left behind), errno set. */
struct store *store_open_owned(const char *path, uid_t uid, gid_t gid);

/* Opens a store made by store_open_owned() earlier (a recording a crashed
 * daemon left), as it is: never through a link, its mode unchecked. */
struct store *store_reopen(const char *path);

/* Opens a finished store (store_finish(): one file) to be written again,
 * for uid, its -wal and -shm made as store_open_owned() makes them when
 * missing: never through a link, never made anew when it has gone
 * (ENOENT).  A reader that holds it (its shared flock(): it may read the
 * file immutable, tools/store.c) refuses it: NULL, errno EBUSY, the store
 * left as it was.  NULL on error, errno set. */
struct store *store_reopen_finished(const char *path, uid_t uid, gid_t gid);

/* Sets meta.key to value (in the open batch). */
int store_set_meta(struct store *s, const char *key, const char *value);

/* The processes rows, and the distinct ranks among them. */
int store_count_processes(struct store *s, uint32_t *processes, uint32_t *ranks);

/* Commits and leaves the store as one file (journal mode DELETE: no -wal,
 * no -shm) unless a reader holds it; store_close() follows. */
int store_finish(struct store *s);

/* Commits the open batch, checkpoints and closes.  Returns the commit's
 * result; the store is freed either way.  NULL is a no-op.  A small store
 * that no other collector shares and no reader holds is compacted first
 * (journal mode DELETE, smaller pages, VACUUM: see compact() in store.c). */
int store_close(struct store *s);

/* Commits the open batch, if any. */
int store_commit(struct store *s);

/* fn(ctx, s) runs right after every commit of any store s (store_close()'s
 * included): the collector writes its committed marks into the regions
 * whose records s holds (ring_committed()).  One hook per process; NULL
 * removes it. */
void store_on_commit(void (*fn)(void *ctx, struct store *s), void *ctx);

/* ---- processes and threads ---- */

struct store_proc {
	uint32_t pid, ppid, uid;
	int64_t parent_proc_id; /* 0: none */
	const char *host, *exe, *argv_json;
	size_t host_len, exe_len, argv_json_len;
	int64_t argv_bytes;       /* 0: argv whole; else the whole command line's bytes */
	int32_t rank, local_rank; /* SHM_NO_RANK: NULL */
	const char *malloc_mode;  /* "off", "sample", "all" */
	int64_t sample_bytes;     /* < 0: NULL */
	int lossless;
	int64_t start_wall_ns, start_ns;
	const char *traced_by;    /* "preload" (NULL) or "attach"; static */
};

/* Inserts a processes row; *proc_id receives its key. */
int store_process_add(struct store *s, const struct store_proc *p, int64_t *proc_id);

/* Sets end_ns, end_reason and end_signal (signo 0: NULL). */
int store_process_end(struct store *s, int64_t proc_id, int64_t end_ns,
		      const char *reason, int signo);

/* The process's CPU time at its exit, as its BYE said it (wire.h):
 * exit_cpu_ns, exit_user_ns and exit_sys_ns (schema 14). */
int store_process_exit_cpu(struct store *s, int64_t proc_id, int64_t cpu_ns, int64_t user_ns,
			   int64_t sys_ns);

/* Ends the processes a collector that died left without an end
 * ('collector_lost', at its last commit), if no other collector has the
 * store open; *lost receives how many.  Called once, at start. */
int store_recover(struct store *s, unsigned *lost);

/* A processes row ended as 'collector_lost'. */
struct store_lost {
	uint32_t pid, uid;
	const char *host; /* valid during the call only */
	int64_t start_ns;
};

/* Calls fn for each process ended as 'collector_lost' (store_recover()),
 * which may still say HELLO again (store_process_resume()); stops at fn's
 * first non-zero return and returns it. */
int store_each_lost(struct store *s,
		    int (*fn)(void *ctx, const struct store_lost *l), void *ctx);

/* The most recently added process with this pid and uid on this host:
 * its proc_id in *proc_id, or 0 when there is none.  (A process of
 * another user is never found: no client links its rows to them.) */
int store_process_find(struct store *s, uint32_t pid, uint32_t uid, const char *host,
		       size_t host_len, int64_t *proc_id);

/* The latest process with this pid on this host, if it is uid's and ended
 * as a 'disconnect' at or after since_ns, replaced itself by exec: its
 * end_reason becomes 'exec', and it ends no later than next_ns (the new
 * image's start; never before its own start). */
int store_process_exec(struct store *s, uint32_t pid, uint32_t uid, const char *host,
		       size_t host_len, int64_t since_ns, int64_t next_ns);

/* A process that lost its collector and says HELLO to the next one
 * (SHM_HELLO_RECONNECT): the latest row of pid on this host, if it is uid's,
 * started at start_ns and was ended as 'collector_lost' (store_recover()),
 * is live again (end_ns, end_reason and end_signal NULL) and its proc_id
 * goes to *proc_id; else *proc_id is 0.  Rows ended otherwise (an orderly
 * end, a disconnect) or another user's, are never reopened. */
int store_process_resume(struct store *s, uint32_t pid, uint32_t uid, const char *host,
			 size_t host_len, int64_t start_ns, int64_t *proc_id);

/* Adds a threads row named by the process's string name_id (NULL when 0
 * or not defined); a (proc_id, tid) already present is kept as it is. */
int store_thread_add(struct store *s, int64_t proc_id, uint32_t tid,
		     uint32_t name_id, int64_t first_ns);

/* Defines (or redefines) string id of a process.  demangled may be NULL. */
int store_string_add(struct store *s, int64_t proc_id, uint32_t id,
		     const char *text, size_t len, const char *demangled);

/* Sets processes.gpu_status (enum shm_gpu_status, already validated) and
 * gpu_status_detail. */
int store_process_gpu_status(struct store *s, int64_t proc_id, uint32_t status,
			     const char *detail, size_t len);

/* Sets processes.offcpu ('traced' when traced, else 'unavailable') and
 * offcpu_detail (NULL, or why not: one line). */
int store_process_offcpu(struct store *s, int64_t proc_id, int traced, const char *detail);

/* Sets processes.gpu_sampled_since_ns; the client calls it once per
 * process, with its first window record's since. */
int store_process_gpu_sampled(struct store *s, int64_t proc_id, int64_t since_ns);

/* ---- events ---- */

/* One cpu_time row: thread tid of the process had run cpu_ns on a CPU and
 * waited wait_ns for one (< 0: unknown) at ts_ns (the collector's
 * CLOCK_MONOTONIC). */
int store_cpu_time_add(struct store *s, int64_t proc_id, uint32_t tid, int64_t ts_ns,
		       int64_t cpu_ns, int64_t wait_ns);

/* One cuda_calls row from a validated record, times already converted. */
int store_cuda_add(struct store *s, int64_t proc_id, uint32_t tid,
		   const struct shm_rec_cuda *r, int64_t start_ns, int64_t end_ns);

struct store_alloc {
	int64_t proc_id;
	const char *space; /* "host", "device", "pinned", "managed"; static */
	int32_t device;
	uint64_t ptr, size;
	int sampled;
	double weight;
	uint16_t fn;
	uint32_t tid;
	int64_t ns;
	int64_t end_ns; /* < 0: NULL (untimed) */
	uint32_t stack_id, pystack_id; /* 0: NULL */
};

/* Adds an allocations row to the batch; *id receives its rowid, final
 * from now on.  The row reaches the file with the batch's other rows. */
int store_alloc_add(struct store *s, const struct store_alloc *a, int64_t *id);

/* Fills the free_* columns of allocations row id (pending or stored);
 * end_ns < 0 stores NULL. */
int store_alloc_free(struct store *s, int64_t id, uint16_t fn, uint32_t tid,
		     int64_t ns, int64_t end_ns);

/* GPU activity, one row each, from validated records with times already
 * converted.  CUPTI's enums (copy, memory and synchronization kinds) become
 * the text docs/schema.md lists, 'unknown' for values it does not. */
int store_kernel_add(struct store *s, int64_t proc_id, const struct shm_rec_kernel *r,
		     int64_t start_ns, int64_t end_ns);
int store_memcpy_add(struct store *s, int64_t proc_id, const struct shm_rec_memcpy *r,
		     int64_t start_ns, int64_t end_ns);
int store_memset_add(struct store *s, int64_t proc_id, const struct shm_rec_memset *r,
		     int64_t start_ns, int64_t end_ns);
int store_gpu_sync_add(struct store *s, int64_t proc_id, const struct shm_rec_gpu_sync *r,
		       int64_t start_ns, int64_t end_ns);

/* A gpu_windows row: CUPTI recorded from start_ns to end_ns (converted);
 * calls: the GPU-work runtime calls made meanwhile; whole: the window was
 * held open to the end or a pause (SHM_F_WHOLE). */
int store_gpu_window_add(struct store *s, int64_t proc_id, int64_t start_ns,
			 int64_t end_ns, uint64_t calls, int whole);

/* An offcpu row from a checked record, times already converted. */
int store_offcpu_add(struct store *s, int64_t proc_id, uint32_t tid,
		     const struct shm_rec_offcpu *r, int64_t start_ns, int64_t end_ns);

/* A gpu_api row; r->domain must be a valid enum shm_api_domain. */
int store_api_add(struct store *s, int64_t proc_id, uint32_t tid,
		  const struct shm_rec_api *r, int64_t start_ns, int64_t end_ns);

/* Inserts a ranges row (end_ns NULL) from a PUSH or START record; kind is
 * "push" or "startend" (static); parent_id 0 stores NULL.  *id receives
 * its rowid. */
int store_range_open(struct store *s, int64_t proc_id, uint32_t tid, const char *kind,
		     const struct shm_rec_range *r, int64_t ns, uint32_t depth,
		     int64_t parent_id, int64_t *id);

/* Sets end_ns of ranges row id. */
int store_range_close(struct store *s, int64_t id, int64_t end_ns);

int store_mark_add(struct store *s, int64_t proc_id, uint32_t tid,
		   const struct shm_rec_mark *r, int64_t ns);

/* A NaN value is stored as NULL. */
int store_counter_add(struct store *s, int64_t proc_id, uint32_t tid,
		      const struct shm_rec_counter *r, int64_t ns);

/* ---- stacks and modules ---- */

/* Stores a native stack (pc[0] innermost): a stacks row naming the node of
 * its innermost frame, and the stack_nodes its tree t (the process's, see
 * stacktree.h) does not hold yet.  A stack id the process already stored
 * keeps its first frames; a stack of no frames is not stored. */
int store_stack_add(struct store *s, int64_t proc_id, struct stacktree *t, uint32_t stack_id,
		    const uint64_t *pc, uint32_t depth);

/* The same for Python frames (python_frames). */
int store_pystack_add(struct store *s, int64_t proc_id, uint32_t stack_id,
		      const struct shm_pyframe *frames, uint32_t depth);

/* A validated module record: a modules row (build_id as lowercase hex,
 * NULL when build_id_len is 0) or, for an unload, unloaded_ns = ns on the
 * latest still-loaded row of the process with the same path_id and lo. */
int store_module_add(struct store *s, int64_t proc_id, const struct shm_rec_module *r,
		     int64_t ns);

/* ---- the aggregated heap (heapagg.h; schema 9) ---- */

struct store_heap_totals {
	int64_t proc_id;
	int final;
	int64_t allocs, alloc_bytes, frees, freed_bytes, live_count, live_bytes;
	int64_t peak_bytes, peak_count, peak_ns; /* peak_ns < 0: NULL */
	int64_t temp_count, temp_bytes, short_ns, short_count, short_bytes;
	int64_t row_ns, point_allocs, late_events, late_steps;
};

struct store_heap_site {
	uint32_t stack_id, pystack_id; /* 0: none */
	int64_t allocs, alloc_bytes, frees, freed_bytes, live_count, live_bytes;
	int64_t peak_count, peak_bytes, temp_count, temp_bytes, short_count, short_bytes;
};

/* Each replaces the row with the same key (a snapshot is overwritten by
 * the next one and by the final tables). */
int store_heap_totals(struct store *s, const struct store_heap_totals *t);
int store_heap_site(struct store *s, int64_t proc_id, const struct store_heap_site *site);
/* kind: "size" or "life" (static). */
int store_heap_hist(struct store *s, int64_t proc_id, uint32_t stack_id, uint32_t pystack_id,
		    const char *kind, uint32_t bucket, int64_t count, int64_t bytes);
/* side: "alloc" or "free" (static). */
int store_heap_call(struct store *s, int64_t proc_id, uint16_t fn, const char *side,
		    int64_t timed, int64_t total_ns, double m2, int64_t min_ns,
		    int64_t max_ns);
/* Deletes the process's heap_timeline, heap_series and heap_points rows
 * (they change as the run goes on, not only grow); they are then added
 * one by one. */
int store_heap_clear(struct store *s, int64_t proc_id);
int store_heap_timeline(struct store *s, int64_t proc_id, int64_t start_ns, int64_t end_ns,
			int64_t min_bytes, int64_t max_bytes, int64_t end_bytes);
/* kind: "alloc" or "step" (static). */
int store_heap_series(struct store *s, int64_t proc_id, uint32_t stack_id, uint32_t pystack_id,
		      const char *kind, uint32_t idx, int64_t bytes);
int store_heap_point(struct store *s, int64_t proc_id, uint32_t idx, int64_t ns);
/* range_id: the ranges row, 0 for NULL. */
int store_heap_step(struct store *s, int64_t proc_id, uint32_t idx, int64_t ns,
		    int64_t range_id);

/* ---- exact totals ---- */

/* Adds to function_counts (proc_id, tid, fn). */
int store_count_add(struct store *s, int64_t proc_id, uint32_t tid, uint16_t fn,
		    uint64_t count, uint64_t bytes);

/* Adds to drops (proc_id, tid, reason). */
int store_drop_add(struct store *s, int64_t proc_id, uint32_t tid,
		   const char *reason, uint64_t events);

#endif
