/*
 * The public API of include/shimmer.h, and the range/marker/counter
 * records that NVTX shares.
 *
 * shimmer_*() are exported with default visibility from the shim, so they
 * sit in the global scope of a process that preloads it: shimmer.h's weak
 * references bind to them, and ctypes.CDLL(None) finds them.  Their ranges,
 * markers and counters belong to the domain "shimmer".
 *
 * Pause: recording stops at one predictable branch per hook (shim.paused
 * in shim_thread_traced(); heap hooks see SHM_MALLOC_OFF), CUPTI's
 * activity kinds are disabled, and markers "shimmer.pause" and
 * "shimmer.resume" bracket the gap, on the ring of the thread that asked
 * or applied the collector's command (control.h).  Pause and resume are
 * serialised by a spinlock: they are rare, never on a hot path; a hook
 * that applies a command only tries it (control.c).
 *
 * Ranges watched by a trigger (control.h) are flagged per thread and level
 * at their push, so their pop is known without a name.
 */
#include <errno.h>
#include <string.h>

#include "api.h"
#include "clock.h"
#include "control.h"
#include "cupti.h"
#include "intern.h"

#define DOMAIN_KEYS 8 /* distinct domains whose nesting a thread tracks */
#define SHIMMER_DOMAIN "shimmer"

/* Per-thread push depth per domain key; the last key is shared by any
 * domains past the first DOMAIN_KEYS - 1.  watched: bit L is set while the
 * range open at level L (below 64) counts for a trigger. */
struct nesting {
	uintptr_t key[DOMAIN_KEYS];
	int depth[DOMAIN_KEYS];
	uint64_t watched[DOMAIN_KEYS];
	uint8_t used;
};

static __thread struct nesting nesting;
static uint64_t next_range = 1;
static const struct intern_entry *shimmer_domain;
static int pause_lock;

static unsigned int key_of(uintptr_t domain)
{
	struct nesting *n = &nesting;
	unsigned int i;

	for (i = 0; i < n->used; i++)
		if (n->key[i] == domain)
			return i;
	if (n->used < DOMAIN_KEYS) {
		n->key[n->used] = domain;
		n->depth[n->used] = 0;
		n->watched[n->used] = 0;
		return n->used++;
	}
	return DOMAIN_KEYS - 1;
}

int api_push_level(uintptr_t domain, int watched)
{
	unsigned int k = key_of(domain);
	int level = nesting.depth[k]++;

	if (level < 64) {
		if (watched)
			nesting.watched[k] |= 1ull << level;
		else
			nesting.watched[k] &= ~(1ull << level);
	}
	return level;
}

int api_pop_level(uintptr_t domain, int *watched)
{
	unsigned int k = key_of(domain);
	int level;

	*watched = 0;
	if (nesting.depth[k] <= 0)
		return -1;
	level = --nesting.depth[k];
	if (level < 64 && (nesting.watched[k] >> level & 1)) {
		nesting.watched[k] &= ~(1ull << level);
		*watched = 1;
	}
	return level;
}

uint64_t api_range_id(void)
{
	return __atomic_fetch_add(&next_range, 1, __ATOMIC_RELAXED);
}

void api_range(struct shim_thread *t, uint32_t op, uint64_t id, uint32_t name_id,
	       uint32_t domain_id, uint32_t color, uint32_t category)
{
	struct shm_rec_range r = {
		.hdr = { .type = SHM_REC_RANGE, .size = sizeof(r) },
		.ts = clock_now(), .id = id, .op = op, .name_id = name_id,
		.domain_id = domain_id, .color = color, .category = category,
	};

	thread_emit(t, &r, sizeof(r));
}

void api_mark(struct shim_thread *t, uint32_t name_id, uint32_t domain_id)
{
	api_mark_at(t, name_id, domain_id, clock_now());
}

void api_mark_at(struct shim_thread *t, uint32_t name_id, uint32_t domain_id, uint64_t ts)
{
	struct shm_rec_mark r = {
		.hdr = { .type = SHM_REC_MARK, .size = sizeof(r) },
		.ts = ts, .name_id = name_id, .domain_id = domain_id,
	};

	thread_emit(t, &r, sizeof(r));
}

