/*
 * launch_ab: what a preloaded shim adds to each kernel launch, read inside
 * one process (GPU machine).  Chunks of launches of an empty kernel go
 * either through cudaLaunchKernel as the program links it (the shim's hook
 * when one is preloaded) or straight to libcudart's own cudaLaunchKernel
 * (dlsym on libcudart's handle finds its definition, not the hook's);
 * neighbouring chunks take one path each, in turn first.  Only the CPU's
 * time in the launch loop is timed; each chunk then waits for the GPU.
 *
 *   launch_ab [-n LAUNCHES_PER_CHUNK] [-p PAIRS]
 *
 * Prints one JSON line: ns per launch by each path, the difference, and
 * its 95% interval from the spread of the pairs' differences.  Run bare,
 * the difference must be nought within that interval.
 *
 * Built on the GPU machine by bench/gpu-overhead (nvcc -cudart shared).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include "paired.h"

typedef cudaError_t (*launch_fn)(const void *, dim3, dim3, void **, size_t, cudaStream_t);

__global__ void empty_kernel(int *p)
{
	if (p)
		*p = 1;
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static cudaError_t linked_launch(const void *f, dim3 g, dim3 b, void **a, size_t s,
				 cudaStream_t st)
{
	return cudaLaunchKernel(f, g, b, a, s, st);
}

/* CPU ns per launch of one chunk; -1 on a failed call. */
static double chunk(launch_fn launch, int n)
{
	int *p = NULL;
	void *args[] = { &p };
	double t0 = now_ns(), t;

	for (int i = 0; i < n; i++)
		if (launch((const void *)empty_kernel, dim3(1), dim3(32), args, 0, 0) != cudaSuccess)
			return -1;
	t = now_ns() - t0;
	if (cudaStreamSynchronize(0) != cudaSuccess)
		return -1;
	return t / n;
}

int main(int argc, char **argv)
{
	int n = 400, pairs = 2000, opt;
	void *cudart = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
	launch_fn direct;
	struct paired pr = { 0 };

	while ((opt = getopt(argc, argv, "n:p:")) != -1) {
		if (opt == 'n')
			n = atoi(optarg);
		else if (opt == 'p')
			pairs = atoi(optarg);
		else
			goto usage;
	}
	if (n <= 0 || pairs < 2)
		goto usage;
	direct = cudart ? (launch_fn)dlsym(cudart, "cudaLaunchKernel") : NULL;
	if (!direct) {
		fprintf(stderr, "launch_ab: libcudart.so.13's cudaLaunchKernel not found\n");
		return 1;
	}
	for (int i = 0; i < 20; i++)
		if (chunk(linked_launch, n) < 0 || chunk(direct, n) < 0)
			goto failed;
	for (int k = 0; k < pairs; k++) {
		double l, d;

		if (k & 1) {
			d = chunk(direct, n);
			l = chunk(linked_launch, n);
		} else {
			l = chunk(linked_launch, n);
			d = chunk(direct, n);
		}
		if (l < 0 || d < 0)
			goto failed;
		paired_add(&pr, l, d);
	}
	printf("{\"launches_per_chunk\": %d, \"pairs\": %d, \"linked_ns\": %.1f, "
	       "\"direct_ns\": %.1f, \"added_ns\": %.1f, \"added_ci95_ns\": %.1f}\n",
	       n, pairs, pr.sum_a / pairs, pr.sum_b / pairs, paired_mean_diff(&pr),
	       paired_ci95(&pr));
	return 0;
failed:
	fprintf(stderr, "launch_ab: a CUDA call failed: %s\n",
		cudaGetErrorString(cudaGetLastError()));
	return 1;
usage:
	fprintf(stderr, "usage: launch_ab [-n LAUNCHES_PER_CHUNK] [-p PAIRS]\n");
	return 2;
}
