/*
 * A stand-in for libcudart.so.13, built from test sources, so the shim's
 * CUDA interposition can be tested on machines without a GPU.
 *
 * It exports the real names with the real signatures: this file defines
 * the plain names, fake_ptsz.c the _ptsz/_ptds variants; each includes the
 * CUDA header in the mode that declares its names, so the compiler checks
 * every definition against the header.
 *
 * Behaviour, kept close to the real runtime where tests can observe it:
 *  - "device" memory of every kind is anonymous mmap, never malloc, so the
 *    runtime's own memory never shows up as heap calls in a trace;
 *  - memcpy and memset really copy and set bytes;
 *  - the current device is per thread (FAKE_CUDA_DEVICES devices, default 4);
 *  - an allocation larger than the fake device (64 GiB) fails with
 *    cudaErrorMemoryAllocation and sets the result to NULL;
 *  - launches only validate their arguments;
 *  - FAKE_CUDA_DELAY_NS=N makes every call take at least N nanoseconds, so a
 *    test can check that recorded durations are at least N.
 *
 * Exported functions never call each other (each one would be seen by the
 * shim as an extra call); they share static helpers instead.  Thread-safe.
 */
#include "fake_cudart.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define TLS __thread __attribute__((tls_model("initial-exec")))

#define FAKE_DEVICE_BYTES ((size_t)64 << 30)
#define FAKE_PITCH_ALIGN 512u
#define FAKE_TABLE_SIZE 65536u /* live allocations, open addressing */

static long delay_ns;
static int ndevices = 4;
static TLS int cur_device;
static TLS cudaError_t last_error;

/* Live blocks: pointer -> mapped length, so frees can be validated. */
static struct {
	uintptr_t ptr; /* 0 = empty, 1 = deleted */
	size_t len;
} table[FAKE_TABLE_SIZE];
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

__attribute__((constructor)) static void fake_init(void)
{
	const char *s = getenv("FAKE_CUDA_DELAY_NS");

	if (s)
		delay_ns = strtol(s, NULL, 10);
	s = getenv("FAKE_CUDA_DEVICES");
	if (s && atoi(s) > 0)
		ndevices = atoi(s);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Every entry point starts with BEGIN and returns through done(). */
#define BEGIN uint64_t t0_ = delay_ns > 0 ? now_ns() : 0
#define DONE(err) done(t0_, (err))

static cudaError_t done(uint64_t t0, cudaError_t err)
{
	if (delay_ns > 0) {
		uint64_t until = t0 + (uint64_t)delay_ns;
		uint64_t t;

		while ((t = now_ns()) < until) {
			struct timespec ts = { 0, (long)(until - t) };

			nanosleep(&ts, NULL);
		}
	}
	if (err != cudaSuccess)
		last_error = err;
	return err;
}

static size_t slot_of(uintptr_t p)
{
	return (size_t)((p >> 12) * 0x9e3779b97f4a7c15ull) & (FAKE_TABLE_SIZE - 1);
}

static int table_put(uintptr_t p, size_t len)
{
	size_t i = slot_of(p);

	pthread_mutex_lock(&table_lock);
	for (size_t n = 0; n < FAKE_TABLE_SIZE; n++, i = (i + 1) & (FAKE_TABLE_SIZE - 1)) {
		if (table[i].ptr <= 1) {
			table[i].ptr = p;
			table[i].len = len;
			pthread_mutex_unlock(&table_lock);
			return 0;
		}
	}
	pthread_mutex_unlock(&table_lock);
	return -ENOMEM;
}

/* Removes p; returns its length, 0 when p is not a live block. */
static size_t table_take(uintptr_t p)
{
	size_t i = slot_of(p), len = 0;

	pthread_mutex_lock(&table_lock);
	for (size_t n = 0; n < FAKE_TABLE_SIZE && table[i].ptr != 0;
	     n++, i = (i + 1) & (FAKE_TABLE_SIZE - 1)) {
		if (table[i].ptr == p) {
			len = table[i].len;
			table[i].ptr = 1;
			break;
		}
	}
	pthread_mutex_unlock(&table_lock);
	return len;
}

static cudaError_t fake_alloc(void **out, size_t size)
{
	void *p;

	if (!out)
		return cudaErrorInvalidValue;
	*out = NULL;
	if (size == 0)
		return cudaSuccess;
	if (size > FAKE_DEVICE_BYTES)
		return cudaErrorMemoryAllocation;
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return cudaErrorMemoryAllocation;
	if (table_put((uintptr_t)p, size) < 0) {
		munmap(p, size);
		return cudaErrorMemoryAllocation;
	}
	*out = p;
	return cudaSuccess;
}

static cudaError_t fake_free(void *p, cudaError_t invalid)
{
	size_t len;

	if (!p)
		return cudaSuccess;
	len = table_take((uintptr_t)p);
	if (!len)
		return invalid;
	munmap(p, len);
	return cudaSuccess;
}

static cudaError_t fake_copy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	if ((unsigned)kind > cudaMemcpyDefault)
		return cudaErrorInvalidMemcpyDirection;
	if (count && (!dst || !src))
		return cudaErrorInvalidValue;
	if (count)
		memmove(dst, src, count);
	return cudaSuccess;
}

