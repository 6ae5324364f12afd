/*
 * leakloop: a plain C loop with no ranges, for the leak regression over
 * time (t_leakloop.sh).  Each iteration allocates and frees some working
 * memory and, by MODE:
 *
 *   leak    keeps one SZ_LEAK block (malloc, never freed): the heap grows
 *           by SZ_LEAK bytes an iteration;
 *   churn   frees everything it allocated: the heap stays flat.
 *
 *   leakloop MODE [ITERATIONS] [US] [IDLE_MS]
 *
 * US: a sleep after each iteration; IDLE_MS: idle time (no allocation)
 * before and after the loop, so that the loop is a short part of the
 * process's life, which an evenly spaced time grid got wrong (a step, R^2
 * 0.2 to 0.7: no verdict of growth).  It logs, with write(2)
 * (wlog.h), once:
 *   S,pid,mode,iterations,kept_per_iteration,line
 * which is the test's truth for the leaking call site and its bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wlog.h"

#define SZ_LEAK 4096u
#define SZ_WORK 1000u

static void *volatile keep; /* the compiler must not drop the blocks */

static int line_of_leak;

static void iteration(int leak)
{
	void *work = malloc(SZ_WORK), *kept = NULL;

	if (leak) {
		kept = malloc(SZ_LEAK); line_of_leak = __LINE__;
		memset(kept, 1, SZ_LEAK);
	}
	memset(work, 0, SZ_WORK);
	keep = kept;
	free(work);
}

int main(int argc, char **argv)
{
	int leak, n = argc > 2 ? atoi(argv[2]) : 5000, us = argc > 3 ? atoi(argv[3]) : 0;
	int idle = argc > 4 ? atoi(argv[4]) : 0;

	if (argc < 2 || (strcmp(argv[1], "leak") && strcmp(argv[1], "churn")) || n < 1 || us < 0 ||
	    idle < 0) {
		wlog_puts(2, "usage: leakloop leak|churn [ITERATIONS] [US] [IDLE_MS]\n");
		return 2;
	}
	leak = !strcmp(argv[1], "leak");
	wlog_open();
	usleep((useconds_t)idle * 1000);
	for (int i = 0; i < n; i++) {
		iteration(leak);
		if (us)
			usleep((useconds_t)us);
	}
	usleep((useconds_t)idle * 1000);
	wlog_line("sdsddd", "S", (int64_t)getpid(), argv[1], (int64_t)n,
		  (int64_t)(leak ? SZ_LEAK : 0), (int64_t)line_of_leak);
	return 0;
}
