/*
 * The caller of a stopped frame, from its call frame information.  The
 * kernel walks a user stack by frame pointers from the stopped registers:
 * when the innermost function keeps no frame pointer of its own (glibc's
 * read(), or any leaf), the walk goes from its ip straight to its caller's
 * caller, and the function that blocked is missing.  Given the words at
 * the top of the stack (copied when the thread stopped), the function's
 * .eh_frame says where the return address lies: CFA = sp + k, the return
 * address at CFA - 8 (x86-64).
 *
 * Each object's CFI is read from its file once and kept.  x86-64 only.
 * Functions return 0 or a negative errno.  Not thread-safe.
 */
#ifndef SHIMMER_COLLECTOR_CALLER_H
#define SHIMMER_COLLECTOR_CALLER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "procmaps.h"

struct caller;

/* For the process pid (its files are opened through /proc/PID/root).
 * NULL with errno set. */
struct caller *caller_new(pid_t pid);

void caller_free(struct caller *c);

/* What the CFI says of the frame stopped at ip. */
struct caller_frame {
	uint64_t ret;     /* the return address: the caller */
	int bp_unchanged; /* the frame left rbp as its caller had it (a frame
			   * pointer walk from the stopped rbp skips only it),
			   * or built its own frame on it (the walk is right) */
};

/*
 * The frame stopped at ip with stack pointer sp and frame pointer bp;
 * words[0..n) are the stack's words from sp.  objs: the process's objects
 * (to find ip's file).  -ENOENT when ip is in no object, the object has no
 * CFI for ip, or the return address lies beyond the words given.
 */
int caller_of(struct caller *c, const struct pm_objects *objs, uint64_t ip, uint64_t sp,
	      uint64_t bp, const uint64_t *words, size_t n, struct caller_frame *out);

#endif
