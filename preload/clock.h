/*
 * The record clock: raw TSC ticks when the CPU reports an invariant TSC
 * (constant rate across P-states and sleep), else CLOCK_MONOTONIC
 * nanoseconds.  HELLO tells the collector which one, and a start instant in
 * both clocks, so it can convert.
 *
 * clock_init() runs once in the constructor, before any record is written;
 * clock_now() is then async-signal-safe and thread-safe.
 */
#ifndef SHIMMER_CLOCK_H
#define SHIMMER_CLOCK_H

#include <stdint.h>
#include <time.h>

#include "clock_ns.h"

extern int clock_use_tsc;

/* Chooses the clock; returns SHM_CLOCK_TSC or SHM_CLOCK_MONOTONIC. */
int clock_init(void);

static inline uint64_t clock_now(void)
{
	if (__builtin_expect(clock_use_tsc, 1))
		return __builtin_ia32_rdtsc();
	return clock_ns(CLOCK_MONOTONIC);
}

#endif /* SHIMMER_CLOCK_H */
