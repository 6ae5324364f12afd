/*
 * wl: the end-to-end tests' workload.  It makes known sequences of heap and
 * CUDA runtime calls (through the fake runtime, test/fake_cudart) and logs
 * each one (wlog.h) so that a test can compare the store with the truth.
 * It never uses stdio: stdio buffers would add heap calls of its own.
 *
 *   wl trace               threads, a forked child and an exec'd child
 *   wl exec-child          (run by trace through execv)
 *   wl simple N SIZE EXIT  print to stdout/stderr, N cudaMalloc(SIZE),
 *                          exit with EXIT, or die of signal n for "sigN"
 *   wl sample N SIZE       one thread: N x (malloc(SIZE); free)
 *   wl burst N SIZE        one thread: N x malloc(SIZE), never freed
 *   wl selfkill            calls, then SIGKILL on itself
 *   wl block               calls, print "ready", wait for EOF on stdin
 *   wl long N              N rounds of CUDA calls, then exit 3
 *   wl flood N BURST       N rounds of BURST malloc(64)+free pairs (not
 *                          logged), one cudaMalloc+cudaFree, a 20 ms pause
 */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "wl_cuda.h"
#include "wlog.h"

#define NWORKERS 3
#define U(x) ((uint64_t)(uintptr_t)(x))

static void log_alloc(const char *fn, void *p, uint64_t size)
{
	wlog_line("sdusuusds", "A", (int64_t)getpid(), (uint64_t)wlog_tid(), fn, U(p), size, "host",
		  (int64_t)-1, "host");
}

static void log_free(const char *fn, void *p)
{
	wlog_line("sdusus", "F", (int64_t)getpid(), (uint64_t)wlog_tid(), fn, U(p), "host");
}

static void log_thread(int worker)
{
	wlog_line("sdud", "T", (int64_t)getpid(), (uint64_t)wlog_tid(), (int64_t)worker);
}

static void log_proc(int img)
{
	wlog_line("sddd", "P", (int64_t)getpid(), (int64_t)getppid(), (int64_t)img);
}

static void heap_free(void *p)
{
	wlog_lock();
	log_free("free", p);
	free(p);
	wlog_unlock();
}

/*
 * One of each heap allocator, sizes 33000 + 100 * k + i (calloc: twice
 * that); all freed but the last block, which is returned.
 */
static void *do_heap(unsigned k)
{
	size_t b = 33000 + 100 * (size_t)k;
	void *p1, *p2, *p3, *p4 = NULL, *p5;

	wlog_lock();
	p1 = malloc(b + 1);
	log_alloc("malloc", p1, b + 1);
	p2 = calloc(2, b + 2);
	log_alloc("calloc", p2, 2 * (b + 2));
	log_free("realloc", p1);
	p3 = realloc(p1, b + 3);
	log_alloc("realloc", p3, b + 3);
	if (posix_memalign(&p4, 64, b + 4) != 0)
		abort();
	log_alloc("posix_memalign", p4, b + 4);
	p5 = aligned_alloc(128, b + 5);
	log_alloc("aligned_alloc", p5, b + 5);
	wlog_unlock();
	heap_free(p2);
	heap_free(p3);
	heap_free(p4);
	return p5;
}

static void *worker(void *arg)
{
	unsigned k = (unsigned)(uintptr_t)arg;

	log_thread(1);
	if (cudaSetDevice((int)k % 4) != 0)
		abort();
	if (k % 2)
		wl_cuda_ptsz(k);
	else
		wl_cuda_plain(k);
	return do_heap(k);
}

static void run_workers(unsigned first)
{
	pthread_t t[NWORKERS];
	void *left[NWORKERS];

	for (unsigned i = 0; i < NWORKERS; i++)
		if (pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(first + i)) != 0)
			abort();
	for (unsigned i = 0; i < NWORKERS; i++)
		if (pthread_join(t[i], &left[i]) != 0)
			abort();
	/* Blocks allocated on the workers, freed here: free_tid is main's. */
	for (unsigned i = 0; i < NWORKERS; i++)
		if (i != 1)
			heap_free(left[i]);
}

