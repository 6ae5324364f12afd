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
 */
#ifndef SHIMMER_STACK_H
#define SHIMMER_STACK_H

#include <stdint.h>

#include "shim.h"

/* Loads libunwind, finds the shim's own address range and maps the
 * tables, when shim.stacks says so; on failure leaves stacks off.  Not
 * thread-safe (constructor). */
void stack_setup(void);

/* Fork child: stacks are re-sent on their first use in the new process. */
void stack_fork_child(void);

/*
 * The id of the calling thread's native stack (at most shim.stack_depth
 * frames), its STACK record written first if new; 0 when stacks are off,
 * the table is full or the record could not be written.  Calls from
 * libunwind back into our hooks pass through (in_shim).  Preserves errno.
 * Thread-safe, not async-signal-safe.
 */
uint32_t stack_native(struct shim_thread *t);

/* The same for the Python frames of the calling thread, when the process
 * runs Python and the thread holds the GIL; else 0. */
uint32_t stack_python(struct shim_thread *t);

/* Native stacks refused because the table was full. */
uint64_t stack_full(void);

#endif /* SHIMMER_STACK_H */
