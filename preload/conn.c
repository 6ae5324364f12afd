/*
 * Control messages.  HELLO is built in a static buffer (it may approach
 * SHM_MSG_MAX, too big for a small thread stack) and only from the
 * constructor or a fork child, when no other thread can be sending it.
 * Interned strings (STRING) are built by intern.c and sent here.
 *
 * `sock` is read by every send and cleared, once, by the thread that finds
 * the socket gone (CAS), so that exactly one line and one callback follow.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "conn.h"
#include "log.h"

#define STATUS_TEXT_MAX 1024u
#define FD_CEILING 1024  /* never above: select()'s FD_SETSIZE, a small fd table */
#define FD_BELOW_TOP 64  /* how far under the ceiling the socket goes */

static char hello_buf[SHM_MSG_MAX];
static int sock = -1;
static dev_t sock_dev;
/* The socket's inode; while conn_reconnect() puts a new socket at its
 * number, the old and the new one's (ino_prev, ino_next) are ours too. */
static ino_t sock_ino, sock_ino_prev, sock_ino_next;
static void (*on_lost)(void);

static void hdr_init(struct shm_msg_hdr *h, uint16_t type, uint32_t len)
{
	*h = (struct shm_msg_hdr){
		.magic = SHM_MAGIC, .version = SHM_WIRE_VERSION, .type = type, .len = len
	};
}

/* Whether fd holds the socket we opened. */
static int ours(int fd)
{
	struct stat sb;

	return fstat(fd, &sb) == 0 && sb.st_dev == sock_dev &&
	       (sb.st_ino == __atomic_load_n(&sock_ino, __ATOMIC_ACQUIRE) ||
		sb.st_ino == __atomic_load_n(&sock_ino_next, __ATOMIC_ACQUIRE) ||
		sb.st_ino == __atomic_load_n(&sock_ino_prev, __ATOMIC_ACQUIRE));
}

/* The socket if it is still the one we opened, else -1 (and the loss is
 * made known, once). */
static int owned(void)
{
	int fd = __atomic_load_n(&sock, __ATOMIC_ACQUIRE);

	if (fd < 0)
		return -1;
	if (ours(fd))
		return fd;
	if (__atomic_compare_exchange_n(&sock, &fd, -1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
		log_warn("the program closed or replaced descriptor %d, the shim's connection to "
			 "the collector; tracing stopped (what was recorded up to here is kept)", fd);
		if (on_lost)
			on_lost();
	}
	return -1;
}

static int send_msg(const void *msg, size_t len)
{
	int fd = owned(), saved = errno, err = 0;

	if (fd < 0)
		return -ENOTCONN;
	if (send(fd, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		err = -errno;
	errno = saved;
	return err;
}

int conn_sendmsg(const struct msghdr *mh)
{
	int fd = owned(), saved = errno, err = 0;

	if (fd < 0)
		return -ENOTCONN;
	if (sendmsg(fd, mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		err = -errno;
	errno = saved;
	return err;
}

/* fd moved to the lowest free number at least FD_BELOW_TOP under the
 * ceiling (min(soft RLIMIT_NOFILE, FD_CEILING)), or left where it is when
 * the limit is too low or nothing up there is free. */
int conn_move_high(int fd)
{
	return conn_move_high_as(fd, 1);
}

int conn_move_high_as(int fd, int cloexec)
{
	struct rlimit rl;
	long cap = FD_CEILING, target;
	int hi;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)cap)
		cap = (long)rl.rlim_cur;
	target = cap > 2 * FD_BELOW_TOP ? cap - FD_BELOW_TOP : cap / 2;
	if (target <= fd)
		return fd;
	hi = fcntl(fd, cloexec ? F_DUPFD_CLOEXEC : F_DUPFD, (int)target);
	if (hi < 0)
		return fd;
	close(fd);
	return hi;
}

int conn_open(const char *path, void (*lost)(void))
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n = strlen(path);
	struct stat sb;
	int fd, err;

	if (n >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, n);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, offsetof(struct sockaddr_un, sun_path) + n + 1) < 0)
		goto fail;
	fd = conn_move_high(fd);
	if (fstat(fd, &sb) < 0)
		goto fail;
	sock_dev = sb.st_dev;
	sock_ino = sock_ino_prev = sock_ino_next = sb.st_ino;
	on_lost = lost;
	__atomic_store_n(&sock, fd, __ATOMIC_RELEASE);
	return 0;
fail:
	err = -errno;
	close(fd);
	return err;
}

