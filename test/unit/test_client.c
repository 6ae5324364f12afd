/*
 * client: control messages and region records, driven without a socket
 * (and once through a socketpair), checked against the rows they produce
 * in a real SQLite store, read back through a second connection.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "sqlexec.h"

#include "collector/client.h"
#include "collector/log.h"
#include "wire.h"

#define RING 4096u
#define NSLOTS 4u

struct region {
	int fd;
	unsigned char *map;
	uint32_t nslots, ring;
};

struct fixture {
	char dir[64], db[96];
	struct collector co;
	struct region r;
	struct client *c;
};

/* ---- a producer, written from common/wire.h ---- */

static void region_make(struct region *r, uint32_t nslots, uint32_t ring)
{
	uint64_t bytes = SHM_REGION_BYTES(nslots, ring);
	struct shm_region *h;

	r->fd = memfd_create("test-region", MFD_ALLOW_SEALING | MFD_CLOEXEC);
	assert_true(r->fd >= 0);
	assert_int_equal(ftruncate(r->fd, (off_t)bytes), 0);
	assert_int_equal(fcntl(r->fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	r->map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
	assert_true(r->map != MAP_FAILED);
	r->nslots = nslots;
	r->ring = ring;
	h = (struct shm_region *)r->map;
	h->magic = SHM_MAGIC;
	h->version = SHM_WIRE_VERSION;
	h->nslots = nslots;
	h->ring_bytes = ring;
}

static void region_drop(struct region *r)
{
	if (r->map)
		munmap(r->map, SHM_REGION_BYTES(r->nslots, r->ring));
	if (r->fd >= 0)
		close(r->fd);
}

static struct shm_region *hdr(struct region *r)
{
	return (struct shm_region *)r->map;
}

static struct shm_slot *slot(struct region *r, uint32_t i)
{
	return (struct shm_slot *)(r->map + SHM_REGION_HDR_BYTES + i * SHM_SLOT_STRIDE(r->ring));
}

static void claim(struct region *r, uint32_t i, uint32_t tid)
{
	struct shm_slot *s = slot(r, i);

	s->tid = tid;
	s->generation++;
	s->state = SHM_SLOT_ACTIVE;
	if (hdr(r)->slots_hwm < i + 1)
		hdr(r)->slots_hwm = i + 1;
}

/* Appends a record, padding to the ring's end first when it does not fit. */
static void push(struct region *r, uint32_t i, const void *rec, size_t size)
{
	struct shm_slot *s = slot(r, i);
	unsigned char *ring = (unsigned char *)s + SHM_SLOT_CTL_BYTES;
	size_t pos = s->head & (r->ring - 1);

	if (r->ring - pos < size) {
		struct shm_rec_hdr pad = { SHM_REC_PAD, (uint16_t)(r->ring - pos), 0, 0 };

		memcpy(ring + pos, &pad, sizeof(pad));
		s->head += r->ring - pos;
		pos = 0;
	}
	assert_true(s->head + size - s->tail <= r->ring);
	memcpy(ring + pos, rec, size);
	s->head += size;
}

/* A heap record in heap order seq (wire.h): a release numbered seq, an
 * allocation seq + 1 (the shim numbers a release before its call and an
 * allocation after it). */
static void push_heap_seq(struct region *r, uint32_t i, uint16_t fn, uint16_t flags,
			  uint64_t t, uint64_t ptr, uint64_t size, uint64_t aux, uint64_t seq)
{
	unsigned fnf = shm_fn_info[fn].flags;
	struct shm_rec_heap h = {
		.hdr = { SHM_REC_HEAP, sizeof(h), fn, flags },
		.t_begin = t, .t_end = t + 7, .ptr = ptr, .size = size, .aux = aux,
		.seq = (fnf & SHM_FNF_ALLOC) && ptr ? seq + 1 : 0,
		.seq_free = (fnf & SHM_FNF_FREE) ? seq : 0,
	};

	push(r, i, &h, sizeof(h));
}

/* The same, in the order of the times the tests give. */
static void push_heap(struct region *r, uint32_t i, uint16_t fn, uint16_t flags,
		      uint64_t t, uint64_t ptr, uint64_t size, uint64_t aux)
{
	push_heap_seq(r, i, fn, flags, t, ptr, size, aux, t);
}

static struct shm_rec_cuda cuda_rec(uint16_t fn, uint64_t t, int32_t ret, uint64_t ptr,
				    uint64_t bytes)
{
	return (struct shm_rec_cuda){
		.hdr = { SHM_REC_CUDA, sizeof(struct shm_rec_cuda), fn, SHM_F_TIMED },
		.t_begin = t, .t_end = t + 100, .ret = ret, .device = 1,
		.ptr = ptr, .bytes = bytes,
	};
}

/* A heap record naming stacks. */
static void push_heap_stacks(struct region *r, uint32_t i, uint16_t fn, uint64_t t,
			     uint64_t ptr, uint64_t size, uint32_t stack_id, uint32_t pystack_id)
{
	struct shm_rec_heap h = {
		.hdr = { SHM_REC_HEAP, sizeof(h), fn, SHM_F_TIMED },
		.t_begin = t, .t_end = t + 7, .ptr = ptr, .size = size,
		.stack_id = stack_id, .pystack_id = pystack_id,
	};

	push(r, i, &h, sizeof(h));
}

/* A STACK record of depth frames, pc[k] = base + k. */
static void push_stack(struct region *r, uint32_t i, uint32_t id, uint32_t depth, uint64_t base)
{
	unsigned char buf[sizeof(struct shm_rec_stack) + 8 * SHM_STACK_MAX];
	struct shm_rec_stack h = {
		.hdr = { SHM_REC_STACK, (uint16_t)(sizeof(h) + 8 * depth), 0, 0 },
		.stack_id = id, .depth = depth,
	};

	memcpy(buf, &h, sizeof(h));
	for (uint32_t k = 0; k < depth; k++) {
		uint64_t pc = base + k;

		memcpy(buf + sizeof(h) + 8 * k, &pc, 8);
	}
	push(r, i, buf, h.hdr.size);
}

/* A PYSTACK record: frame k is (file, func + k, line k + 1). */
static void push_pystack(struct region *r, uint32_t i, uint32_t id, uint32_t depth,
			 uint32_t file, uint32_t func)
{
	unsigned char buf[sizeof(struct shm_rec_pystack) + 16 * SHM_STACK_MAX];
	struct shm_rec_pystack h = {
		.hdr = { SHM_REC_PYSTACK, (uint16_t)(sizeof(h) + 16 * depth), 0, 0 },
		.stack_id = id, .depth = depth,
	};

	memcpy(buf, &h, sizeof(h));
	for (uint32_t k = 0; k < depth; k++) {
		struct shm_pyframe fr = { file, func + k, k + 1, 0 };

		memcpy(buf + sizeof(h) + 16 * k, &fr, sizeof(fr));
	}
	push(r, i, buf, h.hdr.size);
}

static struct shm_rec_module module_rec(uint64_t ts, uint32_t path_id, uint64_t lo,
					uint8_t build_id_len, uint8_t unload)
{
	struct shm_rec_module m = {
		.hdr = { SHM_REC_MODULE, sizeof(m), 0, 0 },
		.ts = ts, .bias = lo - 0x1000, .lo = lo, .hi = lo + 0x5000,
		.path_id = path_id, .build_id_len = build_id_len, .unload = unload,
	};

	for (size_t k = 0; k < build_id_len && k < sizeof(m.build_id); k++)
		m.build_id[k] = (uint8_t)(0xa0 + k);
	return m;
}

/* HELLO for region r; text is exe, argv (NUL-separated), host, and the
 * job key "pgid:1". */
static size_t hello_make(void *buf, const struct region *r, uint32_t pid, uint32_t ppid,
			 uint32_t mode, uint32_t clock, const char *exe,
			 const char *argv, size_t argv_len, const char *host)
{
	struct shm_msg_hello h = {
		.hdr = { SHM_MAGIC, SHM_WIRE_VERSION, SHM_MSG_HELLO, 0, 0 },
		.pid = pid, .ppid = ppid, .uid = 1000, .flags = SHM_HELLO_LOSSLESS,
		.rank = SHM_NO_RANK, .local_rank = 3, .malloc_mode = mode,
		.clock = clock, .sample_bytes = 4096, .start_wall_ns = 1700000000000000000ull,
		.start_mono_ns = 5000, .start_ts = 5000,
		.region_bytes = SHM_REGION_BYTES(r->nslots, r->ring),
		.nslots = r->nslots, .ring_bytes = r->ring,
		.exe_len = (uint16_t)strlen(exe), .argv_len = (uint16_t)argv_len,
		.host_len = (uint16_t)strlen(host), .job_len = 6, .job_kind = SHM_JOB_PGID,
	};
	char *p = (char *)buf + sizeof(h);

	memcpy(p, exe, h.exe_len);
	memcpy(p + h.exe_len, argv, argv_len);
	memcpy(p + h.exe_len + argv_len, host, h.host_len);
	memcpy(p + h.exe_len + argv_len + h.host_len, "pgid:1", 6);
	h.hdr.len = (uint32_t)(sizeof(h) + h.exe_len + argv_len + h.host_len + h.job_len);
	memcpy(buf, &h, sizeof(h));
	return h.hdr.len;
}

/* For a HELLO: the peer is the process it names (as the kernel would say
 * of an honest client). */
static void honest_peer(struct client *c, const void *hello)
{
	struct shm_msg_hello h;

	memcpy(&h, hello, sizeof(h));
	client_set_peer(c, h.pid, h.uid);
}

/* Sends msg to c with a duplicate of fd (the client closes what it gets);
 * a HELLO comes from an honest peer. */
static int deliver(struct client *c, const void *msg, size_t len, int fd)
{
	int dup_fd = fd >= 0 ? dup(fd) : -1;

	if (len >= sizeof(struct shm_msg_hello) &&
	    ((const struct shm_msg_hdr *)msg)->type == SHM_MSG_HELLO)
		honest_peer(c, msg);

	return client_message(c, msg, len, &dup_fd, fd >= 0 ? 1 : 0, 0);
}

static int connect_region(struct fixture *f, struct region *r, uint32_t pid,
			  uint32_t ppid, uint32_t mode, uint32_t clock)
{
	static const char argv[] = "prog\0--x=\"a b\"\0tab\there";
	char buf[1024];
	size_t len = hello_make(buf, r, pid, ppid, mode, clock, "/usr/bin/prog",
				argv, sizeof(argv) - 1, "node1");

	return deliver(f->c, buf, len, r->fd);
}

/* Three processes, pids 42 (f->r, the fixture's client), 43 (r2, c2) and
 * 44 (r3, c3), connected in that order; f->c is c3 after. */
static void connect_three(struct fixture *f, struct client *c2, struct region *r2,
			  struct client *c3, struct region *r3)
{
	region_make(r2, 1, RING);
	region_make(r3, 1, RING);
	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
	f->c = c2;
	assert_int_equal(connect_region(f, r2, 43, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
	f->c = c3;
	assert_int_equal(connect_region(f, r3, 44, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
}

static void send_simple(struct client *c, uint16_t type, size_t len, uint64_t ts)
{
	unsigned char buf[64] = { 0 };
	struct shm_msg_hdr h = { SHM_MAGIC, SHM_WIRE_VERSION, type, (uint32_t)len, 0 };

	memcpy(buf, &h, sizeof(h));
	if (len >= sizeof(h) + 8)
		memcpy(buf + sizeof(h), &ts, 8);
	assert_int_equal(client_message(c, buf, len, NULL, 0, 0), 0);
}

/* ---- reading the store back ---- */

static sqlite3_int64 q_int(struct fixture *f, const char *fmt, ...)
{
	char sql[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(sql, sizeof(sql), fmt, ap);
	va_end(ap);
	assert_int_equal(store_commit(f->co.store), 0);
	return query_int(f->db, sql);
}

static void q_text(struct fixture *f, char *out, size_t n, const char *sql)
{
	assert_int_equal(store_commit(f->co.store), 0);
	query_text(f->db, sql, out, n);
}

/* Like q_int(), without committing first: what another reader sees now. */
static sqlite3_int64 q_seen(struct fixture *f, const char *sql)
{
	return query_int(f->db, sql);
}

/* ---- fixture ---- */

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	log_level = LOG_LVL_ERROR - 1;
	strcpy(f->dir, "/tmp/shimmer-client-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->db, sizeof(f->db), "%s/t.db", f->dir);
	f->co.store = store_open(f->db);
	assert_non_null(f->co.store);
	clock_start(&f->co.clock, 1000000, 1000);
	clock_update(&f->co.clock, 3000000, 2000); /* 1000 ns per 2e6 ticks */
	region_make(&f->r, NSLOTS, RING);
	f->c = client_new(&f->co, -1);
	assert_non_null(f->c);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];

	store_on_commit(NULL, NULL);
	while (f->co.clients)
		client_free(f->co.clients);
	store_close(f->co.store);
	region_drop(&f->r);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

/* ---- HELLO ---- */

static void test_client_hello_row(void **state)
{
	struct fixture *f = *state;
	char text[256];

	assert_int_equal(connect_region(f, &f->r, 42, 7, SHM_MALLOC_SAMPLE, SHM_CLOCK_MONOTONIC), 0);
	assert_int_equal(client_proc_id(f->c), 1);
	assert_int_equal(q_int(f, "SELECT pid FROM processes"), 42);
	assert_int_equal(q_int(f, "SELECT ppid FROM processes"), 7);
	assert_int_equal(q_int(f, "SELECT parent_proc_id FROM processes"), -1000);
	assert_int_equal(q_int(f, "SELECT uid FROM processes"), 1000);
	assert_int_equal(q_int(f, "SELECT rank FROM processes"), -1000);
	assert_int_equal(q_int(f, "SELECT local_rank FROM processes"), 3);
	assert_int_equal(q_int(f, "SELECT sample_bytes FROM processes"), 4096);
	assert_int_equal(q_int(f, "SELECT lossless FROM processes"), 1);
	assert_int_equal(q_int(f, "SELECT start_ns FROM processes"), 5000);
	assert_int_equal(q_int(f, "SELECT start_wall_ns FROM processes"), 1700000000000000000ll);
	assert_int_equal(q_int(f, "SELECT end_ns FROM processes"), -1000);
	q_text(f, text, sizeof(text), "SELECT malloc_mode FROM processes");
	assert_string_equal(text, "sample");
	q_text(f, text, sizeof(text), "SELECT exe || '|' || hostname FROM processes");
	assert_string_equal(text, "/usr/bin/prog|node1");
	q_text(f, text, sizeof(text), "SELECT argv FROM processes");
	assert_string_equal(text, "[\"prog\",\"--x=\\\"a b\\\"\",\"tab\\u0009here\"]");
	/* SQLite itself parses it back to the original arguments. */
	q_text(f, text, sizeof(text), "SELECT json_extract(argv, '$[1]') FROM processes");
	assert_string_equal(text, "--x=\"a b\"");
	assert_int_equal(q_int(f, "SELECT json_array_length(argv) FROM processes"), 3);
}

static void test_client_argv_not_utf8(void **state)
{
	struct fixture *f = *state;
	static const char argv[] = "a\xff" "b\0\xc3\xa9t\xe2\x82";
	char buf[512], text[128];
	size_t len = hello_make(buf, &f->r, 1, 0, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC, "x",
				argv, sizeof(argv) - 1, "h");

	assert_int_equal(deliver(f->c, buf, len, f->r.fd), 0);
	q_text(f, text, sizeof(text), "SELECT argv FROM processes");
	assert_string_equal(text, "[\"a\\ufffdb\",\"\xc3\xa9t\\ufffd\\ufffd\"]");
	assert_int_equal(q_int(f, "SELECT json_valid(argv) FROM processes"), 1);
}

/* A cut command line is stored with its whole length (argv_bytes); a
 * HELLO that claims a "whole" no longer than what it sent is refused
 * before any row. */
static void test_client_argv_cut(void **state)
{
	struct fixture *f = *state;
	static const char argv[] = "prog\0a1\0a2";
	struct shm_msg_hello h;
	char buf[512];
	size_t len = hello_make(buf, &f->r, 1, 0, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC, "x",
				argv, sizeof(argv) - 1, "h");
	struct client *c2;
	struct region r2;

	memcpy(&h, buf, sizeof(h));
	h.argv_bytes = 70000;
	memcpy(buf, &h, sizeof(h));
	assert_int_equal(deliver(f->c, buf, len, f->r.fd), 0);
	assert_int_equal(q_int(f, "SELECT argv_bytes FROM processes"), 70000);
	assert_int_equal(q_int(f, "SELECT json_array_length(argv) FROM processes"), 3);

	region_make(&r2, 1, RING);
	for (uint32_t bad = 1; bad <= sizeof(argv) - 1; bad += sizeof(argv) - 2) {
		c2 = client_new(&f->co, -1);
		len = hello_make(buf, &r2, 2, 0, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC, "x", argv,
				 sizeof(argv) - 1, "h");
		memcpy(&h, buf, sizeof(h));
		h.argv_bytes = bad;
		memcpy(buf, &h, sizeof(h));
		assert_int_equal(deliver(c2, buf, len, r2.fd), -EBADMSG);
		client_free(c2);
	}
	assert_int_equal(q_int(f, "SELECT count(*) FROM processes"), 1);
	region_drop(&r2);
}

static void test_client_parent(void **state)
{
	struct fixture *f = *state;
	struct region r2, r3;
	struct client *c2, *c3;

	region_make(&r2, 1, RING);
	region_make(&r3, 1, RING);
	assert_int_equal(connect_region(f, &f->r, 100, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
	c2 = f->c;
	f->c = client_new(&f->co, -1);
	assert_int_equal(connect_region(f, &r2, 101, 100, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
	assert_int_equal(q_int(f, "SELECT parent_proc_id FROM processes WHERE pid = 101"),
			 client_proc_id(c2));
	/* The parent gone, the store still knows it. */
	assert_int_equal(client_end(c2, CLIENT_CLOSED, 9), 0);
	client_free(c2);
	c3 = client_new(&f->co, -1);
	f->c = c3;
	assert_int_equal(connect_region(f, &r3, 102, 100, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
	assert_int_equal(q_int(f, "SELECT parent_proc_id FROM processes WHERE pid = 102"), 1);
	region_drop(&r2);
	region_drop(&r3);
}

/* ---- heap ---- */

static void test_client_heap_rows(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
	claim(&f->r, 0, 500);
	push_heap(&f->r, 0, SHM_FN_MALLOC, SHM_F_TIMED, 100, 0x1000, 16, 0);
	push_heap(&f->r, 0, SHM_FN_CALLOC, 0, 110, 0x2000, 64, 0);
	push_heap(&f->r, 0, SHM_FN_FREE, SHM_F_TIMED, 120, 0x1000, 0, 0);
	push_heap(&f->r, 0, SHM_FN_REALLOC, 0, 130, 0x3000, 128, 0x2000);  /* moves */
	push_heap(&f->r, 0, SHM_FN_REALLOC, 0, 140, 0, 0, 0x3000);         /* frees */
	push_heap(&f->r, 0, SHM_FN_REALLOC, 0, 150, 0x4000, 32, 0);        /* allocates */
	push_heap(&f->r, 0, SHM_FN_REALLOC, 0, 155, 0, 99, 0x4000);        /* fails: 0x4000 lives */
	push_heap(&f->r, 0, SHM_FN_MALLOC, SHM_F_FAILED, 160, 0, 1 << 30, 0);
	push_heap(&f->r, 0, SHM_FN_FREE, 0, 170, 0xdead0, 0, 0);           /* never seen */
	push_heap(&f->r, 0, SHM_FN_POSIX_MEMALIGN, 0, 180, 0x5000, 256, 64);
	assert_int_equal(client_drain(f->c), 0);

	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations"), 5);
	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations WHERE space = 'host' "
				  "AND device = -1 AND sampled = 0 AND weight = size AND "
				  "alloc_tid = 500 AND proc_id = 1"), 5);
	/* malloc: timed alloc, timed free by free() */
	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations WHERE ptr = 4096 AND "
				  "size = 16 AND alloc_fn = %d AND alloc_ns = 100 AND "
				  "alloc_end_ns = 107 AND free_fn = %d AND free_tid = 500 AND "
				  "free_ns = 120 AND free_end_ns = 127", SHM_FN_MALLOC, SHM_FN_FREE), 1);
	/* calloc: freed by the realloc that moved it, untimed */
	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations WHERE ptr = 8192 AND "
				  "alloc_end_ns IS NULL AND free_fn = %d AND free_ns = 130 AND "
				  "free_end_ns IS NULL", SHM_FN_REALLOC), 1);
	assert_int_equal(q_int(f, "SELECT free_ns FROM allocations WHERE ptr = 12288"), 140);
	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations WHERE ptr = 16384 AND "
				  "size = 32 AND free_ns IS NULL"), 1);
	assert_int_equal(q_int(f, "SELECT size FROM allocations WHERE alloc_fn = %d",
			       SHM_FN_POSIX_MEMALIGN), 256);
	assert_int_equal(q_int(f, "SELECT count(*) FROM cuda_calls"), 0);
	/* the consumer's tail caught up with head */
	assert_int_equal(slot(&f->r, 0)->tail, slot(&f->r, 0)->head);
	assert_true(hdr(&f->r)->heartbeat > 0);
}

/* The committed marks (wire.h) move only with a commit of the client's
 * store: records read but not committed are what a collector that dies
 * leaves as lost. */
static void test_client_committed_marks(void **state)
{
	struct fixture *f = *state;

	store_on_commit(client_committed, &f->co);
	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
	claim(&f->r, 0, 500);
	push_heap(&f->r, 0, SHM_FN_MALLOC, SHM_F_TIMED, 100, 0x1000, 16, 0);
	push_heap(&f->r, 0, SHM_FN_MALLOC, 0, 110, 0x2000, 64, 0);
	push_heap(&f->r, 0, SHM_FN_FREE, SHM_F_TIMED, 120, 0x1000, 0, 0);
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(slot(&f->r, 0)->consumed, 3);
	assert_int_equal(slot(&f->r, 0)->committed, 0);
	assert_int_equal(store_commit(f->co.store), 0);
	assert_int_equal(slot(&f->r, 0)->committed, 3);
	store_on_commit(NULL, NULL);
}

static void test_client_sampled_weight(void **state)
{
	struct fixture *f = *state;
	double sb = 4096, w;

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_SAMPLE, SHM_CLOCK_MONOTONIC), 0);
	claim(&f->r, 0, 1);
	push_heap(&f->r, 0, SHM_FN_MALLOC, SHM_F_SAMPLED, 100, 0x1000, 100, 0);
	push_heap(&f->r, 0, SHM_FN_MALLOC, SHM_F_SAMPLED, 100, 0x2000, 1 << 20, 0);
	assert_int_equal(client_drain(f->c), 0);
	w = (double)q_int(f, "SELECT CAST(weight * 1000 AS INTEGER) FROM allocations WHERE ptr = 4096") / 1000;
	assert_true(fabs(w - 100 / (1 - exp(-100 / sb))) < 0.01);
	w = (double)q_int(f, "SELECT CAST(weight AS INTEGER) FROM allocations WHERE ptr = 8192");
	assert_true(fabs(w - (1 << 20)) <= 1);
	assert_int_equal(q_int(f, "SELECT sum(sampled) FROM allocations"), 2);
}

/* A block allocated by one thread and freed by another: the free sits in a
 * lower slot than the allocation, so only a time-ordered merge pairs them. */
static void test_client_cross_thread_free(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
	claim(&f->r, 0, 10);
	claim(&f->r, 1, 11);
	push_heap(&f->r, 1, SHM_FN_MALLOC, SHM_F_TIMED, 100, 0x1000, 16, 0);
	push_heap(&f->r, 0, SHM_FN_FREE, SHM_F_TIMED, 200, 0x1000, 0, 0);
	push_heap(&f->r, 1, SHM_FN_MALLOC, SHM_F_TIMED, 300, 0x1000, 32, 0);
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations WHERE size = 16 AND "
				  "alloc_tid = 11 AND free_tid = 10 AND free_ns = 200"), 1);
	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations WHERE size = 32 AND "
				  "free_ns IS NULL"), 1);
}

