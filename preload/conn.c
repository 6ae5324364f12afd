/*
 * Control messages.  HELLO is built in a static buffer (it may approach
 * SHM_MSG_MAX, too big for a small thread stack) and only from the
 * constructor or a fork child, when no other thread can be sending it.
 * Interned strings (STRING) are sent by intern.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "conn.h"

#define STATUS_TEXT_MAX 1024u

static char hello_buf[SHM_MSG_MAX];

static void hdr_init(struct shm_msg_hdr *h, uint16_t type, uint32_t len)
{
	*h = (struct shm_msg_hdr){
		.magic = SHM_MAGIC, .version = SHM_WIRE_VERSION, .type = type, .len = len
	};
}

static int send_msg(int fd, const void *msg, size_t len)
{
	if (send(fd, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		return -errno;
	return 0;
}

int conn_open(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n = strlen(path);
	int fd, err;

	if (n >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, n);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, offsetof(struct sockaddr_un, sun_path) + n + 1) < 0) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

/* Reads a small file into buf; returns the bytes read or -errno. */
static ssize_t read_file(const char *path, char *buf, size_t cap)
{
	size_t got = 0;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	while (got < cap && (n = read(fd, buf + got, cap - got)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		got += (size_t)n;
	}
	close(fd);
	return (ssize_t)got;
}

int conn_hello(int fd, struct shm_msg_hello *h, int memfd, const char *job, uint32_t job_len)
{
	char *text = hello_buf + sizeof(*h);
	size_t room = sizeof(hello_buf) - sizeof(*h);
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	ssize_t exe, argv;
	size_t host;

	exe = readlink("/proc/self/exe", text, room < 4096 ? room : 4096);
	if (exe < 0)
		exe = 0;
	text += exe;
	room -= (size_t)exe;
	/* Keep room for the hostname and the job; argv takes what is left. */
	if (job_len > SHM_JOB_MAX)
		job_len = SHM_JOB_MAX;
	argv = read_file("/proc/self/cmdline", text, room - 256 - SHM_JOB_MAX);
	if (argv < 0)
		argv = 0;
	/* cmdline ends with a NUL; the wire format only separates. */
	if (argv > 0 && text[argv - 1] == '\0')
		argv--;
	text += argv;
	if (gethostname(text, 256) < 0)
		text[0] = '\0';
	host = strnlen(text, 256);
	text += host;
	if (job_len)
		memcpy(text, job, job_len);
	h->exe_len = (uint16_t)exe;
	h->argv_len = (uint16_t)argv;
	h->host_len = (uint16_t)host;
	h->job_len = (uint16_t)job_len;
	hdr_init(&h->hdr, SHM_MSG_HELLO,
		 (uint32_t)(sizeof(*h) + (size_t)exe + (size_t)argv + host + job_len));
	memcpy(hello_buf, h, sizeof(*h));

	iov = (struct iovec){ .iov_base = hello_buf, .iov_len = h->hdr.len };
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &memfd, sizeof(int));
	if (sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		return -errno;
	return 0;
}

int conn_thread(int fd, uint32_t slot, uint32_t tid, uint32_t name_id, uint64_t ts)
{
	struct shm_msg_thread m = { .slot = slot, .tid = tid, .name_id = name_id, .ts = ts };

	hdr_init(&m.hdr, SHM_MSG_THREAD, sizeof(m));
	return send_msg(fd, &m, sizeof(m));
}

int conn_kick(int fd)
{
	struct shm_msg_hdr m;

	hdr_init(&m, SHM_MSG_KICK, sizeof(m));
	return send_msg(fd, &m, sizeof(m));
}

int conn_bye(int fd, uint64_t ts)
{
	struct shm_msg_bye m = { .ts = ts };

	hdr_init(&m.hdr, SHM_MSG_BYE, sizeof(m));
	return send_msg(fd, &m, sizeof(m));
}

int conn_gpu_status(int fd, uint32_t status, const char *text)
{
	struct {
		struct shm_msg_gpu_status m;
		char text[STATUS_TEXT_MAX];
	} msg;
	size_t len = text ? strnlen(text, STATUS_TEXT_MAX) : 0;

	hdr_init(&msg.m.hdr, SHM_MSG_GPU_STATUS, (uint32_t)(sizeof(msg.m) + len));
	msg.m.status = status;
	msg.m.len = (uint32_t)len;
	if (len)
		memcpy(msg.text, text, len);
	return send_msg(fd, &msg, msg.m.hdr.len);
}
