/*
 * The workload of the service tests (t_job, t_control): processes of one
 * job, and recording switched on and off in them.  What it does is logged
 * (wlog.h, $WL_LOG) with CLOCK_MONOTONIC times, the clock of the store.
 * Every "op" is one malloc of SIZE bytes (freed at once) and one
 * cudaMemset of SIZE bytes (the fake runtime), so a window's heap and CUDA
 * rows can both be counted against the log.
 *
 *   wl_job member N SIZE DIR [fork|exec]
 *       one process of a job: waits until DIR holds N "ready.*" files (so
 *       the N members run at once), does 10 ops, optionally forks a child
 *       (10 ops) or forks a child that execs `wl_job child SIZE` (10 ops),
 *       and waits for it
 *   wl_job child SIZE               10 ops (the exec'd image)
 *   wl_job launch N MODE ARGS...    forks N - 1 workers, every other one
 *       exec'ing itself as `wl_job MODE ARGS...`, the rest running MODE
 *       in the forked process; the launcher runs MODE too, then waits.
 *       $WLJ_WORKER_ENV (NAME=VALUE) is set in the workers only, as
 *       torchrun sets TORCHELASTIC_RUN_ID
 *   wl_job steps N K SIZE API GAP_MS
 *       N steps, each a range "step" (API: nvtx or shimmer) around K ops,
 *       GAP_MS between steps; logs S,pid,step,t_begin,t_end per step
 *   wl_job phases DIR NPHASES K SIZE
 *       for each phase p: waits for DIR/go.p, does K ops, logs
 *       Q,pid,p,t_begin,t_end, makes DIR/done.p.PID
 *   wl_job busy SECONDS SIZE
 *       batches of 10 ops 2 ms apart for SECONDS (busy, yet leaving CPU
 *       to the collector and the test on a small machine); logs
 *       O,pid,t_first,t_last,n per batch
 *   wl_job alone MS SIZE
 *       a single-threaded program that makes no CUDA call: a malloc and
 *       free of SIZE bytes every millisecond for MS ms (logs H,pid,t per
 *       malloc), then forks a child; each process logs
 *       T,pid,threads,unshare: its thread count from /proc/self/status
 *       and unshare(CLONE_NEWUSER)'s errno (0: it succeeded), which the
 *       kernel refuses with EINVAL to a multi-threaded process
 *
 * Lines: P,pid,ppid,img (img 1: exec'd), and the per-mode lines above.
 */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <fcntl.h>
#include <nvtx3/nvToolsExt.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock_ns.h"
#include "include/shimmer.h"
#include "wlog.h"

static size_t size;
static void *dev;

static uint64_t now(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

static void log_proc(int img)
{
	wlog_line("sddd", "P", (int64_t)getpid(), (int64_t)getppid(), (int64_t)img);
}

static void op(void)
{
	void *p = malloc(size);

	if (!p)
		abort();
	/* The compiler must not pair them away. */
	__asm__ volatile("" : : "r"(p) : "memory");
	free(p);
	if (cudaMemset(dev, 0, size) != cudaSuccess)
		abort();
}

static void setup(void)
{
	if (cudaMalloc(&dev, size) != cudaSuccess)
		abort();
}

static void ops(unsigned k)
{
	for (unsigned i = 0; i < k; i++)
		op();
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts))
		;
}

static int exists(const char *path)
{
	return access(path, F_OK) == 0;
}

static void touch(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);

	if (fd >= 0)
		close(fd);
}

static int count_ready(const char *dir)
{
	char path[4096];
	int n = 0;

	for (int i = 0; i < 64; i++) {
		snprintf(path, sizeof(path), "%s/ready.%d", dir, i);
		n += exists(path);
	}
	return n;
}

