/*
 * One process traced by attaching to it (shimmer attach; `shimmer ctl
 * attach` through a running daemon): what client.c is for a preloaded
 * process.  It makes the processes row from what /proc says of the
 * process (traced_by 'attach', start_ns = the attach), feeds the eBPF
 * source (bpfsrc.h) into an ingest (the same records-to-rows code as the
 * shim's), and ends the row when the window closes, the daemon is told to
 * stop ('detach') or the process exits ('exit').
 *
 * The daemon polls attach_fd() (records waiting) and attach_pidfd()
 * (the process exited), calls attach_tick() about every 100 ms and
 * attach_end() once.
 *
 * Return codes: 0 or a negative errno; store errors are fatal for the
 * daemon, as for client.c.  Single-threaded.
 */
#ifndef SHIMMER_COLLECTOR_ATTACH_H
#define SHIMMER_COLLECTOR_ATTACH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "client.h"

struct attach_conf {
	pid_t pid;
	int64_t window_ns;     /* detach after this long; 0: until told */
	uint64_t sample_bytes; /* heap sampling mean; 0: the shim's default */
	unsigned what;         /* BPFSRC_*; 0: CUDA and off-CPU (the default) */
	struct store *store;   /* where the row goes; NULL: co->store */
};

enum attach_end {
	ATTACH_DETACH, /* window over, or the daemon told to stop: 'detach' */
	ATTACH_EXITED, /* the process exited: 'exit' */
};

struct attach;

/*
 * Attaches to conf->pid and inserts its processes row.  NULL with errno
 * set and the reason in why (one line) when it cannot; then nothing stays
 * attached and no row was made.
 */
struct attach *attach_start(struct collector *co, const struct attach_conf *conf,
			    char *why, size_t len);

/*
 * Off-CPU time only, for a preloaded process that asked for it
 * (SHIMMER_OFFCPU=1): into its existing row proc_id, whose offcpu column it
 * sets to 'traced', in store (the client's: its recording).  Records go
 * through an ingest of their own (the BPF
 * programs' clock is CLOCK_MONOTONIC, the shim's may be the TSC).  The
 * session has no pidfd (the client's socket says when it ends) and its
 * attach_end() leaves the row alone.  NULL with errno and why as for
 * attach_start().
 */
struct attach *attach_offcpu(struct collector *co, struct store *store, int64_t proc_id,
			     pid_t pid, char *why, size_t len);

/* Readable when records wait. */
int attach_fd(const struct attach *a);

/* Readable when the process has exited; -1 for an attach_offcpu(). */
int attach_pidfd(const struct attach *a);

/* Hands the waiting records on. */
int attach_poll(struct attach *a);

/* Periodic work; returns 1 when the window is over (the caller then ends
 * it), else 0 or an error. */
int attach_tick(struct attach *a, int64_t now_ns);

/* Detaches, stores what is left and ends the row.  Later calls do nothing. */
int attach_end(struct attach *a, enum attach_end why, int64_t now_ns);

int attach_ended(const struct attach *a);

/* What is attached, in a few words. */
const char *attach_describe(const struct attach *a);

pid_t attach_pid(const struct attach *a);

/* NULL is a no-op. */
void attach_free(struct attach *a);

#endif
