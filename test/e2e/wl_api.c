/*
 * wl_api: a program marked up with include/shimmer.h.  Without the shim
 * every call is a no-op and the program prints the same line and exits 0;
 * under the shim its ranges, marker and counters are recorded, and what it
 * does between shimmer_pause() and shimmer_resume() is not.  It logs what
 * it recorded (wlog.h; nothing that it did while paused):
 *   R,pid,tid,kind,domain,name,depth,parent,t0,t1   a range (wl_gpu.c)
 *   M,pid,tid,domain,name,t0                        a marker
 *   N,pid,tid,name,value*1000                       a counter sample
 *   C,...                                           a CUDA call (wlog.h)
 */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "clock_ns.h"
#include "include/shimmer.h"
#include "wlog.h"

static uint64_t now(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

static void counter(const char *name, double v, int logged)
{
	shimmer_counter(name, v);
	if (logged)
		wlog_line("sdusd", "N", (int64_t)getpid(), (uint64_t)wlog_tid(), name,
			  (int64_t)(v * 1000));
}

/* cudaMalloc + cudaFree of size bytes, logged as C lines when logged. */
static void cuda_pair(uint64_t size, int logged)
{
	void *d = NULL;
	int err = cudaMalloc(&d, size), dev = -1;

	cudaGetDevice(&dev);
	if (logged)
		wlog_line("sdusdduuuuuuuuuuuuu", "C", (int64_t)getpid(), (uint64_t)wlog_tid(),
			  "cudaMalloc", (int64_t)err, (int64_t)dev, (uint64_t)(uintptr_t)d, size,
			  0ul, 0ul, 0ul, 0ul, 0ul, 0ul, 0ul, 0ul, 0ul, 0ul, 0ul);
	err = cudaFree(d);
	if (logged)
		wlog_line("sdusdduuuuuuuuuuuuu", "C", (int64_t)getpid(), (uint64_t)wlog_tid(),
			  "cudaFree", (int64_t)err, (int64_t)dev, (uint64_t)(uintptr_t)d, 0ul,
			  0ul, 0ul, 0ul, 0ul, 0ul, 0ul, 0ul, 0ul, 0ul, 0ul, 0ul);
}

int main(void)
{
	uint64_t t0, t1, u0;
	uint64_t tid;

	wlog_open();
	tid = (uint64_t)wlog_tid();
	wlog_line("sddd", "P", (int64_t)getpid(), (int64_t)getppid(), (int64_t)0);
	wlog_line("sdud", "T", (int64_t)getpid(), tid, (int64_t)0);

	t0 = now();
	shimmer_range_push("train");
	cuda_pair(40960, 1);
	u0 = now();
	shimmer_range_push("step");
	counter("loss", 2.5, 1);
	counter("loss", 1.25, 1);
	shimmer_mark("step-done");
	wlog_line("sdussu", "M", (int64_t)getpid(), tid, "shimmer", "step-done", now());
	shimmer_range_pop();
	wlog_line("sdusssdsuu", "R", (int64_t)getpid(), tid, "push", "shimmer", "step",
		  (int64_t)1, "train", u0, now());

	shimmer_pause();
	shimmer_range_push("hidden-range");
	shimmer_mark("hidden-mark");
	counter("hidden-counter", 9, 0);
	cuda_pair(81920, 0);
	shimmer_range_pop();
	shimmer_resume();

	cuda_pair(12288, 1);
	counter("lr", 0.125, 1);
	shimmer_range_pop();
	t1 = now();
	wlog_line("sdusssdsuu", "R", (int64_t)getpid(), tid, "push", "shimmer", "train",
		  (int64_t)0, "-", t0, t1);
	wlog_puts(1, "wl_api: done\n");
	return 0;
}
