/*
 * Paired measurements: each pair is (a, b) taken side by side, so that a
 * drift of the machine weighs on both.  Kept: the means of a and b, and of
 * a - b with its 95% interval (normal approximation) from the spread of
 * the differences.  For bench/launch_ab.cu and bench/cupti_detach.cu.
 */
#ifndef SHIMMER_BENCH_PAIRED_H
#define SHIMMER_BENCH_PAIRED_H

#include <math.h>

struct paired {
	int n;
	double sum_a, sum_b, sum_diff, sum_diff2;
};

static inline void paired_add(struct paired *p, double a, double b)
{
	p->n++;
	p->sum_a += a;
	p->sum_b += b;
	p->sum_diff += a - b;
	p->sum_diff2 += (a - b) * (a - b);
}

static inline double paired_mean_diff(const struct paired *p)
{
	return p->n ? p->sum_diff / p->n : NAN;
}

/* Half the width of the 95% interval of the mean difference. */
static inline double paired_ci95(const struct paired *p)
{
	double mean = paired_mean_diff(p), var;

	if (p->n < 2)
		return NAN;
	var = (p->sum_diff2 - p->n * mean * mean) / (p->n - 1);
	return 1.96 * sqrt(var > 0 ? var : 0) / sqrt(p->n);
}

#endif /* SHIMMER_BENCH_PAIRED_H */
