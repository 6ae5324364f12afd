/*
 * TSC to CLOCK_MONOTONIC conversion for processes that stamp records with
 * raw rdtsc ticks (SHM_CLOCK_TSC).  The collector calibrates against its own
 * reads of both clocks: the rate comes from the first sample (the base) to
 * the latest one (the anchor), so it grows more precise as the daemon runs,
 * and a timestamp is converted relative to the anchor, so the rate's error
 * only multiplies the short distance to the anchor.
 *
 * The conversion functions are pure and take synthetic samples in tests;
 * clock_sample() and clock_calibrate() read the real clocks.  No locking:
 * one struct clock belongs to one thread.
 */
#ifndef SHIMMER_COLLECTOR_CLOCK_H
#define SHIMMER_COLLECTOR_CLOCK_H

#include <stdint.h>

struct clock {
	double ns_per_tick; /* 0 until two samples span some time */
	uint64_t base_tsc, base_ns;
	uint64_t anchor_tsc, anchor_ns;
};

/* Reads the TSC and CLOCK_MONOTONIC as one instant (the tightest of a few
 * tries). */
void clock_sample(uint64_t *tsc, uint64_t *ns);

/* Sets the base and the anchor to one sample; the rate stays unknown. */
void clock_start(struct clock *c, uint64_t tsc, uint64_t ns);

/* Moves the anchor to a newer sample and refines the rate from the base.
 * A sample that does not move both clocks forward is ignored. */
void clock_update(struct clock *c, uint64_t tsc, uint64_t ns);

/* Starts from the real clocks and measures the rate over about 10 ms.
 * Returns 0 or a negative errno. */
int clock_calibrate(struct clock *c);

/* Converts a tick count of this host's TSC to CLOCK_MONOTONIC ns. */
int64_t clock_to_ns(const struct clock *c, uint64_t tsc);

#endif
