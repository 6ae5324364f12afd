/*
 * CUDA runtime hooks.  Every call is shipped, timed, with the arguments
 * wire.h lists for its function; `device` is the current device after the
 * call (cudaMemcpyPeerAsync: the destination device).  The _ptsz/_ptds
 * variants are recorded under their base function with SHM_F_PTSZ.
 *
 * We never link libcudart: each real function is looked up on first use
 * and cached.  After the real call, cupti_check() starts CUPTI if the
 * driver's injection hook has not (one predictable branch once started).
 * With no runtime loaded at all a hook returns
 * cudaErrorInitializationError, which is what the runtime itself reports
 * when it cannot start.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "api.h"
#include "clock.h"
#include "cupti.h"
#include "cupti_api.h"
#include "cupti_window.h"
#include "real.h"
#include "shim.h"
#include "stack.h"

#define NO_RUNTIME cudaErrorInitializationError
#define DEVICE_UNSET INT32_MIN

/* libcudart 13 exports these; its header declares them only for nvcc's
 * per-thread-default-stream mode. */
#define PT_DECL(base, variant) __typeof__(base) variant;
#define PT_LIST(X)                                                          \
	X(cudaMallocAsync, cudaMallocAsync_ptsz)                            \
	X(cudaFreeAsync, cudaFreeAsync_ptsz)                                \
	X(cudaMallocFromPoolAsync, cudaMallocFromPoolAsync_ptsz)            \
	X(cudaMemcpy, cudaMemcpy_ptds)                                      \
	X(cudaMemcpyAsync, cudaMemcpyAsync_ptsz)                            \
	X(cudaMemset, cudaMemset_ptds)                                      \
	X(cudaMemsetAsync, cudaMemsetAsync_ptsz)                            \
	X(cudaLaunchKernel, cudaLaunchKernel_ptsz)                          \
	X(cudaLaunchKernelExC, cudaLaunchKernelExC_ptsz)                    \
	X(cudaLaunchCooperativeKernel, cudaLaunchCooperativeKernel_ptsz)    \
	X(cudaGraphLaunch, cudaGraphLaunch_ptsz)                            \
	X(cudaStreamSynchronize, cudaStreamSynchronize_ptsz)                \
	X(cudaStreamWaitEvent, cudaStreamWaitEvent_ptsz)
PT_LIST(PT_DECL)

/* What nvcc 13's generated <<<...>>> launch code calls (crt/device_functions.h
 * declares them for C++ only). */
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
			       void **args, size_t sharedMem, cudaStream_t stream);
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
				    void **args, size_t sharedMem, cudaStream_t stream);

#define SYMS(X)                                                             \
	X(cudaMalloc) X(cudaFree) X(cudaMallocHost) X(cudaHostAlloc)        \
	X(cudaFreeHost) X(cudaMallocManaged) X(cudaMallocPitch)             \
	X(cudaMallocAsync) X(cudaFreeAsync) X(cudaMallocFromPoolAsync)      \
	X(cudaMemcpy) X(cudaMemcpyAsync) X(cudaMemcpyPeerAsync)             \
	X(cudaMemset) X(cudaMemsetAsync) X(cudaLaunchKernel)                \
	X(cudaLaunchKernelExC) X(cudaLaunchCooperativeKernel)               \
	X(cudaGraphLaunch) X(cudaStreamSynchronize)                         \
	X(cudaDeviceSynchronize) X(cudaEventSynchronize)                    \
	X(cudaStreamWaitEvent) X(cudaGetDevice)                             \
	X(cudaMallocAsync_ptsz) X(cudaFreeAsync_ptsz)                       \
	X(cudaMallocFromPoolAsync_ptsz) X(cudaMemcpy_ptds)                  \
	X(cudaMemcpyAsync_ptsz) X(cudaMemset_ptds) X(cudaMemsetAsync_ptsz)  \
	X(cudaLaunchKernel_ptsz) X(cudaLaunchKernelExC_ptsz)                \
	X(cudaLaunchCooperativeKernel_ptsz) X(cudaGraphLaunch_ptsz)         \
	X(cudaStreamSynchronize_ptsz) X(cudaStreamWaitEvent_ptsz)          \
	X(__cudaLaunchKernel) X(__cudaLaunchKernel_ptsz)