/* A free published after a newer block took the same address ends the
 * older block, not the newer one. */
static void test_client_late_free_displaced(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
	claim(&f->r, 0, 10);
	claim(&f->r, 1, 11);
	push_heap(&f->r, 0, SHM_FN_MALLOC, SHM_F_TIMED, 100, 0x1000, 16, 0);
	push_heap(&f->r, 0, SHM_FN_MALLOC, SHM_F_TIMED, 300, 0x1000, 32, 0);
	assert_int_equal(client_drain(f->c), 0);
	push_heap(&f->r, 1, SHM_FN_FREE, SHM_F_TIMED, 200, 0x1000, 0, 0);
	push_heap(&f->r, 1, SHM_FN_FREE, SHM_F_TIMED, 400, 0x1000, 0, 0);
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(q_int(f, "SELECT free_ns FROM allocations WHERE size = 16"), 200);
	assert_int_equal(q_int(f, "SELECT free_ns FROM allocations WHERE size = 32"), 400);
}

/*
 * An untimed malloc is stamped when it begins: one that began (t 300)
 * before another thread's free of the address it then returned (t 350)
 * looks older than that free.  The heap order says which block the free
 * ended: the one before (seq 1), not the new one (seq 6, after the free's
 * 5), which stays live.
 */
static void test_client_free_paired_by_heap_order(void **state)
{
	struct fixture *f = *state;
	struct shm_rec_heap re;

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
	claim(&f->r, 0, 10);
	claim(&f->r, 1, 11);
	push_heap_seq(&f->r, 0, SHM_FN_MALLOC, SHM_F_TIMED, 100, 0x1000, 16, 0, 0);
	push_heap_seq(&f->r, 0, SHM_FN_MALLOC, 0, 300, 0x1000, 32, 0, 5);
	push_heap_seq(&f->r, 1, SHM_FN_FREE, 0, 350, 0x1000, 0, 0, 5);
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(q_int(f, "SELECT free_ns FROM allocations WHERE size = 16"), 350);
	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations WHERE size = 32 "
			       "AND free_ns IS NULL"), 1);
	/* realloc: its release (seq 7) and its allocation (seq 9) apart; a
	 * free at seq 8 of the address it then returned ends the block before */
	push_heap_seq(&f->r, 0, SHM_FN_MALLOC, SHM_F_TIMED, 400, 0x3000, 48, 0, 2);
	re = (struct shm_rec_heap){
		.hdr = { SHM_REC_HEAP, sizeof(re), SHM_FN_REALLOC, 0 },
		.t_begin = 500, .ptr = 0x3000, .size = 64, .aux = 0x1000,
		.seq = 9, .seq_free = 7,
	};
	push(&f->r, 0, &re, sizeof(re));
	push_heap_seq(&f->r, 1, SHM_FN_FREE, 0, 550, 0x3000, 0, 0, 8);
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(q_int(f, "SELECT free_ns FROM allocations WHERE size = 32"), 500);
	assert_int_equal(q_int(f, "SELECT free_ns FROM allocations WHERE size = 48"), 550);
	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations WHERE size = 64 "
			       "AND free_ns IS NULL"), 1);
}

/* Records stamped after the pass began wait for the next pass (or the
 * last one, when the client ends). */
static void test_client_future_records_wait(void **state)
{
	struct fixture *f = *state;
	uint64_t later = UINT64_MAX / 2;

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
	claim(&f->r, 0, 10);
	push_heap(&f->r, 0, SHM_FN_MALLOC, SHM_F_TIMED, 100, 0x1000, 16, 0);
	push_heap(&f->r, 0, SHM_FN_MALLOC, SHM_F_TIMED, later, 0x2000, 16, 0);
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations"), 1);
	assert_true(slot(&f->r, 0)->tail < slot(&f->r, 0)->head);
	assert_int_equal(client_end(f->c, CLIENT_CLOSED, 1000), 0);
	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations"), 2);
}

/* Sample mode: an unsampled realloc record only releases its old block. */
static void test_client_sample_release_only(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_SAMPLE, SHM_CLOCK_MONOTONIC), 0);
	claim(&f->r, 0, 1);
	push_heap(&f->r, 0, SHM_FN_MALLOC, SHM_F_SAMPLED | SHM_F_TIMED, 100, 0x1000, 4096, 0);
	push_heap(&f->r, 0, SHM_FN_REALLOC, SHM_F_TIMED, 200, 0x9000, 8192, 0x1000);
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations"), 1);
	assert_int_equal(q_int(f, "SELECT free_fn FROM allocations WHERE ptr = 4096"),
			 SHM_FN_REALLOC);
}

/* ---- allocation rows held until the batch ends ---- */

/* Freed in its batch: one complete row, written at the commit. */
static void test_client_pending_freed_in_batch(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
	assert_int_equal(store_commit(f->co.store), 0);
	claim(&f->r, 0, 10);
	push_heap(&f->r, 0, SHM_FN_MALLOC, SHM_F_TIMED, 100, 0x1000, 16, 0);
	push_heap(&f->r, 0, SHM_FN_FREE, SHM_F_TIMED, 200, 0x1000, 0, 0);
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(q_seen(f, "SELECT count(*) FROM allocations"), 0);
	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations WHERE id = 1 AND "
				  "alloc_ns = 100 AND alloc_end_ns = 107 AND free_fn = %d AND "
				  "free_tid = 10 AND free_ns = 200 AND free_end_ns = 207",
			       SHM_FN_FREE), 1);
	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations"), 1);
}

/* Freed in a later batch: the stored row is updated. */
static void test_client_pending_freed_later(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
	claim(&f->r, 0, 10);
	push_heap(&f->r, 0, SHM_FN_MALLOC, 0, 100, 0x1000, 16, 0);
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(store_commit(f->co.store), 0);
	assert_int_equal(q_seen(f, "SELECT count(*) FROM allocations WHERE free_ns IS NULL"), 1);
	push_heap(&f->r, 0, SHM_FN_FREE, 0, 200, 0x1000, 0, 0);
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations WHERE free_ns = 200 AND "
				  "free_end_ns IS NULL"), 1);
	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations"), 1);
}

/* A client that ends with rows pending: client_end() commits them. */
static void test_client_pending_at_end(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
	claim(&f->r, 0, 10);
	push_heap(&f->r, 0, SHM_FN_MALLOC, 0, 100, 0x1000, 16, 0);
	push_heap(&f->r, 0, SHM_FN_MALLOC, 0, 110, 0x2000, 32, 0);
	push_heap(&f->r, 0, SHM_FN_FREE, 0, 120, 0x1000, 0, 0);
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(client_end(f->c, CLIENT_CLOSED, 1000), 0);
	assert_int_equal(q_seen(f, "SELECT count(*) FROM allocations"), 2);
	assert_int_equal(q_seen(f, "SELECT free_ns FROM allocations WHERE ptr = 4096"), 120);
	assert_int_equal(q_seen(f, "SELECT count(*) FROM allocations WHERE ptr = 8192 AND "
				   "free_ns IS NULL"), 1);
}

/* realloc moves a pending block: the old row is completed in memory, the
 * new one is freed after a commit by UPDATE. */
static void test_client_pending_realloc(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
	claim(&f->r, 0, 10);
	push_heap(&f->r, 0, SHM_FN_MALLOC, 0, 100, 0x1000, 16, 0);
	push_heap(&f->r, 0, SHM_FN_REALLOC, 0, 110, 0x2000, 64, 0x1000);
	push_heap(&f->r, 0, SHM_FN_REALLOC, 0, 120, 0x2000, 128, 0x2000); /* in place */
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(store_commit(f->co.store), 0);
	push_heap(&f->r, 0, SHM_FN_FREE, 0, 130, 0x2000, 0, 0);
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations"), 3);
	assert_int_equal(q_int(f, "SELECT free_ns * 100 + free_fn FROM allocations WHERE "
				  "ptr = 4096"), 110 * 100 + SHM_FN_REALLOC);
	assert_int_equal(q_int(f, "SELECT free_ns FROM allocations WHERE size = 64"), 120);
	assert_int_equal(q_int(f, "SELECT free_ns * 100 + free_fn FROM allocations WHERE "
				  "size = 128"), 130 * 100 + SHM_FN_FREE);
}

/* Displaced blocks, one stored and one pending: a late free ends the
 * stored (displaced) one, a later free the pending one. */
static void test_client_pending_displaced(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
	claim(&f->r, 0, 10);
	claim(&f->r, 1, 11);
	push_heap(&f->r, 0, SHM_FN_MALLOC, SHM_F_TIMED, 100, 0x1000, 16, 0);
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(store_commit(f->co.store), 0);
	push_heap(&f->r, 0, SHM_FN_MALLOC, SHM_F_TIMED, 300, 0x1000, 32, 0);
	assert_int_equal(client_drain(f->c), 0);
	push_heap(&f->r, 1, SHM_FN_FREE, SHM_F_TIMED, 200, 0x1000, 0, 0);
	push_heap(&f->r, 1, SHM_FN_FREE, SHM_F_TIMED, 400, 0x1000, 0, 0);
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(q_int(f, "SELECT free_ns FROM allocations WHERE size = 16"), 200);
	assert_int_equal(q_int(f, "SELECT free_ns FROM allocations WHERE size = 32"), 400);
	/* both pending: the same pairing */
	push_heap(&f->r, 0, SHM_FN_MALLOC, SHM_F_TIMED, 500, 0x2000, 48, 0);
	push_heap(&f->r, 0, SHM_FN_MALLOC, SHM_F_TIMED, 700, 0x2000, 64, 0);
	assert_int_equal(client_drain(f->c), 0);
	push_heap(&f->r, 1, SHM_FN_FREE, SHM_F_TIMED, 600, 0x2000, 0, 0);
	push_heap(&f->r, 1, SHM_FN_FREE, SHM_F_TIMED, 800, 0x2000, 0, 0);
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(q_int(f, "SELECT free_ns FROM allocations WHERE size = 48"), 600);
	assert_int_equal(q_int(f, "SELECT free_ns FROM allocations WHERE size = 64"), 800);
	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations"), 4);
}

