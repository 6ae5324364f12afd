/*
 * Per-thread tracing state, and the process-wide `shim` (shim.h).  A thread claims a slot lazily on its first
 * traced call, so threads that existed before the constructor ran, or that
 * never allocate, cost nothing.  A pthread key destructor retires the slot
 * when the thread exits; the main thread never runs key destructors and
 * keeps its slot ACTIVE to the end, which the collector expects.
 */
#include <errno.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "conn.h"
#include "intern.h"
#include "log.h"
#include "shim.h"

#define NOSLOT_RETRY 0xffffu        /* calls between claim retries */
#define LOSSLESS_NAP_NS 50000
#define COLLECTOR_GONE_NS 5000000000ull

struct shim shim = { .sock = -1 };
__thread struct shim_thread shim_tls;

static uint32_t claim_hint;
/* The heartbeat value at which we gave up waiting; ~0 while we have not. */
static uint64_t gone_beat = ~0ull;

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

static void claim(struct shim_thread *t)
{
	uint32_t tid = (uint32_t)gettid();
	char name[17] = { 0 };
	int idx;

	sampler_seed(&t->sampler, clock_now() ^ ((uint64_t)tid * 0x9e3779b97f4a7c15ull),
		     settings.sample_bytes);
	idx = region_claim(&shim.region, __atomic_load_n(&claim_hint, __ATOMIC_RELAXED), tid);
	/* Reaped slots become claimable once the collector has drained them. */
	if (idx < 0 && region_reap(&shim.region, shim.pid) > 0)
		log_debug("retired the slots of exited threads");
	if (idx < 0) {
		t->state = TS_NOSLOT;
		log_debug("thread %u: no free slot", tid);
		return;
	}
	__atomic_store_n(&claim_hint, (uint32_t)idx + 1, __ATOMIC_RELAXED);
	t->slot_idx = (uint32_t)idx;
	ring_attach(&t->ring, region_slot(&shim.region, (uint32_t)idx),
		    region_ring(&shim.region, (uint32_t)idx), shim.region.ring_bytes);
	t->state = TS_READY;
	pthread_setspecific(shim.key, t);
	prctl(PR_GET_NAME, name);
	conn_thread(shim.sock, (uint32_t)idx, tid, intern_str(name), clock_now());
}

int thread_prepare(struct shim_thread *t)
{
	int saved;

	if (t->state == TS_NEW || (t->state == TS_NOSLOT && !(++t->noslot_calls & NOSLOT_RETRY))) {
		saved = errno;
		t->in_shim++;
		claim(t);
		t->in_shim--;
		errno = saved;
	}
	return t->state == TS_READY || t->state == TS_NOSLOT ? 0 : -1;
}

static void *wait_room(struct shim_thread *t, uint32_t len)
{
	struct shm_region *r = shim.region.hdr;
	uint64_t beat = __atomic_load_n(&r->heartbeat, __ATOMIC_ACQUIRE);
	uint64_t since = clock_ns(CLOCK_MONOTONIC), now;
	struct timespec nap = { 0, LOSSLESS_NAP_NS };
	void *dst = 0;
	int saved = errno;

	if (beat == __atomic_load_n(&gone_beat, __ATOMIC_RELAXED))
		goto out;
	/* A record is half reserved: nothing may emit on this thread now. */
	t->in_shim++;
	conn_kick(shim.sock);
	for (;;) {
		nanosleep(&nap, 0);
		dst = ring_reserve(&t->ring, len);
		if (dst)
			break;
		now = clock_ns(CLOCK_MONOTONIC);
		if (__atomic_load_n(&r->heartbeat, __ATOMIC_ACQUIRE) != beat) {
			beat = __atomic_load_n(&r->heartbeat, __ATOMIC_ACQUIRE);
			since = now;
		} else if (now - since > COLLECTOR_GONE_NS) {
			__atomic_store_n(&gone_beat, beat, __ATOMIC_RELAXED);
			log_debug("collector heartbeat stopped; dropping instead of waiting");
			break;
		}
	}
	t->in_shim--;
out:
	errno = saved;
	return dst;
}

static inline int emit(struct shim_thread *t, const void *rec, uint32_t len, int wait)
{
	void *dst;

	if (unlikely(!t->ring.slot)) {
		__atomic_fetch_add(&shim.region.hdr->dropped_no_slot, 1, __ATOMIC_RELAXED);
		return -1;
	}
	dst = ring_reserve(&t->ring, len);
	if (unlikely(!dst) && wait)
		dst = wait_room(t, len);
	if (unlikely(!dst)) {
		thread_drop(t, 1);
		return -1;
	}
	memcpy(dst, rec, len);
	ring_commit(&t->ring, len);
	return 0;
}

int thread_emit(struct shim_thread *t, const void *rec, uint32_t len)
{
	return emit(t, rec, len, settings.lossless);
}

int thread_emit_wait(struct shim_thread *t, const void *rec, uint32_t len)
{
	return emit(t, rec, len, 1);
}

struct shim_thread *thread_self(void)
{
	struct shim_thread *t = &shim_tls;

	if (!__atomic_load_n(&shim.on, __ATOMIC_ACQUIRE) || t->state == TS_FORKING)
		return 0;
	if (t->state != TS_READY && thread_prepare(t) < 0)
		return 0;
	return t;
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
	t->noslot_calls = 0;
	claim_hint = 0;
	gone_beat = ~0ull;
}
