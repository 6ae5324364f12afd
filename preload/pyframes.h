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
 * Fills out[0..max) with the thread's frames, innermost first; returns how
 * many (0: no Python runtime, an unsupported version, or a thread without
 * a Python thread state).  Thread-safe; not async-signal-safe (interning
 * may send).  Call with BUSY_STACK set, as for any interning; the look for
 * a Python runtime (dlsym, after a module report) is made in_shim.
 * Costs one load when the process has no Python runtime.
 */
uint32_t py_frames(struct shm_pyframe *out, uint32_t max);

/* A module report found new objects: a Python runtime may have come. */
void py_recheck(void);

#endif /* SHIMMER_PYFRAMES_H */
