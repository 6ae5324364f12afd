/*
 * `shimmer peak`: per process and memory (host, cuda:N, managed:N,
 * pinned), the peak of live bytes, when it was reached (ns after the
 * process started), and the call sites holding the memory at that
 * instant.  The peak is the model's (model_memories), the same one
 * `summary` shows.  docs/usage.md describes the columns.
 */
#ifndef SHIMMER_TOOLS_PEAK_H
#define SHIMMER_TOOLS_PEAK_H

#include <stdio.h>

#include "model.h"

/*
 * Write the report of m's selected processes in format fmt (an emit_format,
 * or PRESENT_FOLDED).  Returns 0, -EINVAL after one error line (a store
 * without call stacks), or another negative errno.
 */
int peak_write(struct model *m, FILE *out, int fmt);

#endif /* SHIMMER_TOOLS_PEAK_H */
