/*
 * The body of wl_cuda_plain() / wl_cuda_ptsz() (see wl_cuda.h).  The includer
 * defines WL_CUDA_FN (the function's name) and WL_PTSZ (1 when the header
 * renames the per-thread-stream calls), then includes this file once.
 */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <unistd.h>

#include "wl_cuda.h"
#include "wlog.h"

/* nvcc 13's launch entry points; its headers declare them for C++ only. */
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
			       void **args, size_t sharedMem, cudaStream_t stream);
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
				    void **args, size_t sharedMem, cudaStream_t stream);

#define U(x) ((uint64_t)(uintptr_t)(x))

struct wl_call {
	const char *fn;
	int ret;
	uint64_t ptr, bytes, stream, kind, aux, aux2;
	unsigned grid[3], block[3];
	int ptsz;
	int peer_dst; /* >= 0: the recorded device (cudaMemcpyPeerAsync) */
};

static void log_call(const struct wl_call *c)
{
	int dev = -1;

	if (c->peer_dst >= 0)
		dev = c->peer_dst;
	else
		cudaGetDevice(&dev);
	wlog_line("sdusdduuuuuuuuuuuuu", "C", (int64_t)getpid(), (uint64_t)wlog_tid(), c->fn,
		  (int64_t)c->ret, (int64_t)dev, c->ptr, c->bytes, c->stream, c->kind, c->aux,
		  c->aux2, (uint64_t)c->grid[0], (uint64_t)c->grid[1], (uint64_t)c->grid[2],
		  (uint64_t)c->block[0], (uint64_t)c->block[1], (uint64_t)c->block[2],
		  (uint64_t)c->ptsz);
}

static void log_alloc(const char *fn, void *p, uint64_t size, const char *space)
{
	int dev = -1;

	cudaGetDevice(&dev);
	wlog_line("sdusuusds", "A", (int64_t)getpid(), (uint64_t)wlog_tid(), fn, U(p), size,
		  space, (int64_t)dev, "cuda");
}

static void log_free(const char *fn, void *p)
{
	wlog_line("sdusus", "F", (int64_t)getpid(), (uint64_t)wlog_tid(), fn, U(p), "cuda");
}

static void wl_kernel(void)
{
}

static dim3 d3(unsigned x, unsigned y, unsigned z)
{
	return (dim3){ x, y, z };
}

#define CALL(...) log_call(&(struct wl_call){ .peer_dst = -1, __VA_ARGS__ })

