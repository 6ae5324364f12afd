/*
 * A stand-in for the CUDA driver (libcuda.so.1) with only its launch entry
 * points, for the attach tests: shimmer attach probes the driver's
 * launches (cuBLAS, cuDNN and Triton launch through them) in a library
 * named libcuda.so.*, and a machine without a GPU has none.  Each call
 * checks its function argument and returns CUDA_SUCCESS, as a launch that
 * was queued does; nothing runs.  Thread-safe (no state).
 */
#include <cuda.h>
#include <stddef.h>

#define API __attribute__((visibility("default")))

API CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
			    unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
			    unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
			    void **kernelParams, void **extra)
{
	(void)gridDimX, (void)gridDimY, (void)gridDimZ, (void)blockDimX, (void)blockDimY;
	(void)blockDimZ, (void)sharedMemBytes, (void)hStream, (void)kernelParams, (void)extra;
	return f ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

API CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
	(void)hStream;
	return hGraphExec ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
