/*
 * Bounded demangling of C++ names (kernel names, as CUPTI gives them
 * mangled).  A client chooses its strings, and the Itanium ABI's
 * substitutions let a name of a few hundred bytes demangle to gigabytes
 * (each level of a template can repeat the one before twice): here the
 * input and the output are bounded, and with them the time (the
 * demangler's work is linear in its input to parse and in its output to
 * print).  Nothing is allocated; the demangler's own state lives on the
 * stack (about 64 bytes per input byte).
 *
 * Thread-safe; not async-signal-safe.
 */
#ifndef SHIMMER_COLLECTOR_DEMANGLE_H
#define SHIMMER_COLLECTOR_DEMANGLE_H

#include <stddef.h>

/* Longest mangled name demangled; longer ones are kept mangled. */
#define DEMANGLE_IN_MAX 8192u
/* Longest demangled text kept, terminator included. */
#define DEMANGLE_OUT_MAX 65536u

/*
 * Demangles name (len bytes, no NUL inside; it need not be terminated)
 * into out (out_size bytes, at most DEMANGLE_OUT_MAX are used), NUL-
 * terminated.  Returns the demangled length, -EINVAL when name is not a
 * mangled C++ function or variable name ("_Z..."), -E2BIG when name or
 * its demangled form is longer than the bounds (out is then "").
 */
long demangle(const char *name, size_t len, char *out, size_t out_size);

#endif
