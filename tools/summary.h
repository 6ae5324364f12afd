/*
 * `shimmer summary`: per process, the calls of every intercepted function
 * (exact counts and bytes, time statistics over the calls that were
 * timed), GPU activity (gpu.h), peak live memory per space and dropped
 * events, as an aligned table, CSV or JSON.  docs/usage.md describes the columns.
 */
#ifndef SHIMMER_TOOLS_SUMMARY_H
#define SHIMMER_TOOLS_SUMMARY_H

#include <stdio.h>

#include <sqlite3.h>

enum summary_format {
	SUMMARY_TABLE,
	SUMMARY_CSV,
	SUMMARY_JSON,
};

/*
 * Write the summary of the store db to out.  Reads only; streams each table
 * once (the peaks sort allocations by time), so memory stays proportional
 * to processes x functions, not rows.  Returns 0, -EIO after printing one
 * "shimmer: error:" line when a query fails, or -ENOMEM.
 */
int summary_write(sqlite3 *db, FILE *out, enum summary_format fmt);

#endif /* SHIMMER_TOOLS_SUMMARY_H */
