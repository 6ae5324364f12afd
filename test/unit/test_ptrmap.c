/*
 * ptrmap against a plain array holding the same pairs: random puts,
 * replacements and takes across several table growths.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "collector/ptrmap.h"

#define KEYS 20000

static void test_ptrmap_matches_array(void **state)
{
	static int64_t truth[KEYS]; /* key i*16+16 -> value, 0 = absent */
	struct ptrmap m = { 0 };
	uint64_t seed = 12345;
	size_t live = 0;

	(void)state;
	for (int step = 0; step < 200000; step++) {
		size_t i;

		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		i = (size_t)(seed >> 33) % KEYS;
		if ((seed >> 20) & 1) {
			struct ptrmap_entry prev;

			live += truth[i] == 0;
			assert_int_equal(ptrmap_put(&m, i * 16 + 16, step + 1,
						    (uint64_t)step * 3, &prev), 0);
			assert_int_equal(prev.val, truth[i]);
			if (truth[i])
				assert_int_equal(prev.t, (uint64_t)(truth[i] - 1) * 3);
			truth[i] = step + 1;
		} else {
			uint64_t t = 0;

			live -= truth[i] != 0;
			assert_int_equal(ptrmap_take(&m, i * 16 + 16, &t), truth[i]);
			if (truth[i])
				assert_int_equal(t, (uint64_t)(truth[i] - 1) * 3);
			truth[i] = 0;
		}
		assert_int_equal(m.count, live);
	}
	for (size_t i = 0; i < KEYS; i++)
		assert_int_equal(ptrmap_take(&m, i * 16 + 16, NULL), truth[i]);
	assert_int_equal(m.count, 0);
	ptrmap_free(&m);
}

static void test_ptrmap_empty(void **state)
{
	struct ptrmap m = { 0 };

	(void)state;
	assert_int_equal(ptrmap_take(&m, 0x1000, NULL), 0);
	assert_int_equal(ptrmap_put(&m, 0x1000, 7, 0, NULL), 0);
	assert_int_equal(ptrmap_take(&m, 0, NULL), 0);
	assert_int_equal(ptrmap_take(&m, 0x2000, NULL), 0);
	assert_int_equal(ptrmap_take(&m, 0x1000, NULL), 7);
	assert_int_equal(ptrmap_take(&m, 0x1000, NULL), 0);
	ptrmap_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ptrmap_matches_array),
		cmocka_unit_test(test_ptrmap_empty),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
