/*
 * Python frames of the calling thread, read through the interpreter's own
 * C API (resolved with dlsym, never linked): only in a process where
 * Py_IsInitialized exists and is true, and only on a thread that holds the
 * GIL, so the frames are stable while we read them.  File and function
 * names are interned once per code object (a cache keyed by the code
 * object's address, guarded by the GIL).
 */
#ifndef SHIMMER_PYFRAMES_H
#define SHIMMER_PYFRAMES_H

#include <stdint.h>

#include "wire.h"

/*
 * Fills out[0..max) with the thread's frames, innermost first; returns how
 * many (0: no Python, no GIL, or an exception pending that we must not
 * disturb).  Call with the re-entry guard set: the C API allocates.
 * Costs one load when the process has no Python runtime.
 */
uint32_t py_frames(struct shm_pyframe *out, uint32_t max);

/* A module report found new objects: a Python runtime may have come. */
void py_recheck(void);

#endif /* SHIMMER_PYFRAMES_H */
