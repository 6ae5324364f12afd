/*
 * collector/ring.c: the shared-memory record source alone, with a sink that counts
 * what it is handed.  The region's producer is hostile here: it changes
 * the memfd while the collector maps it.
 *
 * To make the race of defect 1 (issue 13) deterministic, this file
 * defines fstat(), fstatfs() and fcntl(): ring.o's calls bind to them, so
 * the producer's move (shrink the memfd, then seal it) is made exactly
 * between two of the collector's checks, at each point in turn.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "collector/ring.h"
#include "wire.h"

#define RING 4096u
#define NSLOTS 2u

/* ---- the hostile producer, inside the collector's own syscalls ---- */

static int hook_fd = -1; /* the memfd to attack, -1: none */
static int hook_at;      /* attack at this intercepted call (0 = first) */
static int hook_calls;   /* intercepted calls so far */
static off_t hook_size;  /* what the memfd shrinks to */

static void maybe_attack(int fd)
{
	if (fd != hook_fd || hook_calls++ != hook_at)
		return;
	/* Shrink, then seal so that it looks right to a seal check. */
	if (syscall(SYS_ftruncate, fd, hook_size) == 0)
		syscall(SYS_fcntl, fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW);
}

int fstat(int fd, struct stat *st)
{
	maybe_attack(fd);
	return (int)syscall(SYS_fstat, fd, st);
}

int fstatfs(int fd, struct statfs *st)
{
	maybe_attack(fd);
	return (int)syscall(SYS_fstatfs, fd, st);
}

int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	long arg;

	va_start(ap, cmd);
	arg = va_arg(ap, long);
	va_end(ap);
	maybe_attack(fd);
	return (int)syscall(SYS_fcntl, fd, cmd, arg);
}

/* ---- a producer, written from common/wire.h ---- */

static uint64_t region_bytes(void)
{
	return SHM_REGION_BYTES(NSLOTS, RING);
}

/* A region of the right size and header, sealed with seals (0: none). */
static int make_memfd(int seals)
{
	int fd = memfd_create("test-ring", MFD_ALLOW_SEALING | MFD_CLOEXEC);
	struct shm_region h = { .magic = SHM_MAGIC, .version = SHM_WIRE_VERSION,
				.nslots = NSLOTS, .ring_bytes = RING };

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)region_bytes()), 0);
	assert_int_equal(pwrite(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	if (seals)
		assert_int_equal(fcntl(fd, F_ADD_SEALS, seals), 0);
	return fd;
}

/* ---- a sink that counts ---- */

struct counted {
	int records, streams, counts, drops;
	uint64_t stack_full, pystack_full, other; /* events handed on, by reason */
};

static int c_record(void *ctx, uint32_t stream, uint32_t tid, const union rec *r)
{
	(void)stream, (void)tid, (void)r;
	((struct counted *)ctx)->records++;
	return 0;
}

static void c_stream(void *ctx, uint32_t stream)
{
	(void)stream;
	((struct counted *)ctx)->streams++;
}

static int c_counts(void *ctx, uint32_t tid, uint16_t fn, uint64_t n, uint64_t b)
{
	(void)tid, (void)fn, (void)n, (void)b;
	((struct counted *)ctx)->counts++;
	return 0;
}

static int c_drops(void *ctx, uint32_t tid, const char *reason, uint64_t n)
{
	struct counted *c = ctx;

	(void)tid;
	c->drops++;
	if (strcmp(reason, "stack_full") == 0)
		c->stack_full += n;
	else if (strcmp(reason, "pystack_full") == 0)
		c->pystack_full += n;
	else
		c->other += n;
	return 0;
}

/* ---- defect 1: the memfd shrinks and is sealed while it is mapped ---- */

static sigjmp_buf on_bus;

static void bus_handler(int sig)
{
	(void)sig;
	siglongjmp(on_bus, 1);
}

/*
 * For each point k of the mapping's checks, a fresh unsealed memfd of the
 * right size is shrunk to one page and then sealed at call k.  ring_new()
 * must refuse it or map a region it can read whole: a SIGBUS is the
 * failure (the collector would die of it).
 */
static void test_ring_shrink_race(void **state)
{
	struct sigaction sa = { .sa_handler = bus_handler }, old;
	struct counted n = { 0 };
	struct rec_sink sink = { c_record, c_stream, c_counts, c_drops, &n };
	struct ring_geometry g = { NSLOTS, RING, region_bytes() };
	volatile int refused = 0, mapped = 0;

	(void)state;
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGBUS, &sa, &old), 0);
	for (int k = 0; k < 8; k++) {
		volatile int fd = make_memfd(0);
		char why[256] = "";
		struct ring *volatile r = NULL;

		hook_fd = fd;
		hook_at = k;
		hook_calls = 0;
		hook_size = 4096;
		if (sigsetjmp(on_bus, 1)) {
			hook_fd = -1;
			sigaction(SIGBUS, &old, NULL);
			fail_msg("SIGBUS reading a region shrunk and sealed at check %d", k);
		}
		r = ring_new(fd, &g, why, sizeof(why));
		if (r) {
			assert_int_equal(ring_drain(r, UINT64_MAX, &sink), 0);
			assert_int_equal(ring_flush(r, &sink), 0);
			mapped++;
		} else {
			assert_int_equal(errno, EBADMSG);
			assert_true(why[0] != 0);
			refused++;
		}
		hook_fd = -1;
		ring_free(r);
		close(fd);
	}
	sigaction(SIGBUS, &old, NULL);
	assert_true(refused > 0);
	(void)mapped;
}

