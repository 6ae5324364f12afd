/*
 * attach_bench: a process for shimmer attach's benchmarks (run-bench
 * section 6).  It loads the libraries named on its command line (the
 * 200-library process of issue 16's goal: attach and detach each under
 * 1 s), links the fake CUDA runtime and driver like a real job, and then
 * times loops on command, one per line on stdin, so that the same process
 * can be measured bare, attached and detached again:
 *
 *   launch N   N cudaLaunchKernel calls (fake runtime)
 *   heap N     N malloc(64)+free pairs
 *   quit
 *
 * It prints "ready" once loaded, and per loop one line:
 *   attach_bench op=launch|heap calls=N ns_per_call=X cpu_ns_per_call=Y
 * A malloc+free pair is one "call" (two probed calls when attached).
 */
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock_ns.h"

static void kernel_stub(void)
{
}

static void launch(uint64_t n)
{
	dim3 grid = { 128, 1, 1 }, block = { 256, 1, 1 };

	for (uint64_t i = 0; i < n; i++)
		if (cudaLaunchKernel((const void *)kernel_stub, grid, block, NULL, 0, NULL)) {
			fprintf(stderr, "attach_bench: cudaLaunchKernel failed\n");
			exit(1);
		}
}

static void heap(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		void *volatile p = malloc(64);

		free(p);
	}
}

int main(int argc, char **argv)
{
	char line[128], op[16];
	unsigned long long n;

	for (int i = 1; i < argc; i++)
		if (!dlopen(argv[i], RTLD_NOW | RTLD_LOCAL)) {
			fprintf(stderr, "attach_bench: %s\n", dlerror());
			return 1;
		}
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	while (fgets(line, sizeof(line), stdin)) {
		uint64_t t0, t1, c0, c1;
		void (*fn)(uint64_t);

		if (sscanf(line, "%15s %llu", op, &n) < 1 || !strcmp(op, "quit"))
			break;
		fn = !strcmp(op, "launch") ? launch : !strcmp(op, "heap") ? heap : NULL;
		if (!fn || !n) {
			fprintf(stderr, "attach_bench: bad command: %s", line);
			return 2;
		}
		fn(n / 10);
		c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		t0 = clock_ns(CLOCK_MONOTONIC);
		fn(n);
		t1 = clock_ns(CLOCK_MONOTONIC);
		c1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		printf("attach_bench op=%s calls=%llu ns_per_call=%.2f cpu_ns_per_call=%.2f\n", op, n,
		       (double)(t1 - t0) / (double)n, (double)(c1 - c0) / (double)n);
	}
	return 0;
}