void api_fork_child(void)
{
	pause_lock = 0;
}

/* The id of the "shimmer" domain; the entry is looked up once. */
static uint32_t domain_id(void)
{
	const struct intern_entry *e = __atomic_load_n(&shimmer_domain, __ATOMIC_ACQUIRE);

	if (!e) {
		e = intern_lookup(SHIMMER_DOMAIN, sizeof(SHIMMER_DOMAIN) - 1);
		__atomic_store_n(&shimmer_domain, e, __ATOMIC_RELEASE);
	}
	return intern_id(e);
}

/* Interns busy (BUSY_SHIM: interning makes no traced call, and a
 * handler's name must not wait for an entry we hold); errno is the
 * caller's. */
static void name_ids(struct shim_thread *t, const char *name, uint32_t *name_id,
		     uint32_t *dom)
{
	int saved = errno, b = shim_busy(t);

	*name_id = name ? intern_str(name) : 0;
	*dom = domain_id();
	shim_unbusy(t, b);
	errno = saved;
}

struct shim_thread *api_thread(struct shim_thread *t)
{
	if (t && shim_reentered(t)) {
		thread_reentered(t, SHM_FN_NONE, 0, 1);
		return 0;
	}
	return t;
}

/* Whether a range named name counts for a trigger (control.h). */
static int watched(const char *name)
{
	const struct intern_entry *e;
	int b;

	if (!control_watch() || !name || shim_reentered(&shim_tls))
		return 0;
	b = shim_busy(&shim_tls);
	e = intern_lookup(name, strlen(name));
	shim_unbusy(&shim_tls, b);
	return control_is_watched(e);
}

SHIM_EXPORT int shimmer_range_push(const char *name)
{
	int saved = errno;
	int level = api_push_level((uintptr_t)&shimmer_domain, watched(name));
	struct shim_thread *t = api_thread(shim_thread_traced());
	uint32_t id, dom;

	errno = saved;
	if (t) {
		name_ids(t, name, &id, &dom);
		api_range(t, SHM_RANGE_PUSH, 0, id, dom, 0, 0);
	}
	return level;
}

SHIM_EXPORT int shimmer_range_pop(void)
{
	struct shim_thread *t;
	int w, level = api_pop_level((uintptr_t)&shimmer_domain, &w);
	uint32_t id, dom;

	if (level >= 0 && (t = api_thread(shim_thread_traced()))) {
		name_ids(t, 0, &id, &dom);
		api_range(t, SHM_RANGE_POP, 0, 0, dom, 0, 0);
	}
	if (w) {
		int saved = errno;

		control_instance_done();
		errno = saved;
	}
	return level;
}

SHIM_EXPORT void shimmer_mark(const char *name)
{
	struct shim_thread *t = api_thread(shim_thread_traced());
	uint32_t id, dom;

	if (!t)
		return;
	name_ids(t, name, &id, &dom);
	api_mark(t, id, dom);
}

SHIM_EXPORT void shimmer_counter(const char *name, double value)
{
	struct shim_thread *t = api_thread(shim_thread_traced());
	struct shm_rec_counter r = { .hdr = { .type = SHM_REC_COUNTER, .size = sizeof(r) } };

	if (!t)
		return;
	name_ids(t, name, &r.name_id, &r.domain_id);
	r.ts = clock_now();
	r.value = value;
	thread_emit(t, &r, sizeof(r));
}

static void lock(void)
{
	while (__atomic_exchange_n(&pause_lock, 1, __ATOMIC_ACQUIRE))
		while (__atomic_load_n(&pause_lock, __ATOMIC_RELAXED))
			__builtin_ia32_pause();
}

int api_trylock(void)
{
	return !__atomic_load_n(&pause_lock, __ATOMIC_RELAXED) &&
	       !__atomic_exchange_n(&pause_lock, 1, __ATOMIC_ACQUIRE);
}

void api_unlock(void)
{
	__atomic_store_n(&pause_lock, 0, __ATOMIC_RELEASE);
}

/* The marker of a pause or resume, on the calling thread's ring, at ts
 * (0: now), never before the previous one. */