#define SYM_ENUM(s) S_##s,
#define SYM_NAME(s) #s,
enum sym { SYMS(SYM_ENUM) NSYMS };
static const char *const sym_name[NSYMS] = { SYMS(SYM_NAME) };
static void *sym_ptr[NSYMS];

static void *sym(enum sym s)
{
	void *p = __atomic_load_n(&sym_ptr[s], __ATOMIC_ACQUIRE);
	sigset_t mask;
	int saved;

	if (likely(p != 0))
		return p;
	/* Not cached: a runtime loaded later must still be found.  dlsym
	 * allocates (a failed one its error text): our own call. */
	saved = errno;
	shim_own_enter(&shim_tls, &mask);
	p = real_cuda(sym_name[s]);
	if (p)
		__atomic_store_n(&sym_ptr[s], p, __ATOMIC_RELEASE);
	shim_own_leave(&shim_tls, &mask);
	errno = saved;
	return p;
}

/* CLOCK_MONOTONIC at the start of a call that may block (the record clock
 * may be TSC ticks, whose rate the shim does not know). */
static __thread uint64_t block_t0;

static struct shim_thread *begin(struct shm_rec_cuda *r, unsigned int fn, uint16_t flags)
{
	struct shim_thread *t = shim_thread_traced();

	/* A malloc hook paused or resumed: CUPTI hears of it before any GPU
	 * work this call starts. */
	if (unlikely(__atomic_load_n(&api_cupti_behind, __ATOMIC_RELAXED)))
		api_cupti_catch_up();
	if (!t)
		return 0;
	memset(r, 0, sizeof(*r));
	r->hdr = (struct shm_rec_hdr){ .type = SHM_REC_CUDA, .size = sizeof(*r),
				       .fn = (uint16_t)fn, .flags = SHM_F_TIMED | flags };
	r->device = DEVICE_UNSET;
	if (SHM_FN_MAY_BLOCK(fn))
		block_t0 = clock_ns(CLOCK_MONOTONIC);
	r->t_begin = clock_now();
	return t;
}

/* The thread has asked the runtime for its device before (get_device()). */
static __thread int device_asked;

/*
 * The runtime's cudaGetDevice, our own call.  The runtime sets up a
 * thread's state on its first call there, which may allocate: that first
 * one is in_shim with the asynchronous signals blocked (shim_own_enter()).
 * Once set up it reads the thread's current device and allocates nothing,
 * so later calls, one for nearly every CUDA call, are only BUSY_SHIM: no
 * system call, and a signal handler's calls in it are counted.  (Were it
 * to allocate then after all, that call would be counted as a handler's,
 * its record dropped and counted: seen, not silent.)
 */
static int get_device(struct shim_thread *t, int *dev)
{
	cudaError_t (*fn)(int *) = (cudaError_t (*)(int *))sym(S_cudaGetDevice);
	sigset_t mask;
	int ok, b;

	if (!fn)
		return 0;
	if (unlikely(!device_asked)) {
		shim_own_enter(t, &mask);
		ok = fn(dev) == cudaSuccess;
		shim_own_leave(t, &mask);
		device_asked = 1;
		return ok;
	}
	b = shim_busy(t);
	ok = fn(dev) == cudaSuccess;
	shim_unbusy(t, b);
	return ok;
}

/*
 * The record of a call.  Only the runtime's cudaGetDevice may allocate, for
 * us (get_device()); the rest makes no traced call, so a signal handler's
 * calls in it are traced as any (the stack walks guard themselves,
 * thread_emit() its record).  A call of a handler that interrupted the
 * shim's own work (shim_reentered()) is counted and its record dropped.
 */
