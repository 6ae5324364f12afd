/*
 * The shared daemon's attaches (session.h).  Each session holds its
 * attach (attach.h), the job it records into and the pidfd the owner was
 * checked through.  Its two descriptors are in the sessions' own epoll
 * set, tagged by the addresses of two bytes of the session, looked up in
 * the list before use (a tag never points at freed memory).
 */
#include "session.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "attach.h"
#include "clock_ns.h"
#include "bpfsrc.h"
#include "ctl.h"
#include "job.h"
#include "log.h"
#include "wire.h"

struct session {
	struct session *next;
	struct attach *a;
	struct job *job;  /* NULL: the collector's one store without jobs */
	int pidfd;        /* the one the owner was checked through */
	pid_t pid;
	uint32_t uid;     /* the process's owner */
	char tag_data, tag_exit; /* epoll tags: their addresses */
};

struct sessions {
	int ep;
	struct session *list;
	unsigned n;
};

static int64_t now_ns(void)
{
	return (int64_t)clock_ns(CLOCK_MONOTONIC);
}

/* Whether the process behind pidfd still holds its pid (running, or a
 * zombie not yet reaped): signal 0 tells, EPERM included (the daemon may
 * not signal another user's process, which still exists then). */
static int holds_pid(int pidfd)
{
	return syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0 || errno == EPERM;
}

/*
 * The owner of pid, read through a directory descriptor of /proc/PID
 * opened after pidfd: if the pid was freed and reused in between, the
 * process behind pidfd no longer holds it, which the last check sees.
 * -ESRCH when there is no such process, -EPERM with why when its uids
 * differ (a set-uid image), else the uid in *uid.
 */
