/*
 * Fake-only extras of the fake CUDA runtime for workloads (exported by
 * build/test/fake_cudart/libcudart.so.13, absent from the real library).
 */
#ifndef FAKE_GPU_H
#define FAKE_GPU_H

#include <stdint.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

/* Names the kernel behind func (a launch's function pointer): the name CUPTI
 * reports for its launches, as a real module would register it.  name must
 * stay valid.  Returns 0, or -ENOSPC past 64 kernels.  Thread-safe. */
int fake_cuda_register_kernel(const void *func, const char *name);

/* On the asynchronous GPU (FAKE_GPU_KERNEL_NS, fake_cudart.c), each kernel of
 * the registered func runs ns nanoseconds.  Returns 0, or -ENOENT when func
 * is not registered.  Thread-safe. */
int fake_cuda_kernel_ns(const void *func, uint64_t ns);

/* A driver-API launch (cuLaunchKernel's signature and CUPTI callback id), as
 * cuBLAS or Triton make them; f is a registered function. */
CUresult fake_cu_launch_kernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
			       unsigned int gridDimZ, unsigned int blockDimX,
			       unsigned int blockDimY, unsigned int blockDimZ,
			       unsigned int sharedMemBytes, CUstream hStream,
			       void **kernelParams, void **extra);

/* Defines the CUDA graph exec: launched (cudaGraphLaunch), it runs the n
 * registered functions' kernels in order on the launch's stream, as CUPTI
 * reports a graph launch (every kernel with the call's correlation id, the
 * graph's id and its node's id).  0, -EINVAL (n of 0 or above 512) or
 * -ENOSPC past 16 graphs.  Thread-safe. */
int fake_cuda_graph(cudaGraphExec_t exec, const void *const *funcs, unsigned n);

/* A driver-API graph launch (cuGraphLaunch's CUPTI callback), as JAX and
 * XLA make them; exec as for cudaGraphLaunch. */
CUresult fake_cu_graph_launch(CUgraphExec exec, CUstream hStream);

#endif
