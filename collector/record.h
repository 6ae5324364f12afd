/*
 * Records as the collector's sources hand them on, and the sink they go
 * to.  A source (the shared-memory rings of ring.h; later others, such as
 * eBPF) reads untrusted bytes, copies each record out whole, checks it with
 * rec_check() and hands it to a rec_sink in the order rec_key() gives; a
 * sink (ingest.h turns records into rows; another could aggregate) never
 * sees a record that failed the check.  This is libbpf's
 * ring_buffer__new(fd, sample_cb, ctx) split: sources know bytes, sinks
 * know meaning, and neither knows the socket.
 *
 * Pure functions; no state, no allocation.  Thread-safe.
 */
#ifndef SHIMMER_COLLECTOR_RECORD_H
#define SHIMMER_COLLECTOR_RECORD_H

#include <stdint.h>

#include "wire.h"

/* Big enough for any record, the largest being a stack of SHM_STACK_MAX
 * frames: sources copy each one out whole before checking it. */
union rec {
	struct shm_rec_hdr h;
	struct shm_rec_heap heap;
	struct shm_rec_cuda cuda;
	struct shm_rec_kernel kernel;
	struct shm_rec_memcpy memcpy;
	struct shm_rec_memset memset;
	struct shm_rec_gpu_sync sync;
	struct shm_rec_api api;
	struct shm_rec_range range;
	struct shm_rec_mark mark;
	struct shm_rec_counter counter;
	struct shm_rec_module module;
	struct shm_rec_gpu_window window;
	struct shm_rec_offcpu offcpu;
	struct {
		struct shm_rec_stack h;
		uint64_t pc[SHM_STACK_MAX];
	} stack;
	struct {
		struct shm_rec_pystack h;
		struct shm_pyframe frame[SHM_STACK_MAX];
	} pystack;
};

/* Whether r, of which r->h.size bytes (at most sizeof(*r)) were copied,
 * is a well-formed record of a type other than PAD: its size is exactly
 * its type's (a stack's: its depth's), its fn belongs to its family, and
 * its enums and ranges are valid.  0 or -EBADMSG. */
int rec_check(const union rec *r);

/* When a heap or CUDA call's effect counts: a block is live from the end
 * of the call that returned it (t_end when the record is SHM_F_TIMED, else
 * t_begin, all an untimed record has). */
static inline uint64_t rec_live_ts(const struct shm_rec_hdr *h, uint64_t t_begin,
				   uint64_t t_end)
{
	return h->flags & SHM_F_TIMED ? t_end : t_begin;
}

/* Where a heap record's birth (an allocation's block) and release (a
 * free's or realloc's old block) fall in the process's heap order
 * (wire.h), the order blockmap.h pairs them by.  A source that numbers
 * none (shimmer attach's probes) is ordered by its times, in the record
 * clock: the instant a block became live, the instant a release began
 * (equal instants pair).  A birth and a release never share a number. */
static inline uint64_t rec_heap_birth(const struct shm_rec_heap *r)
{
	return r->seq ? r->seq : rec_live_ts(&r->hdr, r->t_begin, r->t_end);
}

static inline uint64_t rec_heap_release(const struct shm_rec_heap *r)
{
	return r->seq_free ? r->seq_free : r->t_begin;
}

/* The instant that orders a checked record against other threads'
 * records (see record.c); prev is the key of the record before it in its
 * stream in this pass (0 first in a pass). */
uint64_t rec_key(const union rec *r, uint64_t prev);

/*
 * Where a source hands its records, in order.  Each callback returns 0 or
 * a negative errno, which the source returns at once (a store error:
 * fatal for the daemon).  stream: the source's stream (a ring slot) the
 * record came from; per-thread state (open push ranges) lives per stream.
 */
struct rec_sink {
	/* One checked record of thread tid. */
	int (*record)(void *ctx, uint32_t stream, uint32_t tid, const union rec *r);
	/* stream has a new owner: what the sink kept for the old one goes. */
	void (*stream_new)(void *ctx, uint32_t stream);
	/* Exact calls and bytes of function fn on thread tid since the last
	 * call for the same (tid, fn). */
	int (*counts)(void *ctx, uint32_t tid, uint16_t fn, uint64_t count, uint64_t bytes);
	/* events lost for reason (a static string; tid 0: the whole process). */
	int (*drops)(void *ctx, uint32_t tid, const char *reason, uint64_t events);
	void *ctx;
};

#endif
