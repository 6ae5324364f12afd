/*
 * The stack table (preload/stacktab.c): one id and exactly one record per
 * distinct stack, also when threads race to insert the same stacks; the
 * record is written before any thread gets the id; a full table or arena
 * yields id 0 and is counted; a failed emit is retried; a fork child
 * emits again under the same ids.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "preload/stacktab.h"

#define THREADS 4
#define STACKS 3000
#define MAX_IDS (STACKS + 16)
#define DEPTH_MAX 40

/* What the emit callback saw, per id. */
struct seen {
	uint32_t emits[MAX_IDS];
	uint32_t n[MAX_IDS];
	uint64_t first[MAX_IDS]; /* w[0] of the stack emitted */
	uint32_t total;
	int fail_next; /* the next emit fails */
	int bad;
};

static int record(void *ctx, uint32_t id, const uint64_t *w, uint32_t n)
{
	struct seen *s = ctx;

	if (__atomic_exchange_n(&s->fail_next, 0, __ATOMIC_RELAXED))
		return -1;
	if (!id || id >= MAX_IDS || !n) {
		__atomic_fetch_add(&s->bad, 1, __ATOMIC_RELAXED);
		return 0;
	}
	s->n[id] = n;
	s->first[id] = w[0];
	__atomic_fetch_add(&s->total, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->emits[id], 1, __ATOMIC_RELEASE);
	return 0;
}

/* Stack k: 1 + k % DEPTH_MAX pcs, all derived from k. */
static uint32_t make_stack(uint32_t k, uint64_t *w)
{
	uint32_t n = 1 + k % DEPTH_MAX, i;

	for (i = 0; i < n; i++)
		w[i] = 0x400000u + (uint64_t)k * 4096 + i * 8;
	return n;
}

static void test_stacktab_same_stack_same_id(void **state)
{
	struct stacktab st;
	struct seen *s = calloc(1, sizeof(*s));
	uint64_t a[3] = { 1, 2, 3 }, b[3] = { 1, 2, 4 };
	uint32_t ia, ib;

	(void)state;
	assert_int_equal(stacktab_init(&st, 64, 1024), 0);
	ia = stacktab_id(&st, a, 3, record, s);
	ib = stacktab_id(&st, b, 3, record, s);
	assert_int_not_equal(ia, 0);
	assert_int_not_equal(ib, 0);
	assert_int_not_equal(ia, ib);
	assert_int_equal(stacktab_id(&st, a, 3, record, s), ia);
	assert_int_equal(stacktab_id(&st, a, 2, record, s) != ia, 1); /* a prefix is another stack */
	assert_int_equal(s->emits[ia], 1);
	assert_int_equal(s->emits[ib], 1);
	assert_int_equal(s->total, 3);
	assert_int_equal(s->n[ia], 3);
	stacktab_fini(&st);
	free(s);
}

struct racer {
	struct stacktab *st;
	struct seen *s;
	uint32_t start;
	uint32_t ids[STACKS];
	int unpublished; /* ids handed out before their record was written */
};

static void *race(void *arg)
{
	struct racer *r = arg;
	uint64_t w[DEPTH_MAX];
	uint32_t i, k, n, id;

	for (i = 0; i < STACKS; i++) {
		k = (r->start + i * 7) % STACKS;
		n = make_stack(k, w);
		id = stacktab_id(r->st, w, n, record, r->s);
		if (id && id < MAX_IDS && !__atomic_load_n(&r->s->emits[id], __ATOMIC_ACQUIRE))
			r->unpublished++;
		r->ids[k] = id;
	}
	return 0;
}

static void test_stacktab_concurrent_inserts(void **state)
{
	static struct racer r[THREADS];
	struct stacktab st;
	struct seen *s = calloc(1, sizeof(*s));
	pthread_t th[THREADS];
	uint64_t w[DEPTH_MAX];
	uint32_t k, j, id;
	int i;

	(void)state;
	assert_int_equal(stacktab_init(&st, 1u << 13, 1u << 20), 0);
	for (i = 0; i < THREADS; i++) {
		r[i] = (struct racer){ .st = &st, .s = s, .start = (uint32_t)i * 997 };
		assert_int_equal(pthread_create(&th[i], 0, race, &r[i]), 0);
	}
	for (i = 0; i < THREADS; i++)
		assert_int_equal(pthread_join(th[i], 0), 0);
	assert_int_equal(s->bad, 0);
	assert_int_equal(s->total, STACKS);
	for (k = 0; k < STACKS; k++) {
		id = r[0].ids[k];
		assert_int_not_equal(id, 0);
		for (i = 1; i < THREADS; i++)
			assert_int_equal(r[i].ids[k], id);
		assert_int_equal(s->emits[id], 1);
		assert_int_equal(s->n[id], make_stack(k, w));
		assert_true(s->first[id] == w[0]);
	}
	/* Distinct stacks, distinct ids. */
	for (k = 1; k < STACKS; k++)
		for (j = 0; j < k; j += 97)
			assert_int_not_equal(r[0].ids[k], r[0].ids[j]);
	for (i = 0; i < THREADS; i++)
		assert_int_equal(r[i].unpublished, 0);
	assert_int_equal(stacktab_full(&st), 0);
	stacktab_fini(&st);
	free(s);
}