/* ---- stacks and modules ---- */

static void test_client_stack_rows(void **state)
{
	struct fixture *f = *state;
	struct shm_rec_cuda r;
	char text[256];

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
	claim(&f->r, 0, 10);
	claim(&f->r, 1, 11);
	/* a record may name a stack sent later, or by another thread */
	push_heap_stacks(&f->r, 0, SHM_FN_MALLOC, 100, 0x1000, 16, 5, 2);
	push_heap_stacks(&f->r, 0, SHM_FN_MALLOC, 110, 0x2000, 16, 0, 0);
	push_stack(&f->r, 1, 5, 3, 0x400100);
	push_pystack(&f->r, 1, 2, 2, 30, 40);
	push_stack(&f->r, 1, 5, 4, 0x500000);  /* repeated id: the first stays */
	push_pystack(&f->r, 1, 2, 1, 99, 99);
	push_stack(&f->r, 0, 6, 0, 0);         /* empty: no rows */
	r = cuda_rec(SHM_FN_CUDA_MALLOC, 120, 0, 0x7f0000000000, 4096);
	r.stack_id = 6;
	r.pystack_id = 0;
	push(&f->r, 0, &r, sizeof(r));
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(q_int(f, "SELECT count(*) FROM stack_frames"), 3);
	q_text(f, text, sizeof(text), "SELECT group_concat(proc_id || ':' || stack_id || ':' || "
	       "level || ':' || pc, ' ') FROM (SELECT * FROM stack_frames ORDER BY level)");
	assert_string_equal(text, "1:5:0:4194560 1:5:1:4194561 1:5:2:4194562");
	q_text(f, text, sizeof(text), "SELECT group_concat(proc_id || ':' || pystack_id || ':' || "
	       "level || ':' || file_id || ':' || func_id || ':' || line, ' ') FROM "
	       "(SELECT * FROM python_frames ORDER BY level)");
	assert_string_equal(text, "1:2:0:30:40:1 1:2:1:30:41:2");
	assert_int_equal(q_int(f, "SELECT stack_id * 100 + pystack_id FROM allocations "
				  "WHERE ptr = 4096"), 502);
	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations WHERE ptr = 8192 AND "
				  "stack_id IS NULL AND pystack_id IS NULL"), 1);
	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations WHERE space = 'device' AND "
				  "stack_id = 6 AND pystack_id IS NULL"), 1);
}

/* The largest records: SHM_STACK_MAX frames of each kind. */
static void test_client_stack_max(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
	claim(&f->r, 0, 10);
	push_stack(&f->r, 0, 1, SHM_STACK_MAX, 1000);
	assert_int_equal(client_drain(f->c), 0);
	push_pystack(&f->r, 0, 1, SHM_STACK_MAX, 7, 100);
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(q_int(f, "SELECT count(*) FROM stack_frames"), SHM_STACK_MAX);
	assert_int_equal(q_int(f, "SELECT pc FROM stack_frames WHERE level = %u",
			       SHM_STACK_MAX - 1), 1000 + SHM_STACK_MAX - 1);
	assert_int_equal(q_int(f, "SELECT count(*) FROM python_frames"), SHM_STACK_MAX);
	assert_int_equal(q_int(f, "SELECT func_id * 1000 + line FROM python_frames WHERE "
				  "level = %u", SHM_STACK_MAX - 1),
			 (100 + SHM_STACK_MAX - 1) * 1000 + SHM_STACK_MAX);
}

static void test_client_module_rows(void **state)
{
	struct fixture *f = *state;
	struct shm_rec_module m;
	char text[128];

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
	claim(&f->r, 0, 10);
	m = module_rec(100, 7, 0x10000, 20, 0);
	push(&f->r, 0, &m, sizeof(m));
	m = module_rec(110, 8, 0x40000, 0, 0);
	push(&f->r, 0, &m, sizeof(m));
	m = module_rec(200, 7, 0x10000, 0, 1);   /* unload */
	push(&f->r, 0, &m, sizeof(m));
	m = module_rec(300, 7, 0x10000, 3, 0);   /* loaded again */
	push(&f->r, 0, &m, sizeof(m));
	m = module_rec(400, 7, 0x10000, 0, 1);
	push(&f->r, 0, &m, sizeof(m));
	m = module_rec(450, 7, 0x10000, 0, 1);   /* nothing loaded there: no change */
	push(&f->r, 0, &m, sizeof(m));
	m = module_rec(500, 8, 0x50000, 0, 1);   /* no such lo: no change */
	push(&f->r, 0, &m, sizeof(m));
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(q_int(f, "SELECT count(*) FROM modules"), 3);
	q_text(f, text, sizeof(text), "SELECT group_concat(proc_id || ':' || path_id || ':' || "
	       "bias || ':' || lo || ':' || hi || ':' || loaded_ns || ':' || "
	       "coalesce(unloaded_ns, 'null'), ' ') FROM (SELECT * FROM modules ORDER BY id)");
	assert_string_equal(text, "1:7:61440:65536:86016:100:200 1:8:258048:262144:282624:110:null "
			    "1:7:61440:65536:86016:300:400");
	q_text(f, text, sizeof(text), "SELECT build_id FROM modules WHERE id = 1");
	assert_string_equal(text, "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3");
	q_text(f, text, sizeof(text), "SELECT build_id FROM modules WHERE id = 3");
	assert_string_equal(text, "a0a1a2");
	assert_int_equal(q_int(f, "SELECT build_id IS NULL FROM modules WHERE id = 2"), 1);
}

/* exec: the same pid says HELLO again, before or after its old socket
 * closed without BYE. */
static void test_client_exec(void **state)
{
	struct fixture *f = *state;
	struct region r2, r3;
	struct client *c1 = f->c, *c2 = client_new(&f->co, -1), *c3;

	region_make(&r2, 1, RING);
	region_make(&r3, 1, RING);
	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
	f->c = c2;
	assert_int_equal(connect_region(f, &r2, 42, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
	assert_int_equal(client_end(c1, CLIENT_CLOSED, 4000), 0);
	assert_int_equal(client_end(c2, CLIENT_CLOSED, 4500), 0);
	assert_int_equal(q_int(f, "SELECT end_reason = 'exec' FROM processes WHERE proc_id = 1"), 1);
	assert_int_equal(q_int(f, "SELECT end_reason = 'disconnect' FROM processes WHERE proc_id = 2"), 1);
	c3 = client_new(&f->co, -1);
	f->c = c3;
	assert_int_equal(connect_region(f, &r3, 42, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
	assert_int_equal(q_int(f, "SELECT end_reason = 'exec' FROM processes WHERE proc_id = 2"), 1);
	assert_int_equal(q_int(f, "SELECT count(*) FROM processes WHERE end_reason = 'exec'"), 2);
	region_drop(&r2);
	region_drop(&r3);
}

/* ---- reconnect (defect 11 of issue 13) ---- */

static int hello_as(struct fixture *f, struct region *r, uint32_t pid, uint32_t uid,
		    uint32_t ppid, uint32_t peer_pid, uint32_t peer_uid, struct client **out);

/* A reconnect HELLO for region r, as pid/uid through a peer the kernel
 * says is (peer_pid, peer_uid), started at start_ns, on a new client. */
static int reconnect_as(struct fixture *f, struct region *r, uint32_t pid, uint32_t uid,
			uint32_t peer_pid, uint32_t peer_uid, uint64_t start_ns, struct client **out)
{
	char buf[512];
	size_t len = hello_make(buf, r, pid, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC, "x", "", 0,
				"h");
	struct shm_msg_hello *h = (struct shm_msg_hello *)buf;
	int fd = dup(r->fd);
	struct client *c = client_new(&f->co, -1);

	h->uid = uid;
	h->flags |= SHM_HELLO_RECONNECT;
	h->start_mono_ns = start_ns;
	client_set_peer(c, peer_pid, peer_uid);
	*out = c;
	return client_message(c, buf, len, &fd, 1, 0);
}

/*
 * The collector dies with records read but not committed and the ring
 * filling behind it; the next one continues the row, and stored + lost ==
 * produced, exactly: the counters go on from what was committed (never
 * counted twice), the loss is a drop row, the control line goes on.
 */
static void test_client_reconnect(void **state)
{
	struct fixture *f = *state;
	struct shm_slot *sl = slot(&f->r, 0);
	struct shm_region *g = (struct shm_region *)f->r.map;
	struct client *c, *dead;
	unsigned lost;

	store_on_commit(client_committed, &f->co);
	assert_int_equal(hello_as(f, &f->r, 42, 1000, 1, 42, 1000, &dead), 0);
	claim(&f->r, 0, 500);
	for (uint64_t i = 0; i < 3; i++)
		push_heap(&f->r, 0, SHM_FN_MALLOC, SHM_F_TIMED, 100 + i, 0x1000 + 64 * i, 16, 0);
	sl->count[SHM_FN_MALLOC] = 3;
	assert_int_equal(client_drain(dead), 0);
	assert_int_equal(client_flush_counts(dead), 0);
	assert_int_equal(store_commit(f->co.store), 0);
	assert_int_equal(sl->committed, 3);
	client_free(dead);
	/* it read two more (its tail moved past them) and counted them, and
	 * died before its store committed: as it leaves the region */
	for (uint64_t i = 3; i < 5; i++)
		push_heap(&f->r, 0, SHM_FN_MALLOC, SHM_F_TIMED, 100 + i, 0x1000 + 64 * i, 16, 0);
	sl->count[SHM_FN_MALLOC] = 5;
	sl->tail = sl->head;
	sl->consumed = 5;
	g->ctl_seq = 6;
	assert_int_equal(store_recover(f->co.store, &lost), 0);
	assert_int_equal(lost, 1);
	/* the ring full while no one read it: 4 dropped; one more written */
	sl->dropped = 4;
	push_heap(&f->r, 0, SHM_FN_MALLOC, SHM_F_TIMED, 200, 0x9000, 16, 0);
	sl->count[SHM_FN_MALLOC] = 10;

	/* refused: another user; another start; another pid's row */
	assert_int_equal(reconnect_as(f, &f->r, 42, 1001, 42, 1001, 5000, &c), -EBADMSG);
	assert_int_equal(reconnect_as(f, &f->r, 42, 1000, 42, 1000, 5001, &c), -EBADMSG);
	assert_int_equal(reconnect_as(f, &f->r, 43, 1000, 43, 1000, 5000, &c), -EBADMSG);
	assert_int_equal(reconnect_as(f, &f->r, 42, 1000, 43, 1000, 5000, &c), -EBADMSG);
	assert_int_equal(q_int(f, "SELECT end_reason = 'collector_lost' FROM processes"), 1);
	/* the process itself */
	assert_int_equal(reconnect_as(f, &f->r, 42, 1000, 42, 1000, 5000, &c), 0);
	assert_int_equal(client_proc_id(c), 1);
	assert_int_equal(q_int(f, "SELECT end_ns IS NULL AND end_reason IS NULL FROM processes"), 1);
	/* the control line goes on from where the dead collector left it */
	assert_int_equal(g->ctl_seq, 6);
	/* a second reconnect for the row, now live: refused */
	assert_int_equal(reconnect_as(f, &f->r, 42, 1000, 42, 1000, 5000, &dead), -EBADMSG);
	assert_int_equal(client_drain(c), 0);
	assert_int_equal(client_end(c, CLIENT_CLOSED, 9000), 0);
	assert_int_equal(q_int(f, "SELECT count(*) FROM processes"), 1);
	assert_int_equal(q_int(f, "SELECT end_reason = 'disconnect' FROM processes"), 1);
	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations WHERE alloc_tid = 500"), 4);
	assert_int_equal(q_int(f, "SELECT events FROM drops WHERE tid = 500 AND "
				  "reason = 'collector_lost'"), 6);
	assert_int_equal(q_int(f, "SELECT count(*) FROM drops WHERE reason <> 'collector_lost'"), 0);
	assert_int_equal(q_int(f, "SELECT sum(count) FROM function_counts WHERE tid = 500"), 10);
	/* an orderly end is never reopened */
	assert_int_equal(reconnect_as(f, &f->r, 42, 1000, 42, 1000, 5000, &c), -EBADMSG);
	store_on_commit(NULL, NULL);
}

/* ---- identity (defect 3 of issue 13) ---- */

/* HELLO from (pid, uid, ppid) through a peer the kernel says is
 * (peer_pid, peer_uid), on a new client; returns what client_message()
 * did.  *out receives the client. */
static int hello_as(struct fixture *f, struct region *r, uint32_t pid, uint32_t uid,
		    uint32_t ppid, uint32_t peer_pid, uint32_t peer_uid, struct client **out)
{
	char buf[512];
	size_t len = hello_make(buf, r, pid, ppid, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC, "x", "",
				0, "h");
	int fd = dup(r->fd);
	struct client *c = client_new(&f->co, -1);

	((struct shm_msg_hello *)buf)->uid = uid;
	client_set_peer(c, peer_pid, peer_uid);
	*out = c;
	return client_message(c, buf, len, &fd, 1, 0);
}

/* pid and uid are the kernel's: a HELLO that claims others is refused. */
static void test_client_identity_spoofed(void **state)
{
	struct fixture *f = *state;
	char buf[512];
	size_t len = hello_make(buf, &f->r, 42, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC, "x", "",
				0, "h");
	struct client *c;
	int fd;

	assert_int_equal(hello_as(f, &f->r, 42, 1000, 1, 43, 1000, &c), -EBADMSG);
	assert_int_equal(client_proc_id(c), 0);
	assert_int_equal(hello_as(f, &f->r, 42, 0, 1, 42, 1000, &c), -EBADMSG);
	assert_int_equal(hello_as(f, &f->r, 42, 1000, 1, 42, 0, &c), -EBADMSG);
	/* no identity at all (a peer in a pid namespace we cannot see) */
	fd = dup(f->r.fd);
	assert_int_equal(client_message(f->c, buf, len, &fd, 1, 0), -EBADMSG);
	assert_int_equal(q_int(f, "SELECT count(*) FROM processes"), 0);
	/* the honest one */
	assert_int_equal(hello_as(f, &f->r, 42, 1000, 1, 42, 1000, &c), 0);
	assert_int_equal(q_int(f, "SELECT count(*) FROM processes WHERE pid = 42 AND uid = 1000"), 1);
}

/* ppid is the client's word: it never links to another user's process,
 * live or in the store, and an exec never ends another user's row. */
static void test_client_identity_other_user(void **state)
{
	struct fixture *f = *state;
	struct region r2, r3, r4;
	struct client *root, *u1, *u2;

	region_make(&r2, 1, RING);
	region_make(&r3, 1, RING);
	region_make(&r4, 1, RING);
	assert_int_equal(hello_as(f, &f->r, 100, 0, 1, 100, 0, &root), 0);
	/* another user claims to be root's child, and the same user's */
	assert_int_equal(hello_as(f, &r2, 200, 1000, 100, 200, 1000, &u1), 0);
	assert_int_equal(hello_as(f, &r3, 201, 1000, 200, 201, 1000, &u2), 0);
	assert_int_equal(q_int(f, "SELECT parent_proc_id IS NULL FROM processes WHERE pid = 200"), 1);
	assert_int_equal(q_int(f, "SELECT parent_proc_id FROM processes WHERE pid = 201"),
			 client_proc_id(u1));
	/* root's process ends: the store does not link to it either */
	assert_int_equal(client_end(root, CLIENT_CLOSED, 9000), 0);
	assert_int_equal(hello_as(f, &r4, 202, 1000, 100, 202, 1000, &u2), 0);
	assert_int_equal(q_int(f, "SELECT parent_proc_id IS NULL FROM processes WHERE pid = 202"), 1);
	/* root's pid 100 reused by the user within the exec window: root's
	 * row stays 'disconnect' */
	assert_int_equal(hello_as(f, &r4, 100, 1000, 1, 100, 1000, &u2), 0);
	assert_int_equal(q_int(f, "SELECT end_reason = 'disconnect' FROM processes WHERE "
				  "pid = 100 AND uid = 0"), 1);
	region_drop(&r2);
	region_drop(&r3);
	region_drop(&r4);
}

/* ---- CUDA ---- */

static void test_client_cuda_rows(void **state)
{
	struct fixture *f = *state;
	struct shm_rec_cuda r;

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_OFF, SHM_CLOCK_MONOTONIC), 0);
	claim(&f->r, 1, 77);
	r = cuda_rec(SHM_FN_CUDA_MALLOC, 1000, 0, 0x7f0000000000, 1 << 20);
	push(&f->r, 1, &r, sizeof(r));
	r = cuda_rec(SHM_FN_CUDA_MALLOC_HOST, 1100, 0, 0x600000, 4096);
	push(&f->r, 1, &r, sizeof(r));
	r = cuda_rec(SHM_FN_CUDA_MALLOC_MANAGED, 1200, 0, 0x7f0000100000, 8192);
	push(&f->r, 1, &r, sizeof(r));
	r = cuda_rec(SHM_FN_CUDA_MALLOC, 1300, 2, 0, 1ull << 40); /* out of memory */
	push(&f->r, 1, &r, sizeof(r));
	r = cuda_rec(SHM_FN_CUDA_MEMCPY_ASYNC, 1400, 0, 0x7f0000000000, 4096);
	r.aux = 0x600000;
	r.kind = 1;
	r.stream = 0xabc;
	r.hdr.flags |= SHM_F_PTSZ;
	push(&f->r, 1, &r, sizeof(r));
	r = cuda_rec(SHM_FN_CUDA_LAUNCH_KERNEL, 1500, 0, 0, 0);
	r.aux = 0x401000;
	r.grid[0] = 64, r.grid[1] = 2, r.grid[2] = 1;
	r.block[0] = 256, r.block[1] = 1, r.block[2] = 1;
	push(&f->r, 1, &r, sizeof(r));
	r = cuda_rec(SHM_FN_CUDA_FREE, 1600, 0, 0x7f0000000000, 0);
	push(&f->r, 1, &r, sizeof(r));
	r = cuda_rec(SHM_FN_CUDA_FREE_HOST, 1700, 1, 0x600000, 0); /* failed: stays live */
	push(&f->r, 1, &r, sizeof(r));
	assert_int_equal(client_drain(f->c), 0);

	assert_int_equal(q_int(f, "SELECT count(*) FROM cuda_calls WHERE tid = 77 AND proc_id = 1"), 8);
	assert_int_equal(q_int(f, "SELECT end_ns - start_ns FROM cuda_calls WHERE fn_id = %d",
			       SHM_FN_CUDA_LAUNCH_KERNEL), 100);
	assert_int_equal(q_int(f, "SELECT ret FROM cuda_calls WHERE start_ns = 1300"), 2);
	assert_int_equal(q_int(f, "SELECT count(*) FROM cuda_calls WHERE fn_id = %d AND "
				  "copy_kind = 1 AND aux = 6291456 AND stream = 2748 AND "
				  "bytes = 4096 AND per_thread_stream = 1 AND grid_x IS NULL",
			       SHM_FN_CUDA_MEMCPY_ASYNC), 1);
	assert_int_equal(q_int(f, "SELECT grid_x * 1000000 + grid_y * 1000 + block_x FROM "
				  "cuda_calls WHERE fn_id = %d AND copy_kind IS NULL AND "
				  "per_thread_stream = 0 AND grid_z = 1 AND block_z = 1",
			       SHM_FN_CUDA_LAUNCH_KERNEL), 64002256);
	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations"), 3);
	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations WHERE space = 'device' "
				  "AND device = 1 AND size = 1048576 AND alloc_ns = 1000 AND "
				  "alloc_end_ns = 1100 AND free_fn = %d AND free_ns = 1600 AND "
				  "free_end_ns = 1700 AND free_tid = 77", SHM_FN_CUDA_FREE), 1);
	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations WHERE space = 'pinned' "
				  "AND free_ns IS NULL"), 1);
	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations WHERE space = 'managed'"), 1);
	assert_int_equal(q_int(f, "SELECT count(*) FROM cuda_calls_named WHERE fn = 'cudaFree'"), 1);
}

