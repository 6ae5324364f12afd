/*
 * clock_ns.h - a POSIX clock's reading in nanoseconds, for every program
 * of the project (the shim, the collector, tests, benchmarks).  Header only.
 */
#ifndef SHIMMER_CLOCK_NS_H
#define SHIMMER_CLOCK_NS_H

#include <stdint.h>
#include <time.h>

static inline uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif /* SHIMMER_CLOCK_NS_H */
