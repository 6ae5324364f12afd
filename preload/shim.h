/*
 * State shared by the shim's modules: whether and how the process is
 * traced (`shim_live`: on and the heap mode, on a page no child inherits),
 * its connection and region (`shim`), and each thread's slot, ring
 * producer and sampler (shim_tls); all live in thread.c.  The settings
 * they were made from are settings.h's, lines on stderr log.h's; init.c
 * starts and stops tracing.
 *
 * Threads: `shim` and `shim_live` are written only by the constructor and
 * the fork child handler, before tracing is switched on, except `on`
 * (tracing_stop()), `paused` and the heap mode (shimmer_pause/resume,
 * api.c), `ctl_seen` and `ctl_word` (control.c); hooks read `on`, `paused`
 * and the heap mode with relaxed loads.  shim_tls is the calling thread's own state, initial-exec
 * TLS so that a hook reaches it with one %fs-relative load.  in_shim is the
 * re-entry guard: while it is set, hooks call straight through, so the
 * allocations of dlsym, pthread_setspecific and friends made on our behalf
 * are neither traced nor recursive.  It is set only by shim_own_enter(),
 * which blocks the asynchronous signals for as long (below), and on the
 * shim's own threads, which block every signal.
 *
 * busy is the signal guard.  A signal handler may run between any two
 * instructions of a hook and call malloc (or anything traced) itself; the
 * interrupted hook must not be torn.  So while a thread records a heap
 * call (BUSY_HEAP: sampled set, stack table, ring) or writes a record
 * (BUSY_RING: reserve to commit), a traced call on the same thread is only
 * counted, and its record dropped and counted (thread_drop()): stored +
 * dropped still equals the exact counters.  The counters themselves are
 * bumped with one instruction each (count_add()), which a signal cannot
 * split.  A handler's calls made while in_shim is set would pass through
 * uncounted (in_shim cannot tell them from the shim's own), so in_shim is
 * held only around the very call that allocates for the shim (dlsym,
 * pthread_setspecific, libunwind's learning and unw_backtrace, the
 * runtime's first cudaGetDevice on a thread, CUPTI), with the asynchronous
 * signals blocked: a handler runs just after, counted.  Work that makes no
 * traced call holds a busy bit instead: a stack capture BUSY_STACK, the
 * shim's other slow paths that a handler's call must not enter BUSY_SHIM
 * (NVTX and shimmer_* names, a control command, the module walk, CUPTI's
 * API callback, the later cudaGetDevice calls, the exit; shim_revive()
 * needs neither), and a thread's set-up BUSY_CLAIM, under which a
 * handler's calls are counted once the thread has its slot
 * (thread_reentered()).  docs/reliability.md lists what is left.
 */
#ifndef SHIMMER_SHIM_H
#define SHIMMER_SHIM_H

#include <pthread.h>
#include <signal.h>
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
	int paused;        /* shimmer_pause(): record nothing until resume */
	int mode;          /* SHIMMER_MALLOC, OFF if its set-up failed */
	/* Control (control.h): the region's ctl_seq once the collector has
	 * it, else ctl_seen itself; ctl_seen is the sequence last applied.
	 * Beside `heap`, on the line every hook reads. */
	uint32_t *ctl_word;
	uint32_t ctl_seen;
	uint32_t pid;
	pthread_key_t key; /* its destructor retires the thread's slot */
	struct region region;
};

/* The heap mode before the constructor decides: heap calls are kept
 * aside (heap.h, heap_early_end()). */
#define HEAP_EARLY (-1)

extern struct shim shim;

/*
 * Whether this process traces, and its heap mode, on a page of their own
 * that the kernel zeroes in every child it copies (MADV_WIPEONFORK,
 * shim_live_guard()).  fork()'s child handler sets them again, as the
 * child starts over; a child made without it (a raw clone(2) without
 * CLONE_VM, as sandboxes and container tools make theirs) finds tracing
 * off and the heap as before the constructor (its calls are kept in its
 * own copy of the early table, which nothing reads), so it never writes
 * into the rings or onto the socket it shares with its parent.  Before,
 * its records went into its parent's ring among the parent's, and the
 * collector rejected the parent.  heap_1 is the mode plus one, so that a
 * zeroed page reads HEAP_EARLY.
 */
struct shim_live {
	int on;     /* tracing: the collector has our region */
	int heap_1; /* enum shm_malloc_mode in force + 1, OFF while !on */
	char pad[4096 - 2 * sizeof(int)];
} __attribute__((aligned(4096)));

