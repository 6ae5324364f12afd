/*
 * shimmer allocations: every allocation of the selected processes by
 * memory and call site (heaptrack's "most calls to allocation functions"
 * and "most bytes allocated"), with how many of them were still live at
 * the end.  In an exact-mode store the figures are the collector's
 * per-site totals (heap_sites), in any other the rows'; sampled host
 * figures are estimates.
 */
#ifndef SHIMMER_TOOLS_ALLOCATIONS_H
#define SHIMMER_TOOLS_ALLOCATIONS_H

#include <stdio.h>

#include "model.h"

enum allocations_sort { ALLOCATIONS_BY_BYTES, ALLOCATIONS_BY_COUNT };

/*
 * Write the report on m's selected processes to out in format fmt (an
 * emit_format), sites by bytes or by count within each memory.  Returns
 * 0, -EINVAL after one error line (no call stacks), or another negative
 * errno.
 */
int allocations_write(struct model *m, FILE *out, int fmt, enum allocations_sort sort);

#endif /* SHIMMER_TOOLS_ALLOCATIONS_H */
