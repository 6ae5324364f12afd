/*
 * heap_bench: a malloc+free workload whose loop times itself, so the same
 * binary measures the cost per pair bare, under libshimmer.so and under
 * heaptrack, and serves as the producer of the end-to-end throughput run.
 *
 * The program keeps LIVE blocks alive in a table.  It fills the table,
 * then each iteration frees one table entry and allocates a new block in
 * its place (one malloc+free pair per iteration), then frees what is left.
 * Sizes vary per iteration and the entry replaced hops around the table, so
 * glibc serves most requests from the tcache but of many size classes, with
 * some bins running empty: realistic for small-object churn, and simple.
 *
 * Only the middle loop is timed: CLOCK_MONOTONIC around it gives
 * ns_per_pair, CLOCK_THREAD_CPUTIME_ID around it gives cpu_ns_per_pair, the
 * same less the time the thread was descheduled (on a loaded machine the
 * wall figure includes other processes' turns on the CPU).  A warm-up
 * runs first, untimed, so that the shim's connection to the collector and
 * the first page faults stay out of the figure.  Every malloc and every free
 * the program makes is counted: mallocs = frees = LIVE + warmup + pairs.
 *
 *   heap_bench [-n PAIRS] [-w WARMUP] [-e] [-b BURST -p PAUSE_US]
 *
 * -b splits the timed loop into bursts of BURST pairs, each after an
 * untimed pause of PAUSE_US microseconds: with bursts that fit in the
 * shim's ring and pauses long enough for the collector to drain it, the
 * shim's `all` mode records every event instead of finding its ring full and
 * dropping, so the figure is the cost of the recording path itself.
 * -e uses a small set of distinctive (prime) sizes, so the end-to-end bench
 * can count this workload's rows in the store apart from libc's own.
 * Output, one line on stdout:
 *   heap_bench pairs=N total_pairs=T ns_per_pair=X cpu_ns_per_pair=Y
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "clock_ns.h"

#define LIVE 64u
#define NSIZES 64u

static void *live[LIVE];
static size_t sizes[NSIZES];

/* The e2e workload's sizes: primes no libc start-up path asks for. */
static const size_t e2e_sizes[] = { 601, 607, 613, 617, 619, 631, 641, 643 };

static void make_sizes(int e2e)
{
	uint32_t x = 12345;

	for (unsigned i = 0; i < NSIZES; i++) {
		if (e2e) {
			sizes[i] = e2e_sizes[i % (sizeof(e2e_sizes) / sizeof(e2e_sizes[0]))];
			continue;
		}
		x = x * 1103515245u + 12345u;
		sizes[i] = 16 + (x >> 16) % 497; /* 16..512 bytes */
	}
}

/* One pair per iteration: free a live block, allocate its replacement. */
static void churn(uint64_t from, uint64_t to)
{
	for (uint64_t i = from; i < to; i++) {
		unsigned slot = (unsigned)(i * 37u) % LIVE;
		char *p;

		free(live[slot]);
		p = malloc(sizes[i % NSIZES]);
		if (!p)
			abort();
		p[0] = (char)i; /* use the block, as a real program would */
		live[slot] = p;
	}
}

int main(int argc, char **argv)
{
	uint64_t pairs = 2000000, warmup = 200000, burst = 0, pause_us = 0;
	uint64_t t0, t1, c0, c1, wall = 0, cpu = 0;
	int e2e = 0, c;

	while ((c = getopt(argc, argv, "n:w:eb:p:")) != -1) {
		switch (c) {
		case 'n':
			pairs = strtoull(optarg, NULL, 10);
			break;
		case 'w':
			warmup = strtoull(optarg, NULL, 10);
			break;
		case 'e':
			e2e = 1;
			break;
		case 'b':
			burst = strtoull(optarg, NULL, 10);
			break;
		case 'p':
			pause_us = strtoull(optarg, NULL, 10);
			break;
		default:
			fprintf(stderr, "usage: heap_bench [-n PAIRS] [-w WARMUP] [-e] "
					"[-b BURST -p PAUSE_US]\n");
			return 2;
		}
	}
	if (pairs == 0)
		pairs = 1;
	make_sizes(e2e);

	for (unsigned i = 0; i < LIVE; i++) {
		live[i] = malloc(sizes[i % NSIZES]);
		if (!live[i])
			abort();
	}
	churn(0, warmup);
	if (burst == 0 || burst > pairs)
		burst = pairs;
	for (uint64_t done = 0; done < pairs; done += burst) {
		uint64_t n = pairs - done < burst ? pairs - done : burst;

		if (pause_us) { /* the first burst too: the warm-up filled the ring */
			struct timespec nap = { (time_t)(pause_us / 1000000u),
						(long)(pause_us % 1000000u) * 1000 };

			nanosleep(&nap, NULL);
		}
		c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		t0 = clock_ns(CLOCK_MONOTONIC);
		churn(warmup + done, warmup + done + n);
		t1 = clock_ns(CLOCK_MONOTONIC);
		c1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		wall += t1 - t0;
		cpu += c1 - c0;
	}
	for (unsigned i = 0; i < LIVE; i++)
		free(live[i]);

	printf("heap_bench pairs=%llu total_pairs=%llu ns_per_pair=%.2f cpu_ns_per_pair=%.2f\n",
	       (unsigned long long)pairs,
	       (unsigned long long)(pairs + warmup + LIVE),
	       (double)wall / (double)pairs, (double)cpu / (double)pairs);
	return 0;
}
