/*
 * The _ptsz/_ptds (per-thread default stream) entry points of the fake CUDA
 * runtime.  With CUDA_API_PER_THREAD_DEFAULT_STREAM defined, the CUDA header
 * declares these names (its macros rename the plain declarations), so each
 * definition below is checked against the real signature.  The bodies are
 * the plain functions' (fake_cudart.c): the fake has no streams to tell
 * apart.
 */
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1
#include "fake_cudart.h"

API cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t s)
{
	(void)s;
	return fake_malloc_async(devPtr, size);
}

API cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t s)
{
	(void)s;
	return fake_free_async(devPtr);
}

API cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t pool,
					     cudaStream_t s)
{
	(void)s;
	return fake_malloc_from_pool(ptr, size, pool);
}

API cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	return fake_memcpy_any(dst, src, count, kind);
}

API cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count,
				     enum cudaMemcpyKind kind, cudaStream_t s)
{
	(void)s;
	return fake_memcpy_any(dst, src, count, kind);
}

API cudaError_t cudaMemset_ptds(void *devPtr, int value, size_t count)
{
	return fake_memset_any(devPtr, value, count);
}

API cudaError_t cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count, cudaStream_t s)
{
	(void)s;
	return fake_memset_any(devPtr, value, count);
}

API cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args,
				      size_t sharedMem, cudaStream_t s)
{
	(void)args, (void)sharedMem, (void)s;
	return fake_launch_any(func, gridDim, blockDim);
}

API cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *config, const void *func,
					 void **args)
{
	(void)args;
	return fake_launch_config(config, func);
}

API cudaError_t cudaLaunchCooperativeKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim,
						 void **args, size_t sharedMem, cudaStream_t s)
{
	(void)args, (void)sharedMem, (void)s;
	return fake_launch_any(func, gridDim, blockDim);
}

API cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t s)
{
	(void)s;
	return fake_graph_launch(graphExec);
}

API cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s)
{
	(void)s;
	return fake_sync_any();
}

API cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t s, cudaEvent_t event, unsigned int flags)
{
	(void)s;
	return fake_wait_event(event, flags);
}
