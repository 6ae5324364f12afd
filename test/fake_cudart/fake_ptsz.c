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
	return fake_malloc_async(RT(cudaMallocAsync_ptsz_v11020), devPtr, size);
}

API cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t s)
{
	(void)s;
	return fake_free_async(RT(cudaFreeAsync_ptsz_v11020), devPtr);
}

API cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t pool,
					     cudaStream_t s)
{
	(void)s;
	return fake_malloc_from_pool(RT(cudaMallocFromPoolAsync_ptsz_v11020), ptr, size, pool);
}

API cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	return fake_memcpy_any(RT(cudaMemcpy_ptds_v7000), dst, src, count, kind, NULL, 0);
}

API cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count,
				     enum cudaMemcpyKind kind, cudaStream_t s)
{
	return fake_memcpy_any(RT(cudaMemcpyAsync_ptsz_v7000), dst, src, count, kind, s, 1);
}

API cudaError_t cudaMemset_ptds(void *devPtr, int value, size_t count)
{
	return fake_memset_any(RT(cudaMemset_ptds_v7000), devPtr, value, count, NULL, 0);
}

API cudaError_t cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count, cudaStream_t s)
{
	return fake_memset_any(RT(cudaMemsetAsync_ptsz_v7000), devPtr, value, count, s, 1);
}

API cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args,
				      size_t sharedMem, cudaStream_t s)
{
	return fake_launch_any(RT(cudaLaunchKernel_ptsz_v7000), func, gridDim, blockDim, args,
			       sharedMem, s);
}

API cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *config, const void *func,
					 void **args)
{
	return fake_launch_config(RT(cudaLaunchKernelExC_ptsz_v11060), config, func, args);
}

API cudaError_t cudaLaunchCooperativeKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim,
						 void **args, size_t sharedMem, cudaStream_t s)
{
	return fake_launch_any(RT(cudaLaunchCooperativeKernel_ptsz_v9000), func, gridDim, blockDim,
			       args, sharedMem, s);
}

API cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t s)
{
	return fake_graph_launch(RT(cudaGraphLaunch_ptsz_v10000), graphExec, s);
}

API cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s)
{
	return fake_stream_sync(RT(cudaStreamSynchronize_ptsz_v7000), s);
}

API cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t s, cudaEvent_t event, unsigned int flags)
{
	return fake_wait_event(RT(cudaStreamWaitEvent_ptsz_v7000), s, event, flags);
}
