/*
 * wl_gpu: the GPU-side end-to-end workload.  It launches kernels, copies,
 * sets and synchronizes through the fake runtime (which the fake CUPTI
 * sees as a GPU doing the work), makes NVTX ranges and markers with the
 * header-only NVTX API, and logs each operation (wlog.h), with
 * CLOCK_MONOTONIC readings just before and after the call, so a test can
 * check what the store says the GPU did and when.  No stdio.
 *
 *   wl_gpu kernels    main thread and two workers: launches (runtime and
 *                     driver API), copies, memsets, syncs
 *   wl_gpu short N [US]  N launches (US microseconds apart), then returns
 *                     from main at once
 *   wl_gpu pause N US the same, with shimmer_pause() before launch N/3 and
 *                     shimmer_resume() before launch 2N/3 (include/shimmer.h:
 *                     the shim marks both)
 *   wl_gpu driver N US   the same as short, every launch through the driver
 *                     API (cuLaunchKernel), none through the runtime
 *   wl_gpu graphpause N US   N launches of a CUDA graph (two kernels), each
 *                     logged as a G line, with shimmer_pause() before launch
 *                     N/2 and shimmer_resume() before launch 3N/4
 *   wl_gpu graph N US runtime|driver   the same as short, with a CUDA graph
 *                     (two kernels) launched before launch N/3 and every
 *                     10th launch after; runtime: through cudaLaunchKernel
 *                     and cudaGraphLaunch, driver: cuLaunchKernel and
 *                     cuGraphLaunch only (as JAX); each graph logged as a
 *                     G line; with WL_GPU_IDLE_MS=M, M ms of sleep after
 *                     CUDA starts, before the first launch (JAX compiling)
 *   wl_gpu nvtx       nested push/pop, a domain with a registered string,
 *                     start/end across threads, a mark; kernels inside;
 *                     ranges of two domains interleaved, so that a range
 *                     older than the innermost is deeper than it
 *   wl_gpu ranges N   N steps, each a push range around a launch, then a
 *                     launch outside every range (kernels_in_ranges at
 *                     scale)
 *
 * WL_GPU_LINGER_MS=M: sleep M ms after the mode's work, before returning.
 *
 * Log lines besides P and T (wlog.h):
 *   K,pid,tid,name,domain,api,gx,gy,gz,bx,by,bz,stream,smem,t0,t1,range
 *       a kernel launched (domain runtime/driver; range: the innermost
 *       push range open on the thread, "-" if none)
 *   Y,pid,tid,op,bytes,kind,value,stream,t0,t1   a memcpy (kind HtoD/DtoH)
 *       or memset (kind "-", value)
 *   S,pid,tid,type,stream,t0,t1                  a synchronization
 *   R,pid,tid,kind,domain,name,depth,parent,t0,t1 a range (push/startend;
 *       domain "-": NVTX's default; parent: the enclosing range's name)
 *   M,pid,tid,domain,name,t0                     a marker
 *   G,pid,tid,api,t0,t1                          a CUDA graph launched
 */
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock_ns.h"
#include "include/shimmer.h"
#include "test/fake_cudart/fake_gpu.h"
#include "wlog.h"

#define U(x) ((uint64_t)(uintptr_t)(x))

/* The kernels' names, as a real module would register them. */
#define K_MATMUL "_Z6matmulPfS_S_i"
#define K_ELEMWISE                                                                    \
	"_ZN2at6native18elementwise_kernelILi128ELi4EZNS0_22gpu_kernel_impl_nocastIN3c10" \
	"4cuda11CUDAFunctorEEEvRNS_18TensorIteratorBaseERKT_EUliE_EEviT1_"
#define K_PLAIN "vector_add"

static void k_matmul(void)
{
}

static void k_elemwise(void)
{
}

static void k_plain(void)
{
}

