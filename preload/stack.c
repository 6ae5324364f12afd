/*
 * Stack capture and interning.  Cost per captured native stack: the walk
 * (unwind.h; about a nanosecond a frame where it matches the thread's
 * previous walk, a rule lookup and a step elsewhere), then, unless the pcs
 * are the previous capture's, a hash of the pcs and one probe and compare
 * in the table.  A new stack also writes its record.
 *
 * A capture the walk refuses is made by unw_backtrace (cached per return
 * address by libunwind after the first time).  libunwind's caching policy
 * is left at its default: unw_backtrace's cache of return addresses is per
 * thread whatever the policy, and a capture of known addresses takes no
 * lock and makes no system call.  The policy governs the DWARF cache of a
 * return address's first unwind, which masks signals around its lock (and
 * around dl_iterate_phdr, whatever the policy); and Debian 12's libunwind
 * 1.6.2, built without per-thread caches, turns UNW_CACHE_PER_THREAD into
 * UNW_CACHE_GLOBAL anyway.
 *
 * The tables are process-wide (stacktab.h); the emit callback writes the
 * record into the capturing thread's ring.  Each thread keeps its last
 * walk and the id it got in a struct walk of its slot's (8 KiB each, one
 * per slot, mapped once and touched only when used): in TLS it would take
 * that much from every thread's stack, which for a small one is too much.
 * A slot's next owner starts afresh (the slot's generation tells).
 */
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "log.h"
#include "modules.h"
#include "ownfds.h"
#include "pyframes.h"
#include "stack.h"
#include "stacktab.h"
#include "unwind.h"

#define NATIVE_CAP (1u << 16)
#define NATIVE_WORDS (8u << 20) /* 64 MiB of pcs, reserved, not committed */
/* Python stacks: 2 words a frame.  Host allocations carry them too, and
 * a PyTorch script's imports alone make tens of thousands. */
#define PY_CAP (1u << 17)
#define PY_WORDS (8u << 20)
/* unw_backtrace's room for the shim's own frames above the caller's */
#define SELF_MAX 16u

static int full_said; /* native_slow()'s line that the table is full */

struct stack_rec {
	struct shm_rec_stack hdr; /* same layout as shm_rec_pystack */
	uint64_t w[2 * SHM_STACK_MAX];
};

_Static_assert(sizeof(struct shm_rec_stack) == sizeof(struct shm_rec_pystack), "stack hdrs");
_Static_assert(sizeof(struct shm_pyframe) == 2 * sizeof(uint64_t), "pyframe words");
_Static_assert(sizeof(void *) == sizeof(uint64_t), "pcs are words");
_Static_assert(SHM_STACK_MAX <= UNWIND_MAX, "a walk holds a whole stack");

struct emit_ctx {
	struct shim_thread *t;
	uint16_t type;
};

/* A thread's last walk, and the id its pcs got in stacktab epoch `epoch`
 * (0: none), for the slot's owner of generation `owner`. */
struct walk {
	uint64_t owner;
	uint32_t id;
	uint32_t epoch;
	struct unwind_cache c;
	/* Python: the memo, and the last capture's frames and id (in
	 * stacktab epoch py_epoch; 0: none); touched only in a process that
	 * runs Python */
	struct py_memo py;
	uint32_t py_id;
	uint32_t py_epoch;
	uint32_t py_n;
	struct shm_pyframe py_last[SHM_STACK_MAX];
};

static struct walk *walks_of; /* one per slot */
static uint32_t nwalks;

static int (*unw_bt)(void **, int);
static int check;      /* SHIMMER_STACK_CHECK=1 */
static uint64_t n_walked, n_full, n_differ;
static uintptr_t self_lo, self_hi;
static struct stacktab native, python;

static int emit(void *arg, uint32_t id, const uint64_t *w, uint32_t n)
{
	struct emit_ctx *c = arg;
	struct stack_rec r;
	uint32_t len = (uint32_t)sizeof(r.hdr) + 8u * n;

	r.hdr = (struct shm_rec_stack){
		.hdr = { .type = c->type, .size = (uint16_t)len },
		.stack_id = id,
		.depth = c->type == SHM_REC_STACK ? n : n / 2,
	};
	memcpy(r.w, w, 8u * n);
	return thread_emit(c->t, &r, len);
}

