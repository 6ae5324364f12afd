/*
 * A client's life: client_new() on accept, HELLO (validated, region mapped,
 * processes row), then any number of STRING/THREAD/GPU_STATUS/KICK messages
 * and drain passes, then BYE and/or the socket closing, and client_end().
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
#include <time.h>
#include <unistd.h>

#include "clock_ns.h"
#include "log.h"
#include "ptrmap.h"
#include "utf8.h"
#include "wire.h"

#define RECV_BATCH 64          /* messages per wake-up, for fairness */
#define FDS_MAX 8              /* room to receive (and close) extra fds */
#define RANGE_DEPTH_MAX 4096u  /* push ranges remembered per thread */

/* libstdc++'s demangler (the Itanium C++ ABI's), declared here so that the
 * collector stays C.  Returns a malloc'd string, or NULL with *status
 * non-zero when name is not a mangled name. */
extern char *__cxa_demangle(const char *name, char *buf, size_t *len, int *status);

struct open_range {
	int64_t id; /* ranges rowid */
	uint32_t domain_id;
};

struct slot_state {
	uint64_t tail;
	uint64_t generation;
	uint64_t dropped;
	uint64_t count[SHM_FN_COUNT];
	uint64_t bytes[SHM_FN_COUNT];
	int bad;
	/* The owner's open push ranges, innermost last (at most
	 * RANGE_DEPTH_MAX), and how many more are open beyond those; a new
	 * owner (generation) starts with none. */
	struct open_range *ranges;
	uint32_t nranges, ranges_cap, ranges_lost;
};

/* Big enough for any record, the largest being a stack of SHM_STACK_MAX
 * frames: the drain copies each one out whole. */
union rec {
	struct shm_rec_hdr h;
	struct shm_rec_heap heap;
	struct shm_rec_cuda cuda;
	struct shm_rec_kernel kernel;
	struct shm_rec_memcpy memcpy;
	struct shm_rec_memset memset;
	struct shm_rec_gpu_sync sync;
	struct shm_rec_api api;
	struct shm_rec_range range;
	struct shm_rec_mark mark;
	struct shm_rec_counter counter;
	struct shm_rec_module module;
	struct shm_rec_gpu_window window;
	struct {
		struct shm_rec_stack h;
		uint64_t pc[SHM_STACK_MAX];
	} stack;
	struct {
		struct shm_rec_pystack h;
		struct shm_pyframe frame[SHM_STACK_MAX];
	} pystack;
};

