/*
 * leaky: planted leaks, a known peak and temporary blocks, at known call
 * sites, for the leak, peak and temporary reports (t_leaks.sh) and the
 * comparison with heaptrack (t_heaptrack.sh).  Built -O0 with frame
 * pointers against the fake CUDA runtime.
 *
 * In order, with no other allocation of its own between the phases:
 *
 *  1. the peak: it holds PEAK_N host blocks of SZ_PEAK (here), one of
 *     SZ_LIB_PEAK (leaky_lib.c) and PEAK_N cudaMalloc blocks of SZ_PEAK_DEV,
 *     logged as K lines, then frees them all.  They are far larger than
 *     everything the program allocates later together, so the process's
 *     peak (host heap and device 0) is this instant, with exactly these of
 *     the program's own blocks live.
 *  2. temporaries: TEMP_N times malloc(SZ_TEMP) freed at once (X lines).
 *  3. blocks kept for a while, with other calls in between, then freed:
 *     they are neither leaks nor temporaries, and are not logged.
 *  4. the leaks (L lines), one call site per function: malloc in a loop,
 *     calloc, realloc, posix_memalign, an inlined malloc (leaky.h), a
 *     malloc in leaky_lib.c; cudaMalloc here, cudaMallocHost and
 *     cudaMallocManaged in leaky_lib.c.  Never freed.
 *
 * Each log line is written with write(2) (wlog.h) and is the test's
 * independent truth: function, file (basename), line of the allocating
 * call (__LINE__ on the same line), bytes, space.  With an argument, the
 * program writes it to stdout and exits 0 without allocating anything
 * (the tests use it to check the binary runs).
 */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "leaky.h"
#include "wlog.h"

#define PEAK_N 4
#define SZ_PEAK ((4u << 20) + 11u)
#define SZ_PEAK_DEV ((64u << 20) + 17u)
#define TEMP_N 40
#define SZ_TEMP 777u
#define KEEP_N 5
#define SZ_KEEP 9001u
#define SZ_KEEP_DEV 9002u
#define LOOP_N 3
#define SZ_LOOP 4099u
#define CALLOC_N 7u
#define CALLOC_SZ 313u
#define SZ_REALLOC_FROM 100u
#define SZ_REALLOC 5003u
#define MEMALIGN_N 2
#define SZ_MEMALIGN 6007u
#define CUDA_N 3
#define SZ_CUDA ((3u << 20) + 1u)

void note(const char *kind, const char *func, const char *file, int line, uint64_t bytes,
	  const char *space, const char *fn)
{
	const char *base = strrchr(file, '/');

	wlog_line("sdssduss", kind, (int64_t)getpid(), func, base ? base + 1 : file,
		  (int64_t)line, bytes, space, fn);
}

void *must(void *p)
{
	if (!p) {
		wlog_puts(2, "leaky: allocation failed\n");
		exit(1);
	}
	return p;
}

void must_ok(int err)
{
	if (err) {
		wlog_puts(2, "leaky: allocation failed\n");
		exit(1);
	}
}

/* Touches a block so that no compiler removes the allocation. */
static void touch(void *p, size_t n)
{
	memset(p, 0x5a, n);
}

static void peak_hold(void)
{
	void *host[PEAK_N], *dev[PEAK_N], *lib;

	for (int i = 0; i < PEAK_N; i++) {
		host[i] = must(malloc(SZ_PEAK)); NOTE("K", SZ_PEAK, "host", "malloc");
		touch(host[i], 64);
	}
	lib = lib_peak_block();
	for (int i = 0; i < PEAK_N; i++) {
		must_ok(cudaMalloc(&dev[i], SZ_PEAK_DEV)); NOTE("K", SZ_PEAK_DEV, "device", "cudaMalloc");
	}
	for (int i = 0; i < PEAK_N; i++) {
		free(host[i]);
		must_ok(cudaFree(dev[i]));
	}
	free(lib);
}

static void temporaries(void)
{
	for (int i = 0; i < TEMP_N; i++) {
		char *p = must(malloc(SZ_TEMP)); NOTE("X", SZ_TEMP, "host", "malloc");

		touch(p, SZ_TEMP);
		free(p);
	}
}

static void kept_then_freed(void)
{
	void *host[KEEP_N], *dev[2];

	for (int i = 0; i < KEEP_N; i++)
		host[i] = must(malloc(SZ_KEEP));
	must_ok(cudaMalloc(&dev[0], SZ_KEEP_DEV));
	must_ok(cudaMallocHost(&dev[1], SZ_KEEP_DEV));
	for (int i = 0; i < KEEP_N; i++)
		touch(host[i], SZ_KEEP);
	for (int i = KEEP_N - 1; i >= 0; i--)
		free(host[i]);
	must_ok(cudaFree(dev[0]));
	must_ok(cudaFreeHost(dev[1]));
}

static void leak_malloc_loop(void)
{
	for (int i = 0; i < LOOP_N; i++) {
		void *p = must(malloc(SZ_LOOP)); NOTE("L", SZ_LOOP, "host", "malloc");

		touch(p, SZ_LOOP);
	}
}

static void leak_calloc(void)
{
	must(calloc(CALLOC_N, CALLOC_SZ)); NOTE("L", CALLOC_N * CALLOC_SZ, "host", "calloc");
}

static void leak_realloc(void)
{
	char *p = must(malloc(SZ_REALLOC_FROM));

	touch(p, SZ_REALLOC_FROM);
	p = must(realloc(p, SZ_REALLOC)); NOTE("L", SZ_REALLOC, "host", "realloc");
	touch(p, SZ_REALLOC);
}

static void leak_memalign(void)
{
	for (int i = 0; i < MEMALIGN_N; i++) {
		void *p = NULL;

		must_ok(posix_memalign(&p, 64, SZ_MEMALIGN)); NOTE("L", SZ_MEMALIGN, "host", "posix_memalign");
		touch(p, SZ_MEMALIGN);
	}
}

static void leak_cuda_malloc(void)
{
	for (int i = 0; i < CUDA_N; i++) {
		void *d = NULL;

		must_ok(cudaMalloc(&d, SZ_CUDA)); NOTE("L", SZ_CUDA, "device", "cudaMalloc");
	}
}

int main(int argc, char **argv)
{
	if (argc > 1) {
		wlog_puts(1, argv[1]);
		wlog_puts(1, "\n");
		return 0;
	}
	wlog_open();
	wlog_line("sddd", "P", (int64_t)getpid(), (int64_t)getppid(), (int64_t)0);
	must_ok(cudaSetDevice(0));

	peak_hold();
	temporaries();
	kept_then_freed();

	leak_malloc_loop();
	leak_calloc();
	leak_realloc();
	leak_memalign();
	touch(leak_inline(), SZ_INLINE);
	lib_leak_nested();
	leak_cuda_malloc();
	lib_leak_cuda_host();
	lib_leak_cuda_managed();
	return 0;
}