/* STRING id = text. */
static void send_string(struct client *c, uint32_t id, const char *text)
{
	unsigned char buf[512];
	struct shm_msg_string m = { { SHM_MAGIC, SHM_WIRE_VERSION, SHM_MSG_STRING, 0, 0 },
				    id, (uint32_t)strlen(text) };

	m.hdr.len = (uint32_t)(sizeof(m) + m.len);
	memcpy(buf, &m, sizeof(m));
	memcpy(buf + sizeof(m), text, m.len);
	assert_int_equal(client_message(c, buf, m.hdr.len, NULL, 0, 0), 0);
}

static int send_gpu_status(struct client *c, uint32_t status, const char *text, int extra)
{
	unsigned char buf[512];
	struct shm_msg_gpu_status m = { { SHM_MAGIC, SHM_WIRE_VERSION, SHM_MSG_GPU_STATUS, 0, 0 },
					status, (uint32_t)strlen(text) };

	m.hdr.len = (uint32_t)(sizeof(m) + m.len + extra);
	memcpy(buf, &m, sizeof(m));
	memcpy(buf + sizeof(m), text, m.len + extra);
	return client_message(c, buf, m.hdr.len, NULL, 0, 0);
}

#define GPU_HDR(type, rec) { (type), sizeof(rec), SHM_FN_NONE, 0 }

static void push_range_in(struct region *r, uint32_t i, uint32_t op, uint64_t ts,
			  uint64_t id, uint32_t name_id, uint32_t domain_id)
{
	struct shm_rec_range g = { .hdr = GPU_HDR(SHM_REC_RANGE, g), .ts = ts, .id = id,
				   .op = op, .name_id = name_id, .domain_id = domain_id };

	push(r, i, &g, sizeof(g));
}

static void push_range(struct region *r, uint32_t i, uint32_t op, uint64_t ts,
		       uint64_t id, uint32_t name_id)
{
	push_range_in(r, i, op, ts, id, name_id, 0);
}

static void push_api(struct region *r, uint32_t i, uint64_t start, uint32_t correlation,
		     uint32_t name_id, uint32_t domain)
{
	struct shm_rec_api a = { .hdr = GPU_HDR(SHM_REC_API, a), .start = start,
				 .end = start + 5, .correlation = correlation,
				 .name_id = name_id, .domain = domain, .cbid = 211 };

	push(r, i, &a, sizeof(a));
}

static void push_kernel(struct region *r, uint32_t i, uint64_t start, uint32_t correlation,
			uint32_t name_id)
{
	struct shm_rec_kernel k = {
		.hdr = GPU_HDR(SHM_REC_KERNEL, k), .start = start, .end = start + 300,
		.correlation = correlation, .name_id = name_id, .device = 1, .context = 2,
		.stream = 7, .registers = 32, .static_smem = 1024, .dynamic_smem = 2048,
		.grid = { 128, 4, 1 }, .block = { 256, 1, 1 },
	};

	push(r, i, &k, sizeof(k));
}

static void push_window_calls(struct region *r, uint32_t i, uint64_t start, uint64_t end,
			      uint64_t since, uint64_t calls)
{
	struct shm_rec_gpu_window w = { .hdr = GPU_HDR(SHM_REC_GPU_WINDOW, w), .start = start,
					.end = end, .since = since, .calls = calls };

	push(r, i, &w, sizeof(w));
}

static void push_window(struct region *r, uint32_t i, uint64_t start, uint64_t end,
			uint64_t since)
{
	push_window_calls(r, i, start, end, since, 0);
}

/* ---- strings and GPU status ---- */

static void test_client_strings(void **state)
{
	struct fixture *f = *state;
	char text[256];

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_OFF, SHM_CLOCK_MONOTONIC), 0);
	send_string(f->c, 1, "_Z9vectorAddPKfS0_Pfi");
	send_string(f->c, 2, "cuLaunchKernel");
	send_string(f->c, 3, "_Zgarbage");
	send_string(f->c, 4, "_ZN7cutlass6KernelINS_4gemm6kernel4GemmIfEEEEvNT_6ParamsE");
	send_string(f->c, 5, "old");
	send_string(f->c, 5, "");
	assert_int_equal(q_int(f, "SELECT count(*) FROM strings WHERE proc_id = 1"), 5);
	q_text(f, text, sizeof(text), "SELECT text || '|' || demangled FROM strings WHERE id = 1");
	assert_string_equal(text, "_Z9vectorAddPKfS0_Pfi|vectorAdd(float const*, float const*, float*, int)");
	q_text(f, text, sizeof(text), "SELECT demangled FROM strings WHERE id = 4");
	assert_string_equal(text, "void cutlass::Kernel<cutlass::gemm::kernel::Gemm<float> >"
				  "(cutlass::gemm::kernel::Gemm<float>::Params)");
	/* not mangled, or not demangleable: NULL */
	assert_int_equal(q_int(f, "SELECT count(*) FROM strings WHERE id IN (2, 3) AND "
				  "demangled IS NULL"), 2);
	q_text(f, text, sizeof(text), "SELECT text FROM strings WHERE id = 2");
	assert_string_equal(text, "cuLaunchKernel");
	/* redefined: the last text wins, an empty one is still text */
	assert_int_equal(q_int(f, "SELECT length(text) FROM strings WHERE id = 5 AND "
				  "text IS NOT NULL"), 0);
}

/* Defect 2 of issue 13: a 253-byte name whose demangled form is 400 MB
 * (each of 24 template levels repeats the one before twice) took
 * __cxa_demangle 2.7 s and stored a 400 MB row.  Now it is kept mangled,
 * at once. */
static void test_client_string_blowup(void **state)
{
	struct fixture *f = *state;
	char name[512];
	size_t n = (size_t)snprintf(name, sizeof(name), "_Z1fI1AIiE");
	struct timespec t0, t1;

	for (int k = 1; k <= 24; k++)
		n += (size_t)snprintf(name + n, sizeof(name) - n, "S_IS%c_S%c_E",
				      "0123456789ABCDEFGHIJKLMNO"[k], "0123456789ABCDEFGHIJKLMNO"[k]);
	n += (size_t)snprintf(name + n, sizeof(name) - n, "Evv");
	assert_int_equal(n, 253);
	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_OFF, SHM_CLOCK_MONOTONIC), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	send_string(f->c, 1, name);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_true((t1.tv_sec - t0.tv_sec) * 1000000000ll + (t1.tv_nsec - t0.tv_nsec) < 100000000);
	assert_int_equal(q_int(f, "SELECT count(*) FROM strings WHERE id = 1 AND demangled IS NULL "
				  "AND length(text) = 253"), 1);
}

static void test_client_gpu_status(void **state)
{
	struct fixture *f = *state;
	static const char *const names[] = { NULL, "active", "no_cupti", "busy", "error", "disabled" };
	char text[128], want[128];

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_OFF, SHM_CLOCK_MONOTONIC), 0);
	assert_int_equal(q_int(f, "SELECT count(*) FROM processes WHERE gpu_status IS NULL AND "
				  "gpu_status_detail IS NULL"), 1);
	for (uint32_t st = SHM_GPU_ACTIVE; st <= SHM_GPU_DISABLED; st++) {
		snprintf(want, sizeof(want), "%s|detail %u", names[st], st);
		snprintf(text, sizeof(text), "detail %u", st);
		assert_int_equal(send_gpu_status(f->c, st, text, 0), 0);
		q_text(f, text, sizeof(text),
		       "SELECT gpu_status || '|' || gpu_status_detail FROM processes");
		assert_string_equal(text, want);
	}
	/* an empty text is '' */
	assert_int_equal(send_gpu_status(f->c, SHM_GPU_BUSY, "", 0), 0);
	q_text(f, text, sizeof(text), "SELECT gpu_status || '|' || gpu_status_detail || '|' "
				      "FROM processes");
	assert_string_equal(text, "busy||");
}

static void test_client_reject_gpu_status(void **state)
{
	struct fixture *f = *state;
	struct shm_msg_hdr h = { SHM_MAGIC, SHM_WIRE_VERSION, SHM_MSG_GPU_STATUS, sizeof(h), 0 };

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_OFF, SHM_CLOCK_MONOTONIC), 0);
	assert_int_equal(send_gpu_status(f->c, SHM_GPU_ACTIVE, "/usr/lib/libcupti.so", 0), 0);
	assert_int_equal(send_gpu_status(f->c, 0, "x", 0), -EBADMSG);
	assert_int_equal(send_gpu_status(f->c, SHM_GPU_DISABLED + 1, "x", 0), -EBADMSG);
	assert_int_equal(send_gpu_status(f->c, SHM_GPU_ERROR, "xy", 1), -EBADMSG); /* len != text */
	assert_int_equal(client_message(f->c, &h, sizeof(h), NULL, 0, 0), -EBADMSG); /* short */
	assert_int_equal(client_end(f->c, CLIENT_REJECTED, 1), 0);
	assert_int_equal(q_int(f, "SELECT count(*) FROM processes WHERE gpu_status = 'active' "
				  "AND end_reason = 'rejected'"), 1);
}

/* ---- GPU activity ---- */

static void test_client_gpu_rows(void **state)
{
	struct fixture *f = *state;
	struct shm_rec_memcpy mc = {
		.hdr = GPU_HDR(SHM_REC_MEMCPY, mc), .start = 2000, .end = 2400, .bytes = 1 << 20,
		.correlation = 12, .device = 0, .context = 2, .stream = 7,
		.copy_kind = 1, .src_kind = 1, .dst_kind = 3, .async = 1,
	};
	struct shm_rec_memset ms = {
		.hdr = GPU_HDR(SHM_REC_MEMSET, ms), .start = 3000, .end = 3100, .bytes = 4096,
		.correlation = 13, .device = 1, .context = 2, .stream = 8, .value = 0xab,
		.mem_kind = 5,
	};
	struct shm_rec_gpu_sync sy = {
		.hdr = GPU_HDR(SHM_REC_GPU_SYNC, sy), .start = 4000, .end = 4500,
		.correlation = 14, .type = 3, .context = 2, .stream = 7, .event = 0xffffffffu,
	};
	char text[256];

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_OFF, SHM_CLOCK_MONOTONIC), 0);
	send_string(f->c, 1, "_Z9vectorAddPKfS0_Pfi");
	send_string(f->c, 2, "cudaLaunchKernel");
	send_string(f->c, 3, "cuLaunchKernelEx");
	claim(&f->r, 0, 100); /* the launching thread */
	claim(&f->r, 1, 101); /* CUPTI's buffer thread */
	push_api(&f->r, 0, 1000, 11, 2, SHM_API_RUNTIME);
	push_api(&f->r, 0, 1050, 15, 3, SHM_API_DRIVER);
	/* GPU records come later, from another thread, with earlier times */
	push_kernel(&f->r, 1, 1100, 11, 1);
	push(&f->r, 1, &mc, sizeof(mc));
	mc.start = 2500, mc.end = 2600, mc.copy_kind = 10, mc.src_kind = 3, mc.dst_kind = 99;
	mc.async = 0, mc.device = 1;
	push(&f->r, 1, &mc, sizeof(mc));
	mc.start = 2700, mc.end = 2800, mc.copy_kind = 0, mc.src_kind = 0, mc.dst_kind = 7;
	push(&f->r, 1, &mc, sizeof(mc));
	push(&f->r, 1, &ms, sizeof(ms));
	push(&f->r, 1, &sy, sizeof(sy));
	sy.start = 5000, sy.end = 5500, sy.type = 1, sy.stream = 0xffffffffu, sy.event = 77;
	push(&f->r, 1, &sy, sizeof(sy));
	sy.start = 6000, sy.end = 6500, sy.type = 4, sy.event = UINT64_MAX, sy.context = 0xffffffffu;
	push(&f->r, 1, &sy, sizeof(sy));
	sy.start = 7000, sy.end = 7500, sy.type = 9;
	push(&f->r, 1, &sy, sizeof(sy));
	push_kernel(&f->r, 1, 8000, 15, 1);
	assert_int_equal(client_drain(f->c), 0);

	/* kernels: every column */
	assert_int_equal(q_int(f, "SELECT count(*) FROM kernels WHERE proc_id = 1 AND device = 1 "
				  "AND context = 2 AND stream = 7 AND correlation = 11 AND "
				  "name_id = 1 AND start_ns = 1100 AND end_ns = 1400 AND "
				  "grid_x = 128 AND grid_y = 4 AND grid_z = 1 AND block_x = 256 "
				  "AND block_y = 1 AND block_z = 1 AND registers = 32 AND "
				  "static_smem = 1024 AND dynamic_smem = 2048 AND graph_id IS NULL"), 1);
	/* the API calls on the launching thread */
	assert_int_equal(q_int(f, "SELECT count(*) FROM gpu_api WHERE proc_id = 1 AND tid = 100 "
				  "AND domain = 'runtime' AND name_id = 2 AND cbid = 211 AND "
				  "correlation = 11 AND start_ns = 1000 AND end_ns = 1005"), 1);
	assert_int_equal(q_int(f, "SELECT count(*) FROM gpu_api WHERE tid = 100 AND "
				  "domain = 'driver' AND correlation = 15"), 1);
	/* kernels_named: demangled name, the launching call and thread */
	q_text(f, text, sizeof(text), "SELECT name || '|' || mangled || '|' || dur_ns || '|' || "
				      "launch_tid || '|' || launch_domain || '|' || launch_api || '|' "
				      "|| launch_ns FROM kernels_named WHERE correlation = 11");
	assert_string_equal(text, "vectorAdd(float const*, float const*, float*, int)|"
				  "_Z9vectorAddPKfS0_Pfi|300|100|runtime|cudaLaunchKernel|1000");
	q_text(f, text, sizeof(text), "SELECT launch_api FROM kernels_named WHERE correlation = 15");
	assert_string_equal(text, "cuLaunchKernelEx");
	/* copies: kinds as text, unknown values as 'unknown' */
	q_text(f, text, sizeof(text), "SELECT group_concat(op || ',' || device || ',' || context || "
				      "',' || stream || ',' || correlation || ',' || start_ns || ',' || "
				      "end_ns || ',' || bytes || ',' || copy_kind || ',' || src_kind || "
				      "',' || dst_kind || ',' || async || ',' || coalesce(value, 'N'), ';') "
				      "FROM (SELECT * FROM gpu_copies WHERE op = 'memcpy' ORDER BY id)");
	assert_string_equal(text, "memcpy,0,2,7,12,2000,2400,1048576,HtoD,pageable,device,1,N;"
				  "memcpy,1,2,7,12,2500,2600,1048576,PtoP,device,unknown,0,N;"
				  "memcpy,1,2,7,12,2700,2800,1048576,unknown,unknown,managed_static,0,N");
	assert_int_equal(q_int(f, "SELECT count(*) FROM gpu_copies WHERE op = 'memset' AND "
				  "device = 1 AND stream = 8 AND correlation = 13 AND start_ns = 3000 "
				  "AND end_ns = 3100 AND bytes = 4096 AND copy_kind IS NULL AND "
				  "src_kind IS NULL AND dst_kind = 'managed' AND async = 0 AND "
				  "value = 171"), 1);
	/* synchronizations: type as text, CUPTI's "invalid" as NULL */
	q_text(f, text, sizeof(text), "SELECT group_concat(type || ',' || coalesce(context, 'N') || "
				      "',' || coalesce(stream, 'N') || ',' || coalesce(event, 'N') || "
				      "',' || correlation || ',' || start_ns || ',' || end_ns, ';') "
				      "FROM (SELECT * FROM gpu_syncs ORDER BY id)");
	assert_string_equal(text, "stream,2,7,N,14,4000,4500;event,2,N,77,14,5000,5500;"
				  "context,N,N,N,14,6000,6500;unknown,N,N,N,14,7000,7500");
}

