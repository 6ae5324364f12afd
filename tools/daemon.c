/*
 * The control client's side of REQUEST/REPLY (daemon.h).  The daemon's
 * replies are checked like any message from elsewhere: a row whose strings
 * would reach past its end ends the answer as malformed.
 */
#include "daemon.h"

#include <errno.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "conf.h"

#define REPLY_WAIT_MS 10000 /* the daemon answers a command within ~1 s */

static int conf_socket(void *ctx, const struct conf_line *l)
{
	char *out = ctx;

	if (conf_is(l, "socket") && l->val_len && l->val_len < 108) {
		memcpy(out, l->val, l->val_len);
		out[l->val_len] = 0;
	}
	return 0;
}

const char *daemon_socket(const char *opt)
{
	static char path[108];
	static char text[CONF_MAX_BYTES];
	const char *env = getenv("SHIMMER_SOCKET"), *conf = getenv("SHIMMER_CONFIG");
	ssize_t n;

	if (opt && *opt)
		return opt;
	if (env && *env)
		return env;
	snprintf(path, sizeof(path), "%s", SHIMMER_SOCKET_PATH);
	n = conf_read(conf && *conf ? conf : SHIMMER_CONF_PATH, text, sizeof(text));
	if (n >= 0)
		conf_parse(text, (size_t)n, conf_socket, path);
	return path;
}

static int connect_to(const char *path, char *why, size_t why_len)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, err;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(why, why_len, "socket path %s is too long", path);
		return -ENAMETOOLONG;
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		err = -errno;
		snprintf(why, why_len, "cannot reach shimmerd at %s: %s%s", path, strerror(errno),
			 errno == ENOENT || errno == ECONNREFUSED
				 ? " (is shimmerd.socket or shimmerd running? see shimmerd(8))"
				 : "");
		if (fd >= 0)
			close(fd);
		return err;
	}
	return fd;
}

/* Checks row r (len bytes) and points its strings into it. */
static int parse_row(const unsigned char *m, size_t len, struct daemon_row *r)
{
	struct shm_reply_hdr h;
	size_t fixed, off;
	const uint16_t *lens;
	int nstr;

	memcpy(&h, m, sizeof(h));
	memset(r, 0, sizeof(*r));
	r->kind = h.kind;
	switch (h.kind) {
	case SHM_REPLY_RECORDING:
		fixed = sizeof(r->u.rec);
		if (len < fixed)
			return -EBADMSG;
		memcpy(&r->u.rec, m, fixed);
		lens = &r->u.rec.job_len;
		nstr = 4;
		break;
	case SHM_REPLY_PROCESS:
		fixed = sizeof(r->u.proc);
		if (len < fixed)
			return -EBADMSG;
		memcpy(&r->u.proc, m, fixed);
		lens = &r->u.proc.job_len;
		nstr = 2;
		break;
	case SHM_REPLY_ACTED:
		fixed = sizeof(r->u.acted);
		if (len < fixed)
			return -EBADMSG;
		memcpy(&r->u.acted, m, fixed);
		lens = &r->u.acted.job_len;
		nstr = 1;
		break;
	default:
		return -EBADMSG;
	}
	off = fixed;
	for (int i = 0; i < nstr; i++) {
		if (off + lens[i] > len)
			return -EBADMSG;
		r->s[i] = (const char *)m + off;
		r->len[i] = lens[i];
		off += lens[i];
	}
	return off == len ? 0 : -EBADMSG;
}

int daemon_ask(const char *path, uint32_t op, uint32_t pid, uint64_t arg_ns, uint32_t flags,
	       const char *job, int (*fn)(void *ctx, const struct daemon_row *r), void *ctx, char *why,
	       size_t why_len)
{
	static _Alignas(8) unsigned char buf[SHM_MSG_MAX + 1];
	struct shm_msg_request rq = {
		.hdr = { .magic = SHM_MAGIC, .version = SHM_WIRE_VERSION, .type = SHM_MSG_REQUEST },
		.op = op, .pid = pid, .arg_ns = arg_ns, .flags = flags,
	};
	size_t job_len = job ? strlen(job) : 0;
	int fd, err = 0;

	why[0] = 0;
	if (job_len > SHM_JOB_MAX) {
		snprintf(why, why_len, "a job key has at most %u bytes", SHM_JOB_MAX);
		return -EINVAL;
	}
	fd = connect_to(path, why, why_len);
	if (fd < 0)
		return fd;
	rq.job_len = (uint16_t)job_len;
	rq.hdr.len = (uint32_t)(sizeof(rq) + job_len);
	memcpy(buf, &rq, sizeof(rq));
	if (job_len)
		memcpy(buf + sizeof(rq), job, job_len);
	if (send(fd, buf, rq.hdr.len, MSG_NOSIGNAL) < 0) {
		err = -errno;
		snprintf(why, why_len, "cannot ask shimmerd at %s: %s", path, strerror(errno));
		goto out;
	}
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		struct shm_reply_hdr h;
		struct daemon_row row;
		ssize_t n;

		if (poll(&p, 1, REPLY_WAIT_MS) == 0) {
			err = -ETIMEDOUT;
			snprintf(why, why_len, "shimmerd at %s did not answer within %d s", path,
				 REPLY_WAIT_MS / 1000);
			goto out;
		}
		n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? -errno : -EPIPE;
			snprintf(why, why_len, "shimmerd at %s closed the connection without an "
				 "answer (a shimmerd older than this shimmer? see its log)", path);
			goto out;
		}
		memcpy(&h, buf, (size_t)n < sizeof(h) ? (size_t)n : sizeof(h));
		if ((size_t)n < sizeof(h) || h.hdr.magic != SHM_MAGIC ||
		    h.hdr.version != SHM_WIRE_VERSION || h.hdr.type != SHM_MSG_REPLY ||
		    h.hdr.len != (uint32_t)n) {
			err = -EBADMSG;
			snprintf(why, why_len, "shimmerd at %s answered in another wire format "
				 "(this shimmer speaks version %d)", path, SHM_WIRE_VERSION);
			goto out;
		}
		if (h.kind == SHM_REPLY_END) {
			struct shm_reply_end e;

			if ((size_t)n < sizeof(e))
				goto bad;
			memcpy(&e, buf, sizeof(e));
			if (sizeof(e) + e.len != (size_t)n)
				goto bad;
			snprintf(why, why_len, "%.*s", (int)e.len, (const char *)buf + sizeof(e));
			err = e.status > 0 ? -EPROTO : e.status;
			goto out;
		}
		if (parse_row(buf, (size_t)n, &row) < 0)
			goto bad;
		err = fn(ctx, &row);
		if (err) {
			snprintf(why, why_len, "%s", strerror(-err));
			goto out;
		}
	}
bad:
	err = -EBADMSG;
	snprintf(why, why_len, "shimmerd at %s sent a malformed answer", path);
out:
	close(fd);
	return err;
}

const char *daemon_user_name(uint32_t uid, char *buf, size_t len)
{
	struct passwd pw, *res = NULL;
	char tmp[1024];

	if (getpwuid_r(uid, &pw, tmp, sizeof(tmp), &res) == 0 && res)
		snprintf(buf, len, "%s", res->pw_name);
	else
		snprintf(buf, len, "%u", (unsigned)uid);
	return buf;
}