static uint64_t now(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

static void register_kernels(void)
{
	if (fake_cuda_register_kernel((const void *)(uintptr_t)k_matmul, K_MATMUL) ||
	    fake_cuda_register_kernel((const void *)(uintptr_t)k_elemwise, K_ELEMWISE) ||
	    fake_cuda_register_kernel((const void *)(uintptr_t)k_plain, K_PLAIN))
		abort();
}

/* The innermost push range open on this thread, for the K lines. */
static __thread const char *cur_range = "-";

struct launch {
	const char *name, *domain, *api;
	unsigned g[3], b[3];
	uint64_t stream, smem, t0, t1;
};

static void log_kernel(const struct launch *l)
{
	wlog_line("sdusssuuuuuuuuuus", "K", (int64_t)getpid(), (uint64_t)wlog_tid(), l->name,
		  l->domain, l->api, (uint64_t)l->g[0], (uint64_t)l->g[1], (uint64_t)l->g[2],
		  (uint64_t)l->b[0], (uint64_t)l->b[1], (uint64_t)l->b[2], l->stream, l->smem,
		  l->t0, l->t1, cur_range);
}

static void log_copy(const char *op, uint64_t bytes, const char *kind, uint64_t value,
		     cudaStream_t s, uint64_t t0, uint64_t t1)
{
	wlog_line("sdususuuuu", "Y", (int64_t)getpid(), (uint64_t)wlog_tid(), op, bytes, kind,
		  value, U(s), t0, t1);
}

static void log_sync(const char *type, uint64_t stream, uint64_t t0, uint64_t t1)
{
	wlog_line("sdusuuu", "S", (int64_t)getpid(), (uint64_t)wlog_tid(), type, stream, t0, t1);
}

static dim3 d3(unsigned x, unsigned y, unsigned z)
{
	return (dim3){ x, y, z };
}

/* One round of GPU work on the calling thread; k makes sizes distinct. */
static void gpu_round(unsigned k)
{
	static char host[4][65536];
	cudaStream_t s = (cudaStream_t)(uintptr_t)(0x5100 + k);
	const void *mm = (const void *)(uintptr_t)k_matmul;
	const void *ew = (const void *)(uintptr_t)k_elemwise;
	const void *pl = (const void *)(uintptr_t)k_plain;
	void *d = NULL;
	size_t n = 4096 + 16 * k;
	void *args[1] = { &n };
	struct launch l;
	uint64_t t0;

	if (cudaMalloc(&d, 65536) != cudaSuccess)
		abort();

	t0 = now();
	if (cudaMemcpy(d, host[k % 4], n, cudaMemcpyHostToDevice) != cudaSuccess)
		abort();
	log_copy("memcpy", n, "HtoD", 0, NULL, t0, now());
	t0 = now();
	if (cudaMemcpyAsync(host[k % 4], d, n + 1, cudaMemcpyDeviceToHost, s) != cudaSuccess)
		abort();
	log_copy("memcpy", n + 1, "DtoH", 0, s, t0, now());
	t0 = now();
	if (cudaMemset(d, 0x3c, n + 2) != cudaSuccess)
		abort();
	log_copy("memset", n + 2, "-", 0x3c, NULL, t0, now());
	t0 = now();
	if (cudaMemsetAsync(d, 7, n + 3, s) != cudaSuccess)
		abort();
	log_copy("memset", n + 3, "-", 7, s, t0, now());

	l = (struct launch){ K_MATMUL, "runtime", "cudaLaunchKernel", { 2 + k, 3, 1 }, { 32, 4, 1 },
			     U(s), 128 + k, now(), 0 };
	if (cudaLaunchKernel(mm, d3(2 + k, 3, 1), d3(32, 4, 1), args, 128 + k, s) != cudaSuccess)
		abort();
	l.t1 = now();
	log_kernel(&l);

	l = (struct launch){ K_ELEMWISE, "runtime", "cudaLaunchKernel", { 7, 1, 1 }, { 128, 1, 1 },
			     0, 0, now(), 0 };
	if (cudaLaunchKernel(ew, d3(7, 1, 1), d3(128, 1, 1), args, 0, NULL) != cudaSuccess)
		abort();
	l.t1 = now();
	log_kernel(&l);

	{
		cudaLaunchConfig_t cfg = { .gridDim = d3(4, 2, 2), .blockDim = d3(64, 2, 1),
					   .dynamicSmemBytes = 256 + k, .stream = s };

		l = (struct launch){ K_PLAIN, "runtime", "cudaLaunchKernelExC", { 4, 2, 2 },
				     { 64, 2, 1 }, U(s), 256 + k, now(), 0 };
		if (cudaLaunchKernelExC(&cfg, pl, args) != cudaSuccess)
			abort();
		l.t1 = now();
		log_kernel(&l);
	}

	/* A driver-API launch, as cuBLAS or Triton make it. */
	l = (struct launch){ K_ELEMWISE, "driver", "cuLaunchKernel", { 9, 1, 1 }, { 256, 1, 1 },
			     U(s), 0, now(), 0 };
	if (fake_cu_launch_kernel((CUfunction)(uintptr_t)ew, 9, 1, 1, 256, 1, 1, 0, (CUstream)s,
				  args, NULL) != CUDA_SUCCESS)
		abort();
	l.t1 = now();
	log_kernel(&l);

	/* An invalid launch: no kernel runs. */
	if (cudaLaunchKernel(mm, d3(1, 1, 1), d3(2048, 1, 1), args, 0, s) == cudaSuccess)
		abort();

	t0 = now();
	if (cudaStreamSynchronize(s) != cudaSuccess)
		abort();
	log_sync("stream", U(s), t0, now());
	t0 = now();
	if (cudaDeviceSynchronize() != cudaSuccess)
		abort();
	log_sync("context", 0, t0, now());

	if (cudaFree(d) != cudaSuccess)
		abort();
}

static void log_proc(void)
{
	wlog_line("sddd", "P", (int64_t)getpid(), (int64_t)getppid(), (int64_t)0);
}

static void log_thread(void)
{
	wlog_line("sdud", "T", (int64_t)getpid(), (uint64_t)wlog_tid(), (int64_t)1);
}

static void *kernels_worker(void *arg)
{
	log_thread();
	gpu_round((unsigned)(uintptr_t)arg);
	return NULL;
}

static int mode_kernels(void)
{
	pthread_t t[2];

	log_proc();
	log_thread();
	register_kernels();
	gpu_round(0);
	for (unsigned i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, kernels_worker, (void *)(uintptr_t)(i + 1)) != 0)
			abort();
	for (unsigned i = 0; i < 2; i++)
		if (pthread_join(t[i], NULL) != 0)
			abort();
	gpu_round(3);
	return 0;
}

