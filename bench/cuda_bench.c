/*
 * cuda_bench: times CUDA runtime calls against the fake runtime
 * (build/test/fake_cudart/libcudart.so.13), so that running it bare and
 * under libshimmer.so gives the time the shim adds per intercepted call.
 * The fake does no GPU work, so the bare figure is the call overhead alone
 * and the difference is the shim's.
 *
 *   cuda_bench [-n CALLS] [-o OP] [-b BURST -p PAUSE_US]
 *
 * -o runs one operation only (launch, memcpy_async, malloc_free), for
 * profiling.  For each operation: a warm-up of CALLS/10 untimed, then CALLS timed with
 * CLOCK_MONOTONIC around the loop (ns_per_call) and CLOCK_THREAD_CPUTIME_ID
 * (cpu_ns_per_call: the same less time descheduled).  Output, one line per
 * operation:
 *   cuda_bench op=NAME calls=N ns_per_call=X cpu_ns_per_call=Y
 * (op=malloc_free counts one cudaMalloc+cudaFree pair as one "call"; it
 * runs CALLS/10 pairs, since the fake maps and unmaps memory for each.)
 * -b: the timed calls in bursts of BURST, PAUSE_US microseconds apart
 * (not timed), so that a collector keeps up with what every call records
 * (SHIMMER_GPU=all: a kernel, its API call and its stack) and nothing is
 * timed on the path of a record the full ring drops.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "clock_ns.h"

static void check(cudaError_t e, const char *what)
{
	if (e != cudaSuccess) {
		fprintf(stderr, "cuda_bench: %s failed: %d\n", what, (int)e);
		exit(1);
	}
}

static void kernel_stub(void)
{
}

static void do_launch(uint64_t n)
{
	dim3 grid = { 128, 1, 1 }, block = { 256, 1, 1 };

	for (uint64_t i = 0; i < n; i++)
		check(cudaLaunchKernel((const void *)kernel_stub, grid, block,
				       NULL, 0, NULL), "cudaLaunchKernel");
}

static void *dev_buf;
static char host_buf[256];

static void do_memcpy_async(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		check(cudaMemcpyAsync(dev_buf, host_buf, sizeof(host_buf),
				      cudaMemcpyHostToDevice, NULL),
		      "cudaMemcpyAsync");
}

static void do_malloc_free(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		void *p = NULL;

		check(cudaMalloc(&p, 4096 + (i % 16) * 256), "cudaMalloc");
		check(cudaFree(p), "cudaFree");
	}
}

static const char *only;
static uint64_t burst, pause_us;

/* fn(n), timed: in bursts when -b says so, the pauses left out. */
static void timed(void (*fn)(uint64_t), uint64_t n, uint64_t *wall, uint64_t *cpu)
{
	uint64_t b = burst ? burst : n;

	*wall = *cpu = 0;
	for (uint64_t done = 0; done < n; done += b) {
		uint64_t k = n - done < b ? n - done : b;
		uint64_t c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID), t0 = clock_ns(CLOCK_MONOTONIC);

		fn(k);
		*wall += clock_ns(CLOCK_MONOTONIC) - t0;
		*cpu += clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
		if (burst && pause_us)
			usleep((useconds_t)pause_us);
	}
}

static void run(const char *name, void (*fn)(uint64_t), uint64_t n)
{
	uint64_t wall, cpu;

	if (only && strcmp(only, name) != 0)
		return;
	timed(fn, n / 10, &wall, &cpu);
	timed(fn, n, &wall, &cpu);
	printf("cuda_bench op=%s calls=%llu ns_per_call=%.2f cpu_ns_per_call=%.2f\n", name,
	       (unsigned long long)n, (double)wall / (double)n, (double)cpu / (double)n);
}

int main(int argc, char **argv)
{
	uint64_t n = 500000;
	int c;

	while ((c = getopt(argc, argv, "n:o:b:p:")) != -1) {
		switch (c) {
		case 'n':
			n = strtoull(optarg, NULL, 10);
			break;
		case 'o':
			only = optarg;
			break;
		case 'b':
			burst = strtoull(optarg, NULL, 10);
			break;
		case 'p':
			pause_us = strtoull(optarg, NULL, 10);
			break;
		default:
			fprintf(stderr, "usage: cuda_bench [-n CALLS] [-o OP] [-b BURST -p PAUSE_US]\n");
			return 2;
		}
	}
	if (n == 0)
		n = 1;
	check(cudaMalloc(&dev_buf, sizeof(host_buf)), "cudaMalloc");
	run("launch", do_launch, n);
	run("memcpy_async", do_memcpy_async, n);
	/* the fake's cudaMalloc is an mmap, cudaFree a munmap: fewer of them */
	run("malloc_free", do_malloc_free, n / 10 ? n / 10 : 1);
	check(cudaFree(dev_buf), "cudaFree");
	return 0;
}
