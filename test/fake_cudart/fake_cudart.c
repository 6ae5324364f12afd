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
 *    test can check that recorded durations are at least N;
 *  - like the driver at cuInit, the first call loads the library named by
 *    CUDA_INJECTION64_PATH and calls its InitializeInjection();
 *  - when the fake CUPTI (test/fake_cupti) is loaded, every call reaches it
 *    as CUPTI callbacks of the entry point's real callback id, and launches,
 *    copies, memsets and synchronizations as activity records spanning the
 *    call's delay (the "GPU" runs the work synchronously).  Kernel names
 *    come from fake_cuda_register_kernel(); fake_cu_launch_kernel() is a
 *    driver-API launch (fake_gpu.h).
 *
 * Exported functions never call each other (each one would be seen by the
 * shim as an extra call); they share static helpers instead.  Thread-safe.
 */
#include "fake_cudart.h"
#include "fake_gpu.h"

#include <cupti_activity.h>
#include <generated_cuda_runtime_api_meta.h>

#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "clock_ns.h"

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

/*
 * Every entry point runs between call_begin() and call_end(): the first
 * call of the process loads the profiler named by CUDA_INJECTION64_PATH
 * (as the driver does at cuInit), then the fake CUPTI, when one attached
 * itself, sees the call's API_ENTER and API_EXIT callbacks and, for work
 * the GPU would do (op), an activity record that spans the call's delay.
 */
struct call {
	uint64_t t0;
	const struct fake_cupti_ops *cupti;
	struct fake_cupti_call api;
};

static const struct fake_cupti_ops *cupti_ops;
static int inject_state; /* 0 not yet, 1 running, 2 done */
static TLS int injecting;

API void fake_cudart_attach_cupti(const struct fake_cupti_ops *ops)
{
	__atomic_store_n(&cupti_ops, ops, __ATOMIC_RELEASE);
}

static void inject(void)
{
	int expect = 0;
	const char *path;

	if (__atomic_load_n(&inject_state, __ATOMIC_ACQUIRE) == 2 || injecting)
		return;
	if (!__atomic_compare_exchange_n(&inject_state, &expect, 1, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		while (__atomic_load_n(&inject_state, __ATOMIC_ACQUIRE) != 2)
			sched_yield();
		return;
	}
	path = getenv("CUDA_INJECTION64_PATH");
	if (path && *path) {
		void *h = dlopen(path, RTLD_NOW);
		int (*init)(void) = h ? (int (*)(void))dlsym(h, "InitializeInjection") : NULL;

		if (init) {
			injecting = 1;
			init();
			injecting = 0;
		}
	}
	__atomic_store_n(&inject_state, 2, __ATOMIC_RELEASE);
}

static void call_begin(struct call *c, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
		       const char *symbol, const void *params)
{
	inject();
	c->t0 = delay_ns > 0 ? clock_ns(CLOCK_MONOTONIC) : 0;
	c->cupti = __atomic_load_n(&cupti_ops, __ATOMIC_ACQUIRE);
	c->api = (struct fake_cupti_call){ .domain = domain, .cbid = cbid, .symbol = symbol,
					   .params = params };
	if (c->cupti)
		c->cupti->api_enter(&c->api);
}

/* Ends the call: waits out the delay (the GPU work, when op is given, runs
 * during it), records op if the call succeeded, returns err. */
static int call_end(struct call *c, int err, struct fake_gpu_op *op)
{
	uint64_t start = op && c->cupti ? c->cupti->timestamp() : 0;

	if (op && c->cupti)
		c->cupti->work_begins(op);

	if (delay_ns > 0) {
		/* GPU work lasts the whole delay, however long the callbacks took. */
		uint64_t until = (op ? clock_ns(CLOCK_MONOTONIC) : c->t0) + (uint64_t)delay_ns;
		uint64_t t;

		while ((t = clock_ns(CLOCK_MONOTONIC)) < until) {
			struct timespec ts = { 0, (long)(until - t) };

			nanosleep(&ts, NULL);
		}
	}
	if (op && c->cupti && err == 0) {
		op->start = start;
		op->end = c->cupti->timestamp();
		op->correlation = c->api.correlation;
		op->device = (uint32_t)cur_device;
		op->context = (uint32_t)cur_device + 1;
		c->cupti->record(op);
	}
	if (c->cupti) {
		c->api.ret = err;
		c->cupti->api_exit(&c->api);
	}
	if (err != 0)
		last_error = (cudaError_t)err;
	return err;
}

#define BEGIN(cbid) struct call c_; call_begin(&c_, CUPTI_CB_DOMAIN_RUNTIME_API, (cbid), NULL, NULL)
#define DONE(err) ((cudaError_t)call_end(&c_, (err), NULL))
#define DONE_OP(err, op) ((cudaError_t)call_end(&c_, (err), (op)))

/* CUPTI's stream id for a stream: the fake's handles are small integers;
 * the default stream is 7, as on a real device. */
static uint32_t stream_id(cudaStream_t s)
{
	return s ? (uint32_t)(uintptr_t)s : 7;
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
	BEGIN(RT(cudaMalloc_v3020));
	return DONE(fake_alloc(devPtr, size));
}

API cudaError_t cudaFree(void *devPtr)
{
	BEGIN(RT(cudaFree_v3020));
	return DONE(fake_free(devPtr, cudaErrorInvalidDevicePointer));
}

API cudaError_t cudaMallocHost(void **ptr, size_t size)
{
	BEGIN(RT(cudaMallocHost_v3020));
	return DONE(fake_alloc(ptr, size));
}

API cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
	BEGIN(RT(cudaHostAlloc_v3020));
	if (flags & ~0xfu)
		return DONE(cudaErrorInvalidValue);
	return DONE(fake_alloc(pHost, size));
}