enum short_how {
	SHORT_PLAIN, SHORT_PAUSE, SHORT_DRIVER, SHORT_GRAPH, SHORT_GRAPH_DRIVER, SHORT_GRAPH_PAUSE
};

/* One launch of a graph of two kernels, logged as a G line. */
static void graph_once(int driver)
{
	static const void *funcs[2] = { (const void *)(uintptr_t)k_elemwise,
					(const void *)(uintptr_t)k_plain };
	cudaGraphExec_t gx = (cudaGraphExec_t)(uintptr_t)0x6a00;
	uint64_t t0;

	static int defined;

	if (!defined++ && fake_cuda_graph(gx, funcs, 2) != 0)
		abort();
	t0 = now();
	if (driver ? fake_cu_graph_launch((CUgraphExec)gx, NULL) != CUDA_SUCCESS
		   : cudaGraphLaunch(gx, NULL) != cudaSuccess)
		abort();
	wlog_line("sdusuu", "G", (int64_t)getpid(), (uint64_t)wlog_tid(),
		  driver ? "cuGraphLaunch" : "cudaGraphLaunch", t0, now());
}

static int mode_short(unsigned n, unsigned pause_us, enum short_how how)
{
	struct timespec pause = { pause_us / 1000000, (long)(pause_us % 1000000) * 1000 };
	const void *mm = (const void *)(uintptr_t)k_matmul;
	int with_pause = how == SHORT_PAUSE;

	log_proc();
	log_thread();
	register_kernels();
	if (getenv("WL_GPU_IDLE_MS")) {
		unsigned ms = (unsigned)atoi(getenv("WL_GPU_IDLE_MS"));
		struct timespec idle = { ms / 1000, (long)(ms % 1000) * 1000000 };

		if (cudaSetDevice(0) != cudaSuccess) /* CUDA starts, and the sampling */
			abort();
		nanosleep(&idle, NULL);
	}
	for (unsigned i = 0; i < n; i++) {
		struct launch l;

		if (with_pause && i == n / 3)
			shimmer_pause();
		if (with_pause && i == 2 * n / 3)
			shimmer_resume();
		if (how == SHORT_GRAPH_PAUSE) {
			if (i == n / 2)
				shimmer_pause();
			if (i == 3 * n / 4)
				shimmer_resume();
			graph_once(0);
			if (pause_us)
				nanosleep(&pause, NULL);
			continue;
		}
		if ((how == SHORT_GRAPH || how == SHORT_GRAPH_DRIVER) && i >= n / 3 &&
		    (i - n / 3) % 10 == 0)
			graph_once(how == SHORT_GRAPH_DRIVER);
		if (how == SHORT_DRIVER || how == SHORT_GRAPH_DRIVER) {
			l = (struct launch){ K_MATMUL, "driver", "cuLaunchKernel", { 1 + i, 1, 1 },
					     { 32, 1, 1 }, 0, 0, now(), 0 };
			if (fake_cu_launch_kernel((CUfunction)(uintptr_t)mm, 1 + i, 1, 1, 32, 1, 1, 0,
						  NULL, NULL, NULL) != CUDA_SUCCESS)
				abort();
		} else {
			l = (struct launch){ K_MATMUL, "runtime", "cudaLaunchKernel", { 1 + i, 1, 1 },
					     { 32, 1, 1 }, 0, 0, now(), 0 };
			if (cudaLaunchKernel(mm, d3(1 + i, 1, 1), d3(32, 1, 1), NULL, 0, NULL) !=
			    cudaSuccess)
				abort();
		}
		l.t1 = now();
		log_kernel(&l);
		if (pause_us)
			nanosleep(&pause, NULL);
	}
	return 0;
}