extern struct shim_live shim_live;

/* Puts shim_live on a page of its own that children do not inherit (a
 * fresh one if its page is not anonymous memory).  Constructor; 0 or
 * -errno (the kernel has no MADV_WIPEONFORK: raw clones stay unguarded). */
int shim_live_guard(void);

#define shim_heap_store(mode, order) __atomic_store_n(&shim_live.heap_1, (mode) + 1, (order))

enum thread_state {
	TS_NEW = 0,  /* no slot yet: claims one on its first traced call */
	TS_READY,    /* owns a slot */
	TS_NOSLOT,   /* all slots taken: its events count as dropped_no_slot */
	TS_DONE,     /* exiting: no longer traced */
	TS_FORKING,  /* between fork's prepare and parent/child handlers */
};

#define BUSY_HEAP 0x1u /* inside traced() (heap.c) */
#define BUSY_RING 0x2u /* inside thread_emit(): a record is half written */
#define BUSY_SHIM 0x4u /* the shim's own work (shim_busy()): a handler's
			* traced call is counted, its record dropped */
#define BUSY_CLAIM 0x8u /* thread_prepare() claims a slot: the same, its
			 * counts held until the slot is there */
#define BUSY_STACK 0x10u /* a stack capture (stack.h): the same; the walk
			  * and the tables are not re-entered */

struct shim_thread {
	struct ring_prod ring; /* ring.slot is NULL unless TS_READY */
	struct sampler sampler;
	/* state, busy and in_shim share one 32-bit word that is 1 exactly when
	 * the thread may take the fast path (heap.c's fast()).  The hot
	 * paths change busy and in_shim through the whole word (tls_word_*()
	 * below): a hook's load of the word right after a narrower store
	 * into it could not take its value from the store buffer and would
	 * wait for every store before it to reach the cache. */
	union {
		struct {
			uint8_t state;     /* enum thread_state */
			uint8_t busy;      /* BUSY_*: the signal guard */
			uint16_t in_shim;  /* re-entry guard */
		};
		uint32_t word;
	};
	uint8_t saved_state;   /* across fork */
	uint32_t slot_idx;
	uint64_t noslot_retry; /* CLOCK_MONOTONIC ns: when TS_NOSLOT looks again */
	uint64_t last_ts;      /* the newest time of its records (thread_emit()) */
};

extern __thread struct shim_thread shim_tls;

/*
 * busy |= bits, busy &= ~bits, in_shim++ and in_shim-- as one instruction
 * each on the 32-bit word (a signal handler cannot split them, and it
 * leaves the word as it found it), for the hot paths: the next load of
 * the word then finds it whole in the last store.  in_shim is the word's
 * high half, so its carry leaves the word as a 16-bit increment's would.
 */
#define TLS_BUSY(bits) ((uint32_t)(bits) << 8)
#define TLS_IN_SHIM (1u << 16)

static inline void tls_word_or(struct shim_thread *t, uint32_t v)
{
	__asm__ volatile("orl %1, %0" : "+m"(t->word) : "ir"(v));
}

static inline void tls_word_and(struct shim_thread *t, uint32_t v)
{
	__asm__ volatile("andl %1, %0" : "+m"(t->word) : "ir"(v));
}

static inline void tls_word_add(struct shim_thread *t, uint32_t v)
{
	__asm__ volatile("addl %1, %0" : "+m"(t->word) : "ir"(v));
}

/* Marks the thread's own work that makes no traced call but that a
 * handler's traced call must not enter (BUSY_SHIM): the hooks then count
 * the call and drop its record (thread_reentered()).  Nests: 1 when this
 * call set the bit, for shim_unbusy(). */
static inline int shim_busy(struct shim_thread *t)
{
	if (t->busy & BUSY_SHIM)
		return 0;
	tls_word_or(t, TLS_BUSY(BUSY_SHIM));
	return 1;
}

static inline void shim_unbusy(struct shim_thread *t, int set)
{
	if (set)
		tls_word_and(t, ~TLS_BUSY(BUSY_SHIM));
}

/* Whether a traced call on this thread comes from a signal handler that
 * interrupted the shim's own work (BUSY_SHIM, BUSY_CLAIM, BUSY_STACK): it
 * is counted and its record dropped, thread_reentered(). */
static inline int shim_reentered(const struct shim_thread *t)
{
	return unlikely(t->busy & (BUSY_SHIM | BUSY_CLAIM | BUSY_STACK));
}

