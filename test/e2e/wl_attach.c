/*
 * wl_attach: the workload shimmer attach is tested on (t_attach.sh).  It
 * runs untraced from its start and does what it is told on stdin, one
 * command per line, answering each on stdout once done; a test attaches
 * between commands, so it knows which calls fell inside the traced window.
 * Every call is logged (wlog.h) for the comparison; "M" lines mark the
 * commands:
 *
 *   cuda K       a new thread: cudaSetDevice(K % 4), the workload's CUDA
 *                sequence (wl_cuda.h; the _ptsz one for odd K), joined
 *   failures     the calls that fail (wl_cuda_failures), on a new thread
 *   driver N     N cuLaunchKernel and N cuGraphLaunch through the driver
 *                (the fake libcuda), on a new thread: "D,pid,tid,fn,ret"
 *   heap N SIZE  a new thread: N x (malloc(SIZE); free): "H,pid,tid,N,SIZE"
 *   leak         a new thread: leak_device() cudaMallocs LEAK_DEV_BYTES and
 *                leak_host() mallocs LEAK_HOST_N blocks of LEAK_HOST_SIZE,
 *                never freed ("L" lines)
 *   free-old     cudaFree of the block cudaMalloc'd at start
 *   wake         wakes the sleeper (below) once
 *   mark TEXT    logs "M,pid,TEXT" (a boundary for the test)
 *   exit CODE    answers "bye" and exits with CODE
 *
 * The sleeper thread waits in read() on a pipe, in wait_for_byte(), and
 * logs each wait as "R,pid,tid,t0_ns,t1_ns" (CLOCK_MONOTONIC): the truth
 * for off-CPU time.  Its functions are noinline, for the stack check.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock_ns.h"
#include "wl_cuda.h"
#include "wlog.h"

#define LEAK_DEV_BYTES 7340033u  /* 7 MiB + 1 */
#define LEAK_HOST_N 32
#define LEAK_HOST_SIZE (1u << 20)
#define U(x) ((uint64_t)(uintptr_t)(x))

static int wake_pipe[2];
static void *old_block;

static void log_thread(int worker)
{
	wlog_line("sdud", "T", (int64_t)getpid(), (uint64_t)wlog_tid(), (int64_t)worker);
}

/* ---- the sleeper ---- */

__attribute__((noinline)) static int wait_for_byte(int fd)
{
	char c;

	return (int)read(fd, &c, 1);
}

__attribute__((noinline)) static void *sleeper_main(void *arg)
{
	(void)arg;
	log_thread(0);
	for (;;) {
		uint64_t t0 = clock_ns(CLOCK_MONOTONIC), t1;

		if (wait_for_byte(wake_pipe[0]) != 1)
			return NULL;
		t1 = clock_ns(CLOCK_MONOTONIC);
		wlog_line("sduuu", "R", (int64_t)getpid(), (uint64_t)wlog_tid(), t0, t1);
	}
}

/* ---- commands, each on a thread of its own ---- */

struct job {
	const char *cmd;
	unsigned long a, b;
};

__attribute__((noinline)) static void leak_device(void)
{
	void *d = NULL;
	int err = cudaMalloc(&d, LEAK_DEV_BYTES), dev = -1;

	cudaGetDevice(&dev);
	wlog_line("sdusdduuuuuuuuuuuuu", "C", (int64_t)getpid(), (uint64_t)wlog_tid(),
		  "cudaMalloc", (int64_t)err, (int64_t)dev, U(d), (uint64_t)LEAK_DEV_BYTES,
		  0ull, 0ull, 0ull, 0ull, 0ull, 0ull, 0ull, 0ull, 0ull, 0ull, 0ull);
	wlog_line("sdusuusds", "A", (int64_t)getpid(), (uint64_t)wlog_tid(), "cudaMalloc", U(d),
		  (uint64_t)LEAK_DEV_BYTES, "device", (int64_t)dev, "cuda");
	wlog_line("sdusu", "L", (int64_t)getpid(), (uint64_t)wlog_tid(), "leak_device",
		  (uint64_t)(err ? 0 : LEAK_DEV_BYTES));
}

