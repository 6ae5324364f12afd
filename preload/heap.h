/*
 * The malloc-family hooks (the exported malloc, free, ... are defined in
 * heap.c).  SHIMMER_MALLOC picks what they trace: `sample` keeps exact
 * per-thread counters and ships a Poisson byte-sampled subset of
 * allocations, plus the frees and realloc releases of exactly those blocks;
 * `all` ships every call; `off` traces nothing.
 *
 * In sample mode a heap record without SHM_F_SAMPLED is a release only: a
 * free, or a realloc whose old block (aux) was sampled but whose new block
 * was not.  free(NULL) frees nothing: in no mode is it shipped or counted
 * (heaptrack ignores it too).
 */
#ifndef SHIMMER_HEAP_H
#define SHIMMER_HEAP_H

#include <stddef.h>

/* Resolves the real allocator.  Idempotent; the constructor calls it first.
 * Until it returns, allocations come from a static bootstrap arena. */
void heap_boot(void);

/*
 * The file whose malloc, free, calloc or realloc the program calls when
 * one of them is not ours, else NULL: another allocator ahead of the shim
 * in the lookup order (LD_PRELOAD="libjemalloc.so.2 libshimmer.so", or
 * one linked into the executable).  Our hooks would then see none of the
 * program's calls, or some of them (a block allocated through ours and
 * freed through the other looks leaked): the heap cannot be recorded.
 * Calls dlsym and dladdr (they may allocate: call in_shim).
 */
const char *heap_preempted(void);

/* Prepares for the configured mode (sample: the sampled-address set).
 * Returns 0 or -errno; not thread-safe. */
int heap_setup(int mode);

/* Fork child: the parent's sampled blocks are not this process's events. */
void heap_fork_child(void);

/*
 * Calls the program made before the constructor ran (the libraries'
 * constructors run first: libstdc++'s start-up pool of 72,704 bytes is
 * one) are kept aside, up to a few thousand, with exact counts of any
 * beyond.  The constructor ends that, once it knows whether the process is
 * traced: traced, they go into the calling thread's ring as if made now
 * (counted, sampled or shipped as the mode says, no stack); else they are
 * forgotten.  Not thread-safe (constructor).
 */
void heap_early_end(int traced);

/*
 * pymalloc's arenas (pyarena.h): the map of an arena of len bytes, made
 * and recorded as a heap call (SHM_FN_PYMALLOC_ARENA_MMAP: counted,
 * sampled or shipped as the mode says, with its stacks), returning the
 * arena or NULL with errno set; the unmap of one (..._MUNMAP: a release,
 * as free is, counting len bytes given back), returning munmap's 0 or -1
 * with errno set.  The same guards and paths as the malloc hooks.
 */
void *heap_arena_mmap(size_t len);
int heap_arena_munmap(void *p, size_t len);

#endif /* SHIMMER_HEAP_H */
