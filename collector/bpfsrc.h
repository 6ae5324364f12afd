/*
 * The eBPF record source: the collector's second source of records (the
 * first is the shim's shared-memory rings, ring.h).  It attaches the BPF
 * programs of bpf/probes.bpf.c to one running process - uprobes on its own
 * CUDA runtime (libcudart, PyTorch's bundled copy too, or a runtime linked
 * into the executable), the driver's launch entry points (libcuda) and the
 * malloc family (libc, or jemalloc/tcmalloc/mimalloc when loaded), and/or
 * the scheduler's switches for off-CPU time - and turns what the programs
 * put on their ring buffer into the wire records the shim would have
 * written: checked (rec_check) and handed to a rec_sink (ingest.h) in
 * rec_key() order within each batch, with the exact per-thread call counts
 * and the drops (ring buffer full, stack map collisions, ...).  It also
 * makes what the shim's socket messages and module records carry: thread
 * rows, strings (module paths, driver function names) and the process's
 * loaded objects, re-read every second for libraries loaded later.
 *
 * User stacks come from a BPF stack map and are interned into STACK
 * records numbered from BPFSRC_STACK_BASE up, apart from the shim's ids,
 * since a preloaded process can have both (SHIMMER_OFFCPU=1).
 *
 * Library-like: the daemon (shimmer attach; `shimmer ctl attach`: session.h)
 * owns one source per traced process and polls bpfsrc_fd().  Nothing stays
 * attached when the source is freed or the daemon dies: every probe is a
 * file descriptor of ours.
 *
 * Return codes: 0 or a negative errno (the sink's errors are passed on as
 * they came).  Single-threaded, like the daemon.
 */
#ifndef SHIMMER_COLLECTOR_BPFSRC_H
#define SHIMMER_COLLECTOR_BPFSRC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "record.h"

#define BPFSRC_STACK_BASE 0x80000000u

/* What to trace (bpfsrc_conf.what). */
#define BPFSRC_CUDA 0x1   /* the CUDA runtime's calls and the driver's launches */
#define BPFSRC_HEAP 0x2   /* the malloc family, byte-sampled */
#define BPFSRC_OFFCPU 0x4 /* off-CPU intervals of the process's threads */

/* What the source needs from the process row it feeds: string ids and
 * thread rows (the shim's STRING and THREAD messages).  Either may be NULL
 * when the process has them from elsewhere (a preloaded process). */
struct bpfsrc_host {
	int (*string)(void *ctx, uint32_t id, const char *text, size_t len);
	/* tid seen for the first time at ts (CLOCK_MONOTONIC); name_id 0: none */
	int (*thread)(void *ctx, uint32_t tid, uint32_t name_id, uint64_t ts);
	void *ctx;
};

struct bpfsrc_conf {
	pid_t pid;
	unsigned what;          /* BPFSRC_* */
	uint64_t sample_bytes;  /* BPFSRC_HEAP: mean bytes between samples */
	int modules;            /* report the process's objects as MODULE records */
	struct bpfsrc_host host;
};

struct bpfsrc;

/*
 * Whether this collector can attach at all: built with BPF support and
 * holding the capabilities (root, or CAP_BPF and CAP_PERFMON).  0, or
 * -ENOTSUP / -EPERM with the reason in why (one line).
 */
int bpfsrc_check(char *why, size_t len);

/*
 * Loads the programs and attaches them to conf->pid.  Nothing is handed on
 * yet (not even the process's objects): records wait on the ring buffer
 * for the first bpfsrc_poll(), so the caller can make the process's row
 * once it knows the attach worked.  NULL with errno set and the reason in
 * why (one line) on failure, with nothing left attached.
 */
struct bpfsrc *bpfsrc_new(const struct bpfsrc_conf *conf, char *why, size_t len);

/* Readable when records wait (epoll). */
int bpfsrc_fd(const struct bpfsrc *s);

/* Hands the records waiting on the ring buffer on to sink, in rec_key()
 * order within the batch (the sink, as for ring_drain(), is the caller's
 * and may differ from call to call only in being the same ingest). */
int bpfsrc_poll(struct bpfsrc *s, const struct rec_sink *sink);

/* Periodic work (call about every 100 ms): counts and drops once a second,
 * the process's objects re-read once a second (new libraries: module
 * records, and probes when they are a CUDA runtime or driver), the probes
 * that learn each thread's CUDA device removed 1 s after the attach. */
int bpfsrc_tick(struct bpfsrc *s, const struct rec_sink *sink);

/* Detaches every program (the process runs untouched from here on), then
 * hands on what is left: the ring buffer's records, the off-CPU intervals
 * still open (ended at *end_ns, marked open), the last counts and drops.
 * *end_ns: when tracing ended (CLOCK_MONOTONIC); 0 for the moment the
 * programs were detached, which is then stored there.  Later calls do
 * nothing. */
int bpfsrc_stop(struct bpfsrc *s, const struct rec_sink *sink, uint64_t *end_ns);

/* What was attached, in a few words ("58 probes in libcudart.so.13, ..."). */
const char *bpfsrc_describe(const struct bpfsrc *s);

/* Detaches (without handing anything on) and frees.  NULL is a no-op. */
void bpfsrc_free(struct bpfsrc *s);

#endif
