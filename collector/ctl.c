/*
 * Control requests (ctl.h).  Replies are built one message at a time in a
 * buffer and queued on the asker's connection (client_reply()).
 */
#include "ctl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client.h"
#include "clock_ns.h"
#include "job.h"
#include "log.h"
#include "wire.h"

#define NO_CONTROL (-2)

struct target {
	uint32_t pid, uid;
	char job[SHM_JOB_MAX + 1];
	int64_t latency_ns; /* NO_CONTROL: it takes no commands */
};

static int64_t now_ns(void)
{
	return (int64_t)clock_ns(CLOCK_MONOTONIC);
}

/* ---- replies ---- */

static _Alignas(8) char out[SHM_MSG_MAX];

static void hdr_init(struct shm_reply_hdr *r, uint32_t kind, size_t len)
{
	*r = (struct shm_reply_hdr){
		.hdr = { .magic = SHM_MAGIC, .version = SHM_WIRE_VERSION,
			 .type = SHM_MSG_REPLY, .len = (uint32_t)len },
		.kind = kind,
	};
}

/* Appends text to out at *off, at most max bytes of it; its length. */
static uint16_t put(size_t *off, const char *text, size_t max)
{
	size_t n = text ? strnlen(text, max) : 0;

	if (*off + n > sizeof(out))
		n = sizeof(out) - *off;
	if (n)
		memcpy(out + *off, text, n);
	*off += n;
	return (uint16_t)n;
}

__attribute__((format(printf, 3, 4)))
static int end(struct client *c, int status, const char *fmt, ...)
{
	struct shm_reply_end e = { .status = status };
	size_t off = sizeof(e);
	va_list ap;
	int n = 0;

	if (fmt) {
		va_start(ap, fmt);
		n = vsnprintf(out + off, 1024, fmt, ap);
		va_end(ap);
		if (n > 1023)
			n = 1023;
	}
	e.len = (uint32_t)n;
	off += (size_t)n;
	hdr_init(&e.r, SHM_REPLY_END, off);
	memcpy(out, &e, sizeof(e));
	return client_reply(c, out, off);
}

static int recording_row(void *ctx, const struct job_recording *r)
{
	struct client *c = ctx;
	struct shm_reply_recording m = {
		.uid = r->uid, .live = (uint32_t)r->live, .processes = r->processes,
		.ranks = r->ranks, .start_wall_ns = r->start_wall_ns,
		.end_wall_ns = r->end_wall_ns, .bytes = r->bytes,
	};
	size_t off = sizeof(m);

	m.job_len = put(&off, r->job, SHM_JOB_MAX);
	m.host_len = put(&off, r->host, 255);
	m.path_len = put(&off, r->path, 4096);
	m.user_len = 0; /* the asker's side knows the names of uids */
	hdr_init(&m.r, SHM_REPLY_RECORDING, off);
	memcpy(out, &m, sizeof(m));
	return client_reply(c, out, off);
}

static int process_row(struct client *c, const struct client_info *i)
{
	struct shm_reply_process m = {
		.pid = i->pid, .uid = i->uid, .rank = i->rank, .state = i->state,
		.start_wall_ns = i->start_wall_ns, .events = i->events, .dropped = i->dropped,
		.events_per_s = i->events_per_s, .dropped_per_s = i->dropped_per_s,
	};
	size_t off = sizeof(m);

	m.job_len = put(&off, i->job, SHM_JOB_MAX);
	m.exe_len = put(&off, i->exe, 4096);
	hdr_init(&m.r, SHM_REPLY_PROCESS, off);
	memcpy(out, &m, sizeof(m));
	return client_reply(c, out, off);
}

static int acted_row(struct client *c, const struct target *t)
{
	struct shm_reply_acted m = { .pid = t->pid, .uid = t->uid, .latency_ns = t->latency_ns };
	size_t off = sizeof(m);

	m.job_len = put(&off, t->job, SHM_JOB_MAX);
	hdr_init(&m.r, SHM_REPLY_ACTED, off);
	memcpy(out, &m, sizeof(m));
	return client_reply(c, out, off);
}

/* ---- requests ---- */

/* Whether traced process o is one the request names (pid, job, or all). */
static int named(const struct client_info *i, uint32_t pid, const char *job, size_t job_len)
{
	if (pid)
		return i->pid == pid;
	if (job_len)
		return strlen(i->job) == job_len && !memcmp(i->job, job, job_len);
	return 1;
}

