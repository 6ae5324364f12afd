/*
 * `shimmer temporary`: allocations freed soon after they were made, by
 * process, memory and call site (sites.h): count, bytes and the median
 * lifetime.  Churn of this kind costs allocator time and, on the GPU,
 * synchronisation.  docs/usage.md describes the columns.
 */
#ifndef SHIMMER_TOOLS_TEMPORARY_H
#define SHIMMER_TOOLS_TEMPORARY_H

#include <stdint.h>
#include <stdio.h>

#include <sqlite3.h>

#include "sites.h"

#define TEMPORARY_MAX_LIFETIME_MS 1.0 /* default --max-lifetime-ms */

/*
 * Write the allocations of pid's processes (every one when pid < 0) freed
 * at most max_lifetime_ns after they were allocated.  One scan; memory
 * holds one lifetime per such allocation for the medians.  Returns 0,
 * -EIO or -EINVAL after printing one "shimmer: error:" line, or -ENOMEM.
 */
int temporary_write(sqlite3 *db, FILE *out, enum mem_format fmt, int64_t pid,
		    int64_t max_lifetime_ns);

#endif /* SHIMMER_TOOLS_TEMPORARY_H */