static void test_stacktab_full_table(void **state)
{
	struct stacktab st;
	struct seen *s = calloc(1, sizeof(*s));
	uint64_t w[DEPTH_MAX];
	uint32_t k, n, id, got = 0, first = 0;

	(void)state;
	/* 16 entries: filling stops at 12. */
	assert_int_equal(stacktab_init(&st, 16, 4096), 0);
	for (k = 0; k < 20; k++) {
		n = make_stack(k, w);
		id = stacktab_id(&st, w, n, record, s);
		if (k == 0)
			first = id;
		got += id != 0;
	}
	assert_int_equal(got, 12);
	assert_int_equal(stacktab_full(&st), 8);
	assert_int_equal(s->total, 12);
	/* Known stacks are still found, under their id, without a new record. */
	assert_int_not_equal(first, 0);
	n = make_stack(0, w);
	assert_int_equal(stacktab_id(&st, w, n, record, s), first);
	assert_int_equal(s->total, 12);
	stacktab_fini(&st);
	free(s);
}

static void test_stacktab_full_arena(void **state)
{
	struct stacktab st;
	struct seen *s = calloc(1, sizeof(*s));
	uint64_t w[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, v[8] = { 9, 9, 9, 9, 9, 9, 9, 9 };

	(void)state;
	assert_int_equal(stacktab_init(&st, 64, 12), 0);
	assert_int_not_equal(stacktab_id(&st, w, 8, record, s), 0);
	assert_int_equal(stacktab_id(&st, v, 8, record, s), 0);
	assert_int_equal(stacktab_full(&st), 1);
	assert_int_not_equal(stacktab_id(&st, v, 4, record, s), 0); /* what fits still goes */
	assert_int_equal(s->total, 2);
	stacktab_fini(&st);
	free(s);
}

/* Refusals counted where the caller says (the event region's word, which
 * the collector reads), from its value; back in the table with NULL. */
static void test_stacktab_count_at(void **state)
{
	struct stacktab st;
	struct seen *s = calloc(1, sizeof(*s));
	uint64_t w[DEPTH_MAX], word = 100;
	uint32_t k, n;

	(void)state;
	assert_int_equal(stacktab_init(&st, 16, 4096), 0);
	for (k = 0; k < 14; k++) {
		n = make_stack(k, w);
		stacktab_id(&st, w, n, record, s);
	}
	assert_int_equal(stacktab_full(&st), 2);
	stacktab_count_at(&st, &word);
	assert_int_equal(stacktab_full(&st), 100);
	for (k = 14; k < 17; k++) {
		n = make_stack(k, w);
		assert_int_equal(stacktab_id(&st, w, n, record, s), 0);
	}
	assert_int_equal(word, 103);
	assert_int_equal(stacktab_full(&st), 103);
	/* a known stack is no refusal */
	n = make_stack(0, w);
	assert_int_not_equal(stacktab_id(&st, w, n, record, s), 0);
	assert_int_equal(word, 103);
	stacktab_count_at(&st, NULL);
	assert_int_equal(stacktab_full(&st), 0);
	n = make_stack(20, w);
	assert_int_equal(stacktab_id(&st, w, n, record, s), 0);
	assert_int_equal(stacktab_full(&st), 1);
	assert_int_equal(word, 103);
	stacktab_fini(&st);
	free(s);
}

static void test_stacktab_failed_emit_retried(void **state)
{
	struct stacktab st;
	struct seen *s = calloc(1, sizeof(*s));
	uint64_t w[2] = { 5, 6 };
	uint32_t id;

	(void)state;
	assert_int_equal(stacktab_init(&st, 64, 1024), 0);
	s->fail_next = 1;
	assert_int_equal(stacktab_id(&st, w, 2, record, s), 0);
	assert_int_equal(s->total, 0);
	id = stacktab_id(&st, w, 2, record, s);
	assert_int_not_equal(id, 0);
	assert_int_equal(s->emits[id], 1);
	assert_int_equal(stacktab_id(&st, w, 2, record, s), id);
	assert_int_equal(s->total, 1);
	stacktab_fini(&st);
	free(s);
}

static void test_stacktab_fork_child_reemits(void **state)
{
	struct stacktab st;
	struct seen *s = calloc(1, sizeof(*s));
	uint64_t w[2] = { 7, 8 };
	uint32_t id;

	(void)state;
	assert_int_equal(stacktab_init(&st, 64, 1024), 0);
	id = stacktab_id(&st, w, 2, record, s);
	assert_int_not_equal(id, 0);
	stacktab_fork_child(&st);
	assert_int_equal(stacktab_id(&st, w, 2, record, s), id);
	assert_int_equal(stacktab_id(&st, w, 2, record, s), id);
	assert_int_equal(s->emits[id], 2);
	stacktab_fini(&st);
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stacktab_same_stack_same_id),
		cmocka_unit_test(test_stacktab_concurrent_inserts),
		cmocka_unit_test(test_stacktab_full_table),
		cmocka_unit_test(test_stacktab_full_arena),
		cmocka_unit_test(test_stacktab_count_at),
		cmocka_unit_test(test_stacktab_failed_emit_retried),
		cmocka_unit_test(test_stacktab_fork_child_reemits),
	};

	return cmocka_run_group_tests(tests, 0, 0);
}
