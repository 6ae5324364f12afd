/*
 * manystacks BITS [kill|keep|churn]: one malloc and free from each of
 * 2^BITS distinct call paths (a chain of BITS calls, each through one of
 * two functions), so that the shim's table of distinct stacks (49,152
 * native stacks) fills when BITS is 16 and does not when it is 15
 * (t_stacks.sh); with kill, it ends by SIGKILL, its exit handlers never
 * run; with keep, nothing is freed and each block is 1 KiB (every block
 * is live at the peak, the end: a growth far above the leak rule's 1 MiB
 * a second, under ThreadSanitizer too); with churn, main() first makes
 * CHURN malloc(16)+free pairs from one call site (heap churn at millions
 * a second, its stack stored before the table fills).  Built -O0: every
 * call keeps its frame and its own return address.
 *
 * manystacks BITS launch CUDART: kernels through the CUDA runtime CUDART
 * (a path, dlopened into the global scope, so that the shim's hooks come
 * first, as a program linked with it has them): 4 launches (grid 100 to
 * 103) from before() ahead of the paths, whose stack is stored, and 12
 * (grid 200 to 211) from after() once they filled the table, whose
 * captures it refuses (at 16 bits).
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void zero(unsigned bits, int k);
static void one(unsigned bits, int k);

static int keep;

#define CHURN (1 << 20)

static void leaf(void)
{
	void *volatile p = malloc(keep ? 1024 : 24);

	if (!keep)
		free(p);
}

/* Each level one frame, zero()'s or one()'s by the next bit (inlined,
 * even at -O0, so that a level is not two frames). */
static inline __attribute__((always_inline)) void next(unsigned bits, int k)
{
	if (k == 0)
		leaf();
	else if (bits & 1)
		one(bits >> 1, k - 1);
	else
		zero(bits >> 1, k - 1);
}

static void zero(unsigned bits, int k)
{
	next(bits, k);
}

static void one(unsigned bits, int k)
{
	next(bits, k);
}

/* The runtime's cudaLaunchKernel, without its headers. */
struct dim3 {
	unsigned x, y, z;
};
typedef int (*launch_fn)(const void *, struct dim3, struct dim3, void **, size_t, void *);

static launch_fn launch;

static void launch_one(unsigned gx)
{
	if (launch((const void *)0x1000, (struct dim3){ gx, 1, 1 }, (struct dim3){ 32, 1, 1 },
		   NULL, 0, NULL) != 0) {
		fprintf(stderr, "manystacks: cudaLaunchKernel failed\n");
		exit(1);
	}
}

static void before(void)
{
	for (unsigned i = 0; i < 4; i++)
		launch_one(100 + i);
}

static void after(void)
{
	for (unsigned i = 0; i < 12; i++)
		launch_one(200 + i);
}

int main(int argc, char **argv)
{
	int k = argc > 1 ? atoi(argv[1]) : 0;
	int gpu = argc == 4 && !strcmp(argv[2], "launch");

	if (k < 1 || k > 20 || (argc > 2 && !gpu && strcmp(argv[2], "kill") &&
				strcmp(argv[2], "keep") && strcmp(argv[2], "churn"))) {
		fprintf(stderr, "usage: manystacks BITS (1..20) [kill|keep|churn|launch CUDART]\n");
		return 2;
	}
	if (gpu) {
		if (!dlopen(argv[3], RTLD_NOW | RTLD_GLOBAL) ||
		    !(launch = (launch_fn)dlsym(RTLD_DEFAULT, "cudaLaunchKernel"))) {
			fprintf(stderr, "manystacks: %s\n", dlerror());
			return 1;
		}
		before();
	}
	keep = argc > 2 && !strcmp(argv[2], "keep");
	if (argc > 2 && !strcmp(argv[2], "churn"))
		for (int i = 0; i < CHURN; i++) {
			void *volatile p = malloc(16);

			free(p);
		}
	for (unsigned b = 0; b < 1u << k; b++)
		next(b, k);
	if (gpu)
		after();
	if (argc > 2 && !strcmp(argv[2], "kill"))
		raise(SIGKILL);
	return 0;
}
