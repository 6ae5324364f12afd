/*
 * wl_bneck: training loops with one planted bottleneck each, and a clean
 * one, for `shimmer bottlenecks` (t_bottlenecks.sh).  They run on the fake
 * runtime's asynchronous GPU (FAKE_GPU_KERNEL_NS set by the test; kernel
 * times below are set per kernel): each step is a shimmer range "step".
 *
 *   wl_bneck clean STEPS     12 balanced kernels a step on one stream, the
 *                            batch copied from pinned memory asynchronously;
 *                            the CPU runs ahead, one synchronize at the end
 *   wl_bneck sync STEPS      clean, plus a 4-byte copy to pageable memory and
 *                            a stream synchronize at each step's end (.item())
 *   wl_bneck idle STEPS      a 1 ms kernel a step, then 4 ms of CPU sleep; a
 *                            600 ms stretch of CPU work half-way
 *   wl_bneck launch STEPS    300 kernels of 2 us a step (a repeating triple)
 *   wl_bneck graph STEPS N   the same 300 kernels a step from CUDA graphs of N
 *                            kernels each (300 / N cudaGraphLaunch a step),
 *                            then 1 ms of CPU sleep: launch-bound for small N,
 *                            not for N = 300 (the GPU waits for the sleep)
 *   wl_bneck copies STEPS    clean, plus a pageable cudaMemcpyAsync, a memset
 *                            of pinned memory and a synchronous cudaMemcpy
 *   wl_bneck loading STEPS W each step waits for a batch: from W worker
 *                            processes (children spinning 8 ms a batch), or
 *                            made on the main thread when W is 0
 *   wl_bneck rank STEPS SLOW EXTRA_US OVERLAP
 *                            one rank ($RANK) of a data-parallel loop: 2 ms of
 *                            compute and a 2 ms NCCL all-reduce a step, on one
 *                            stream (OVERLAP 0) or overlapped on two (1); rank
 *                            SLOW sleeps EXTRA_US more before its all-reduce
 *   wl_bneck growth STEPS    clean, plus 1 MiB of device memory and 64 KiB of
 *                            host memory a step never freed
 *   wl_bneck retry STEPS     a cache of device blocks that fills the device
 *                            (FAKE_CUDA_DEVICE_BYTES=64 MiB): every 5th step
 *                            an allocation fails, two cached blocks are freed
 *                            and it is made again
 *   wl_bneck churn STEPS     clean, plus 40,000 zeroed 16 KiB buffers a step,
 *                            each freed at once (calloc/free)
 *   wl_bneck hot STEPS       one kernel of 6 ms and 4 of 1 ms, a nested range
 *                            "forward" of 4 ms, 30 cudaMalloc/cudaFree a step
 *
 * It logs (wlog.h) the line of each planted call, for the test to find in
 * the findings:  B,pid,what,line; a loading worker its CPU time:
 * U,pid,cpu_ns; idle its 600 ms of CPU work: G,pid,tid,t0,t1,cpu_ns (the
 * thread's CPU time over [t0, t1])
 *
 * Ranks run in step, as collectives make them: with WL_BARRIER naming a
 * file of 4 KiB of zeros shared by WORLD_SIZE ranks, each step ends with a
 * barrier on a counter in it.
 */
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock_ns.h"
#include "include/shimmer.h"
#include "test/fake_cudart/fake_gpu.h"
#include "wlog.h"

#define MS 1000000ull
#define US 1000ull
#define NK 12

static void k_train(void) {}
static void k_tiny_a(void) {}
static void k_tiny_b(void) {}
static void k_tiny_c(void) {}
static void k_nccl(void) {}
static void k_big(void) {}

/* 12 distinct kernels: their addresses are a static array's elements. */
static const char kfuncs[NK];
static const char *const knames[NK] = {
	"train_kernel_0", "train_kernel_1", "train_kernel_2",  "train_kernel_3",
	"train_kernel_4", "train_kernel_5", "train_kernel_6",  "train_kernel_7",
	"train_kernel_8", "train_kernel_9", "train_kernel_10", "train_kernel_11",
};

static const dim3 G = { 4, 1, 1 }, B = { 128, 1, 1 };
static cudaStream_t stream_a = (cudaStream_t)(uintptr_t)0x21, stream_b = (cudaStream_t)(uintptr_t)0x22;

static void site(const char *what, int line)
{
	wlog_line("sdsd", "B", (int64_t)getpid(), what, (int64_t)line);
}

