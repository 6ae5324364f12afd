/*
 * Fake-only extras of the fake CUDA runtime for workloads (exported by
 * build/test/fake_cudart/libcudart.so.13, absent from the real library).
 */
#ifndef FAKE_GPU_H
#define FAKE_GPU_H

#include <stdint.h>

#include <cuda.h>

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

#endif
