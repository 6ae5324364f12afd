/*
 * leaky: a program with planted leaks at known call sites (see leaky.c).
 * Shared between leaky.c and leaky_lib.c; it also holds the one planted
 * site that is inlined (always_inline, so that it is inlined at -O0 too,
 * and the debug information describes it as an inlined subroutine).
 */
#ifndef LEAKY_H
#define LEAKY_H

#include <stdint.h>
#include <stdlib.h>

/* The sizes of the planted blocks: distinctive, none a multiple of 16. */
#define SZ_INLINE 3001u

/*
 * note(KIND, FUNC, FILE, LINE, BYTES, SPACE, FN): logs one block (wlog.h):
 *   KIND,pid,func,file,line,bytes,space,fn
 * KIND is L (a leaked block), K (a block held at the peak) or X (a
 * temporary block, freed right away); file is the basename of FILE; space
 * is host, device, pinned or managed (device 0).  NOTE() logs the call on
 * its own line: use it on the line of the allocating call.
 */
void note(const char *kind, const char *func, const char *file, int line, uint64_t bytes,
	  const char *space, const char *fn);
#define NOTE(kind, bytes, space, fn) note(kind, __func__, __FILE__, __LINE__, bytes, space, fn)

/* Exit with status 1 on a failed allocation (NULL, non-zero): the planted
 * truth must hold. */
void *must(void *p);
void must_ok(int err);

/* leaky_lib.c: planted sites in a second source file. */
void lib_leak_nested(void);
void lib_leak_cuda_host(void);
void lib_leak_cuda_managed(void);
void *lib_peak_block(void);
#define SZ_LIB_NESTED 8111u
#define SZ_LIB_PINNED 20011u
#define SZ_LIB_MANAGED 30013u
#define SZ_LIB_PEAK ((2u << 20) + 13u)

static inline __attribute__((always_inline)) void *leak_inline(void)
{
	void *p = must(malloc(SZ_INLINE)); NOTE("L", SZ_INLINE, "host", "malloc");

	return p;
}

#endif