/*
 * A call the shim makes that may allocate through the interposed malloc on
 * its own behalf (dlsym, pthread_setspecific, libunwind, CUPTI): between
 * shim_own_enter() and shim_own_leave() the thread is in_shim, so those
 * allocations pass straight through, neither traced nor recursive.  A
 * signal handler's calls then could not be told from them, so the
 * asynchronous signals are blocked for as long: a handler that would have
 * run inside runs just after shim_own_leave(), and its calls are counted
 * as any.  The synchronous ones (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP,
 * SIGSYS) stay as they were: a fault is delivered where it happens, and
 * blocking one would kill the process instead.  The thread's mask is
 * restored exactly (the program's own); errno is preserved.  For the rare
 * calls only (once per process, thread, symbol, new return address, CUPTI
 * start or stop): each costs two system calls.  Nests.
 */
void shim_own_enter(struct shim_thread *t, sigset_t *saved);
void shim_own_leave(struct shim_thread *t, const sigset_t *saved);

static inline int shim_heap_mode(void)
{
	return __atomic_load_n(&shim_live.heap_1, __ATOMIC_RELAXED) - 1;
}

/* Claims a slot if the thread has none.  Returns 0 when the thread is
 * traced (it may still be TS_NOSLOT), -1 when it is not. */
int thread_prepare(struct shim_thread *t);

/* Whether the region's control block is as last applied (control.h): one
 * load of a line the collector writes only with a command.  Acquire (a
 * plain load on x86): a hook that finds it current also finds the state
 * it brought. */
static inline int control_current(void)
{
	return __atomic_load_n(__atomic_load_n(&shim.ctl_word, __ATOMIC_RELAXED),
			       __ATOMIC_ACQUIRE) == __atomic_load_n(&shim.ctl_seen, __ATOMIC_ACQUIRE);
}

/* control.h's: applies the block (from a malloc hook: CUPTI later). */
void control_poll(int from_heap);

/* The calling thread's state when its calls are to be traced, else NULL.
 * A new control block is applied first, so the call is recorded, or not,
 * as it says; from_heap: a malloc hook asks. */
static inline struct shim_thread *shim_thread_traced_from(int from_heap)
{
	struct shim_thread *t = &shim_tls;

	if (unlikely(t->in_shim) || !__atomic_load_n(&shim_live.on, __ATOMIC_RELAXED))
		return 0;
	if (unlikely(!control_current()))
		control_poll(from_heap);
	if (unlikely(__atomic_load_n(&shim.paused, __ATOMIC_RELAXED)))
		return 0;
	if (unlikely(t->state != TS_READY) && thread_prepare(t) < 0)
		return 0;
	return t;
}

static inline struct shim_thread *shim_thread_traced(void)
{
	return shim_thread_traced_from(0);
}

/*
 * *x += n in one instruction, so that a signal handler's own increment on
 * the same thread is never lost between a load and a store.  Not atomic
 * against other CPUs (no lock prefix, which would cost every hook ~5 ns):
 * the slot's owner is its only writer, and the collector's aligned 8-byte
 * loads see either value.
 */
static inline void count_add(uint64_t *x, uint64_t n)
{
	__asm__ volatile("addq %1, %0" : "+m"(*x) : "er"(n));
}

/*
 * The bytes a call of n requested, as its counter adds them: a request
 * above PTRDIFF_MAX (SIZE_MAX for a calloc or reallocarray whose product
 * overflows) is never granted (glibc refuses it without trying) and would
 * wrap the 64-bit sum (a failed calloc(SIZE_MAX / 2, 3) stored as -1
 * bytes): it adds none.  The call itself is counted.
 */
static inline uint64_t count_bytes(uint64_t n)
{
	return n > (uint64_t)PTRDIFF_MAX ? 0 : n;
}

/* thread_count() of a request known to be at most PTRDIFF_MAX: the sample
 * mode's fast path, whose calls asked for less than the sampler's
 * countdown (below 2^46, sampler.h), pays no clamp. */
static inline void thread_count_granted(struct shim_thread *t, unsigned int fn, uint64_t n)
{
	struct shm_slot *s = t->ring.slot;

	if (likely(s != 0)) {
		count_add(&s->count[fn], 1);
		/* a free's 0 bytes: no add, where the compiler knows it */
		if (!__builtin_constant_p(n) || n)
			count_add(&s->bytes[fn], n);
	}
}