static cudaError_t fake_set(void *p, int value, size_t count)
{
	if (count && !p)
		return cudaErrorInvalidValue;
	if (count)
		memset(p, value, count);
	return cudaSuccess;
}

static cudaError_t check_launch(const void *func, dim3 grid, dim3 block)
{
	if (!func)
		return cudaErrorInvalidDeviceFunction;
	if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z ||
	    (uint64_t)block.x * block.y * block.z > 1024 || block.z > 64)
		return cudaErrorInvalidConfiguration;
	return cudaSuccess;
}

static cudaError_t check_config(const cudaLaunchConfig_t *config, const void *func)
{
	if (!config)
		return cudaErrorInvalidValue;
	return check_launch(func, config->gridDim, config->blockDim);
}

/* ---- memory ---------------------------------------------------------- */

API cudaError_t cudaMalloc(void **devPtr, size_t size)
{
	BEGIN;
	return DONE(fake_alloc(devPtr, size));
}

API cudaError_t cudaFree(void *devPtr)
{
	BEGIN;
	return DONE(fake_free(devPtr, cudaErrorInvalidDevicePointer));
}

API cudaError_t cudaMallocHost(void **ptr, size_t size)
{
	BEGIN;
	return DONE(fake_alloc(ptr, size));
}

API cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
	BEGIN;
	if (flags & ~0xfu)
		return DONE(cudaErrorInvalidValue);
	return DONE(fake_alloc(pHost, size));
}

API cudaError_t cudaFreeHost(void *ptr)
{
	BEGIN;
	return DONE(fake_free(ptr, cudaErrorInvalidValue));
}

API cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
	BEGIN;
	if (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost)
		return DONE(cudaErrorInvalidValue);
	return DONE(fake_alloc(devPtr, size));
}

API cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
	size_t p;
	cudaError_t err;

	BEGIN;
	if (!pitch)
		return DONE(cudaErrorInvalidValue);
	p = (width + FAKE_PITCH_ALIGN - 1) / FAKE_PITCH_ALIGN * FAKE_PITCH_ALIGN;
	if (height && p > FAKE_DEVICE_BYTES / height)
		err = fake_alloc(devPtr, FAKE_DEVICE_BYTES + 1);
	else
		err = fake_alloc(devPtr, p * height);
	*pitch = err == cudaSuccess ? p : 0;
	return DONE(err);
}

cudaError_t fake_malloc_async(void **devPtr, size_t size)
{
	BEGIN;
	return DONE(fake_alloc(devPtr, size));
}

cudaError_t fake_free_async(void *devPtr)
{
	BEGIN;
	return DONE(fake_free(devPtr, cudaErrorInvalidValue));
}

cudaError_t fake_malloc_from_pool(void **ptr, size_t size, cudaMemPool_t pool)
{
	BEGIN;
	if (!pool)
		return DONE(cudaErrorInvalidValue);
	return DONE(fake_alloc(ptr, size));
}

API cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t s)
{
	(void)s;
	return fake_malloc_async(devPtr, size);
}


API cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t s)
{
	(void)s;
	return fake_free_async(devPtr);
}


API cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t pool, cudaStream_t s)
{
	(void)s;
	return fake_malloc_from_pool(ptr, size, pool);
}


/* ---- copies and sets ------------------------------------------------- */

cudaError_t fake_memcpy_any(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	BEGIN;
	return DONE(fake_copy(dst, src, count, kind));
}

API cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	return fake_memcpy_any(dst, src, count, kind);
}


API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
				cudaStream_t s)
{
	(void)s;
	return fake_memcpy_any(dst, src, count, kind);
}


API cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice,
				    size_t count, cudaStream_t s)
{
	BEGIN;
	(void)s;
	if (dstDevice < 0 || dstDevice >= ndevices || srcDevice < 0 || srcDevice >= ndevices)
		return DONE(cudaErrorInvalidDevice);
	return DONE(fake_copy(dst, src, count, cudaMemcpyDeviceToDevice));
}

cudaError_t fake_memset_any(void *p, int value, size_t count)
{
	BEGIN;
	return DONE(fake_set(p, value, count));
}

API cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
	return fake_memset_any(devPtr, value, count);
}


API cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t s)
{
	(void)s;
	return fake_memset_any(devPtr, value, count);
}


/* ---- launches -------------------------------------------------------- */

cudaError_t fake_launch_any(const void *func, dim3 grid, dim3 block)
{
	BEGIN;
	return DONE(check_launch(func, grid, block));
}

cudaError_t fake_launch_config(const cudaLaunchConfig_t *config, const void *func)
{
	BEGIN;
	return DONE(check_config(config, func));
}

cudaError_t fake_graph_launch(cudaGraphExec_t exec)
{
	BEGIN;
	return DONE(exec ? cudaSuccess : cudaErrorInvalidValue);
}

API cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
				 size_t sharedMem, cudaStream_t s)
{
	(void)args, (void)sharedMem, (void)s;
	return fake_launch_any(func, gridDim, blockDim);
}


API cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
				   void **args, size_t sharedMem, cudaStream_t s)
{
	(void)args, (void)sharedMem, (void)s;
	return fake_launch_any(kernel, gridDim, blockDim);
}

API cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
					void **args, size_t sharedMem, cudaStream_t s)
{
	(void)args, (void)sharedMem, (void)s;
	return fake_launch_any(kernel, gridDim, blockDim);
}

API cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args)
{
	(void)args;
	return fake_launch_config(config, func);
}


API cudaError_t cudaLaunchCooperativeKernel(const void *func, dim3 gridDim, dim3 blockDim,
					    void **args, size_t sharedMem, cudaStream_t s)
{
	(void)args, (void)sharedMem, (void)s;
	return fake_launch_any(func, gridDim, blockDim);
}


API cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t s)
{
	(void)s;
	return fake_graph_launch(graphExec);
}


/* ---- synchronization ------------------------------------------------- */

cudaError_t fake_sync_any(void)
{
	BEGIN;
	return DONE(cudaSuccess);
}

cudaError_t fake_wait_event(cudaEvent_t event, unsigned int flags)
{
	BEGIN;
	return DONE(!event || (flags & ~0x1u) ? cudaErrorInvalidResourceHandle : cudaSuccess);
}

API cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	(void)s;
	return fake_sync_any();
}


API cudaError_t cudaDeviceSynchronize(void)
{
	return fake_sync_any();
}

API cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
	BEGIN;
	return DONE(event ? cudaSuccess : cudaErrorInvalidResourceHandle);
}

API cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t event, unsigned int flags)
{
	(void)s;
	return fake_wait_event(event, flags);
}


/* ---- device and errors ----------------------------------------------- */

API cudaError_t cudaGetDevice(int *device)
{
	BEGIN;
	if (!device)
		return DONE(cudaErrorInvalidValue);
	*device = cur_device;
	return DONE(cudaSuccess);
}

API cudaError_t cudaSetDevice(int device)
{
	BEGIN;
	if (device < 0 || device >= ndevices)
		return DONE(cudaErrorInvalidDevice);
	cur_device = device;
	return DONE(cudaSuccess);
}

API cudaError_t cudaGetLastError(void)
{
	cudaError_t err = last_error;

	last_error = cudaSuccess;
	return err;
}

API const char *cudaGetErrorString(cudaError_t error)
{
	switch (error) {
	case cudaSuccess: return "no error";
	case cudaErrorInvalidValue: return "invalid argument";
	case cudaErrorMemoryAllocation: return "out of memory";
	case cudaErrorInvalidConfiguration: return "invalid configuration argument";
	case cudaErrorInvalidDevicePointer: return "invalid device pointer";
	case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
	case cudaErrorInvalidDeviceFunction: return "invalid device function";
	case cudaErrorInvalidDevice: return "invalid device ordinal";
	case cudaErrorInvalidResourceHandle: return "invalid resource handle";
	default: return "unrecognized error code";
	}
}
