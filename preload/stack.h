/*
 * Call stacks of allocations: native stacks and Python frames, each
 * interned (stacktab.h) so that a record carries an id and each distinct
 * stack is written once per process, as SHM_REC_STACK / SHM_REC_PYSTACK, in
 * the ring of the thread that first saw it.
 *
 * A native stack is walked by unwind.h, which keeps the thread's previous
 * walk and checks the part of the stack they share instead of unwinding
 * it again; when the pcs are the previous ones the previous id is reused
 * without interning.  Frames unwind.h cannot step (signal frames, code
 * without unwind info, unusual CFAs) make that capture a libunwind
 * unw_backtrace: the same pcs either way.
 *
 * libunwind is dlopen'd RTLD_LOCAL rather than linked: libunwind.so.8
 * exports the _Unwind_* ABI too, and linked into a preloaded library it
 * would displace libgcc_s's unwinder for C++ exceptions in every traced
 * process.  If it cannot be loaded, stacks are off (one stderr line).
 *
 * Frames inside the shim (the hook, the capture) are left out: they are
 * followed by their frame pointers (the shim is built with them) to the
 * first frame outside, so frame 0 is the return address in the interposed
 * function's caller.
 *
 * SHIMMER_STACK_CHECK=1 (tests) unwinds every stack with unw_backtrace too
 * and counts the captures whose pcs differ; the count is printed at exit.
 */
#ifndef SHIMMER_STACK_H
#define SHIMMER_STACK_H

#include <stdint.h>

#include "pyframes.h"
#include "shim.h"

/* Loads libunwind, finds the shim's own address range and maps the
 * tables, when settings.stacks says so; on failure leaves stacks off.  Not
 * thread-safe (constructor). */
void stack_setup(void);
/* The address space stack_setup() would map (reserved, mostly never
 * touched): 0 with SHIMMER_STACKS=0. */
uint64_t stack_reserve_bytes(void);

/* Fork child: stacks are re-sent on their first use in the new process;
 * refusals are counted in the tables until stack_count_in() says where. */
void stack_fork_child(void);

/* The tables' refused captures are counted in r's stack_full and
 * pystack_full (wire.h), which the collector stores; NULL: in the tables
 * (no region).  stack_setup() counts in shim.region's.  Not thread-safe
 * (constructor, fork child). */
void stack_count_in(struct shm_region *r);

/* A module was unloaded: what was learnt about its code no longer holds.
 * Thread-safe. */
void stack_forget(void);

/*
 * The id of the calling thread's native stack (at most settings.stack_depth
 * frames, from the interposed function's caller), its STACK record written
 * first if new; 0 when stacks are off, the table is full or the record
 * could not be written.  Calls from libunwind back into our hooks pass
 * through (in_shim, signals blocked: shim_own_enter()); a signal handler's
 * traced calls in the rest are counted, their records dropped (BUSY_STACK).
 * Preserves errno.  Thread-safe, not
 * async-signal-safe.  Call it only from inside the shim.
 */
uint32_t stack_native(struct shim_thread *t);

/* The same for the Python frames of the calling thread, when the process
 * runs Python and the thread holds the GIL; else 0.  A process without
 * Python pays one load here, on every allocation it ships: the capture's
 * frame (2 KiB of frames) is only taken where there are frames to read. */
uint32_t stack_python_slow(struct shim_thread *t);

static inline uint32_t stack_python(struct shim_thread *t)
{
	return py_absent() ? 0 : stack_python_slow(t);
}

/* Native stacks refused because the table was full. */
uint64_t stack_full(void);

#endif /* SHIMMER_STACK_H */