static int wait_child(pid_t pid)
{
	int st;

	return waitpid(pid, &st, 0) == pid && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int mode_child(void)
{
	log_proc(1);
	setup();
	ops(10);
	return 0;
}

static int mode_member(const char *self, int n, const char *dir, const char *extra)
{
	char path[4096], sz[32];
	const char *rank = getenv("RANK");
	pid_t c;

	log_proc(0);
	setup();
	snprintf(path, sizeof(path), "%s/ready.%s", dir, rank ? rank : "0");
	touch(path);
	while (count_ready(dir) < n)
		sleep_ms(1);
	ops(10);
	if (!extra)
		return 0;
	c = fork();
	if (c < 0)
		abort();
	if (c == 0) {
		if (!strcmp(extra, "exec")) {
			snprintf(sz, sizeof(sz), "%zu", size);
			execl(self, self, "child", sz, (char *)NULL);
			_exit(127);
		}
		log_proc(0);
		ops(10);
		_exit(0);
	}
	return wait_child(c);
}

static void range_push(const char *api, const char *name)
{
	if (!strcmp(api, "nvtx"))
		nvtxRangePushA(name);
	else
		shimmer_range_push(name);
}

static void range_pop(const char *api)
{
	if (!strcmp(api, "nvtx"))
		nvtxRangePop();
	else
		shimmer_range_pop();
}

static int mode_steps(unsigned n, unsigned k, const char *api, unsigned gap_ms)
{
	log_proc(0);
	setup();
	/* Ranges of other names, around the steps and inside each: they
	 * count for nothing, and the steps are nested one level down. */
	range_push(api, "run");
	for (unsigned s = 1; s <= n; s++) {
		uint64_t t0, t1;

		range_push(api, "step");
		t0 = now();
		range_push(api, "ops");
		ops(k);
		range_pop(api);
		t1 = now();
		range_pop(api);
		wlog_line("sduuu", "S", (int64_t)getpid(), (uint64_t)s, t0, t1);
		if (gap_ms)
			sleep_ms(gap_ms);
	}
	range_pop(api);
	return 0;
}

static int mode_phases(const char *dir, unsigned nphases, unsigned k)
{
	char path[4096];

	log_proc(0);
	setup();
	for (unsigned p = 1; p <= nphases; p++) {
		uint64_t t0, t1;

		snprintf(path, sizeof(path), "%s/go.%u", dir, p);
		while (!exists(path))
			sleep_ms(1);
		t0 = now();
		ops(k);
		t1 = now();
		wlog_line("sduuu", "Q", (int64_t)getpid(), (uint64_t)p, t0, t1);
		snprintf(path, sizeof(path), "%s/done.%u.%d", dir, p, (int)getpid());
		touch(path);
	}
	return 0;
}

static int mode_busy(double seconds)
{
	uint64_t end;

	log_proc(0);
	setup();
	end = now() + (uint64_t)(seconds * 1e9);
	while (now() < end) {
		uint64_t t0 = now(), t1;

		ops(10);
		t1 = now();
		wlog_line("sduuu", "O", (int64_t)getpid(), t0, t1, (uint64_t)10);
		sleep_ms(2);
	}
	return 0;
}

/* T,pid,threads,errno of unshare(CLONE_NEWUSER). */
static void log_alone(void)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "re");
	int64_t threads = -1, err;

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "Threads:", 8))
			threads = strtoll(line + 8, NULL, 10);
	if (f)
		fclose(f);
	err = unshare(CLONE_NEWUSER) ? errno : 0;
	wlog_line("sddd", "T", (int64_t)getpid(), threads, err);
}

static int mode_alone(unsigned ms)
{
	uint64_t end = now() + (uint64_t)ms * 1000000u;
	pid_t kid;
	int st;

	log_proc(0);
	while (now() < end) {
		void *p = malloc(size);

		if (!p)
			abort();
		__asm__ volatile("" : : "r"(p) : "memory");
		wlog_line("sdu", "H", (int64_t)getpid(), now());
		free(p);
		sleep_ms(1);
	}
	kid = fork();
	if (kid < 0)
		abort();
	if (kid == 0) {
		log_proc(0);
		free(malloc(size));
		log_alone();
		_exit(0);
	}
	log_alone();
	return waitpid(kid, &st, 0) == kid && WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : 1;
}

static int run_mode(const char *self, int argc, char **argv);

static int mode_launch(const char *self, int n, int argc, char **argv)
{
	pid_t kids[64];
	int rc = 0;

	for (int i = 1; i < n && i < 64; i++) {
		kids[i] = fork();
		if (kids[i] < 0)
			abort();
		if (kids[i] == 0) {
			const char *e = getenv("WLJ_WORKER_ENV");

			if (e && *e)
				putenv(strdup(e));
			if (i % 2) {
				argv[-1] = (char *)self;
				execv(self, argv - 1);
				_exit(127);
			}
			_exit(run_mode(self, argc, argv));
		}
	}
	rc = run_mode(self, argc, argv);
	for (int i = 1; i < n && i < 64; i++)
		rc |= wait_child(kids[i]) != 0;
	return rc;
}

/* argv[0] is the mode. */
static int run_mode(const char *self, int argc, char **argv)
{
	const char *m = argc > 0 ? argv[0] : "";

	if (!strcmp(m, "child") && argc == 2) {
		size = strtoull(argv[1], NULL, 10);
		return mode_child();
	}
	if (!strcmp(m, "member") && (argc == 4 || argc == 5)) {
		size = strtoull(argv[2], NULL, 10);
		return mode_member(self, atoi(argv[1]), argv[3], argc == 5 ? argv[4] : NULL);
	}
	if (!strcmp(m, "steps") && argc == 6) {
		size = strtoull(argv[3], NULL, 10);
		return mode_steps((unsigned)atoi(argv[1]), (unsigned)atoi(argv[2]), argv[4],
				  (unsigned)atoi(argv[5]));
	}
	if (!strcmp(m, "phases") && argc == 5) {
		size = strtoull(argv[4], NULL, 10);
		return mode_phases(argv[1], (unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]));
	}
	if (!strcmp(m, "busy") && argc == 3) {
		size = strtoull(argv[2], NULL, 10);
		return mode_busy(atof(argv[1]));
	}
	if (!strcmp(m, "alone") && argc == 3) {
		size = strtoull(argv[2], NULL, 10);
		return mode_alone((unsigned)atoi(argv[1]));
	}
	if (!strcmp(m, "launch") && argc >= 3)
		return mode_launch(self, atoi(argv[1]), argc - 2, argv + 2);
	wlog_puts(2, "usage: wl_job member N SIZE DIR [fork|exec] | child SIZE | "
		     "launch N MODE ARGS... | steps N K SIZE nvtx|shimmer GAP_MS | "
		     "phases DIR NPHASES K SIZE | busy SECONDS SIZE | alone MS SIZE\n");
	return 2;
}

int main(int argc, char **argv)
{
	wlog_open();
	return run_mode(argv[0], argc - 1, argv + 1);
}
