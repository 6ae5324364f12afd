/*
 * lifespan: blocks with planted lifetimes and sizes, for the size and
 * lifetime distributions (t_histogram.sh).  Built -O0 against the fake
 * CUDA runtime.
 *
 * Host (malloc) and device 0 (cudaMalloc) alike, all made at once (after
 * a warm-up), then freed that long after the last of them was made:
 *   phase A 20 ms:    lifetimes in [16.8 ms, 33.6 ms)
 *   phase B 300 ms:   in [268 ms, 537 ms)
 *   phase C 1.2 s:    in [1.07 s, 2.15 s), and longer than the collector's
 *                     row_ns (1 s): an exact-mode store keeps their rows
 *   phase D never freed.
 * Each sleep lies well inside its power-of-two bucket (a wake-up up to
 * 13 ms, 237 ms or 0.9 s late keeps it there), and each phase's blocks
 * have a size of their own, in a size bucket of their own.
 *
 * The plan is the test's truth, logged (wlog.h) before anything is
 * allocated as one line per phase and memory:
 *   Z,pid,space,phase,count,size,lo_ns,hi_ns
 * (space host or device; lo_ns, hi_ns the bucket the lifetimes must fall
 * in, -1 for blocks never freed).  Nothing else is allocated by the
 * program itself but the warm-up's host block, freed at once.
 */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "wlog.h"

struct phase {
	const char *name;
	int host_n, dev_n;
	size_t host_size, dev_size;
	int64_t free_at_ns; /* after the blocks were made; -1: never */
	int64_t lo_ns, hi_ns; /* the bucket of their lifetimes */
};

#define MAX_N 64

static const struct phase phases[] = {
	{ "A", 50, 5, 3000, (1u << 20) + 1, 20000000, 1 << 24, (1 << 25) - 1 },
	{ "B", 40, 4, 20000, (2u << 20) + 1, 300000000, 1 << 28, (1 << 29) - 1 },
	{ "C", 30, 3, 70000, (4u << 20) + 1, 1200000000, 1 << 30, (1ll << 31) - 1 },
	{ "D", 20, 2, 500, (8u << 20) + 1, -1, -1, -1 },
};

#define NPHASES (sizeof(phases) / sizeof(phases[0]))

static void *host[NPHASES][MAX_N], *dev[NPHASES][MAX_N];

static void sleep_until(const struct timespec *t0, int64_t ns)
{
	struct timespec t = *t0;

	t.tv_sec += ns / 1000000000;
	t.tv_nsec += ns % 1000000000;
	if (t.tv_nsec >= 1000000000) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000;
	}
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) != 0)
		;
}

static void fail(void)
{
	wlog_puts(2, "lifespan: allocation failed\n");
	exit(1);
}

/* The first heap and CUDA calls start what the shim starts lazily (its
 * CUDA side looks for CUPTI: milliseconds, threads); done before the
 * planted blocks, which are then all made within a fraction of a ms. */
static void warm_up(void)
{
	struct timespec pause = { 0, 50000000 };

	free(malloc(1));
	/* CUDA's idiom for "start now", which allocates nothing */
	if (cudaFree(NULL) != cudaSuccess)
		fail();
	nanosleep(&pause, NULL);
}

int main(void)
{
	struct timespec t0;

	wlog_open();
	for (size_t p = 0; p < NPHASES; p++) {
		const struct phase *ph = &phases[p];

		wlog_line("sdssdudd", "Z", (int64_t)getpid(), "host", ph->name, (int64_t)ph->host_n,
			  (uint64_t)ph->host_size, ph->lo_ns, ph->hi_ns);
		wlog_line("sdssdudd", "Z", (int64_t)getpid(), "device", ph->name, (int64_t)ph->dev_n,
			  (uint64_t)ph->dev_size, ph->lo_ns, ph->hi_ns);
	}
	if (cudaSetDevice(0) != cudaSuccess)
		fail();
	warm_up();
	for (size_t p = 0; p < NPHASES; p++) {
		for (int i = 0; i < phases[p].host_n; i++) {
			host[p][i] = malloc(phases[p].host_size);
			if (!host[p][i])
				fail();
			memset(host[p][i], 0x5a, 64);
		}
		for (int i = 0; i < phases[p].dev_n; i++)
			if (cudaMalloc(&dev[p][i], phases[p].dev_size) != cudaSuccess)
				fail();
	}
	/* from the last block made: no lifetime is shorter than planted */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* in order of their times: A, B, C */
	for (size_t p = 0; p < NPHASES; p++) {
		if (phases[p].free_at_ns < 0)
			continue;
		sleep_until(&t0, phases[p].free_at_ns);
		for (int i = 0; i < phases[p].host_n; i++)
			free(host[p][i]);
		for (int i = 0; i < phases[p].dev_n; i++)
			if (cudaFree(dev[p][i]) != cudaSuccess)
				fail();
	}
	return 0;
}
