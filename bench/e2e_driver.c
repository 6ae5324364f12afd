/*
 * e2e_driver: runs one private shimmerd and CLIENTS traced copies of a
 * program against it, and reports the wall time and the collector's own
 * CPU time, so bench/run-bench can turn the rows stored into events per
 * second of wall time and per second of collector CPU.
 *
 *   e2e_driver -d SHIMMERD -s SOCKET -b DB -l LIBSHIMMER [-c CLIENTS] -- PROG [ARGS...]
 *
 * The collector is started with --ready-fd on a pipe; the clock starts once
 * it reports ready.  Clients get LD_PRELOAD, SHIMMER_SOCKET, and whatever
 * SHIMMER_* variables the caller exported (SHIMMER_MALLOC, SHIMMER_LOSSLESS).
 * When every client has exited the collector gets SIGTERM, drains and
 * exits; the clock stops when it has been reaped, so the wall time covers
 * everything up to the last row committed.  The collector's CPU time is its
 * rusage at exit less what it had used when it reported ready (start-up and
 * schema creation are not part of the run).
 *
 * Output, one line on stdout:
 *   e2e clients=N wall_s=W clients_s=C collector_cpu_s=U collector_user_s=.. collector_sys_s=..
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_CLIENTS 256

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* utime + stime of a live process, in seconds, from /proc/PID/stat. */
static double proc_cpu_s(pid_t pid)
{
	char path[64], buf[4096], *p;
	unsigned long long ut = 0, st = 0;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* comm may hold spaces */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
			 &ut, &st) != 2)
		return 0;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void usage(void)
{
	fprintf(stderr, "usage: e2e_driver -d SHIMMERD -s SOCKET -b DB -l LIBSHIMMER "
			"[-c CLIENTS] -- PROG [ARGS...]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *shimmerd = NULL, *sock = NULL, *db = NULL, *lib = NULL;
	int clients = 8, c, pfd[2], status;
	pid_t dpid, kids[MAX_CLIENTS];
	struct pollfd pl;
	struct rusage ru;
	double cpu0, t0, t_clients, t1, user, sys;
	char fdbuf[16], byte;

	while ((c = getopt(argc, argv, "d:s:b:l:c:")) != -1) {
		switch (c) {
		case 'd': shimmerd = optarg; break;
		case 's': sock = optarg; break;
		case 'b': db = optarg; break;
		case 'l': lib = optarg; break;
		case 'c': clients = atoi(optarg); break;
		default: usage();
		}
	}
	if (!shimmerd || !sock || !db || !lib || optind >= argc || clients < 1 ||
	    clients > MAX_CLIENTS)
		usage();

	if (pipe(pfd) < 0) {
		perror("e2e_driver: pipe");
		return 1;
	}
	dpid = fork();
	if (dpid < 0) {
		perror("e2e_driver: fork");
		return 1;
	}
	if (dpid == 0) {
		close(pfd[0]);
		snprintf(fdbuf, sizeof(fdbuf), "%d", pfd[1]);
		execl(shimmerd, shimmerd, "--foreground", "--socket", sock, "--db", db,
		      "--ready-fd", fdbuf, (char *)NULL);
		perror("e2e_driver: exec shimmerd");
		_exit(127);
	}
	close(pfd[1]);
	pl.fd = pfd[0];
	pl.events = POLLIN;
	if (poll(&pl, 1, 20000) != 1 || read(pfd[0], &byte, 1) != 1) {
		fprintf(stderr, "e2e_driver: shimmerd did not report ready\n");
		kill(dpid, SIGTERM);
		waitpid(dpid, NULL, 0);
		return 1;
	}
	close(pfd[0]);
	cpu0 = proc_cpu_s(dpid);

	t0 = now_s();
	for (int i = 0; i < clients; i++) {
		kids[i] = fork();
		if (kids[i] < 0) {
			perror("e2e_driver: fork");
			return 1;
		}
		if (kids[i] == 0) {
			setenv("SHIMMER_SOCKET", sock, 1);
			setenv("LD_PRELOAD", lib, 1);
			execv(argv[optind], argv + optind);
			perror("e2e_driver: exec client");
			_exit(127);
		}
	}
	for (int i = 0; i < clients; i++) {
		if (waitpid(kids[i], &status, 0) < 0 ||
		    !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "e2e_driver: client %d failed (status %d)\n",
				i, status);
			kill(dpid, SIGTERM);
			waitpid(dpid, NULL, 0);
			return 1;
		}
	}
	t_clients = now_s();
	kill(dpid, SIGTERM);
	if (wait4(dpid, &status, 0, &ru) < 0) {
		perror("e2e_driver: wait4");
		return 1;
	}
	t1 = now_s();
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "e2e_driver: shimmerd exited badly (status %d)\n", status);
		return 1;
	}
	user = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6;
	sys = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	printf("e2e clients=%d wall_s=%.3f clients_s=%.3f collector_cpu_s=%.3f "
	       "collector_user_s=%.3f collector_sys_s=%.3f collector_startup_cpu_s=%.3f\n",
	       clients, t1 - t0, t_clients - t0, user + sys - cpu0, user, sys, cpu0);
	return 0;
}
