/*
 * wl_ranks: one rank of a data-parallel training loop, for `shimmer
 * summary --by-rank` (t_ranks.sh).  The rank is $RANK, as torchrun sets it
 * (the shim records it).  Each of STEPS steps is a "step" range
 * (include/shimmer.h) around a cudaMalloc, a kernel launch, a
 * cudaDeviceSynchronize, a cudaFree and STEP_US of sleep, standing for the
 * step's work; the rank SLOW_RANK sleeps EXTRA_US more: the planted
 * straggler (-1: none).
 *
 *   wl_ranks STEPS STEP_US SLOW_RANK EXTRA_US [BYTES [FIRST_US]]
 *
 * BYTES: the size of each step's cudaMalloc (1 MiB); FIRST_US: more sleep
 * in the first step only (0), a warm-up step far slower than the rest.  Without RANK the
 * process is rank -1, so SLOW_RANK -1 makes it the slow one (a slower run,
 * for compare) and -2 none.
 * It logs (wlog.h) one line per step, with CLOCK_MONOTONIC readings just
 * outside the range:
 *   S,pid,rank,step,t0,t1
 */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "clock_ns.h"
#include "include/shimmer.h"
#include "test/fake_cudart/fake_gpu.h"
#include "wlog.h"

static void k_train(void)
{
}

int main(int argc, char **argv)
{
	const char *r = getenv("RANK");
	int steps, step_us, slow, extra, first = argc > 6 ? atoi(argv[6]) : 0,
	    rank = r ? atoi(r) : -1;
	size_t bytes = argc > 5 ? (size_t)atol(argv[5]) : 1 << 20;

	if (argc < 5 || argc > 7 || first < 0 || (steps = atoi(argv[1])) < 1 || (step_us = atoi(argv[2])) < 0 ||
	    (extra = atoi(argv[4])) < 0 || bytes == 0) {
		wlog_puts(2, "usage: wl_ranks STEPS STEP_US SLOW_RANK EXTRA_US [BYTES [FIRST_US]]\n");
		return 2;
	}
	slow = atoi(argv[3]);
	wlog_open();
	if (fake_cuda_register_kernel((const void *)(uintptr_t)k_train, "train_step_kernel"))
		return 1;
	if (cudaSetDevice(0) != cudaSuccess)
		return 1;
	for (int i = 0; i < steps; i++) {
		uint64_t t0 = clock_ns(CLOCK_MONOTONIC), t1;
		void *d = NULL;
		dim3 g = { 4, 1, 1 }, b = { 128, 1, 1 };

		shimmer_range_push("step");
		if (cudaMalloc(&d, bytes) != cudaSuccess ||
		    cudaLaunchKernel((const void *)(uintptr_t)k_train, g, b, NULL, 0, NULL) !=
			    cudaSuccess ||
		    cudaDeviceSynchronize() != cudaSuccess || cudaFree(d) != cudaSuccess)
			return 1;
		usleep((useconds_t)(step_us + (rank == slow ? extra : 0) + (i == 0 ? first : 0)));
		shimmer_range_pop();
		t1 = clock_ns(CLOCK_MONOTONIC);
		wlog_line("sddduu", "S", (int64_t)getpid(), (int64_t)rank, (int64_t)i, t0, t1);
	}
	return 0;
}