static int owner_of(pid_t pid, int pidfd, uint32_t *uid, char *why, size_t len)
{
	char path[32], buf[4096], *p;
	unsigned r, e, s, f;
	ssize_t n = -1;
	int dir, fd;

	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return -ESRCH;
	fd = openat(dir, "status", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	close(dir);
	if (n <= 0 || !holds_pid(pidfd))
		return -ESRCH;
	buf[n] = '\0';
	p = strstr(buf, "\nUid:");
	if (!p || sscanf(p + 5, "%u %u %u %u", &r, &e, &s, &f) != 4)
		return -ESRCH;
	if (r != e || r != s || r != f) {
		snprintf(why, len, "pid %d runs with another user's privileges (set-uid): "
			 "only root may attach to it", (int)pid);
		return -EPERM;
	}
	*uid = r;
	return 0;
}

static struct session *find_pid(struct sessions *ss, pid_t pid)
{
	for (struct session *s = ss->list; s; s = s->next)
		if (s->pid == pid)
			return s;
	return NULL;
}

static void session_drop(struct sessions *ss, struct session *s)
{
	struct session **pp;

	for (pp = &ss->list; *pp && *pp != s; pp = &(*pp)->next)
		;
	if (*pp) {
		*pp = s->next;
		ss->n--;
	}
	if (s->a) {
		epoll_ctl(ss->ep, EPOLL_CTL_DEL, attach_fd(s->a), NULL);
		epoll_ctl(ss->ep, EPOLL_CTL_DEL, attach_pidfd(s->a), NULL);
	}
	attach_free(s->a);
	if (s->pidfd >= 0)
		close(s->pidfd);
	free(s);
}

/* Detaches s, ends its row (why; what: in words, for the log), leaves its
 * job and frees it. */
static int end_session(struct collector *co, struct session *s, enum attach_end why,
		       const char *what, int64_t now)
{
	int err = attach_end(s->a, why, now);

	log_info("pid %d: %s; detached", (int)s->pid, what);
	if (s->job)
		job_leave(s->job, now);
	session_drop(co->sessions, s);
	return err;
}

static int watch(struct sessions *ss, int fd, void *tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = tag };

	return epoll_ctl(ss->ep, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

static int attach(struct collector *co, uint32_t peer, const struct shm_msg_request *rq,
		  int *status, char *why, size_t len)
{
	struct sessions *ss = co->sessions;
	pid_t pid = (pid_t)rq->pid;
	struct attach_conf conf = { .pid = pid, .window_ns = (int64_t)rq->arg_ns };
	struct session *s;
	char host[256] = "localhost", key[32];
	unsigned mine = 0;
	int err;

	if (!rq->pid || rq->pid > INT32_MAX || rq->arg_ns > INT64_MAX ||
	    (rq->flags & ~(SHM_ATTACH_HEAP | SHM_ATTACH_NO_OFFCPU))) {
		*status = -EINVAL;
		snprintf(why, len, "attach needs a process id (and known options)");
		return 0;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->pid = pid;
	s->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	*status = s->pidfd < 0 ? -ESRCH : owner_of(pid, s->pidfd, &s->uid, why, len);
	if (*status == -ESRCH)
		snprintf(why, len, "no process %u", rq->pid);
	if (*status)
		goto refuse;
	if (!ctl_may(peer, s->uid)) {
		*status = -EPERM;
		snprintf(why, len, "pid %u is not yours", rq->pid);
		goto refuse;
	}
	if (find_pid(ss, pid)) {
		*status = -EBUSY;
		snprintf(why, len, "pid %u is attached already (shimmer ctl detach %u ends it)",
			 rq->pid, rq->pid);
		goto refuse;
	}
	for (struct session *o = ss->list; o; o = o->next)
		mine += o->uid == s->uid;
	if (ss->n >= SESSION_MAX || mine >= SESSION_PER_USER) {
		*status = -EAGAIN;
		snprintf(why, len, "the daemon attaches to at most %u processes at once, %u of one "
			 "user's", SESSION_MAX, SESSION_PER_USER);
		goto refuse;
	}
	*status = bpfsrc_check(why, len);
	if (*status) {
		char reason[400];

		snprintf(reason, sizeof(reason), "%s", why);
		snprintf(why, len, "shimmerd cannot attach: %s (docs/service.md)", reason);
		goto refuse;
	}
	/* The job's recording, as for a preloaded process of that user. */
	snprintf(key, sizeof(key), "attach:%d", (int)pid);
	if (co->jobs) {
		gethostname(host, sizeof(host) - 1);
		host[sizeof(host) - 1] = '\0';
		err = jobs_join(co->jobs, s->uid, (uint32_t)pid, key, strlen(key), host,
				strlen(host), &s->job);
		if (err == -EPERM) {
			*status = -EPERM;
			snprintf(why, len, "shimmerd cannot make a recording for uid %u (its log "
				 "says why)", (unsigned)s->uid);
			goto refuse;
		}
		if (err)
			goto fail;
		conf.store = job_store(s->job);
	}
	if (rq->flags & SHM_ATTACH_HEAP)
		conf.what |= BPFSRC_HEAP;
	conf.what |= BPFSRC_CUDA | (rq->flags & SHM_ATTACH_NO_OFFCPU ? 0 : BPFSRC_OFFCPU);
	s->a = attach_start(co, &conf, why, len);
	if (!s->a) {
		*status = -(errno ? errno : EINVAL);
		goto refuse;
	}
	/* The pid held by the checked process all along: attach_start()'s
	 * pidfd and probes are that process's. */
	if (!holds_pid(s->pidfd)) {
		s->next = ss->list;
		ss->list = s;
		ss->n++;
		*status = -ESRCH;
		snprintf(why, len, "pid %u exited while being attached", rq->pid);
		return end_session(co, s, ATTACH_EXITED, "it exited during the attach", now_ns());
	}
	s->next = ss->list;
	ss->list = s;
	ss->n++;
	err = watch(ss, attach_fd(s->a), &s->tag_data);
	if (!err)
		err = watch(ss, attach_pidfd(s->a), &s->tag_exit);
	if (err)
		return err;
	log_info("uid %u: attached to pid %d (uid %u) into %s: %s", peer, (int)pid,
		 (unsigned)s->uid, s->job ? job_key(s->job) : "the store", attach_describe(s->a));
	snprintf(why, len, "attached to %d: %s; recording into job %s; detaching %s", (int)pid,
		 attach_describe(s->a), key,
		 rq->arg_ns ? "at the end of the window, when it exits or on shimmer ctl detach"
			    : "when it exits or on shimmer ctl detach");
	return 0;
refuse:
	log_info("uid %u: attach to pid %u refused: %s", peer, rq->pid, why);
	if (s->job)
		job_leave(s->job, now_ns());
	session_drop(ss, s);
	return 0;
fail:
	session_drop(ss, s);
	return err;
}

static int detach(struct collector *co, uint32_t peer, const struct shm_msg_request *rq,
		  int *status, char *why, size_t len)
{
	struct session *s = rq->pid && rq->pid <= INT32_MAX ? find_pid(co->sessions,
								       (pid_t)rq->pid) : NULL;

	/* Another user's attach is as absent as another user's job. */
	if (!s || !ctl_may(peer, s->uid)) {
		*status = -ESRCH;
		snprintf(why, len, "pid %u is not attached by shimmerd", rq->pid);
		return 0;
	}
	log_info("uid %u: detach from pid %u", peer, rq->pid);
	*status = 0;
	snprintf(why, len, "detached from %u", rq->pid);
	return end_session(co, s, ATTACH_DETACH, "shimmer ctl detach", now_ns());
}

static int request(struct collector *co, uint32_t peer, const struct shm_msg_request *rq,
		   int *status, char *why, size_t len)
{
	if (rq->op == SHM_REQ_ATTACH)
		return attach(co, peer, rq, status, why, len);
	return detach(co, peer, rq, status, why, len);
}

int session_open(struct collector *co)
{
	struct sessions *ss = calloc(1, sizeof(*ss));

	if (!ss)
		return -ENOMEM;
	ss->ep = epoll_create1(EPOLL_CLOEXEC);
	if (ss->ep < 0) {
		int err = -errno;

		free(ss);
		return err;
	}
	co->sessions = ss;
	co->attach_request = request;
	return 0;
}

int session_fd(const struct collector *co)
{
	return co->sessions ? co->sessions->ep : -1;
}

/* The session whose tag this is, or NULL (*exit: the pidfd's). */
static struct session *by_tag(struct sessions *ss, const void *tag, int *exit)
{
	for (struct session *s = ss->list; s; s = s->next)
		if (tag == &s->tag_data || tag == &s->tag_exit) {
			*exit = tag == &s->tag_exit;
			return s;
		}
	return NULL;
}

int session_poll(struct collector *co, int64_t now)
{
	struct sessions *ss = co->sessions;
	struct epoll_event evs[16];
	int n, err = 0;

	if (!ss)
		return 0;
	n = epoll_wait(ss->ep, evs, 16, 0);
	for (int i = 0; i < n && !err; i++) {
		int exited = 0;
		struct session *s = by_tag(ss, evs[i].data.ptr, &exited);

		if (!s)
			continue; /* ended earlier in this batch */
		if (exited)
			err = end_session(co, s, ATTACH_EXITED, "it exited", now);
		else
			err = attach_poll(s->a);
	}
	return n < 0 && errno != EINTR ? -errno : err;
}

int session_tick(struct collector *co, int64_t now)
{
	struct session *s, *next;
	int err = 0;

	if (!co->sessions)
		return 0;
	for (s = co->sessions->list; s && !err; s = next) {
		next = s->next;
		err = attach_tick(s->a, now);
		if (err == 1)
			err = end_session(co, s, ATTACH_DETACH, "the window is over", now);
	}
	return err;
}

int session_end_all(struct collector *co, int64_t now)
{
	int err = 0;

	while (co->sessions && co->sessions->list) {
		int e = end_session(co, co->sessions->list, ATTACH_DETACH, "the daemon stops", now);

		if (!err)
			err = e;
	}
	return err;
}

void session_free(struct collector *co)
{
	struct sessions *ss = co->sessions;

	if (!ss)
		return;
	while (ss->list)
		session_drop(ss, ss->list);
	close(ss->ep);
	free(ss);
	co->sessions = NULL;
	co->attach_request = NULL;
}