/* GPU records on the TSC clock are placed like host records. */
static void test_client_gpu_tsc(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_OFF, SHM_CLOCK_TSC), 0);
	claim(&f->r, 0, 1);
	push_kernel(&f->r, 0, 5000000, 1, 1);
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(q_int(f, "SELECT start_ns FROM kernels"), 3000);
}

/* ---- GPU sampling windows ---- */

static void test_client_gpu_windows(void **state)
{
	struct fixture *f = *state;
	char text[256];
	sqlite3 *db;

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_OFF, SHM_CLOCK_MONOTONIC), 0);
	assert_int_equal(q_int(f, "SELECT gpu_sampled_since_ns FROM processes"), -1000);
	claim(&f->r, 0, 100);
	claim(&f->r, 1, 101);
	/* since may equal start; an empty record only announces sampling */
	push_window(&f->r, 1, 7000, 7000, 7000);
	push_window_calls(&f->r, 0, 2000, 2600, 2000, 37);
	push_window_calls(&f->r, 1, 3000, 3100, 2000, 5);
	assert_int_equal(client_drain(f->c), 0);
	q_text(f, text, sizeof(text), "SELECT group_concat(proc_id || ',' || start_ns || ',' || "
				      "end_ns || ',' || calls, ';') FROM (SELECT * FROM gpu_windows "
				      "ORDER BY id)");
	/* merged by start, whatever ring they came from */
	assert_string_equal(text, "1,2000,2600,37;1,3000,3100,5");
	assert_int_equal(q_int(f, "SELECT gpu_sampled_since_ns FROM processes"), 2000);

	/* a later record's since changes nothing */
	push_window(&f->r, 0, 9000, 9500, 8000);
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(q_int(f, "SELECT count(*) FROM gpu_windows WHERE start_ns = 9000 AND "
				  "end_ns = 9500"), 1);
	assert_int_equal(q_int(f, "SELECT gpu_sampled_since_ns FROM processes"), 2000);

	/* and the client no longer asks: a value cleared behind its back stays
	 * cleared (one UPDATE per process, not one per window) */
	assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
	exec(db, "UPDATE processes SET gpu_sampled_since_ns = NULL");
	sqlite3_close(db);
	push_window(&f->r, 0, 11000, 11200, 2000);
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(q_int(f, "SELECT count(*) FROM gpu_windows"), 4);
	assert_int_equal(q_int(f, "SELECT gpu_sampled_since_ns FROM processes"), -1000);
}

/* Off-CPU records (the BPF source's; a shim that wrote one would only
 * describe itself): one row each, state and open flag as text and 0/1, a
 * stack id of 0 as NULL, times through the process's clock; HELLO's
 * SHIMMER_OFFCPU flag is kept for the daemon. */
static void test_client_offcpu(void **state)
{
	struct fixture *f = *state;
	struct shm_rec_offcpu o[4] = {
		{ .hdr = { SHM_REC_OFFCPU, sizeof(o[0]), 0, 0 }, .start = 1000, .end = 1500,
		  .stack_id = 0x80000001u, .state = SHM_OFFCPU_SLEEP },
		{ .hdr = { SHM_REC_OFFCPU, sizeof(o[0]), 0, SHM_F_OPEN }, .start = 2000,
		  .end = 2000, .stack_id = 0, .state = SHM_OFFCPU_PREEMPTED },
		{ .hdr = { SHM_REC_OFFCPU, sizeof(o[0]), 0, 0 }, .start = 3000, .end = 3100,
		  .stack_id = 7, .state = SHM_OFFCPU_DISK },
		{ .hdr = { SHM_REC_OFFCPU, sizeof(o[0]), 0, 0 }, .start = 4000, .end = 4200,
		  .stack_id = 7, .state = SHM_OFFCPU_OTHER },
	};
	char text[256];

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_OFF, SHM_CLOCK_MONOTONIC), 0);
	assert_int_equal(client_hello_flags(f->c) & SHM_HELLO_OFFCPU, 0);
	claim(&f->r, 0, 100);
	claim(&f->r, 1, 101);
	push(&f->r, 1, &o[2], sizeof(o[2]));
	push(&f->r, 0, &o[0], sizeof(o[0]));
	push(&f->r, 0, &o[1], sizeof(o[1]));
	push(&f->r, 1, &o[3], sizeof(o[3]));
	assert_int_equal(client_drain(f->c), 0);
	q_text(f, text, sizeof(text), "SELECT group_concat(tid || ',' || start_ns || ',' || end_ns "
				      "|| ',' || state || ',' || coalesce(stack_id, 'NULL') || ',' || "
				      "open, ';') FROM (SELECT * FROM offcpu ORDER BY start_ns)");
	assert_string_equal(text, "100,1000,1500,sleep,2147483649,0;100,2000,2000,preempted,NULL,1;"
				  "101,3000,3100,disk,7,0;101,4000,4200,other,7,0");
	q_text(f, text, sizeof(text), "SELECT group_concat(stack_id || ',' || state || ',' || "
				      "intervals || ',' || total_ns, ';') FROM (SELECT * FROM "
				      "offcpu_stacks WHERE tid = 101 ORDER BY state)");
	assert_string_equal(text, "7,disk,1,100;7,other,1,200");
}

/* Windows on the TSC clock are placed like every other record. */
static void test_client_gpu_windows_tsc(void **state)
{
	struct fixture *f = *state;

	/* the fixture's clock: 2000 ticks per ns, anchored at (3e6 ticks,
	 * 2000 ns) */
	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_OFF, SHM_CLOCK_TSC), 0);
	claim(&f->r, 0, 1);
	push_window(&f->r, 0, 5000000, 7000000, 3000000);
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(q_int(f, "SELECT start_ns FROM gpu_windows"), 3000);
	assert_int_equal(q_int(f, "SELECT end_ns FROM gpu_windows"), 4000);
	assert_int_equal(q_int(f, "SELECT gpu_sampled_since_ns FROM processes"), 2000);
}

/* gpu_sampling's one row, traced_share (a double) checked apart. */
static void want_view(struct fixture *f, const char *want, double traced_share)
{
	char text[256];

	q_text(f, text, sizeof(text),
	       "SELECT group_concat(proc_id || '|' || since_ns || '|' || until_ns || '|' || "
	       "span_ns || '|' || windows || '|' || traced_ns, ';') FROM gpu_sampling");
	assert_string_equal(text, want);
	assert_int_equal(q_int(f, "SELECT abs(traced_share - %.17g) < 1e-15 FROM gpu_sampling",
			       traced_share), 1);
}

/* gpu_sampling over a live process (it ends with its last window), then
 * over the ended one (it ends with the process).  Sampled since 10000 ns,
 * 3 windows traced 400 + 250 + 100 = 750 ns. */
static void test_client_gpu_sampling_view(void **state)
{
	static const uint64_t win[][2] = { { 10000, 10400 }, { 30000, 30250 }, { 52000, 52100 } };
	struct fixture *f = *state;
	struct client *c1 = f->c, *c2 = client_new(&f->co, -1);
	struct region r2;

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_OFF, SHM_CLOCK_MONOTONIC), 0);
	claim(&f->r, 0, 100);
	for (size_t i = 0; i < sizeof(win) / sizeof(win[0]); i++)
		push_window(&f->r, 0, win[i][0], win[i][1], 10000);
	assert_int_equal(client_drain(f->c), 0);
	/* a process that was not sampled is not in the view */
	region_make(&r2, 1, RING);
	f->c = c2;
	assert_int_equal(connect_region(f, &r2, 43, 1, SHM_MALLOC_OFF, SHM_CLOCK_MONOTONIC), 0);
	f->c = c1;

	/* live: until the last window's end, 52100 */
	want_view(f, "1|10000|52100|42100|3|750", 750.0 / 42100.0);
	send_simple(f->c, SHM_MSG_BYE, sizeof(struct shm_msg_bye), 90000);
	assert_int_equal(client_end(f->c, CLIENT_CLOSED, 999999), 0);
	/* ended: until the process's end, 90000 */
	want_view(f, "1|10000|90000|80000|3|750", 750.0 / 80000.0);
	region_drop(&r2);
}

/* ---- ranges, markers, counters ---- */

static void test_client_push_pop(void **state)
{
	struct fixture *f = *state;
	char text[512];

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_OFF, SHM_CLOCK_MONOTONIC), 0);
	send_string(f->c, 1, "step");
	send_string(f->c, 2, "forward");
	send_string(f->c, 3, "backward");
	send_string(f->c, 4, "matmul");
	claim(&f->r, 0, 100);
	claim(&f->r, 1, 200);
	push_range(&f->r, 0, SHM_RANGE_POP, 50, 0, 0);   /* nothing open: ignored */
	push_range(&f->r, 0, SHM_RANGE_PUSH, 100, 0, 1); /* step */
	push_range(&f->r, 0, SHM_RANGE_PUSH, 110, 0, 2); /*   forward */
	push_range(&f->r, 0, SHM_RANGE_PUSH, 120, 0, 4); /*     matmul */
	push_range(&f->r, 0, SHM_RANGE_POP, 130, 0, 0);
	push_range(&f->r, 0, SHM_RANGE_POP, 140, 0, 0);
	push_range(&f->r, 0, SHM_RANGE_PUSH, 150, 0, 3); /*   backward */
	/* another thread nests on its own, interleaved in time */
	push_range(&f->r, 1, SHM_RANGE_PUSH, 115, 0, 4);
	push_range(&f->r, 1, SHM_RANGE_POP, 135, 0, 0);
	assert_int_equal(client_drain(f->c), 0);
	push_range(&f->r, 0, SHM_RANGE_POP, 160, 0, 0);
	push_range(&f->r, 0, SHM_RANGE_POP, 170, 0, 0);
	push_range(&f->r, 0, SHM_RANGE_POP, 180, 0, 0); /* one too many: ignored */
	push_range(&f->r, 0, SHM_RANGE_PUSH, 190, 0, 1); /* left open */
	assert_int_equal(client_end(f->c, CLIENT_CLOSED, 1000), 0);

	q_text(f, text, sizeof(text),
	       "SELECT group_concat(x, ';') FROM (SELECT r.tid || ',' || r.kind || ',' || "
	       "n.text || ',' || r.start_ns || ',' || coalesce(r.end_ns, 'open') || ',' || "
	       "r.depth || ',' || coalesce(pn.text, '-') AS x FROM ranges r "
	       "JOIN strings n ON n.id = r.name_id LEFT JOIN ranges p ON p.id = r.parent_id "
	       "LEFT JOIN strings pn ON pn.id = p.name_id ORDER BY r.id)");
	assert_string_equal(text, "100,push,step,100,170,0,-;"
				  "100,push,forward,110,140,1,step;"
				  "200,push,matmul,115,135,0,-;"
				  "100,push,matmul,120,130,2,forward;"
				  "100,push,backward,150,160,1,step;"
				  "100,push,step,190,open,0,-");
	assert_int_equal(q_int(f, "SELECT count(*) FROM ranges WHERE proc_id = 1 AND domain_id = 0 "
				  "AND color IS NULL AND category IS NULL"), 6);
	q_text(f, text, sizeof(text), "SELECT name || ',' || dur_ns FROM ranges_named WHERE "
				      "depth = 2");
	assert_string_equal(text, "matmul,10");
}

/* A slot's next owner starts with no open ranges, though its last owner
 * left one open. */
static void test_client_push_slot_reuse(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_OFF, SHM_CLOCK_MONOTONIC), 0);
	claim(&f->r, 2, 300);
	push_range(&f->r, 2, SHM_RANGE_PUSH, 100, 0, 1);
	push_range(&f->r, 2, SHM_RANGE_PUSH, 110, 0, 1);
	push_range(&f->r, 2, SHM_RANGE_POP, 120, 0, 0);
	slot(&f->r, 2)->state = SHM_SLOT_RETIRED;
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(slot(&f->r, 2)->state, SHM_SLOT_FREE);
	claim(&f->r, 2, 301);
	push_range(&f->r, 2, SHM_RANGE_POP, 200, 0, 0); /* not the old owner's */
	push_range(&f->r, 2, SHM_RANGE_PUSH, 210, 0, 1);
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(q_int(f, "SELECT count(*) FROM ranges WHERE tid = 300 AND depth = 0 "
				  "AND end_ns IS NULL"), 1);
	assert_int_equal(q_int(f, "SELECT count(*) FROM ranges WHERE tid = 301 AND depth = 0 "
				  "AND parent_id IS NULL AND start_ns = 210"), 1);
}

/* NVTX keeps a stack per domain: a POP closes its own domain's innermost
 * range, though another domain's range opened since is still open. */
static void test_client_push_pop_domains(void **state)
{
	struct fixture *f = *state;
	char text[256];

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_OFF, SHM_CLOCK_MONOTONIC), 0);
	claim(&f->r, 0, 100);
	push_range_in(&f->r, 0, SHM_RANGE_PUSH, 100, 0, 1, 0);  /* app */
	push_range_in(&f->r, 0, SHM_RANGE_PUSH, 110, 0, 2, 9);  /* nccl, inside it */
	push_range_in(&f->r, 0, SHM_RANGE_POP, 120, 0, 0, 0);   /* app ends first */
	push_range_in(&f->r, 0, SHM_RANGE_POP, 130, 0, 0, 5);   /* nothing open there */
	push_range_in(&f->r, 0, SHM_RANGE_PUSH, 140, 0, 3, 0);  /* inside nccl's */
	push_range_in(&f->r, 0, SHM_RANGE_POP, 150, 0, 0, 9);
	push_range_in(&f->r, 0, SHM_RANGE_POP, 160, 0, 0, 0);
	assert_int_equal(client_drain(f->c), 0);
	q_text(f, text, sizeof(text), "SELECT group_concat(x, ';') FROM (SELECT name_id || ',' || "
				      "domain_id || ',' || end_ns || ',' || depth || ',' || "
				      "coalesce(parent_id, 'N') AS x FROM ranges ORDER BY id)");
	assert_string_equal(text, "1,0,120,0,N;2,9,150,1,1;3,0,160,1,2");
}

/* A thread that pushes without popping: past the tracked depth, rows are
 * still stored with their depth, and the pops balance. */
static void test_client_push_deep(void **state)
{
	struct fixture *f = *state;
	const uint32_t n = 4100; /* above the collector's 4096 */
	uint64_t t = 1;

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_OFF, SHM_CLOCK_MONOTONIC), 0);
	claim(&f->r, 0, 100);
	for (uint32_t i = 0; i < 2 * n + 1; i++) {
		push_range(&f->r, 0, i < n ? SHM_RANGE_PUSH : SHM_RANGE_POP, t++, 0, 1);
		if (i % 50 == 49)
			assert_int_equal(client_drain(f->c), 0);
	}
	push_range(&f->r, 0, SHM_RANGE_PUSH, t++, 0, 1);
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(q_int(f, "SELECT count(*) FROM ranges"), n + 1);
	assert_int_equal(q_int(f, "SELECT max(depth) FROM ranges"), n - 1);
	/* the 4096 tracked ones ended, innermost first */
	assert_int_equal(q_int(f, "SELECT count(*) FROM ranges WHERE end_ns IS NOT NULL"), 4096);
	assert_int_equal(q_int(f, "SELECT end_ns FROM ranges WHERE depth = 0"), 2 * n);
	assert_int_equal(q_int(f, "SELECT count(*) FROM ranges WHERE depth = 4095 AND "
				  "end_ns = %u", n + 4 + 1), 1);
	/* everything was popped: the next push is outermost again */
	assert_int_equal(q_int(f, "SELECT depth FROM ranges WHERE start_ns = %u", 2 * n + 2), 0);
}

