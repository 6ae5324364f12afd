/*
 * wl_clock: a program whose figures are known from its own clocks, for the
 * figures the commands print about time (t_truth.sh): its wall time, when
 * its memory peaked, its live memory over time, its steps' durations and
 * its threads' CPU time.  Built against the fake CUDA runtime (device
 * memory is counted exactly in every malloc mode).
 *
 * In order:
 *  1. a thread spins until its own CPU clock (CLOCK_THREAD_CPUTIME_ID) has
 *     SPIN_NS, logs that clock, then sleeps until the end, which comes
 *     300 ms after the spin at the earliest: the collector reads the
 *     thread (every 100 ms) after the spin;
 *  2. a schedule of live memory, the same on the host heap (malloc) and on
 *     device 0 (cudaMalloc), each operation bracketed by CLOCK_MONOTONIC
 *     readings and followed by QUIET_NS of sleep, so that between two
 *     operations the live bytes of the program's own blocks are known:
 *         +A, +B, -A, +C (the peak: B + C), -B, -C, +D (kept to the end);
 *  3. STEPS "step" ranges (include/shimmer.h) of (k + 2) x 10 ms of sleep,
 *     each push and pop bracketed by clock readings;
 *  4. SYNCS calls of cudaDeviceSynchronize, each bracketed by clock
 *     readings (the test makes every CUDA call last FAKE_CUDA_DELAY_NS).
 *
 * Log lines (wlog.h), every time CLOCK_MONOTONIC ns, the clock of the
 * store's instants:
 *   W,pid,t                       main's first instruction
 *   M,pid,space,k,t0,t1,live      operation k (space host or device) was
 *                                 made within [t0, t1]; live: the bytes of
 *                                 the program's blocks of that space after it
 *   S,pid,k,ta,tb,tc,td           step k: ta before its push, tb after, tc
 *                                 before its pop, td after
 *   Y,pid,k,t0,t1                 synchronization k was called within [t0, t1]
 *   U,pid,tid,cpu_ns              the spinning thread's CPU time when it
 *                                 stopped spinning
 *   E,pid,t,cpu_ns                before main returns: the time, and the
 *                                 process's CPU time (CLOCK_PROCESS_CPUTIME_ID)
 *
 * No stdio and no heap calls of its own besides the schedule's blocks.
 */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock_ns.h"
#include "include/shimmer.h"
#include "wlog.h"

#define MS 1000000ull
#define SPIN_NS (300 * MS)
#define QUIET_NS (60 * MS)
#define STEPS 5
#define SYNCS 5

#define SZ_A ((8u << 20) + 1u)
#define SZ_B ((24u << 20) + 3u)
#define SZ_C ((40u << 20) + 5u)
#define SZ_D ((4u << 20) + 7u)

static int spun, done;

static void fail(const char *what)
{
	wlog_puts(2, "wl_clock: ");
	wlog_puts(2, what);
	wlog_puts(2, " failed\n");
	exit(1);
}

static void pause_ns(uint64_t ns)
{
	struct timespec t = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };

	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &t, &t) != 0)
		;
}

static void *spinner(void *arg)
{
	volatile uint64_t x = 0;
	uint64_t cpu;

	(void)arg;
	while ((cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID)) < SPIN_NS)
		for (int i = 0; i < 10000; i++)
			x += (uint64_t)i;
	wlog_line("sdud", "U", (int64_t)getpid(), (uint64_t)wlog_tid(), (int64_t)cpu);
	__atomic_store_n(&spun, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&done, __ATOMIC_ACQUIRE))
		pause_ns(10 * MS);
	return NULL;
}

/* The live bytes of each space's blocks after each operation. */
static uint64_t live;

static void logged(int k, uint64_t t0, const char *space)
{
	wlog_line("sdsdddd", "M", (int64_t)getpid(), space, (int64_t)k, (int64_t)t0,
		  (int64_t)clock_ns(CLOCK_MONOTONIC), (int64_t)live);
}

