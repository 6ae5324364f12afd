/*
 * Running statistics of durations: count, mean, population standard
 * deviation, min and max in one pass (Welford's update), so that 1e7
 * durations of up to 1e9 ns keep their digits, which the textbook
 * sqrt(E[x^2] - E[x]^2) does not.  The readers stream rows from SQLite
 * into these instead of using GROUP BY, which sorts and is several times
 * slower on stores of millions of rows.  Not thread-safe per accumulator.
 */
#ifndef SHIMMER_TOOLS_STATS_H
#define SHIMMER_TOOLS_STATS_H

#include <stdint.h>

struct stats {
	uint64_t n;
	double mean;
	double m2; /* sum of squared deviations from the running mean */
	double min;
	double max;
};

/* Empty the accumulator. */
void stats_init(struct stats *s);

/* Add one value. */
void stats_add(struct stats *s, double x);

/* Fold the values of b into a, as if each had been added to a (Chan's
 * pairwise update). */
void stats_merge(struct stats *a, const struct stats *b);

/* Population standard deviation (divides by n); 0 when n < 2. */
double stats_stddev(const struct stats *s);

#endif /* SHIMMER_TOOLS_STATS_H */