static int status(struct collector *co, struct client *c, uint32_t peer, uint32_t pid,
		  const char *job, size_t job_len)
{
	struct client_info i;
	int err = 0;

	for (struct client *o = co->clients; o && !err; o = client_next(o)) {
		if (!client_traced(o))
			continue;
		client_info(o, &i);
		if (ctl_may(peer, i.uid) && named(&i, pid, job, job_len))
			err = process_row(c, &i);
	}
	return err ? err : end(c, 0, NULL);
}

static int list_row(void *ctx, const struct job_recording *r)
{
	return recording_row(ctx, r);
}

/* A command: written into each target's region, where it is in force at
 * once (its hooks read the block on every call); a row per target, then
 * the end. */
static int command(struct collector *co, struct client *c, uint32_t peer,
		   const struct shm_msg_request *rq, const char *job)
{
	struct client_info i;
	struct target t;
	int64_t start = now_ns();
	size_t n = 0, others = 0, none = 0;
	int err = 0;

	if (!rq->pid && !rq->job_len)
		return end(c, -EINVAL, "name a process (--pid) or a job (--job)");
	if (rq->op == SHM_REQ_WINDOW && !rq->arg_ns)
		return end(c, -EINVAL, "a window of 0 s records nothing");
	for (struct client *o = co->clients; o; o = client_next(o)) {
		if (!client_traced(o))
			continue;
		client_info(o, &i);
		if (!named(&i, rq->pid, job, rq->job_len))
			continue;
		if (ctl_may(peer, i.uid))
			n++;
		else
			others++;
	}
	if (!n && rq->pid && others)
		return end(c, -EPERM, "pid %u is not yours", rq->pid);
	if (!n && rq->pid)
		return end(c, -ESRCH, "pid %u is not a traced process", rq->pid);
	if (!n)
		return end(c, -ESRCH, "no traced process of yours in job %.*s", (int)rq->job_len,
			   job);
	for (struct client *o = co->clients; o && !err; o = client_next(o)) {
		if (!client_traced(o))
			continue;
		client_info(o, &i);
		if (!named(&i, rq->pid, job, rq->job_len) || !ctl_may(peer, i.uid))
			continue;
		t = (struct target){ .pid = i.pid, .uid = i.uid, .latency_ns = NO_CONTROL };
		snprintf(t.job, sizeof(t.job), "%s", i.job);
		/* The process's word: with SHIMMER_CONTROL=0 it takes none. */
		if (i.state & SHM_STATE_CONTROL) {
			client_control(o, rq->op, rq->arg_ns);
			t.latency_ns = now_ns() - start;
		} else {
			none++;
		}
		err = acted_row(c, &t);
	}
	if (err)
		return err;
	log_info("uid %u: %s to %zu process%s of %s%.*s", peer,
		 rq->op == SHM_REQ_PAUSE ? "pause" : rq->op == SHM_REQ_RESUME ? "resume" : "window",
		 n, n == 1 ? "" : "es", rq->pid ? "pid " : "job ",
		 rq->pid ? 0 : (int)rq->job_len, job);
	if (none)
		return end(c, -EPERM, "%zu of %zu processes take no commands (SHIMMER_CONTROL=0)",
			   none, n);
	return end(c, 0, NULL);
}

int ctl_request(struct collector *co, struct client *c, const void *msg, size_t len)
{
	struct shm_msg_request rq;
	const char *job = (const char *)msg + sizeof(rq);
	int peer = client_peer_uid(c);

	if (len < sizeof(rq))
		return -EBADMSG;
	memcpy(&rq, msg, sizeof(rq));
	if (len != sizeof(rq) + rq.job_len || rq.job_len > SHM_JOB_MAX || peer < 0)
		return -EBADMSG;
	switch (rq.op) {
	case SHM_REQ_LIST: {
		int err;

		if (!co->jobs)
			return end(c, -ENOTSUP, "this collector keeps no recordings");
		err = jobs_list(co->jobs, peer == 0 ? -1 : peer, list_row, c);
		return err ? err : end(c, 0, NULL);
	}
	case SHM_REQ_STATUS:
		return status(co, c, (uint32_t)peer, rq.pid, job, rq.job_len);
	case SHM_REQ_PAUSE:
	case SHM_REQ_RESUME:
	case SHM_REQ_WINDOW:
		return command(co, c, (uint32_t)peer, &rq, job);
	case SHM_REQ_ATTACH:
	case SHM_REQ_DETACH: {
		char why[1024];
		int st, err;

		if (!co->attach_request)
			return end(c, -ENOTSUP, "this collector does not attach to processes");
		err = co->attach_request(co, (uint32_t)peer, &rq, &st, why, sizeof(why));
		return err ? err : end(c, st, "%s", why);
	}
	default:
		return end(c, -EINVAL, "unknown request %u", rq.op);
	}
}
