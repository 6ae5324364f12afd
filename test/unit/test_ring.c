/*
 * The ring producer (preload/ring.c) against a consumer written here from
 * the protocol in common/wire.h: fill, wrap with PAD, refusal when full,
 * and a producer and a consumer thread streaming a million records.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "preload/ring.h"

#define RING 4096u

struct rec {
	struct shm_rec_hdr hdr;
	uint64_t seq;
	uint64_t words[14]; /* up to 128 bytes in all */
};

struct ring_mem {
	struct shm_slot slot;
	_Alignas(8) uint8_t data[];
};

static struct ring_mem *ring_new(uint32_t bytes)
{
	struct ring_mem *m = calloc(1, sizeof(*m) + bytes);

	assert_non_null(m);
	return m;
}

/* Writes a record of len bytes carrying seq; returns 0 when the ring is full. */
static int produce(struct ring_prod *p, uint64_t seq, uint32_t len)
{
	struct rec *r = ring_reserve(p, len);
	uint32_t i;

	if (!r)
		return 0;
	r->hdr = (struct shm_rec_hdr){ .type = SHM_REC_HEAP, .size = (uint16_t)len };
	r->seq = seq;
	for (i = 0; i < (len - 16) / 8; i++)
		r->words[i] = seq * 31 + i;
	ring_commit(p, len);
	return 1;
}

/* Writes records of len bytes numbered from 0 until the ring refuses one;
 * returns how many were written. */
static uint64_t fill(struct ring_prod *p, struct ring_mem *m, uint32_t len)
{
	uint64_t n = 0;

	ring_attach(p, &m->slot, m->data, RING);
	while (produce(p, n, len))
		n++;
	return n;
}

struct consumed {
	uint64_t records, pads, next_seq;
	int bad;
};

/* The consumer: drains [tail, head), checks every record, publishes tail. */
static void consume(struct shm_slot *s, const uint8_t *data, uint32_t bytes,
		    struct consumed *c)
{
	uint64_t head = __atomic_load_n(&s->head, __ATOMIC_ACQUIRE);
	uint64_t tail = __atomic_load_n(&s->tail, __ATOMIC_RELAXED);

	while (tail < head) {
		uint32_t pos = (uint32_t)tail & (bytes - 1);
		const struct rec *r = (const struct rec *)(data + pos);
		uint32_t i;

		if (r->hdr.size < 8 || r->hdr.size % 8 || pos + r->hdr.size > bytes) {
			c->bad++;
			return;
		}
		if (r->hdr.type == SHM_REC_PAD) {
			/* A pad always runs to the end of the ring. */
			if (pos + r->hdr.size != bytes)
				c->bad++;
			c->pads++;
		} else {
			if (r->seq != c->next_seq)
				c->bad++;
			for (i = 0; i < (r->hdr.size - 16u) / 8; i++)
				if (r->words[i] != r->seq * 31 + i)
					c->bad++;
			c->next_seq++;
			c->records++;
		}
		tail += r->hdr.size;
	}
	__atomic_store_n(&s->tail, tail, __ATOMIC_RELEASE);
}

static void test_ring_fill(void **state)
{
	struct ring_mem *m = ring_new(RING);
	struct ring_prod p;
	struct consumed c = { 0 };
	uint64_t n;

	(void)state;
	n = fill(&p, m, 56);
	/* 73 records of 56 bytes fill 4088 bytes; the 74th would need a pad. */
	assert_int_equal(n, RING / 56);
	assert_int_equal(m->slot.head, n * 56);
	consume(&m->slot, m->data, RING, &c);
	assert_int_equal(c.bad, 0);
	assert_int_equal(c.records, n);
	assert_int_equal(c.pads, 0);
	free(m);
}

static void test_ring_wrap_pad(void **state)
{
	struct ring_mem *m = ring_new(RING);
	struct ring_prod p;
	struct consumed c = { 0 };

	(void)state;
	assert_int_equal(fill(&p, m, 56), 73);
	consume(&m->slot, m->data, RING, &c);
	/* 8 bytes left before the end: the next record pads and starts at 0. */
	assert_true(produce(&p, 73, 56));
	assert_int_equal(m->slot.head, 74 * 56 + 8);
	assert_int_equal(((struct shm_rec_hdr *)(m->data + 4088))->type, SHM_REC_PAD);
	assert_int_equal(((struct shm_rec_hdr *)(m->data + 4088))->size, 8);
	assert_int_equal(((struct rec *)m->data)->seq, 73);
	consume(&m->slot, m->data, RING, &c);
	assert_int_equal(c.bad, 0);
	assert_int_equal(c.records, 74);
	assert_int_equal(c.pads, 1);
	free(m);
}

static void test_ring_full_refuses(void **state)
{
	struct ring_mem *m = ring_new(RING);
	struct ring_prod p;
	struct consumed c = { 0 };

	(void)state;
	assert_int_equal(fill(&p, m, 128), RING / 128);
	assert_int_equal(m->slot.head, RING);
	assert_null(ring_reserve(&p, 8));
	assert_int_equal(m->slot.head, RING);
	/* Room made by the consumer is seen on the next reservation. */
	consume(&m->slot, m->data, RING, &c);
	assert_int_equal(c.records, RING / 128);
	assert_non_null(ring_reserve(&p, 128));
	free(m);
}

