/*
 * `shimmer temporary`: allocations freed soon after they were made, by
 * process, memory and call site: count, bytes and the median lifetime.
 * Churn of this kind costs allocator time and, on the GPU,
 * synchronisation.  docs/usage.md describes the columns.
 */
#ifndef SHIMMER_TOOLS_TEMPORARY_H
#define SHIMMER_TOOLS_TEMPORARY_H

#include <stdint.h>
#include <stdio.h>

#include "model.h"

#define TEMPORARY_MAX_LIFETIME_MS 1.0 /* default --max-lifetime-ms */

/*
 * Write the allocations of m's selected processes freed at most
 * max_lifetime_ns after they were made, in format fmt (an emit_format).
 * Lifetime is free_ns - alloc_ns, both taken when the calls started; the
 * median is over the stored rows (in sample mode the sampled ones, an
 * estimate like the counts and bytes).  Returns 0, -EINVAL after one error
 * line (a store without call stacks), or another negative errno.
 */
int temporary_write(struct model *m, FILE *out, int fmt, int64_t max_lifetime_ns);

#endif /* SHIMMER_TOOLS_TEMPORARY_H */
