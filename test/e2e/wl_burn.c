/*
 * wl_burn: short-lived children that burn a known amount of CPU and end at
 * once, reaped by their parent as soon as they end: the processes whose
 * CPU time the collector's readings of /proc (every 100 ms) miss the end
 * of (t_cpuexit.sh).  A pool worker, a torchrun worker.
 *
 *   wl_burn N MS HOW   N children one after the other; each burns MS ms of
 *                      CPU (its CPU clock, CLOCK_PROCESS_CPUTIME_ID), half
 *                      on a thread of its own that ends first, half on its
 *                      main thread, and ends as HOW says: "exit" (exit(0)),
 *                      "_exit" (_exit(0)), "kill" (SIGKILL on itself: it
 *                      cannot report), "mix" (child k: exit, _exit, kill,
 *                      in turn)
 *
 * Log lines (wlog.h):
 *   B,pid,how,cpu_ns       the child's CPU clock just before it ends
 *   R,pid,how,cpu_ns       its CPU time as its parent's wait4() read it
 *                          (ru_utime + ru_stime, at microsecond resolution):
 *                          the truth, whatever ran after the B line
 *
 * No stdio and no heap calls of its own.
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "wlog.h"

#define MS 1000000ll

static int64_t clock_of(clockid_t id)
{
	struct timespec t;

	clock_gettime(id, &t);
	return (int64_t)t.tv_sec * 1000000000ll + t.tv_nsec;
}

/* Spins until the calling thread's CPU clock rose by ns. */
static void burn(int64_t ns)
{
	int64_t end = clock_of(CLOCK_THREAD_CPUTIME_ID) + ns;
	volatile uint64_t x = 0;

	while (clock_of(CLOCK_THREAD_CPUTIME_ID) < end)
		for (int i = 0; i < 10000; i++)
			x += (uint64_t)i;
}

static void *burner(void *arg)
{
	burn(*(const int64_t *)arg);
	return NULL;
}

static void child(int64_t ns, const char *how)
{
	int64_t half = ns / 2;
	pthread_t t;

	if (pthread_create(&t, NULL, burner, &half) != 0 || pthread_join(t, NULL) != 0)
		_exit(90);
	burn(ns - half);
	wlog_line("sdsd", "B", (int64_t)getpid(), how, clock_of(CLOCK_PROCESS_CPUTIME_ID));
	if (!strcmp(how, "kill"))
		kill(getpid(), SIGKILL);
	if (!strcmp(how, "_exit"))
		_exit(0);
	exit(0);
}

int main(int argc, char **argv)
{
	static const char *const mix[] = { "exit", "_exit", "kill" };
	int n = argc == 4 ? atoi(argv[1]) : 0;
	int64_t ns = argc == 4 ? atoll(argv[2]) * MS : 0;

	wlog_open();
	if (n <= 0 || ns <= 0) {
		wlog_puts(2, "usage: wl_burn N MS exit|_exit|kill|mix\n");
		return 2;
	}
	for (int k = 0; k < n; k++) {
		const char *how = !strcmp(argv[3], "mix") ? mix[k % 3] : argv[3];
		struct rusage ru;
		pid_t pid = fork();
		int st;

		if (pid < 0)
			return 1;
		if (pid == 0)
			child(ns, how);
		if (wait4(pid, &st, 0, &ru) != pid)
			return 1;
		wlog_line("sdsd", "R", (int64_t)pid, how,
			  ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ll +
				  ((int64_t)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ll);
	}
	return 0;
}