/* Around every call into libunwind: in_shim, and its pipe checked
 * (ownfds.h).  -1, nothing held, when libunwind must not be called. */
static int own_enter(sigset_t *mask)
{
	shim_own_enter(&shim_tls, mask);
	if (ownfds_unwind_begin() == 0)
		return 0;
	shim_own_leave(&shim_tls, mask);
	return -1;
}

static void own_leave(const sigset_t *mask)
{
	ownfds_unwind_end();
	shim_own_leave(&shim_tls, mask);
}

uint64_t stack_reserve_bytes(void)
{
	if (!settings.stacks)
		return 0;
	return stacktab_bytes(NATIVE_CAP, NATIVE_WORDS) + stacktab_bytes(PY_CAP, PY_WORDS) +
	       (uint64_t)settings.nslots * sizeof(struct walk);
}

void stack_setup(void)
{
	int (*bt)(void **, int);
	void *lib;
	int err;

	if (!settings.stacks)
		return;
	lib = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
	bt = lib ? (int (*)(void **, int))dlsym(lib, "unw_backtrace") : 0;
	if (!bt || modules_span_of((const void *)stack_setup, &self_lo, &self_hi) < 0 ||
	    stacktab_init(&native, NATIVE_CAP, NATIVE_WORDS) < 0) {
		log_warn("libunwind not available; no call stacks");
		return;
	}
	if (stacktab_init(&python, PY_CAP, PY_WORDS) < 0)
		log_debug("python stack table: no memory; no Python frames");
	unwind_set_guard(own_enter, own_leave);
	err = unwind_setup(lib);
	if (!err) {
		nwalks = shim.region.nslots;
		walks_of = mmap(0, nwalks * sizeof(*walks_of), PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (walks_of == MAP_FAILED) {
			walks_of = 0;
			err = -errno;
		}
	}
	if (err < 0)
		log_debug("stack walk: %s; every stack by unw_backtrace", strerrordesc_np(-err));
	check = settings.stack_check;
	unw_bt = bt;
	stack_count_in(shim.region.hdr);
}

void stack_count_in(struct shm_region *r)
{
	stacktab_count_at(&native, r ? &r->stack_full : 0);
	stacktab_count_at(&python, r ? &r->pystack_full : 0);
}

void stack_fork_child(void)
{
	stacktab_fork_child(&native);
	stacktab_fork_child(&python);
	stack_count_in(0); /* the parent's region is gone */
}

void stack_forget(void)
{
	if (walks_of)
		unwind_forget();
}

static inline int in_self(uint64_t pc)
{
	return pc - self_lo < self_hi - self_lo;
}

/*
 * The state of the first frame outside the shim, followed by frame
 * pointers from the frame of the function this is inlined into (a shim
 * function, built with frame pointers): the return address into it, its
 * stack pointer after the return (the shim frame's CFA) and its rbp (the
 * one the shim frame saved).  -1 if the chain looks wrong.
 */
static inline __attribute__((always_inline)) int first_frame(uint64_t *pc, uint64_t *sp,
							      uint64_t *bp)
{
	const uint64_t *fp = __builtin_frame_address(0), *next;
	uintptr_t lo = (uintptr_t)fp;
	int i;

	for (i = 0; i < (int)SELF_MAX; i++) {
		if (!in_self(fp[1])) {
			*pc = fp[1];
			*sp = (uint64_t)(uintptr_t)(fp + 2);
			*bp = fp[0];
			return 0;
		}
		next = (const uint64_t *)(uintptr_t)fp[0];
		if (next <= fp || (uintptr_t)next - lo > (1u << 20) || ((uintptr_t)next & 7))
			return -1;
		fp = next;
	}
	return -1;
}

/* The caller's stack by unw_backtrace: at most depth pcs from the first
 * frame outside the shim. */
static __attribute__((noinline)) int full(uint64_t *pc, uint32_t depth)
{
	uint64_t buf[SHM_STACK_MAX + SELF_MAX];
	sigset_t mask;
	int n, i;

	/* libunwind's own fast trace allocates on a thread's first call (its
	 * cache's pthread_setspecific) and may on an address it has not seen
	 * (.debug_frame): the shim's, in_shim.  Only a walk refused by ours
	 * comes here, and such a capture takes libunwind's slow steps, which
	 * themselves mask signals around its locks. */
	if (own_enter(&mask) < 0)
		return 0;
	n = unw_bt((void **)buf, (int)(depth + SELF_MAX));
	own_leave(&mask);
	for (i = 0; i < n && in_self(buf[i]); i++)
		;
	n -= i;
	if (n > (int)depth)
		n = (int)depth;
	if (n > 0)
		memcpy(pc, buf + i, (size_t)n * sizeof(*pc));
	return n > 0 ? n : 0;
}

/* SHIMMER_STACK_CHECK: the walk's n pcs against unw_backtrace's. */
static void check_walk(const uint64_t *pc, int n, uint32_t depth)
{
	uint64_t ref[SHM_STACK_MAX];
	int m = full(ref, depth);

	__atomic_fetch_add(&n_walked, 1, __ATOMIC_RELAXED);
	if (m != n || memcmp(ref, pc, (size_t)n * sizeof(*pc)))
		__atomic_fetch_add(&n_differ, 1, __ATOMIC_RELAXED);
}

/* The calling thread's walk: its slot's, reset for a new owner. */
static inline struct walk *walk_of(struct shim_thread *t)
{
	struct walk *w;
	uint64_t owner;

	if (!walks_of || !t->ring.slot || t->slot_idx >= nwalks)
		return 0;
	w = &walks_of[t->slot_idx];
	owner = __atomic_load_n(&t->ring.slot->generation, __ATOMIC_RELAXED);
	if (unlikely(w->owner != owner)) {
		w->owner = owner;
		w->id = 0;
		w->c.gen = 0;
		w->py.epoch = 0; /* never an intern epoch: emptied at first use */
		w->py_id = 0;
	}
	return w;
}

/*
 * The capture when it is not the thread's previous one: the walk (or
 * unw_backtrace) and the interning, under BUSY_STACK: a signal handler's
 * traced call in it is counted, its record dropped, and never reaches the
 * walk or the tables.  Only libunwind's calls, which may allocate for us
 * (a rule learnt, unw_backtrace), are in_shim, with the asynchronous
 * signals blocked (shim_own_enter()).
 */
static __attribute__((noinline)) uint32_t native_slow(struct shim_thread *t)
{
	struct emit_ctx c = { .t = t, .type = SHM_REC_STACK };
	uint64_t pc[SHM_STACK_MAX], p0, sp, bp;
	uint32_t id = 0, depth = settings.stack_depth, epoch;
	struct walk *w;
	int n, same, saved;

	if (!unw_bt)
		return 0;
	saved = errno;
	tls_word_or(t, TLS_BUSY(BUSY_STACK));
	modules_check();
	if ((w = walk_of(t)) && first_frame(&p0, &sp, &bp) == 0 &&
	    (n = unwind_walk(&w->c, p0, sp, bp, depth, &same)) >= 0) {
		if (unlikely(check))
			check_walk(w->c.pc, n, depth);
		epoch = __atomic_load_n(&native.epoch, __ATOMIC_RELAXED);
		if (same && w->id && w->epoch == epoch) {
			id = w->id;
		} else {
			id = n > 0 ? stacktab_id(&native, w->c.pc, (uint32_t)n, emit, &c) : 0;
			w->id = id;
			w->epoch = epoch;
		}
		goto out;
	}
	if (unlikely(check))
		__atomic_fetch_add(&n_full, 1, __ATOMIC_RELAXED);
	n = full(pc, depth);
	id = n > 0 ? stacktab_id(&native, pc, (uint32_t)n, emit, &c) : 0;
out:
	/* A table of distinct stacks that filled leaves every new call path
	 * without a stack (commands show "(no stack)"): said once, since
	 * a Python program's native stacks can fill it while it imports.
	 * Read before log_warn_once()'s exchange, which would write a line
	 * every thread shares on each capture after that. */
	if (unlikely(!id && n > 0 && !__atomic_load_n(&full_said, __ATOMIC_RELAXED) &&
		     stacktab_full(&native)))
		log_warn_once(&full_said,
			      "the table of distinct call stacks is full (%u); allocations "
			      "from call paths not seen yet have no stack",
			      native.limit);
	tls_word_and(t, ~TLS_BUSY(BUSY_STACK));
	errno = saved;
	return id;
}

/*
 * The common capture first: the thread's previous walk still holds, whole,
 * and its id is current.  Nothing here calls out, allocates or changes
 * errno, so errno needs no saving; BUSY_STACK keeps a signal handler's
 * traced calls (a CUDA hook's capture) off the walk while we read it, and
 * counts them (they are not passed through: nothing here allocates).
 * Anything else, and SHIMMER_STACK_CHECK, goes to native_slow().
 */
uint32_t stack_native(struct shim_thread *t)
{
	uint64_t p0, sp, bp;
	uint32_t id = 0;
	struct walk *w;

	if (!unw_bt)
		return 0;
	tls_word_or(t, TLS_BUSY(BUSY_STACK));
	if (likely(!__atomic_load_n(&modules_stale, __ATOMIC_RELAXED) && !check) &&
	    (w = walk_of(t)) && w->id &&
	    w->epoch == __atomic_load_n(&native.epoch, __ATOMIC_RELAXED) &&
	    first_frame(&p0, &sp, &bp) == 0 && unwind_same(&w->c, p0, sp, bp, settings.stack_depth))
		id = w->id;
	tls_word_and(t, ~TLS_BUSY(BUSY_STACK));
	return id ? id : native_slow(t);
}

/* SHIMMER_STACK_CHECK's report, when the process ends. */
__attribute__((destructor)) static void stack_report(void)
{
	uint64_t rules, refused, tfull;

	if (!check || !unw_bt)
		return;
	unwind_counts(&rules, &refused, &tfull);
	log_warn("stack check: %llu walked, %llu differ from unw_backtrace, %llu by "
		  "unw_backtrace; %llu rules, %llu refused, table full %llu",
		  (unsigned long long)n_walked, (unsigned long long)n_differ,
		  (unsigned long long)n_full, (unsigned long long)rules,
		  (unsigned long long)refused, (unsigned long long)tfull);
}

uint32_t stack_python_slow(struct shim_thread *t)
{
	struct shm_pyframe f[SHM_STACK_MAX];
	struct emit_ctx c = { .t = t, .type = SHM_REC_PYSTACK };
	struct walk *w;
	uint32_t n, id = 0, epoch;
	int saved;

	if (!unw_bt || !python.tab)
		return 0;
	saved = errno;
	/* as native_slow(); py_frames() makes its own dlsym calls in_shim */
	tls_word_or(t, TLS_BUSY(BUSY_STACK));
	w = walk_of(t);
	n = py_frames(f, settings.stack_depth, w ? &w->py : 0);
	/* A loop allocating from one line repeats its frames: the last
	 * capture's id then, without hashing them for the table. */
	epoch = __atomic_load_n(&python.epoch, __ATOMIC_RELAXED);
	if (n && w && w->py_id && w->py_n == n && w->py_epoch == epoch &&
	    !memcmp(w->py_last, f, n * sizeof(f[0]))) {
		id = w->py_id;
	} else if (n) {
		id = stacktab_id(&python, (const uint64_t *)(const void *)f, 2 * n, emit, &c);
		if (w) {
			w->py_epoch = epoch;
			w->py_id = id;
			w->py_n = n;
			memcpy(w->py_last, f, n * sizeof(f[0]));
		}
	}
	tls_word_and(t, ~TLS_BUSY(BUSY_STACK));
	errno = saved;
	return id;
}

uint64_t stack_full(void)
{
	return stacktab_full(&native);
}