int conn_ok(void)
{
	return owned() >= 0;
}

/* Silent when the program closed or replaced the socket: a fork child
 * that starts over (its own connection follows) or a start that failed
 * loses no tracing by it, and the line would say it did. */
void conn_close(void)
{
	int fd = __atomic_exchange_n(&sock, -1, __ATOMIC_ACQ_REL);

	if (fd >= 0 && ours(fd))
		close(fd);
}

int conn_hung_up(void)
{
	int fd = owned();
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLRDHUP };

	if (fd < 0)
		return 1;
	if (poll(&p, 1, 0) < 0)
		return 0;
	return !!(p.revents & (POLLHUP | POLLRDHUP | POLLERR));
}

/*
 * The command line, as HELLO carries it: its arguments separated by NULs,
 * without the last one's terminator, in buf (cap bytes).  Returns the
 * bytes kept or -errno; *whole is 0 when they are the whole command line.
 * A longer one (10,000 arguments; ARG_MAX is far above the 64 KiB of a
 * message) is cut at the end of the last argument that fits, never inside
 * one, and *whole is then its full length in the same terms, counted by
 * reading the rest into a small buffer on the stack (no allocation).
 */
static ssize_t read_cmdline(char *buf, size_t cap, uint32_t *whole)
{
	char rest[1024];
	size_t got = 0, total;
	ssize_t n;
	char last = 0;
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);

	*whole = 0;
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
	if (got)
		last = buf[got - 1];
	total = got;
	while (got == cap && (n = read(fd, rest, sizeof(rest))) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		total += (size_t)n;
		last = rest[n - 1];
	}
	close(fd);
	/* cmdline ends with a NUL; the wire format only separates. */
	if (total && last == '\0')
		total--;
	if (total <= cap)
		return (ssize_t)total;
	while (got && buf[got - 1] != '\0')
		got--;
	if (got)
		got--; /* the separator before the argument that did not fit */
	*whole = total > UINT32_MAX ? UINT32_MAX : (uint32_t)total;
	return (ssize_t)got;
}