void WL_CUDA_FN(unsigned k)
{
	static char host_src[8192], host_dst[8192];
	cudaStream_t s = (cudaStream_t)(uintptr_t)(0x5000 + k);
	cudaEvent_t ev = (cudaEvent_t)(uintptr_t)(0xe000 + k);
	cudaGraphExec_t gx = (cudaGraphExec_t)(uintptr_t)(0x6000 + k);
	cudaMemPool_t pool = (cudaMemPool_t)(uintptr_t)(0x9000 + k);
	const void *fn = (const void *)(uintptr_t)wl_kernel;
	uint64_t base = 1048576 + 4096 * (uint64_t)k + 8 * WL_PTSZ;
	void *d = NULL, *h = NULL, *ha = NULL, *m = NULL, *pd = NULL, *as = NULL, *ap = NULL;
	size_t pitch = 0, n = 1000 + k;
	void *args[1] = { &n };
	int err;

	wlog_lock();
	err = cudaMalloc(&d, base + 1);
	CALL(.fn = "cudaMalloc", .ret = err, .ptr = U(d), .bytes = base + 1);
	log_alloc("cudaMalloc", d, base + 1, "device");
	err = cudaMallocHost(&h, base + 2);
	CALL(.fn = "cudaMallocHost", .ret = err, .ptr = U(h), .bytes = base + 2);
	log_alloc("cudaMallocHost", h, base + 2, "pinned");
	err = cudaHostAlloc(&ha, base + 3, cudaHostAllocPortable);
	CALL(.fn = "cudaHostAlloc", .ret = err, .ptr = U(ha), .bytes = base + 3,
	     .aux = cudaHostAllocPortable);
	log_alloc("cudaHostAlloc", ha, base + 3, "pinned");
	err = cudaMallocManaged(&m, base + 4, cudaMemAttachHost);
	CALL(.fn = "cudaMallocManaged", .ret = err, .ptr = U(m), .bytes = base + 4,
	     .aux = cudaMemAttachHost);
	log_alloc("cudaMallocManaged", m, base + 4, "managed");
	err = cudaMallocPitch(&pd, &pitch, 1000 + k, 7);
	CALL(.fn = "cudaMallocPitch", .ret = err, .ptr = U(pd), .bytes = pitch * 7, .aux = pitch,
	     .aux2 = 1000 + k);
	log_alloc("cudaMallocPitch", pd, pitch * 7, "device");
	err = cudaMallocAsync(&as, base + 5, s);
	CALL(.fn = "cudaMallocAsync", .ret = err, .ptr = U(as), .bytes = base + 5, .stream = U(s),
	     .ptsz = WL_PTSZ);
	log_alloc("cudaMallocAsync", as, base + 5, "device");
	err = cudaMallocFromPoolAsync(&ap, base + 6, pool, s);
	CALL(.fn = "cudaMallocFromPoolAsync", .ret = err, .ptr = U(ap), .bytes = base + 6,
	     .stream = U(s), .aux = U(pool), .ptsz = WL_PTSZ);
	log_alloc("cudaMallocFromPoolAsync", ap, base + 6, "device");
	wlog_unlock();

	err = cudaMemcpy(d, host_src, n, cudaMemcpyHostToDevice);
	CALL(.fn = "cudaMemcpy", .ret = err, .ptr = U(d), .aux = U(host_src), .bytes = n,
	     .kind = cudaMemcpyHostToDevice, .ptsz = WL_PTSZ);
	err = cudaMemcpyAsync(host_dst, d, n + 1, cudaMemcpyDeviceToHost, s);
	CALL(.fn = "cudaMemcpyAsync", .ret = err, .ptr = U(host_dst), .aux = U(d), .bytes = n + 1,
	     .kind = cudaMemcpyDeviceToHost, .stream = U(s), .ptsz = WL_PTSZ);
	err = cudaMemcpyPeerAsync(as, 1, d, 0, n + 2, s);
	log_call(&(struct wl_call){ .fn = "cudaMemcpyPeerAsync", .ret = err, .ptr = U(as),
				    .aux = U(d), .bytes = n + 2, .stream = U(s), .aux2 = 0,
				    .peer_dst = 1 });
	err = cudaMemset(d, 0x5a, n + 3);
	CALL(.fn = "cudaMemset", .ret = err, .ptr = U(d), .bytes = n + 3, .aux = 0x5a,
	     .ptsz = WL_PTSZ);
	err = cudaMemsetAsync(m, 7, n + 4, s);
	CALL(.fn = "cudaMemsetAsync", .ret = err, .ptr = U(m), .bytes = n + 4, .aux = 7,
	     .stream = U(s), .ptsz = WL_PTSZ);

	err = cudaLaunchKernel(fn, d3(2, 3, 1), d3(32, 4, 1), args, 128 + k, s);
	CALL(.fn = "cudaLaunchKernel", .ret = err, .aux = U(fn), .bytes = 128 + k, .stream = U(s),
	     .grid = { 2, 3, 1 }, .block = { 32, 4, 1 }, .ptsz = WL_PTSZ);
#if WL_PTSZ
	err = __cudaLaunchKernel_ptsz((cudaKernel_t)fn, d3(3, 2, 1), d3(16, 8, 1), args, 64 + k, s);
#else
	err = __cudaLaunchKernel((cudaKernel_t)fn, d3(3, 2, 1), d3(16, 8, 1), args, 64 + k, s);
#endif
	CALL(.fn = "__cudaLaunchKernel", .ret = err, .aux = U(fn), .bytes = 64 + k, .stream = U(s),
	     .grid = { 3, 2, 1 }, .block = { 16, 8, 1 }, .ptsz = WL_PTSZ);
	{
		cudaLaunchConfig_t cfg = { .gridDim = d3(4, 1, 2),
					   .blockDim = d3(64, 2, 1),
					   .dynamicSmemBytes = 256 + k, .stream = s };

		err = cudaLaunchKernelExC(&cfg, fn, args);
		CALL(.fn = "cudaLaunchKernelExC", .ret = err, .aux = U(fn), .bytes = 256 + k,
		     .stream = U(s), .grid = { 4, 1, 2 }, .block = { 64, 2, 1 }, .ptsz = WL_PTSZ);
	}
	err = cudaLaunchCooperativeKernel(fn, d3(5, 1, 1), d3(128, 1, 1), args, 0, s);
	CALL(.fn = "cudaLaunchCooperativeKernel", .ret = err, .aux = U(fn), .stream = U(s),
	     .grid = { 5, 1, 1 }, .block = { 128, 1, 1 }, .ptsz = WL_PTSZ);
	err = cudaGraphLaunch(gx, s);
	CALL(.fn = "cudaGraphLaunch", .ret = err, .aux = U(gx), .stream = U(s), .ptsz = WL_PTSZ);

	err = cudaStreamSynchronize(s);
	CALL(.fn = "cudaStreamSynchronize", .ret = err, .stream = U(s), .ptsz = WL_PTSZ);
	err = cudaDeviceSynchronize();
	CALL(.fn = "cudaDeviceSynchronize", .ret = err);
	err = cudaEventSynchronize(ev);
	CALL(.fn = "cudaEventSynchronize", .ret = err, .aux = U(ev));
	err = cudaStreamWaitEvent(s, ev, cudaEventWaitExternal);
	CALL(.fn = "cudaStreamWaitEvent", .ret = err, .stream = U(s), .aux = U(ev),
	     .kind = cudaEventWaitExternal, .ptsz = WL_PTSZ);

	wlog_lock();
	log_free("cudaFreeAsync", ap);
	err = cudaFreeAsync(ap, s);
	CALL(.fn = "cudaFreeAsync", .ret = err, .ptr = U(ap), .stream = U(s), .ptsz = WL_PTSZ);
	log_free("cudaFreeAsync", as);
	err = cudaFreeAsync(as, s);
	CALL(.fn = "cudaFreeAsync", .ret = err, .ptr = U(as), .stream = U(s), .ptsz = WL_PTSZ);
	log_free("cudaFree", pd);
	err = cudaFree(pd);
	CALL(.fn = "cudaFree", .ret = err, .ptr = U(pd));
	log_free("cudaFree", m);
	err = cudaFree(m);
	CALL(.fn = "cudaFree", .ret = err, .ptr = U(m));
	log_free("cudaFreeHost", ha);
	err = cudaFreeHost(ha);
	CALL(.fn = "cudaFreeHost", .ret = err, .ptr = U(ha));
	log_free("cudaFreeHost", h);
	err = cudaFreeHost(h);
	CALL(.fn = "cudaFreeHost", .ret = err, .ptr = U(h));
	log_free("cudaFree", d);
	err = cudaFree(d);
	CALL(.fn = "cudaFree", .ret = err, .ptr = U(d));
	wlog_unlock();
}
