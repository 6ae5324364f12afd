/*
 * Stack capture and interning.  Cost per captured stack: unw_backtrace
 * over depth + STACK_SKIP frames (cached per return address by libunwind
 * after the first time), a hash of the pcs, one probe and compare in the
 * table.  A new stack also writes its record.  The pcs are hashed and
 * compared where libunwind wrote them, not copied.
 *
 * libunwind's caching policy is left at its default: unw_backtrace's
 * cache of return addresses is per thread whatever the policy, and a
 * capture of known addresses takes no lock and makes no system call.  The
 * policy governs the DWARF cache of a return address's first unwind, which
 * masks signals around its lock (and around dl_iterate_phdr, whatever the
 * policy); and Debian 12's libunwind 1.6.2, built without per-thread
 * caches, turns UNW_CACHE_PER_THREAD into UNW_CACHE_GLOBAL anyway.
 *
 * The tables are process-wide (stacktab.h); the emit callback writes the
 * record into the capturing thread's ring.
 */
#include <dlfcn.h>
#include <errno.h>
#include <string.h>

#include "log.h"
#include "modules.h"
#include "pyframes.h"
#include "stack.h"
#include "stacktab.h"

#define NATIVE_CAP (1u << 16)
#define NATIVE_WORDS (8u << 20) /* 64 MiB of pcs, reserved, not committed */
#define PY_CAP (1u << 14)
#define PY_WORDS (1u << 20)

struct stack_rec {
	struct shm_rec_stack hdr; /* same layout as shm_rec_pystack */
	uint64_t w[2 * SHM_STACK_MAX];
};

_Static_assert(sizeof(struct shm_rec_stack) == sizeof(struct shm_rec_pystack), "stack hdrs");
_Static_assert(sizeof(struct shm_pyframe) == 2 * sizeof(uint64_t), "pyframe words");
_Static_assert(sizeof(void *) == sizeof(uint64_t), "pcs are words");

struct emit_ctx {
	struct shim_thread *t;
	uint16_t type;
};

int (*stack_unw_bt)(void **, int);

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

void stack_setup(void)
{
	int (*bt)(void **, int);
	void *lib;

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
	stack_unw_bt = bt;
}

void stack_fork_child(void)
{
	stacktab_fork_child(&native);
	stacktab_fork_child(&python);
}

static inline int in_self(uint64_t pc)
{
	return pc - self_lo < self_hi - self_lo;
}

uint32_t stack_intern(struct shim_thread *t, const uint64_t *pc, int n)
{
	struct emit_ctx c = { .t = t, .type = SHM_REC_STACK };
	int i;

	for (i = 0; i < n && in_self(pc[i]); i++)
		;
	n -= i;
	if (n > (int)settings.stack_depth)
		n = (int)settings.stack_depth;
	return n > 0 ? stacktab_id(&native, pc + i, (uint32_t)n, emit, &c) : 0;
}

uint32_t stack_python(struct shim_thread *t)
{
	struct shm_pyframe f[SHM_STACK_MAX];
	struct emit_ctx c = { .t = t, .type = SHM_REC_PYSTACK };
	uint32_t n, id = 0;
	int saved;

	if (!stack_unw_bt || !python.tab)
		return 0;
	saved = errno;
	t->in_shim++;
	n = py_frames(f, settings.stack_depth);
	if (n)
		id = stacktab_id(&python, (const uint64_t *)(const void *)f, 2 * n, emit, &c);
	t->in_shim--;
	errno = saved;
	return id;
}

uint64_t stack_full(void)
{
	return stacktab_full(&native);
}
