/*
 * badclient: a peer of shimmerd that speaks common/wire.h itself, to check
 * that the collector survives bad input and closes only the offender.
 *
 *   badclient SOCKET version    HELLO with a wrong wire version
 *   badclient SOCKET oversize   good HELLO, one good heap record (size
 *                               424242), then a message over SHM_MSG_MAX
 *   badclient SOCKET corrupt    good HELLO, one good heap record (size
 *                               424243), then a record with a bad size
 *
 *   badclient SOCKET spoof [PID UID]  HELLO claiming PID (default: its
 *                               parent's), then one claiming UID (default:
 *                               its own + 1): each is refused
 *   badclient SOCKET reconnect  reconnect HELLOs (SHM_HELLO_RECONNECT) in
 *                               its own name: one saying it started before
 *                               the kernel says it did, one for a row no
 *                               collector lost (a hostile user's try at
 *                               another process's row): each is refused
 *   badclient SOCKET reconnect-as START HOST JOB
 *                               a reconnect HELLO in its own name saying it
 *                               started at START (CLOCK_MONOTONIC ns), on
 *                               HOST, of job JOB: another user's process
 *                               (a restarted service daemon's recording,
 *                               t_svcrestart): expects it refused
 *   badclient SOCKET race N     N HELLOs whose memfd is shrunk and sealed
 *                               just after it is sent: each is refused
 *   badclient SOCKET idle N S   opens N connections (as many as it can),
 *                               says nothing on them for S seconds; prints
 *                               "held K" once they are open
 *   badclient SOCKET flood S    good HELLO, then S seconds of valid STRING
 *                               messages as fast as the socket takes them
 *                               (64 KiB ones, and names crafted to demangle
 *                               to gigabytes); expects to stay connected
 *
 * It prints "pid N" first, waits until the collector has consumed the good
 * record (the ring's tail moved), sends the bad part and then expects the
 * collector to close the connection.  Exit status 0 when it did, 1 (with a
 * reason on stderr) when not.  Every wait gives up after 20 s.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "clock_ns.h"
#include "wire.h"

#define RING_BYTES 4096u
#define WAIT_MS 20000

static int fail(const char *what)
{
	fprintf(stderr, "badclient: %s: %s\n", what, errno ? strerror(errno) : "failed");
	return 1;
}

static void hdr(struct shm_msg_hdr *h, uint16_t type, uint32_t len)
{
	h->magic = SHM_MAGIC;
	h->version = SHM_WIRE_VERSION;
	h->type = type;
	h->len = len;
	h->reserved = 0;
}

static int connect_to(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* A sealed region with one slot, mapped at *out. */
static int make_region(void **out, uint64_t *bytes)
{
	uint64_t n = SHM_REGION_BYTES(1, RING_BYTES);
	struct shm_region *r;
	int fd = memfd_create("badclient", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0 || ftruncate(fd, (off_t)n) < 0)
		return -1;
	r = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (r == MAP_FAILED)
		return -1;
	r->magic = SHM_MAGIC;
	r->version = SHM_WIRE_VERSION;
	r->nslots = 1;
	r->ring_bytes = RING_BYTES;
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		return -1;
	*out = r;
	*bytes = n;
	return fd;
}

static int send_hello_full(int sock, int memfd, uint64_t region_bytes, uint16_t version,
			   uint32_t pid, uint32_t uid);

/* Flags and the start time the next HELLO says (0: now), its host and job. */
static uint32_t hello_flags;
static uint64_t hello_start_ns;
static const char *hello_host = "localhost", *hello_job = "badclient";

static int send_hello(int sock, int memfd, uint64_t region_bytes, uint16_t version)
{
	return send_hello_full(sock, memfd, region_bytes, version, (uint32_t)getpid(),
			       (uint32_t)geteuid());
}

static int send_hello_as(int sock, int memfd, uint64_t region_bytes, uint32_t pid, uint32_t uid)
{
	return send_hello_full(sock, memfd, region_bytes, SHM_WIRE_VERSION, pid, uid);
}

