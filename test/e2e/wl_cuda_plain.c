/* The workload's CUDA sequence through the plain entry points (wl_cuda.h),
 * plus the calls that are the same in both builds. */
#define WL_CUDA_FN wl_cuda_plain
#define WL_PTSZ 0
#include "wl_cuda_body.h"

void wl_cuda_failures(void)
{
	void *d = (void *)1;
	int err;

	wlog_lock();
	err = cudaMalloc(&d, (size_t)1 << 62);
	CALL(.fn = "cudaMalloc", .ret = err, .ptr = U(d), .bytes = (uint64_t)1 << 62);
	wlog_unlock();
	err = cudaMemcpy(&d, &d, 8, (enum cudaMemcpyKind)42);
	CALL(.fn = "cudaMemcpy", .ret = err, .ptr = U(&d), .aux = U(&d), .bytes = 8, .kind = 42);
}

unsigned long long wl_cuda_mallocs(unsigned n, unsigned long long size)
{
	for (unsigned i = 0; i < n; i++) {
		void *d = NULL;
		int err;

		wlog_lock();
		err = cudaMalloc(&d, size);
		CALL(.fn = "cudaMalloc", .ret = err, .ptr = U(d), .bytes = size);
		log_alloc("cudaMalloc", d, size, "device");
		log_free("cudaFree", d);
		err = cudaFree(d);
		CALL(.fn = "cudaFree", .ret = err, .ptr = U(d));
		wlog_unlock();
	}
	return n * size;
}