/* The honest producer's region maps, and a record in it reaches the sink. */
static void test_ring_sealed_maps(void **state)
{
	struct counted n = { 0 };
	struct rec_sink sink = { c_record, c_stream, c_counts, c_drops, &n };
	struct ring_geometry g = { NSLOTS, RING, region_bytes() };
	struct shm_rec_mark m = { .hdr = { SHM_REC_MARK, sizeof(m), 0, 0 }, .ts = 5, .name_id = 1 };
	struct shm_slot sl = { .head = sizeof(m), .state = SHM_SLOT_ACTIVE, .tid = 7,
			       .generation = 1 };
	uint32_t hwm = 1;
	int fd = make_memfd(F_SEAL_SHRINK);
	char why[256];
	struct ring *r;

	(void)state;
	assert_int_equal(pwrite(fd, &sl, sizeof(sl), SHM_REGION_HDR_BYTES), (ssize_t)sizeof(sl));
	assert_int_equal(pwrite(fd, &m, sizeof(m), SHM_REGION_HDR_BYTES + SHM_SLOT_CTL_BYTES),
			 (ssize_t)sizeof(m));
	assert_int_equal(pwrite(fd, &hwm, sizeof(hwm), offsetof(struct shm_region, slots_hwm)),
			 (ssize_t)sizeof(hwm));
	r = ring_new(fd, &g, why, sizeof(why));
	assert_non_null(r);
	assert_int_equal(ring_drain(r, UINT64_MAX, &sink), 0);
	assert_int_equal(n.records, 1);
	assert_int_equal(n.streams, 1);
	ring_free(r);
	close(fd);
}

/* Without MFD_ALLOW_SEALING a memfd carries F_SEAL_SEAL only: refused. */
static void test_ring_unsealed_refused(void **state)
{
	struct ring_geometry g = { NSLOTS, RING, region_bytes() };
	int fd = memfd_create("unsealable", MFD_CLOEXEC);
	char why[256];

	(void)state;
	assert_int_equal(ftruncate(fd, (off_t)region_bytes()), 0);
	assert_null(ring_new(fd, &g, why, sizeof(why)));
	assert_int_equal(errno, EBADMSG);
	assert_non_null(strstr(why, "sealed"));
	close(fd);
}

/* ---- room handed back during a pass; busy rings ---- */

struct watch {
	const struct shm_slot *slot; /* slot 0, as the producer maps it */
	int records;
	uint64_t tail_seen; /* the slot's tail at the last record handed over */
};

static int w_record(void *ctx, uint32_t stream, uint32_t tid, const union rec *r)
{
	struct watch *w = ctx;

	(void)stream, (void)tid, (void)r;
	w->records++;
	w->tail_seen = __atomic_load_n(&w->slot->tail, __ATOMIC_ACQUIRE);
	return 0;
}

static void w_stream(void *ctx, uint32_t stream)
{
	(void)ctx, (void)stream;
}

/*
 * A pass over a full ring hands the room back as it goes (an eighth of the
 * ring at a time), so that a lossless producer waiting for room need not
 * wait for the whole pass; and a ring found a quarter full or more is busy
 * (the daemon drains it again at once), one with a record or two is not.
 */