/* Counts one call of fn requesting n bytes in the thread's own slot. */
static inline void thread_count(struct shim_thread *t, unsigned int fn, uint64_t n)
{
	thread_count_granted(t, fn, count_bytes(n));
}

/* A call a signal handler made while the thread was busy (a traced call
 * of its own half done, or BUSY_SHIM, BUSY_CLAIM): fn's count and n bytes
 * (none for SHM_FN_NONE: a range or mark), and, when lost, one dropped
 * record.  In the thread's slot, or, while
 * it claims one and has none yet, held until it has (thread_prepare()):
 * a thread that gets none counts the record as no_slot, as its calls. */
void thread_reentered(struct shim_thread *t, unsigned int fn, uint64_t n, int lost);

/* init.c's: says HELLO again when the collector died (at most once a
 * second unless now); 1 when reconnected.  Async-signal-safe. */
int shim_revive(int now);

/* thread.c's: a reconnect happened, lossless waits wait again. */
void thread_reconnected(void);

/* Drops between two looks for a dead collector (a power of two). */
#define DROPS_PER_REVIVE 1024u

/* Counts n records lost: in the thread's own slot, of which the owner is
 * the only writer, or as no_slot when it has none.  A drop is where a
 * process whose collector died first notices (its rings fill): every
 * DROPS_PER_REVIVE drops of a thread it tries to reconnect (shim_revive(),
 * itself at most once a second), so that a drop with a live collector
 * (lossy mode, the ring full) pays no clock read. */
static inline void thread_drop(struct shim_thread *t, uint64_t n)
{
	struct shm_slot *s = t->ring.slot;

	if (likely(s != 0)) {
		uint64_t before = s->dropped;

		count_add(&s->dropped, n);
		if (unlikely((before ^ (before + n)) >= DROPS_PER_REVIVE))
			shim_revive(0);
	} else {
		__atomic_fetch_add(&shim.region.hdr->dropped_no_slot, n, __ATOMIC_RELAXED);
		shim_revive(0);
	}
}

/*
 * Copies a record (len a multiple of 8) into the thread's ring.  When it is
 * full: counts a drop, or with SHIMMER_LOSSLESS=1 kicks the collector and
 * waits for room, dropping only if its heartbeat has stopped for ~5 s.
 * Preserves errno.  0 when the record was written, -1 when it was dropped.
 */
int thread_emit(struct shim_thread *t, const void *rec, uint32_t len);

int thread_emit_heap_slow(struct shim_thread *t, const struct shm_rec_heap *r);

/* A heap record's newest time, the thread's newest once it is written
 * (thread_emit()'s rec_ts() for any record). */
static inline uint64_t heap_rec_ts(const struct shm_rec_heap *r)
{
	return r->hdr.flags & SHM_F_TIMED ? r->t_end : r->t_begin;
}

/* thread_emit_heap_slow() of a record held by value: the copy in memory
 * that it needs is made on its path only. */
static __attribute__((noinline, cold)) int thread_emit_heap_cold(struct shim_thread *t,
								  struct shm_rec_heap r)
{
	return thread_emit_heap_slow(t, &r);
}

/* thread_emit() of a heap record, the hot path of `all` mode: inline
 * while the ring has room and no record is half written, else through
 * thread.c (the drops, the lossless wait).  The record comes by value
 * and goes from registers straight into the ring: built on the stack and
 * copied, its 16-byte loads would each span two of the stores that built
 * it, which the store buffer cannot forward, and wait for them (and every
 * store before them) to reach the cache. */
static inline __attribute__((always_inline)) int thread_emit_heap(struct shim_thread *t,
								 struct shm_rec_heap r)
{
	uint64_t ts = heap_rec_ts(&r);
	struct shm_rec_heap *dst;

	if (unlikely(!t->ring.slot || (t->busy & BUSY_RING)))
		return thread_emit_heap_cold(t, r);
	tls_word_or(t, TLS_BUSY(BUSY_RING));
	dst = ring_reserve(&t->ring, sizeof(r));
	if (unlikely(!dst)) {
		tls_word_and(t, ~TLS_BUSY(BUSY_RING));
		return thread_emit_heap_cold(t, r);
	}
	if (ts > t->last_ts)
		t->last_ts = ts;
	*dst = r;
	ring_commit(&t->ring, sizeof(r));
	tls_word_and(t, ~TLS_BUSY(BUSY_RING));
	return 0;
}

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