/* Where a pass stands in one slot: the next record, copied out. */
struct cursor {
	uint32_t slot;
	uint32_t tid;
	uint32_t state;
	uint64_t head, tail;
	uint64_t key; /* when the next record's event took effect (rec_key()) */
	union rec rec;
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
	uint64_t cupti_stored;
	uint64_t heartbeat;
	uint32_t malloc_mode;
	struct ptrmap heap, cuda;         /* live blocks */
	struct ptrmap heap_old, cuda_old; /* blocks displaced by a late free */
	struct cursor *cursors;           /* nslots of them, for drain() */
	struct cursor **frontier, **heap_of;
	struct ptrmap startend; /* open START/END ranges: range id -> rowid */
	int bye;
	int exec_next; /* a later HELLO came from this pid: it exec'd */
	uint64_t bye_ts;
	int rejected;
	int ended;
	int gpu_sampled; /* processes.gpu_sampled_since_ns is stored */
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
	c->cursors = calloc(h->nslots, sizeof(*c->cursors));
	c->frontier = calloc(h->nslots, sizeof(*c->frontier));
	c->heap_of = calloc(h->nslots, sizeof(*c->heap_of));
	if (!c->slots || !c->cursors || !c->frontier || !c->heap_of)
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

/*
 * exec() keeps the pid and closes the old image's socket without a BYE, and
 * the new image says HELLO again at once.  So the same pid on the same host
 * saying HELLO while its old connection lives, or seconds after it closed
 * without BYE, means the old one exec'd.
 */
#define EXEC_WINDOW_NS 2000000000ll

static int mark_exec(struct client *c, int64_t start_ns)
{
	for (struct client *o = c->co->clients; o; o = o->next)
		if (o != c && !o->ended && o->proc_id && o->pid == c->pid &&
		    o->host_len == c->host_len && !memcmp(o->host, c->host, c->host_len)) {
			o->exec_next = 1;
			return 0;
		}
	return store_process_exec(c->co->store, c->pid, c->host, c->host_len,
				  start_ns - EXEC_WINDOW_NS);
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
	c->malloc_mode = h.malloc_mode;
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
		err = mark_exec(c, (int64_t)h.start_mono_ns);
	if (!err)
		err = store_process_add(c->co->store, &p, &c->proc_id);
	if (!err)
		log_debug("pid %u connected as proc_id %lld", c->pid, (long long)c->proc_id);
out:
	free(argv);
	return err;
}

/* ---- other messages ---- */

/*
 * Strings go to the store, not to memory: a process may define many (every
 * kernel, every NVTX name), and the one thing the collector itself needs
 * from them, a thread's name, the store finds with the THREAD row's insert.
 * A STRING always precedes its use on the socket; records may refer to ids
 * whose STRING is still in flight, so their ids are not checked.
 */
static int string_msg(struct client *c, const char *msg, size_t len)
{
	static char text[SHM_MSG_MAX + 1]; /* the text, NUL-terminated */
	struct shm_msg_string m;
	char *demangled = NULL;
	int status = -1, err;

	if (len < sizeof(m))
		return reject(c, "STRING of %zu bytes", len);
	memcpy(&m, msg, sizeof(m));
	if (len != sizeof(m) + (uint64_t)m.len || m.id == 0)
		return reject(c, "malformed STRING (id %u, %u bytes)", m.id, m.len);
	memcpy(text, msg + sizeof(m), m.len);
	text[m.len] = 0;
	/* CUPTI gives kernel names mangled; readers want them as written. */
	if (m.len > 2 && text[0] == '_' && text[1] == 'Z' && strlen(text) == m.len)
		demangled = __cxa_demangle(text, NULL, NULL, &status);
	err = store_string_add(c->co->store, c->proc_id, m.id, text, m.len,
			       status == 0 ? demangled : NULL);
	free(demangled);
	return err;
}

static int thread_msg(struct client *c, const char *msg, size_t len)
{
	struct shm_msg_thread m;

	if (len != sizeof(m))
		return reject(c, "THREAD of %zu bytes", len);
	memcpy(&m, msg, sizeof(m));
	if (m.slot >= c->nslots)
		return reject(c, "THREAD names slot %u of %u", m.slot, c->nslots);
	return store_thread_add(c->co->store, c->proc_id, m.tid, m.name_id,
				to_ns(c, m.ts));
}

static int gpu_status_msg(struct client *c, const char *msg, size_t len)
{
	struct shm_msg_gpu_status m;

	if (len < sizeof(m))
		return reject(c, "GPU_STATUS of %zu bytes", len);
	memcpy(&m, msg, sizeof(m));
	if (len != sizeof(m) + (uint64_t)m.len)
		return reject(c, "GPU_STATUS of %zu bytes with %u of text", len, m.len);
	if (m.status < SHM_GPU_ACTIVE || m.status > SHM_GPU_DISABLED)
		return reject(c, "GPU_STATUS status %u", m.status);
	return store_process_gpu_status(c->co->store, c->proc_id, m.status,
					msg + sizeof(m), m.len);
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
	case SHM_MSG_GPU_STATUS:
		err = gpu_status_msg(c, msg, len);
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

/*
 * Blocks move between threads: one thread's free often ends a block that
 * another allocated, and the two records sit in different rings.  So a
 * pass merges the process's rings in time order (see drain()), and every
 * block keeps the instant it became live.  A record published late can
 * still arrive after a newer block took the same address; the displaced
 * block then waits in *_old, and a free that began before the live block
 * existed ends the displaced one instead.
 */
static int64_t block_take(struct ptrmap *live, struct ptrmap *old, uint64_t ptr,
			  uint64_t free_ts)
{
	uint64_t t, t_old;
	int64_t id = ptrmap_take(live, ptr, &t);
	int64_t id_old;

	if (id && free_ts >= t)
		return id;
	id_old = ptrmap_take(old, ptr, &t_old);
	if (id && ptrmap_put(live, ptr, id, t, NULL))
		return -ENOMEM;
	return id_old && free_ts >= t_old ? id_old : 0;
}

static int block_put(struct ptrmap *live, struct ptrmap *old, uint64_t ptr,
		     int64_t id, uint64_t live_ts)
{
	struct ptrmap_entry prev;
	int err = ptrmap_put(live, ptr, id, live_ts, &prev);

	if (!err && prev.key)
		err = ptrmap_put(old, ptr, prev.val, prev.t, NULL);
	return err;
}

/* A block is live from the end of the call that returned it; a free acts
 * from the start of its call.  Untimed records only have t_begin. */
static uint64_t live_ts(const struct shm_rec_hdr *h, uint64_t t_begin, uint64_t t_end)
{
	return h->flags & SHM_F_TIMED ? t_end : t_begin;
}

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
		int64_t id = old && gone ? block_take(&c->heap, &c->heap_old, old, r->t_begin) : 0;

		if (id < 0)
			return (int)id;
		if (id)
			err = store_alloc_free(c->co->store, id, r->hdr.fn, tid, ns, end_ns);
	}
	/* In sample mode an unsampled record only releases a sampled block
	 * (a realloc whose new block was not chosen). */
	if (!err && (fnf & SHM_FNF_ALLOC) && r->ptr &&
	    (c->malloc_mode != SHM_MALLOC_SAMPLE || (r->hdr.flags & SHM_F_SAMPLED))) {
		int sampled = !!(r->hdr.flags & SHM_F_SAMPLED);
		double size = (double)r->size;
		struct store_alloc a = {
			.proc_id = c->proc_id, .space = "host", .device = -1,
			.ptr = r->ptr, .size = r->size, .sampled = sampled,
			.weight = size, .fn = r->hdr.fn, .tid = tid,
			.ns = ns, .end_ns = end_ns,
			.stack_id = r->stack_id, .pystack_id = r->pystack_id,
		};
		int64_t id;

		/* P(sampled) = 1 - exp(-size / mean bytes between samples). */
		if (sampled && r->size && c->sample_bytes > 0)
			a.weight = size / -expm1(-size / c->sample_bytes);
		err = store_alloc_add(c->co->store, &a, &id);
		if (!err)
			err = block_put(&c->heap, &c->heap_old, r->ptr, id,
					live_ts(&r->hdr, r->t_begin, r->t_end));
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
			.stack_id = r->stack_id, .pystack_id = r->pystack_id,
		};
		int64_t id;