static void test_client_start_end(void **state)
{
	struct fixture *f = *state;
	struct shm_rec_range g = { .hdr = GPU_HDR(SHM_REC_RANGE, g), .ts = 100, .id = 77,
				   .op = SHM_RANGE_START, .name_id = 1, .domain_id = 2,
				   .color = 0xff00ff00u, .category = 3 };
	char text[256];

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_OFF, SHM_CLOCK_MONOTONIC), 0);
	send_string(f->c, 1, "load");
	send_string(f->c, 2, "mydomain");
	claim(&f->r, 0, 100);
	claim(&f->r, 1, 200);
	/* START on one thread, END on another, in a lower slot */
	push(&f->r, 1, &g, sizeof(g));
	push_range(&f->r, 0, SHM_RANGE_END, 300, 77, 0);
	push_range(&f->r, 0, SHM_RANGE_END, 310, 77, 0); /* again: ignored */
	push_range(&f->r, 0, SHM_RANGE_END, 320, 999, 0); /* unknown id: ignored */
	/* open while a push range is open on the same thread: no nesting */
	push_range(&f->r, 1, SHM_RANGE_PUSH, 400, 0, 1);
	push_range(&f->r, 1, SHM_RANGE_START, 410, 78, 1); /* never ends */
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(client_end(f->c, CLIENT_CLOSED, 1000), 0);
	q_text(f, text, sizeof(text), "SELECT tid || ',' || kind || ',' || name || ',' || domain || "
				      "',' || start_ns || ',' || end_ns || ',' || depth || ',' || "
				      "coalesce(parent_id, 'N') || ',' || color || ',' || category "
				      "FROM ranges_named WHERE start_ns = 100");
	assert_string_equal(text, "200,startend,load,mydomain,100,300,0,N,4278255360,3");
	assert_int_equal(q_int(f, "SELECT count(*) FROM ranges WHERE kind = 'startend' AND "
				  "start_ns = 410 AND end_ns IS NULL AND depth = 0 AND "
				  "parent_id IS NULL"), 1);
	assert_int_equal(q_int(f, "SELECT count(*) FROM ranges"), 3);
}

static void test_client_marks_counters(void **state)
{
	struct fixture *f = *state;
	struct shm_rec_mark m = { .hdr = GPU_HDR(SHM_REC_MARK, m), .ts = 100, .name_id = 1,
				  .domain_id = 2 };
	struct shm_rec_counter k = { .hdr = GPU_HDR(SHM_REC_COUNTER, k), .ts = 200,
				     .name_id = 3, .domain_id = 2, .value = 0.125 };

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_OFF, SHM_CLOCK_MONOTONIC), 0);
	claim(&f->r, 0, 100);
	push(&f->r, 0, &m, sizeof(m));
	push(&f->r, 0, &k, sizeof(k));
	k.ts = 300, k.value = NAN;
	push(&f->r, 0, &k, sizeof(k));
	k.ts = 400, k.value = -1e300;
	push(&f->r, 0, &k, sizeof(k));
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(q_int(f, "SELECT count(*) FROM markers WHERE proc_id = 1 AND tid = 100 "
				  "AND domain_id = 2 AND name_id = 1 AND ts_ns = 100"), 1);
	assert_int_equal(q_int(f, "SELECT count(*) FROM counters WHERE proc_id = 1 AND tid = 100 "
				  "AND domain_id = 2 AND name_id = 3 AND ts_ns = 200 AND "
				  "value = 0.125"), 1);
	/* NaN (a loss that diverged) is kept, as NULL */
	assert_int_equal(q_int(f, "SELECT count(*) FROM counters WHERE ts_ns = 300 AND "
				  "value IS NULL"), 1);
	assert_int_equal(q_int(f, "SELECT count(*) FROM counters WHERE ts_ns = 400 AND "
				  "value = -1e300"), 1);
}

/* A kernel belongs to the innermost push range open on its launching
 * thread when it was launched. */
static void test_client_kernels_in_ranges(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_OFF, SHM_CLOCK_MONOTONIC), 0);
	send_string(f->c, 1, "_Z3fooi");
	send_string(f->c, 2, "cudaLaunchKernel");
	send_string(f->c, 3, "step");
	send_string(f->c, 4, "forward");
	claim(&f->r, 0, 100);
	claim(&f->r, 1, 101);
	push_range(&f->r, 0, SHM_RANGE_PUSH, 100, 0, 3);
	push_api(&f->r, 0, 110, 1, 2, SHM_API_RUNTIME);
	push_range(&f->r, 0, SHM_RANGE_PUSH, 120, 0, 4);
	push_api(&f->r, 0, 130, 2, 2, SHM_API_RUNTIME);
	push_range(&f->r, 0, SHM_RANGE_POP, 140, 0, 0);
	push_range(&f->r, 0, SHM_RANGE_POP, 150, 0, 0);
	push_api(&f->r, 0, 160, 3, 2, SHM_API_RUNTIME);
	push_kernel(&f->r, 1, 115, 1, 1);
	push_kernel(&f->r, 1, 135, 2, 1);
	push_kernel(&f->r, 1, 165, 3, 1);
	push_kernel(&f->r, 1, 175, 4, 9); /* no launch seen, no name: still listed */
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(q_int(f, "SELECT r.name_id FROM kernels_in_ranges k JOIN ranges r ON "
				  "r.id = k.range_id WHERE k.correlation = 1"), 3);
	assert_int_equal(q_int(f, "SELECT r.name_id FROM kernels_in_ranges k JOIN ranges r ON "
				  "r.id = k.range_id WHERE k.correlation = 2"), 4);
	assert_int_equal(q_int(f, "SELECT count(*) FROM kernels_in_ranges WHERE correlation = 3 "
				  "AND range_id IS NULL AND name = 'foo(int)'"), 1);
	assert_int_equal(q_int(f, "SELECT count(*) FROM kernels_named WHERE correlation = 4 AND "
				  "name IS NULL AND launch_tid IS NULL"), 1);
}

/* ---- time ---- */

static void test_client_tsc_times(void **state)
{
	struct fixture *f = *state;
	struct shm_rec_cuda r;

	/* the fixture's clock: 2000 ticks per ns, anchored at (3e6 ticks,
	 * 2000 ns) */
	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_OFF, SHM_CLOCK_TSC), 0);
	claim(&f->r, 0, 1);
	r = cuda_rec(SHM_FN_CUDA_DEVICE_SYNCHRONIZE, 5000000, 0, 0, 0);
	r.t_end = 7000000;
	push(&f->r, 0, &r, sizeof(r));
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(q_int(f, "SELECT start_ns FROM cuda_calls"), 3000);
	assert_int_equal(q_int(f, "SELECT end_ns FROM cuda_calls"), 4000);
}

/* ---- threads, strings, ends ---- */

static void test_client_thread_and_bye(void **state)
{
	struct fixture *f = *state;
	unsigned char buf[128];
	struct shm_msg_string s = { { SHM_MAGIC, SHM_WIRE_VERSION, SHM_MSG_STRING,
				       sizeof(s) + 6, 0 }, 9, 6 };
	struct shm_msg_thread t = { { SHM_MAGIC, SHM_WIRE_VERSION, SHM_MSG_THREAD,
				       sizeof(t), 0 }, 2, 4242, 9, 0, 777 };
	struct shm_msg_thread t2 = t;

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
	memcpy(buf, &s, sizeof(s));
	memcpy(buf + sizeof(s), "worker", 6);
	assert_int_equal(client_message(f->c, buf, sizeof(s) + 6, NULL, 0, 0), 0);
	assert_int_equal(client_message(f->c, &t, sizeof(t), NULL, 0, 0), 0);
	t2.tid = 4243;
	t2.name_id = 0;
	assert_int_equal(client_message(f->c, &t2, sizeof(t2), NULL, 0, 0), 0);
	assert_int_equal(q_int(f, "SELECT first_ns FROM threads WHERE tid = 4242 AND "
				  "name = 'worker' AND proc_id = 1"), 777);
	assert_int_equal(q_int(f, "SELECT count(*) FROM threads WHERE tid = 4243 AND name IS NULL"), 1);
	send_simple(f->c, SHM_MSG_KICK, sizeof(struct shm_msg_hdr), 0);
	send_simple(f->c, SHM_MSG_BYE, sizeof(struct shm_msg_bye), 123456);
	assert_int_equal(client_end(f->c, CLIENT_CLOSED, 999999), 0);
	assert_int_equal(q_int(f, "SELECT end_ns FROM processes WHERE end_reason = 'exit'"), 123456);
}

/* BYE's CPU time at exit (wire 12) ends up in processes.exit_*_ns, once
 * it can be true; one without it, or with a split past its total, leaves
 * them NULL, and a BYE of the older size is refused. */
static void test_client_bye_cpu(void **state)
{
	struct fixture *f = *state;
	struct region r2, r3;
	struct client *c1 = f->c, *c2 = client_new(&f->co, -1), *c3 = client_new(&f->co, -1);
	struct shm_msg_bye b = { { SHM_MAGIC, SHM_WIRE_VERSION, SHM_MSG_BYE, sizeof(b), 0 },
				 5000, SHM_BYE_CPU, 0, 302000000, 280000000, 22000000 };

	connect_three(f, c2, &r2, c3, &r3);
	assert_int_equal(client_message(c1, &b, sizeof(b), NULL, 0, 0), 0);
	b.user_ns = 400000000; /* more than the total: not kept */
	assert_int_equal(client_message(c2, &b, sizeof(b), NULL, 0, 0), 0);
	assert_int_equal(client_message(c3, &b, 16 + 8, NULL, 0, 0), -EBADMSG);
	assert_int_equal(client_end(c1, CLIENT_CLOSED, 9000), 0);
	assert_int_equal(client_end(c2, CLIENT_CLOSED, 9000), 0);
	assert_int_equal(client_end(c3, CLIENT_CLOSED, 9000), 0);
	assert_int_equal(q_int(f, "SELECT count(*) FROM processes WHERE pid = 42 AND end_ns = 5000"
				  " AND exit_cpu_ns = 302000000 AND exit_user_ns = 280000000"
				  " AND exit_sys_ns = 22000000"), 1);
	assert_int_equal(q_int(f, "SELECT count(*) FROM processes WHERE pid = 43 AND"
				  " end_reason = 'exit' AND exit_cpu_ns IS NULL"), 1);
	assert_int_equal(q_int(f, "SELECT count(*) FROM processes WHERE pid = 44 AND"
				  " end_reason = 'rejected' AND exit_cpu_ns IS NULL"), 1);
	/* the view: the exit reading, final; none, not final */
	assert_int_equal(q_int(f, "SELECT count(*) FROM process_cpu c JOIN processes p"
				  " USING (proc_id) WHERE p.pid = 42 AND c.final = 1"
				  " AND c.cpu_ns = 302000000 AND c.read_ns = 5000"), 1);
	assert_int_equal(q_int(f, "SELECT count(*) FROM process_cpu c JOIN processes p"
				  " USING (proc_id) WHERE p.pid = 43 AND c.final = 0"), 1);
	region_drop(&r2);
	region_drop(&r3);
}

static void test_client_disconnect_and_shutdown(void **state)
{
	struct fixture *f = *state;
	struct region r2;
	struct client *c1 = f->c, *c2 = client_new(&f->co, -1);

	region_make(&r2, 1, RING);
	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
	f->c = c2;
	assert_int_equal(connect_region(f, &r2, 43, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
	/* records written before the crash are still stored */
	claim(&f->r, 0, 5);
	push_heap(&f->r, 0, SHM_FN_MALLOC, 0, 100, 0x1000, 16, 0);
	assert_int_equal(client_end(c1, CLIENT_CLOSED, 555), 0);
	assert_int_equal(client_end(c2, CLIENT_SHUTDOWN, 666), 0);
	assert_int_equal(q_int(f, "SELECT end_ns FROM processes WHERE pid = 42 AND "
				  "end_reason = 'disconnect'"), 555);
	assert_int_equal(q_int(f, "SELECT end_ns FROM processes WHERE pid = 43 AND "
				  "end_reason = 'shutdown'"), 666);
	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations WHERE proc_id = 1"), 1);
	region_drop(&r2);
}

/* A fatal SIGNAL with no BYE after it makes the end a 'signal' at its
 * time; a BYE already in hand at shutdown makes it an 'exit' (issue 13,
 * items 12 and 14). */
static void test_client_fatal_and_bye_at_shutdown(void **state)
{
	struct fixture *f = *state;
	struct region r2, r3;
	struct client *c1 = f->c, *c2 = client_new(&f->co, -1), *c3 = client_new(&f->co, -1);
	struct shm_msg_signal m = { { SHM_MAGIC, SHM_WIRE_VERSION, SHM_MSG_SIGNAL, sizeof(m), 0 },
				    SIGSEGV, 1, 0xdead, 42, 0, 7777 };

	connect_three(f, c2, &r2, c3, &r3);
	assert_int_equal(client_message(c1, &m, sizeof(m), NULL, 0, 0), 0);
	m.signo = SIGBUS; /* only the first counts */
	assert_int_equal(client_message(c1, &m, sizeof(m), NULL, 0, 0), 0);
	send_simple(c2, SHM_MSG_BYE, sizeof(struct shm_msg_bye), 8888);
	assert_int_equal(client_end(c1, CLIENT_CLOSED, 9000), 0);
	assert_int_equal(client_end(c2, CLIENT_SHUTDOWN, 9000), 0);
	assert_int_equal(client_end(c3, CLIENT_SHUTDOWN, 9000), 0);
	assert_int_equal(q_int(f, "SELECT count(*) FROM processes WHERE pid = 42 AND "
				  "end_reason = 'signal' AND end_signal = 11 AND end_ns = 7777"), 1);
	assert_int_equal(q_int(f, "SELECT count(*) FROM processes WHERE pid = 43 AND "
				  "end_reason = 'exit' AND end_signal IS NULL AND end_ns = 8888"), 1);
	assert_int_equal(q_int(f, "SELECT count(*) FROM processes WHERE pid = 44 AND "
				  "end_reason = 'shutdown'"), 1);
	/* malformed SIGNALs are refused */
	m.signo = 0;
	assert_int_equal(client_message(c3, &m, sizeof(m), NULL, 0, 0), -EBADMSG);
	m.signo = SIGSEGV;
	assert_int_equal(client_message(c3, &m, sizeof(m) - 8, NULL, 0, 0), -EBADMSG);
	region_drop(&r2);
	region_drop(&r3);
}

/* ---- counters ---- */

static void set_counts(struct region *r, uint32_t i, uint64_t n, uint64_t dropped)
{
	slot(r, i)->count[SHM_FN_MALLOC] = n;
	slot(r, i)->bytes[SHM_FN_MALLOC] = n * 10;
	slot(r, i)->dropped = dropped;
}

static void test_client_counts_slot_reuse(void **state)
{
	struct fixture *f = *state;
	struct client_info info;

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_SAMPLE, SHM_CLOCK_MONOTONIC), 0);
	claim(&f->r, 0, 100);
	set_counts(&f->r, 0, 5, 1);
	assert_int_equal(client_flush_counts(f->c), 0);
	set_counts(&f->r, 0, 7, 3);
	assert_int_equal(client_flush_counts(f->c), 0);
	/* the thread exits: the collector stores the last totals, frees the slot */
	slot(&f->r, 0)->state = SHM_SLOT_RETIRED;
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(slot(&f->r, 0)->state, SHM_SLOT_FREE);
	assert_int_equal(slot(&f->r, 0)->count[SHM_FN_MALLOC], 0);
	/* another thread takes the slot and counts from zero */
	claim(&f->r, 0, 200);
	set_counts(&f->r, 0, 3, 0);
	assert_int_equal(client_flush_counts(f->c), 0);
	assert_int_equal(client_flush_counts(f->c), 0);
	slot(&f->r, 0)->state = SHM_SLOT_RETIRED;
	assert_int_equal(client_drain(f->c), 0);
	/* tid 100 again (tid reuse), on another slot, and the no-slot drops */
	claim(&f->r, 2, 100);
	set_counts(&f->r, 2, 4, 2);
	hdr(&f->r)->dropped_no_slot = 6;
	/* CUPTI's losses, counted in two steps: stored as their sum */
	hdr(&f->r)->dropped_cupti = 4;
	assert_int_equal(client_flush_counts(f->c), 0);
	hdr(&f->r)->dropped_cupti = 9;
	/* stack captures the shim's tables refused: stored without their
	 * stack, so their own rows, and no loss in `shimmer ls` */
	hdr(&f->r)->stack_full = 16384;
	hdr(&f->r)->pystack_full = 3;
	assert_int_equal(client_flush_counts(f->c), 0);
	client_info(f->c, &info);
	assert_int_equal(info.dropped, 5 + 6 + 9); /* ring_full, no_slot, cupti */
	hdr(&f->r)->stack_full = 16390;
	assert_int_equal(client_end(f->c, CLIENT_CLOSED, 1), 0);

	assert_int_equal(q_int(f, "SELECT count FROM function_counts WHERE tid = 100 AND fn_id = %d", SHM_FN_MALLOC), 11);
	assert_int_equal(q_int(f, "SELECT bytes FROM function_counts WHERE tid = 100 AND fn_id = %d", SHM_FN_MALLOC), 110);
	assert_int_equal(q_int(f, "SELECT count FROM function_counts WHERE tid = 200 AND fn_id = %d", SHM_FN_MALLOC), 3);
	assert_int_equal(q_int(f, "SELECT count(*) FROM function_counts"), 2);
	assert_int_equal(q_int(f, "SELECT events FROM drops WHERE tid = 100 AND reason = 'ring_full'"), 5);
	assert_int_equal(q_int(f, "SELECT count(*) FROM drops WHERE tid = 200"), 0);
	assert_int_equal(q_int(f, "SELECT events FROM drops WHERE tid = 0 AND reason = 'no_slot'"), 6);
	assert_int_equal(q_int(f, "SELECT events FROM drops WHERE tid = 0 AND reason = 'cupti'"), 9);
	assert_int_equal(q_int(f, "SELECT events FROM drops WHERE tid = 0 AND reason = 'stack_full'"),
			 16390);
	assert_int_equal(q_int(f, "SELECT events FROM drops WHERE tid = 0 AND reason = 'pystack_full'"),
			 3);
}