static void test_ring_room_during_pass(void **state)
{
	struct watch w = { 0 };
	struct rec_sink sink = { w_record, w_stream, c_counts, c_drops, &w };
	struct ring_geometry g = { NSLOTS, RING, region_bytes() };
	const uint32_t per = RING / sizeof(struct shm_rec_mark);
	struct shm_slot sl = { .head = RING, .state = SHM_SLOT_ACTIVE, .tid = 7, .generation = 1 };
	uint32_t hwm = 1;
	int fd = make_memfd(F_SEAL_SHRINK | F_SEAL_GROW);
	char why[256];
	struct ring *r;
	unsigned char *map;

	(void)state;
	for (uint32_t i = 0; i < per; i++) {
		struct shm_rec_mark m = { .hdr = { SHM_REC_MARK, sizeof(m), 0, 0 },
					  .ts = 5 + i, .name_id = 1 };

		assert_int_equal(pwrite(fd, &m, sizeof(m),
					SHM_REGION_HDR_BYTES + SHM_SLOT_CTL_BYTES + i * sizeof(m)),
				 (ssize_t)sizeof(m));
	}
	if (per * sizeof(struct shm_rec_mark) < RING) { /* the ring's end, padded */
		struct shm_rec_hdr pad = { SHM_REC_PAD, (uint16_t)(RING - per * sizeof(struct shm_rec_mark)),
					   0, 0 };

		assert_int_equal(pwrite(fd, &pad, sizeof(pad), SHM_REGION_HDR_BYTES +
					SHM_SLOT_CTL_BYTES + per * sizeof(struct shm_rec_mark)),
				 (ssize_t)sizeof(pad));
	}
	assert_int_equal(pwrite(fd, &sl, sizeof(sl), SHM_REGION_HDR_BYTES), (ssize_t)sizeof(sl));
	assert_int_equal(pwrite(fd, &hwm, sizeof(hwm), offsetof(struct shm_region, slots_hwm)),
			 (ssize_t)sizeof(hwm));
	map = mmap(NULL, region_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(map != MAP_FAILED);
	w.slot = (const struct shm_slot *)(map + SHM_REGION_HDR_BYTES);
	r = ring_new(fd, &g, why, sizeof(why));
	assert_non_null(r);
	assert_int_equal(ring_drain(r, UINT64_MAX, &sink), 0);
	assert_int_equal(w.records, (int)per);
	/* at the last record, all but the last eighth was handed back */
	assert_true(w.tail_seen >= RING - RING / 8 - sizeof(struct shm_rec_mark));
	assert_int_equal(w.slot->tail, RING);
	assert_int_equal(ring_busy(r), 1);
	/* two more records: not busy */
	for (uint32_t i = 0; i < 2; i++) {
		struct shm_rec_mark m = { .hdr = { SHM_REC_MARK, sizeof(m), 0, 0 },
					  .ts = 5 + per + i, .name_id = 1 };

		memcpy(map + SHM_REGION_HDR_BYTES + SHM_SLOT_CTL_BYTES + i * sizeof(m), &m, sizeof(m));
	}
	__atomic_store_n(&((struct shm_slot *)(map + SHM_REGION_HDR_BYTES))->head,
			 RING + 2 * sizeof(struct shm_rec_mark), __ATOMIC_RELEASE);
	assert_int_equal(ring_drain(r, UINT64_MAX, &sink), 0);
	assert_int_equal(w.records, (int)per + 2);
	assert_int_equal(ring_busy(r), 0);
	ring_free(r);
	munmap(map, region_bytes());
	close(fd);
}

/*
 * The committed marks (wire.h): a collector that dies leaves in the region
 * how many records it had read (consumed, with each tail handed back) and
 * how many its store holds (committed, written only by ring_committed(),
 * after a commit), so that the next collector counts the difference as
 * lost; a second collector on the same region carries the count on.
 */
static void test_ring_committed_marks(void **state)
{
	struct counted cnt = { 0 };
	struct rec_sink sink = { c_record, c_stream, c_counts, c_drops, &cnt };
	struct ring_geometry g = { NSLOTS, RING, region_bytes() };
	const uint32_t n = 10, more = 3;
	struct shm_slot sl = { .head = n * sizeof(struct shm_rec_mark), .state = SHM_SLOT_ACTIVE,
			       .tid = 7, .generation = 1, .dropped = 4 };
	uint32_t hwm = 1;
	int fd = make_memfd(F_SEAL_SHRINK | F_SEAL_GROW);
	char why[256];
	struct ring *r;
	unsigned char *map;
	struct shm_slot *live;
	struct shm_region *reg;

	(void)state;
	for (uint32_t i = 0; i < n + more; i++) {
		struct shm_rec_mark m = { .hdr = { SHM_REC_MARK, sizeof(m), 0, 0 },
					  .ts = 5 + i, .name_id = 1 };

		assert_int_equal(pwrite(fd, &m, sizeof(m),
					SHM_REGION_HDR_BYTES + SHM_SLOT_CTL_BYTES + i * sizeof(m)),
				 (ssize_t)sizeof(m));
	}
	assert_int_equal(pwrite(fd, &sl, sizeof(sl), SHM_REGION_HDR_BYTES), (ssize_t)sizeof(sl));
	assert_int_equal(pwrite(fd, &hwm, sizeof(hwm), offsetof(struct shm_region, slots_hwm)),
			 (ssize_t)sizeof(hwm));
	map = mmap(NULL, region_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(map != MAP_FAILED);
	live = (struct shm_slot *)(map + SHM_REGION_HDR_BYTES);
	reg = (struct shm_region *)map;
	reg->dropped_no_slot = 2;
	r = ring_new(fd, &g, why, sizeof(why));
	assert_non_null(r);
	assert_int_equal(ring_drain(r, UINT64_MAX, &sink), 0);
	assert_int_equal(ring_flush(r, &sink), 0);
	assert_int_equal(cnt.records, (int)n);
	/* read and handed back, not stored yet */
	assert_int_equal(live->consumed, n);
	assert_int_equal(live->committed, 0);
	assert_int_equal(live->committed_dropped, 0);
	assert_int_equal(reg->committed_no_slot, 0);
	ring_committed(r);
	assert_int_equal(live->committed, n);
	assert_int_equal(live->committed_dropped, 4);
	assert_int_equal(reg->committed_no_slot, 2);
	ring_free(r);

	/* A second collector maps the region where the first left it: it
	 * reads the records after the tail only, and counts on. */
	__atomic_store_n(&live->head, (n + more) * sizeof(struct shm_rec_mark), __ATOMIC_RELEASE);
	cnt.records = 0;
	r = ring_new(fd, &g, why, sizeof(why));
	assert_non_null(r);
	assert_int_equal(ring_drain(r, UINT64_MAX, &sink), 0);
	assert_int_equal(cnt.records, (int)more);
	assert_int_equal(live->consumed, n + more);
	assert_int_equal(live->committed, n);
	ring_committed(r);
	assert_int_equal(live->committed, n + more);
	ring_free(r);
	munmap(map, region_bytes());
	close(fd);
}

/*
 * The stack captures the shim's tables refused, counted in the region's
 * header (stack_full, pystack_full): each flush hands on what grew, as
 * its own drop reasons, never as another's; the committed marks let a
 * second collector go on from what the first one's store holds, without
 * counting any twice or calling any lost.
 */
static int no_slot_cb(void *ctx, uint32_t tid, uint64_t lost)
{
	(void)ctx, (void)tid, (void)lost;
	return 0;
}

static void test_ring_stack_full(void **state)
{
	struct counted cnt = { 0 };
	struct rec_sink sink = { c_record, c_stream, c_counts, c_drops, &cnt };
	struct ring_geometry g = { NSLOTS, RING, region_bytes() };
	int fd = make_memfd(F_SEAL_SHRINK | F_SEAL_GROW);
	struct shm_region *reg;
	uint64_t lost = 99;
	char why[256];
	struct ring *r;

	(void)state;
	reg = mmap(NULL, region_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(reg != MAP_FAILED);
	reg->stack_full = 5;
	reg->pystack_full = 2;
	r = ring_new(fd, &g, why, sizeof(why));
	assert_non_null(r);
	assert_int_equal(ring_flush(r, &sink), 0);
	assert_int_equal(cnt.stack_full, 5);
	assert_int_equal(cnt.pystack_full, 2);
	assert_int_equal(cnt.other, 0);
	/* nothing grew: nothing more */
	assert_int_equal(ring_flush(r, &sink), 0);
	assert_int_equal(cnt.stack_full, 5);
	reg->stack_full = 8;
	assert_int_equal(ring_flush(r, &sink), 0);
	assert_int_equal(cnt.stack_full, 8);
	assert_int_equal(cnt.pystack_full, 2);
	assert_int_equal(reg->committed_stack_full, 0);
	ring_committed(r);
	assert_int_equal(reg->committed_stack_full, 8);
	assert_int_equal(reg->committed_pystack_full, 2);
	/* Handed on after the last commit, then the collector died: its
	 * store never had those 4. */
	reg->stack_full = 12;
	assert_int_equal(ring_flush(r, &sink), 0);
	ring_free(r);

	/* The next collector goes on from the marks: 12 - 8 more, no loss. */
	cnt = (struct counted){ 0 };
	reg->stack_full = 13;
	r = ring_new(fd, &g, why, sizeof(why));
	assert_non_null(r);
	assert_int_equal(ring_resume(r, &lost, no_slot_cb, NULL), 0);
	assert_int_equal(lost, 0);
	assert_int_equal(ring_flush(r, &sink), 0);
	assert_int_equal(cnt.stack_full, 5);
	assert_int_equal(cnt.pystack_full, 0);
	assert_int_equal(cnt.other, 0);
	ring_free(r);
	munmap(reg, region_bytes());
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ring_shrink_race),
		cmocka_unit_test(test_ring_sealed_maps),
		cmocka_unit_test(test_ring_unsealed_refused),
		cmocka_unit_test(test_ring_room_during_pass),
		cmocka_unit_test(test_ring_committed_marks),
		cmocka_unit_test(test_ring_stack_full),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