static int send_hello_full(int sock, int memfd, uint64_t region_bytes, uint16_t version,
			   uint32_t pid, uint32_t uid)
{
	static const char exe[] = "/badclient", argv0[] = "badclient";
	size_t host_len = strnlen(hello_host, 255), job_len = strnlen(hello_job, SHM_JOB_MAX);
	char buf[sizeof(struct shm_msg_hello) + 64 + 255 + SHM_JOB_MAX];
	struct shm_msg_hello *h = (struct shm_msg_hello *)buf;
	size_t text = sizeof(exe) - 1 + sizeof(argv0) - 1 + host_len + job_len;
	size_t len = sizeof(*h) + text;
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { buf, len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	uint64_t mono = hello_start_ns ? hello_start_ns : clock_ns(CLOCK_MONOTONIC);

	memset(buf, 0, sizeof(buf));
	hdr(&h->hdr, SHM_MSG_HELLO, (uint32_t)len);
	h->hdr.version = version;
	h->pid = pid;
	h->ppid = (uint32_t)getppid();
	h->uid = uid;
	h->rank = SHM_NO_RANK;
	h->local_rank = SHM_NO_RANK;
	h->malloc_mode = SHM_MALLOC_ALL;
	h->clock = SHM_CLOCK_MONOTONIC;
	h->start_wall_ns = clock_ns(CLOCK_REALTIME);
	h->start_mono_ns = mono;
	h->start_ts = mono;
	h->region_bytes = region_bytes;
	h->nslots = 1;
	h->ring_bytes = RING_BYTES;
	h->exe_len = sizeof(exe) - 1;
	h->argv_len = sizeof(argv0) - 1;
	h->host_len = (uint16_t)host_len;
	h->job_len = (uint16_t)job_len;
	h->job_kind = SHM_JOB_NAMED;
	h->flags |= hello_flags;
	memcpy(buf + sizeof(*h), exe, sizeof(exe) - 1);
	memcpy(buf + sizeof(*h) + sizeof(exe) - 1, argv0, sizeof(argv0) - 1);
	memcpy(buf + sizeof(*h) + sizeof(exe) - 1 + sizeof(argv0) - 1, hello_host, host_len);
	memcpy(buf + sizeof(*h) + text - job_len, hello_job, job_len);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &memfd, sizeof(int));
	return sendmsg(sock, &msg, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

static int send_thread(int sock)
{
	struct shm_msg_thread t = { .slot = 0, .tid = (uint32_t)gettid(),
				    .ts = clock_ns(CLOCK_MONOTONIC) };

	hdr(&t.hdr, SHM_MSG_THREAD, sizeof(t));
	return send(sock, &t, sizeof(t), MSG_NOSIGNAL) == sizeof(t) ? 0 : -1;
}

static struct shm_slot *slot0(void *region)
{
	return (struct shm_slot *)((char *)region + SHM_REGION_HDR_BYTES);
}

/* Appends one record of `size` bytes (its header says hdr_size) to slot 0. */
static void push(void *region, const void *rec, size_t size)
{
	struct shm_slot *s = slot0(region);
	char *ring = (char *)s + SHM_SLOT_CTL_BYTES;
	uint64_t head = __atomic_load_n(&s->head, __ATOMIC_RELAXED);

	memcpy(ring + head % RING_BYTES, rec, size);
	__atomic_store_n(&s->head, head + size, __ATOMIC_RELEASE);
}

static int wait_consumed(void *region)
{
	struct shm_slot *s = slot0(region);

	for (int ms = 0; ms < WAIT_MS; ms += 10) {
		if (__atomic_load_n(&s->tail, __ATOMIC_ACQUIRE) ==
		    __atomic_load_n(&s->head, __ATOMIC_RELAXED))
			return 0;
		usleep(10000);
	}
	errno = ETIMEDOUT;
	return -1;
}

/* 0 when the collector closes the connection within WAIT_MS. */
static int wait_closed(int sock)
{
	struct pollfd p = { .fd = sock, .events = POLLIN | POLLRDHUP };
	char buf[256];

	for (;;) {
		int n = poll(&p, 1, WAIT_MS);

		if (n <= 0) {
			errno = n == 0 ? ETIMEDOUT : errno;
			return -1;
		}
		n = (int)recv(sock, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return 0;
		if (n < 0 && errno != EAGAIN)
			return -1;
	}
}

/* A HELLO claiming pid and uid on a fresh connection: 0 when refused. */
static int spoof(const char *path, uint32_t pid, uint32_t uid)
{
	void *region;
	uint64_t bytes;
	int sock = connect_to(path), memfd = make_region(&region, &bytes);
	int err;

	if (sock < 0 || memfd < 0)
		return fail("connect");
	err = send_hello_as(sock, memfd, bytes, pid, uid);
	if (!err)
		err = wait_closed(sock);
	close(sock);
	close(memfd);
	munmap(region, bytes);
	return err ? fail("collector kept a client with a spoofed identity") : 0;
}

/* n times: an unsealed region of the right size in a HELLO, shrunk to one
 * page and sealed as soon as it is sent (defect 1: the collector checked
 * the size, then the seals, and mapped past the end). */
static int race(const char *path, int n)
{
	uint64_t bytes = SHM_REGION_BYTES(1, RING_BYTES);

	for (int i = 0; i < n; i++) {
		int sock = connect_to(path);
		int memfd = memfd_create("race", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		struct shm_region h = { .magic = SHM_MAGIC, .version = SHM_WIRE_VERSION,
					.nslots = 1, .ring_bytes = RING_BYTES };

		if (sock < 0 || memfd < 0 || ftruncate(memfd, (off_t)bytes) < 0 ||
		    pwrite(memfd, &h, sizeof(h), 0) != sizeof(h))
			return fail("race setup");
		if (send_hello_as(sock, memfd, bytes, (uint32_t)getpid(), (uint32_t)geteuid()) < 0)
			return fail("send hello");
		if (ftruncate(memfd, 4096) < 0 ||
		    fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0)
			return fail("shrink and seal");
		if (wait_closed(sock) < 0)
			return fail("collector kept a region that shrank");
		close(sock);
		close(memfd);
	}
	return 0;
}

/* n idle connections held for secs seconds. */
static int idle(const char *path, int n, int secs)
{
	struct rlimit rl;
	int held = 0;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	for (int i = 0; i < n; i++)
		held += connect_to(path) >= 0;
	printf("held %d\n", held);
	fflush(stdout);
	sleep((unsigned)secs);
	return held ? 0 : fail("no connection at all");
}

/* secs seconds of valid strings, as fast as the socket takes them. */
static int flood(const char *path, int secs)
{
	static char buf[SHM_MSG_MAX];
	struct shm_msg_string *m = (struct shm_msg_string *)buf;
	void *region;
	uint64_t bytes;
	int sock = connect_to(path), memfd = make_region(&region, &bytes);
	uint64_t end = clock_ns(CLOCK_MONOTONIC) + (uint64_t)secs * 1000000000ull;
	unsigned long sent = 0;

	if (sock < 0 || memfd < 0 ||
	    send_hello_as(sock, memfd, bytes, (uint32_t)getpid(), (uint32_t)geteuid()) < 0)
		return fail("connect");
	for (uint32_t id = 1; clock_ns(CLOCK_MONOTONIC) < end; id++) {
		size_t n = 0;

		if (id % 2) {
			/* 24 template levels, each repeating the one before twice */
			n = (size_t)snprintf(buf + sizeof(*m), 512, "_Z1fI1AIiE");
			for (int k = 1; k <= 24; k++)
				n += (size_t)snprintf(buf + sizeof(*m) + n, 512 - n, "S_IS%c_S%c_E",
						      "0123456789ABCDEFGHIJKLMNO"[k],
						      "0123456789ABCDEFGHIJKLMNO"[k]);
			n += (size_t)snprintf(buf + sizeof(*m) + n, 512 - n, "Evv");
		} else {
			n = sizeof(buf) - sizeof(*m);
			memset(buf + sizeof(*m), 'a' + id % 26, n);
		}
		hdr(&m->hdr, SHM_MSG_STRING, (uint32_t)(sizeof(*m) + n));
		m->id = id;
		m->len = (uint32_t)n;
		if (send(sock, buf, sizeof(*m) + n, MSG_NOSIGNAL) < 0)
			return fail("the collector closed a client that sent valid strings");
		sent++;
	}
	printf("sent %lu\n", sent);
	close(sock);
	return 0;
}

int main(int argc, char **argv)
{
	struct shm_rec_heap good = { .hdr = { SHM_REC_HEAP, sizeof(good), SHM_FN_MALLOC, SHM_F_TIMED },
				     .ptr = 0x7f0000424000 };
	void *region = NULL;
	uint64_t region_bytes = 0;
	int sock, memfd;
	const char *what;

	if (argc < 3) {
		fprintf(stderr, "usage: badclient SOCKET version|oversize|corrupt|spoof|"
			"reconnect|reconnect-as START HOST JOB|race N|idle N S|flood S\n");
		return 2;
	}
	what = argv[2];
	printf("pid %d\n", (int)getpid());
	fflush(stdout);
	if (!strcmp(what, "spoof"))
		return spoof(argv[1], argc > 3 ? (uint32_t)atoi(argv[3]) : (uint32_t)getppid(),
			     (uint32_t)geteuid()) ||
		       spoof(argv[1], (uint32_t)getpid(),
			     argc > 4 ? (uint32_t)atoi(argv[4]) : (uint32_t)geteuid() + 1);
	if (!strcmp(what, "reconnect")) {
		/* started at 1 ns, long before this process: a row of an
		 * earlier process that had this pid */
		hello_flags = SHM_HELLO_RECONNECT;
		hello_start_ns = 1;
		if (spoof(argv[1], (uint32_t)getpid(), (uint32_t)geteuid()))
			return 1;
		/* its own start: no row of it was lost */
		hello_start_ns = 0;
		return spoof(argv[1], (uint32_t)getpid(), (uint32_t)geteuid());
	}
	if (!strcmp(what, "reconnect-as") && argc == 6) {
		hello_flags = SHM_HELLO_RECONNECT;
		hello_start_ns = strtoull(argv[3], NULL, 10);
		hello_host = argv[4];
		hello_job = argv[5];
		return spoof(argv[1], (uint32_t)getpid(), (uint32_t)geteuid());
	}
	if (!strcmp(what, "race") && argc == 4)
		return race(argv[1], atoi(argv[3]));
	if (!strcmp(what, "idle") && argc == 5)
		return idle(argv[1], atoi(argv[3]), atoi(argv[4]));
	if (!strcmp(what, "flood") && argc == 4)
		return flood(argv[1], atoi(argv[3]));
	sock = connect_to(argv[1]);
	if (sock < 0)
		return fail("connect");
	memfd = make_region(&region, &region_bytes);
	if (memfd < 0)
		return fail("region");
	region_bytes = SHM_REGION_BYTES(1, RING_BYTES);

	if (!strcmp(what, "version")) {
		if (send_hello(sock, memfd, region_bytes, SHM_WIRE_VERSION + 98) < 0)
			return fail("send hello");
		if (wait_closed(sock) < 0)
			return fail("collector kept a client with a bad version");
		return 0;
	}

	if (send_hello(sock, memfd, region_bytes, SHM_WIRE_VERSION) < 0 || send_thread(sock) < 0)
		return fail("send hello");
	slot0(region)->tid = (uint32_t)gettid();
	__atomic_store_n(&slot0(region)->state, SHM_SLOT_ACTIVE, __ATOMIC_RELEASE);
	__atomic_store_n(&((struct shm_region *)region)->slots_hwm, 1, __ATOMIC_RELEASE);
	good.t_begin = clock_ns(CLOCK_MONOTONIC);
	good.t_end = good.t_begin + 100;
	good.size = !strcmp(what, "oversize") ? 424242 : 424243;
	slot0(region)->count[SHM_FN_MALLOC] = 1;
	slot0(region)->bytes[SHM_FN_MALLOC] = good.size;
	push(region, &good, sizeof(good));
	if (wait_consumed(region) < 0)
		return fail("the collector never consumed a good record");

	if (!strcmp(what, "oversize")) {
		size_t len = SHM_MSG_MAX + 4096;
		char *big = calloc(1, len);
		struct shm_msg_string *s = (struct shm_msg_string *)big;

		if (!big)
			return fail("calloc");
		hdr(&s->hdr, SHM_MSG_STRING, (uint32_t)len);
		s->id = 1;
		s->len = (uint32_t)(len - sizeof(*s));
		memset(big + sizeof(*s), 'x', len - sizeof(*s));
		if (send(sock, big, len, MSG_NOSIGNAL) != (ssize_t)len)
			return fail("send oversize");
		free(big);
	} else if (!strcmp(what, "corrupt")) {
		/* A CUDA record whose size is not a multiple of 8 and too small. */
		struct shm_rec_cuda bad = { .hdr = { SHM_REC_CUDA, 12, SHM_FN_CUDA_MALLOC, 0 } };

		push(region, &bad, sizeof(bad));
	} else {
		fprintf(stderr, "badclient: unknown case %s\n", what);
		return 2;
	}
	if (wait_closed(sock) < 0)
		return fail("collector kept a client that sent malformed data");
	return 0;
}