/* HELLO on socket fd: see conn_hello(). */
static int hello_on(int fd, struct shm_msg_hello *h, int memfd, const char *job, uint32_t job_len)
{
	char *text = hello_buf + sizeof(*h);
	size_t room = sizeof(hello_buf) - sizeof(*h);
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	struct shm_msg_hello last;
	ssize_t exe, argv;
	size_t host;

	if (fd < 0)
		return -ENOTCONN;
	/* The last HELLO's lengths, before this one overwrites its header. */
	memcpy(&last, hello_buf, sizeof(last));
	exe = readlink("/proc/self/exe", text, room < 4096 ? room : 4096);
	if (exe < 0)
		exe = 0;
	text += exe;
	room -= (size_t)exe;
	/* Keep room for the hostname and the job; argv takes what is left. */
	if (job_len > SHM_JOB_MAX)
		job_len = SHM_JOB_MAX;
	argv = read_cmdline(text, room - 256 - SHM_JOB_MAX, &h->argv_bytes);
	/* No descriptor to read it with (a fork child of a program that took
	 * them all has only the two the shim freed, now its socket and
	 * memfd): the last HELLO's argv is still in place after the same
	 * executable's path, and a fork does not change the command line.
	 * After an exec the buffer starts zeroed: nothing to reuse. */
	if (argv < 0) {
		argv = last.argv_len && (ssize_t)last.exe_len == exe ? (ssize_t)last.argv_len : 0;
		h->argv_bytes = argv ? last.argv_bytes : 0;
	}
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

int conn_hello(struct shm_msg_hello *h, int memfd, const char *job, uint32_t job_len)
{
	int fd = owned();

	if (fd < 0)
		return -ENOTCONN;
	return hello_on(fd, h, memfd, job, job_len);
}

int conn_reconnect(const char *path, struct shm_msg_hello *h, int memfd, const char *job,
		   uint32_t job_len)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n = strlen(path);
	int fd = owned(), s, err, saved = errno;
	struct stat sb;

	if (fd < 0)
		return -ENOTCONN;
	if (n >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, n);
	s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0) {
		err = -errno;
		goto out;
	}
	/* Non-blocking: a listener whose backlog is full says EAGAIN at once. */
	if (connect(s, (struct sockaddr *)&sa, offsetof(struct sockaddr_un, sun_path) + n + 1) < 0 ||
	    fstat(s, &sb) < 0) {
		err = -errno;
		goto fail;
	}
	err = hello_on(s, h, memfd, job, job_len);
	if (err)
		goto fail;
	/* The new socket takes the old one's number, which is never free in
	 * between (the program could get it); a thread that checks the
	 * number meanwhile finds either inode ours. */
	__atomic_store_n(&sock_ino_prev, sock_ino, __ATOMIC_RELEASE);
	__atomic_store_n(&sock_ino_next, sb.st_ino, __ATOMIC_RELEASE);
	if (dup3(s, fd, O_CLOEXEC) < 0) {
		err = -errno;
		goto fail;
	}
	__atomic_store_n(&sock_ino, sb.st_ino, __ATOMIC_RELEASE);
	err = 0;
fail:
	close(s);
out:
	errno = saved;
	return err;
}

int conn_thread(uint32_t slot, uint32_t tid, uint32_t name_id, uint64_t ts)
{
	struct shm_msg_thread m = { .slot = slot, .tid = tid, .name_id = name_id, .ts = ts };

	hdr_init(&m.hdr, SHM_MSG_THREAD, sizeof(m));
	return send_msg(&m, sizeof(m));
}

int conn_kick(void)
{
	struct shm_msg_hdr m;

	hdr_init(&m, SHM_MSG_KICK, sizeof(m));
	return send_msg(&m, sizeof(m));
}

/* The BYE is what makes the end an 'exit': with the socket's buffer full
 * (a collector away in a long commit) it waits, at most BYE_WAIT_MS, for
 * room, once.  Only at the process's end. */
#define BYE_WAIT_MS 1000

int conn_bye(struct shm_msg_bye *m)
{
	struct pollfd p = { .events = POLLOUT };
	int err, saved = errno;

	hdr_init(&m->hdr, SHM_MSG_BYE, sizeof(*m));
	err = send_msg(m, sizeof(*m));
	if (err != -EAGAIN && err != -EWOULDBLOCK)
		return err;
	p.fd = owned();
	if (p.fd >= 0 && poll(&p, 1, BYE_WAIT_MS) == 1 && (p.revents & POLLOUT))
		err = send_msg(m, sizeof(*m));
	errno = saved;
	return err;
}

int conn_signal(int signo, int code, uint64_t addr, uint32_t tid, uint64_t ts)
{
	struct shm_msg_signal m = { .signo = signo, .code = code, .addr = addr, .tid = tid,
				    .ts = ts };

	hdr_init(&m.hdr, SHM_MSG_SIGNAL, sizeof(m));
	return send_msg(&m, sizeof(m));
}

int conn_gpu_status(uint32_t status, const char *text)
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
	return send_msg(&msg, msg.m.hdr.len);
}
