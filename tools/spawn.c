/*
 * A private collector (spawn.h).  The collector learns that we are gone
 * from its --parent-fd pipe: we hold the write end and never write it, so
 * its EOF comes when we close it or die, and it then stores what is left
 * and exits.  Its ready line comes on a close-on-exec pipe that only it
 * holds open after the fork: EOF before a newline means it exited (or
 * closed it) before it was ready.
 */
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define MAX_ARGS 32

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

void spawn_init(struct spawn *s, const char *db_opt)
{
	memset(s, 0, sizeof(*s));
	s->db_opt = db_opt;
	s->stop = -1;
}

int spawn_find(struct spawn *s, char *why, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", s->dir, sizeof(s->dir) - 1);
	char *slash;

	if (n < 0) {
		snprintf(why, len, "cannot find the shimmer installation: %s", strerror(errno));
		return -errno;
	}
	s->dir[n] = '\0';
	slash = strrchr(s->dir, '/');
	if (slash)
		*slash = '\0';
	if (!slash || (size_t)snprintf(s->shimmerd, sizeof(s->shimmerd), "%s/shimmerd",
				       s->dir) >= sizeof(s->shimmerd)) {
		snprintf(why, len, "cannot find the shimmer installation: %s",
			 strerror(ENAMETOOLONG));
		return -ENAMETOOLONG;
	}
	if (access(s->shimmerd, X_OK) < 0) {
		snprintf(why, len, "cannot start %s: %s", s->shimmerd, strerror(errno));
		return -errno;
	}
	return 0;
}

int spawn_name_store(struct spawn *s, long pid, char *why, size_t len)
{
	char host[256] = "localhost", stamp[32];
	time_t now = time(NULL);
	struct tm tm;
	size_t n;
	int fd;

	if (s->db_opt) {
		n = (size_t)snprintf(s->db, sizeof(s->db), "%s", s->db_opt);
	} else {
		gethostname(host, sizeof(host) - 1);
		host[sizeof(host) - 1] = '\0';
		localtime_r(&now, &tm);
		strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
		n = (size_t)snprintf(s->db, sizeof(s->db), "./shimmer-%s-%ld-%s.db", host, pid,
				     stamp);
	}
	if (n >= sizeof(s->db)) {
		snprintf(why, len, "the store's name is too long");
		return -ENAMETOOLONG;
	}
	fd = open(s->db, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0) {
		close(fd);
		s->db_is_ours = 1;
		return 0;
	}
	if (errno == EEXIST && s->db_opt)
		return 0;
	if (errno == EEXIST)
		snprintf(why, len, "%s already exists: a store at a default name is never reused "
			 "(another user may have made it to read the recording); remove it or "
			 "give --db", s->db);
	else
		snprintf(why, len, "cannot create %s: %s", s->db, strerror(errno));
	return -errno;
}

static void __attribute__((noreturn)) collector_main(const struct spawn *s,
						     const char *const *args, int ready_fd,
						     int parent_fd, const sigset_t *mask)
{
	static const int sigs[] = { SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGPIPE };
	const char *argv[MAX_ARGS + 16];
	char fd[16], pfd[16];
	size_t n = 0;
	int null;

	setpgid(0, 0);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], SIG_DFL);
	sigprocmask(SIG_SETMASK, mask, NULL);
	null = open("/dev/null", O_RDONLY);
	if (null >= 0 && null != STDIN_FILENO)
		dup2(null, STDIN_FILENO);
	/* stdout belongs to the traced program's consumer. */
	dup2(STDERR_FILENO, STDOUT_FILENO);
	fcntl(ready_fd, F_SETFD, 0);
	fcntl(parent_fd, F_SETFD, 0);
	snprintf(fd, sizeof(fd), "%d", ready_fd);
	snprintf(pfd, sizeof(pfd), "%d", parent_fd);
	argv[n++] = s->shimmerd;
	argv[n++] = "--foreground";
	/* A collector of its own: the service's configuration is not its. */
	argv[n++] = "--no-config";
	argv[n++] = "--quiet";
	argv[n++] = "--db";
	argv[n++] = s->db;
	argv[n++] = "--ready-fd";
	argv[n++] = fd;
	argv[n++] = "--parent-fd";
	argv[n++] = pfd;
	for (size_t i = 0; args && args[i] && i < MAX_ARGS; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	execv(s->shimmerd, (char *const *)argv);
	_exit(127);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int spawn_reap(pid_t pid)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return st;
}