static void must(int ok)
{
	if (!ok)
		abort();
}

static void kernel(const void *f, uint64_t ns, const char *name)
{
	must(fake_cuda_register_kernel(f, name) == 0);
	must(fake_cuda_kernel_ns(f, ns) == 0);
}

static void setup(void)
{
	for (int i = 0; i < NK; i++)
		kernel(&kfuncs[i], 1 * MS, knames[i]);
	kernel((const void *)(uintptr_t)k_train, 2 * MS, "train_step_kernel");
	kernel((const void *)(uintptr_t)k_tiny_a, 2 * US, "tiny_add");
	kernel((const void *)(uintptr_t)k_tiny_b, 2 * US, "tiny_mul");
	kernel((const void *)(uintptr_t)k_tiny_c, 2 * US, "tiny_relu");
	kernel((const void *)(uintptr_t)k_nccl, 2 * MS, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
	kernel((const void *)(uintptr_t)k_big, 6 * MS, "big_gemm");
	must(cudaSetDevice(0) == cudaSuccess);
}

static void launch(const void *f, cudaStream_t s)
{
	must(cudaLaunchKernel(f, G, B, NULL, 0, s) == cudaSuccess);
}

static void spin(uint64_t ns)
{
	uint64_t end = clock_ns(CLOCK_MONOTONIC) + ns;

	while (clock_ns(CLOCK_MONOTONIC) < end)
		;
}

static void nap(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };

	nanosleep(&ts, NULL);
}

/* The clean step: the batch to the GPU from pinned memory, 12 kernels. */
static void clean_step(void *pinned, void *dev)
{
	must(cudaMemcpyAsync(dev, pinned, 4096, cudaMemcpyHostToDevice, stream_a) == cudaSuccess);
	for (int i = 0; i < NK; i++)
		launch(&kfuncs[i], stream_a);
}

static int mode_clean(int steps, int with_sync, int with_copies, int with_growth, int with_churn)
{
	void *pinned = NULL, *dev = NULL, *pdev = NULL;
	char *pageable = malloc(4096);

	must(pageable != NULL);
	memset(pageable, 1, 4096);
	must(cudaMallocHost(&pinned, 1 << 16) == cudaSuccess);
	must(cudaMalloc(&dev, 1 << 16) == cudaSuccess);
	must(cudaMalloc(&pdev, 1 << 16) == cudaSuccess);
	for (int k = 0; k < steps; k++) {
		shimmer_range_push("step");
		clean_step(pinned, dev);
		if (with_sync) {
			float loss;

			must(cudaMemcpyAsync(&loss, dev, sizeof(loss), cudaMemcpyDeviceToHost, stream_a) == cudaSuccess); site("sync", __LINE__);
			must(cudaStreamSynchronize(stream_a) == cudaSuccess);
		}
		if (with_copies) {
			must(cudaMemcpyAsync(pdev, pageable, 4096, cudaMemcpyHostToDevice, stream_a) == cudaSuccess); site("pageable", __LINE__);
			must(cudaMemset(pinned, 0, 4096) == cudaSuccess); site("memset", __LINE__);
			must(cudaMemcpy(pdev, pinned, 4096, cudaMemcpyHostToDevice) == cudaSuccess); site("sync_copy", __LINE__);
		}
		if (with_growth) {
			void *leak = NULL;

			must(cudaMalloc(&leak, 1 << 20) == cudaSuccess); site("growth_device", __LINE__);
			must(malloc(65536) != NULL); site("growth_host", __LINE__);
		}
		if (with_churn) {
			for (int i = 0; i < 40000; i++) {
				void *volatile p = calloc(1, 16384); if (k == 0 && i == 0) site("churn", __LINE__);

				free(p);
			}
		}
		shimmer_range_pop();
	}
	must(cudaDeviceSynchronize() == cudaSuccess);
	free(pageable);
	return 0;
}

static int mode_idle(int steps)
{
	for (int k = 0; k < steps; k++) {
		shimmer_range_push("step");
		launch((const void *)(uintptr_t)k_train, stream_a);
		nap(4 * MS);
		if (k == steps / 2) {
			uint64_t t0 = clock_ns(CLOCK_MONOTONIC), c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);

			spin(600 * MS); /* CPU work while the GPU has nothing */
			wlog_line("sddddd", "G", (int64_t)getpid(), (int64_t)wlog_tid(), (int64_t)t0,
				  (int64_t)clock_ns(CLOCK_MONOTONIC),
				  (int64_t)(clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0));
		}
		shimmer_range_pop();
	}
	must(cudaDeviceSynchronize() == cudaSuccess);
	return 0;
}

