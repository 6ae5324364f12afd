/*
 * Threads' CPU time from /proc; see cputime.h.
 */
#include "cputime.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cputime_init(struct cputime *c, uint32_t pid)
{
	memset(c, 0, sizeof(*c));
	c->pid = pid;
	c->off = pid == 0;
}

void cputime_free(struct cputime *c)
{
	free(c->v);
	memset(c, 0, sizeof(*c));
	c->off = 1;
}

int cputime_parse_stat(const char *line, uint64_t *cpu_ticks, uint64_t *start_ticks)
{
	/* "pid (comm) state ...": comm may hold spaces and parentheses, so
	 * the fields start after the last ')'. */
	const char *p = strrchr(line, ')');
	unsigned long long v[20];
	int n;

	if (!p)
		return -EINVAL;
	/* fields 3 (state) to 22 (starttime): utime is 14, stime 15 */
	n = sscanf(p + 1, " %*c %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu"
		   " %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
		   &v[6], &v[7], &v[8], &v[9], &v[10], &v[11], &v[12], &v[13], &v[14], &v[15],
		   &v[16], &v[17], &v[18]);
	if (n != 19)
		return -EINVAL;
	*cpu_ticks = v[10] + v[11];
	*start_ticks = v[18];
	return 0;
}

int cputime_parse_schedstat(const char *line, int64_t *run_ns, int64_t *wait_ns)
{
	unsigned long long run, wait;

	if (sscanf(line, "%llu %llu", &run, &wait) != 2 || run > INT64_MAX || wait > INT64_MAX)
		return -EINVAL;
	*run_ns = (int64_t)run;
	*wait_ns = (int64_t)wait;
	return 0;
}

/* The file at path into buf: its length, or -1. */
static ssize_t read_file(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return n;
}

static int read_stat(const char *path, uint64_t *cpu, uint64_t *start)
{
	char buf[1024];

	if (read_file(path, buf, sizeof(buf)) < 0)
		return -1;
	return cputime_parse_stat(buf, cpu, start) ? -1 : 0;
}

static struct cputime_thread *thread_of(struct cputime *c, uint32_t tid)
{
	for (size_t i = 0; i < c->n; i++)
		if (c->v[i].tid == tid)
			return &c->v[i];
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 16;
		struct cputime_thread *v = realloc(c->v, cap * sizeof(*v));

		if (!v)
			return NULL;
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n] = (struct cputime_thread){ .tid = tid, .cpu_ns = -1, .wait_ns = -1 };
	return &c->v[c->n++];
}

/* One thread's times: schedstat's, else stat's (wait unknown). */
static int thread_times(uint32_t pid, unsigned long tid, long tick_ns, int64_t *cpu,
			int64_t *wait)
{
	char path[80], buf[256];
	uint64_t ticks, start;

	snprintf(path, sizeof(path), "/proc/%u/task/%lu/schedstat", pid, tid);
	if (read_file(path, buf, sizeof(buf)) >= 0 && cputime_parse_schedstat(buf, cpu, wait) == 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%u/task/%lu/stat", pid, tid);
	if (read_stat(path, &ticks, &start) < 0)
		return -1;
	*cpu = (int64_t)ticks * tick_ns;
	*wait = -1;
	return 0;
}

int cputime_sample(struct cputime *c, struct store *s, int64_t proc_id, int64_t now_ns)
{
	static long tick_ns;
	char path[64];
	uint64_t cpu, start;
	struct dirent *d;
	DIR *dir;
	int err = 0;

	if (c->off)
		return 0;
	if (!tick_ns) {
		long hz = sysconf(_SC_CLK_TCK);

		tick_ns = hz > 0 ? 1000000000L / hz : 10000000L;
	}
	snprintf(path, sizeof(path), "/proc/%u/stat", c->pid);
	if (read_stat(path, &cpu, &start) < 0 || (c->started && start != c->start_ticks)) {
		c->off = 1; /* gone, or the pid is another process's now */
		return 0;
	}
	c->start_ticks = start;
	c->started = 1;
	snprintf(path, sizeof(path), "/proc/%u/task", c->pid);
	dir = opendir(path);
	if (!dir) {
		c->off = 1;
		return 0;
	}
	while (!err && (d = readdir(dir))) {
		char *end;
		unsigned long tid = strtoul(d->d_name, &end, 10);
		struct cputime_thread *t;
		int64_t run, wait;

		if (*end || !tid || tid > UINT32_MAX)
			continue;
		if (thread_times(c->pid, tid, tick_ns, &run, &wait) < 0)
			continue; /* the thread ended meanwhile */
		t = thread_of(c, (uint32_t)tid);
		if (!t) {
			err = -ENOMEM;
			break;
		}
		if (run != t->cpu_ns || wait != t->wait_ns) {
			t->cpu_ns = run;
			t->wait_ns = wait;
			err = store_cpu_time_add(s, proc_id, (uint32_t)tid, now_ns, run, wait);
		}
	}
	closedir(dir);
	return err;
}
