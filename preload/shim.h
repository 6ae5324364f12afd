/*
 * State shared by the shim's modules: whether and how the process is
 * traced, its connection and region (`shim`), and each thread's slot, ring
 * producer and sampler (shim_tls); both live in thread.c.  The settings
 * they were made from are settings.h's, lines on stderr log.h's; init.c
 * starts and stops tracing.
 *
 * Threads: `shim` is written only by the constructor and the fork child
 * handler, before tracing is switched on, except `on` (tracing_stop()),
 * `paused` and `heap` (shimmer_pause/resume, api.c); hooks read `on`,
 * `paused` and `heap` with relaxed loads.  shim_tls is the calling thread's own state, initial-exec
 * TLS so that a hook reaches it with one %fs-relative load.  in_shim is the
 * re-entry guard: while it is set, hooks call straight through, so the
 * allocations of dlsym, pthread_setspecific and friends made on our behalf
 * are neither traced nor recursive.
 */
#ifndef SHIMMER_SHIM_H
#define SHIMMER_SHIM_H

#include <pthread.h>
#include <stdint.h>

#include "region.h"
#include "ring.h"
#include "sampler.h"
#include "settings.h"
#include "wire.h"

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define SHIM_EXPORT __attribute__((visibility("default")))

struct shim {
	int on;            /* tracing: the collector has our region */
	int paused;        /* shimmer_pause(): record nothing until resume */
	int heap;          /* enum shm_malloc_mode in force, OFF while !on */
	int mode;          /* SHIMMER_MALLOC, OFF if its set-up failed */
	int sock;          /* control socket, -1 when none */
	uint32_t pid;
	pthread_key_t key; /* its destructor retires the thread's slot */
	struct region region;
};

extern struct shim shim;

enum thread_state {
	TS_NEW = 0,  /* no slot yet: claims one on its first traced call */
	TS_READY,    /* owns a slot */
	TS_NOSLOT,   /* all slots taken: its events count as dropped_no_slot */
	TS_DONE,     /* exiting: no longer traced */
	TS_FORKING,  /* between fork's prepare and parent/child handlers */
};

struct shim_thread {
	struct ring_prod ring; /* ring.slot is NULL unless TS_READY */
	struct sampler sampler;
	uint8_t state;         /* enum thread_state */
	uint8_t saved_state;   /* across fork */
	uint16_t in_shim;      /* re-entry guard */
	uint32_t slot_idx;
	uint32_t noslot_calls;
};

extern __thread struct shim_thread shim_tls;

static inline int shim_heap_mode(void)
{
	return __atomic_load_n(&shim.heap, __ATOMIC_RELAXED);
}

/* Claims a slot if the thread has none.  Returns 0 when the thread is
 * traced (it may still be TS_NOSLOT), -1 when it is not. */
int thread_prepare(struct shim_thread *t);

/* The calling thread's state when its calls are to be traced, else NULL. */
static inline struct shim_thread *shim_thread_traced(void)
{
	struct shim_thread *t = &shim_tls;

	if (unlikely(t->in_shim) || !__atomic_load_n(&shim.on, __ATOMIC_RELAXED) ||
	    unlikely(__atomic_load_n(&shim.paused, __ATOMIC_RELAXED)))
		return 0;
	if (unlikely(t->state != TS_READY) && thread_prepare(t) < 0)
		return 0;
	return t;
}

/* Counts one call of fn requesting n bytes in the thread's own slot. */
static inline void thread_count(struct shim_thread *t, unsigned int fn, uint64_t n)
{
	struct shm_slot *s = t->ring.slot;

	if (likely(s != 0)) {
		__atomic_store_n(&s->count[fn], s->count[fn] + 1, __ATOMIC_RELAXED);
		__atomic_store_n(&s->bytes[fn], s->bytes[fn] + n, __ATOMIC_RELAXED);
	}
}

/* Counts n records lost in the thread's own slot, which it must have: the
 * owner is the only writer of `dropped`. */
static inline void thread_drop(struct shim_thread *t, uint64_t n)
{
	struct shm_slot *s = t->ring.slot;

	__atomic_store_n(&s->dropped, s->dropped + n, __ATOMIC_RELAXED);
}

/*
 * Copies a record (len a multiple of 8) into the thread's ring.  When it is
 * full: counts a drop, or with SHIMMER_LOSSLESS=1 kicks the collector and
 * waits for room, dropping only if its heartbeat has stopped for ~5 s.
 * Preserves errno.  0 when the record was written, -1 when it was dropped.
 */
int thread_emit(struct shim_thread *t, const void *rec, uint32_t len);

/* Whether thread_emit() would drop a record of len bytes now (the ring is
 * full and SHIMMER_LOSSLESS is off), so that a caller skips the work of
 * building it (a stack).  The thread must have its slot; a yes may turn
 * into a no, never the reverse, until the thread writes. */
static inline int thread_would_drop(struct shim_thread *t, uint32_t len)
{
	return !settings.lossless && !ring_fits(&t->ring, len);
}

/* The same for a heap record, which must leave an eighth of the ring free:
 * a flood of heap events (the bulk of every trace) then never takes the
 * room of the rarer records behind it (CUDA calls, ranges, GPU work). */
static inline int thread_would_drop_heap(struct shim_thread *t, uint32_t len)
{
	return !settings.lossless && !ring_fits_spare(&t->ring, len, t->ring.bytes / 8);
}

/* thread_emit() that waits for room even without SHIMMER_LOSSLESS, unless
 * the collector is gone: for threads of our own or CUPTI's, which deliver
 * records in bursts and hold no application work up. */
int thread_emit_wait(struct shim_thread *t, const void *rec, uint32_t len);

/* The calling thread's state while tracing is on, also inside the shim
 * (in_shim set): for reports the shim makes on its own account (modules).
 * NULL when tracing is off or the thread is exiting or forking. */
struct shim_thread *thread_self(void);

/* Creates the key whose destructor retires a thread's slot.  0 or -errno. */
int thread_init(void);

/* fork: the forking thread stops tracing until the matching handler. */
void thread_fork_prepare(void);
void thread_fork_parent(void);
/* In the child: forget the parent's slot; the next traced call claims one. */
void thread_fork_child(void);

#endif /* SHIMMER_SHIM_H */
