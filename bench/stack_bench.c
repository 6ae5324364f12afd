/*
 * stack_bench: the cost of capturing an allocation's call stack.  The
 * program descends a 32-deep chain of calls, then times malloc+free pairs
 * at the bottom of it.  Run under the shim with SHIMMER_SAMPLE_BYTES=1
 * every allocation is sampled, so each pair captures one stack of the full
 * default depth (32 frames); SHIMMER_STACKS=on against off, in the same
 * conditions otherwise, gives the time added per captured stack.  The
 * stack is the same every time, so this is the hot-site cost: unwinding
 * plus an interning lookup (the STACK record is written once).
 *
 * Each sampled pair ships two heap records, far faster than a collector
 * stores them, and the shim drops a record its full ring would drop before
 * unwinding its stack: timed in one stretch, most pairs would time the drop
 * path, not a capture.  -b splits the timed loop into bursts of BURST
 * pairs, each after an untimed pause of PAUSE_US microseconds; bursts that
 * fit in the ring, with pauses long enough for the collector to drain it,
 * capture every stack (run-bench checks the store for drops).
 *
 * -w WARMUP pairs run first, untimed for the figures, in bursts too with -b.
 * Their CPU time per pair is reported apart (warm_cpu_ns_per_pair): under
 * the shim it holds what each thread pays once, above all a page fault for
 * every 4 KiB of its ring's first lap (in `all` mode a 1 MiB ring, 144
 * bytes a pair: 7,282 pairs), which would otherwise be spread over the
 * timed pairs of a short run.
 *
 * -u FRAMES times, at the same place, libunwind's unw_backtrace of FRAMES
 * frames instead of the pairs (run it without the shim): the part of a
 * capture that is libunwind's own.
 *
 * -t THREADS runs the whole thing in THREADS threads at once, each down its
 * own chain and timing itself; the figures are the means over the threads
 * (per thread: on 2 cores 8 threads wait for each other, so the CPU time
 * per pair is the figure to compare with one thread's).
 *
 *   stack_bench [-n PAIRS] [-w WARMUP] [-d DEPTH] [-b BURST -p PAUSE_US] [-u FRAMES]
 *               [-t THREADS]
 *
 * Output, one line on stdout (with -u, a pair is one unw_backtrace call):
 *   stack_bench pairs=N depth=D ns_per_pair=X cpu_ns_per_pair=Y [unw_frames=F] [threads=T]
 *               [burst_cpu_ns_median=Z] [warm_cpu_ns_per_pair=W]
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "clock_ns.h"

static unsigned long pairs = 200000, warmup = 20000, burst, pause_us;
static int unw_frames;
static int (*unw_bt)(void **, int);
static volatile uintptr_t sink;

static void loop(unsigned long n)
{
	void *pc[256];

	for (unsigned long i = 0; i < n; i++) {
		char *p;

		if (unw_bt) {
			sink += (uintptr_t)unw_bt(pc, unw_frames);
			continue;
		}
		p = malloc(64 + (i & 63));
		p[0] = (char)i;
		sink += (uintptr_t)p;
		free(p);
	}
}

#define BURSTS_KEPT 4096

struct worker {
	pthread_t th;
	int depth;
	uint64_t wall, cpu;
	uint64_t warm_cpu; /* the warm-up's CPU ns */
	uint32_t nbursts;
	uint64_t burst_cpu[BURSTS_KEPT]; /* each burst's CPU ns per 1000 pairs */
};

/* Runs total pairs in bursts of `burst` (all at once without -b), each after
 * a pause of pause_us; adds the CPU and wall time spent in the bursts
 * to *cpu and *wall and, when kept is given, each burst's CPU ns per 1000
 * pairs to the worker's list. */
static void run_bursts(struct worker *w, unsigned long total, uint64_t *cpu, uint64_t *wall,
		       int kept)
{
	struct timespec nap;
	uint64_t w0, c0, c;
	unsigned long done, n;

	nap.tv_sec = (time_t)(pause_us / 1000000u);
	nap.tv_nsec = (long)(pause_us % 1000000u) * 1000;
	for (done = 0; done < total; done += n) {
		n = burst && burst < total - done ? burst : total - done;
		/* The first burst too: the records before it are in the ring. */
		if (pause_us)
			nanosleep(&nap, 0);
		w0 = clock_ns(CLOCK_MONOTONIC);
		c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		loop(n);
		c = clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
		*cpu += c;
		*wall += clock_ns(CLOCK_MONOTONIC) - w0;
		if (kept && w->nbursts < BURSTS_KEPT)
			w->burst_cpu[w->nbursts++] = c * 1000 / n;
	}
}