/* ---- NVTX ---------------------------------------------------------------- */

struct open_range {
	const char *kind, *domain, *name, *parent;
	int depth;
	uint64_t t0;
};

static void log_range(const struct open_range *r, uint64_t tid, uint64_t t1)
{
	wlog_line("sdusssdsuu", "R", (int64_t)getpid(), tid, r->kind, r->domain, r->name,
		  (int64_t)r->depth, r->parent, r->t0, t1);
}

static void push(struct open_range *r, const char *name, int depth, const char *parent)
{
	*r = (struct open_range){ "push", "-", name, parent, depth, now() };
	nvtxRangePushA(name);
	cur_range = name;
}

static void pop(const struct open_range *r, const char *outer)
{
	nvtxRangePop();
	log_range(r, (uint64_t)wlog_tid(), now());
	cur_range = outer;
}

static void launch_in_range(unsigned k)
{
	struct launch l = { K_PLAIN, "runtime", "cudaLaunchKernel", { 1, 1, 1 }, { 64 + k, 1, 1 },
			    0, 0, now(), 0 };

	if (cudaLaunchKernel((const void *)(uintptr_t)k_plain, d3(1, 1, 1), d3(64 + k, 1, 1), NULL,
			     0, NULL) != cudaSuccess)
		abort();
	l.t1 = now();
	log_kernel(&l);
}

struct cross {
	nvtxRangeId_t id;
	struct open_range r;
	uint64_t tid;
};

static void *end_elsewhere(void *arg)
{
	struct cross *c = arg;

	log_thread();
	nvtxRangeEnd(c->id);
	log_range(&c->r, c->tid, now());
	return NULL;
}

