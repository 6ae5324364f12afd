/*
 * A client's life: client_new() on accept, HELLO (validated, region mapped,
 * processes row), then any number of STRING/THREAD/KICK messages and drain
 * passes, then BYE and/or the socket closing, and client_end().
 *
 * Region reading follows the ring protocol of common/wire.h.  The client
 * can write its region at any moment, so nothing is used where it lies:
 * head is read once per pass (acquire) and checked against our own copy of
 * tail, and each record is copied out before its header is checked and
 * used.  A pass over a slot consumes at most the bytes published when it
 * started, so no loop is driven by the client.  A malformed record stops
 * its slot for good (it is never read again); the rest of the region is
 * still drained before the client is closed.
 *
 * Exact counters: per slot we keep the count[]/bytes[]/dropped values
 * already stored and store only the difference.  When a retired slot has
 * been drained and its totals stored, we zero its counters before setting
 * it FREE, so the next owner's counts start from zero whether or not the
 * shim also zeroes them on claim; a new generation also restarts our
 * baseline.  The upsert in the store adds, so a tid that shows up twice
 * still gets exact totals.
 */
#include "client.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "ptrmap.h"
#include "wire.h"

#define RECV_BATCH 64          /* messages per wake-up, for fairness */
#define FDS_MAX 8              /* room to receive (and close) extra fds */
#define STRINGS_MAX 65536u     /* interned strings per process */
#define STRING_BYTES_MAX (16u << 20)

struct slot_state {
	uint64_t tail;
	uint64_t generation;
	uint64_t dropped;
	uint64_t count[SHM_FN_COUNT];
	uint64_t bytes[SHM_FN_COUNT];
	int bad;
};

struct istring {
	uint32_t id;
	uint32_t len;
	char *text;
};

struct client {
	struct collector *co;
	struct client *next, **pprev;
	int fd;
	int64_t proc_id;
	uint32_t pid;
	uint32_t clock;
	char *host;
	size_t host_len;
	double sample_bytes;
	void *map;
	size_t map_bytes;
	struct shm_region *region;
	uint32_t nslots, ring_bytes;
	struct slot_state *slots;
	uint64_t no_slot_stored;
	uint64_t heartbeat;
	struct ptrmap heap, cuda;
	struct istring *strings;
	size_t nstrings, string_bytes;
	int bye;
	uint64_t bye_ts;
	int rejected;
	int ended;
};

/* Logs why the client is rejected (only the first reason) and returns the
 * code that makes the caller end it. */
__attribute__((format(printf, 2, 3)))
static int reject(struct client *c, const char *fmt, ...)
{
	char why[256];
	va_list ap;

	if (!c->rejected) {
		va_start(ap, fmt);
		vsnprintf(why, sizeof(why), fmt, ap);
		va_end(ap);
		if (c->pid)
			log_warn("rejecting pid %u: %s", c->pid, why);
		else
			log_warn("rejecting a client before HELLO: %s", why);
	}
	c->rejected = 1;
	return -EBADMSG;
}

static int64_t to_ns(const struct client *c, uint64_t ts)
{
	if (c->clock == SHM_CLOCK_TSC)
		return clock_to_ns(&c->co->clock, ts);
	return ts > INT64_MAX ? INT64_MAX : (int64_t)ts;
}

static struct shm_slot *slot_at(const struct client *c, uint32_t i)
{
	return (struct shm_slot *)((char *)c->map + SHM_REGION_HDR_BYTES +
				   i * SHM_SLOT_STRIDE(c->ring_bytes));
}