static void pause_mark(const char *name, uint64_t ts)
{
	static uint64_t last;
	struct shim_thread *t = thread_self();
	uint32_t id, dom;
	uint64_t now = clock_now();

	if (!t)
		return;
	if (!ts || ts > now)
		ts = now;
	if (ts < last)
		ts = last;
	last = ts;
	name_ids(t, name, &id, &dom);
	api_mark_at(t, id, dom, ts);
}

void api_intern_markers(void)
{
	(void)intern_str("shimmer.pause");
	(void)intern_str("shimmer.resume");
	(void)domain_id();
}

/* The region's word for the collector: recording or paused. */
static void publish_state(int paused)
{
	struct shm_region *r = shim.region.hdr;

	if (!r)
		return;
	if (paused)
		__atomic_and_fetch(&r->ctl_state, ~SHM_STATE_RECORDING, __ATOMIC_RELEASE);
	else
		__atomic_or_fetch(&r->ctl_state, SHM_STATE_RECORDING, __ATOMIC_RELEASE);
}

/* CUPTI behind the recording state: a malloc hook flipped it. */
int api_cupti_behind;

/* CUPTI's calls may allocate, for us: the one part of a command applied
 * that is in_shim, with signals blocked (shim_own_enter(); its caller
 * holds BUSY_SHIM). */
static void tell_cupti(int pause, int now)
{
	sigset_t mask;

	if (now) {
		shim_own_enter(&shim_tls, &mask);
		cupti_pause(pause);
		shim_own_leave(&shim_tls, &mask);
		__atomic_store_n(&api_cupti_behind, 0, __ATOMIC_RELAXED);
	} else {
		__atomic_store_n(&api_cupti_behind, 1, __ATOMIC_RELAXED);
	}
}

void api_cupti_catch_up(void)
{
	struct shim_thread *t = &shim_tls;
	int saved = errno;

	if (t->in_shim || t->busy || !api_trylock())
		return;
	if (__atomic_load_n(&api_cupti_behind, __ATOMIC_RELAXED))
		tell_cupti(__atomic_load_n(&shim.paused, __ATOMIC_RELAXED), 1);
	api_unlock();
	errno = saved;
}

void api_flip(int pause, uint64_t ts, int with_cupti)
{
	if (!__atomic_load_n(&shim_live.on, __ATOMIC_ACQUIRE))
		return;
	/* The markers are written whatever the state (pause_mark() does not
	 * ask shim.paused), at the edges of what is recorded: a pause's once
	 * recording has stopped, a resume's before it starts again, so every
	 * record of the process lies between a resume and a pause marker. */
	int b = shim_busy(&shim_tls);

	if (pause && !__atomic_load_n(&shim.paused, __ATOMIC_RELAXED)) {
		__atomic_store_n(&shim.paused, 1, __ATOMIC_SEQ_CST);
		shim_heap_store(SHM_MALLOC_OFF, __ATOMIC_SEQ_CST);
		tell_cupti(1, with_cupti);
		publish_state(1);
		pause_mark("shimmer.pause", ts);
	} else if (!pause && __atomic_load_n(&shim.paused, __ATOMIC_RELAXED)) {
		pause_mark("shimmer.resume", ts);
		tell_cupti(0, with_cupti);
		shim_heap_store(shim.mode, __ATOMIC_RELAXED);
		__atomic_store_n(&shim.paused, 0, __ATOMIC_RELEASE);
		publish_state(0);
	}
	shim_unbusy(&shim_tls, b);
}

void api_set_paused(int pause)
{
	int saved = errno;

	if (!__atomic_load_n(&shim_live.on, __ATOMIC_ACQUIRE))
		return;
	/* A command that came before this call is applied first: the
	 * latest word wins. */
	control_poll(0);
	lock();
	api_flip(pause, 0, 1);
	api_unlock();
	errno = saved;
}

void api_publish_state(void)
{
	publish_state(__atomic_load_n(&shim.paused, __ATOMIC_RELAXED));
}

SHIM_EXPORT void shimmer_pause(void)
{
	api_set_paused(1);
}

SHIM_EXPORT void shimmer_resume(void)
{
	api_set_paused(0);
}
