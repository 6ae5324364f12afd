/*
 * `shimmer summary --by-rank`: each function, kernel, copy kind and range
 * across the ranks of a distributed job.  A rank's figure is the total
 * time of the event over its processes (a rank's children, such as data
 * loader workers, inherit its rank); for each event the minimum, median
 * and maximum across ranks, the slowest rank and the imbalance
 * (max - median) / median; the wall time and the steps likewise; and one
 * straggler line when a rank was the slowest in most steps.
 */
#ifndef SHIMMER_TOOLS_BYRANK_H
#define SHIMMER_TOOLS_BYRANK_H

#include "emit.h"
#include "model.h"

/* The straggler: slowest in more than half the steps (at least
 * BYRANK_MIN_STEPS of them), with a mean step at least BYRANK_MARGIN above
 * the median rank's. */
#define BYRANK_MIN_STEPS 3
#define BYRANK_MARGIN 0.05

/* Write the table (or CSV, JSON) of m's selected processes that have a
 * rank.  Returns 0 or a negative errno. */
int byrank_emit(struct emit *e, struct model *m);

#endif /* SHIMMER_TOOLS_BYRANK_H */