static int mode_nvtx(void)
{
	static const char dom_name[] = "shimmer-e2e";
	struct open_range a, b, c, d, e;
	nvtxDomainHandle_t dom;
	nvtxStringHandle_t reg;
	nvtxEventAttributes_t at;
	struct cross x;
	pthread_t t;
	uint64_t t0;

	log_proc();
	log_thread();
	register_kernels();

	launch_in_range(0); /* outside any range */
	push(&a, "epoch", 0, "-");
	launch_in_range(1);
	push(&b, "forward", 1, "epoch");
	launch_in_range(2);
	launch_in_range(3);
	push(&c, "attention", 2, "forward");
	launch_in_range(4);
	pop(&c, "forward");
	launch_in_range(5);
	pop(&b, "epoch");

	t0 = now();
	nvtxMarkA("checkpoint");
	wlog_line("sdussu", "M", (int64_t)getpid(), (uint64_t)wlog_tid(), "-", "checkpoint", t0);

	/* Start here, end on another thread. */
	x.r = (struct open_range){ "startend", "-", "async-load", "-", 0, now() };
	x.tid = (uint64_t)wlog_tid();
	x.id = nvtxRangeStartA("async-load");
	if (pthread_create(&t, NULL, end_elsewhere, &x) != 0 || pthread_join(t, NULL) != 0)
		abort();

	pop(&a, "-");
	launch_in_range(6); /* outside again */

	/* A domain of its own, one range by registered string, one with attributes. */
	dom = nvtxDomainCreateA(dom_name);
	reg = nvtxDomainRegisterStringA(dom, "registered-step");
	memset(&at, 0, sizeof(at));
	at.version = NVTX_VERSION;
	at.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	at.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
	at.message.registered = reg;
	d = (struct open_range){ "push", dom_name, "registered-step", "-", 0, now() };
	nvtxDomainRangePushEx(dom, &at);
	at.messageType = NVTX_MESSAGE_TYPE_ASCII;
	at.message.ascii = "colored";
	at.colorType = NVTX_COLOR_ARGB;
	at.color = 0xff20a040u;
	e = (struct open_range){ "push", dom_name, "colored", "registered-step", 1, now() };
	nvtxDomainRangePushEx(dom, &at);
	nvtxDomainRangePop(dom);
	log_range(&e, (uint64_t)wlog_tid(), now());
	nvtxDomainRangePop(dom);
	log_range(&d, (uint64_t)wlog_tid(), now());

	/* Interleaved domains: NVTX pops the innermost range of the pop's own
	 * domain.  "lib" (the domain's, depth 2) outlives "outer" and "mid"
	 * (the default domain's); "inner", pushed after, has depth 1 (one
	 * range open) but is the innermost: the kernel is in it. */
	{
		struct open_range o, m, lib, in;

		push(&o, "outer", 0, "-");
		push(&m, "mid", 1, "outer");
		lib = (struct open_range){ "push", dom_name, "lib", "mid", 2, now() };
		memset(&at, 0, sizeof(at));
		at.version = NVTX_VERSION;
		at.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
		at.messageType = NVTX_MESSAGE_TYPE_ASCII;
		at.message.ascii = "lib";
		nvtxDomainRangePushEx(dom, &at);
		pop(&m, "-");
		pop(&o, "-");
		push(&in, "inner", 1, "lib");
		launch_in_range(7);
		pop(&in, "lib");
		launch_in_range(8);
		nvtxDomainRangePop(dom);
		log_range(&lib, (uint64_t)wlog_tid(), now());
	}

	nvtxDomainDestroy(dom);
	return 0;
}

/* N steps: a range around a launch, then a launch outside it. */
static int mode_ranges(unsigned n)
{
	log_proc();
	log_thread();
	register_kernels();
	for (unsigned i = 0; i < n; i++) {
		struct open_range r;

		push(&r, "step", 0, "-");
		launch_in_range(i % 2);
		pop(&r, "-");
		launch_in_range(2 + i % 2);
	}
	return 0;
}

static int run(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	if (!strcmp(mode, "kernels"))
		return mode_kernels();
	if (!strcmp(mode, "short") && (argc == 3 || argc == 4))
		return mode_short((unsigned)atoi(argv[2]), argc == 4 ? (unsigned)atoi(argv[3]) : 0,
				  SHORT_PLAIN);
	if (!strcmp(mode, "pause") && argc == 4)
		return mode_short((unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]), SHORT_PAUSE);
	if (!strcmp(mode, "driver") && argc == 4)
		return mode_short((unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]), SHORT_DRIVER);
	if (!strcmp(mode, "graphpause") && argc == 4)
		return mode_short((unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]), SHORT_GRAPH_PAUSE);
	if (!strcmp(mode, "graph") && argc == 5)
		return mode_short((unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]),
				  !strcmp(argv[4], "driver") ? SHORT_GRAPH_DRIVER : SHORT_GRAPH);
	if (!strcmp(mode, "nvtx"))
		return mode_nvtx();
	if (!strcmp(mode, "ranges") && argc == 3)
		return mode_ranges((unsigned)atoi(argv[2]));
	wlog_puts(2, "usage: wl_gpu kernels|short N [US]|pause N US|driver N US|nvtx|ranges N\n");
	return 2;
}

int main(int argc, char **argv)
{
	const char *linger = getenv("WL_GPU_LINGER_MS");
	int rc;

	wlog_open();
	rc = run(argc, argv);
	if (rc == 0 && linger) {
		unsigned ms = (unsigned)atoi(linger);
		struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

		nanosleep(&ts, NULL);
	}
	return rc;
}
