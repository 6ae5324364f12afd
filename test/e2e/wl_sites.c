/*
 * wl_sites: call sites with planted differences between two runs, for the
 * sites section of `shimmer compare` (t_compare_sites.sh).  Built -O0 with
 * frame pointers against the fake CUDA runtime, like leaky.
 *
 *   wl_sites a|b
 *
 * In order, with no other allocation of its own:
 *
 *  1. same_held: 2 host blocks kept to the end (live at the host peak);
 *     run b only: b_only, one large block kept (at the peak too: a new
 *     site at the peak; large enough that a sampled run records it);
 *     held_longer: one block, freed before the peak in run a, after it in
 *     run b: a site whose bytes at the peak alone differ;
 *  2. peak_hold: PEAK_N host blocks of SZ_PEAK held together, then freed:
 *     the host heap's peak is the instant the last one is made (everything
 *     later together is far smaller); run b holds one more;
 *  3. grow: GROW_N blocks kept to the end; run b makes twice as many;
 *  4. drift: DRIFT_SITES sites on their own lines, each 2 blocks made and
 *     freed at once; run b makes 3 at each: more sites differ than the
 *     table shows;
 *  5. same_temp: 5 blocks made and freed, in both runs alike;
 *  6. wrap: one malloc line behind a wrapper, called from wrap_same (twice
 *     in both runs) and wrap_grow (once; run b three times): one site,
 *     which `--callers 1` splits by caller;
 *  7. run a only: a_only, one large block kept;
 *  8. cudaMalloc in device(): 2 blocks kept (run b 3), one kept in both
 *     runs, then one made and freed: the device's peak is the instant that
 *     last one is made.
 *
 * The truth is its own bookkeeping: per call site, logged at the end with
 * write(2) (wlog.h),
 *   S,pid,func,line,caller,caller_line,memory,count,bytes,at_peak,live
 * (caller: the wrapper's caller, empty for the others; memory: host or
 * cuda:0; at_peak: its bytes live at the instant its memory peaked, by
 * construction above; live: its bytes never freed).  With another
 * argument, it prints it and exits without allocating.
 */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wlog.h"

#define PEAK_N 3
#define SZ_PEAK ((4u << 20) + 11u)
#define SZ_HELD 6007u
#define GROW_N 4
#define SZ_GROW 5003u
#define DRIFT_SITES 12
#define SZ_DRIFT 1000u
#define SZ_TEMP 777u
#define SZ_WRAP 3001u
#define SZ_LONGER 2003u
#define SZ_A_ONLY ((512u << 10) + 9u)
#define SZ_B_ONLY ((1u << 20) + 7u)
#define SZ_DEV ((3u << 20) + 1u)
#define SZ_DEV_SAME ((1u << 20) + 5u)
#define SZ_DEV_TEMP ((2u << 20) + 3u)

struct site {
	const char *func, *caller, *memory;
	int line, caller_line;
	uint64_t count, bytes, at_peak, live;
};

static struct site sites[64];
static int nsites;
static struct site *last; /* the site of the latest allocation */

static void die(const char *what)
{
	wlog_puts(2, "wl_sites: ");
	wlog_puts(2, what);
	wlog_puts(2, " failed\n");
	exit(1);
}

/* The site of (func, line, caller, caller_line), made on first use. */
static struct site *site(const char *func, int line, const char *caller, int caller_line,
			 const char *memory)
{
	for (int i = 0; i < nsites; i++)
		if (sites[i].func == func && sites[i].line == line &&
		    sites[i].caller == caller && sites[i].caller_line == caller_line)
			return &sites[i];
	if (nsites == (int)(sizeof(sites) / sizeof(sites[0])))
		die("site table");
	sites[nsites] = (struct site){ func, caller, memory, line, caller_line, 0, 0, 0, 0 };
	return &sites[nsites++];
}

/* Counts block p of n bytes to s (live until gave()). */
static void *took(struct site *s, void *p, size_t n)
{
	if (!p)
		die("malloc");
	memset(p, 0x5a, n < 64 ? n : 64);
	s->count++;
	s->bytes += n;
	s->live += n;
	last = s;
	return p;
}

static void gave(struct site *s, size_t n)
{
	s->live -= n;
}

/* The memory peaks now: each of its sites holds what is live. */
static void peaked(const char *memory)
{
	for (int i = 0; i < nsites; i++)
		if (strcmp(sites[i].memory, memory) == 0)
			sites[i].at_peak = sites[i].live;
}

#define HERE(memory) site(__func__, __LINE__, NULL, 0, memory)

static void *volatile keep;

static void same_held(void)
{
	for (int i = 0; i < 2; i++)
		keep = took(HERE("host"), malloc(SZ_HELD), SZ_HELD);
}

