/*
 * Jobs and their recordings (docs/service.md).  A job is the processes of
 * one user that belong together; its recording is the store they go to.
 * The daemon runs one of two ways:
 *
 *  - one store (shimmerd --db FILE: `shimmer run`, tests): every process,
 *    whoever's and of whatever job, goes into that file;
 *  - a state directory (the service): each job gets a store of its own,
 *    STATE/recordings/UID/KEY-YYYYmmdd-HHMMSS.db, owned by the job's user
 *    and the daemon's group, mode 0660 (store_open_owned()), in directories
 *    only the daemon writes (mode 0711: users reach their files by name and
 *    list nothing); STATE/index.db, the daemon's own (0600), lists them.
 *
 * Which job a process joins is the caller's choice (client.c: SHIMMER_JOB,
 * else its traced parent's or pre-exec image's, else its launcher's id or
 * process group); here a job is found by (uid, key), or by a process it
 * had.  A job lives while
 * processes are in it and for the linger after the last one left, so that
 * the next step of a job script joins it; then its recording is finished
 * (one file: no -wal, no -shm), its index row completed, and retention
 * runs.  A process of that key that comes later starts a new recording.
 *
 * A recording a crashed daemon left live is finished when the next one
 * starts, its live processes ended 'collector_lost'; one of them that says
 * HELLO again opens it again (jobs_resume()).
 *
 * Retention (state directory only): when a recording is finished, at
 * start and every minute, finished recordings whose end is older than
 * max_age go, then the oldest (by start) until all recordings together,
 * live ones counted, take at most max_bytes.  Live recordings never go.
 *
 * Errors: 0 or a negative errno; a store's write error is fatal for the
 * daemon, as everywhere (store.h).  Single-threaded.
 */
#ifndef SHIMMER_COLLECTOR_JOB_H
#define SHIMMER_COLLECTOR_JOB_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

struct jobs_conf {
	const char *db;        /* one store for everything; NULL: state_dir */
	const char *state_dir;
	int64_t linger_ns;     /* a job outlives its last process this long */
	int64_t max_age_ns;    /* 0: no limit */
	uint64_t max_bytes;    /* 0: no limit */
};

struct jobs;
struct job;

/* Opens the store, or the state directory (made if missing) and its index;
 * recordings a crashed daemon left live are finished (their processes
 * ended as collector_lost by store_recover()).  NULL on error (logged),
 * errno set. */
struct jobs *jobs_open(const struct jobs_conf *conf);

/* Finishes every recording and frees.  Returns the first store error. */
int jobs_close(struct jobs *js);

/* The live (or lingering) job (uid, key), or NULL. */
struct job *jobs_find(struct jobs *js, uint32_t uid, const char *key, size_t key_len);

/*
 * The job (uid, key) for a new process, made (its recording created, owned
 * by uid) when it is not live; host: the first process's.  The process is
 * counted in until job_leave().  key is taken as printable ASCII (other
 * bytes become '_'), at most SHM_JOB_MAX bytes.  -EPERM when the recording
 * cannot be given to uid (no CAP_CHOWN), or uid has 64 live recordings
 * already: the job is not recorded (said at most once a second).
 */
int jobs_join(struct jobs *js, uint32_t uid, uint32_t pid, const char *key, size_t key_len,
	      const char *host, size_t host_len, struct job **out);

/* Counts one more process, pid, into a live job.  0 or -ENOMEM. */
int job_hold(struct job *j, uint32_t pid);

/*
 * A process that lost its collector says HELLO again (SHM_HELLO_RECONNECT)
 * to this daemon: the job whose recording holds its row, ended
 * 'collector_lost' by a daemon that started after a crash (listed in the
 * index with pid, uid, host and start_ns): a recording of uid's, never
 * another user's.  A finished one is opened again (store_reopen_finished())
 * and is live until its last process leaves, as any job.  The process is
 * counted in (job_hold()); whether its row is still one to go on with, the
 * store says (store_process_resume()).  *out NULL when there is none, and
 * why[] says so when one was found but cannot be continued (gone, another
 * owner's file, a reader holding it, uid at its live recordings' limit).
 * With one store (conf.db), always that one.  0 or an index error.
 */
int jobs_resume(struct jobs *js, uint32_t uid, uint32_t pid, const char *host,
		int64_t start_ns, struct job **out, char *why, size_t why_len);

/* The live (or lingering) job of uid that process pid is or was in, or
 * NULL: a parent that already ended still takes its children in, while
 * its job's recording is open. */
struct job *jobs_find_pid(struct jobs *js, uint32_t uid, uint32_t pid);

/* A process of j ended (now_ns: CLOCK_MONOTONIC). */
void job_leave(struct job *j, int64_t now_ns);

struct store *job_store(const struct job *j);

/* The one store (conf.db), NULL with a state directory. */
struct store *jobs_single_store(const struct jobs *js);
const char *job_key(const struct job *j); /* as sanitized */
uint32_t job_uid(const struct job *j);

/* Commits every open store. */
int jobs_commit(struct jobs *js);

/* Finishes the jobs idle past their linger; retention once a minute. */
int jobs_tick(struct jobs *js, int64_t now_ns);

/* Live jobs and their processes, for sd_notify's status line. */
unsigned jobs_live(const struct jobs *js);

struct job_recording {
	uint32_t uid;
	int live;
	uint32_t processes, ranks;
	int64_t start_wall_ns, end_wall_ns; /* end: now while live */
	uint64_t bytes;
	const char *job, *host, *path;
};

/* Calls fn for each recording of uid (all of them when uid is -1), live
 * ones first, then finished ones newest first; stops at fn's first
 * non-zero return and returns it. */
int jobs_list(struct jobs *js, int64_t uid,
	      int (*fn)(void *ctx, const struct job_recording *r), void *ctx);

#endif
