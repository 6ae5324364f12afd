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
 *              [-c WORKING_KIB [-s SWEEP_BYTES]] [-l LIVE_MIB]
 *              [-a BLOCK]
 *
 * -b splits the timed loop into bursts of BURST pairs, each after an
 * untimed pause of PAUSE_US microseconds: with bursts that fit in the
 * shim's ring and pauses long enough for the collector to drain it, the
 * shim's `all` mode records every event instead of finding its ring full and
 * dropping, so the figure is the cost of the recording path itself.
 * -e uses a small set of distinctive (prime) sizes, so the end-to-end bench
 * can count this workload's rows in the store apart from libc's own.
 * -c is the cold-cache regime of a real program, where the hooks' lines
 * (the thread's state, the shim's globals, the slot's counters, the
 * filter) are evicted between two heap calls by the program's own work:
 * before every malloc and every free the loop reads SWEEP_BYTES (default
 * 32768, one 8-byte load per 64-byte line) of a WORKING_KIB working set,
 * going round it, so each call finds the lines it last touched that much
 * further from the core.  The sweep is timed with the pairs: the figure
 * is only comparable with a run of the same -c and -s (bare against
 * shim, bench/cold-cost).
 * -l holds LIVE_MIB of 64 KiB blocks alive through the run (allocated
 * first, never written, freed at the end), as a real program's heap
 * holds large blocks: the sampler picks some of them (about LIVE_MIB x 2
 * at the default 512 KiB mean), and a free of any block must then be told
 * apart from theirs (preload/sampled.h's filter).
 * -a (under the shim) alternates blocks of BLOCK timed pairs recorded and
 * paused (shimmer_pause/resume), the first of each two blocks taking turns,
 * as test/gpu/train.py --ab does: the difference of a pair of blocks is
 * what recording adds inside one process, free of what differs between
 * processes (where the working set's pages fall in the caches).  A paused
 * hook is not free either (bench/paused-cost): against bare, add it.
 * Output, one line on stdout:
 *   heap_bench pairs=N total_pairs=T ns_per_pair=X cpu_ns_per_pair=Y
 * and with -a also: recorded_cpu_ns=R paused_cpu_ns=P added_cpu_ns=D ci95=E
 * (per pair, means over the blocks; added is R - P with its 95% interval).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <dlfcn.h>

#include "clock_ns.h"
#include "paired.h"

#define LIVE 64u
#define NSIZES 64u

static void *live[LIVE];
static size_t sizes[NSIZES];

/* -c: the working set swept between heap calls, its size in 8-byte words
 * (a power of two), the words read per sweep, and where the next starts. */
static uint64_t *cold;
static uint64_t cold_words, sweep_lines, cold_at;
static volatile uint64_t cold_sink;

/* One load per line, so SWEEP_BYTES of lines move in from further away
 * and as many move out: the program's work between two heap calls. */
static inline void sweep(void)
{
	uint64_t sum = 0, at = cold_at;

	for (uint64_t i = 0; i < sweep_lines; i++) {
		sum += cold[at];
		at = (at + 8) & (cold_words - 1);
	}
	cold_at = at;
	cold_sink = sum;
}

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

		if (cold)
			sweep();
		free(live[slot]);
		if (cold)
			sweep();
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
	uint64_t cold_kib = 0, sweep_bytes = 32768;
	uint64_t ab = 0, ballast_mib = 0, nballast = 0;
	void **ballast = 0;
	void (*pause_fn)(void) = 0, (*resume_fn)(void) = 0;
	struct paired added = { 0 };
	double block_cpu[2] = { 0, 0 };
	int e2e = 0, c;

	while ((c = getopt(argc, argv, "n:w:eb:p:c:s:a:l:")) != -1) {
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
		case 'c':
			cold_kib = strtoull(optarg, NULL, 10);
			break;
		case 's':
			sweep_bytes = strtoull(optarg, NULL, 10);
			break;
		case 'a':
			ab = strtoull(optarg, NULL, 10);
			break;
		case 'l':
			ballast_mib = strtoull(optarg, NULL, 10);
			break;
		default:
			fprintf(stderr, "usage: heap_bench [-n PAIRS] [-w WARMUP] [-e] "
					"[-b BURST -p PAUSE_US] [-c WORKING_KIB [-s SWEEP_BYTES]] "
					"[-l LIVE_MIB] [-a BLOCK]\n");
			return 2;
		}
	}
	if (cold_kib) {
		if ((cold_kib & (cold_kib - 1)) || sweep_bytes < 64) {
			fprintf(stderr, "heap_bench: -c takes a power of two, -s at least 64\n");
			return 2;
		}
		/* mapped, not malloc'd: the working set is the program's, not
		 * a block the shim sees */
		cold_words = cold_kib * 1024 / 8;
		sweep_lines = sweep_bytes / 64;
		cold = mmap(NULL, cold_kib * 1024, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (cold == MAP_FAILED) {
			perror("heap_bench: mmap");
			return 1;
		}
		for (uint64_t i = 0; i < cold_words; i++)
			cold[i] = i;
	}
	if (pairs == 0)
		pairs = 1;
	make_sizes(e2e);

	if (ballast_mib) {
		nballast = ballast_mib * 16;
		ballast = mmap(NULL, nballast * sizeof(void *), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (ballast == MAP_FAILED) {
			perror("heap_bench: mmap");
			return 1;
		}
		for (uint64_t i = 0; i < nballast; i++)
			if (!(ballast[i] = malloc(65536 - 64)))
				abort();
	}
	for (unsigned i = 0; i < LIVE; i++) {
		live[i] = malloc(sizes[i % NSIZES]);
		if (!live[i])
			abort();
	}
	churn(0, warmup);
	if (ab) {
		/* the shim's, when it is preloaded (include/shimmer.h) */
		pause_fn = (void (*)(void))dlsym(RTLD_DEFAULT, "shimmer_pause");
		resume_fn = (void (*)(void))dlsym(RTLD_DEFAULT, "shimmer_resume");
		if (!pause_fn || !resume_fn || burst || pairs % (2 * ab)) {
			fprintf(stderr, "heap_bench: -a needs the shim, no -b, and PAIRS a "
					"multiple of 2 x BLOCK\n");
			return 2;
		}
		burst = ab;
	}
	if (burst == 0 || burst > pairs)
		burst = pairs;
	for (uint64_t done = 0; done < pairs; done += burst) {
		uint64_t n = pairs - done < burst ? pairs - done : burst;

		if (pause_us) { /* the first burst too: the warm-up filled the ring */
			struct timespec nap = { (time_t)(pause_us / 1000000u),
						(long)(pause_us % 1000000u) * 1000 };

			nanosleep(&nap, NULL);
		}
		/* -a: blocks 2k and 2k+1 are a pair, recorded first in even k */
		int paused = ab && ((done / ab) & 1) != ((done / ab / 2) & 1);

		if (ab)
			(paused ? pause_fn : resume_fn)();
		c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		t0 = clock_ns(CLOCK_MONOTONIC);
		churn(warmup + done, warmup + done + n);
		t1 = clock_ns(CLOCK_MONOTONIC);
		c1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		wall += t1 - t0;
		cpu += c1 - c0;
		if (ab) {
			block_cpu[paused] = (double)(c1 - c0) / (double)n;
			if ((done / ab) & 1)
				paired_add(&added, block_cpu[0], block_cpu[1]);
		}
	}
	if (ab)
		resume_fn();
	for (unsigned i = 0; i < LIVE; i++)
		free(live[i]);
	for (uint64_t i = 0; i < nballast; i++)
		free(ballast[i]);

	printf("heap_bench pairs=%llu total_pairs=%llu ns_per_pair=%.2f cpu_ns_per_pair=%.2f\n",
	       (unsigned long long)pairs,
	       (unsigned long long)(pairs + warmup + LIVE),
	       (double)wall / (double)pairs, (double)cpu / (double)pairs);
	if (ab)
		printf("heap_bench recorded_cpu_ns=%.2f paused_cpu_ns=%.2f added_cpu_ns=%.2f "
		       "ci95=%.2f\n",
		       added.sum_a / added.n, added.sum_b / added.n, paired_mean_diff(&added),
		       paired_ci95(&added));
	return 0;
}