/* One operation on both spaces: allocate (size > 0) or free (block). */
static void host_op(int k, void **p, size_t size)
{
	uint64_t t0 = clock_ns(CLOCK_MONOTONIC);

	if (size) {
		*p = malloc(size);
		if (!*p)
			fail("malloc");
		memset(*p, 0x5a, 64);
		live += size;
	} else {
		free(*p);
	}
	logged(k, t0, "host");
}

static void dev_op(int k, void **p, size_t size)
{
	uint64_t t0 = clock_ns(CLOCK_MONOTONIC);

	if (size) {
		if (cudaMalloc(p, size) != cudaSuccess)
			fail("cudaMalloc");
		live += size;
	} else if (cudaFree(*p) != cudaSuccess) {
		fail("cudaFree");
	}
	logged(k, t0, "device");
}

/* The schedule on one space; frees subtract from live before the call. */
static void schedule(void (*op)(int, void **, size_t))
{
	void *a, *b, *c, *d;

	live = 0;
	op(1, &a, SZ_A);
	pause_ns(QUIET_NS);
	op(2, &b, SZ_B);
	pause_ns(QUIET_NS);
	live -= SZ_A;
	op(3, &a, 0);
	pause_ns(QUIET_NS);
	op(4, &c, SZ_C);
	pause_ns(QUIET_NS);
	live -= SZ_B;
	op(5, &b, 0);
	live -= SZ_C;
	op(6, &c, 0);
	pause_ns(QUIET_NS);
	op(7, &d, SZ_D);
	pause_ns(QUIET_NS);
}

int main(void)
{
	uint64_t w = clock_ns(CLOCK_MONOTONIC);
	pthread_t t;

	wlog_open();
	wlog_line("sdd", "W", (int64_t)getpid(), (int64_t)w);
	if (cudaSetDevice(0) != cudaSuccess)
		fail("cudaSetDevice");
	/* CUDA's "start now" (the shim's CUDA side starts lazily) */
	if (cudaFree(NULL) != cudaSuccess)
		fail("cudaFree(NULL)");
	if (pthread_create(&t, NULL, spinner, NULL) != 0)
		fail("pthread_create");
	schedule(host_op);
	schedule(dev_op);
	for (int k = 0; k < STEPS; k++) {
		uint64_t ta, tb, tc, td;

		ta = clock_ns(CLOCK_MONOTONIC);
		shimmer_range_push("step");
		tb = clock_ns(CLOCK_MONOTONIC);
		pause_ns((uint64_t)(k + 2) * 10 * MS);
		tc = clock_ns(CLOCK_MONOTONIC);
		shimmer_range_pop();
		td = clock_ns(CLOCK_MONOTONIC);
		wlog_line("sdddddd", "S", (int64_t)getpid(), (int64_t)k, (int64_t)ta, (int64_t)tb,
			  (int64_t)tc, (int64_t)td);
	}
	for (int k = 0; k < SYNCS; k++) {
		uint64_t t0 = clock_ns(CLOCK_MONOTONIC);

		if (cudaDeviceSynchronize() != cudaSuccess)
			fail("cudaDeviceSynchronize");
		wlog_line("sdddd", "Y", (int64_t)getpid(), (int64_t)k, (int64_t)t0,
			  (int64_t)clock_ns(CLOCK_MONOTONIC));
	}
	/* the spin over, the collector reads the thread at least twice more */
	while (!__atomic_load_n(&spun, __ATOMIC_ACQUIRE))
		pause_ns(10 * MS);
	pause_ns(300 * MS);
	__atomic_store_n(&done, 1, __ATOMIC_RELEASE);
	if (pthread_join(t, NULL) != 0)
		fail("pthread_join");
	wlog_line("sddd", "E", (int64_t)getpid(), (int64_t)clock_ns(CLOCK_MONOTONIC),
		  (int64_t)clock_ns(CLOCK_PROCESS_CPUTIME_ID));
	return 0;
}
