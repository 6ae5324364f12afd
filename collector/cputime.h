/*
 * The CPU time of a traced process's threads, read by the collector from
 * /proc/PID/task/TID/schedstat (time on a CPU and time runnable waiting for
 * one, in ns; .../stat's user + system ticks where the kernel keeps no
 * schedstat) every CPUTIME_PERIOD_NS while the process is connected, and
 * stored as cpu_time rows (schema/008_findings.sql) when a thread's times
 * changed.  The tools turn the rows into busy shares: a DataLoader worker
 * busy or idle, what a thread did while the GPU waited.
 *
 * The pid is the kernel's (SO_PEERCRED of the client's socket), never what
 * the client says, and the process is recognised by its start time
 * (field 22 of /proc/PID/stat, read at the first sample): a pid reused by
 * another process after the traced one ended is never read.  A process
 * whose /proc entries cannot be read (gone, hidepid) stops being sampled,
 * silently: its rows so far stand.  Single-threaded, like the collector.
 */
#ifndef SHIMMER_COLLECTOR_CPUTIME_H
#define SHIMMER_COLLECTOR_CPUTIME_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

#include "wire.h"

#define CPUTIME_PERIOD_NS SHM_CPUTIME_PERIOD_NS /* between two reads of a process */

struct cputime_thread {
	uint32_t tid;
	int64_t cpu_ns, wait_ns; /* last stored */
};

struct cputime {
	uint32_t pid;
	uint64_t start_ticks; /* the process's start time, clock ticks after boot */
	int started;          /* start_ticks read */
	int off;              /* no more reads */
	struct cputime_thread *v;
	size_t n, cap;
};

/* Sample process pid (the kernel's pid of the client). */
void cputime_init(struct cputime *c, uint32_t pid);

/* Reads every thread's CPU time and stores a row for each that changed
 * since its last row, at now_ns.  Returns 0 (also when the process can no
 * longer be read), or a store error. */
int cputime_sample(struct cputime *c, struct store *s, int64_t proc_id, int64_t now_ns);

void cputime_free(struct cputime *c);

/* Parses a /proc/PID/stat line: utime + stime (clock ticks) and the start
 * time (field 22).  Returns 0, or -EINVAL for a line it cannot read.  For
 * tests. */
int cputime_parse_stat(const char *line, uint64_t *cpu_ticks, uint64_t *start_ticks);

/* Parses a schedstat line: "run_ns wait_ns slices".  0 or -EINVAL. */
int cputime_parse_schedstat(const char *line, int64_t *run_ns, int64_t *wait_ns);

#endif /* SHIMMER_COLLECTOR_CPUTIME_H */