static void test_client_ring_wraps(void **state)
{
	struct fixture *f = *state;
	uint64_t n = 0;

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
	claim(&f->r, 3, 9);
	/* 48-byte records over a 4096-byte ring: every lap ends in a PAD */
	for (int lap = 0; lap < 10; lap++) {
		for (int i = 0; i < 50; i++, n++)
			push_heap(&f->r, 3, SHM_FN_MALLOC, 0, n, 0x1000 + n * 16, 8, 0);
		assert_int_equal(client_drain(f->c), 0);
	}
	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations"), (int64_t)n);
	assert_int_equal(q_int(f, "SELECT sum(alloc_ns) FROM allocations"), (int64_t)(n * (n - 1) / 2));
}

/* ---- rejection ---- */

/* A valid record, then whatever `bad` writes into slot 0; slot 1 holds a
 * valid record too.  The client is rejected; `stored` allocations remain
 * (a slot whose head or state is wrong is not read at all). */
static void expect_rejected(struct fixture *f, void (*bad)(struct region *), int counted,
			    int stored)
{
	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
	claim(&f->r, 0, 10);
	claim(&f->r, 1, 11);
	push_heap(&f->r, 0, SHM_FN_MALLOC, 0, 100, 0x1000, 16, 0);
	bad(&f->r);
	push_heap(&f->r, 1, SHM_FN_MALLOC, 0, 200, 0x2000, 16, 0);
	assert_int_equal(client_drain(f->c), -EBADMSG);
	assert_int_equal(client_end(f->c, CLIENT_REJECTED, 1), 0);
	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations"), stored);
	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations WHERE alloc_tid = 11"), 1);
	assert_int_equal(q_int(f, "SELECT count(*) FROM processes WHERE end_reason = 'rejected'"), 1);
	assert_int_equal(q_int(f, "SELECT count(*) FROM drops WHERE reason = 'malformed' AND "
				  "tid = 10 AND events = 1"), counted);
}

static void write_raw(struct region *r, const void *rec, size_t size)
{
	struct shm_slot *s = slot(r, 0);

	memcpy((unsigned char *)s + SHM_SLOT_CTL_BYTES + (s->head & (r->ring - 1)), rec, size);
	s->head += size;
}

static void bad_size(struct region *r)
{
	struct shm_rec_heap h = { .hdr = { SHM_REC_HEAP, 40, SHM_FN_MALLOC, 0 } };

	write_raw(r, &h, sizeof(h));
}

static void bad_unaligned(struct region *r)
{
	struct shm_rec_heap h = { .hdr = { SHM_REC_HEAP, 12, SHM_FN_MALLOC, 0 } };

	write_raw(r, &h, 16);
}

static void bad_beyond_head(struct region *r)
{
	struct shm_rec_heap h = { .hdr = { SHM_REC_HEAP, sizeof(h), SHM_FN_MALLOC, 0 } };

	write_raw(r, &h, 40); /* publishes less than the record's size */
}

static void bad_family(struct region *r)
{
	struct shm_rec_heap h = { .hdr = { SHM_REC_HEAP, sizeof(h), SHM_FN_CUDA_MALLOC, 0 } };

	write_raw(r, &h, sizeof(h));
}

static void bad_fn_range(struct region *r)
{
	struct shm_rec_cuda c = { .hdr = { SHM_REC_CUDA, sizeof(c), SHM_FN_COUNT, 0 } };

	write_raw(r, &c, sizeof(c));
}

static void bad_fn_none(struct region *r)
{
	struct shm_rec_heap h = { .hdr = { SHM_REC_HEAP, sizeof(h), SHM_FN_NONE, 0 } };

	write_raw(r, &h, sizeof(h));
}

static void bad_type(struct region *r)
{
	struct shm_rec_heap h = { .hdr = { 99, sizeof(h), SHM_FN_MALLOC, 0 } };

	write_raw(r, &h, sizeof(h));
}

/* A CUDA record short or long by 8 bytes: its fixed size is checked (a
 * short one would leave the previous record's bytes in its fields). */
static void bad_cuda_short(struct region *r)
{
	struct shm_rec_cuda c = cuda_rec(SHM_FN_CUDA_MALLOC, 100, 0, 0x1000, 16);

	c.hdr.size = sizeof(c) - 8;
	write_raw(r, &c, sizeof(c) - 8);
}

static void bad_cuda_long(struct region *r)
{
	struct shm_rec_cuda c[2] = { cuda_rec(SHM_FN_CUDA_MALLOC, 100, 0, 0x1000, 16) };

	c[0].hdr.size = sizeof(c[0]) + 8;
	write_raw(r, c, sizeof(c[0]) + 8);
}

static void bad_kernel_size(struct region *r)
{
	struct shm_rec_kernel k = { .hdr = { SHM_REC_KERNEL, sizeof(k) - 8, 0, 0 } };

	write_raw(r, &k, sizeof(k) - 8);
}

static void bad_memcpy_size(struct region *r)
{
	struct shm_rec_memcpy m[2] = { { .hdr = { SHM_REC_MEMCPY, sizeof(m), 0, 0 } } };

	write_raw(r, m, sizeof(m));
}

static void bad_gpu_fn(struct region *r)
{
	struct shm_rec_memset m = { .hdr = { SHM_REC_MEMSET, sizeof(m), SHM_FN_CUDA_MEMSET, 0 } };

	write_raw(r, &m, sizeof(m));
}

static void bad_sync_size(struct region *r)
{
	struct shm_rec_gpu_sync g = { .hdr = { SHM_REC_GPU_SYNC, sizeof(g) + 8, 0, 0 } };
	unsigned char buf[sizeof(g) + 8] = { 0 };

	memcpy(buf, &g, sizeof(g));
	write_raw(r, buf, sizeof(buf));
}

static void bad_api_domain(struct region *r)
{
	struct shm_rec_api a = { .hdr = { SHM_REC_API, sizeof(a), 0, 0 }, .domain = 3 };

	write_raw(r, &a, sizeof(a));
}

static void bad_api_domain_zero(struct region *r)
{
	struct shm_rec_api a = { .hdr = { SHM_REC_API, sizeof(a), 0, 0 }, .domain = 0 };

	write_raw(r, &a, sizeof(a));
}

static void bad_range_op(struct region *r)
{
	struct shm_rec_range g = { .hdr = { SHM_REC_RANGE, sizeof(g), 0, 0 }, .op = 5 };

	write_raw(r, &g, sizeof(g));
}

static void bad_range_op_zero(struct region *r)
{
	struct shm_rec_range g = { .hdr = { SHM_REC_RANGE, sizeof(g), 0, 0 }, .op = 0 };

	write_raw(r, &g, sizeof(g));
}

static void bad_mark_size(struct region *r)
{
	struct shm_rec_counter k = { .hdr = { SHM_REC_MARK, sizeof(k), 0, 0 } };

	write_raw(r, &k, sizeof(k));
}

static void bad_counter_fn(struct region *r)
{
	struct shm_rec_counter k = { .hdr = { SHM_REC_COUNTER, sizeof(k), SHM_FN_MALLOC, 0 } };

	write_raw(r, &k, sizeof(k));
}

static void bad_pad_middle(struct region *r)
{
	struct shm_rec_hdr pad = { SHM_REC_PAD, 64, 0, 0 };
	unsigned char zero[64] = { 0 };

	memcpy(zero, &pad, sizeof(pad));
	write_raw(r, zero, sizeof(zero));
}

/* A STACK or PYSTACK record of size bytes (zero frames) claiming depth. */
static void write_stack(struct region *r, uint16_t type, uint16_t fn, uint32_t id,
			uint32_t depth, size_t size)
{
	unsigned char buf[sizeof(struct shm_rec_pystack) + 16 * (SHM_STACK_MAX + 1)] = { 0 };
	struct shm_rec_stack h = { .hdr = { type, (uint16_t)size, fn, 0 },
				   .stack_id = id, .depth = depth };

	assert_true(size >= sizeof(h) && size <= sizeof(buf));
	memcpy(buf, &h, sizeof(h));
	write_raw(r, buf, size);
}

#define STACK_BYTES(frame, depth) (sizeof(struct shm_rec_stack) + (frame) * (depth))

static void bad_stack_depth(struct region *r)
{
	write_stack(r, SHM_REC_STACK, 0, 1, SHM_STACK_MAX + 1, STACK_BYTES(8, SHM_STACK_MAX + 1));
}

static void bad_stack_size(struct region *r)
{
	write_stack(r, SHM_REC_STACK, 0, 1, 2, STACK_BYTES(8, 3));
}

static void bad_stack_short(struct region *r)
{
	struct shm_rec_hdr h = { SHM_REC_STACK, 8, 0, 0 };

	write_raw(r, &h, sizeof(h));
}

static void bad_stack_id(struct region *r)
{
	write_stack(r, SHM_REC_STACK, 0, 0, 1, STACK_BYTES(8, 1));
}

static void bad_stack_fn(struct region *r)
{
	write_stack(r, SHM_REC_STACK, SHM_FN_MALLOC, 1, 1, STACK_BYTES(8, 1));
}

/* A pystack's depth in a stack's size: 8 bytes a frame instead of 16. */
static void bad_pystack_size(struct region *r)
{
	write_stack(r, SHM_REC_PYSTACK, 0, 1, 2, STACK_BYTES(8, 2));
}

/* Larger than any valid record. */
static void bad_pystack_depth(struct region *r)
{
	write_stack(r, SHM_REC_PYSTACK, 0, 1, SHM_STACK_MAX + 1,
		    STACK_BYTES(16, SHM_STACK_MAX + 1));
}

static void bad_module_build_id(struct region *r)
{
	struct shm_rec_module m = module_rec(1, 1, 0x1000, 21, 0);

	write_raw(r, &m, sizeof(m));
}

static void bad_module_unload(struct region *r)
{
	struct shm_rec_module m = module_rec(1, 1, 0x1000, 0, 2);

	write_raw(r, &m, sizeof(m));
}

static void bad_module_range(struct region *r)
{
	struct shm_rec_module m = module_rec(1, 1, 0x1000, 0, 0);

	m.hi = m.lo - 1;
	write_raw(r, &m, sizeof(m));
}

static void bad_module_size(struct region *r)
{
	struct shm_rec_module m[2] = { module_rec(1, 1, 0x1000, 0, 0) };

	m[0].hdr.size = sizeof(m);
	write_raw(r, m, sizeof(m));
}

static void bad_window_order(struct region *r)
{
	struct shm_rec_gpu_window w = { .hdr = { SHM_REC_GPU_WINDOW, sizeof(w), 0, 0 },
					.start = 500, .end = 499, .since = 100 };

	write_raw(r, &w, sizeof(w));
}

static void bad_window_since(struct region *r)
{
	struct shm_rec_gpu_window w = { .hdr = { SHM_REC_GPU_WINDOW, sizeof(w), 0, 0 },
					.start = 500, .end = 600, .since = 501 };

	write_raw(r, &w, sizeof(w));
}

static void bad_window_size(struct region *r)
{
	struct shm_rec_gpu_window w[2] = { { .hdr = { SHM_REC_GPU_WINDOW, sizeof(w), 0, 0 },
					     .start = 500, .end = 600, .since = 100 } };

	write_raw(r, w, sizeof(w));
}

static void bad_window_fn(struct region *r)
{
	struct shm_rec_gpu_window w = { .hdr = { SHM_REC_GPU_WINDOW, sizeof(w), SHM_FN_MALLOC, 0 },
					.start = 500, .end = 600, .since = 100 };

	write_raw(r, &w, sizeof(w));
}

static void bad_offcpu(struct region *r, uint16_t size, uint16_t fn, uint64_t start,
		       uint64_t end, uint32_t state)
{
	struct shm_rec_offcpu o[2] = { { .hdr = { SHM_REC_OFFCPU, size, fn, 0 },
					 .start = start, .end = end, .state = state } };

	write_raw(r, o, size);
}

static void bad_offcpu_state0(struct region *r) { bad_offcpu(r, sizeof(struct shm_rec_offcpu), 0, 1, 2, 0); }
static void bad_offcpu_state5(struct region *r) { bad_offcpu(r, sizeof(struct shm_rec_offcpu), 0, 1, 2, 5); }
static void bad_offcpu_order(struct region *r) { bad_offcpu(r, sizeof(struct shm_rec_offcpu), 0, 3, 2, 2); }
static void bad_offcpu_size(struct region *r) { bad_offcpu(r, 2 * sizeof(struct shm_rec_offcpu), 0, 1, 2, 2); }
static void bad_offcpu_fn(struct region *r) { bad_offcpu(r, sizeof(struct shm_rec_offcpu), SHM_FN_FREE, 1, 2, 2); }

static void bad_head(struct region *r)
{
	slot(r, 0)->head += r->ring + 8;
}

static void bad_state(struct region *r)
{
	slot(r, 0)->state = 7;
}

static void bad_hwm(struct region *r)
{
	hdr(r)->slots_hwm = r->nslots + 1;
}

static void test_client_reject_size(void **s) { expect_rejected(*s, bad_size, 1, 2); }
static void test_client_reject_unaligned(void **s) { expect_rejected(*s, bad_unaligned, 1, 2); }
static void test_client_reject_beyond_head(void **s) { expect_rejected(*s, bad_beyond_head, 1, 2); }
static void test_client_reject_family(void **s) { expect_rejected(*s, bad_family, 1, 2); }
static void test_client_reject_fn_range(void **s) { expect_rejected(*s, bad_fn_range, 1, 2); }
static void test_client_reject_fn_none(void **s) { expect_rejected(*s, bad_fn_none, 1, 2); }
static void test_client_reject_type(void **s) { expect_rejected(*s, bad_type, 1, 2); }
static void test_client_reject_pad_middle(void **s) { expect_rejected(*s, bad_pad_middle, 1, 2); }
static void test_client_reject_cuda_short(void **s) { expect_rejected(*s, bad_cuda_short, 1, 2); }
static void test_client_reject_cuda_long(void **s) { expect_rejected(*s, bad_cuda_long, 1, 2); }
static void test_client_reject_kernel_size(void **s) { expect_rejected(*s, bad_kernel_size, 1, 2); }
static void test_client_reject_memcpy_size(void **s) { expect_rejected(*s, bad_memcpy_size, 1, 2); }
static void test_client_reject_gpu_fn(void **s) { expect_rejected(*s, bad_gpu_fn, 1, 2); }
static void test_client_reject_sync_size(void **s) { expect_rejected(*s, bad_sync_size, 1, 2); }
static void test_client_reject_api_domain(void **s) { expect_rejected(*s, bad_api_domain, 1, 2); }
static void test_client_reject_api_domain_zero(void **s) { expect_rejected(*s, bad_api_domain_zero, 1, 2); }
static void test_client_reject_range_op(void **s) { expect_rejected(*s, bad_range_op, 1, 2); }
static void test_client_reject_range_op_zero(void **s) { expect_rejected(*s, bad_range_op_zero, 1, 2); }
static void test_client_reject_mark_size(void **s) { expect_rejected(*s, bad_mark_size, 1, 2); }
static void test_client_reject_counter_fn(void **s) { expect_rejected(*s, bad_counter_fn, 1, 2); }
static void test_client_reject_stack_depth(void **s) { expect_rejected(*s, bad_stack_depth, 1, 2); }
static void test_client_reject_stack_size(void **s) { expect_rejected(*s, bad_stack_size, 1, 2); }
static void test_client_reject_stack_short(void **s) { expect_rejected(*s, bad_stack_short, 1, 2); }
static void test_client_reject_stack_id(void **s) { expect_rejected(*s, bad_stack_id, 1, 2); }
static void test_client_reject_stack_fn(void **s) { expect_rejected(*s, bad_stack_fn, 1, 2); }
static void test_client_reject_pystack_size(void **s) { expect_rejected(*s, bad_pystack_size, 1, 2); }
static void test_client_reject_pystack_depth(void **s) { expect_rejected(*s, bad_pystack_depth, 1, 2); }
static void test_client_reject_module_build_id(void **s) { expect_rejected(*s, bad_module_build_id, 1, 2); }
static void test_client_reject_module_unload(void **s) { expect_rejected(*s, bad_module_unload, 1, 2); }
static void test_client_reject_module_range(void **s) { expect_rejected(*s, bad_module_range, 1, 2); }
static void test_client_reject_module_size(void **s) { expect_rejected(*s, bad_module_size, 1, 2); }
static void test_client_reject_window_order(void **s) { expect_rejected(*s, bad_window_order, 1, 2); }
static void test_client_reject_window_since(void **s) { expect_rejected(*s, bad_window_since, 1, 2); }
static void test_client_reject_window_size(void **s) { expect_rejected(*s, bad_window_size, 1, 2); }
static void test_client_reject_window_fn(void **s) { expect_rejected(*s, bad_window_fn, 1, 2); }
static void test_client_reject_offcpu_state0(void **s) { expect_rejected(*s, bad_offcpu_state0, 1, 2); }
static void test_client_reject_offcpu_state5(void **s) { expect_rejected(*s, bad_offcpu_state5, 1, 2); }
static void test_client_reject_offcpu_order(void **s) { expect_rejected(*s, bad_offcpu_order, 1, 2); }
static void test_client_reject_offcpu_size(void **s) { expect_rejected(*s, bad_offcpu_size, 1, 2); }
static void test_client_reject_offcpu_fn(void **s) { expect_rejected(*s, bad_offcpu_fn, 1, 2); }
static void test_client_reject_head(void **s) { expect_rejected(*s, bad_head, 0, 1); }
static void test_client_reject_state(void **s) { expect_rejected(*s, bad_state, 0, 1); }