/* Not a tail call, not inlined: each level is a real frame. */
__attribute__((noinline)) static int chain(int depth, struct worker *w)
{
	uint64_t warm_wall = 0;
	int r;

	if (depth > 1) {
		r = chain(depth - 1, w);
		sink += (uintptr_t)r;
		return r + 1;
	}
	/* The warm-up runs as the timed loop does (in bursts with -b), so that
	 * nothing is dropped in it either; its CPU time is reported apart:
	 * under the shim it holds what a thread pays once, such as the page
	 * faults of its ring's first lap. */
	if (warmup)
		run_bursts(w, warmup, &w->warm_cpu, &warm_wall, 0);
	run_bursts(w, pairs, &w->cpu, &w->wall, 1);
	return 1;
}

static void *run(void *arg)
{
	struct worker *w = arg;

	/* main and libc's start frames sit above the chain: the shim's
	 * default depth of 32 is reached inside the chain (a thread's start
	 * frames likewise). */
	chain(w->depth, w);
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static struct worker ws[64];

int main(int argc, char **argv)
{
	static uint64_t bursts[64 * BURSTS_KEPT];
	size_t nb = 0;
	double wall = 0, cpu = 0, warm_cpu = 0;
	int depth = 32, threads = 0, c, i;
	void *lib;

	while ((c = getopt(argc, argv, "n:w:d:b:p:u:t:")) != -1) {
		switch (c) {
		case 'n':
			pairs = strtoul(optarg, 0, 10);
			break;
		case 'w':
			warmup = strtoul(optarg, 0, 10);
			break;
		case 'd':
			depth = atoi(optarg);
			break;
		case 'b':
			burst = strtoul(optarg, 0, 10);
			break;
		case 'p':
			pause_us = strtoul(optarg, 0, 10);
			break;
		case 'u':
			unw_frames = atoi(optarg);
			break;
		case 't':
			threads = atoi(optarg);
			break;
		default:
			fprintf(stderr, "usage: stack_bench [-n PAIRS] [-w WARMUP] [-d DEPTH] "
					"[-b BURST -p PAUSE_US] [-u FRAMES] [-t THREADS]\n");
			return 2;
		}
	}
	if (!pairs || depth < 1 || unw_frames < 0 || unw_frames > 256 || threads < 0 ||
	    threads > 64) {
		fprintf(stderr, "stack_bench: -n and -d must be positive, -u at most 256, "
				"-t at most 64\n");
		return 2;
	}
	if (unw_frames) {
		lib = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
		unw_bt = lib ? (int (*)(void **, int))dlsym(lib, "unw_backtrace") : 0;
		if (!unw_bt) {
			fprintf(stderr, "stack_bench: no unw_backtrace in libunwind.so.8\n");
			return 1;
		}
	}
	for (i = 0; i < (threads ? threads : 1); i++) {
		ws[i].depth = depth;
		if (!threads)
			run(&ws[i]);
		else if (pthread_create(&ws[i].th, 0, run, &ws[i])) {
			fprintf(stderr, "stack_bench: pthread_create failed\n");
			return 1;
		}
	}
	for (i = 0; i < (threads ? threads : 1); i++) {
		if (threads)
			pthread_join(ws[i].th, 0);
		wall += (double)ws[i].wall;
		cpu += (double)ws[i].cpu;
		warm_cpu += (double)ws[i].warm_cpu;
		for (uint32_t k = 0; k < ws[i].nbursts; k++)
			bursts[nb++] = ws[i].burst_cpu[k];
	}
	qsort(bursts, nb, sizeof(*bursts), cmp_u64);
	i = threads ? threads : 1;
	printf("stack_bench pairs=%lu depth=%d ns_per_pair=%.2f cpu_ns_per_pair=%.2f", pairs, depth,
	       wall / i / (double)pairs, cpu / i / (double)pairs);
	if (unw_frames)
		printf(" unw_frames=%d", unw_frames);
	if (threads)
		printf(" threads=%d", threads);
	/* With -b: the median burst's CPU ns per pair, which a burst that
	 * another process's work slowed down moves less than the mean. */
	if (burst && nb)
		printf(" burst_cpu_ns_median=%.2f", (double)bursts[nb / 2] / 1000.0);
	if (warmup)
		printf(" warm_cpu_ns_per_pair=%.2f", warm_cpu / i / (double)warmup);
	printf("\n");
	return 0;
}
