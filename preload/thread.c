/*
 * Per-thread tracing state, and the process-wide `shim` (shim.h).  A
 * thread claims a slot lazily on its first traced call, so threads that
 * existed before the constructor ran, or that never allocate, cost
 * nothing.  A pthread key destructor retires the slot when the thread
 * exits; the main thread never runs key destructors and keeps its slot
 * ACTIVE to the end, which the collector expects.  A retired slot becomes
 * claimable again once the collector has drained it.
 *
 * A thread that finds no free slot (more live threads than
 * SHIMMER_MAX_THREADS, or slots of exited threads not yet drained) counts
 * its events as no_slot and looks again every NOSLOT_RETRY_NS; with
 * SHIMMER_LOSSLESS=1 it first waits for a slot the collector is draining,
 * as a full ring waits for room (never for a live thread's: that could be
 * for ever).
 *
 * Lossless waiting: the thread sleeps on the region's wake futex (wire.h),
 * which the collector bumps after every pass that consumed records or freed
 * a slot, in slices of WAIT_SLICE_NS, kicking the collector once.  It gives
 * up - and drops, counted, from then on - only when the collector is gone:
 * its end of the socket closed (it exited or crashed, and no new one took a
 * reconnect: shim_revive(); a drop tries again each second, and waiting
 * resumes once one did), or its heartbeat (a
 * count of its passes over the region) stood still for COLLECTOR_STUCK_NS
 * (stopped, or hung).
 */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "conn.h"
#include "intern.h"
#include "log.h"
#include "shim.h"

#define NOSLOT_RETRY_NS 1000000ull          /* 1 ms */
#define WAIT_SLICE_NS 100000000L            /* 100 ms */
#define COLLECTOR_STUCK_NS 30000000000ull   /* 30 s */

struct shim shim = { .ctl_word = &shim.ctl_seen };
/* zero: not tracing, the heap HEAP_EARLY (heap_1 == 0) */
struct shim_live shim_live;
__thread struct shim_thread shim_tls;