static void test_client_reject_hwm(void **state)
{
	struct fixture *f = *state;

	/* slots_hwm beyond nslots: the slots that exist are still drained */
	expect_rejected(f, bad_hwm, 0, 2);
}

static void test_client_pad_at_end_accepted(void **state)
{
	struct fixture *f = *state;
	struct shm_rec_hdr pad = { SHM_REC_PAD, RING - sizeof(struct shm_rec_heap), 0, 0 };
	unsigned char rec[RING] = { 0 };

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
	claim(&f->r, 0, 10);
	push_heap(&f->r, 0, SHM_FN_MALLOC, 0, 100, 0x1000, 16, 0);
	memcpy(rec, &pad, sizeof(pad));
	write_raw(&f->r, rec, RING - sizeof(struct shm_rec_heap));
	assert_int_equal(client_drain(f->c), 0);
	push_heap(&f->r, 0, SHM_FN_MALLOC, 0, 100, 0x2000, 16, 0);
	assert_int_equal(client_drain(f->c), 0);
	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations"), 2);
}

/* Messages: each bad one rejects; the process row and earlier data stay. */
static void test_client_reject_messages(void **state)
{
	struct fixture *f = *state;
	struct shm_msg_hdr h = { SHM_MAGIC, SHM_WIRE_VERSION + 1, SHM_MSG_KICK, sizeof(h), 0 };
	struct shm_msg_thread t = { { SHM_MAGIC, SHM_WIRE_VERSION, SHM_MSG_THREAD,
				      sizeof(t), 0 }, NSLOTS, 1, 0, 0, 0 };
	static unsigned char big[SHM_MSG_MAX + 8];
	unsigned char buf[1024];
	size_t len;
	int fds[2];

	assert_int_equal(connect_region(f, &f->r, 42, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
	claim(&f->r, 0, 10);
	push_heap(&f->r, 0, SHM_FN_MALLOC, 0, 100, 0x1000, 16, 0);
	assert_int_equal(client_drain(f->c), 0);

	assert_int_equal(client_message(f->c, &h, sizeof(h), NULL, 0, 0), -EBADMSG);
	h.version = SHM_WIRE_VERSION;
	h.magic = 0;
	assert_int_equal(client_message(f->c, &h, sizeof(h), NULL, 0, 0), -EBADMSG);
	h.magic = SHM_MAGIC;
	h.len = sizeof(h) + 4;
	assert_int_equal(client_message(f->c, &h, sizeof(h), NULL, 0, 0), -EBADMSG);
	h.len = sizeof(h);
	h.type = 99;
	assert_int_equal(client_message(f->c, &h, sizeof(h), NULL, 0, 0), -EBADMSG);
	assert_int_equal(client_message(f->c, &t, sizeof(t), NULL, 0, 0), -EBADMSG);
	memcpy(big, &h, sizeof(h));
	assert_int_equal(client_message(f->c, big, sizeof(big), NULL, 0, 0), -EBADMSG);
	assert_int_equal(client_message(f->c, &h, 4, NULL, 0, 0), -EBADMSG);
	/* descriptors where none belong are closed */
	h.type = SHM_MSG_KICK;
	fds[0] = dup(0);
	assert_int_equal(client_message(f->c, &h, sizeof(h), fds, 1, 0), -EBADMSG);
	assert_int_equal(fcntl(fds[0], F_GETFD), -1);
	/* a second HELLO */
	len = hello_make(buf, &f->r, 42, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC, "x", "", 0, "h");
	assert_int_equal(deliver(f->c, buf, len, f->r.fd), -EBADMSG);
	/* truncated control data */
	fds[0] = dup(0);
	fds[1] = dup(0);
	assert_int_equal(client_message(f->c, &h, sizeof(h), fds, 2, 1), -EBADMSG);
	assert_int_equal(fcntl(fds[1], F_GETFD), -1);

	assert_int_equal(client_end(f->c, CLIENT_REJECTED, 1), 0);
	assert_int_equal(q_int(f, "SELECT count(*) FROM allocations"), 1);
	assert_int_equal(q_int(f, "SELECT count(*) FROM processes WHERE end_reason = 'rejected'"), 1);
}

/* HELLO: each variant is refused before any processes row exists. */
static void expect_bad_hello(struct fixture *f, struct region *r, void (*edit)(void *),
			     int nfds)
{
	unsigned char buf[512];
	size_t len = hello_make(buf, r, 42, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC, "x", "", 0, "h");
	int fds[2] = { dup(r->fd), dup(r->fd) };
	struct client *c = client_new(&f->co, -1);

	honest_peer(c, buf);
	if (edit)
		edit(buf);
	assert_int_equal(client_message(c, buf, len, fds, nfds, 0), -EBADMSG);
	assert_int_equal(client_proc_id(c), 0);
	assert_int_equal(fcntl(fds[0], F_GETFD), -1);
	if (nfds < 2)
		close(fds[1]);
	client_free(c);
	assert_int_equal(q_int(f, "SELECT count(*) FROM processes"), 0);
}

static void edit_ring_not_pow2(void *b) { ((struct shm_msg_hello *)b)->ring_bytes = RING + 8; }
static void edit_ring_small(void *b) { ((struct shm_msg_hello *)b)->ring_bytes = 2048; }
static void edit_nslots(void *b) { ((struct shm_msg_hello *)b)->nslots = SHM_SLOTS_MAX + 1; }
static void edit_region_bytes(void *b) { ((struct shm_msg_hello *)b)->region_bytes += 4096; }
static void edit_clock(void *b) { ((struct shm_msg_hello *)b)->clock = 3; }
static void edit_mode(void *b) { ((struct shm_msg_hello *)b)->malloc_mode = 3; }
static void edit_strlen(void *b) { ((struct shm_msg_hello *)b)->host_len++; }

static void test_client_reject_hello(void **state)
{
	struct fixture *f = *state;
	struct region unsealed, wrong_hdr, small;
	unsigned char buf[512];
	size_t len;
	struct client *c;

	expect_bad_hello(f, &f->r, edit_ring_not_pow2, 1);
	expect_bad_hello(f, &f->r, edit_ring_small, 1);
	expect_bad_hello(f, &f->r, edit_nslots, 1);
	expect_bad_hello(f, &f->r, edit_region_bytes, 1);
	expect_bad_hello(f, &f->r, edit_clock, 1);
	expect_bad_hello(f, &f->r, edit_mode, 1);
	expect_bad_hello(f, &f->r, edit_strlen, 1);
	expect_bad_hello(f, &f->r, NULL, 2);

	/* region header disagrees with HELLO */
	region_make(&wrong_hdr, NSLOTS, RING);
	hdr(&wrong_hdr)->version = SHM_WIRE_VERSION + 1;
	expect_bad_hello(f, &wrong_hdr, NULL, 1);
	region_drop(&wrong_hdr);

	/* not sealed against shrinking */
	unsealed.fd = memfd_create("u", MFD_CLOEXEC);
	unsealed.nslots = NSLOTS;
	unsealed.ring = RING;
	unsealed.map = NULL;
	assert_int_equal(ftruncate(unsealed.fd, (off_t)SHM_REGION_BYTES(NSLOTS, RING)), 0);
	expect_bad_hello(f, &unsealed, NULL, 1);
	close(unsealed.fd);

	/* the memfd is shorter than HELLO says */
	region_make(&small, NSLOTS, RING);
	small.nslots = NSLOTS + 1;
	expect_bad_hello(f, &small, NULL, 1);
	small.nslots = NSLOTS;
	region_drop(&small);

	/* HELLO without its memfd */
	c = client_new(&f->co, -1);
	len = hello_make(buf, &f->r, 42, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC, "x", "", 0, "h");
	assert_int_equal(client_message(c, buf, len, NULL, 0, 0), -EBADMSG);
	client_free(c);

	/* anything before HELLO */
	c = client_new(&f->co, -1);
	{
		struct shm_msg_hdr h = { SHM_MAGIC, SHM_WIRE_VERSION, SHM_MSG_KICK, sizeof(h), 0 };

		assert_int_equal(client_message(c, &h, sizeof(h), NULL, 0, 0), -EBADMSG);
	}
	client_free(c);
	assert_int_equal(q_int(f, "SELECT count(*) FROM processes"), 0);
}

/* The largest ring a HELLO may announce, 64 MiB (README, wire.h), is
 * taken; 128 MiB is refused, though the memfd really is that large: the
 * bound, not the size check, refuses it.  Literal sizes, so that loosening
 * SHM_RING_MAX_BYTES fails here too. */
static void test_client_ring_max(void **state)
{
	struct fixture *f = *state;
	struct region big, huge;
	struct client *c;

	region_make(&big, 1, 64u << 20);
	region_make(&huge, 1, 128u << 20);
	assert_int_equal(connect_region(f, &big, 42, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC), 0);
	c = f->c = client_new(&f->co, -1);
	assert_int_equal(connect_region(f, &huge, 43, 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC),
			 -EBADMSG);
	assert_int_equal(client_proc_id(c), 0);
	assert_int_equal(q_int(f, "SELECT count(*) FROM processes"), 1);
	region_drop(&big);
	region_drop(&huge);
}

/* ---- through a real socket ---- */

static void send_fd(int sock, const void *msg, size_t len, int fd)
{
	union {
		struct cmsghdr align;
		char b[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct iovec iov = { (void *)msg, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = ctl.b, .msg_controllen = sizeof(ctl.b) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	assert_int_equal(sendmsg(sock, &mh, 0), (ssize_t)len);
}

static void test_client_socket(void **state)
{
	struct fixture *f = *state;
	static unsigned char big[SHM_MSG_MAX + 64];
	unsigned char buf[512];
	struct shm_msg_bye bye = { .hdr = { SHM_MAGIC, SHM_WIRE_VERSION, SHM_MSG_BYE, sizeof(bye), 0 },
				   .ts = 4444 };
	int sv[2];
	size_t len;
	struct client *c;

	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	client_free(f->c);
	c = f->c = client_new(&f->co, sv[0]);
	len = hello_make(buf, &f->r, (uint32_t)getpid(), 1, SHM_MALLOC_ALL, SHM_CLOCK_MONOTONIC,
			 "x", "", 0, "h");
	((struct shm_msg_hello *)buf)->uid = getuid();
	send_fd(sv[1], buf, len, f->r.fd);
	assert_int_equal(send(sv[1], &bye, sizeof(bye), 0), (ssize_t)sizeof(bye));
	assert_int_equal(client_recv(c), 0);
	assert_int_equal(client_proc_id(c), 1);
	close(sv[1]);
	assert_int_equal(client_recv(c), -EPIPE);
	assert_int_equal(client_end(c, CLIENT_CLOSED, 1), 0);
	assert_int_equal(q_int(f, "SELECT end_ns FROM processes WHERE end_reason = 'exit'"), 4444);

	/* an oversized message is truncated by the kernel and refused */
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	c = client_new(&f->co, sv[0]);
	memcpy(big, buf, len);
	assert_int_equal(send(sv[1], big, sizeof(big), 0), (ssize_t)sizeof(big));
	assert_int_equal(client_recv(c), -EBADMSG);
	close(sv[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
		T(test_client_hello_row),
		T(test_client_argv_not_utf8),
		T(test_client_argv_cut),
		T(test_client_parent),
		T(test_client_heap_rows),
		T(test_client_committed_marks),
		T(test_client_sampled_weight),
		T(test_client_cross_thread_free),
		T(test_client_late_free_displaced),
		T(test_client_free_paired_by_heap_order),
		T(test_client_future_records_wait),
		T(test_client_sample_release_only),
		T(test_client_pending_freed_in_batch),
		T(test_client_pending_freed_later),
		T(test_client_pending_at_end),
		T(test_client_pending_realloc),
		T(test_client_pending_displaced),
		T(test_client_stack_rows),
		T(test_client_stack_max),
		T(test_client_module_rows),
		T(test_client_exec),
		T(test_client_reconnect),
		T(test_client_identity_spoofed),
		T(test_client_identity_other_user),
		T(test_client_cuda_rows),
		T(test_client_strings),
		T(test_client_string_blowup),
		T(test_client_gpu_status),
		T(test_client_reject_gpu_status),
		T(test_client_gpu_rows),
		T(test_client_gpu_tsc),
		T(test_client_gpu_windows),
		T(test_client_offcpu),
		T(test_client_gpu_windows_tsc),
		T(test_client_gpu_sampling_view),
		T(test_client_push_pop),
		T(test_client_push_slot_reuse),
		T(test_client_push_pop_domains),
		T(test_client_push_deep),
		T(test_client_start_end),
		T(test_client_marks_counters),
		T(test_client_kernels_in_ranges),
		T(test_client_tsc_times),
		T(test_client_thread_and_bye),
		T(test_client_bye_cpu),
		T(test_client_disconnect_and_shutdown),
		T(test_client_fatal_and_bye_at_shutdown),
		T(test_client_counts_slot_reuse),
		T(test_client_ring_wraps),
		T(test_client_reject_size),
		T(test_client_reject_unaligned),
		T(test_client_reject_beyond_head),
		T(test_client_reject_family),
		T(test_client_reject_fn_range),
		T(test_client_reject_fn_none),
		T(test_client_reject_type),
		T(test_client_reject_pad_middle),
		T(test_client_reject_cuda_short),
		T(test_client_reject_cuda_long),
		T(test_client_reject_kernel_size),
		T(test_client_reject_memcpy_size),
		T(test_client_reject_gpu_fn),
		T(test_client_reject_sync_size),
		T(test_client_reject_api_domain),
		T(test_client_reject_api_domain_zero),
		T(test_client_reject_range_op),
		T(test_client_reject_range_op_zero),
		T(test_client_reject_mark_size),
		T(test_client_reject_counter_fn),
		T(test_client_reject_stack_depth),
		T(test_client_reject_stack_size),
		T(test_client_reject_stack_short),
		T(test_client_reject_stack_id),
		T(test_client_reject_stack_fn),
		T(test_client_reject_pystack_size),
		T(test_client_reject_pystack_depth),
		T(test_client_reject_module_build_id),
		T(test_client_reject_module_unload),
		T(test_client_reject_module_range),
		T(test_client_reject_module_size),
		T(test_client_reject_window_order),
		T(test_client_reject_window_since),
		T(test_client_reject_window_size),
		T(test_client_reject_window_fn),
		T(test_client_reject_offcpu_state0),
		T(test_client_reject_offcpu_state5),
		T(test_client_reject_offcpu_order),
		T(test_client_reject_offcpu_size),
		T(test_client_reject_offcpu_fn),
		T(test_client_reject_head),
		T(test_client_reject_state),
		T(test_client_reject_hwm),
		T(test_client_pad_at_end_accepted),
		T(test_client_reject_messages),
		T(test_client_reject_hello),
		T(test_client_ring_max),
		T(test_client_socket),
#undef T
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