static int mode_launch(int steps)
{
	const void *f[3] = { (const void *)(uintptr_t)k_tiny_a, (const void *)(uintptr_t)k_tiny_b,
			     (const void *)(uintptr_t)k_tiny_c };

	for (int k = 0; k < steps; k++) {
		shimmer_range_push("step");
		for (int i = 0; i < 300; i++) {
			must(cudaLaunchKernel(f[i % 3], G, B, NULL, 0, stream_a) == cudaSuccess); if (k == 0 && i == 0) site("launch", __LINE__);
		}
		shimmer_range_pop();
	}
	must(cudaDeviceSynchronize() == cudaSuccess);
	return 0;
}

static int mode_graph(int steps, unsigned n)
{
	const void *f[300];
	cudaGraphExec_t gx = (cudaGraphExec_t)(uintptr_t)0x6100;

	if (n < 1 || n > 300 || 300 % n) {
		wlog_puts(2, "wl_bneck graph: N divides 300\n");
		return 2;
	}
	for (unsigned i = 0; i < n; i++)
		f[i] = i % 3 == 0 ? (const void *)(uintptr_t)k_tiny_a :
		       i % 3 == 1 ? (const void *)(uintptr_t)k_tiny_b : (const void *)(uintptr_t)k_tiny_c;
	must(fake_cuda_graph(gx, f, n) == 0);
	for (int k = 0; k < steps; k++) {
		shimmer_range_push("step");
		for (unsigned i = 0; i < 300 / n; i++) {
			must(cudaGraphLaunch(gx, stream_a) == cudaSuccess); if (k == 0 && i == 0) site("graph", __LINE__);
		}
		nap(1 * MS);
		shimmer_range_pop();
	}
	must(cudaDeviceSynchronize() == cudaSuccess);
	return 0;
}

/* A worker: makes a batch (8 ms of CPU) and writes a byte, until the pipe
 * closes; before each write it logs its CPU time, U,pid,cpu_ns (the truth
 * of the ON CPU figure: the last line is at most a batch short of it).
 * Worker 0, 2, ... then exits (_exit), the others die of SIGPIPE. */
static void worker(int fd, int w)
{
	char c = 1;

	if (w % 2 == 0)
		signal(SIGPIPE, SIG_IGN);
	for (;;) {
		spin(8 * MS);
		wlog_line("sdd", "U", (int64_t)getpid(),
			  (int64_t)clock_ns(CLOCK_PROCESS_CPUTIME_ID));
		if (write(fd, &c, 1) != 1)
			_exit(0);
	}
}

static int mode_loading(int steps, int workers)
{
	int fds[2];
	pid_t pids[8];

	must(workers >= 0 && workers <= 8);
	must(pipe(fds) == 0);
	for (int w = 0; w < workers; w++) {
		pids[w] = fork();
		must(pids[w] >= 0);
		if (pids[w] == 0) {
			close(fds[0]);
			worker(fds[1], w);
		}
	}
	close(fds[1]);
	for (int k = 0; k < steps; k++) {
		shimmer_range_push("step");
		if (workers) {
			char c;

			must(read(fds[0], &c, 1) == 1); site("loading", __LINE__);
		} else {
			spin(8 * MS);
		}
		launch((const void *)(uintptr_t)k_train, stream_a);
		shimmer_range_pop();
	}
	must(cudaDeviceSynchronize() == cudaSuccess);
	close(fds[0]);
	for (int w = 0; w < workers; w++)
		waitpid(pids[w], NULL, 0);
	return 0;
}

/* The ranks' barrier: a counter in a shared file, each rank adding one
 * per step and waiting for all. */
static volatile uint64_t *barrier_word;
static uint64_t world = 1;

static void barrier_open(void)
{
	const char *path = getenv("WL_BARRIER"), *w = getenv("WORLD_SIZE");
	int fd;
	void *p;

	if (!path || !w)
		return;
	world = (uint64_t)atoi(w);
	fd = open(path, O_RDWR);
	must(fd >= 0);
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	must(p != MAP_FAILED);
	close(fd);
	barrier_word = p;
}

static void barrier(uint64_t generation)
{
	if (!barrier_word)
		return;
	__atomic_add_fetch(barrier_word, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(barrier_word, __ATOMIC_SEQ_CST) < generation * world)
		nap(20 * US);
}

