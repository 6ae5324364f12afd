/*
 * Stack capture and interning.  Cost per captured stack: unw_backtrace
 * over depth + a few shim frames (cached per return address by libunwind
 * after the first time), a hash of the pcs, one probe and compare in the
 * table.  A new stack also writes its record.
 *
 * The tables are process-wide (stacktab.h); the emit callback writes the
 * record into the capturing thread's ring.
 */
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "modules.h"
#include "pyframes.h"
#include "stack.h"
#include "stacktab.h"

/* Shim frames above the caller: the capture, the hook's out-of-line part
 * (traced, end) and the hook.  Each extra frame unwound costs ~10 ns, so
 * no margin: more shim frames only make the stack shorter. */
#define SKIP_MAX 3u
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

struct emit_ctx {
	struct shim_thread *t;
	uint16_t type;
};

static int (*unw_bt)(void **, int);
static uintptr_t self_lo, self_hi;
static struct stacktab native, python;
static int on;

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
	void *lib;

	if (!shim.stacks)
		return;
	lib = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
	unw_bt = lib ? (int (*)(void **, int))dlsym(lib, "unw_backtrace") : 0;
	if (!unw_bt || modules_span_of((const void *)stack_setup, &self_lo, &self_hi) < 0 ||
	    stacktab_init(&native, NATIVE_CAP, NATIVE_WORDS) < 0) {
		static const char line[] = "shimmer: libunwind not available; no call stacks\n";

		if (write(STDERR_FILENO, line, sizeof(line) - 1) < 0)
			unw_bt = 0;
		unw_bt = 0;
		shim.stacks = 0;
		return;
	}
	if (stacktab_init(&python, PY_CAP, PY_WORDS) < 0)
		shim_log("python stack table: no memory; no Python frames");
	on = 1;
}

void stack_fork_child(void)
{
	stacktab_fork_child(&native);
	stacktab_fork_child(&python);
}

static inline int in_self(const void *pc)
{
	return (uintptr_t)pc - self_lo < self_hi - self_lo;
}

uint32_t stack_native(struct shim_thread *t)
{
	void *pc[SHM_STACK_MAX + SKIP_MAX];
	uint64_t w[SHM_STACK_MAX];
	struct emit_ctx c = { .t = t, .type = SHM_REC_STACK };
	uint32_t depth = shim.stack_depth, k = 0, id;
	int n, i, saved;

	if (!on)
		return 0;
	saved = errno;
	t->in_shim++;
	modules_check();
	n = unw_bt(pc, (int)(depth + SKIP_MAX));
	for (i = 0; i < n && in_self(pc[i]); i++)
		;
	for (; i < n && k < depth; i++)
		w[k++] = (uintptr_t)pc[i];
	id = k ? stacktab_id(&native, w, k, emit, &c) : 0;
	t->in_shim--;
	errno = saved;
	return id;
}

uint32_t stack_python(struct shim_thread *t)
{
	struct shm_pyframe f[SHM_STACK_MAX];
	struct emit_ctx c = { .t = t, .type = SHM_REC_PYSTACK };
	uint32_t n, id = 0;
	int saved;

	if (!on || !python.tab)
		return 0;
	saved = errno;
	t->in_shim++;
	n = py_frames(f, shim.stack_depth);
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
