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

/* Bucket b of kind as people read it: its one value ("0 B", "1 ns"), or
 * "[FIRST, NEXT BUCKET'S)"; returns buf (HISTOGRAM_TEXT_MAX bytes do). */
#define HISTOGRAM_TEXT_MAX 72
char *histogram_bucket_text(char *buf, size_t len, enum model_hist_kind kind, unsigned b);

/*
 * Write the distribution of kind of m's selected processes to out in
 * format fmt (an emit_format).  Returns 0 or a negative errno (-EIO after
 * one error line).
 */
int histogram_write(struct model *m, FILE *out, int fmt, enum model_hist_kind kind);

#endif /* SHIMMER_TOOLS_HISTOGRAM_H */
