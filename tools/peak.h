/*
 * `shimmer peak`: per process and memory (host heap, cuda:N, pinned,
 * managed:N), the peak of live bytes, when it was reached (ns after the
 * process started), and the call sites (sites.h) holding the memory at
 * that instant.  docs/usage.md describes the columns.
 */
#ifndef SHIMMER_TOOLS_PEAK_H
#define SHIMMER_TOOLS_PEAK_H

#include <stdint.h>
#include <stdio.h>

#include <sqlite3.h>

#include "sites.h"

/*
 * Write the report for the processes with pid (every one when pid < 0).
 * Reads allocations twice: sorted by time to find each peak, then once to
 * find what was live at it.  Returns 0, -EIO or -EINVAL after printing one
 * "shimmer: error:" line, or -ENOMEM.
 */
int peak_write(sqlite3 *db, FILE *out, enum mem_format fmt, int64_t pid);

#endif /* SHIMMER_TOOLS_PEAK_H */