__attribute__((noinline)) static void leak_host(void)
{
	for (int i = 0; i < LEAK_HOST_N; i++) {
		void *p = malloc(LEAK_HOST_SIZE);

		wlog_line("sdusu", "L", (int64_t)getpid(), (uint64_t)wlog_tid(), "leak_host",
			  (uint64_t)(p ? LEAK_HOST_SIZE : 0));
	}
}

__attribute__((noinline)) static void heap_loop(unsigned long n, unsigned long size)
{
	wlog_line("sduuu", "H", (int64_t)getpid(), (uint64_t)wlog_tid(), (uint64_t)n,
		  (uint64_t)size);
	for (unsigned long i = 0; i < n; i++) {
		void *p = malloc(size);

		if (!p)
			abort();
		free(p);
	}
}

static void driver_launches(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++) {
		CUresult r = cuLaunchKernel((CUfunction)(uintptr_t)0x7000, 1, 1, 1, 32, 1, 1, 0,
					    NULL, NULL, NULL);

		wlog_line("sdusd", "D", (int64_t)getpid(), (uint64_t)wlog_tid(), "cuLaunchKernel",
			  (int64_t)r);
		r = cuGraphLaunch((CUgraphExec)(uintptr_t)0x8000, NULL);
		wlog_line("sdusd", "D", (int64_t)getpid(), (uint64_t)wlog_tid(), "cuGraphLaunch",
			  (int64_t)r);
	}
}

static void *run_job(void *arg)
{
	struct job *j = arg;

	log_thread(1);
	if (!strcmp(j->cmd, "cuda")) {
		if (cudaSetDevice((int)(j->a % 4)) != cudaSuccess)
			abort();
		if (j->a % 2)
			wl_cuda_ptsz((unsigned)j->a);
		else
			wl_cuda_plain((unsigned)j->a);
	} else if (!strcmp(j->cmd, "failures")) {
		if (cudaSetDevice(0) != cudaSuccess)
			abort();
		wl_cuda_failures();
	} else if (!strcmp(j->cmd, "driver")) {
		driver_launches(j->a);
	} else if (!strcmp(j->cmd, "heap")) {
		heap_loop(j->a, j->b);
	} else if (!strcmp(j->cmd, "leak")) {
		if (cudaSetDevice(0) != cudaSuccess)
			abort();
		leak_device();
		leak_host();
	}
	return NULL;
}

static void on_thread(struct job *j)
{
	pthread_t t;

	if (pthread_create(&t, NULL, run_job, j) || pthread_join(t, NULL))
		abort();
}

int main(void)
{
	char line[256];
	pthread_t sleeper;

	wlog_open();
	wlog_line("sddd", "P", (int64_t)getpid(), (int64_t)getppid(), (int64_t)0);
	log_thread(0);
	if (pipe(wake_pipe) || pthread_create(&sleeper, NULL, sleeper_main, NULL))
		return 1;
	if (cudaMalloc(&old_block, 4096) != cudaSuccess)
		return 1;
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	while (fgets(line, sizeof(line), stdin)) {
		struct job j = { 0 };
		char cmd[32] = "", text[128] = "";
		int code;

		if (sscanf(line, "%31s", cmd) != 1)
			continue;
		j.cmd = cmd;
		if (!strcmp(cmd, "exit") && sscanf(line, "%*s %d", &code) == 1) {
			printf("bye\n");
			return code;
		} else if (!strcmp(cmd, "mark") && sscanf(line, "%*s %127s", text) == 1) {
			wlog_line("sds", "M", (int64_t)getpid(), text);
		} else if (!strcmp(cmd, "wake")) {
			if (write(wake_pipe[1], "x", 1) != 1)
				return 1;
		} else if (!strcmp(cmd, "free-old")) {
			int err = cudaFree(old_block);

			wlog_line("sdusdu", "C0", (int64_t)getpid(), (uint64_t)wlog_tid(), "cudaFree",
				  (int64_t)err, U(old_block));
		} else {
			sscanf(line, "%*s %lu %lu", &j.a, &j.b);
			on_thread(&j);
		}
		printf("%s done\n", cmd);
	}
	return 0;
}
