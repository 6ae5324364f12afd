/*
 * Malloc-family hooks.
 *
 * The default (sample) path of every hook is: one TLS state check, two
 * relaxed counter stores in the thread's slot, the sampler's compare and
 * subtract (allocations) or one filter load (frees), then a tail call to
 * the real function.  Everything else - sampling, `all` mode, unclaimed
 * threads, the bootstrap - is out of line in traced() and slow(), reached
 * through fast_traced() and slow_of().
 *
 * Bootstrap: dlsym allocates (calloc for its error state) while we look up
 * the real malloc.  Those requests, and any made before heap_boot()
 * finishes, come from a static bump arena; its blocks are never freed
 * (free ignores them) and realloc moves them to the real heap.
 *
 * Sampled-block bookkeeping: a block leaves the sampled set before the real
 * free/realloc runs, so another thread reusing the address at once cannot
 * have its own sample erased; a failed realloc puts it back.
 *
 * pymalloc's arenas (pyarena.h) take the same paths as calls of their own
 * (heap_arena_mmap(), heap_arena_munmap()): an arena's map as an
 * allocation, its unmap as a release (free's paths, with the pages it
 * gave back as its bytes), the real call a system call.
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <malloc.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "heap.h"
#include "pyarena.h"
#include "real.h"
#include "sampled.h"
#include "shim.h"
#include "stack.h"

#define ARENA_BYTES (64u * 1024u)
/* The sampled set's filter (sampled.h).  A free of an unsampled block whose
 * counter a live sample raised (about live samples / FILTER_BYTES of them)
 * pays a set lookup, a miss of its own: with 1 MiB, 0.37% of frees on a
 * heap of 2 GiB of 64 KiB blocks (about 3,900 live samples), where 32 KiB
 * sent 11% of them there (bench/RESULTS.md, cold cache).  Mapped, read through the zero page
 * until a sample lands in a page; the frees of hot pages read few lines
 * whatever its size. */
#define FILTER_BYTES (1024u * 1024u)
#define SAMPLED_CAP (1u << 18)

struct real_heap {
	void *(*malloc)(size_t);
	void (*free)(void *);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	void *(*memalign)(size_t, size_t);
	void *(*valloc)(size_t);
	void *(*pvalloc)(size_t);
};

/* One intercepted call, so the slow paths are written once. */
struct call {
	unsigned int fn;
	void *old;      /* free, realloc, reallocarray; an arena's unmap */
	size_t n;       /* size; calloc and reallocarray: nmemb */
	size_t m;       /* calloc and reallocarray: size; aligned: alignment */
	void **memptr;  /* posix_memalign */
	int rc;         /* posix_memalign's result; an arena unmap's (0 or -1) */
};

/* free and an arena's unmap: the calls that only release (free's paths). */
#define releases_only(fn) SHM_FN_RELEASES_ONLY(fn)

static struct real_heap real;
static int booted;
static struct sampled heap_set;
static _Alignas(4096) uint8_t arena[ARENA_BYTES];
static size_t arena_used;

static inline int in_arena(const void *p)
{
	return (uintptr_t)p - (uintptr_t)arena < ARENA_BYTES;
}