static void end(struct shim_thread *t, struct shm_rec_cuda *r)
{
	int saved = errno, dev;

	if (shim_reentered(t)) {
		thread_reentered(t, r->hdr.fn, r->bytes, 1);
		errno = saved;
		return;
	}
	if (r->device == DEVICE_UNSET)
		r->device = get_device(t, &dev) ? dev : -1;
	if (r->ret != cudaSuccess)
		r->hdr.flags |= SHM_F_FAILED;
	else if (((shm_fn_info[r->hdr.fn].flags & SHM_FNF_ALLOC) ||
		  (SHM_FN_MAY_BLOCK(r->hdr.fn) &&
		   clock_ns(CLOCK_MONOTONIC) - block_t0 >= SHM_BLOCKED_STACK_NS)) &&
		 t->ring.slot && !thread_would_drop(t, sizeof(*r))) {
		/* no stack unwound for a record the full ring drops; a call
		 * that waited on the GPU: where the CPU waited */
		r->stack_id = stack_native(t);
		r->pystack_id = stack_python(t);
	}
	thread_count(t, r->hdr.fn, r->bytes);
	thread_emit(t, r, sizeof(*r));
	errno = saved;
}

/* While CUPTI's callbacks are on (inside a sampling window, or always with
 * SHIMMER_GPU=all): the caller's stacks, for the API record the real call
 * makes (cupti_api.h).  Out of line, called by the hook (STACK_SKIP). */
static __attribute__((noinline)) void site_arm(struct shim_thread *t)
{
	/* a handler's call inside a capture must not walk (BUSY_STACK) */
	if (!t->ring.slot || shim_reentered(t) || thread_would_drop(t, sizeof(struct shm_rec_api)))
		return;
	cupti_site.stack_id = stack_native(t);
	cupti_site.pystack_id = stack_python(t);
	cupti_site.armed = 1;
}

static uint64_t out_ptr(cudaError_t ret, void **p)
{
	return ret == cudaSuccess && p ? (uintptr_t)*p : 0;
}

static void set_dims(struct shm_rec_cuda *r, dim3 grid, dim3 block)
{
	r->grid[0] = grid.x;
	r->grid[1] = grid.y;
	r->grid[2] = grid.z;
	r->block[0] = block.x;
	r->block[1] = block.y;
	r->block[2] = block.z;
}

/*
 * HOOK(name, fn id, record flags, (parameters), (arguments), fill...):
 * defines the exported wrapper; `fill` sets the record's argument fields
 * from the parameters, `ret` and `r` after the real call.
 */
