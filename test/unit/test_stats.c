/*
 * stats: Welford's running mean and population standard deviation against
 * a two-pass reference in long double, on data chosen to break the
 * one-pass textbook formula (large values, tiny spread).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "tools/stats.h"

/* cmocka 1.1.5 (Debian 12) has no assert_double_equal. */
#define assert_near(a, b, tol) near((a), (b), (tol), __FILE__, __LINE__)

static void near(double a, double b, double tol, const char *file, int line)
{
	if (fabs(a - b) <= tol)
		return;
	print_error("%s:%d: %.17g is not %.17g within %g\n", file, line, a, b, tol);
	fail();
}

/* Two-pass population standard deviation, as the independent truth. */
static void reference(const double *x, size_t n, long double *mean, long double *sd)
{
	long double sum = 0, ss = 0;

	for (size_t i = 0; i < n; i++)
		sum += x[i];
	*mean = sum / n;
	for (size_t i = 0; i < n; i++)
		ss += (x[i] - *mean) * (x[i] - *mean);
	*sd = sqrtl(ss / n);
}

static void feed(struct stats *s, const double *x, size_t n)
{
	stats_init(s);
	for (size_t i = 0; i < n; i++)
		stats_add(s, x[i]);
}

static void test_stats_textbook_example(void **state)
{
	/* The classic example whose population std dev is exactly 2. */
	static const double x[] = { 2, 4, 4, 4, 5, 5, 7, 9 };
	struct stats s;

	(void)state;
	feed(&s, x, 8);
	assert_int_equal(s.n, 8);
	assert_near(s.mean, 5.0, 1e-12);
	assert_near(stats_stddev(&s), 2.0, 1e-12);
	assert_near(s.min, 2.0, 0);
	assert_near(s.max, 9.0, 0);
}

static void test_stats_one_value(void **state)
{
	struct stats s;
	double x = 123456789.0;

	(void)state;
	feed(&s, &x, 1);
	assert_int_equal(s.n, 1);
	assert_near(s.mean, x, 0);
	assert_near(stats_stddev(&s), 0.0, 0);
	assert_near(s.min, x, 0);
	assert_near(s.max, x, 0);
}

static void test_stats_empty(void **state)
{
	struct stats s;

	(void)state;
	stats_init(&s);
	assert_int_equal(s.n, 0);
	assert_near(stats_stddev(&s), 0.0, 0);
}

static void test_stats_constant_large(void **state)
{
	enum { N = 100000 };
	double *x = malloc(N * sizeof(*x));
	struct stats s;

	(void)state;
	assert_non_null(x);
	for (size_t i = 0; i < N; i++)
		x[i] = 999999937.0;
	feed(&s, x, N);
	assert_near(s.mean, 999999937.0, 1e-6);
	assert_near(stats_stddev(&s), 0.0, 1e-6);
	free(x);
}

static void test_stats_large_values_small_spread(void **state)
{
	/* 1e7 durations near 1e9 ns spread by under 1000 ns: E[x^2] - E[x]^2
	 * in double loses every digit of the variance here. */
	enum { N = 10000000 };
	double *x = malloc(N * sizeof(*x));
	long double mean, sd;
	struct stats s;
	uint64_t r = 42;

	(void)state;
	assert_non_null(x);
	for (size_t i = 0; i < N; i++) {
		r = r * 6364136223846793005u + 1442695040888963407u;
		x[i] = 1e9 + (double)(r >> 54); /* 0..1023 */
	}
	feed(&s, x, N);
	reference(x, N, &mean, &sd);
	assert_int_equal(s.n, N);
	/* Relative 1e-12: far below the 1 ns the summary prints. */
	assert_near(s.mean, (double)mean, 1e-3);
	assert_true(sd > 200 && sd < 400); /* the data really has spread */
	assert_near(stats_stddev(&s), (double)sd, 1e-6 * (double)sd);
	free(x);
}

static void test_stats_mixed_magnitudes(void **state)
{
	/* Short and long calls together, min and max from both ends. */
	static const double x[] = { 50, 1e9, 75, 3e8, 50, 999999999, 1 };
	long double mean, sd;
	struct stats s;

	(void)state;
	feed(&s, x, 7);
	reference(x, 7, &mean, &sd);
	assert_near(s.mean, (double)mean, 1e-6);
	assert_near(stats_stddev(&s), (double)sd, 1e-6);
	assert_near(s.min, 1, 0);
	assert_near(s.max, 1e9, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stats_textbook_example),
		cmocka_unit_test(test_stats_one_value),
		cmocka_unit_test(test_stats_empty),
		cmocka_unit_test(test_stats_constant_large),
		cmocka_unit_test(test_stats_large_values_small_spread),
		cmocka_unit_test(test_stats_mixed_magnitudes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
