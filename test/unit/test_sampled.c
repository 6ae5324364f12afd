/*
 * The sampled-address set (preload/sampled.c): membership against a plain
 * array of what was inserted, tombstones, a full table, the filter, and
 * concurrent inserts and removals.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "preload/sampled.h"

/* Plausible heap addresses: 16-byte aligned, never 0 or 1. */
static const void *addr(uint64_t i)
{
	return (const void *)(uintptr_t)(0x7f0000000000ull + i * 16);
}

static void test_sampled_insert_lookup_remove(void **state)
{
	struct sampled s;
	uint64_t i;

	(void)state;
	assert_int_equal(sampled_init(&s, 4096, 4096), 0);
	for (i = 0; i < 1000; i++)
		assert_int_equal(sampled_insert(&s, addr(i)), 0);
	for (i = 0; i < 2000; i++)
		assert_int_equal(sampled_contains(&s, addr(i)), i < 1000);
	for (i = 0; i < 1000; i += 2)
		assert_int_equal(sampled_remove(&s, addr(i)), 1);
	for (i = 0; i < 1000; i++) {
		assert_int_equal(sampled_contains(&s, addr(i)), i % 2);
		/* The filter may say maybe for an absent key, never no for a
		 * present one. */
		if (i % 2)
			assert_true(sampled_maybe(&s, addr(i)));
	}
	assert_int_equal(sampled_remove(&s, addr(0)), 0);
	assert_int_equal(sampled_remove(&s, addr(5000)), 0);
	for (i = 1; i < 1000; i += 2)
		assert_int_equal(sampled_remove(&s, addr(i)), 1);
	/* Every counter is back to zero: the filter rejects everything. */
	for (i = 0; i < 2000; i++)
		assert_false(sampled_maybe(&s, addr(i)));
	sampled_fini(&s);
}

/* Finds n addresses whose home cell is the same in a table of cap cells. */
static void colliding(uint64_t cap, const void **out, int n)
{
	uint64_t home = sampled_hash((uint64_t)(uintptr_t)addr(0)) & (cap - 1), i;
	int k = 0;

	for (i = 0; k < n; i++)
		if ((sampled_hash((uint64_t)(uintptr_t)addr(i)) & (cap - 1)) == home)
			out[k++] = addr(i);
}

static void test_sampled_tombstones(void **state)
{
	const void *k[4];
	struct sampled s;
	uint64_t home;

	(void)state;
	assert_int_equal(sampled_init(&s, 4096, 1024), 0);
	colliding(1024, k, 4);
	home = sampled_hash((uint64_t)(uintptr_t)k[0]) & 1023;
	assert_int_equal(sampled_insert(&s, k[0]), 0);
	assert_int_equal(sampled_insert(&s, k[1]), 0);
	assert_int_equal(sampled_insert(&s, k[2]), 0);
	assert_int_equal(sampled_remove(&s, k[0]), 1);
	/* Lookups step over the tombstone to keys placed after it. */
	assert_false(sampled_contains(&s, k[0]));
	assert_true(sampled_contains(&s, k[1]));
	assert_true(sampled_contains(&s, k[2]));
	assert_int_equal(sampled_remove(&s, k[2]), 1);
	assert_true(sampled_contains(&s, k[1]));
	/* A new key reuses the first tombstone. */
	assert_int_equal(sampled_insert(&s, k[3]), 0);
	assert_int_equal(s.keys[home], (uint64_t)(uintptr_t)k[3]);
	assert_true(sampled_contains(&s, k[3]));
	sampled_fini(&s);
}

static void test_sampled_full(void **state)
{
	struct sampled s;
	uint64_t i;

	(void)state;
	assert_int_equal(sampled_init(&s, 64, 64), 0);
	for (i = 0; i < 64; i++)
		assert_int_equal(sampled_insert(&s, addr(i)), 0);
	assert_int_equal(sampled_insert(&s, addr(64)), -ENOSPC);
	assert_int_equal(s.full, 1);
	assert_false(sampled_contains(&s, addr(64)));
	for (i = 0; i < 64; i++)
		assert_true(sampled_contains(&s, addr(i)));
	assert_int_equal(sampled_remove(&s, addr(10)), 1);
	assert_int_equal(sampled_insert(&s, addr(64)), 0);
	assert_true(sampled_contains(&s, addr(64)));
	sampled_clear(&s);
	assert_int_equal(s.full, 0);
	for (i = 0; i <= 64; i++)
		assert_false(sampled_contains(&s, addr(i)));
	sampled_fini(&s);
}