/* ---- HELLO ---- */

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	unsigned lo = 0x80, hi = 0xbf;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4;
	else
		return 0;
	/* Overlong forms, surrogates and code points above U+10FFFF. */
	if (s[0] == 0xe0)
		lo = 0xa0;
	else if (s[0] == 0xed)
		hi = 0x9f;
	else if (s[0] == 0xf0)
		lo = 0x90;
	else if (s[0] == 0xf4)
		hi = 0x8f;
	if (len > n || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

/* argv (elements separated by NUL) as a JSON array of strings; bytes that
 * are not UTF-8 become U+FFFD.  The caller frees *out. */
static int json_argv(const char *argv, size_t len, char **out, size_t *out_len)
{
	const unsigned char *s = (const unsigned char *)argv;
	char *j = malloc(len * 6 + 8), *p;

	if (!j)
		return -ENOMEM;
	p = j;
	*p++ = '[';
	if (len)
		*p++ = '"';
	for (size_t i = 0; i < len;) {
		size_t n = utf8_len(s + i, len - i);

		if (s[i] == 0) {
			p += sprintf(p, "\",\"");
		} else if (s[i] == '"' || s[i] == '\\') {
			*p++ = '\\';
			*p++ = (char)s[i];
		} else if (s[i] < 0x20 || s[i] == 0x7f) {
			p += sprintf(p, "\\u%04x", s[i]);
		} else if (n == 0) {
			p += sprintf(p, "\\ufffd");
		} else {
			memcpy(p, s + i, n);
			p += n;
			i += n;
			continue;
		}
		i++;
	}
	if (len)
		*p++ = '"';
	*p++ = ']';
	*out = j;
	*out_len = (size_t)(p - j);
	return 0;
}

static int map_region(struct client *c, const struct shm_msg_hello *h, int memfd)
{
	struct shm_region r;
	struct stat sb;
	int seals;
	void *map;

	if (h->nslots == 0 || h->nslots > SHM_SLOTS_MAX)
		return reject(c, "HELLO nslots %u outside [1, %u]", h->nslots, SHM_SLOTS_MAX);
	if (h->ring_bytes < SHM_RING_MIN_BYTES || h->ring_bytes > SHM_RING_MAX_BYTES ||
	    (h->ring_bytes & (h->ring_bytes - 1)))
		return reject(c, "HELLO ring_bytes %u is not a power of two in [%u, %u]",
			      h->ring_bytes, SHM_RING_MIN_BYTES, SHM_RING_MAX_BYTES);
	if (h->region_bytes != SHM_REGION_BYTES(h->nslots, h->ring_bytes))
		return reject(c, "HELLO region_bytes %llu does not match %u slots of %u bytes",
			      (unsigned long long)h->region_bytes, h->nslots, h->ring_bytes);
	if (fstat(memfd, &sb) < 0 || (uint64_t)sb.st_size != h->region_bytes)
		return reject(c, "region memfd is not %llu bytes long",
			      (unsigned long long)h->region_bytes);
	seals = fcntl(memfd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK))
		return reject(c, "region memfd is not sealed against shrinking");
	map = mmap(NULL, h->region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (map == MAP_FAILED)
		return reject(c, "cannot map the region: %s", strerror(errno));
	c->map = map;
	c->map_bytes = h->region_bytes;
	memcpy(&r, map, sizeof(r));
	if (r.magic != SHM_MAGIC || r.version != SHM_WIRE_VERSION ||
	    r.nslots != h->nslots || r.ring_bytes != h->ring_bytes)
		return reject(c, "region header does not match HELLO");
	c->slots = calloc(h->nslots, sizeof(*c->slots));
	if (!c->slots)
		return -ENOMEM;
	c->region = map;
	c->nslots = h->nslots;
	c->ring_bytes = h->ring_bytes;
	for (uint32_t i = 0; i < c->nslots; i++)
		c->slots[i].tail = __atomic_load_n(&slot_at(c, i)->tail, __ATOMIC_RELAXED);
	return 0;
}

/* The traced parent: a live client first (its pid cannot have been reused
 * yet), else the latest process of that pid on the host. */
static int find_parent(struct client *c, uint32_t ppid, int64_t *parent)
{
	*parent = 0;
	for (struct client *o = c->co->clients; o; o = o->next)
		if (o != c && o->proc_id > *parent && !o->ended && o->pid == ppid &&
		    o->host_len == c->host_len && !memcmp(o->host, c->host, c->host_len))
			*parent = o->proc_id;
	if (*parent)
		return 0;
	return store_process_find(c->co->store, ppid, c->host, c->host_len, parent);
}

static int hello(struct client *c, const char *msg, size_t len, int memfd)
{
	static const char *const modes[] = { "off", "sample", "all" };
	struct shm_msg_hello h;
	struct store_proc p;
	char *argv = NULL;
	const char *text = msg + sizeof(h);
	int err;

	if (c->proc_id)
		return reject(c, "second HELLO");
	if (len < sizeof(h))
		return reject(c, "HELLO of %zu bytes", len);
	memcpy(&h, msg, sizeof(h));
	c->pid = h.pid;
	if (len != sizeof(h) + h.exe_len + h.argv_len + h.host_len)
		return reject(c, "HELLO length %zu does not match its strings", len);
	if (h.malloc_mode > SHM_MALLOC_ALL)
		return reject(c, "HELLO malloc_mode %u", h.malloc_mode);
	if (h.clock != SHM_CLOCK_MONOTONIC && h.clock != SHM_CLOCK_TSC)
		return reject(c, "HELLO clock %u", h.clock);
	err = map_region(c, &h, memfd);
	if (err)
		return err;
	c->clock = h.clock;
	c->sample_bytes = (double)h.sample_bytes;
	c->host_len = h.host_len;
	c->host = malloc(h.host_len + 1);
	if (!c->host)
		return -ENOMEM;
	memcpy(c->host, text + h.exe_len + h.argv_len, h.host_len);
	p = (struct store_proc){
		.pid = h.pid, .ppid = h.ppid, .uid = h.uid,
		.host = c->host, .host_len = c->host_len,
		.exe = text, .exe_len = h.exe_len,
		.rank = h.rank, .local_rank = h.local_rank,
		.malloc_mode = modes[h.malloc_mode],
		.sample_bytes = h.malloc_mode == SHM_MALLOC_SAMPLE ?
				(int64_t)h.sample_bytes : -1,
		.lossless = !!(h.flags & SHM_HELLO_LOSSLESS),
		.start_wall_ns = (int64_t)h.start_wall_ns,
		.start_ns = (int64_t)h.start_mono_ns,
	};
	err = json_argv(text + h.exe_len, h.argv_len, &argv, &p.argv_json_len);
	if (err)
		goto out;
	p.argv_json = argv;
	err = find_parent(c, h.ppid, &p.parent_proc_id);
	if (!err)
		err = store_process_add(c->co->store, &p, &c->proc_id);
	if (!err)
		log_debug("pid %u connected as proc_id %lld", c->pid, (long long)c->proc_id);
out:
	free(argv);
	return err;
}

/* ---- other messages ---- */

static const struct istring *string_find(const struct client *c, uint32_t id)
{
	for (size_t i = 0; i < c->nstrings; i++)
		if (c->strings[i].id == id)
			return &c->strings[i];
	return NULL;
}

static int string_msg(struct client *c, const char *msg, size_t len)
{
	struct shm_msg_string m;
	struct istring *s, *grown;
	char *text;

	memcpy(&m, msg, sizeof(m));
	if (len != sizeof(m) + (uint64_t)m.len || m.id == 0)
		return reject(c, "malformed STRING (id %u, %u bytes)", m.id, m.len);
	if (c->nstrings >= STRINGS_MAX || c->string_bytes + m.len > STRING_BYTES_MAX)
		return reject(c, "more than %u strings or %u bytes of them",
			      STRINGS_MAX, STRING_BYTES_MAX);
	text = malloc(m.len + 1);
	if (!text)
		return -ENOMEM;
	memcpy(text, msg + sizeof(m), m.len);
	text[m.len] = 0;
	s = (struct istring *)string_find(c, m.id);
	if (!s) {
		grown = realloc(c->strings, (c->nstrings + 1) * sizeof(*grown));
		if (!grown) {
			free(text);
			return -ENOMEM;
		}
		c->strings = grown;
		s = &c->strings[c->nstrings++];
		s->id = m.id;
		s->text = NULL;
	}
	free(s->text);
	s->text = text;
	s->len = m.len;
	c->string_bytes += m.len;
	return 0;
}

static int thread_msg(struct client *c, const char *msg, size_t len)
{
	struct shm_msg_thread m;
	const struct istring *name;

	if (len != sizeof(m))
		return reject(c, "THREAD of %zu bytes", len);
	memcpy(&m, msg, sizeof(m));
	if (m.slot >= c->nslots)
		return reject(c, "THREAD names slot %u of %u", m.slot, c->nslots);
	name = m.name_id ? string_find(c, m.name_id) : NULL;
	return store_thread_add(c->co->store, c->proc_id, m.tid,
				name ? name->text : NULL, name ? name->len : 0,
				to_ns(c, m.ts));
}

int client_message(struct client *c, const void *msg, size_t len,
		   const int *fds, int nfds, int ctrunc)
{
	struct shm_msg_hdr h;
	int err;

	if (ctrunc) {
		err = reject(c, "message came with too many descriptors");
		goto out;
	}
	if (len < sizeof(h) || len > SHM_MSG_MAX) {
		err = reject(c, "message of %zu bytes", len);
		goto out;
	}
	memcpy(&h, msg, sizeof(h));
	if (h.magic != SHM_MAGIC || h.version != SHM_WIRE_VERSION) {
		err = reject(c, "wire magic %#x version %u, expected %#x version %u",
			     h.magic, h.version, SHM_MAGIC, SHM_WIRE_VERSION);
		goto out;
	}
	if (h.len != len) {
		err = reject(c, "message header says %u bytes, %zu arrived", h.len, len);
		goto out;
	}
	if (h.type != SHM_MSG_HELLO && !c->proc_id) {
		err = reject(c, "first message is of type %u, not HELLO", h.type);
		goto out;
	}
	if (h.type == SHM_MSG_HELLO ? nfds != 1 : nfds != 0) {
		err = reject(c, "message of type %u came with %d descriptors", h.type, nfds);
		goto out;
	}
	switch (h.type) {
	case SHM_MSG_HELLO:
		err = hello(c, msg, len, fds[0]);
		break;
	case SHM_MSG_STRING:
		err = string_msg(c, msg, len);
		break;
	case SHM_MSG_THREAD:
		err = thread_msg(c, msg, len);
		break;
	case SHM_MSG_KICK:
		err = len == sizeof(h) ? client_drain(c) : reject(c, "KICK of %zu bytes", len);
		break;
	case SHM_MSG_BYE:
		if (len != sizeof(struct shm_msg_bye)) {
			err = reject(c, "BYE of %zu bytes", len);
			break;
		}
		memcpy(&c->bye_ts, (const char *)msg + sizeof(h), sizeof(c->bye_ts));
		c->bye = 1;
		err = 0;
		break;
	default:
		err = reject(c, "unknown message type %u", h.type);
	}
out:
	/* The mapping outlives the memfd; no descriptor is kept. */
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	return err;
}

int client_recv(struct client *c)
{
	static unsigned char buf[SHM_MSG_MAX + 1] __attribute__((aligned(8)));

	for (int n = 0; n < RECV_BATCH; n++) {
		union {
			struct cmsghdr align;
			char b[CMSG_SPACE(sizeof(int) * FDS_MAX)];
		} ctl;
		struct iovec iov = { buf, sizeof(buf) };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
				     .msg_control = ctl.b, .msg_controllen = sizeof(ctl.b) };
		int fds[FDS_MAX * 2], nfds = 0, err;
		ssize_t len = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

		if (len < 0 && errno == EINTR)
			continue;
		if (len < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (len <= 0)
			return -EPIPE;
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			size_t n_in;

			if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
				continue;
			n_in = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < n_in && nfds < FDS_MAX * 2; i++)
				memcpy(&fds[nfds++], CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
		}
		if (mh.msg_flags & MSG_TRUNC) {
			for (int i = 0; i < nfds; i++)
				close(fds[i]);
			return reject(c, "message longer than %u bytes", SHM_MSG_MAX);
		}
		err = client_message(c, buf, (size_t)len, fds, nfds,
				     !!(mh.msg_flags & MSG_CTRUNC));
		if (err)
			return err;
	}
	return 0;
}

