/*
 * Call stacks of allocations: native stacks (libunwind's unw_backtrace, its
 * x86-64 fast path with a per-thread trace cache) and Python frames, each
 * interned (stacktab.h) so that a record carries an id and each distinct
 * stack is written once per process, as SHM_REC_STACK / SHM_REC_PYSTACK, in
 * the ring of the thread that first saw it.
 *
 * libunwind is dlopen'd RTLD_LOCAL rather than linked: libunwind.so.8
 * exports the _Unwind_* ABI too, and linked into a preloaded library it
 * would displace libgcc_s's unwinder for C++ exceptions in every traced
 * process.  If it cannot be loaded, stacks are off (one stderr line).
 *
 * Frames inside the shim (the hook, the capture) are dropped, so frame 0 is
 * the return address in the interposed function's caller.
 *
 * The capture itself, stack_native(), is inline: unw_backtrace walks every
 * frame between its caller and the stack's top at about 7 ns a frame (its
 * per-thread trace cache, a dependent chain of loads per frame), so a
 * capture made from its own function would cost a frame more.
 */
#ifndef SHIMMER_STACK_H
#define SHIMMER_STACK_H

#include <errno.h>
#include <stdint.h>

#include "modules.h"
#include "shim.h"

/* Shim frames above the interposed function's caller when stack_native()
 * is inlined into the hook's out-of-line part: that part (traced, end) and
 * the frame that called it (the CUDA hook; heap.c's fast_traced, which the
 * malloc-family hooks tail-call).  No margin: more shim frames only make
 * the stack shorter. */
#define STACK_SKIP 2u

/* For stack_native(): set by stack_setup(), read-only after it. */
extern int (*stack_unw_bt)(void **, int);

/* Loads libunwind, finds the shim's own address range and maps the
 * tables, when shim.stacks says so; on failure leaves stacks off.  Not
 * thread-safe (constructor). */
void stack_setup(void);

/* Fork child: stacks are re-sent on their first use in the new process. */
void stack_fork_child(void);

/* stack_native()'s second half: the id of the n pcs unw_backtrace found,
 * less the shim's frames, at most settings.stack_depth of them. */
uint32_t stack_intern(struct shim_thread *t, const uint64_t *pc, int n);

/*
 * The id of the calling thread's native stack (at most settings.stack_depth
 * frames), its STACK record written first if new; 0 when stacks are off,
 * the table is full or the record could not be written.  Calls from
 * libunwind back into our hooks pass through (in_shim).  Preserves errno.
 * Thread-safe, not async-signal-safe.  Call it only from the hook's
 * out-of-line part (STACK_SKIP).
 */
static inline __attribute__((always_inline)) uint32_t stack_native(struct shim_thread *t)
{
	/* libunwind stores void *: the same 8 bytes as the table's words */
	uint64_t pc[SHM_STACK_MAX + STACK_SKIP];
	uint32_t id;
	int n, saved;

	if (!stack_unw_bt)
		return 0;
	saved = errno;
	t->in_shim++;
	modules_check();
	n = stack_unw_bt((void **)pc, (int)(settings.stack_depth + STACK_SKIP));
	id = stack_intern(t, pc, n);
	t->in_shim--;
	errno = saved;
	return id;
}

/* The same for the Python frames of the calling thread, when the process
 * runs Python and the thread holds the GIL; else 0. */
uint32_t stack_python(struct shim_thread *t);

/* Native stacks refused because the table was full. */
uint64_t stack_full(void);

#endif /* SHIMMER_STACK_H */
