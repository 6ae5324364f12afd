/*
 * Internal to the fake CUDA runtime: the shared bodies of the plain entry
 * points (fake_cudart.c) and their _ptsz/_ptds variants (fake_ptsz.c).
 * Hidden: the library exports only the CUDA names (libcudart.map).  Each
 * helper takes at least FAKE_CUDA_DELAY_NS and records the thread's last
 * error like the entry point it serves.
 */
#ifndef FAKE_CUDART_H
#define FAKE_CUDART_H

#include <cuda_runtime_api.h>

#define API __attribute__((visibility("default")))

#pragma GCC visibility push(hidden)
cudaError_t fake_malloc_async(void **devPtr, size_t size);
cudaError_t fake_free_async(void *devPtr);
cudaError_t fake_malloc_from_pool(void **ptr, size_t size, cudaMemPool_t pool);
cudaError_t fake_memcpy_any(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind);
cudaError_t fake_memset_any(void *p, int value, size_t count);
cudaError_t fake_launch_any(const void *func, dim3 grid, dim3 block);

/* nvcc 13's launch entry points (declared by its headers for C++ only). */
API cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
			       void **args, size_t sharedMem, cudaStream_t stream);
API cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
				    void **args, size_t sharedMem, cudaStream_t stream);
cudaError_t fake_launch_config(const cudaLaunchConfig_t *config, const void *func);
cudaError_t fake_graph_launch(cudaGraphExec_t exec);
cudaError_t fake_sync_any(void);
cudaError_t fake_wait_event(cudaEvent_t event, unsigned int flags);
#pragma GCC visibility pop

#endif