static int mode_rank(int steps, int slow, uint64_t extra_us, int overlap)
{
	const char *r = getenv("RANK");
	int rank = r ? atoi(r) : -1;

	barrier_open();
	for (int k = 0; k < steps; k++) {
		shimmer_range_push("step");
		launch((const void *)(uintptr_t)k_train, stream_a);
		if (rank == slow)
			nap(extra_us * US);
		launch((const void *)(uintptr_t)k_nccl, overlap ? stream_b : stream_a);
		must(cudaDeviceSynchronize() == cudaSuccess);
		barrier((uint64_t)k + 1);
		shimmer_range_pop();
	}
	return 0;
}

/* A caching allocator on a full device: a free list of 8 MiB blocks. */
static int mode_retry(int steps)
{
	void *cache[8], *big = NULL;
	int n = 0;

	while (n < 8 && cudaMalloc(&cache[n], 8 << 20) == cudaSuccess)
		n++;
	must(n == 8);
	for (int k = 0; k < steps; k++) {
		shimmer_range_push("step");
		launch((const void *)(uintptr_t)k_train, stream_a);
		if (k % 5 == 4 && n >= 2) {
			if (cudaMalloc(&big, 16 << 20) != cudaSuccess) {
				/* out of memory: give back two cached blocks, then again */
				must(cudaFree(cache[--n]) == cudaSuccess);
				must(cudaFree(cache[--n]) == cudaSuccess);
				must(cudaMalloc(&big, 16 << 20) == cudaSuccess); site("retry", __LINE__);
			}
			must(cudaFree(big) == cudaSuccess);
			/* the cache fills up again */
			must(cudaMalloc(&cache[n++], 8 << 20) == cudaSuccess);
			must(cudaMalloc(&cache[n++], 8 << 20) == cudaSuccess);
		}
		must(cudaStreamSynchronize(stream_a) == cudaSuccess);
		shimmer_range_pop();
	}
	while (n > 0)
		must(cudaFree(cache[--n]) == cudaSuccess);
	return 0;
}

static int mode_hot(int steps)
{
	void *dev = NULL;

	must(cudaMalloc(&dev, 1 << 16) == cudaSuccess);
	for (int k = 0; k < steps; k++) {
		shimmer_range_push("step");
		shimmer_range_push("forward");
		launch((const void *)(uintptr_t)k_big, stream_a);
		nap(4 * MS);
		shimmer_range_pop();
		for (int i = 0; i < 4; i++)
			launch(&kfuncs[i], stream_a);
		for (int i = 0; i < 30; i++) {
			void *tmp = NULL;

			must(cudaMalloc(&tmp, 4096) == cudaSuccess);
			must(cudaFree(tmp) == cudaSuccess);
		}
		shimmer_range_pop();
	}
	must(cudaDeviceSynchronize() == cudaSuccess);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	int steps = argc > 2 ? atoi(argv[2]) : 0;

	wlog_open();
	if (steps <= 0) {
		wlog_puts(2, "usage: wl_bneck MODE STEPS [ARGS] (see wl_bneck.c)\n");
		return 2;
	}
	setup();
	if (!strcmp(mode, "clean"))
		return mode_clean(steps, 0, 0, 0, 0);
	if (!strcmp(mode, "sync"))
		return mode_clean(steps, 1, 0, 0, 0);
	if (!strcmp(mode, "copies"))
		return mode_clean(steps, 0, 1, 0, 0);
	if (!strcmp(mode, "growth"))
		return mode_clean(steps, 0, 0, 1, 0);
	if (!strcmp(mode, "churn"))
		return mode_clean(steps, 0, 0, 0, 1);
	if (!strcmp(mode, "idle"))
		return mode_idle(steps);
	if (!strcmp(mode, "launch"))
		return mode_launch(steps);
	if (!strcmp(mode, "graph") && argc == 4)
		return mode_graph(steps, (unsigned)atoi(argv[3]));
	if (!strcmp(mode, "loading") && argc == 4)
		return mode_loading(steps, atoi(argv[3]));
	if (!strcmp(mode, "rank") && argc == 6)
		return mode_rank(steps, atoi(argv[3]), (uint64_t)atoll(argv[4]), atoi(argv[5]));
	if (!strcmp(mode, "retry"))
		return mode_retry(steps);
	if (!strcmp(mode, "hot"))
		return mode_hot(steps);
	wlog_puts(2, "usage: wl_bneck MODE STEPS [ARGS] (see wl_bneck.c)\n");
	return 2;
}
