/*
 * heap_random: the exact-mode workload of bench/run-bench's comparison
 * with heaptrack: PAIRS allocations of random sizes and as many frees, in
 * one thread.  A table of LIVE blocks is filled, then each step frees a
 * random entry and allocates a block of a random size (8..MAX bytes,
 * uniform) in its place; the rest is freed at the end, so nothing leaks and
 * every allocation but the last LIVE is freed at a random later time.
 * One allocation in 16 is a calloc, from a call site of its own.  With
 * the table itself: 2 x PAIRS + 2 heap events.
 *
 *   heap_random [-n PAIRS] [-l LIVE] [-s MAX] [-r SEED]
 *
 * Output, one line on stdout (after everything is freed):
 *   heap_random pairs=N live=L max=M checksum=C
 * The process's wall time is what the comparison measures, start-up
 * included, as a user timing the command would.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static uint64_t x = 88172645463325252ull;

static inline uint64_t next(void)
{
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return x;
}

/* Two call sites, kept apart. */
static __attribute__((noinline)) void *get(size_t n)
{
	return malloc(n);
}

static __attribute__((noinline)) void *get_zeroed(size_t n)
{
	return calloc(1, n);
}

int main(int argc, char **argv)
{
	unsigned long long pairs = 5000000, live = 1024, max = 4096, sum = 0;
	void **tab;
	int c;

	while ((c = getopt(argc, argv, "n:l:s:r:")) != -1) {
		switch (c) {
		case 'n':
			pairs = strtoull(optarg, 0, 10);
			break;
		case 'l':
			live = strtoull(optarg, 0, 10);
			break;
		case 's':
			max = strtoull(optarg, 0, 10);
			break;
		case 'r':
			x = strtoull(optarg, 0, 10) | 1;
			break;
		default:
			fprintf(stderr, "usage: heap_random [-n PAIRS] [-l LIVE] [-s MAX] [-r SEED]\n");
			return 2;
		}
	}
	if (!live || live > pairs || max < 8) {
		fprintf(stderr, "heap_random: need 1 <= LIVE <= PAIRS and MAX >= 8\n");
		return 2;
	}
	tab = calloc(live, sizeof(*tab));
	if (!tab)
		return 1;
	for (unsigned long long i = 0; i < pairs; i++) {
		uint64_t r = next();
		size_t n = 8 + (size_t)((r >> 8) % (max - 7));
		unsigned long long k = i < live ? i : (r >> 32) % live;
		char *p;

		if (i >= live)
			free(tab[k]);
		p = (r & 15) == 1 ? get_zeroed(n) : get(n);
		if (!p)
			abort();
		p[0] = (char)i;
		sum += (unsigned char)p[n - 1];
		tab[k] = p;
	}
	for (unsigned long long k = 0; k < live; k++)
		free(tab[k]);
	free(tab);
	printf("heap_random pairs=%llu live=%llu max=%llu checksum=%llu\n", pairs, live, max, sum);
	return 0;
}