static int wait_child(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static int mode_trace(const char *self)
{
	pid_t a, b;

	log_proc(0);
	log_thread(0);
	wl_cuda_plain(0);
	wl_cuda_failures();
	heap_free(do_heap(0));
	run_workers(1);

	a = fork();
	if (a < 0)
		abort();
	if (a == 0) {
		/* A traced process of its own, parent recorded. */
		log_proc(0);
		log_thread(0);
		if (cudaSetDevice(2) != 0)
			abort();
		wl_cuda_ptsz(10);
		heap_free(do_heap(10));
		exit(0);
	}
	if (wait_child(a) != 0)
		return 1;

	b = fork();
	if (b < 0)
		abort();
	if (b == 0) {
		execl(self, self, "exec-child", (char *)NULL);
		_exit(127);
	}
	return wait_child(b) == 0 ? 0 : 1;
}

static int mode_exec_child(void)
{
	log_proc(1);
	log_thread(0);
	wl_cuda_plain(20);
	heap_free(do_heap(20));
	run_workers(21);
	return 0;
}

static int mode_simple(unsigned n, unsigned long long size, const char *exit_how)
{
	wlog_puts(1, "wl: line one on stdout\n");
	wlog_puts(2, "wl: a line on stderr\n");
	log_proc(0);
	log_thread(0);
	wl_cuda_mallocs(n, size);
	wlog_puts(1, "wl: line two on stdout\n");
	if (!strncmp(exit_how, "sig", 3)) {
		signal(atoi(exit_how + 3), SIG_DFL);
		raise(atoi(exit_how + 3));
		return 99;
	}
	return atoi(exit_how);
}

struct heap_loop {
	unsigned n;
	size_t size;
	int keep;
};

static void *heap_loop(void *arg)
{
	struct heap_loop *h = arg;

	log_thread(1);
	for (unsigned i = 0; i < h->n; i++) {
		void *p = malloc(h->size);

		if (!p)
			abort();
		if (!h->keep)
			free(p);
	}
	return NULL;
}

static int mode_heap_loop(unsigned n, size_t size, int keep)
{
	struct heap_loop h = { n, size, keep };
	pthread_t t;

	log_proc(0);
	if (pthread_create(&t, NULL, heap_loop, &h) != 0 || pthread_join(t, NULL) != 0)
		abort();
	return 0;
}

static int mode_selfkill(void)
{
	log_proc(0);
	log_thread(0);
	wl_cuda_plain(30);
	heap_free(do_heap(30));
	run_workers(31);
	raise(SIGKILL);
	return 1;
}

static int mode_block(void)
{
	char c;

	log_proc(0);
	log_thread(0);
	wl_cuda_plain(40);
	heap_free(do_heap(40));
	run_workers(41);
	wlog_puts(1, "ready\n");
	while (read(0, &c, 1) > 0)
		;
	wl_cuda_mallocs(2, 4096);
	wlog_puts(1, "done\n");
	return 0;
}

static int mode_long(unsigned n)
{
	log_proc(0);
	log_thread(0);
	for (unsigned i = 0; i < n; i++)
		wl_cuda_plain(i % 64);
	wlog_puts(1, "done\n");
	return 3;
}

static int mode_flood(unsigned n, unsigned burst)
{
	struct timespec pause = { 0, 20000000 };

	log_proc(0);
	log_thread(0);
	for (unsigned i = 0; i < n; i++) {
		for (unsigned j = 0; j < burst; j++) {
			void *p = malloc(64);

			if (!p)
				abort();
			free(p);
		}
		wl_cuda_mallocs(1, 4096 + i);
		nanosleep(&pause, NULL);
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	wlog_open();
	if (!strcmp(mode, "trace"))
		return mode_trace(argv[0]);
	if (!strcmp(mode, "exec-child"))
		return mode_exec_child();
	if (!strcmp(mode, "simple") && argc == 5)
		return mode_simple((unsigned)atoi(argv[2]), strtoull(argv[3], NULL, 10), argv[4]);
	if (!strcmp(mode, "sample") && argc == 4)
		return mode_heap_loop((unsigned)atoi(argv[2]), strtoull(argv[3], NULL, 10), 0);
	if (!strcmp(mode, "burst") && argc == 4)
		return mode_heap_loop((unsigned)atoi(argv[2]), strtoull(argv[3], NULL, 10), 1);
	if (!strcmp(mode, "selfkill"))
		return mode_selfkill();
	if (!strcmp(mode, "block"))
		return mode_block();
	if (!strcmp(mode, "long") && argc == 3)
		return mode_long((unsigned)atoi(argv[2]));
	if (!strcmp(mode, "flood") && argc == 4)
		return mode_flood((unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]));
	wlog_puts(2, "usage: wl trace|simple N SIZE EXIT|sample N SIZE|burst N SIZE|selfkill|block|long N|flood N BURST\n");
	return 2;
}