#define HOOK(NAME, FN, FLAGS, PARAMS, ARGS, ...)                             \
	SHIM_EXPORT cudaError_t NAME PARAMS                                  \
	{                                                                    \
		__typeof__(&NAME) real_ = (__typeof__(&NAME))sym(S_##NAME);  \
		struct shm_rec_cuda r;                                       \
		struct shim_thread *t = begin(&r, SHM_FN_##FN, FLAGS);       \
		cudaError_t ret;                                             \
                                                                             \
		if (SHM_FN_STARTS_GPU_WORK(SHM_FN_##FN) && t && cupti_want_site()) \
			site_arm(t);                                         \
		if (SHM_FN_##FN == SHM_FN_CUDA_GRAPH_LAUNCH)                 \
			cupti_window_graph();                                \
		ret = real_ ? real_ ARGS : NO_RUNTIME;                       \
		if (SHM_FN_STARTS_GPU_WORK(SHM_FN_##FN))                     \
			cupti_site.armed = 0;                                \
		cupti_check();                                               \
		if (t) {                                                     \
			r.t_end = clock_now();                               \
			r.ret = ret;                                         \
			__VA_ARGS__;                                         \
			end(t, &r);                                          \
		}                                                            \
		return ret;                                                  \
	}

/* A function and its per-thread-stream variant NAME##SUFFIX. */
#define HOOK_PT(NAME, SUFFIX, FN, PARAMS, ARGS, ...)                         \
	HOOK(NAME, FN, 0, PARAMS, ARGS, __VA_ARGS__)                         \
	HOOK(NAME##SUFFIX, FN, SHM_F_PTSZ, PARAMS, ARGS, __VA_ARGS__)

/* ---- allocations and frees ---- */

HOOK(cudaMalloc, CUDA_MALLOC, 0, (void **devPtr, size_t size), (devPtr, size),
     r.ptr = out_ptr(ret, devPtr); r.bytes = size)

HOOK(cudaFree, CUDA_FREE, 0, (void *devPtr), (devPtr), r.ptr = (uintptr_t)devPtr)

HOOK(cudaMallocHost, CUDA_MALLOC_HOST, 0, (void **ptr, size_t size), (ptr, size),
     r.ptr = out_ptr(ret, ptr); r.bytes = size)

HOOK(cudaHostAlloc, CUDA_HOST_ALLOC, 0, (void **pHost, size_t size, unsigned int flags),
     (pHost, size, flags), r.ptr = out_ptr(ret, pHost); r.bytes = size; r.aux = flags)

HOOK(cudaFreeHost, CUDA_FREE_HOST, 0, (void *ptr), (ptr), r.ptr = (uintptr_t)ptr)

HOOK(cudaMallocManaged, CUDA_MALLOC_MANAGED, 0,
     (void **devPtr, size_t size, unsigned int flags), (devPtr, size, flags),
     r.ptr = out_ptr(ret, devPtr); r.bytes = size; r.aux = flags)

HOOK(cudaMallocPitch, CUDA_MALLOC_PITCH, 0,
     (void **devPtr, size_t *pitch, size_t width, size_t height),
     (devPtr, pitch, width, height),
     r.ptr = out_ptr(ret, devPtr);
     r.aux = ret == cudaSuccess && pitch ? *pitch : 0;
     r.bytes = r.aux * height; r.aux2 = width)

HOOK_PT(cudaMallocAsync, _ptsz, CUDA_MALLOC_ASYNC,
	(void **devPtr, size_t size, cudaStream_t hStream), (devPtr, size, hStream),
	r.ptr = out_ptr(ret, devPtr); r.bytes = size; r.stream = (uintptr_t)hStream)

HOOK_PT(cudaFreeAsync, _ptsz, CUDA_FREE_ASYNC, (void *devPtr, cudaStream_t hStream),
	(devPtr, hStream), r.ptr = (uintptr_t)devPtr; r.stream = (uintptr_t)hStream)

HOOK_PT(cudaMallocFromPoolAsync, _ptsz, CUDA_MALLOC_FROM_POOL_ASYNC,
	(void **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream),
	(ptr, size, memPool, stream),
	r.ptr = out_ptr(ret, ptr); r.bytes = size; r.aux = (uintptr_t)memPool;
	r.stream = (uintptr_t)stream)

/* ---- copies and memsets ---- */

HOOK_PT(cudaMemcpy, _ptds, CUDA_MEMCPY,
	(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind),
	(dst, src, count, kind),
	r.ptr = (uintptr_t)dst; r.aux = (uintptr_t)src; r.bytes = count; r.kind = kind)

HOOK_PT(cudaMemcpyAsync, _ptsz, CUDA_MEMCPY_ASYNC,
	(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
	 cudaStream_t stream),
	(dst, src, count, kind, stream),
	r.ptr = (uintptr_t)dst; r.aux = (uintptr_t)src; r.bytes = count; r.kind = kind;
	r.stream = (uintptr_t)stream)

HOOK(cudaMemcpyPeerAsync, CUDA_MEMCPY_PEER_ASYNC, 0,
     (void *dst, int dstDevice, const void *src, int srcDevice, size_t count,
      cudaStream_t stream),
     (dst, dstDevice, src, srcDevice, count, stream),
     r.ptr = (uintptr_t)dst; r.aux = (uintptr_t)src; r.bytes = count;
     r.device = dstDevice; r.aux2 = (uint64_t)(int64_t)srcDevice;
     r.stream = (uintptr_t)stream)

HOOK_PT(cudaMemset, _ptds, CUDA_MEMSET, (void *devPtr, int value, size_t count),
	(devPtr, value, count),
	r.ptr = (uintptr_t)devPtr; r.bytes = count; r.aux = (uint64_t)(int64_t)value)

HOOK_PT(cudaMemsetAsync, _ptsz, CUDA_MEMSET_ASYNC,
	(void *devPtr, int value, size_t count, cudaStream_t stream),
	(devPtr, value, count, stream),
	r.ptr = (uintptr_t)devPtr; r.bytes = count; r.aux = (uint64_t)(int64_t)value;
	r.stream = (uintptr_t)stream)

/* ---- launches ---- */

/* cudaLaunchKernel and cudaLaunchCooperativeKernel share their shape;
 * __cudaLaunchKernel takes a cudaKernel_t where they take a function. */
#define LAUNCH_PARAMS_OF(func_type)                                          \
	(func_type func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem, \
	 cudaStream_t stream)
#define LAUNCH_PARAMS LAUNCH_PARAMS_OF(const void *)
#define LAUNCH_ARGS (func, gridDim, blockDim, args, sharedMem, stream)
#define LAUNCH_FILL                                                          \
	r.aux = (uintptr_t)func;                                             \
	r.bytes = sharedMem;                                                 \
	r.stream = (uintptr_t)stream;                                        \
	set_dims(&r, gridDim, blockDim)

HOOK_PT(cudaLaunchKernel, _ptsz, CUDA_LAUNCH_KERNEL, LAUNCH_PARAMS, LAUNCH_ARGS, LAUNCH_FILL)

HOOK_PT(__cudaLaunchKernel, _ptsz, CUDA_LAUNCH_KERNEL_STUB, LAUNCH_PARAMS_OF(cudaKernel_t),
	LAUNCH_ARGS, LAUNCH_FILL)

HOOK_PT(cudaLaunchKernelExC, _ptsz, CUDA_LAUNCH_KERNEL_EXC,
	(const cudaLaunchConfig_t *config, const void *func, void **args),
	(config, func, args),
	r.aux = (uintptr_t)func;
	if (config) {
		r.bytes = config->dynamicSmemBytes;
		r.stream = (uintptr_t)config->stream;
		set_dims(&r, config->gridDim, config->blockDim);
	})

HOOK_PT(cudaLaunchCooperativeKernel, _ptsz, CUDA_LAUNCH_COOPERATIVE_KERNEL, LAUNCH_PARAMS,
	LAUNCH_ARGS, LAUNCH_FILL)

HOOK_PT(cudaGraphLaunch, _ptsz, CUDA_GRAPH_LAUNCH,
	(cudaGraphExec_t graphExec, cudaStream_t stream), (graphExec, stream),
	r.aux = (uintptr_t)graphExec; r.stream = (uintptr_t)stream)

/* ---- synchronisation ---- */

HOOK_PT(cudaStreamSynchronize, _ptsz, CUDA_STREAM_SYNCHRONIZE, (cudaStream_t stream),
	(stream), r.stream = (uintptr_t)stream)

HOOK(cudaDeviceSynchronize, CUDA_DEVICE_SYNCHRONIZE, 0, (void), (), (void)0)

HOOK(cudaEventSynchronize, CUDA_EVENT_SYNCHRONIZE, 0, (cudaEvent_t event), (event),
     r.aux = (uintptr_t)event)

HOOK_PT(cudaStreamWaitEvent, _ptsz, CUDA_STREAM_WAIT_EVENT,
	(cudaStream_t stream, cudaEvent_t event, unsigned int flags), (stream, event, flags),
	r.stream = (uintptr_t)stream; r.aux = (uintptr_t)event; r.kind = flags)