static void test_sampled_rejects_bad_sizes(void **state)
{
	struct sampled s;

	(void)state;
	assert_int_equal(sampled_init(&s, 100, 64), -EINVAL);
	assert_int_equal(sampled_init(&s, 64, 96), -EINVAL);
	assert_int_equal(sampled_init(&s, 64, 32), -EINVAL);
}

struct worker {
	struct sampled *s;
	uint64_t base;
	int bad;
};

#define ROUNDS 200
#define KEYS 500

static void *churn(void *arg)
{
	struct worker *w = arg;
	int r;
	uint64_t i;

	for (r = 0; r < ROUNDS; r++) {
		for (i = 0; i < KEYS; i++)
			w->bad += sampled_insert(w->s, addr(w->base + i)) != 0;
		for (i = 0; i < KEYS; i++)
			w->bad += !sampled_contains(w->s, addr(w->base + i));
		for (i = 0; i < KEYS; i++)
			w->bad += sampled_remove(w->s, addr(w->base + i)) != 1;
	}
	return 0;
}

static void test_sampled_concurrent(void **state)
{
	struct worker w[4];
	pthread_t th[4];
	struct sampled s;
	int i;

	(void)state;
	assert_int_equal(sampled_init(&s, 32768, 1 << 14), 0);
	for (i = 0; i < 4; i++) {
		w[i] = (struct worker){ .s = &s, .base = (uint64_t)i * 100000 };
		assert_int_equal(pthread_create(&th[i], 0, churn, &w[i]), 0);
	}
	for (i = 0; i < 4; i++) {
		assert_int_equal(pthread_join(th[i], 0), 0);
		assert_int_equal(w[i].bad, 0);
	}
	sampled_fini(&s);
}

/*
 * The filter keeps neighbours together (sampled.h): the counters of one
 * 4 KiB page of addresses lie in one 64-byte line, one per 64-byte granule,
 * so that the frees of a hot page read one cached line.  And false
 * positives stay about live samples / filter bytes: 1,000 sampled 64 KiB
 * blocks in a 1 MiB filter make under 0.5% of other blocks "maybe".
 */
static void test_sampled_filter_locality(void **state)
{
	const uint64_t page = 0x7f1234567000ull;
	uint64_t i, maybe = 0, tried = 0;
	struct sampled s;

	(void)state;
	assert_int_equal(sampled_init(&s, 1 << 20, 1 << 14), 0);
	for (i = 0; i < 4096; i += 16) {
		uintptr_t c = (uintptr_t)sampled_filter(&s, page + i);

		assert_int_equal(c / 64, (uintptr_t)sampled_filter(&s, page) / 64);
		assert_int_equal(c % 64, (page + i) / 64 % 64);
	}
	assert_int_not_equal((uintptr_t)sampled_filter(&s, page) / 64,
			     (uintptr_t)sampled_filter(&s, page + 4096) / 64);
	for (i = 0; i < 1000; i++)
		assert_int_equal(sampled_insert(&s, (void *)(uintptr_t)(page + i * 65536)), 0);
	/* every granule of the other pages the sampled blocks span */
	for (i = 0; i < 1000; i++)
		for (uint64_t off = 4096 + 16; off < 65536; off += 64) {
			maybe += sampled_maybe(&s, (void *)(uintptr_t)(page + i * 65536 + off));
			tried++;
		}
	assert_true(maybe * 200 < tried);
	sampled_fini(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sampled_insert_lookup_remove),
		cmocka_unit_test(test_sampled_tombstones),
		cmocka_unit_test(test_sampled_full),
		cmocka_unit_test(test_sampled_rejects_bad_sizes),
		cmocka_unit_test(test_sampled_concurrent),
		cmocka_unit_test(test_sampled_filter_locality),
	};

	return cmocka_run_group_tests(tests, 0, 0);
}
