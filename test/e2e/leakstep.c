/*
 * leakstep: a training loop of "step" ranges (include/shimmer.h) for the
 * leak regression (t_leakstep.sh).  Each step allocates and frees a working
 * block through cudaMalloc (the fake runtime) and, by MODE:
 *
 *   grow      also leaks one SZ_STEP block per step: live device memory
 *             rises by exactly SZ_STEP bytes a step;
 *   plateau   fills a cache during the first WARMUP steps (one SZ_CACHE
 *             block each, kept to the end and never freed), then stays
 *             flat: every later step frees all it allocated.
 *
 *   leakstep MODE [STEPS]
 *
 * It logs, with write(2) (wlog.h), one line per step,
 *   S,pid,mode,step,kept,line,t0,t1   kept: bytes the step left allocated,
 *                                 line: of that allocating call (0: none),
 *                                 t0, t1: CLOCK_MONOTONIC around its pop
 * which is the test's truth for the slopes and the call site.  Each step
 * ends with 2 ms of sleep.
 */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock_ns.h"

#include "include/shimmer.h"
#include "wlog.h"

#define SZ_STEP ((3u << 20) + 4104u)
#define SZ_WORK ((16u << 20) + 8u)
#define SZ_CACHE ((8u << 20) + 24u)
#define WARMUP 5

static void must_ok(int err, const char *what)
{
	if (err) {
		wlog_puts(2, "leakstep: ");
		wlog_puts(2, what);
		wlog_puts(2, " failed\n");
		exit(1);
	}
}

static uint64_t step(int grow, int i, int *line)
{
	void *work = NULL, *kept = NULL;
	uint64_t bytes = 0;

	*line = 0;
	must_ok(cudaMalloc(&work, SZ_WORK), "cudaMalloc");
	if (grow) {
		must_ok(cudaMalloc(&kept, SZ_STEP), "cudaMalloc"); *line = __LINE__;
		bytes = SZ_STEP;
	} else if (i < WARMUP) {
		must_ok(cudaMalloc(&kept, SZ_CACHE), "cudaMalloc"); *line = __LINE__;
		bytes = SZ_CACHE;
	}
	must_ok(cudaMemset(work, 0, 4096), "cudaMemset");
	must_ok(cudaFree(work), "cudaFree");
	return bytes;
}

int main(int argc, char **argv)
{
	int grow, steps = argc > 2 ? atoi(argv[2]) : 30;

	if (argc < 2 || (strcmp(argv[1], "grow") && strcmp(argv[1], "plateau")) || steps < 1) {
		wlog_puts(2, "usage: leakstep grow|plateau [STEPS]\n");
		return 2;
	}
	grow = !strcmp(argv[1], "grow");
	wlog_open();
	wlog_line("sddd", "P", (int64_t)getpid(), (int64_t)getppid(), (int64_t)0);
	must_ok(cudaSetDevice(0), "cudaSetDevice");
	for (int i = 0; i < steps; i++) {
		uint64_t kept;
		int line;

		struct timespec pause = { 0, 2000000 };
		uint64_t t0, t1;

		shimmer_range_push("step");
		kept = step(grow, i, &line);
		/* steps of a few ms: the slope per second a steady figure */
		nanosleep(&pause, NULL);
		t0 = clock_ns(CLOCK_MONOTONIC);
		shimmer_range_pop();
		t1 = clock_ns(CLOCK_MONOTONIC);
		wlog_line("sdsduddd", "S", (int64_t)getpid(), argv[1], (int64_t)i, kept, (int64_t)line,
			  (int64_t)t0, (int64_t)t1);
	}
	return 0;
}
