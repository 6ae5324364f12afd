/*
 * clock: conversion against synthetic samples with a known rate, and the
 * real TSC against the real CLOCK_MONOTONIC within a tolerance.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include <cmocka.h>

#include "collector/clock.h"

static void test_clock_synthetic_rate(void **state)
{
	struct clock c;

	(void)state;
	/* 3 ticks per ns: base (1000, 500), anchor 10 ms later */
	clock_start(&c, 1000, 500);
	clock_update(&c, 1000 + 30000000, 500 + 10000000);
	assert_int_equal(clock_to_ns(&c, 1000 + 30000000 + 300), 500 + 10000000 + 100);
	/* before the anchor, and before the base */
	assert_int_equal(clock_to_ns(&c, 1000 + 30000000 - 3000), 500 + 10000000 - 1000);
	assert_int_equal(clock_to_ns(&c, 1000 - 300), 400);
}

static void test_clock_anchor_moves(void **state)
{
	struct clock c;

	(void)state;
	/* the rate is refined from the base; conversion is relative to the
	 * newest anchor, so a sample's own instant converts exactly */
	clock_start(&c, 0, 1000000000);
	clock_update(&c, 2500000, 1001000000);   /* 2.5 ticks/ns */
	clock_update(&c, 25000001, 1010000000);  /* slightly off the rate */
	assert_int_equal(clock_to_ns(&c, 25000001), 1010000000);
	assert_int_equal(clock_to_ns(&c, 25000001 + 2500), 1010000000 + 1000);
}

static void test_clock_ignores_backward_sample(void **state)
{
	struct clock c;

	(void)state;
	clock_start(&c, 1000, 1000);
	clock_update(&c, 2000, 2000);
	clock_update(&c, 1500, 3000); /* TSC went back: ignored */
	clock_update(&c, 3000, 1500); /* monotonic went back: ignored */
	assert_int_equal(clock_to_ns(&c, 2500), 2500);
}

static void test_clock_garbage_is_clamped(void **state)
{
	struct clock c;

	(void)state;
	clock_start(&c, 1000, 1000);
	clock_update(&c, 2000, 2000);
	assert_true(clock_to_ns(&c, UINT64_MAX / 2) > 0);
	assert_int_equal(clock_to_ns(&c, UINT64_MAX), 0); /* -2001 ticks from the anchor */
	assert_true(clock_to_ns(&c, (uint64_t)1 << 63) == INT64_MAX);
	assert_int_equal(clock_to_ns(&c, 2000 - ((uint64_t)1 << 62)), 0);
}

static void test_clock_real(void **state)
{
	struct clock c;
	struct timespec wait = { 0, 20000000 };
	uint64_t tsc, ns;
	int64_t err;

	(void)state;
	assert_int_equal(clock_calibrate(&c), 0);
	/* TSC rates of real machines lie between 0.5 and 10 GHz */
	assert_true(c.ns_per_tick > 0.1 && c.ns_per_tick < 2.0);
	nanosleep(&wait, NULL);
	clock_sample(&tsc, &ns);
	/* extrapolated 20 ms past the anchor on a 10 ms calibration */
	err = clock_to_ns(&c, tsc) - (int64_t)ns;
	assert_true(err > -100000 && err < 100000);
	clock_update(&c, tsc, ns);
	nanosleep(&wait, NULL);
	clock_sample(&tsc, &ns);
	err = clock_to_ns(&c, tsc) - (int64_t)ns;
	assert_true(err > -50000 && err < 50000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clock_synthetic_rate),
		cmocka_unit_test(test_clock_anchor_moves),
		cmocka_unit_test(test_clock_ignores_backward_sample),
		cmocka_unit_test(test_clock_garbage_is_clamped),
		cmocka_unit_test(test_clock_real),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
