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
 *   stack_bench [-n PAIRS] [-w WARMUP] [-d DEPTH]
 *
 * Output, one line on stdout:
 *   stack_bench pairs=N depth=D ns_per_pair=X cpu_ns_per_pair=Y
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static unsigned long pairs = 200000, warmup = 20000;
static volatile uintptr_t sink;

static uint64_t now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void loop(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++) {
		char *p = malloc(64 + (i & 63));

		p[0] = (char)i;
		sink += (uintptr_t)p;
		free(p);
	}
}

/* Not a tail call, not inlined: each level is a real frame. */
__attribute__((noinline)) static int chain(int depth, uint64_t *wall, uint64_t *cpu)
{
	uint64_t w0, c0;
	int r;

	if (depth > 1) {
		r = chain(depth - 1, wall, cpu);
		sink += (uintptr_t)r;
		return r + 1;
	}
	loop(warmup);
	w0 = now_ns(CLOCK_MONOTONIC);
	c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
	loop(pairs);
	*cpu = now_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
	*wall = now_ns(CLOCK_MONOTONIC) - w0;
	return 1;
}

int main(int argc, char **argv)
{
	uint64_t wall = 0, cpu = 0;
	int depth = 32, c;

	while ((c = getopt(argc, argv, "n:w:d:")) != -1) {
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
		default:
			fprintf(stderr, "usage: stack_bench [-n PAIRS] [-w WARMUP] [-d DEPTH]\n");
			return 2;
		}
	}
	if (!pairs || depth < 1) {
		fprintf(stderr, "stack_bench: -n and -d must be positive\n");
		return 2;
	}
	/* main and libc's start frames sit above the chain: the shim's
	 * default depth of 32 is reached inside the chain. */
	chain(depth, &wall, &cpu);
	printf("stack_bench pairs=%lu depth=%d ns_per_pair=%.2f cpu_ns_per_pair=%.2f\n", pairs,
	       depth, (double)wall / (double)pairs, (double)cpu / (double)pairs);
	return 0;
}
