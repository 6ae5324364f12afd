/*
 * shimmer allocations --histogram: the distribution of the allocations'
 * sizes, or of their blocks' lifetimes, per process and memory (memray
 * stats' size distribution, heaptrack_print --print-histogram), in
 * power-of-two buckets: count, bytes, their shares, a bar.  The figures
 * are the model's (model_heap_hist): exact but for sampled host heaps.
 */
#ifndef SHIMMER_TOOLS_HISTOGRAM_H
#define SHIMMER_TOOLS_HISTOGRAM_H

#include <stdio.h>

#include "model.h"

/* The --histogram values, by enum model_hist_kind; NULL-terminated. */
extern const char *const histogram_kinds[];

/*
 * Write the distribution of kind of m's selected processes to out in
 * format fmt (an emit_format).  Returns 0 or a negative errno (-EIO after
 * one error line).
 */
int histogram_write(struct model *m, FILE *out, int fmt, enum model_hist_kind kind);

#endif /* SHIMMER_TOOLS_HISTOGRAM_H */