/* ---- records ---- */

static int heap_event(struct client *c, uint32_t tid, const struct shm_rec_heap *r)
{
	unsigned fnf = shm_fn_info[r->hdr.fn].flags;
	int64_t ns = to_ns(c, r->t_begin);
	int64_t end_ns = r->hdr.flags & SHM_F_TIMED ? to_ns(c, r->t_end) : -1;
	int err = 0;

	if (r->hdr.flags & SHM_F_FAILED)
		return 0;
	if (fnf & SHM_FNF_FREE) {
		/* realloc: the old block goes unless the call failed
		 * (NULL for a non-zero size); realloc(p, 0) frees p. */
		uint64_t old = fnf & SHM_FNF_ALLOC ? r->aux : r->ptr;
		int gone = !(fnf & SHM_FNF_ALLOC) || r->ptr || r->size == 0;
		int64_t id = old && gone ? ptrmap_take(&c->heap, old) : 0;

		if (id)
			err = store_alloc_free(c->co->store, id, r->hdr.fn, tid, ns, end_ns);
	}
	if (!err && (fnf & SHM_FNF_ALLOC) && r->ptr) {
		int sampled = !!(r->hdr.flags & SHM_F_SAMPLED);
		double size = (double)r->size;
		struct store_alloc a = {
			.proc_id = c->proc_id, .space = "host", .device = -1,
			.ptr = r->ptr, .size = r->size, .sampled = sampled,
			.weight = size, .fn = r->hdr.fn, .tid = tid,
			.ns = ns, .end_ns = end_ns,
		};
		int64_t id;

		/* P(sampled) = 1 - exp(-size / mean bytes between samples). */
		if (sampled && r->size && c->sample_bytes > 0)
			a.weight = size / -expm1(-size / c->sample_bytes);
		err = store_alloc_add(c->co->store, &a, &id);
		if (!err)
			err = ptrmap_put(&c->heap, r->ptr, id);
	}
	return err;
}