/* Each arena block is preceded by its size, for realloc. */
static void *arena_alloc(size_t n, size_t align)
{
	size_t cur = __atomic_load_n(&arena_used, __ATOMIC_RELAXED), off;

	if (align < 16)
		align = 16;
	if ((align & (align - 1)) || n > ARENA_BYTES || align > ARENA_BYTES / 2)
		return 0;
	do {
		off = (cur + sizeof(uint64_t) + align - 1) & ~(align - 1);
		if (off + n > ARENA_BYTES)
			return 0;
	} while (!__atomic_compare_exchange_n(&arena_used, &cur, off + n, 1, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	memcpy(arena + off - sizeof(uint64_t), &(uint64_t){ n }, sizeof(uint64_t));
	return arena + off;
}

/* calloc's and reallocarray's request, SIZE_MAX when it overflows. */
static inline uint64_t product(size_t n, size_t m)
{
	size_t b;

	return __builtin_mul_overflow(n, m, &b) ? SIZE_MAX : b;
}

static inline uint64_t bytes_of(unsigned int fn, size_t n, size_t m)
{
	switch (fn) {
	case SHM_FN_FREE:
		return 0;
	case SHM_FN_PYMALLOC_ARENA_MUNMAP:
		return n; /* the pages given back */
	case SHM_FN_CALLOC:
	case SHM_FN_REALLOCARRAY:
		return product(n, m);
	default:
		return n;
	}
}

static uint64_t call_bytes(const struct call *c)
{
	return bytes_of(c->fn, c->n, c->m);
}

static void *call_real(struct call *c);

/* The allocator is not resolved yet: resolve it, or use the arena while
 * resolving (we are inside dlsym) or if resolution found nothing. */
static void *call_boot(struct call *c)
{
	size_t n = call_bytes(c), align = 16, old;
	void *p;

	if (!shim_tls.in_shim && !__atomic_load_n(&booted, __ATOMIC_ACQUIRE)) {
		heap_boot();
		return call_real(c);
	}
	switch (c->fn) {
	case SHM_FN_FREE:
		return 0;
	case SHM_FN_VALLOC:
	case SHM_FN_PVALLOC:
		align = 4096;
		break;
	case SHM_FN_POSIX_MEMALIGN:
	case SHM_FN_ALIGNED_ALLOC:
	case SHM_FN_MEMALIGN:
		align = c->m;
		break;
	}
	p = arena_alloc(n, align);
	if (p && c->old && in_arena(c->old)) {
		memcpy(&old, (uint8_t *)c->old - sizeof(uint64_t), sizeof(old));
		memcpy(p, c->old, old < n ? old : n);
	}
	if (c->fn == SHM_FN_POSIX_MEMALIGN) {
		c->rc = p ? 0 : ENOMEM;
		if (p)
			*c->memptr = p;
	}
	if (!p)
		errno = ENOMEM;
	return p;
}

/* realloc of an arena block: move it to the real heap. */
static void *arena_move(struct call *c)
{
	uint64_t old, n = call_bytes(c);
	void *p;

	if (n == SIZE_MAX || !real.malloc)
		return call_boot(c);
	p = real.malloc(n);
	if (p) {
		memcpy(&old, (uint8_t *)c->old - sizeof(uint64_t), sizeof(old));
		memcpy(p, c->old, old < n ? old : n);
	}
	return p;
}

#define HAVE(f) likely(real.f != 0)

/*
 * reallocarray() as glibc's does it: ENOMEM when the product overflows,
 * else realloc().  Not the real reallocarray: glibc's calls realloc
 * through the PLT, that is, ours, which took it for a second call made
 * inside the first: counted twice in sample mode, and in `all` mode taken
 * for a signal handler's and counted as a dropped record (every `ls` and
 * `sort` lost 3 events).
 */
static inline void *real_reallocarray(void *old, size_t n, size_t m)
{
	size_t b;

	if (__builtin_mul_overflow(n, m, &b)) {
		errno = ENOMEM;
		return 0;
	}
	return real.realloc(old, b);
}

static void *call_real(struct call *c)
{
	switch (c->fn) {
	case SHM_FN_MALLOC:
		return HAVE(malloc) ? real.malloc(c->n) : call_boot(c);
	case SHM_FN_FREE:
		if (!in_arena(c->old) && HAVE(free))
			real.free(c->old);
		return 0;
	case SHM_FN_CALLOC:
		return HAVE(calloc) ? real.calloc(c->n, c->m) : call_boot(c);
	case SHM_FN_REALLOC:
		if (unlikely(in_arena(c->old)))
			return arena_move(c);
		return HAVE(realloc) ? real.realloc(c->old, c->n) : call_boot(c);
	case SHM_FN_REALLOCARRAY:
		if (unlikely(in_arena(c->old)))
			return arena_move(c);
		return HAVE(realloc) ? real_reallocarray(c->old, c->n, c->m) : call_boot(c);
	case SHM_FN_POSIX_MEMALIGN:
		if (!HAVE(posix_memalign))
			return call_boot(c);
		c->rc = real.posix_memalign(c->memptr, c->m, c->n);
		return c->rc ? 0 : *c->memptr;
	case SHM_FN_ALIGNED_ALLOC:
		return HAVE(aligned_alloc) ? real.aligned_alloc(c->m, c->n) : call_boot(c);
	case SHM_FN_MEMALIGN:
		return HAVE(memalign) ? real.memalign(c->m, c->n) : call_boot(c);
	case SHM_FN_VALLOC:
		return HAVE(valloc) ? real.valloc(c->n) : call_boot(c);
	case SHM_FN_PYMALLOC_ARENA_MMAP: {
		void *p = pyarena_map(c->n);

		return p == MAP_FAILED ? 0 : p;
	}
	case SHM_FN_PYMALLOC_ARENA_MUNMAP:
		c->rc = pyarena_sys_munmap(c->old, c->n);
		return 0;
	default:
		return HAVE(pvalloc) ? real.pvalloc(c->n) : call_boot(c);
	}
}

/* call_real() of a malloc or free given by its arguments, for callers
 * that build no struct call (all_malloc(), all_free()). */
static __attribute__((noinline, cold)) void *call_real_args(unsigned int fn, void *old, size_t n)
{
	struct call c = { .fn = fn, .old = old, .n = n };

	return call_real(&c);
}

/* call_real() where the compiler knows the function: malloc and free
 * without the switch (`all` mode's hot path).  c is NULL for a malloc or
 * free whose caller built none: a struct whose address escapes would be
 * filled in memory on every call, for a fallback it never takes. */
static inline __attribute__((always_inline)) void *
call_real_known(struct call *c, unsigned int fn, void *old, size_t n)
{
	if (fn == SHM_FN_MALLOC && HAVE(malloc))
		return real.malloc(n);
	if (fn == SHM_FN_FREE && !in_arena(old) && HAVE(free)) {
		real.free(old);
		return 0;
	}
	return c ? call_real(c) : call_real_args(fn, old, n);
}

void heap_boot(void)
{
	sigset_t mask;

	/* dlsym allocates: ours (once) */
	shim_own_enter(&shim_tls, &mask);
	__atomic_store_n(&real.malloc, real_next("malloc"), __ATOMIC_RELEASE);
	__atomic_store_n(&real.free, real_next("free"), __ATOMIC_RELEASE);
	__atomic_store_n(&real.calloc, real_next("calloc"), __ATOMIC_RELEASE);
	__atomic_store_n(&real.realloc, real_next("realloc"), __ATOMIC_RELEASE);
	__atomic_store_n(&real.posix_memalign, real_next("posix_memalign"), __ATOMIC_RELEASE);
	__atomic_store_n(&real.aligned_alloc, real_next("aligned_alloc"), __ATOMIC_RELEASE);
	__atomic_store_n(&real.memalign, real_next("memalign"), __ATOMIC_RELEASE);
	__atomic_store_n(&real.valloc, real_next("valloc"), __ATOMIC_RELEASE);
	__atomic_store_n(&real.pvalloc, real_next("pvalloc"), __ATOMIC_RELEASE);
	__atomic_store_n(&booted, 1, __ATOMIC_RELEASE);
	shim_own_leave(&shim_tls, &mask);
}

/* Where fn, found at p, is defined: its object's link map, NULL when p is
 * nobody's or is a program's canonical PLT slot (SHN_UNDEF: a non-PIE
 * executable that takes fn's address, as Debian's python3 does, has one;
 * it jumps to the real definition and is none itself). */
static const struct link_map *defined_in(void *p)
{
	const ElfW(Sym) *sym = NULL;
	struct link_map *m = NULL;
	Dl_info d;

	if (!p || !dladdr1(p, &d, (void **)&sym, RTLD_DL_SYMENT) || !sym ||
	    sym->st_shndx == SHN_UNDEF || !dladdr1(p, &d, (void **)&m, RTLD_DL_LINKMAP))
		return NULL;
	return m;
}

const char *heap_preempted(void)
{
	static const char *const fns[] = { "malloc", "free", "calloc", "realloc" };
	const struct link_map *self = NULL, *m, *main_map;
	Dl_info d;
	void *h;
	size_t i;

	if (!dladdr1((void *)heap_preempted, &d, (void **)&self, RTLD_DL_LINKMAP) || !self)
		return NULL;
	/* The executable, first in the lookup order: a definition of its own
	 * (an allocator linked in). */
	for (m = self; m->l_prev; m = m->l_prev)
		;
	main_map = m;
	for (i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
		if (defined_in(dlsym(RTLD_DEFAULT, fns[i])) == main_map)
			return "the executable";
	/* Then the objects loaded before ours (LD_PRELOAD's ahead of it), in
	 * the order the lookup takes them: one that defines any of them. */
	for (m = main_map->l_next; m && m != self; m = m->l_next) {
		if (!m->l_name || !*m->l_name || !(h = dlopen(m->l_name, RTLD_LAZY | RTLD_NOLOAD)))
			continue;
		for (i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
			if (defined_in(dlsym(h, fns[i])) == m)
				break;
		dlclose(h);
		if (i < sizeof(fns) / sizeof(fns[0]))
			return m->l_name;
	}
	return NULL;
}

int heap_setup(int mode)
{
	if (mode != SHM_MALLOC_SAMPLE || heap_set.keys)
		return 0;
	return sampled_init(&heap_set, FILTER_BYTES, SAMPLED_CAP);
}

void heap_fork_child(void)
{
	if (heap_set.keys)
		sampled_clear(&heap_set);
}

/*
 * In `all` mode every call is shipped with its start time, but only one in
 * ALL_TIMED_EVERY per thread, on average, also reads the clock when it
 * returns: a TSC read costs about as much as glibc's whole malloc.  The
 * calls to time are a countdown of random gaps (1 to 2 x ALL_TIMED_EVERY
 * - 1 calls), never every Nth call: a program's heap calls repeat with a
 * period (malloc, free, malloc, free...), and every 8th call of such a
 * loop is always the same function, so one function was timed on every
 * tick and the other never.  A random gap gives every call the same
 * chance whatever the rhythm, so the summary's durations stay unbiased.
 * The draw, from the thread's sampler (unused in `all` mode), is made
 * only on a timed call.  Sampled calls and CUDA calls are always timed.
 */
#define ALL_TIMED_EVERY 8u
static __thread unsigned all_gap __attribute__((tls_model("initial-exec")));

static inline int all_timed(struct shim_thread *t)
{
	unsigned g = all_gap;

	if (likely(g > 1)) {
		all_gap = g - 1;
		return 0;
	}
	/* uniform in 1 .. 2N-1 by a multiply, not a division */
	all_gap = 1 + (unsigned)(((sampler_rand(&t->sampler) >> 32) * (2 * ALL_TIMED_EVERY - 1)) >> 32);
	return 1;
}

/*
 * The process's heap order (wire.h): one counter for all threads, so that
 * a release and the allocation that reuses its address are numbered in
 * the order they happened (the allocator's own synchronization orders
 * them).  Only an allocation takes a number, with the one locked
 * instruction of the pair: its order is twice it.  A release reads the
 * counter (a plain load on x86) before the real call can hand the address
 * to another thread, and its order is twice that, plus one: at least its
 * block's number was taken before the load (the block was ours to free),
 * and the allocation that reuses the address takes a number after it, so
 * birth < release < rebirth without a second locked instruction (which
 * would also wait for every store before it, the last record's among
 * them, to reach the cache).  Only calls that ship a record take part.
 */
static uint64_t heap_seq;

static inline uint64_t heap_order_birth(void)
{
	return 2 * __atomic_add_fetch(&heap_seq, 1, __ATOMIC_RELAXED);
}

/* Acquire: the real free's stores come after the load (on x86 they
 * would anyway; the compiler must not move it later either). */
static inline uint64_t heap_order_release(void)
{
	return 2 * __atomic_load_n(&heap_seq, __ATOMIC_ACQUIRE) + 1;
}

/*
 * Performs a traced call: mode is SAMPLE or ALL; sampled says the sampler
 * chose this allocation.  Ships the record when the mode or the sampled set
 * says so.  c may be NULL for a malloc or free (call_real_known()).
 *
 * errno is the real call's when it returns: nothing after the real call
 * changes it (stack_native(), the emits, thread_drop() each preserve it),
 * so it is not saved around them.
 */
static inline __attribute__((always_inline)) void *
traced_inline(struct shim_thread *t, struct call *c, const unsigned int fn, void *const old,
	      const size_t n, int mode, int sampled)
{
	/* fn, old and n are c's, passed apart: where they are constants (the
	 * copies in all_malloc() and all_free()) the compiler folds what
	 * depends on them, which it does not through c (its address
	 * escapes into call_real()). */
	struct shm_rec_heap r = {
		.hdr = { .type = SHM_REC_HEAP, .size = sizeof(r), .fn = (uint16_t)fn,
			 .flags = SHM_F_TIMED },
		.size = bytes_of(fn, n, c ? c->m : 0),
	};
	int released = 0, failed;
	void *p;

	tls_word_or(t, TLS_BUSY(BUSY_HEAP));
	if (mode == SHM_MALLOC_SAMPLE && old)
		released = sampled_remove(&heap_set, old);
	if (mode == SHM_MALLOC_SAMPLE && !sampled && !released) {
		p = call_real(c);
		goto done;
	}
	/* The heap order (wire.h): a release takes its number before the
	 * real call can hand the address to another thread, an allocation
	 * after the real call handed it to us. */
	if (old)
		r.seq_free = heap_order_release();
	r.t_begin = clock_now();
	p = call_real_known(c, fn, old, n);
	if (p && (shm_fn_info[fn].flags & SHM_FNF_ALLOC))
		r.seq = heap_order_birth();
	if (mode == SHM_MALLOC_SAMPLE || all_timed(t))
		r.t_end = clock_now();
	else
		r.hdr.flags = 0;
	switch (fn) {
	case SHM_FN_FREE:
		r.ptr = (uintptr_t)old;
		failed = 0;
		break;
	case SHM_FN_PYMALLOC_ARENA_MUNMAP:
		r.ptr = (uintptr_t)old;
		failed = c->rc != 0;
		break;
	case SHM_FN_REALLOC:
	case SHM_FN_REALLOCARRAY:
		r.ptr = (uintptr_t)p;
		r.aux = (uintptr_t)old;
		failed = !p && r.size;
		break;
	case SHM_FN_POSIX_MEMALIGN:
	case SHM_FN_ALIGNED_ALLOC:
	case SHM_FN_MEMALIGN:
		r.ptr = (uintptr_t)p;
		r.aux = c->m;
		failed = !p;
		break;
	default:
		r.ptr = (uintptr_t)p;
		failed = !p;
	}
	if (failed) {
		r.hdr.flags |= SHM_F_FAILED;
		/* The old block survives a failed realloc. */
		if (released && sampled_insert(&heap_set, old) == 0)
			released = 0;
	}
	if (unlikely(!t->ring.slot))
		goto ship;
	if (sampled) {
		r.hdr.flags |= SHM_F_SAMPLED;
		if (p && sampled_insert(&heap_set, p) < 0) {
			/* Better a counted loss than a block whose free we
			 * could never report. */
			thread_drop(t, 1);
			r.hdr.flags &= (uint16_t)~SHM_F_SAMPLED;
			sampled = 0;
		}
	}
	if (mode == SHM_MALLOC_SAMPLE && !sampled && !released)
		goto done;
	/* A record the full ring would drop is dropped here, before its stack
	 * is unwound for nothing (an overloaded collector must not make every
	 * call slower still). */
	if (unlikely(thread_would_drop_heap(t, sizeof(r)))) {
		thread_drop(t, 1);
		goto done;
	}
	/* Every shipped allocation carries its stack: in `all` mode that
	 * makes leaks exact, in sample mode it costs one capture per sample.
	 * And its Python frames, where the thread runs Python: the line of
	 * the user's code, which the interpreter's native frames do not
	 * name (one load when the process has no Python). */
	if (!failed && (shm_fn_info[fn].flags & SHM_FNF_ALLOC) &&
	    (sampled || mode == SHM_MALLOC_ALL)) {
		r.stack_id = stack_native(t);
		r.pystack_id = stack_python(t);
	}
ship:
	thread_emit_heap(t, r);
done:
	tls_word_and(t, ~TLS_BUSY(BUSY_HEAP));
	return p;
}

/* traced() for any call; the hot calls of `all` mode have their own
 * copies, made by the compiler for a known function (all_malloc()). */
static __attribute__((noinline)) void *traced(struct shim_thread *t, struct call *c, int mode,
					      int sampled)
{
	return traced_inline(t, c, c->fn, c->old, c->n, mode, sampled);
}

/*
 * A call made on a thread that was recording another (busy): a signal
 * handler's.  It is counted, and the record it would have made is counted
 * as dropped, so that stored + dropped is still every call; nothing the
 * interrupted hook is using is touched, but the lock-free sampled set (a
 * sampled block's release must leave it before the real free).
 */
static __attribute__((noinline)) void *reentered(struct shim_thread *t, struct call *c, int mode)
{
	uint64_t n = call_bytes(c);
	int lost = mode == SHM_MALLOC_ALL;
	void *p;

	if (mode == SHM_MALLOC_SAMPLE) {
		if (c->old && sampled_remove(&heap_set, c->old))
			lost = 1;
		if ((shm_fn_info[c->fn].flags & SHM_FNF_ALLOC) && sampler_take(&t->sampler, n))
			lost = 1;
	}
	p = call_real(c);
	thread_reentered(t, c->fn, n, lost);
	return p;
}

/* ---- calls made before the constructor ---- */

#define EARLY_MAX 4096u

struct early_call {
	uint16_t fn;    /* written last (release): 0 while being filled */
	uint16_t failed;
	uint64_t ptr;   /* the block returned, or freed */
	uint64_t size;
	uint64_t aux;   /* realloc's old block; the alignment */
};

static struct early_call early[EARLY_MAX];
static uint32_t early_n;
/* calls past EARLY_MAX: counted, their records lost */
static uint64_t early_lost_count[SHM_FN_COUNT], early_lost_bytes[SHM_FN_COUNT], early_lost;

static __attribute__((noinline)) void *early_record(struct call *c)
{
	uint32_t i = __atomic_fetch_add(&early_n, 1, __ATOMIC_RELAXED);
	void *p = call_real(c);
	int saved = errno;
	uint64_t n = call_bytes(c);
	struct early_call *e;

	if (i >= EARLY_MAX) {
		__atomic_fetch_add(&early_lost_count[c->fn], 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&early_lost_bytes[c->fn], count_bytes(n), __ATOMIC_RELAXED);
		__atomic_fetch_add(&early_lost, 1, __ATOMIC_RELAXED);
		errno = saved;
		return p;
	}
	e = &early[i];
	e->size = n;
	e->ptr = releases_only(c->fn) ? (uintptr_t)c->old : (uintptr_t)p;
	switch (c->fn) {
	case SHM_FN_REALLOC:
	case SHM_FN_REALLOCARRAY:
		e->aux = (uintptr_t)c->old;
		break;
	case SHM_FN_POSIX_MEMALIGN:
	case SHM_FN_ALIGNED_ALLOC:
	case SHM_FN_MEMALIGN:
		e->aux = c->m;
		break;
	default:
		e->aux = 0;
	}
	e->failed = c->fn == SHM_FN_PYMALLOC_ARENA_MUNMAP ? c->rc != 0
						       : !releases_only(c->fn) && !p && (n || !c->old);
	__atomic_store_n(&e->fn, (uint16_t)c->fn, __ATOMIC_RELEASE);
	errno = saved;
	return p;
}

/* One early call into t's ring, as traced() would have shipped it. */
static void early_replay(struct shim_thread *t, const struct early_call *e, int mode)
{
	unsigned fnf = shm_fn_info[e->fn].flags;
	uint64_t old = releases_only(e->fn) ? e->ptr : (fnf & SHM_FNF_FREE) ? e->aux : 0;
	uint64_t ptr = e->failed ? 0 : e->ptr;
	struct shm_rec_heap r = {
		.hdr = { .type = SHM_REC_HEAP, .size = sizeof(r), .fn = e->fn },
		.ptr = ptr, .size = e->size, .aux = e->aux,
	};
	int ship = mode == SHM_MALLOC_ALL;

	thread_count(t, e->fn, e->size);
	if (e->failed)
		r.hdr.flags |= SHM_F_FAILED;
	if (mode == SHM_MALLOC_SAMPLE && old && !e->failed && sampled_remove(&heap_set, (void *)old))
		ship = 1;
	if (mode == SHM_MALLOC_SAMPLE && (fnf & SHM_FNF_ALLOC) && ptr &&
	    sampler_take(&t->sampler, e->size) && sampled_insert(&heap_set, (void *)ptr) == 0) {
		ship = 1;
		r.hdr.flags |= SHM_F_SAMPLED;
	}
	if (!ship)
		return;
	if (old)
		r.seq_free = heap_order_release();
	if (ptr && (fnf & SHM_FNF_ALLOC))
		r.seq = heap_order_birth();
	r.t_begin = clock_now();
	thread_emit_heap(t, r);
}

void heap_early_end(int traced)
{
	uint32_t n = __atomic_load_n(&early_n, __ATOMIC_RELAXED), i;
	struct shim_thread *t;
	int mode;

	/* traced, enable() has set the mode in force */
	if (!traced)
		shim_heap_store(SHM_MALLOC_OFF, __ATOMIC_RELEASE);
	mode = shim_heap_mode();
	if (!traced || mode == SHM_MALLOC_OFF || !(t = thread_self()) || !t->ring.slot)
		return;
	if (n > EARLY_MAX)
		n = EARLY_MAX;
	for (i = 0; i < n; i++)
		if (__atomic_load_n(&early[i].fn, __ATOMIC_ACQUIRE))
			early_replay(t, &early[i], mode);
	for (i = 1; i < SHM_FN_COUNT; i++)
		if (early_lost_count[i]) {
			count_add(&t->ring.slot->count[i], early_lost_count[i]);
			count_add(&t->ring.slot->bytes[i], early_lost_bytes[i]);
		}
	if (early_lost && mode == SHM_MALLOC_ALL)
		thread_drop(t, early_lost);
	if (early_n)
		log_debug("%u heap calls made before the constructor recorded, %llu lost", n,
			  (unsigned long long)early_lost);
}

/* Anything but the sample-mode fast path: untraced, `all`, unclaimed. */
static void *slow(struct call *c)
{
	struct shim_thread *t;
	int mode = shim_heap_mode();
	uint64_t n;

	/* before the constructor: kept aside (heap_early_end()); our own
	 * calls (in_shim: dlsym's while we boot) are not the program's */
	if (unlikely(mode == HEAP_EARLY))
		return !shim_tls.in_shim && (!releases_only(c->fn) || c->old) ? early_record(c)
									       : call_real(c);
	/* A control command came: this call is recorded as it says. */
	if (unlikely(!control_current())) {
		control_poll(1);
		mode = shim_heap_mode();
	}

	/* glibc's thread exit frees NULL after the key destructors ran: it
	 * must not claim a slot that nobody would retire. */
	if (mode == SHM_MALLOC_OFF || (releases_only(c->fn) && !c->old) ||
	    !(t = shim_thread_traced_from(1)))
		return call_real(c);
	if (unlikely(t->busy))
		return reentered(t, c, mode);
	n = call_bytes(c);
	thread_count(t, c->fn, n);
	return traced(t, c, mode,
		      mode == SHM_MALLOC_SAMPLE && (shm_fn_info[c->fn].flags & SHM_FNF_ALLOC) &&
			      sampler_take(&t->sampler, n));
}

_Static_assert(offsetof(struct shim_thread, busy) == offsetof(struct shim_thread, state) + 1 &&
	       offsetof(struct shim_thread, in_shim) == offsetof(struct shim_thread, state) + 2 &&
	       offsetof(struct shim_thread, word) == offsetof(struct shim_thread, state),
	       "state, busy and in_shim make one word");

/* TS_READY, not busy, not in_shim, sample mode: one compare of the word
 * the three share (little-endian: state is its low byte) and one load. */
static inline int fast(const struct shim_thread *t)
{
	return likely(t->word == TS_READY && shim_heap_mode() == SHM_MALLOC_SAMPLE &&
		      control_current());
}

/* The same word in `all` mode: the thread records every call, and
 * nothing (a control command, a pause, a slot to claim) asks for slow(). */
static inline int fast_all(const struct shim_thread *t)
{
	return t->word == TS_READY && shim_heap_mode() == SHM_MALLOC_ALL && control_current();
}

/* Nothing of the heap is recorded (paused, or SHIMMER_MALLOC=off) and no
 * control command waits: the call goes straight through, inline, once the
 * allocator is resolved.  slow() would do the same through two more
 * calls. */
static inline int heap_off(void)
{
	return shim_heap_mode() == SHM_MALLOC_OFF && control_current();
}

/* The sample-mode fast path of an allocation; returns 0 when the call must
 * go through traced() because the sampler picked it. */
static inline int fast_alloc(struct shim_thread *t, unsigned int fn, uint64_t n)
{
	/* A call the sampler passes asked for less than its countdown:
	 * counted without count_bytes()'s clamp, which a refused request
	 * (above PTRDIFF_MAX, always sampled) takes on the other branch. */
	if (likely(!sampler_take(&t->sampler, n))) {
		thread_count_granted(t, fn, n);
		return 1;
	}
	thread_count(t, fn, n);
	return 0;
}

/*
 * The hooks' way out of the fast path.  The call is built here rather than
 * in the hook: its address escapes, so built there it would cost every
 * call a stack frame and the stores that fill it, and the real function
 * could not be tail-called.
 */
static __attribute__((noinline)) void *fast_traced(unsigned int fn, void *old, size_t n,
						     size_t m, int sampled)
{
	struct call c = { .fn = fn, .old = old, .n = n, .m = m };

	return traced(&shim_tls, &c, SHM_MALLOC_SAMPLE, sampled);
}

/*
 * `all` mode's malloc and free when fast_all(): slow() without the checks
 * fast_all() made, and traced() compiled for the one function.  free(NULL)
 * is neither counted nor recorded, as slow() and sample mode's free() do.
 */
static __attribute__((noinline)) void *all_malloc(size_t n)
{
	struct shim_thread *t = &shim_tls;

	thread_count(t, SHM_FN_MALLOC, n);
	return traced_inline(t, 0, SHM_FN_MALLOC, 0, n, SHM_MALLOC_ALL, 0);
}

static __attribute__((noinline)) void all_free(void *p)
{
	struct shim_thread *t = &shim_tls;

	if (!p)
		return;
	thread_count(t, SHM_FN_FREE, 0);
	traced_inline(t, 0, SHM_FN_FREE, p, 0, SHM_MALLOC_ALL, 0);
}

static __attribute__((noinline)) void *slow_of(unsigned int fn, void *old, size_t n, size_t m)
{
	struct call c = { .fn = fn, .old = old, .n = n, .m = m };

	return slow(&c);
}

SHIM_EXPORT void *malloc(size_t n)
{
	struct shim_thread *t = &shim_tls;

	if (fast(t)) {
		if (likely(fast_alloc(t, SHM_FN_MALLOC, n)))
			return real.malloc(n);
		return fast_traced(SHM_FN_MALLOC, 0, n, 0, 1);
	}
	if (heap_off() && HAVE(malloc))
		return real.malloc(n);
	if (fast_all(t) && HAVE(malloc))
		return all_malloc(n);
	return slow_of(SHM_FN_MALLOC, 0, n, 0);
}

SHIM_EXPORT void free(void *p)
{
	struct shim_thread *t = &shim_tls;

	if (fast(t)) {
		/* free(NULL) frees nothing and is not counted: as `all` mode
		 * and slow() (heap.h) */
		if (likely(p != NULL))
			thread_count(t, SHM_FN_FREE, 0);
		if (likely(!sampled_maybe(&heap_set, p) && !in_arena(p))) {
			real.free(p);
			return;
		}
		fast_traced(SHM_FN_FREE, p, 0, 0, 0);
		return;
	}
	if (heap_off() && HAVE(free) && !in_arena(p)) {
		real.free(p);
		return;
	}
	if (fast_all(t) && HAVE(free) && !in_arena(p)) {
		all_free(p);
		return;
	}
	slow_of(SHM_FN_FREE, p, 0, 0);
}

SHIM_EXPORT void *calloc(size_t n, size_t m)
{
	struct shim_thread *t = &shim_tls;

	if (fast(t)) {
		if (likely(fast_alloc(t, SHM_FN_CALLOC, product(n, m))))
			return real.calloc(n, m);
		return fast_traced(SHM_FN_CALLOC, 0, n, m, 1);
	}
	if (heap_off() && HAVE(calloc))
		return real.calloc(n, m);
	return slow_of(SHM_FN_CALLOC, 0, n, m);
}

static inline void *realloc_common(unsigned int fn, void *old, size_t n, size_t m)
{
	struct shim_thread *t = &shim_tls;
	uint64_t bytes = fn == SHM_FN_REALLOC ? n : product(n, m);
	int s;

	if (fast(t)) {
		s = !fast_alloc(t, fn, bytes);
		if (likely(!s && !sampled_maybe(&heap_set, old) && !in_arena(old)))
			return fn == SHM_FN_REALLOC ? real.realloc(old, n)
						    : real_reallocarray(old, n, m);
		return fast_traced(fn, old, n, m, s);
	}
	if (heap_off() && HAVE(realloc) && !in_arena(old))
		return fn == SHM_FN_REALLOC ? real.realloc(old, n) : real_reallocarray(old, n, m);
	return slow_of(fn, old, n, m);
}

SHIM_EXPORT void *realloc(void *old, size_t n)
{
	return realloc_common(SHM_FN_REALLOC, old, n, 0);
}

SHIM_EXPORT void *reallocarray(void *old, size_t n, size_t m)
{
	return realloc_common(SHM_FN_REALLOCARRAY, old, n, m);
}

/* The aligned and page-sized allocators are rare: they take the generic
 * path, which costs a few nanoseconds more. */
static inline void *aligned_common(struct call *c)
{
	struct shim_thread *t = &shim_tls;

	if (fast(t)) {
		if (likely(fast_alloc(t, c->fn, c->n)))
			return call_real(c);
		return traced(t, c, SHM_MALLOC_SAMPLE, 1);
	}
	return slow(c);
}

SHIM_EXPORT int posix_memalign(void **memptr, size_t align, size_t n)
{
	struct call c = { .fn = SHM_FN_POSIX_MEMALIGN, .n = n, .m = align, .memptr = memptr };

	aligned_common(&c);
	return c.rc;
}

SHIM_EXPORT void *aligned_alloc(size_t align, size_t n)
{
	struct call c = { .fn = SHM_FN_ALIGNED_ALLOC, .n = n, .m = align };

	return aligned_common(&c);
}

SHIM_EXPORT void *memalign(size_t align, size_t n)
{
	struct call c = { .fn = SHM_FN_MEMALIGN, .n = n, .m = align };

	return aligned_common(&c);
}

SHIM_EXPORT void *valloc(size_t n)
{
	struct call c = { .fn = SHM_FN_VALLOC, .n = n };

	return aligned_common(&c);
}

SHIM_EXPORT void *pvalloc(size_t n)
{
	struct call c = { .fn = SHM_FN_PVALLOC, .n = n };

	return aligned_common(&c);
}

/* ---- pymalloc's arenas (pyarena.h) ---- */

void *heap_arena_mmap(size_t len)
{
	struct call c = { .fn = SHM_FN_PYMALLOC_ARENA_MMAP, .n = len };
	struct shim_thread *t = &shim_tls;

	if (fast(t))
		return fast_alloc(t, c.fn, len) ? call_real(&c) : traced(t, &c, SHM_MALLOC_SAMPLE, 1);
	return slow(&c);
}

int heap_arena_munmap(void *p, size_t len)
{
	struct call c = { .fn = SHM_FN_PYMALLOC_ARENA_MUNMAP, .old = p, .n = len };
	struct shim_thread *t = &shim_tls;

	if (fast(t)) {
		thread_count(t, c.fn, len);
		if (!sampled_maybe(&heap_set, p))
			call_real(&c);
		else
			traced(t, &c, SHM_MALLOC_SAMPLE, 0);
	} else {
		slow(&c);
	}
	return c.rc;
}
