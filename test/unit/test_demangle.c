/*
 * demangle: bounded demangling.  The crafted names double their output at
 * each level of templates (each level's arguments are two references to
 * the level before): 26 levels are 273 bytes, which __cxa_demangle turns
 * into 1.6 GB in about 14 s.  Here each returns -E2BIG at once.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "collector/demangle.h"

static char out[DEMANGLE_OUT_MAX];

/* "_Z1fI1AIiE" then `levels` times S_I<Sk_><Sk_>E: f<A<int>, f<A<int>, A<int>>, ...>. */
static size_t crafted(char *buf, size_t cap, int levels)
{
	static const char b36[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
	size_t n = (size_t)snprintf(buf, cap, "_Z1fI1AIiE");

	for (int k = 1; k <= levels; k++) {
		char ref[8];

		if (k < 36)
			snprintf(ref, sizeof(ref), "S%c_", b36[k]);
		else
			snprintf(ref, sizeof(ref), "S%c%c_", b36[k / 36], b36[k % 36]);
		n += (size_t)snprintf(buf + n, cap - n, "S_I%s%sE", ref, ref);
	}
	n += (size_t)snprintf(buf + n, cap - n, "Evv");
	return n;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void test_demangle_ordinary(void **state)
{
	static const char k[] = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctor"
				"IfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_";

	(void)state;
	assert_int_equal(demangle("_Z3fooi", 7, out, sizeof(out)), 8);
	assert_string_equal(out, "foo(int)");
	/* as c++filt writes it */
	assert_true(demangle(k, sizeof(k) - 1, out, sizeof(out)) > 0);
	assert_string_equal(out, "void at::native::vectorized_elementwise_kernel<4, "
			    "at::native::FillFunctor<float>, at::detail::Array<char*, 1> >"
			    "(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)");
	/* not terminated where len says: only len bytes count */
	assert_int_equal(demangle("_Z3fooiXYZ", 7, out, sizeof(out)), 8);
	assert_int_equal(demangle("_Z1fI1AIiES_IS1_S1_EEvv", 23, out, sizeof(out)), 37);
	assert_string_equal(out, "void f<A<int>, f<A<int>, A<int> > >()");
}

static void test_demangle_not_mangled(void **state)
{
	(void)state;
	assert_int_equal(demangle("main", 4, out, sizeof(out)), -EINVAL);
	assert_int_equal(demangle("_Z", 2, out, sizeof(out)), -EINVAL);
	assert_int_equal(demangle("_Zxyz", 5, out, sizeof(out)), -EINVAL);
	assert_int_equal(demangle("_Z3f\0oi", 7, out, sizeof(out)), -EINVAL);
	assert_string_equal(out, "");
}

static void test_demangle_blowup_bounded(void **state)
{
	char name[1024];

	(void)state;
	for (int levels = 10; levels <= 40; levels += 6) {
		size_t n = crafted(name, sizeof(name), levels);
		double t0 = now();
		long r = demangle(name, n, out, sizeof(out));
		double dt = now() - t0;

		/* 10 levels fit (24 KB); from 16 on the output passes 64 KiB */
		if (levels == 10)
			assert_true(r > 20000);
		else
			assert_int_equal(r, -E2BIG);
		if (dt > 0.05)
			fail_msg("%d levels (%zu bytes) took %.3f s", levels, n, dt);
	}
}

static void test_demangle_long_input(void **state)
{
	static char name[DEMANGLE_IN_MAX + 64];
	size_t n = 0;

	(void)state;
	n += (size_t)snprintf(name, sizeof(name), "_Z%u", DEMANGLE_IN_MAX);
	memset(name + n, 'a', DEMANGLE_IN_MAX);
	n += DEMANGLE_IN_MAX;
	name[n++] = 'v';
	assert_int_equal(demangle(name, n, out, sizeof(out)), -E2BIG);
	/* a small output buffer bounds the output too */
	assert_int_equal(demangle("_Z3fooi", 7, out, 8), -E2BIG);
	assert_int_equal(demangle("_Z3fooi", 7, out, 9), 8);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_demangle_ordinary),
		cmocka_unit_test(test_demangle_not_mangled),
		cmocka_unit_test(test_demangle_blowup_bounded),
		cmocka_unit_test(test_demangle_long_input),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