static const char *cuda_space(uint16_t fn)
{
	switch (fn) {
	case SHM_FN_CUDA_MALLOC_HOST:
	case SHM_FN_CUDA_HOST_ALLOC:
		return "pinned";
	case SHM_FN_CUDA_MALLOC_MANAGED:
		return "managed";
	default:
		return "device";
	}
}

static int cuda_event(struct client *c, uint32_t tid, const struct shm_rec_cuda *r)
{
	unsigned fnf = shm_fn_info[r->hdr.fn].flags;
	int64_t ns = to_ns(c, r->t_begin);
	int timed = !!(r->hdr.flags & SHM_F_TIMED);
	int64_t end_ns = timed ? to_ns(c, r->t_end) : ns;
	int err = store_cuda_add(c->co->store, c->proc_id, tid, r, ns, end_ns);

	if (err || r->ret != 0 || (r->hdr.flags & SHM_F_FAILED) || !r->ptr)
		return err;
	if (fnf & SHM_FNF_ALLOC) {
		struct store_alloc a = {
			.proc_id = c->proc_id, .space = cuda_space(r->hdr.fn),
			.device = r->device, .ptr = r->ptr, .size = r->bytes,
			.weight = (double)r->bytes, .fn = r->hdr.fn, .tid = tid,
			.ns = ns, .end_ns = timed ? end_ns : -1,
		};
		int64_t id;

		err = store_alloc_add(c->co->store, &a, &id);
		if (!err)
			err = ptrmap_put(&c->cuda, r->ptr, id);
	} else if (fnf & SHM_FNF_FREE) {
		int64_t id = ptrmap_take(&c->cuda, r->ptr);

		if (id)
			err = store_alloc_free(c->co->store, id, r->hdr.fn, tid, ns,
					       timed ? end_ns : -1);
	}
	return err;
}

