/*
 * A sample brackets clock_gettime() between two rdtsc reads and keeps the
 * pair whose bracket is narrowest, taking the bracket's midpoint as the
 * tick count of that instant; an interrupt or a preemption between the
 * reads only widens a bracket, so it loses.  With a baseline of seconds,
 * the rate is good to well under a part per million, and conversions sit
 * within a few ms of the anchor (the daemon moves it on every drain pass).
 */
#include "clock.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <time.h>
#include <x86intrin.h>

#include "clock_ns.h"

#define SAMPLE_TRIES 8
#define CALIBRATE_NS 10000000L

void clock_sample(uint64_t *tsc, uint64_t *ns)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < SAMPLE_TRIES; i++) {
		uint64_t t0 = __rdtsc();
		uint64_t n = clock_ns(CLOCK_MONOTONIC);
		uint64_t t1 = __rdtsc();

		if (t1 - t0 < best) {
			best = t1 - t0;
			*tsc = t0 + (t1 - t0) / 2;
			*ns = n;
		}
	}
}

void clock_start(struct clock *c, uint64_t tsc, uint64_t ns)
{
	c->ns_per_tick = 0;
	c->base_tsc = c->anchor_tsc = tsc;
	c->base_ns = c->anchor_ns = ns;
}

void clock_update(struct clock *c, uint64_t tsc, uint64_t ns)
{
	if (tsc <= c->anchor_tsc || ns <= c->anchor_ns)
		return;
	c->anchor_tsc = tsc;
	c->anchor_ns = ns;
	c->ns_per_tick = (double)(ns - c->base_ns) / (double)(tsc - c->base_tsc);
}

int clock_calibrate(struct clock *c)
{
	struct timespec wait = { 0, CALIBRATE_NS };
	uint64_t tsc, ns;

	clock_sample(&tsc, &ns);
	clock_start(c, tsc, ns);
	while (nanosleep(&wait, &wait) < 0)
		if (errno != EINTR)
			return -errno;
	clock_sample(&tsc, &ns);
	clock_update(c, tsc, ns);
	return c->ns_per_tick > 0 ? 0 : -EIO;
}

int64_t clock_to_ns(const struct clock *c, uint64_t tsc)
{
	/* Signed distance: records written before the anchor come out before
	 * it.  Only the distance goes through a double, so the anchor keeps
	 * every nanosecond; a client's garbage tick count is clamped rather
	 * than overflowing a cast. */
	double d = nearbyint((double)(int64_t)(tsc - c->anchor_tsc) * c->ns_per_tick);
	int64_t anchor = (int64_t)c->anchor_ns;

	if (d >= (double)(INT64_MAX - anchor))
		return INT64_MAX;
	if (d <= (double)-anchor)
		return 0;
	return anchor + (int64_t)d;
}
