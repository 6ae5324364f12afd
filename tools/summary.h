/*
 * `shimmer summary`: per process, the calls of every intercepted function
 * (exact counts and bytes, time statistics over the calls that were
 * timed), GPU activity (gpu.h), peak and end-of-run live memory per memory
 * and dropped events, as an aligned table, CSV or JSON; or, with by_rank,
 * each function, kernel and range across ranks (byrank.h).  The brief form
 * is what `shimmer run` prints: a screen's worth.  docs/usage.md describes
 * the output.
 */
#ifndef SHIMMER_TOOLS_SUMMARY_H
#define SHIMMER_TOOLS_SUMMARY_H

#include <stdio.h>

#include "emit.h"
#include "model.h"

/* The brief summary: this many processes in full, this many rows each. */
#define SUMMARY_BRIEF_PROCS 5
#define SUMMARY_BRIEF_ROWS 10

struct summary_opts {
	enum emit_format fmt;
	int full_names; /* kernel names in tables as recorded, not shortened */
	int by_rank;    /* across ranks instead of per process */
	int brief;      /* shimmer run's screen (table only) */
	const char *path; /* the store, named in the brief form's closing lines */
};

/* Everything, as a table. */
void summary_opts_init(struct summary_opts *o);

/*
 * Write the summary of m's selected processes to out.  Reads the heap once
 * (model_want) and every other table once.  Returns 0, or a negative errno
 * after printing one "shimmer: error:" line.
 */
int summary_write(struct model *m, FILE *out, const struct summary_opts *o);

#endif /* SHIMMER_TOOLS_SUMMARY_H */