/* A new owner (generation) restarts the baseline of the counters. */
static void sync_owner(struct client *c, uint32_t i)
{
	struct slot_state *ss = &c->slots[i];
	uint64_t gen = __atomic_load_n(&slot_at(c, i)->generation, __ATOMIC_ACQUIRE);

	if (gen == ss->generation)
		return;
	ss->generation = gen;
	ss->dropped = 0;
	memset(ss->count, 0, sizeof(ss->count));
	memset(ss->bytes, 0, sizeof(ss->bytes));
}

/* Difference since the last store; a counter that went backwards was
 * restarted by its owner, so all of it is new. */
static uint64_t delta(uint64_t *stored, uint64_t now)
{
	uint64_t d = now >= *stored ? now - *stored : now;

	*stored = now;
	return d;
}

static int flush_slot(struct client *c, uint32_t i)
{
	struct shm_slot *sl = slot_at(c, i);
	struct slot_state *ss = &c->slots[i];
	uint32_t tid = __atomic_load_n(&sl->tid, __ATOMIC_RELAXED);
	uint64_t d;
	int err = 0;

	sync_owner(c, i);
	for (uint16_t fn = 1; !err && fn < SHM_FN_COUNT; fn++) {
		uint64_t dc = delta(&ss->count[fn], __atomic_load_n(&sl->count[fn], __ATOMIC_RELAXED));
		uint64_t db = delta(&ss->bytes[fn], __atomic_load_n(&sl->bytes[fn], __ATOMIC_RELAXED));

		if (dc || db)
			err = store_count_add(c->co->store, c->proc_id, tid, fn, dc, db);
	}
	d = delta(&ss->dropped, __atomic_load_n(&sl->dropped, __ATOMIC_RELAXED));
	if (!err && d)
		err = store_drop_add(c->co->store, c->proc_id, tid, "ring_full", d);
	return err;
}