/* Reads the ready line (up to its newline, or a single byte without one:
 * a daemon that has nothing to say).  1 when ready, 0 at EOF, -ETIMEDOUT. */
static int read_ready(struct spawn *s, int fd, int timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;
	size_t used = 0;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int64_t left = deadline - now_ms();
		ssize_t n;

		if (left <= 0 || poll(&p, 1, (int)left) == 0)
			return -ETIMEDOUT;
		n = read(fd, s->ready + used, sizeof(s->ready) - 1 - used);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return used ? 1 : 0;
		used += (size_t)n;
		s->ready[used] = '\0';
		if (strchr(s->ready, '\n') || s->ready[0] == '\0' || used == sizeof(s->ready) - 1) {
			char *nl = strchr(s->ready, '\n');

			if (nl)
				*nl = '\0';
			return 1;
		}
	}
}

int spawn_start(struct spawn *s, const char *const *args, const sigset_t *mask,
		int timeout_ms, char *why, size_t len)
{
	int ready[2] = { -1, -1 }, stop[2] = { -1, -1 }, err = 0, st, r;

	if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(stop, O_CLOEXEC) < 0) {
		err = -errno;
		snprintf(why, len, "cannot make a pipe: %s", strerror(errno));
		goto out;
	}
	s->pid = fork();
	if (s->pid < 0) {
		err = -errno;
		s->pid = 0;
		snprintf(why, len, "cannot fork: %s", strerror(errno));
		goto out;
	}
	if (s->pid == 0)
		collector_main(s, args, ready[1], stop[0], mask);
	close_fd(&ready[1]);
	close_fd(&stop[0]);
	s->stop = stop[1];
	stop[1] = -1;
	r = read_ready(s, ready[0], timeout_ms);
	if (r == -ETIMEDOUT) {
		err = r;
		snprintf(why, len, "%s was not ready after %d s", s->shimmerd, timeout_ms / 1000);
		kill(s->pid, SIGKILL);
		spawn_reap(s->pid);
	} else if (r == 0) {
		/* EOF: it exited, or closed the fd, before it was ready. */
		err = -ECHILD;
		kill(s->pid, SIGKILL);
		st = spawn_reap(s->pid);
		if (st >= 0 && WIFEXITED(st))
			snprintf(why, len, "%s exited with status %d before it was ready",
				 s->shimmerd, WEXITSTATUS(st));
		else
			snprintf(why, len, "%s stopped before it was ready", s->shimmerd);
	}
	if (err)
		s->pid = 0;
out:
	close_fd(&ready[0]);
	close_fd(&ready[1]);
	close_fd(&stop[0]);
	close_fd(&stop[1]);
	if (err)
		close_fd(&s->stop);
	return err;
}

int spawn_stop(struct spawn *s)
{
	int st;

	if (!s->pid)
		return -1;
	close_fd(&s->stop);
	st = spawn_reap(s->pid);
	s->pid = 0;
	if (st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) != 0)
		cli_warn("the collector exited with status %d; the store may be incomplete",
			 WEXITSTATUS(st));
	else if (st >= 0 && WIFSIGNALED(st))
		cli_warn("the collector was killed by signal %d; the store may be incomplete",
			 WTERMSIG(st));
	return st;
}

void spawn_remove_store(struct spawn *s)
{
	static const char *const suffixes[] = { "", "-wal", "-shm", "-journal" };
	char path[PATH_MAX + 16];

	if (!s->db_is_ours)
		return;
	for (size_t i = 0; i < 4; i++) {
		snprintf(path, sizeof(path), "%s%s", s->db, suffixes[i]);
		unlink(path);
	}
	s->db_is_ours = 0;
}
