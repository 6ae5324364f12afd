/*
 * wl_hostile: names that a hostile user controls, with control characters
 * in them, for the readers' escaping (t_hostile_names.sh).  The test gives
 * it hostile arguments and runs it from a hostile path (its executable's
 * path, argv and main thread's name); it adds:
 *
 *  - a thread named with control characters (PR_SET_NAME before its first
 *    traced call: the collector keeps the name it had then);
 *  - on that thread, an NVTX push range with a hostile name, and inside it
 *    a launch of a kernel registered under a hostile name (the fake
 *    runtime hands it to the fake CUPTI as the kernel's name);
 *  - a device block never freed, allocated in hostile_site(), whose
 *    source file, as the debug information names it (#line below), holds
 *    control characters: its call site in leaks, peak and allocations;
 *  - a host block never freed, allocated by hostile_sym, a function in
 *    assembly (no debug information: it is named by its symbol), which the
 *    test renames to a hostile name (objcopy --redefine-sym); its caller
 *    is hostile_site().
 *
 * WL_LINGER_MS=M: sleep M ms before returning (for `shimmer ctl status`).
 * Built -O0 with frame pointers and debug information against the fake
 * CUDA runtime.  No stdio.
 */
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>

#include "test/fake_cudart/fake_gpu.h"
#include "wlog.h"

/* ESC ] 0 ; x BEL (a terminal title), CR, LF, TAB, C1 CSI as UTF-8 (C2 9B),
 * a byte that is not UTF-8, ';' (the folded format's separator) and a
 * space-then-digits ending (the folded format's count). */
#define HOSTILE "\033]0;x\007|\r|\n|\t|\302\233|\377|;|\177| 42"

/* 15 bytes at most, as the kernel keeps a thread's name. */
#define THREAD_NAME "t\033]0;\007\r\n\t\302\233\377;"

static void k_hostile(void)
{
}

/* void *hostile_sym(size_t n): malloc(n) in a frame of its own, with the
 * unwind information a stack walk needs, outside the compile unit's
 * ranges (so that nothing but its symbol names it). */
__asm__(".pushsection .text.hostile,\"ax\",@progbits\n"
	".globl hostile_sym\n"
	".type hostile_sym,@function\n"
	"hostile_sym:\n"
	".cfi_startproc\n"
	"push %rbp\n"
	".cfi_def_cfa_offset 16\n"
	".cfi_offset %rbp,-16\n"
	"mov %rsp,%rbp\n"
	".cfi_def_cfa_register %rbp\n"
	"call malloc@PLT\n"
	"pop %rbp\n"
	".cfi_def_cfa %rsp,8\n"
	"ret\n"
	".cfi_endproc\n"
	".size hostile_sym,.-hostile_sym\n"
	".popsection\n");
void *hostile_sym(size_t n);

static void *worker(void *arg);
void *hostile_site(size_t n);

int main(void)
{
	const char *linger = getenv("WL_LINGER_MS");
	pthread_t t;

	wlog_open();
	if (fake_cuda_register_kernel((const void *)(uintptr_t)k_hostile, "kern" HOSTILE))
		abort();
	if (pthread_create(&t, NULL, worker, NULL) != 0 || pthread_join(t, NULL) != 0)
		abort();
	if (linger) {
		unsigned ms = (unsigned)atoi(linger);
		struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

		nanosleep(&ts, NULL);
	}
	return 0;
}

static void *worker(void *arg)
{
	(void)arg;
	/* Before any traced call on this thread. */
	prctl(PR_SET_NAME, THREAD_NAME);
	nvtxRangePushA("range" HOSTILE);
	if (cudaLaunchKernel((const void *)(uintptr_t)k_hostile, (dim3){ 1, 1, 1 },
			     (dim3){ 32, 1, 1 }, NULL, 0, NULL) != cudaSuccess)
		abort();
	if (!hostile_site(1u << 20))
		abort();
	nvtxRangePop();
	return NULL;
}

/* The call site: its file's name is hostile in the debug information. */
#line 1 "file\033]0;x\007|\r|\n|\t|\302\233|\377|;| 42.c"
__attribute__((noinline)) void *hostile_site(size_t n)
{
	void *dev = NULL;

	if (cudaMalloc(&dev, n) != cudaSuccess)
		return NULL;
	return hostile_sym(n);
}