/* A retired slot is drained: store its totals, zero its counters and hand
 * it back to the producer. */
static int free_slot(struct client *c, uint32_t i)
{
	struct shm_slot *sl = slot_at(c, i);
	struct slot_state *ss = &c->slots[i];
	int err = flush_slot(c, i);

	if (err)
		return err;
	memset(sl->count, 0, sizeof(sl->count));
	memset(sl->bytes, 0, sizeof(sl->bytes));
	sl->dropped = 0;
	ss->dropped = 0;
	memset(ss->count, 0, sizeof(ss->count));
	memset(ss->bytes, 0, sizeof(ss->bytes));
	__atomic_store_n(&sl->state, SHM_SLOT_FREE, __ATOMIC_RELEASE);
	return 0;
}

/* Stops slot i for good after a malformed record. */
__attribute__((format(printf, 4, 5)))
static int bad_slot(struct client *c, uint32_t i, int counted, const char *fmt, ...)
{
	uint32_t tid = __atomic_load_n(&slot_at(c, i)->tid, __ATOMIC_RELAXED);
	char why[200];
	va_list ap;
	int err = 0;

	c->slots[i].bad = 1;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (counted)
		err = store_drop_add(c->co->store, c->proc_id, tid, "malformed", 1);
	return err ? err : reject(c, "slot %u: %s", i, why);
}

static int drain_slot(struct client *c, uint32_t i)
{
	union {
		struct shm_rec_hdr h;
		struct shm_rec_heap heap;
		struct shm_rec_cuda cuda;
	} rec;
	struct shm_slot *sl = slot_at(c, i);
	struct slot_state *ss = &c->slots[i];
	const unsigned char *ring = (const unsigned char *)sl + SHM_SLOT_CTL_BYTES;
	uint32_t state = __atomic_load_n(&sl->state, __ATOMIC_ACQUIRE);
	uint64_t head, tail = ss->tail;
	uint32_t tid;
	int err = 0;

	if (state == SHM_SLOT_FREE)
		return 0;
	if (state != SHM_SLOT_ACTIVE && state != SHM_SLOT_RETIRED)
		return bad_slot(c, i, 0, "state %u", state);
	head = __atomic_load_n(&sl->head, __ATOMIC_ACQUIRE);
	tid = __atomic_load_n(&sl->tid, __ATOMIC_RELAXED);
	sync_owner(c, i);
	if (head - tail > c->ring_bytes || (head - tail) % 8)
		return bad_slot(c, i, 0, "head %llu is not within a ring of tail %llu",
				(unsigned long long)head, (unsigned long long)tail);
	while (tail != head && !err) {
		size_t pos = tail & (c->ring_bytes - 1);
		size_t avail = head - tail, room = c->ring_bytes - pos;
		size_t n = sizeof(rec) < avail ? sizeof(rec) : avail;
		const struct shm_fn_info *fi;

		memcpy(&rec, ring + pos, n < room ? n : room);
		if (rec.h.size < 8 || rec.h.size % 8 || rec.h.size > avail || rec.h.size > room) {
			err = -EBADMSG;
			break;
		}
		fi = rec.h.fn < SHM_FN_COUNT ? &shm_fn_info[rec.h.fn] : &shm_fn_info[0];
		switch (rec.h.type) {
		case SHM_REC_PAD:
			err = pos + rec.h.size == c->ring_bytes ? 0 : -EBADMSG;
			break;
		case SHM_REC_HEAP:
			if (rec.h.size != sizeof(rec.heap) || fi->family != SHM_FAMILY_HEAP)
				err = -EBADMSG;
			else
				err = heap_event(c, tid, &rec.heap);
			break;
		case SHM_REC_CUDA:
			if (rec.h.size != sizeof(rec.cuda) || fi->family != SHM_FAMILY_CUDA)
				err = -EBADMSG;
			else
				err = cuda_event(c, tid, &rec.cuda);
			break;
		default:
			err = -EBADMSG;
		}
		if (!err)
			tail += rec.h.size;
	}
	ss->tail = tail;
	__atomic_store_n(&sl->tail, tail, __ATOMIC_RELEASE);
	if (err == -EBADMSG)
		return bad_slot(c, i, 1, "bad record (type %u, size %u, fn %u) at byte %llu",
				rec.h.type, rec.h.size, rec.h.fn, (unsigned long long)tail);
	if (!err && state == SHM_SLOT_RETIRED)
		err = free_slot(c, i);
	return err;
}

