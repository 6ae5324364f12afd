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
#include <cupti_callbacks.h>
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>

#include "test/fake_cupti/fake_cupti.h"

#define API __attribute__((visibility("default")))

/* A runtime callback id, as CUPTI numbers it: RT(cudaMemcpy_v3020). */
#define RT(name) CUPTI_RUNTIME_TRACE_CBID_##name

#pragma GCC visibility push(hidden)
/* Each takes the CUPTI callback id of the entry point it serves: the fake
 * CUPTI (if loaded) sees the call as that entry point. */
cudaError_t fake_malloc_async(CUpti_CallbackId cbid, void **devPtr, size_t size);
cudaError_t fake_free_async(CUpti_CallbackId cbid, void *devPtr);
cudaError_t fake_malloc_from_pool(CUpti_CallbackId cbid, void **ptr, size_t size,
				  cudaMemPool_t pool);
cudaError_t fake_memcpy_any(CUpti_CallbackId cbid, void *dst, const void *src, size_t count,
			    enum cudaMemcpyKind kind, cudaStream_t s, int async);
cudaError_t fake_memset_any(CUpti_CallbackId cbid, void *p, int value, size_t count,
			    cudaStream_t s, int async);
cudaError_t fake_launch_any(CUpti_CallbackId cbid, const void *func, dim3 grid, dim3 block,
			    void **args, size_t smem, cudaStream_t s);

/* nvcc 13's launch entry points (declared by its headers for C++ only). */
API cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
			       void **args, size_t sharedMem, cudaStream_t stream);
API cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
				    void **args, size_t sharedMem, cudaStream_t stream);
cudaError_t fake_launch_config(CUpti_CallbackId cbid, const cudaLaunchConfig_t *config,
			       const void *func, void **args);
cudaError_t fake_graph_launch(CUpti_CallbackId cbid, cudaGraphExec_t exec, cudaStream_t s);
cudaError_t fake_stream_sync(CUpti_CallbackId cbid, cudaStream_t s);
cudaError_t fake_wait_event(CUpti_CallbackId cbid, cudaStream_t s, cudaEvent_t event,
			    unsigned int flags);
#pragma GCC visibility pop

#endif
