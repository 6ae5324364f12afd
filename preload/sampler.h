/*
 * Poisson byte sampler.  Think of every allocated byte as a point of a
 * Poisson process with mean spacing `mean` bytes: an allocation is sampled
 * when at least one point falls in it, i.e. with probability
 * 1 - exp(-size/mean), and the collector weights it by size / that.
 *
 * A per-thread countdown holds the distance to the next point.  Because the
 * process is memoryless, once an allocation is sampled the distance from its
 * end to the next point is again exponential, so one fresh draw replaces the
 * countdown however large the allocation.  The common case is one compare
 * and one subtraction; no clock, no lock.
 *
 * A struct sampler belongs to one thread.  xorshift64* is plenty for this.
 */
#ifndef SHIMMER_SAMPLER_H
#define SHIMMER_SAMPLER_H

#include <math.h>
#include <stdint.h>

struct sampler {
	uint64_t countdown; /* bytes until the next sample, >= 1 */
	uint64_t rng;       /* xorshift64* state, never 0 */
	uint64_t mean;      /* mean bytes between samples, >= 1 */
};

static inline uint64_t sampler_rand(struct sampler *s)
{
	s->rng ^= s->rng >> 12;
	s->rng ^= s->rng << 25;
	s->rng ^= s->rng >> 27;
	return s->rng * 0x2545f4914f6cdd1dull;
}

/* An exponential distance, rounded so that P(draw <= n) = 1 - exp(-n/mean). */
static inline uint64_t sampler_draw(struct sampler *s)
{
	double u = (double)((sampler_rand(s) >> 11) + 1) * 0x1p-53; /* (0, 1] */

	return (uint64_t)(-log(u) * (double)s->mean) + 1;
}

static inline void sampler_seed(struct sampler *s, uint64_t seed, uint64_t mean)
{
	s->rng = seed ? seed : 0x9e3779b97f4a7c15ull;
	s->mean = mean ? mean : 1;
	s->countdown = sampler_draw(s);
}

/* Returns 1 when an allocation of n bytes is to be sampled.  The countdown
 * is read once: a signal handler that samples in between (same thread)
 * then has its fresh draw overwritten by a smaller, still valid, distance,
 * never by a wrapped-around one that would stop sampling for good. */
static inline int sampler_take(struct sampler *s, uint64_t n)
{
	uint64_t c = __atomic_load_n(&s->countdown, __ATOMIC_RELAXED);

	if (__builtin_expect(n < c, 1)) {
		__atomic_store_n(&s->countdown, c - n, __ATOMIC_RELAXED);
		return 0;
	}
	__atomic_store_n(&s->countdown, sampler_draw(s), __ATOMIC_RELAXED);
	return 1;
}

/* The probability that an allocation of n bytes is sampled. */
static inline double sampler_prob(uint64_t mean, uint64_t n)
{
	return -expm1(-(double)n / (double)mean);
}

#endif /* SHIMMER_SAMPLER_H */
