/*
 * Welford's online mean and variance: the mean moves by delta / n and m2
 * grows by delta * (x - new mean), both small numbers next to x, so no
 * large sums cancel.
 */
#include <math.h>

#include "stats.h"

void stats_init(struct stats *s)
{
	*s = (struct stats){ 0 };
}

void stats_add(struct stats *s, double x)
{
	double delta;

	if (s->n == 0 || x < s->min)
		s->min = x;
	if (s->n == 0 || x > s->max)
		s->max = x;
	s->n++;
	delta = x - s->mean;
	s->mean += delta / (double)s->n;
	s->m2 += delta * (x - s->mean);
}

void stats_merge(struct stats *a, const struct stats *b)
{
	double n, delta;

	if (b->n == 0)
		return;
	if (a->n == 0) {
		*a = *b;
		return;
	}
	n = (double)(a->n + b->n);
	delta = b->mean - a->mean;
	a->m2 += b->m2 + delta * delta * (double)a->n * (double)b->n / n;
	a->mean += delta * (double)b->n / n;
	a->n += b->n;
	if (b->min < a->min)
		a->min = b->min;
	if (b->max > a->max)
		a->max = b->max;
}

double stats_stddev(const struct stats *s)
{
	if (s->n < 2)
		return 0.0;
	/* Rounding can leave m2 a hair below zero for constant input. */
	return s->m2 > 0.0 ? sqrt(s->m2 / (double)s->n) : 0.0;
}
