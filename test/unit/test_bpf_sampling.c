/*
 * bpf/sampling.h, the heap sampler of the BPF programs, against the shim's
 * (preload/sampler.h) and the mathematics: log2 in 32.32 fixed point
 * within 1e-8 of libm's, each draw within a part in 10^7 (and a billionth
 * of the mean) of the shim's for the same uniform variate, and allocations sampled with probability
 * 1 - exp(-n/mean) (the collector's weights rest on it).
 */
#include <linux/types.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "bpf/sampling.h"
#include "preload/sampler.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 0x2545f4914f6cdd1dull;
}

static void test_bpf_sampling_log2(void **state)
{
	(void)state;
	assert_int_equal(at_ilog2(1), 0);
	assert_int_equal(at_ilog2(2), 1);
	assert_int_equal(at_ilog2(3), 1);
	assert_int_equal(at_ilog2(1ull << 52), 52);
	assert_int_equal(at_ilog2(~0ull), 63);
	assert_int_equal(at_log2_q32(1), 0);
	assert_int_equal(at_log2_q32(1ull << 40), 40ull << 32);
	for (int i = 0; i < 200000; i++) {
		uint64_t k = (next() >> 11) + 1; /* [1, 2^53] */
		double want = log2((double)k), got = (double)at_log2_q32(k) / 4294967296.0;

		assert_true(fabs(got - want) < 1e-8);
	}
}

/* For the same variate u = k / 2^53, the integer draw is the shim's:
 * floor(-ln(u) * mean) + 1, to a part in 10^7 and a billionth of the mean. */
static void test_bpf_sampling_draw_matches_shim(void **state)
{
	static const uint64_t means[] = { 1, 4096, 65536, 524288, 1ull << 30, 1ull << 40 };

	(void)state;
	for (size_t m = 0; m < sizeof(means) / sizeof(means[0]); m++) {
		uint64_t q16 = (uint64_t)llround((double)means[m] * M_LN2 * 65536.0);

		for (int i = 0; i < 50000; i++) {
			uint64_t k = (next() >> 11) + 1;
			double u = (double)k * 0x1p-53;
			double want = floor(-log(u) * (double)means[m]) + 1;
			double got = (double)at_draw(k, q16);

			/* the fixed point's 2^-32 in log2 costs mean * 2^-32
			 * bytes at most: a billionth of the mean */
			assert_true(fabs(got - want) <= 2 + want * 1e-7 + (double)means[m] * 1e-9);
		}
	}
	/* the extremes: u = 1 draws 1 byte; u = 2^-53, 53 ln 2 means */
	assert_int_equal(at_draw(1ull << 53, 65536ull * 65536), 1);
	assert_true(fabs((double)at_draw(1, (uint64_t)(65536 * M_LN2 * 65536)) -
			 53 * M_LN2 * 65536) < 3);
}

/* Driving the countdown as the BPF program does, an allocation of n bytes
 * is sampled with probability 1 - exp(-n/mean) (within 5 sigma). */
static void test_bpf_sampling_probability(void **state)
{
	static const uint64_t sizes[] = { 64, 1000, 65536, 300000 };
	const uint64_t mean = 65536, trials = 200000;
	uint64_t q16 = (uint64_t)llround((double)mean * M_LN2 * 65536.0);

	(void)state;
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		uint64_t countdown = at_draw((next() >> 11) + 1, q16), hits = 0;
		double p = sampler_prob(mean, sizes[s]), sd = sqrt(p * (1 - p) / (double)trials);

		for (uint64_t i = 0; i < trials; i++) {
			if (sizes[s] < countdown) {
				countdown -= sizes[s];
				continue;
			}
			countdown = at_draw((next() >> 11) + 1, q16);
			hits++;
		}
		assert_true(fabs((double)hits / (double)trials - p) < 5 * sd + 1e-9);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bpf_sampling_log2),
		cmocka_unit_test(test_bpf_sampling_draw_matches_shim),
		cmocka_unit_test(test_bpf_sampling_probability),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
