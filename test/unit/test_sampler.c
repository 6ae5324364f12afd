/*
 * The Poisson byte sampler (preload/sampler.h), with fixed seeds: the
 * observed sampling rate per size against 1 - exp(-size/mean), and the
 * weighted byte estimate against the true total.  Bounds are five
 * standard deviations of the binomial / estimator variance.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "preload/sampler.h"

#define MEAN 4096u

static void test_sampler_rate_matches_poisson(void **state)
{
	static const uint64_t sizes[] = { 1, 64, 1024, 4096, 16384, 65536 };
	const uint64_t n = 200000;
	struct sampler s;
	size_t k;

	(void)state;
	sampler_seed(&s, 12345, MEAN);
	for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		double p = 1 - exp(-(double)sizes[k] / MEAN), got;
		uint64_t i, hits = 0;

		for (i = 0; i < n; i++)
			hits += (uint64_t)sampler_take(&s, sizes[k]);
		got = (double)hits / (double)n;
		assert_true(fabs(got - p) <= 5 * sqrt(p * (1 - p) / (double)n) + 1e-12);
		assert_true(fabs(sampler_prob(MEAN, sizes[k]) - p) < 1e-12);
	}
}

static void test_sampler_interleaved_sizes(void **state)
{
	/* Rates hold per size even when sizes alternate: the countdown
	 * carries over between allocations without biasing either. */
	const uint64_t n = 200000, small = 256, large = 8192;
	struct sampler s;
	uint64_t i, hs = 0, hl = 0;
	double ps = 1 - exp(-(double)small / MEAN), pl = 1 - exp(-(double)large / MEAN);

	(void)state;
	sampler_seed(&s, 777, MEAN);
	for (i = 0; i < n; i++) {
		hs += (uint64_t)sampler_take(&s, small);
		hl += (uint64_t)sampler_take(&s, large);
	}
	assert_true(fabs((double)hs / n - ps) <= 5 * sqrt(ps * (1 - ps) / n));
	assert_true(fabs((double)hl / n - pl) <= 5 * sqrt(pl * (1 - pl) / n));
}

static void test_sampler_weighted_estimate_unbiased(void **state)
{
	struct sampler s, sizes;
	double truth = 0, est = 0, var = 0;
	uint64_t i;

	(void)state;
	sampler_seed(&s, 42, MEAN);
	/* A second generator picks sizes spread over 8 B .. 1 MiB. */
	sampler_seed(&sizes, 99, 1);
	for (i = 0; i < 500000; i++) {
		uint64_t r = sampler_rand(&sizes);
		uint64_t sz = 8 + (r >> 44) % (8u << (r % 18));
		double p = sampler_prob(MEAN, sz);

		truth += (double)sz;
		var += (double)sz * (double)sz * (1 - p) / p;
		if (sampler_take(&s, sz))
			est += (double)sz / p;
	}
	assert_true(fabs(est - truth) <= 5 * sqrt(var));
	assert_true(fabs(est - truth) / truth < 0.02);
}

static void test_sampler_zero_never_sampled(void **state)
{
	struct sampler s;
	int i, hits = 0;

	(void)state;
	sampler_seed(&s, 1, 1);
	for (i = 0; i < 100000; i++)
		hits += sampler_take(&s, 0);
	assert_int_equal(hits, 0);
}

static void test_sampler_draw_mean(void **state)
{
	const int n = 400000;
	struct sampler s;
	double sum = 0;
	int i;

	(void)state;
	sampler_seed(&s, 2024, MEAN);
	for (i = 0; i < n; i++)
		sum += (double)sampler_draw(&s);
	/* Exponential: sd = mean; the +1 rounding adds 1 byte on average
	 * minus the truncation's ~0.5. */
	assert_true(fabs(sum / n - MEAN - 0.5) <= 5.0 * MEAN / sqrt(n));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sampler_rate_matches_poisson),
		cmocka_unit_test(test_sampler_interleaved_sizes),
		cmocka_unit_test(test_sampler_weighted_estimate_unbiased),
		cmocka_unit_test(test_sampler_zero_never_sampled),
		cmocka_unit_test(test_sampler_draw_mean),
	};

	return cmocka_run_group_tests(tests, 0, 0);
}
