/*
 * blockmap: a release ends, of the blocks at its address, the latest born
 * at or before it, whatever order the blocks and releases arrive in;
 * displaced blocks wait in chains of at most BLOCKMAP_CHAIN_MAX.  (Random
 * interleavings, through both users, are test_heapagg's.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "collector/blockmap.h"

/* Blocks 1..4 born at orders 1, 3, 5, 7 at one address, all before any of
 * their releases (2, 4, 6) arrives: a chain three deep behind block 4. */
static void test_blockmap_chain(void **state)
{
	struct blockmap m = { 0 };

	(void)state;
	for (int i = 1; i <= 4; i++)
		assert_int_equal(blockmap_put(&m, 0x1000, i, (uint64_t)(2 * i - 1)), 0);
	assert_int_equal(blockmap_count(&m), 4);
	/* a release before every block ends none */
	assert_int_equal(blockmap_take(&m, 0x1000, 0), 0);
	assert_int_equal(blockmap_take(&m, 0x1000, 4), 2);
	assert_int_equal(blockmap_take(&m, 0x1000, 2), 1);
	assert_int_equal(blockmap_take(&m, 0x1000, 6), 3);
	assert_int_equal(blockmap_count(&m), 1);
	/* an equal order pairs (the time fallback's equal instants) */
	assert_int_equal(blockmap_take(&m, 0x1000, 7), 4);
	assert_int_equal(blockmap_take(&m, 0x1000, 100), 0);
	assert_int_equal(blockmap_take(&m, 0x2000, 100), 0);
	assert_int_equal(blockmap_count(&m), 0);
	blockmap_free(&m);
}

/* A chain that grows past its limit drops its oldest block. */
static void test_blockmap_chain_max(void **state)
{
	struct blockmap m = { 0 };
	uint32_t n = BLOCKMAP_CHAIN_MAX + 3;

	(void)state;
	for (uint32_t i = 1; i <= n; i++)
		assert_int_equal(blockmap_put(&m, 0x40, i, i * 10), 0);
	/* the live one and BLOCKMAP_CHAIN_MAX displaced */
	assert_int_equal(blockmap_count(&m), BLOCKMAP_CHAIN_MAX + 1);
	assert_int_equal(blockmap_take(&m, 0x40, 15), 0);
	assert_int_equal(blockmap_take(&m, 0x40, 25), 0);
	assert_int_equal(blockmap_take(&m, 0x40, 35), 3);
	assert_int_equal(blockmap_take(&m, 0x40, (uint64_t)n * 10), n);
	blockmap_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_blockmap_chain),
		cmocka_unit_test(test_blockmap_chain_max),
	};

	return cmocka_run_group_tests(tests, 0, 0);
}
