/*
 * leaky's planted sites in a second source file (see leaky.c): a host leak
 * of two blocks, a pinned and a managed CUDA leak, and one block of the
 * peak.  Each is logged on the line of its allocating call.
 */
#include <cuda_runtime_api.h>

#include "leaky.h"

void lib_leak_nested(void)
{
	for (int i = 0; i < 2; i++) {
		char *p = must(malloc(SZ_LIB_NESTED)); NOTE("L", SZ_LIB_NESTED, "host", "malloc");

		p[SZ_LIB_NESTED - 1] = 1;
	}
}

void lib_leak_cuda_host(void)
{
	for (int i = 0; i < 2; i++) {
		void *p = NULL;

		must_ok(cudaMallocHost(&p, SZ_LIB_PINNED)); NOTE("L", SZ_LIB_PINNED, "pinned", "cudaMallocHost");
	}
}

void lib_leak_cuda_managed(void)
{
	void *p = NULL;

	must_ok(cudaMallocManaged(&p, SZ_LIB_MANAGED, cudaMemAttachGlobal)); NOTE("L", SZ_LIB_MANAGED, "managed", "cudaMallocManaged");
}

void *lib_peak_block(void)
{
	char *p = must(malloc(SZ_LIB_PEAK)); NOTE("K", SZ_LIB_PEAK, "host", "malloc");

	p[0] = 1;
	return p;
}
