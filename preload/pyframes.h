/*
 * Python frames of the calling thread, read from the interpreter's structs
 * by version-specific offsets (CPython 3.11, 3.12 and 3.13, default
 * build): with or without the GIL, since only this thread changes its own
 * frames and it is inside our hook.  No call allocates or touches a
 * reference count.  File and qualified function names are interned once
 * per code object (a cache keyed by the code object's address).
 */
#ifndef SHIMMER_PYFRAMES_H
#define SHIMMER_PYFRAMES_H

#include <stdint.h>

#include "wire.h"

/*
 * A thread's memo of the frames it has read: (code object, instruction) ->
 * the frame's file, function and line.  A frame found here costs a few
 * loads instead of PyCode_Addr2Line's walk of the line table and the
 * names' lookup, which is what makes the frames affordable on every
 * allocation of `all` mode.  Direct-mapped; one per thread, never shared.
 * It is emptied when the interned names' epoch changes (fork, reconnect).
 * An entry holds for the same code object, file, name and line table
 * objects at the same addresses: a code object freed and another made in
 * its place with all four would take its lines (pyframes.c).
 */
#define PY_MEMO_SLOTS 256u
#define PY_OUTER 8u

struct py_memo_entry {
	const void *code;
	uintptr_t instr;
	const void *file, *func, *lines; /* the code's objects, checked too */
	struct shm_pyframe f;
};

struct py_memo {
	uint32_t epoch; /* intern_epoch() of the entries */
	struct py_memo_entry slot[PY_MEMO_SLOTS];
};

/*
 * Fills out[0..max) with the thread's frames, innermost first; returns how
 * many (0: no Python runtime, an unsupported version, or a thread without
 * a Python thread state).  A thread with more than max frames gets its
 * innermost max - PY_OUTER - 1, a gap frame (file, function and line 0)
 * and its outermost PY_OUTER (of at most 65,536 walked: a deeper stack
 * ends at the gap, its outer frames unknown): the user's script is at
 * the outer end of a deep library stack (an import, a model's forward
 * through nested modules), and the call site is its line (tools/sites.h).
 * With max under 2 * PY_OUTER + 1, the innermost max alone.  memo, the
 * calling thread's own or NULL, is read and filled.  Thread-safe; not
 * async-signal-safe (interning may send).  Call with BUSY_STACK set, as
 * for any interning; the look for a Python runtime (dlsym, after a module
 * report) is made in_shim.  Costs one load when the process has no Python
 * runtime.
 */
uint32_t py_frames(struct shm_pyframe *out, uint32_t max, struct py_memo *memo);

#define PY_UNKNOWN 0
#define PY_ABSENT 1
#define PY_PRESENT 2
extern int py_state;

/* No Python runtime in the process (as last looked): py_frames() would
 * return 0.  One load, for callers on every allocation. */
static inline int py_absent(void)
{
	return __atomic_load_n(&py_state, __ATOMIC_RELAXED) == PY_ABSENT;
}

/* A module report found new objects: a Python runtime may have come. */
void py_recheck(void);

#endif /* SHIMMER_PYFRAMES_H */
