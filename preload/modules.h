/*
 * Loaded objects, for offline symbolization: one SHM_REC_MODULE per object
 * when tracing starts, one per object that appears later, and one with
 * unload=1 per object that goes away.  Also exports dlopen and dlclose.
 *
 * dlopen is caller-sensitive: glibc searches the *caller's* DT_RPATH and
 * DT_RUNPATH for a bare name, which a wrapper would replace with the
 * shim's.  So for a bare name our dlopen jumps straight to the real one
 * (the caller stays the caller) and only marks the module list stale; the
 * next captured stack, dlopen or dlclose in any thread reports the change.
 * A name with a '/' (or NULL) does not depend on the caller: it is loaded
 * and reported at once.
 *
 * Reports are serialized by a flag taken with CAS (dlopen is rare); a
 * thread that finds it taken skips its report and leaves the list stale.
 */
#ifndef SHIMMER_MODULES_H
#define SHIMMER_MODULES_H

#include <stdint.h>

/* Resolves the real dlopen/dlclose and maps the table.  0 or -errno.
 * Not thread-safe (constructor). */
int modules_init(void);

/* Reports the objects loaded and unloaded since the last report (all of
 * them the first time) from the calling thread.  Thread-safe. */
void modules_report(void);

/* Fork child: the new process reports every object again. */
void modules_fork_child(void);

/* Nonzero when a bare-name dlopen may have loaded objects not reported. */
extern int modules_stale;

/* Objects the shim itself loaded (libcupti): reported by the next report,
 * as after a bare-name dlopen, since a load made inside the shim reports
 * nothing at once.  Thread-safe. */
void modules_mark_stale(void);

/* The constructor named self, the shim's path, as an injection library
 * (CUDA_INJECTION64_PATH, NVTX_INJECTION64_PATH): the dlopen of that path
 * by the CUDA driver or NVTX is then the shim's own work, and what it
 * allocates is not traced as the program's. */
void modules_injected(const char *self);

/* The calling-side check of captures: cheap when nothing changed. */
static inline void modules_check(void)
{
	if (__builtin_expect(__atomic_load_n(&modules_stale, __ATOMIC_RELAXED), 0))
		modules_report();
}

/* The span [lo, hi) of the PT_LOAD segments of the object holding addr.
 * 0 or -ENOENT.  Thread-safe (takes the loader's lock). */
int modules_span_of(const void *addr, uintptr_t *lo, uintptr_t *hi);

#endif /* SHIMMER_MODULES_H */