int shim_live_guard(void)
{
	struct shim_live keep = shim_live;
	void *p;

	if (madvise(&shim_live, sizeof(shim_live), MADV_WIPEONFORK) == 0)
		return 0;
	if (errno != EINVAL)
		return -errno;
	/* Not anonymous memory (the page the executable's last bytes of data
	 * share), or a kernel before 4.14: a fresh page in its place, and
	 * once more.  The constructor runs before the program's threads. */
	p = mmap(&shim_live, sizeof(shim_live), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	shim_live = keep;
	return madvise(&shim_live, sizeof(shim_live), MADV_WIPEONFORK) == 0 ? 0 : -errno;
}

/* A signal handler's calls made while its thread claims a slot, before it
 * has one (thread_reentered()): added to the slot's counters once it is
 * there, or, when none is, their records counted as no_slot.  Written
 * only while BUSY_CLAIM is set and the slot is not there, read once it is
 * cleared: by then no handler writes here. */
static __thread struct {
	uint64_t count[SHM_FN_COUNT];
	uint64_t bytes[SHM_FN_COUNT];
	uint64_t dropped;
	uint64_t any;
} held __attribute__((tls_model("initial-exec")));

static uint32_t claim_hint;
/* The heartbeat value at which we gave up waiting; ~0 while we have not. */
static uint64_t gone_beat = ~0ull;
/* The collector's end of the socket closed: nobody will ever make room. */
static int collector_gone;
/* The heartbeat when a KICK was last sent; ~0 before the first.  A KICK
 * only hurries the collector's next pass, so one per pass is enough: a
 * wait that sees the beat unchanged since the last KICK sends none.
 * Every wait sending one filled the socket's buffer while a slow collector
 * (a sanitizer build, a store commit) was away, and then the BYE, which
 * cannot wait, found it full: a process that exited recorded as a
 * 'disconnect'. */
static uint64_t kick_beat = ~0ull;

static void thread_exit(void *arg)
{
	struct shim_thread *t = &shim_tls;

	(void)arg;
	if (t->state == TS_READY)
		region_retire(t->ring.slot);
	t->ring.slot = 0;
	t->state = TS_DONE;
}

int thread_init(void)
{
	return -pthread_key_create(&shim.key, thread_exit);
}

/*
 * Waits until ready(t, arg) says yes (> 0) or that waiting is pointless
 * (< 0), or the collector is gone (see the top of the file).  Returns 1
 * when ready() said yes.  The caller holds whatever guard keeps a signal
 * handler on this thread out (BUSY_RING, BUSY_CLAIM).
 */
static int lossless_wait(struct shim_thread *t, int (*ready)(struct shim_thread *, uint32_t),
			 uint32_t arg)
{
	struct shm_region *r = shim.region.hdr;
	uint64_t beat = __atomic_load_n(&r->heartbeat, __ATOMIC_ACQUIRE), since, now, b;
	struct timespec slice = { 0, WAIT_SLICE_NS };
	int ok = 0, saved = errno;

	if (__atomic_load_n(&collector_gone, __ATOMIC_RELAXED) ||
	    beat == __atomic_load_n(&gone_beat, __ATOMIC_RELAXED))
		return ready(t, arg) > 0;
	/* seq_cst: our count is seen before we look at the ring, or the
	 * collector's pass is seen by the look (wire.h) */
	__atomic_fetch_add(&r->waiters, 1, __ATOMIC_SEQ_CST);
	if (__atomic_exchange_n(&kick_beat, beat, __ATOMIC_RELAXED) != beat)
		conn_kick();
	since = clock_ns(CLOCK_MONOTONIC);
	for (;;) {
		uint32_t w = __atomic_load_n(&r->wake, __ATOMIC_SEQ_CST);

		if ((ok = ready(t, arg)))
			break;
		syscall(SYS_futex, &r->wake, FUTEX_WAIT, w, &slice, 0, 0);
		if ((ok = ready(t, arg)))
			break;
		now = clock_ns(CLOCK_MONOTONIC);
		b = __atomic_load_n(&r->heartbeat, __ATOMIC_ACQUIRE);
		if (b != beat) {
			beat = b;
			since = now;
		} else if (conn_hung_up()) {
			/* a new collector may listen already: it reads on */
			if (shim_revive(1)) {
				since = now;
				continue;
			}
			__atomic_store_n(&collector_gone, 1, __ATOMIC_RELAXED);
			log_debug("collector gone; dropping instead of waiting");
			break;
		} else if (now - since > COLLECTOR_STUCK_NS) {
			__atomic_store_n(&gone_beat, beat, __ATOMIC_RELAXED);
			log_debug("collector heartbeat stopped; dropping instead of waiting");
			break;
		}
	}
	__atomic_fetch_sub(&r->waiters, 1, __ATOMIC_RELEASE);
	errno = saved;
	return ok > 0;
}

/* 1 when t got a slot; else 0 while a retired slot waits for the
 * collector (it will be free after its next pass), -1 when every slot
 * belongs to a live thread: only a thread's exit frees one, and waiting
 * for that could wait for ever (more live threads than slots). */
static int try_claim(struct shim_thread *t, uint32_t tid)
{
	int idx = region_claim(&shim.region, __atomic_load_n(&claim_hint, __ATOMIC_RELAXED), tid);

	t->slot_idx = (uint32_t)idx;
	if (idx >= 0)
		return 1;
	/* Reaped slots become claimable once the collector has drained them. */
	if (region_reap(&shim.region, shim.pid) > 0) {
		log_debug("retired the slots of exited threads");
		conn_kick();
	}
	return region_retired(&shim.region) ? 0 : -1;
}

static void claim(struct shim_thread *t)
{
	uint32_t tid = (uint32_t)gettid();
	char name[17] = { 0 };
	sigset_t mask;

	sampler_seed(&t->sampler, clock_now() ^ ((uint64_t)tid * 0x9e3779b97f4a7c15ull),
		     settings.sample_bytes);
	if (try_claim(t, tid) <= 0 && !(settings.lossless && lossless_wait(t, try_claim, tid))) {
		t->state = TS_NOSLOT;
		t->noslot_retry = clock_ns(CLOCK_MONOTONIC) + NOSLOT_RETRY_NS;
		log_debug("thread %u: no free slot", tid);
		return;
	}
	__atomic_store_n(&claim_hint, t->slot_idx + 1, __ATOMIC_RELAXED);
	ring_attach(&t->ring, region_slot(&shim.region, t->slot_idx),
		    region_ring(&shim.region, t->slot_idx), shim.region.ring_bytes);
	t->state = TS_READY;
	/* glibc allocates a key's second-level block on a thread's first
	 * setspecific of a key past the first 32: our allocation, not the
	 * program's */
	shim_own_enter(t, &mask);
	pthread_setspecific(shim.key, t);
	shim_own_leave(t, &mask);
	prctl(PR_GET_NAME, name);
	conn_thread(t->slot_idx, tid, intern_str(name), clock_now());
}

void shim_own_enter(struct shim_thread *t, sigset_t *saved)
{
	sigset_t async;
	int e = errno;

	sigfillset(&async);
	sigdelset(&async, SIGSEGV);
	sigdelset(&async, SIGBUS);
	sigdelset(&async, SIGFPE);
	sigdelset(&async, SIGILL);
	sigdelset(&async, SIGTRAP);
	sigdelset(&async, SIGSYS);
	/* sigfillset leaves out glibc's own SIGCANCEL and SIGSETXID; SIGKILL
	 * and SIGSTOP cannot be blocked.  Blocked first, then in_shim: no
	 * asynchronous handler finds in_shim set.  It cannot fail with these
	 * arguments; if it did, the mask is unchanged and is what leave
	 * restores. */
	if (pthread_sigmask(SIG_BLOCK, &async, saved) != 0)
		pthread_sigmask(SIG_SETMASK, 0, saved);
	tls_word_add(t, TLS_IN_SHIM);
	errno = e;
}

void shim_own_leave(struct shim_thread *t, const sigset_t *saved)
{
	int e = errno;

	tls_word_add(t, -TLS_IN_SHIM);
	pthread_sigmask(SIG_SETMASK, saved, 0);
	errno = e;
}

/* The calls thread_reentered() held during a claim, into the slot the
 * thread now has, or its records as no_slot. */
static uint64_t take(uint64_t *x)
{
	/* an exchange: a handler's own claim in between takes each once */
	return *x ? __atomic_exchange_n(x, 0, __ATOMIC_RELAXED) : 0;
}

static void release_held(struct shim_thread *t)
{
	struct shm_slot *s = t->ring.slot;
	uint64_t n;

	take(&held.any);
	for (unsigned int i = 0; i < SHM_FN_COUNT; i++) {
		if ((n = take(&held.count[i])) && s)
			count_add(&s->count[i], n);
		if ((n = take(&held.bytes[i])) && s)
			count_add(&s->bytes[i], n);
	}
	if ((n = take(&held.dropped)))
		thread_drop(t, n);
}

/*
 * The claim makes no traced call of its own but pthread_setspecific()'s
 * (claim() marks it in_shim), so the rest holds BUSY_CLAIM: a signal
 * handler's traced call in it is counted (thread_reentered()), and does
 * not claim (it would tear this claim).  Not in_shim, which would pass it
 * through uncounted.
 */
int thread_prepare(struct shim_thread *t)
{
	int saved;

	if (t->busy & BUSY_CLAIM)
		return 0; /* a handler's call inside our claim */
	if (t->state == TS_NEW ||
	    (t->state == TS_NOSLOT && clock_ns(CLOCK_MONOTONIC) >= t->noslot_retry)) {
		saved = errno;
		tls_word_or(t, TLS_BUSY(BUSY_CLAIM));
		claim(t);
		tls_word_and(t, ~TLS_BUSY(BUSY_CLAIM));
		if (unlikely(held.any))
			release_held(t);
		errno = saved;
	}
	return t->state == TS_READY || t->state == TS_NOSLOT ? 0 : -1;
}

void thread_reentered(struct shim_thread *t, unsigned int fn, uint64_t n, int lost)
{
	if (likely(t->ring.slot != 0) || !(t->busy & BUSY_CLAIM)) {
		if (fn != SHM_FN_NONE)
			thread_count(t, fn, n);
		if (lost)
			thread_drop(t, 1);
		return;
	}
	if (fn != SHM_FN_NONE) {
		count_add(&held.count[fn], 1);
		if (n)
			count_add(&held.bytes[fn], count_bytes(n));
	}
	if (lost)
		count_add(&held.dropped, 1);
	count_add(&held.any, 1);
}

static int room_for(struct shim_thread *t, uint32_t len)
{
	return ring_fits(&t->ring, len);
}

/* A record's newest time (0: none), which emit() keeps as the thread's
 * newest (control.c stamps a pause it applies no earlier).  The records
 * of the program's calls have their first time right after the header,
 * and the timed ones their end after it. */
static inline uint64_t rec_ts(const void *rec)
{
	const struct shm_rec_hdr *h = rec;
	uint64_t ts;

	switch (h->type) {
	case SHM_REC_HEAP:
	case SHM_REC_CUDA:
		memcpy(&ts, (const char *)rec + (h->flags & SHM_F_TIMED ? 16 : 8), sizeof(ts));
		return ts;
	case SHM_REC_RANGE:
	case SHM_REC_MARK:
	case SHM_REC_COUNTER:
		memcpy(&ts, (const char *)rec + 8, sizeof(ts));
		return ts;
	default:
		return 0;
	}
}

_Static_assert(offsetof(struct shm_rec_heap, t_end) == 16 && offsetof(struct shm_rec_cuda, t_end) == 16 &&
	       offsetof(struct shm_rec_range, ts) == 8 && offsetof(struct shm_rec_mark, ts) == 8 &&
	       offsetof(struct shm_rec_counter, ts) == 8, "record times");

/* Inlined into each caller below: for a heap record len is a constant,
 * so the copy is a few moves rather than a call to memcpy. */
static inline __attribute__((always_inline)) int emit(struct shim_thread *t, const void *rec,
						      uint32_t len, int wait, uint64_t ts)
{
	void *dst;
	int err = -1;

	if (unlikely(!t->ring.slot)) {
		__atomic_fetch_add(&shim.region.hdr->dropped_no_slot, 1, __ATOMIC_RELAXED);
		return -1;
	}
	/* A signal handler that writes while we are half way would tear our
	 * record: it drops its own instead. */
	if (unlikely(t->busy & BUSY_RING)) {
		thread_drop(t, 1);
		return -1;
	}
	tls_word_or(t, TLS_BUSY(BUSY_RING));
	if (ts > t->last_ts)
		t->last_ts = ts;
	dst = ring_reserve(&t->ring, len);
	if (unlikely(!dst) && wait && lossless_wait(t, room_for, len))
		dst = ring_reserve(&t->ring, len);
	if (likely(dst != 0)) {
		memcpy(dst, rec, len);
		ring_commit(&t->ring, len);
		err = 0;
	} else {
		thread_drop(t, 1);
	}
	tls_word_and(t, ~TLS_BUSY(BUSY_RING));
	return err;
}

int thread_emit(struct shim_thread *t, const void *rec, uint32_t len)
{
	return emit(t, rec, len, settings.lossless, rec_ts(rec));
}

int thread_emit_heap_slow(struct shim_thread *t, const struct shm_rec_heap *r)
{
	return emit(t, r, sizeof(*r), settings.lossless, heap_rec_ts(r));
}

int thread_emit_wait(struct shim_thread *t, const void *rec, uint32_t len)
{
	return emit(t, rec, len, 1, rec_ts(rec));
}

struct shim_thread *thread_self(void)
{
	struct shim_thread *t = &shim_tls;

	if (!__atomic_load_n(&shim_live.on, __ATOMIC_ACQUIRE) || t->state == TS_FORKING)
		return 0;
	if (t->state != TS_READY && thread_prepare(t) < 0)
		return 0;
	return t;
}

void thread_reconnected(void)
{
	__atomic_store_n(&kick_beat, ~0ull, __ATOMIC_RELAXED);
	__atomic_store_n(&gone_beat, ~0ull, __ATOMIC_RELAXED);
	__atomic_store_n(&collector_gone, 0, __ATOMIC_RELAXED);
}

void thread_fork_prepare(void)
{
	shim_tls.saved_state = shim_tls.state;
	shim_tls.state = TS_FORKING;
}

void thread_fork_parent(void)
{
	shim_tls.state = shim_tls.saved_state;
}

void thread_fork_child(void)
{
	struct shim_thread *t = &shim_tls;

	memset(&t->ring, 0, sizeof(t->ring));
	t->state = TS_NEW;
	t->busy = 0;
	claim_hint = 0;
	gone_beat = ~0ull;
	kick_beat = ~0ull;
	collector_gone = 0;
}