/* ring_fits() answers what ring_reserve() would do, padding included,
 * and writes nothing. */
static void test_ring_fits_predicts_reserve(void **state)
{
	struct ring_mem *m = ring_new(RING);
	struct ring_prod p;
	struct consumed c = { 0 };

	(void)state;
	/* 8 bytes left, at the end: 8 fit there; 16 need the pad too, and
	 * reserve says the same. */
	assert_int_equal(fill(&p, m, 56), 73);
	assert_true(ring_fits(&p, 8));
	assert_false(ring_fits(&p, 16));
	assert_null(ring_reserve(&p, 16));
	assert_non_null(ring_reserve(&p, 8));
	consume(&m->slot, m->data, RING, &c);
	/* Emptied: 16 fit after the pad.  fits() neither writes the pad nor
	 * moves the producer's head past it; reserve() does both. */
	assert_true(ring_fits(&p, 16));
	assert_int_equal(p.head, 73 * 56);
	assert_int_not_equal(((struct shm_rec_hdr *)(m->data + 4088))->type, SHM_REC_PAD);
	/* After the pad, a record as large as the ring no longer fits. */
	assert_false(ring_fits(&p, RING));
	assert_non_null(ring_reserve(&p, 16));
	assert_int_equal(p.head, 73 * 56 + 8);
	assert_int_equal(((struct shm_rec_hdr *)(m->data + 4088))->type, SHM_REC_PAD);
	free(m);
}

/* ring_fits_spare: the record and the spare bytes after it; a record
 * refused for the spare still fits without it (the heap's headroom). */
static void test_ring_fits_spare(void **state)
{
	struct ring_mem *m = ring_new(RING);
	struct ring_prod p;
	uint64_t n = 0;

	(void)state;
	ring_attach(&p, &m->slot, m->data, RING);
	while (ring_fits_spare(&p, 64, RING / 8))
		assert_true(produce(&p, n++, 64));
	/* 512 bytes were kept free: 64-byte records fill them exactly. */
	assert_int_equal(n, (RING - RING / 8) / 64);
	assert_int_equal(p.head, RING - RING / 8);
	assert_true(ring_fits(&p, 64));
	assert_false(ring_fits_spare(&p, 64, RING / 8));
	while (ring_fits(&p, 64))
		assert_true(produce(&p, n++, 64));
	assert_int_equal(n, RING / 64);
	assert_false(ring_fits_spare(&p, 8, 0));
	free(m);
}

static void test_ring_rejects_bogus_tail(void **state)
{
	struct ring_mem *m = ring_new(RING);
	struct ring_prod p;

	(void)state;
	assert_int_equal(fill(&p, m, 64), RING / 64);
	/* A consumer claiming more than was written must not free space. */
	m->slot.tail = 1u << 20;
	assert_null(ring_reserve(&p, 64));
	assert_int_equal(m->slot.head, RING);
	free(m);
}

struct stream {
	struct ring_mem *m;
	uint32_t bytes;
	uint64_t n;
};

static void *stream_producer(void *arg)
{
	struct stream *st = arg;
	struct ring_prod p;
	uint64_t seq;

	ring_attach(&p, &st->m->slot, st->m->data, st->bytes);
	for (seq = 0; seq < st->n; seq++) {
		/* Sizes 16..128 so records wrap at every offset. */
		uint32_t len = 16 + (uint32_t)(seq % 15) * 8;

		while (!produce(&p, seq, len))
			sched_yield();
	}
	return 0;
}

static void test_ring_stream_threads(void **state)
{
	struct stream st = { .bytes = RING, .n = 1000000 };
	struct consumed c = { 0 };
	pthread_t th;

	(void)state;
	st.m = ring_new(RING);
	assert_int_equal(pthread_create(&th, 0, stream_producer, &st), 0);
	while (c.records < st.n && !c.bad) {
		uint64_t before = c.records;

		consume(&st.m->slot, st.m->data, RING, &c);
		if (c.records == before)
			sched_yield();
	}
	assert_int_equal(pthread_join(th, 0), 0);
	assert_int_equal(c.bad, 0);
	assert_int_equal(c.records, st.n);
	assert_true(c.pads > 0);
	assert_int_equal(st.m->slot.head, st.m->slot.tail);
	free(st.m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ring_fill),
		cmocka_unit_test(test_ring_wrap_pad),
		cmocka_unit_test(test_ring_full_refuses),
		cmocka_unit_test(test_ring_fits_predicts_reserve),
		cmocka_unit_test(test_ring_fits_spare),
		cmocka_unit_test(test_ring_rejects_bogus_tail),
		cmocka_unit_test(test_ring_stream_threads),
	};

	return cmocka_run_group_tests(tests, 0, 0);
}