		err = store_alloc_add(c->co->store, &a, &id);
		if (!err)
			err = block_put(&c->cuda, &c->cuda_old, r->ptr, id,
					live_ts(&r->hdr, r->t_begin, r->t_end));
	} else if (fnf & SHM_FNF_FREE) {
		int64_t id = block_take(&c->cuda, &c->cuda_old, r->ptr, r->t_begin);

		if (id < 0)
			return (int)id;
		if (id)
			err = store_alloc_free(c->co->store, id, r->hdr.fn, tid, ns,
					       timed ? end_ns : -1);
	}
	return err;
}

/*
 * Push ranges nest per thread, and a thread's records all sit in its own
 * slot, so the slot keeps the stack (restarted for each new owner).  depth
 * and parent count every open push range of the thread; a POP closes the
 * innermost one of its own domain, as NVTX keeps one stack per domain (so
 * NCCL's ranges interleaved with an application's still pair right).  A
 * POP with nothing open in its domain is the application's (NVTX allows
 * it) and changes nothing.  An application that pushes without popping
 * would grow the stack without bound: past RANGE_DEPTH_MAX the rows are
 * still stored, with their depth, but their ends are not tracked.
 */
static int range_push(struct client *c, struct cursor *cur, const struct shm_rec_range *r)
{
	struct slot_state *ss = &c->slots[cur->slot];
	int64_t parent = ss->nranges ? ss->ranges[ss->nranges - 1].id : 0, id;
	int err;

	if (ss->nranges == ss->ranges_cap && ss->ranges_cap < RANGE_DEPTH_MAX) {
		uint32_t cap = ss->ranges_cap ? ss->ranges_cap * 2 : 16;
		struct open_range *grown = realloc(ss->ranges, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		ss->ranges = grown;
		ss->ranges_cap = cap;
	}
	err = store_range_open(c->co->store, c->proc_id, cur->tid, "push", r, to_ns(c, r->ts),
			       ss->nranges + ss->ranges_lost, parent, &id);
	if (err)
		return err;
	if (ss->nranges < ss->ranges_cap && !ss->ranges_lost)
		ss->ranges[ss->nranges++] = (struct open_range){ id, r->domain_id };
	else
		ss->ranges_lost++;
	return 0;
}

static int range_pop(struct client *c, struct cursor *cur, const struct shm_rec_range *r)
{
	struct slot_state *ss = &c->slots[cur->slot];
	uint32_t i = ss->nranges;
	int64_t id;

	if (ss->ranges_lost) {
		ss->ranges_lost--;
		return 0;
	}
	while (i && ss->ranges[i - 1].domain_id != r->domain_id)
		i--;
	if (!i)
		return 0;
	id = ss->ranges[i - 1].id;
	memmove(&ss->ranges[i - 1], &ss->ranges[i], (ss->nranges - i) * sizeof(*ss->ranges));
	ss->nranges--;
	return store_range_close(c->co->store, id, to_ns(c, r->ts));
}

/* START/END pair by id across threads; the merge orders them by time, so
 * an END meets its START unless the START was never sent.  An unknown or
 * repeated END changes nothing. */
static int range_event(struct client *c, struct cursor *cur, const struct shm_rec_range *r)
{
	int64_t id;
	int err;

	switch (r->op) {
	case SHM_RANGE_PUSH:
		return range_push(c, cur, r);
	case SHM_RANGE_POP:
		return range_pop(c, cur, r);
	case SHM_RANGE_START:
		err = store_range_open(c->co->store, c->proc_id, cur->tid, "startend", r,
				       to_ns(c, r->ts), 0, 0, &id);
		/* id 0 cannot be a key: such a range stays open. */
		if (!err && r->id)
			err = ptrmap_put(&c->startend, r->id, id, r->ts, NULL);
		return err;
	default: /* SHM_RANGE_END: cursor_peek() let no other op through */
		id = r->id ? ptrmap_take(&c->startend, r->id, NULL) : 0;
		return id ? store_range_close(c->co->store, id, to_ns(c, r->ts)) : 0;
	}
}

/* Every window record repeats since, so the first one to arrive sets it
 * (even if an earlier window was dropped) and the rest need no UPDATE.  An
 * empty one (start == end) only announces sampling: a process can end
 * before its first window. */
static int gpu_window(struct client *c, const struct shm_rec_gpu_window *r)
{
	int err = r->start == r->end ? 0 :
		  store_gpu_window_add(c->co->store, c->proc_id, to_ns(c, r->start),
				       to_ns(c, r->end), r->calls);

	if (!err && !c->gpu_sampled) {
		err = store_process_gpu_sampled(c->co->store, c->proc_id, to_ns(c, r->since));
		c->gpu_sampled = !err;
	}
	return err;
}

/* One validated record to its rows. */
static int record(struct client *c, struct cursor *cur)
{
	const union rec *r = &cur->rec;
	struct store *st = c->co->store;

	switch (r->h.type) {
	case SHM_REC_HEAP:
		return heap_event(c, cur->tid, &r->heap);
	case SHM_REC_CUDA:
		return cuda_event(c, cur->tid, &r->cuda);
	case SHM_REC_KERNEL:
		return store_kernel_add(st, c->proc_id, &r->kernel, to_ns(c, r->kernel.start),
					to_ns(c, r->kernel.end));
	case SHM_REC_MEMCPY:
		return store_memcpy_add(st, c->proc_id, &r->memcpy, to_ns(c, r->memcpy.start),
					to_ns(c, r->memcpy.end));
	case SHM_REC_MEMSET:
		return store_memset_add(st, c->proc_id, &r->memset, to_ns(c, r->memset.start),
					to_ns(c, r->memset.end));
	case SHM_REC_GPU_SYNC:
		return store_gpu_sync_add(st, c->proc_id, &r->sync, to_ns(c, r->sync.start),
					  to_ns(c, r->sync.end));
	case SHM_REC_API:
		return store_api_add(st, c->proc_id, cur->tid, &r->api, to_ns(c, r->api.start),
				     to_ns(c, r->api.end));
	case SHM_REC_RANGE:
		return range_event(c, cur, &r->range);
	case SHM_REC_MARK:
		return store_mark_add(st, c->proc_id, cur->tid, &r->mark, to_ns(c, r->mark.ts));
	case SHM_REC_STACK:
		return store_stack_add(st, c->proc_id, r->stack.h.stack_id, r->stack.pc,
				       r->stack.h.depth);
	case SHM_REC_PYSTACK:
		return store_pystack_add(st, c->proc_id, r->pystack.h.stack_id,
					 r->pystack.frame, r->pystack.h.depth);
	case SHM_REC_MODULE:
		return store_module_add(st, c->proc_id, &r->module, to_ns(c, r->module.ts));
	case SHM_REC_GPU_WINDOW:
		return gpu_window(c, &r->window);
	default: /* SHM_REC_COUNTER: cursor_peek() let no other type through */
		return store_counter_add(st, c->proc_id, cur->tid, &r->counter,
					 to_ns(c, r->counter.ts));
	}
}

/* A new owner (generation) restarts the baseline of the counters. */
static void sync_owner(struct client *c, uint32_t i)
{
	struct slot_state *ss = &c->slots[i];
	uint64_t gen = __atomic_load_n(&slot_at(c, i)->generation, __ATOMIC_ACQUIRE);

	if (gen == ss->generation)
		return;
	ss->generation = gen;
	ss->nranges = 0;
	ss->ranges_lost = 0;
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

/* The instant that orders a record against other threads' records: when a
 * block became live for an allocation, when the call, the GPU work or the
 * GPU sampling window began otherwise, the instant itself for ranges,
 * marks, counters and modules.  GPU records come late (CUPTI delivers them
 * in batches; a window is sent when it closes) but stamped early: below
 * the limit, so they never wait.  Stacks have no time: they take
 * prev, the key of the record before them in their ring in this pass (0
 * first in a pass), so they keep their place in the ring's order and never
 * wait (prev was merged, so it is within the limit); their ids stay
 * unresolved in the store, so nothing depends on where they land. */
static uint64_t rec_key(const union rec *r, uint64_t prev)
{
	unsigned fnf = shm_fn_info[r->h.fn].flags;

	switch (r->h.type) {
	case SHM_REC_HEAP:
		return (fnf & SHM_FNF_FREE) ? r->heap.t_begin
					    : live_ts(&r->h, r->heap.t_begin, r->heap.t_end);
	case SHM_REC_CUDA:
		return (fnf & SHM_FNF_ALLOC) ? live_ts(&r->h, r->cuda.t_begin, r->cuda.t_end)
					     : r->cuda.t_begin;
	case SHM_REC_KERNEL:
		return r->kernel.start;
	case SHM_REC_MEMCPY:
		return r->memcpy.start;
	case SHM_REC_MEMSET:
		return r->memset.start;
	case SHM_REC_GPU_SYNC:
		return r->sync.start;
	case SHM_REC_API:
		return r->api.start;
	case SHM_REC_RANGE:
		return r->range.ts;
	case SHM_REC_MARK:
		return r->mark.ts;
	case SHM_REC_MODULE:
		return r->module.ts;
	case SHM_REC_GPU_WINDOW:
		return r->window.start;
	case SHM_REC_STACK:
	case SHM_REC_PYSTACK:
		return prev;
	default:
		return r->counter.ts;
	}
}

/* The size of each record type that carries no function (hdr.fn is
 * SHM_FN_NONE); 0 for the others. */
static const uint16_t plain_size[] = {
	[SHM_REC_KERNEL] = sizeof(struct shm_rec_kernel),
	[SHM_REC_MEMCPY] = sizeof(struct shm_rec_memcpy),
	[SHM_REC_MEMSET] = sizeof(struct shm_rec_memset),
	[SHM_REC_GPU_SYNC] = sizeof(struct shm_rec_gpu_sync),
	[SHM_REC_API] = sizeof(struct shm_rec_api),
	[SHM_REC_RANGE] = sizeof(struct shm_rec_range),
	[SHM_REC_MARK] = sizeof(struct shm_rec_mark),
	[SHM_REC_COUNTER] = sizeof(struct shm_rec_counter),
	[SHM_REC_MODULE] = sizeof(struct shm_rec_module),
	[SHM_REC_GPU_WINDOW] = sizeof(struct shm_rec_gpu_window),
};

/* Whether a record of a type in plain_size[] is well formed. */
static int plain_ok(const union rec *r)
{
	if (r->h.type >= sizeof(plain_size) / sizeof(plain_size[0]) ||
	    !plain_size[r->h.type] || r->h.size != plain_size[r->h.type] ||
	    r->h.fn != SHM_FN_NONE)
		return 0;
	if (r->h.type == SHM_REC_API)
		return r->api.domain == SHM_API_RUNTIME || r->api.domain == SHM_API_DRIVER;
	if (r->h.type == SHM_REC_RANGE)
		return r->range.op >= SHM_RANGE_PUSH && r->range.op <= SHM_RANGE_END;
	if (r->h.type == SHM_REC_MODULE)
		return r->module.build_id_len <= sizeof(r->module.build_id) &&
		       r->module.unload <= 1 && r->module.lo <= r->module.hi;
	if (r->h.type == SHM_REC_GPU_WINDOW)
		return r->window.since <= r->window.start && r->window.start <= r->window.end;
	return 1;
}

/* Whether a stack record (STACK or PYSTACK) is well formed: a non-zero id
 * and exactly the size its depth needs.  The header and the fixed part
 * share one layout in both types. */
static int stack_ok(const union rec *r)
{
	size_t fixed = sizeof(struct shm_rec_stack);
	size_t frame = r->h.type == SHM_REC_STACK ? sizeof(r->stack.pc[0])
						  : sizeof(r->pystack.frame[0]);

	_Static_assert(sizeof(struct shm_rec_stack) == sizeof(struct shm_rec_pystack) &&
		       offsetof(struct shm_rec_stack, stack_id) ==
		       offsetof(struct shm_rec_pystack, stack_id) &&
		       offsetof(struct shm_rec_stack, depth) ==
		       offsetof(struct shm_rec_pystack, depth), "stack headers");
	return r->h.fn == SHM_FN_NONE && r->h.size >= fixed && r->stack.h.stack_id &&
	       r->stack.h.depth <= SHM_STACK_MAX &&
	       r->h.size == fixed + frame * r->stack.h.depth;
}

/* Copies out and checks the record at cur->tail, skipping PAD.  Returns 1
 * when a record is ready, 0 at head, -EBADMSG for a malformed record.
 * The header is copied and checked first, then only the record's own
 * bytes follow it (most records are far smaller than a stack). */
static int cursor_peek(struct client *c, struct cursor *cur)
{
	const unsigned char *ring = (const unsigned char *)slot_at(c, cur->slot) + SHM_SLOT_CTL_BYTES;
	uint64_t prev = cur->key;

	while (cur->tail != cur->head) {
		size_t pos = cur->tail & (c->ring_bytes - 1);
		size_t avail = cur->head - cur->tail, room = c->ring_bytes - pos;
		union rec *r = &cur->rec;
		const struct shm_fn_info *fi;

		if (avail < sizeof(r->h))
			return -EBADMSG;
		memcpy(&r->h, ring + pos, sizeof(r->h));
		if (r->h.size < 8 || r->h.size % 8 || r->h.size > avail || r->h.size > room)
			return -EBADMSG;
		if (r->h.type == SHM_REC_PAD) {
			if (pos + r->h.size != c->ring_bytes)
				return -EBADMSG;
			cur->tail += r->h.size;
			continue;
		}
		if (r->h.size > sizeof(*r))
			return -EBADMSG;
		memcpy((unsigned char *)r + sizeof(r->h), ring + pos + sizeof(r->h),
		       r->h.size - sizeof(r->h));
		fi = r->h.fn < SHM_FN_COUNT ? &shm_fn_info[r->h.fn] : &shm_fn_info[0];
		switch (r->h.type) {
		case SHM_REC_HEAP:
			if (r->h.size != sizeof(r->heap) || fi->family != SHM_FAMILY_HEAP)
				return -EBADMSG;
			break;
		case SHM_REC_CUDA:
			if (r->h.size != sizeof(r->cuda) || fi->family != SHM_FAMILY_CUDA)
				return -EBADMSG;
			break;
		case SHM_REC_STACK:
		case SHM_REC_PYSTACK:
			if (!stack_ok(r))
				return -EBADMSG;
			break;
		default:
			if (!plain_ok(r))
				return -EBADMSG;
		}
		cur->key = rec_key(r, prev);
		return 1;
	}
	return 0;
}

/* A binary min-heap of cursors by key: the merge's frontier. */
static void heap_sift_up(struct cursor **h, size_t i)
{
	while (i && h[(i - 1) / 2]->key > h[i]->key) {
		struct cursor *t = h[i];

		h[i] = h[(i - 1) / 2];
		h[(i - 1) / 2] = t;
		i = (i - 1) / 2;
	}
}

static void heap_sift_down(struct cursor **h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		struct cursor *t;

		if (l < n && h[l]->key < h[m]->key)
			m = l;
		if (l + 1 < n && h[l + 1]->key < h[m]->key)
			m = l + 1;
		if (m == i)
			return;
		t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

/* Opens slot i for a pass; returns 1 if it has records to merge. */
static int cursor_open(struct client *c, struct cursor *cur, uint32_t i)
{
	struct shm_slot *sl = slot_at(c, i);

	cur->slot = i;
	cur->state = __atomic_load_n(&sl->state, __ATOMIC_ACQUIRE);
	if (cur->state == SHM_SLOT_FREE)
		return 0;
	if (cur->state != SHM_SLOT_ACTIVE && cur->state != SHM_SLOT_RETIRED)
		return bad_slot(c, i, 0, "state %u", cur->state);
	cur->head = __atomic_load_n(&sl->head, __ATOMIC_ACQUIRE);
	cur->tid = __atomic_load_n(&sl->tid, __ATOMIC_RELAXED);
	cur->tail = c->slots[i].tail;
	cur->key = 0; /* what a stack first in this pass takes (rec_key()) */
	sync_owner(c, i);
	if (cur->head - cur->tail > c->ring_bytes || (cur->head - cur->tail) % 8)
		return bad_slot(c, i, 0, "head %llu is not within a ring of tail %llu",
				(unsigned long long)cur->head, (unsigned long long)cur->tail);
	return 1;
}

static int cursor_fail(struct client *c, struct cursor *cur)
{
	return bad_slot(c, cur->slot, 1, "bad record (type %u, size %u, fn %u) at byte %llu",
			cur->rec.h.type, cur->rec.h.size, cur->rec.h.fn,
			(unsigned long long)cur->tail);
}

/* Hands consumed bytes back to the producer; frees a retired slot once
 * it is empty. */
static int cursor_close(struct client *c, struct cursor *cur)
{
	struct shm_slot *sl = slot_at(c, cur->slot);

	c->slots[cur->slot].tail = cur->tail;
	__atomic_store_n(&sl->tail, cur->tail, __ATOMIC_RELEASE);
	if (cur->state == SHM_SLOT_RETIRED && cur->tail == cur->head && !c->slots[cur->slot].bad)
		return free_slot(c, cur->slot);
	return 0;
}

/*
 * One pass: the records of all slots, merged by rec_key(), up to `limit`.
 * limit is read before any head: a record stamped before it was published
 * before any record whose call began after it, so every block a merged
 * free refers to has its allocation in this pass or an earlier one.
 * Records past limit wait for the next pass.
 */
static int drain(struct client *c, uint64_t limit)
{
	uint32_t hwm, n = 0, nheap = 0;
	int bad = 0, err = 0;

	if (!c->region)
		return 0;
	hwm = __atomic_load_n(&c->region->slots_hwm, __ATOMIC_ACQUIRE);
	if (hwm > c->nslots)
		bad = reject(c, "slots_hwm %u exceeds nslots %u", hwm, c->nslots);
	if (hwm > c->nslots)
		hwm = c->nslots;
	for (uint32_t i = 0; i < hwm; i++) {
		struct cursor *cur = &c->cursors[n];
		int r = c->slots[i].bad ? 0 : cursor_open(c, cur, i);

		if (r == -EBADMSG)
			bad = r;
		else if (r < 0)
			return r;
		else if (r)
			c->frontier[n++] = cur;
	}
	for (uint32_t k = 0; k < n; k++) {
		struct cursor *cur = c->frontier[k];
		int r = cursor_peek(c, cur);

		if (r < 0)
			bad = cursor_fail(c, cur);
		else if (r && cur->key <= limit)
			c->heap_of[nheap++] = cur, heap_sift_up(c->heap_of, nheap - 1);
	}
	while (nheap && !err) {
		struct cursor *cur = c->heap_of[0];
		int r;

		err = record(c, cur);
		if (err)
			break;
		cur->tail += cur->rec.h.size;
		r = cursor_peek(c, cur);
		if (r < 0)
			bad = cursor_fail(c, cur);
		if (r == 1 && cur->key <= limit) {
			heap_sift_down(c->heap_of, nheap, 0);
		} else {
			c->heap_of[0] = c->heap_of[--nheap];
			heap_sift_down(c->heap_of, nheap, 0);
		}
	}
	for (uint32_t k = 0; k < n && !err; k++)
		err = cursor_close(c, c->frontier[k]);
	if (err)
		return err;
	__atomic_store_n(&c->region->heartbeat, ++c->heartbeat, __ATOMIC_RELEASE);
	return bad;
}

/* Now, in the client's record clock. */
static uint64_t record_now(const struct client *c)
{
	if (c->clock == SHM_CLOCK_TSC)
		return __builtin_ia32_rdtsc();
	return clock_ns(CLOCK_MONOTONIC);
}

int client_drain(struct client *c)
{
	return drain(c, record_now(c));
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
	d = delta(&c->cupti_stored,
		  __atomic_load_n(&c->region->dropped_cupti, __ATOMIC_RELAXED));
	if (!err && d)
		err = store_drop_add(c->co->store, c->proc_id, 0, "cupti", d);
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
	err = drain(c, UINT64_MAX);
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
		reason = c->bye ? "exit" : c->exec_next ? "exec" : "disconnect";
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
	for (uint32_t i = 0; c->slots && i < c->nslots; i++)
		free(c->slots[i].ranges);
	free(c->slots);
	ptrmap_free(&c->startend);
	free(c->host);
	ptrmap_free(&c->heap);
	ptrmap_free(&c->cuda);
	ptrmap_free(&c->heap_old);
	ptrmap_free(&c->cuda_old);
	free(c->cursors);
	free(c->frontier);
	free(c->heap_of);
	free(c);
}
