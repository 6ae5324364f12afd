/*
 * shimmer.h - mark up a program for the shimmer profiler.
 *
 * Header only; nothing to link.  Each function calls the one of the same
 * name that libshimmer.so exports, through a weak reference: when the
 * program runs without the shim (not preloaded) the reference is NULL and
 * the call costs one test and a predictable branch.  When the shim is
 * preloaded, the records go to the collector with the rest of the trace.
 *
 *   shimmer_range_push(name)  open a range on this thread (domain "shimmer");
 *                             returns its nesting level (0 outermost), or
 *                             -1 without the shim
 *   shimmer_range_pop()       close the innermost one; returns its level,
 *                             -1 if none is open or without the shim
 *   shimmer_mark(name)        an instant marker
 *   shimmer_counter(name, v)  a sample of a named counter
 *   shimmer_pause()           record nothing until shimmer_resume(); the
 *   shimmer_resume()          gap is marked "shimmer.pause"/"shimmer.resume"
 *
 * Names are copied; any string will do.  All functions are thread-safe and
 * async-signal-unsafe.  From Python, with the shim preloaded:
 *
 *   lib = ctypes.CDLL(None)
 *   lib.shimmer_range_push(b"step"); ...; lib.shimmer_range_pop()
 *   lib.shimmer_counter.argtypes = (ctypes.c_char_p, ctypes.c_double)
 *
 * Needs GCC or Clang (weak references and assembler names) on an ELF
 * platform; a statically linked program never sees the shim.
 */
#ifndef SHIMMER_H
#define SHIMMER_H

#ifdef __cplusplus
extern "C" {
#endif

/* The shim's functions under private C names; the assembler names are the
 * exported ones.  The inline wrappers get private assembler names too, so
 * an out-of-line copy can never be mistaken for the shim's definition. */
#define SHIMMER_WEAK_(ret, name, params)                                     \
	extern ret shimmer_weak_##name params __asm__("shimmer_" #name)      \
		__attribute__((weak));                                       \
	static inline ret shimmer_##name params __asm__("shimmer_inline_" #name);

SHIMMER_WEAK_(int, range_push, (const char *name))
SHIMMER_WEAK_(int, range_pop, (void))
SHIMMER_WEAK_(void, mark, (const char *name))
SHIMMER_WEAK_(void, counter, (const char *name, double value))
SHIMMER_WEAK_(void, pause, (void))
SHIMMER_WEAK_(void, resume, (void))

#undef SHIMMER_WEAK_

static inline int shimmer_range_push(const char *name)
{
	return shimmer_weak_range_push ? shimmer_weak_range_push(name) : -1;
}

static inline int shimmer_range_pop(void)
{
	return shimmer_weak_range_pop ? shimmer_weak_range_pop() : -1;
}

static inline void shimmer_mark(const char *name)
{
	if (shimmer_weak_mark)
		shimmer_weak_mark(name);
}

static inline void shimmer_counter(const char *name, double value)
{
	if (shimmer_weak_counter)
		shimmer_weak_counter(name, value);
}

static inline void shimmer_pause(void)
{
	if (shimmer_weak_pause)
		shimmer_weak_pause();
}

static inline void shimmer_resume(void)
{
	if (shimmer_weak_resume)
		shimmer_weak_resume();
}

#ifdef __cplusplus
}
#endif

#endif /* SHIMMER_H */