int client_drain(struct client *c)
{
	uint32_t hwm;
	int bad = 0;

	if (!c->region)
		return 0;
	hwm = __atomic_load_n(&c->region->slots_hwm, __ATOMIC_ACQUIRE);
	if (hwm > c->nslots)
		bad = reject(c, "slots_hwm %u exceeds nslots %u", hwm, c->nslots);
	for (uint32_t i = 0; i < hwm && i < c->nslots; i++) {
		int err = c->slots[i].bad ? 0 : drain_slot(c, i);

		if (err == -EBADMSG)
			bad = err;
		else if (err)
			return err;
	}
	__atomic_store_n(&c->region->heartbeat, ++c->heartbeat, __ATOMIC_RELEASE);
	return bad;
}

int client_flush_counts(struct client *c)
{
	uint32_t hwm;
	uint64_t d;
	int err = 0;

	if (!c->region)
		return 0;
	hwm = __atomic_load_n(&c->region->slots_hwm, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; !err && i < hwm && i < c->nslots; i++)
		if (__atomic_load_n(&slot_at(c, i)->state, __ATOMIC_ACQUIRE) != SHM_SLOT_FREE)
			err = flush_slot(c, i);
	d = delta(&c->no_slot_stored,
		  __atomic_load_n(&c->region->dropped_no_slot, __ATOMIC_RELAXED));
	if (!err && d)
		err = store_drop_add(c->co->store, c->proc_id, 0, "no_slot", d);
	return err;
}

int client_end(struct client *c, enum client_end why, int64_t now_ns)
{
	static const char *const reasons[] = {
		[CLIENT_REJECTED] = "rejected", [CLIENT_SHUTDOWN] = "shutdown",
	};
	const char *reason;
	int err;

	if (c->ended)
		return 0;
	c->ended = 1;
	err = client_drain(c);
	if (err == -EBADMSG) {
		why = CLIENT_REJECTED;
		err = 0;
	}
	if (!err)
		err = client_flush_counts(c);
	if (why == CLIENT_REJECTED || c->rejected)
		reason = reasons[CLIENT_REJECTED];
	else if (why == CLIENT_SHUTDOWN)
		reason = reasons[CLIENT_SHUTDOWN];
	else
		reason = c->bye ? "exit" : "disconnect";
	if (!err && c->proc_id)
		err = store_process_end(c->co->store, c->proc_id,
					c->bye ? to_ns(c, c->bye_ts) : now_ns, reason);
	if (!err)
		err = store_commit(c->co->store);
	if (!err && c->proc_id)
		log_debug("pid %u (proc_id %lld) ended: %s", c->pid,
			  (long long)c->proc_id, reason);
	return err;
}

struct client *client_new(struct collector *co, int fd)
{
	struct client *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->co = co;
	c->fd = fd;
	c->next = co->clients;
	if (c->next)
		c->next->pprev = &c->next;
	c->pprev = &co->clients;
	co->clients = c;
	return c;
}

int client_fd(const struct client *c)
{
	return c->fd;
}

int64_t client_proc_id(const struct client *c)
{
	return c->proc_id;
}

int client_ended(const struct client *c)
{
	return c->ended;
}

struct client *client_next(const struct client *c)
{
	return c->next;
}

void client_free(struct client *c)
{
	if (!c)
		return;
	*c->pprev = c->next;
	if (c->next)
		c->next->pprev = c->pprev;
	if (c->map)
		munmap(c->map, c->map_bytes);
	if (c->fd >= 0)
		close(c->fd);
	for (size_t i = 0; i < c->nstrings; i++)
		free(c->strings[i].text);
	free(c->strings);
	free(c->slots);
	free(c->host);
	ptrmap_free(&c->heap);
	ptrmap_free(&c->cuda);
	free(c);
}