API cudaError_t cudaFreeHost(void *ptr)
{
	BEGIN(RT(cudaFreeHost_v3020));
	return DONE(fake_free(ptr, cudaErrorInvalidValue));
}

API cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
	BEGIN(RT(cudaMallocManaged_v6000));
	if (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost)
		return DONE(cudaErrorInvalidValue);
	return DONE(fake_alloc(devPtr, size));
}

API cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
	size_t p;
	cudaError_t err;

	BEGIN(RT(cudaMallocPitch_v3020));
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

cudaError_t fake_malloc_async(CUpti_CallbackId cbid, void **devPtr, size_t size)
{
	BEGIN(cbid);
	return DONE(fake_alloc(devPtr, size));
}

cudaError_t fake_free_async(CUpti_CallbackId cbid, void *devPtr)
{
	BEGIN(cbid);
	return DONE(fake_free(devPtr, cudaErrorInvalidValue));
}

cudaError_t fake_malloc_from_pool(CUpti_CallbackId cbid, void **ptr, size_t size,
				  cudaMemPool_t pool)
{
	BEGIN(cbid);
	if (!pool)
		return DONE(cudaErrorInvalidValue);
	return DONE(fake_alloc(ptr, size));
}

API cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t s)
{
	(void)s;
	return fake_malloc_async(RT(cudaMallocAsync_v11020), devPtr, size);
}

API cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t s)
{
	(void)s;
	return fake_free_async(RT(cudaFreeAsync_v11020), devPtr);
}

API cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t pool, cudaStream_t s)
{
	(void)s;
	return fake_malloc_from_pool(RT(cudaMallocFromPoolAsync_v11020), ptr, size, pool);
}

/* ---- copies and sets ------------------------------------------------- */

/* The activity record of a copy: CUPTI's kind and memory kinds. */
static void copy_op(struct fake_gpu_op *op, enum cudaMemcpyKind kind, size_t count,
		    cudaStream_t s, int async)
{
	static const uint8_t ck[] = {
		[cudaMemcpyHostToHost] = CUPTI_ACTIVITY_MEMCPY_KIND_HTOH,
		[cudaMemcpyHostToDevice] = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD,
		[cudaMemcpyDeviceToHost] = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH,
		[cudaMemcpyDeviceToDevice] = CUPTI_ACTIVITY_MEMCPY_KIND_DTOD,
		[cudaMemcpyDefault] = CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN,
	};
	int src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
	int dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;

	*op = (struct fake_gpu_op){
		.kind = FAKE_OP_MEMCPY, .stream = stream_id(s), .bytes = count, .async = (uint8_t)async,
		.copy_kind = (unsigned)kind <= cudaMemcpyDefault ? ck[kind] : 0,
		.src_kind = src_dev ? CUPTI_ACTIVITY_MEMORY_KIND_DEVICE : CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
		.dst_kind = dst_dev ? CUPTI_ACTIVITY_MEMORY_KIND_DEVICE : CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
	};
}

cudaError_t fake_memcpy_any(CUpti_CallbackId cbid, void *dst, const void *src, size_t count,
			    enum cudaMemcpyKind kind, cudaStream_t s, int async)
{
	struct fake_gpu_op op;

	BEGIN(cbid);
	copy_op(&op, kind, count, s, async);
	return DONE_OP(fake_copy(dst, src, count, kind), &op);
}

API cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	return fake_memcpy_any(RT(cudaMemcpy_v3020), dst, src, count, kind, NULL, 0);
}

API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
				cudaStream_t s)
{
	return fake_memcpy_any(RT(cudaMemcpyAsync_v3020), dst, src, count, kind, s, 1);
}

API cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice,
				    size_t count, cudaStream_t s)
{
	struct fake_gpu_op op;

	BEGIN(RT(cudaMemcpyPeerAsync_v4000));
	copy_op(&op, cudaMemcpyDeviceToDevice, count, s, 1);
	op.copy_kind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
	if (dstDevice < 0 || dstDevice >= ndevices || srcDevice < 0 || srcDevice >= ndevices)
		return DONE(cudaErrorInvalidDevice);
	return DONE_OP(fake_copy(dst, src, count, cudaMemcpyDeviceToDevice), &op);
}

cudaError_t fake_memset_any(CUpti_CallbackId cbid, void *p, int value, size_t count,
			    cudaStream_t s, int async)
{
	struct fake_gpu_op op = {
		.kind = FAKE_OP_MEMSET, .stream = stream_id(s), .bytes = count,
		.value = (uint32_t)value, .mem_kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
		.async = (uint8_t)async,
	};

	BEGIN(cbid);
	return DONE_OP(fake_set(p, value, count), &op);
}

API cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
	return fake_memset_any(RT(cudaMemset_v3020), devPtr, value, count, NULL, 0);
}

API cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t s)
{
	return fake_memset_any(RT(cudaMemsetAsync_v3020), devPtr, value, count, s, 1);
}

/* ---- launches -------------------------------------------------------- */

/* Kernel names the workload registered for its fake kernel functions. */
#define MAX_KERNELS 64
static struct {
	const void *func;
	const char *name;
} kernels[MAX_KERNELS];
static unsigned nkernels;
static pthread_mutex_t kernels_lock = PTHREAD_MUTEX_INITIALIZER;

API int fake_cuda_register_kernel(const void *func, const char *name)
{
	int err = 0;

	pthread_mutex_lock(&kernels_lock);
	if (nkernels == MAX_KERNELS) {
		err = -ENOSPC;
	} else {
		kernels[nkernels].func = func;
		kernels[nkernels].name = name;
		__atomic_store_n(&nkernels, nkernels + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&kernels_lock);
	return err;
}

static const char *kernel_name(const void *func)
{
	unsigned n = __atomic_load_n(&nkernels, __ATOMIC_ACQUIRE);

	for (unsigned i = n; i-- > 0;)
		if (kernels[i].func == func)
			return kernels[i].name;
	return "fake_kernel";
}

static void kernel_op(struct fake_gpu_op *op, const void *func, dim3 grid, dim3 block,
		      size_t smem, cudaStream_t s)
{
	*op = (struct fake_gpu_op){
		.kind = FAKE_OP_KERNEL, .stream = stream_id(s), .name = kernel_name(func),
		.grid = { (int32_t)grid.x, (int32_t)grid.y, (int32_t)grid.z },
		.block = { (int32_t)block.x, (int32_t)block.y, (int32_t)block.z },
		.dynamic_smem = (int32_t)smem, .registers = 32,
	};
}

cudaError_t fake_launch_any(CUpti_CallbackId cbid, const void *func, dim3 grid, dim3 block,
			    void **args, size_t smem, cudaStream_t s)
{
	/* The layout CUPTI passes for every <<<>>>-style launch. */
	cudaLaunchKernel_v7000_params params = { func, grid, block, args, smem, s };
	struct fake_gpu_op op;
	struct call c_;

	call_begin(&c_, CUPTI_CB_DOMAIN_RUNTIME_API, cbid, kernel_name(func), &params);
	kernel_op(&op, func, grid, block, smem, s);
	return DONE_OP(check_launch(func, grid, block), &op);
}

cudaError_t fake_launch_config(CUpti_CallbackId cbid, const cudaLaunchConfig_t *config,
			       const void *func, void **args)
{
	cudaLaunchKernelExC_v11060_params params = { config, func, args };
	struct fake_gpu_op op;
	struct call c_;

	call_begin(&c_, CUPTI_CB_DOMAIN_RUNTIME_API, cbid, kernel_name(func), &params);
	if (!config)
		return DONE(check_config(config, func));
	kernel_op(&op, func, config->gridDim, config->blockDim, config->dynamicSmemBytes,
		  config->stream);
	return DONE_OP(check_config(config, func), &op);
}

cudaError_t fake_graph_launch(CUpti_CallbackId cbid, cudaGraphExec_t exec)
{
	BEGIN(cbid);
	return DONE(exec ? cudaSuccess : cudaErrorInvalidValue);
}

API cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
				 size_t sharedMem, cudaStream_t s)
{
	return fake_launch_any(RT(cudaLaunchKernel_v7000), func, gridDim, blockDim, args,
			       sharedMem, s);
}

API cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
				   void **args, size_t sharedMem, cudaStream_t s)
{
	return fake_launch_any(RT(__cudaLaunchKernel_v13000), kernel, gridDim, blockDim, args,
			       sharedMem, s);
}

API cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
					void **args, size_t sharedMem, cudaStream_t s)
{
	return fake_launch_any(RT(__cudaLaunchKernel_ptsz_v13000), kernel, gridDim, blockDim,
			       args, sharedMem, s);
}

API cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args)
{
	return fake_launch_config(RT(cudaLaunchKernelExC_v11060), config, func, args);
}

API cudaError_t cudaLaunchCooperativeKernel(const void *func, dim3 gridDim, dim3 blockDim,
					    void **args, size_t sharedMem, cudaStream_t s)
{
	return fake_launch_any(RT(cudaLaunchCooperativeKernel_v9000), func, gridDim, blockDim,
			       args, sharedMem, s);
}

API cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t s)
{
	(void)s;
	return fake_graph_launch(RT(cudaGraphLaunch_v10000), graphExec);
}

/*
 * A launch through the driver API, as cuBLAS, cuDNN and Triton make them:
 * cuLaunchKernel's signature and CUPTI callback (driver domain), under a
 * fake-only name (the fake has no libcuda; the shim does not interpose
 * the driver).  f is a function registered with fake_cuda_register_kernel.
 */
API CUresult fake_cu_launch_kernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
				   unsigned int gridDimZ, unsigned int blockDimX,
				   unsigned int blockDimY, unsigned int blockDimZ,
				   unsigned int sharedMemBytes, CUstream hStream,
				   void **kernelParams, void **extra)
{
	/* cuLaunchKernel_params of generated_cuda_meta.h (which does not build
	 * outside NVIDIA's tree): the arguments in order. */
	struct {
		CUfunction f;
		unsigned int gx, gy, gz, bx, by, bz, smem;
		CUstream stream;
		void **params, **extra;
	} params = { f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
					 blockDimZ, sharedMemBytes, hStream, kernelParams, extra };
	dim3 grid = { gridDimX, gridDimY, gridDimZ }, block = { blockDimX, blockDimY, blockDimZ };
	struct fake_gpu_op op;
	struct call c;

	call_begin(&c, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
		   kernel_name(f), &params);
	kernel_op(&op, f, grid, block, sharedMemBytes, (cudaStream_t)hStream);
	return check_launch(f, grid, block) == cudaSuccess ?
		       (CUresult)call_end(&c, CUDA_SUCCESS, &op) :
		       (CUresult)call_end(&c, CUDA_ERROR_INVALID_VALUE, NULL);
}

/* ---- synchronization ------------------------------------------------- */

static struct fake_gpu_op sync_op(CUpti_ActivitySynchronizationType type, uint32_t stream,
				  uint32_t event)
{
	return (struct fake_gpu_op){ .kind = FAKE_OP_SYNC, .sync_type = type, .stream = stream,
				     .event = event };
}

cudaError_t fake_stream_sync(CUpti_CallbackId cbid, cudaStream_t s)
{
	struct fake_gpu_op op = sync_op(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE,
					stream_id(s), CUPTI_SYNCHRONIZATION_INVALID_VALUE);

	BEGIN(cbid);
	return DONE_OP(cudaSuccess, &op);
}

cudaError_t fake_wait_event(CUpti_CallbackId cbid, cudaStream_t s, cudaEvent_t event,
			    unsigned int flags)
{
	struct fake_gpu_op op = sync_op(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT,
					stream_id(s), (uint32_t)(uintptr_t)event);

	BEGIN(cbid);
	return DONE_OP(!event || (flags & ~0x1u) ? cudaErrorInvalidResourceHandle : cudaSuccess,
		       &op);
}

API cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	return fake_stream_sync(RT(cudaStreamSynchronize_v3020), s);
}

API cudaError_t cudaDeviceSynchronize(void)
{
	struct fake_gpu_op op = sync_op(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE,
					CUPTI_SYNCHRONIZATION_INVALID_VALUE,
					CUPTI_SYNCHRONIZATION_INVALID_VALUE);

	BEGIN(RT(cudaDeviceSynchronize_v3020));
	return DONE_OP(cudaSuccess, &op);
}

API cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
	struct fake_gpu_op op = sync_op(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE,
					CUPTI_SYNCHRONIZATION_INVALID_VALUE,
					(uint32_t)(uintptr_t)event);

	BEGIN(RT(cudaEventSynchronize_v3020));
	return DONE_OP(event ? cudaSuccess : cudaErrorInvalidResourceHandle, &op);
}

API cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t event, unsigned int flags)
{
	return fake_wait_event(RT(cudaStreamWaitEvent_v3020), s, event, flags);
}

/* ---- device and errors ----------------------------------------------- */

API cudaError_t cudaGetDevice(int *device)
{
	BEGIN(RT(cudaGetDevice_v3020));
	if (!device)
		return DONE(cudaErrorInvalidValue);
	*device = cur_device;
	return DONE(cudaSuccess);
}

API cudaError_t cudaSetDevice(int device)
{
	BEGIN(RT(cudaSetDevice_v3020));
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