static void *longer;
static struct site *longer_site;

static void held_longer(void)
{
	longer = took(HERE("host"), malloc(SZ_LONGER), SZ_LONGER);
	longer_site = last;
}

static void release_longer(void)
{
	free(longer);
	gave(longer_site, SZ_LONGER);
}

static void peak_hold(int b)
{
	void *p[PEAK_N + 1];
	int n = PEAK_N + b;

	for (int i = 0; i < n; i++)
		p[i] = took(HERE("host"), malloc(SZ_PEAK), SZ_PEAK);
	peaked("host");
	for (int i = 0; i < n; i++) {
		free(p[i]);
		gave(last, SZ_PEAK);
	}
}

static void grow(int b)
{
	for (int i = 0; i < GROW_N * (1 + b); i++)
		keep = took(HERE("host"), malloc(SZ_GROW), SZ_GROW);
}

/* One drift site: a block of SZ_DRIFT + 64 * k made and freed. */
#define DRIFT(k)                                                                                 \
	do {                                                                                     \
		free(took(site(__func__, __LINE__, NULL, 0, "host"), malloc(SZ_DRIFT + 64 * (k)), \
			  SZ_DRIFT + 64 * (k)));                                                 \
		gave(last, SZ_DRIFT + 64 * (k));                                                 \
	} while (0)

static void drift(int b)
{
	for (int r = 0; r < 2 + b; r++) {
		DRIFT(0);
		DRIFT(1);
		DRIFT(2);
		DRIFT(3);
		DRIFT(4);
		DRIFT(5);
		DRIFT(6);
		DRIFT(7);
		DRIFT(8);
		DRIFT(9);
		DRIFT(10);
		DRIFT(11);
	}
}

static void same_temp(void)
{
	for (int i = 0; i < 5; i++) {
		free(took(HERE("host"), malloc(SZ_TEMP), SZ_TEMP));
		gave(last, SZ_TEMP);
	}
}

static void *wrap(size_t n, const char *caller, int caller_line)
{
	return took(site(__func__, __LINE__, caller, caller_line, "host"), malloc(n), n);
}

static void wrap_same(void)
{
	for (int i = 0; i < 2; i++)
		keep = wrap(SZ_WRAP, __func__, __LINE__);
}

static void wrap_grow(int b)
{
	for (int i = 0; i < 1 + 2 * b; i++)
		keep = wrap(SZ_WRAP, __func__, __LINE__);
}

static void a_only(void)
{
	keep = took(HERE("host"), malloc(SZ_A_ONLY), SZ_A_ONLY);
}

static void b_only(void)
{
	keep = took(HERE("host"), malloc(SZ_B_ONLY), SZ_B_ONLY);
}

static void *dev(struct site *s, int err, void *p, size_t n)
{
	if (err)
		die("cudaMalloc");
	s->count++;
	s->bytes += n;
	s->live += n;
	last = s;
	return p;
}

static void device(int b)
{
	void *p = NULL;

	for (int i = 0; i < 2 + b; i++) {
		int err = cudaMalloc(&p, SZ_DEV); dev(HERE("cuda:0"), err, p, SZ_DEV);
	}
	{
		int err = cudaMalloc(&p, SZ_DEV_SAME); dev(HERE("cuda:0"), err, p, SZ_DEV_SAME);
	}
	{
		int err = cudaMalloc(&p, SZ_DEV_TEMP); dev(HERE("cuda:0"), err, p, SZ_DEV_TEMP);
	}
	peaked("cuda:0"); /* every device block is live */
	if (cudaFree(p))
		die("cudaFree");
	gave(last, SZ_DEV_TEMP);
}

int main(int argc, char **argv)
{
	int b;

	if (argc != 2 || (strcmp(argv[1], "a") && strcmp(argv[1], "b"))) {
		if (argc > 1)
			wlog_puts(1, argv[1]);
		wlog_puts(1, "\n");
		return 0;
	}
	b = argv[1][0] == 'b';
	wlog_open();
	if (cudaSetDevice(0))
		die("cudaSetDevice");
	same_held();
	if (b)
		b_only();
	held_longer();
	if (!b)
		release_longer();
	peak_hold(b);
	if (b)
		release_longer();
	grow(b);
	drift(b);
	same_temp();
	wrap_same();
	wrap_grow(b);
	if (!b)
		a_only();
	device(b);
	for (int i = 0; i < nsites; i++)
		wlog_line("sdsdsdsuuuu", "S", (int64_t)getpid(), sites[i].func,
			  (int64_t)sites[i].line, sites[i].caller ? sites[i].caller : "",
			  (int64_t)sites[i].caller_line, sites[i].memory, sites[i].count,
			  sites[i].bytes, sites[i].at_peak, sites[i].live);
	return 0;
}
