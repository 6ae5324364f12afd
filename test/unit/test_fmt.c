/*
 * fmt: human units at their boundaries, CSV quoting (RFC 4180) and JSON
 * string escaping, including bytes that are not UTF-8.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "tools/fmt.h"

/* What f wrote for s, in a string the caller frees. */
static char *capture(void (*f)(FILE *, const char *), const char *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	assert_non_null(out);
	f(out, s);
	assert_int_equal(fclose(out), 0);
	return buf;
}

static void expect(void (*f)(FILE *, const char *), const char *in, const char *want)
{
	char *got = capture(f, in);

	assert_string_equal(got, want);
	free(got);
}

static void test_fmt_duration_units(void **state)
{
	char b[FMT_UNIT_MAX];

	(void)state;
	assert_string_equal(fmt_duration(b, sizeof(b), 0), "0 ns");
	assert_string_equal(fmt_duration(b, sizeof(b), 999), "999 ns");
	assert_string_equal(fmt_duration(b, sizeof(b), 1000), "1.00 us");
	assert_string_equal(fmt_duration(b, sizeof(b), 15170), "15.17 us");
	assert_string_equal(fmt_duration(b, sizeof(b), 2500000), "2.50 ms");
	assert_string_equal(fmt_duration(b, sizeof(b), 1e9), "1.000 s");
	assert_string_equal(fmt_duration(b, sizeof(b), 12345678901.0), "12.346 s");
}

static void test_fmt_bytes_units(void **state)
{
	char b[FMT_UNIT_MAX];

	(void)state;
	assert_string_equal(fmt_bytes(b, sizeof(b), 0), "0 B");
	assert_string_equal(fmt_bytes(b, sizeof(b), 1023), "1023 B");
	assert_string_equal(fmt_bytes(b, sizeof(b), 1024), "1.00 KiB");
	assert_string_equal(fmt_bytes(b, sizeof(b), 1536), "1.50 KiB");
	assert_string_equal(fmt_bytes(b, sizeof(b), 3.0 * 1024 * 1024 * 1024), "3.00 GiB");
	assert_string_equal(fmt_bytes(b, sizeof(b), 5000.0 * 1024 * 1024 * 1024 * 1024),
			    "5000.00 TiB");
}

static void test_fmt_csv_quoting(void **state)
{
	(void)state;
	expect(fmt_csv, "malloc", "malloc");
	expect(fmt_csv, "a,b", "\"a,b\"");
	expect(fmt_csv, "say \"hi\"", "\"say \"\"hi\"\"\"");
	expect(fmt_csv, "two\nlines", "\"two\nlines\"");
	expect(fmt_csv, "", "");
	expect(fmt_csv, NULL, "");
}

static void test_fmt_json_escaping(void **state)
{
	(void)state;
	expect(fmt_json, "plain", "\"plain\"");
	expect(fmt_json, "q\"b\\", "\"q\\\"b\\\\\"");
	expect(fmt_json, "t\tn\n\x01", "\"t\\tn\\n\\u0001\"");
	expect(fmt_json, NULL, "null");
	/* Valid UTF-8 passes through; stray bytes become U+FFFD. */
	expect(fmt_json, "caf\xc3\xa9", "\"caf\xc3\xa9\"");
	expect(fmt_json, "bad\xff" "x", "\"bad\\ufffdx\"");
	expect(fmt_json, "cut\xc3", "\"cut\\ufffd\"");
	expect(fmt_json, "overlong\xc0\xaf", "\"overlong\\ufffd\\ufffd\"");
	expect(fmt_json, "surrogate\xed\xa0\x80", "\"surrogate\\ufffd\\ufffd\\ufffd\"");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fmt_duration_units),
		cmocka_unit_test(test_fmt_bytes_units),
		cmocka_unit_test(test_fmt_csv_quoting),
		cmocka_unit_test(test_fmt_json_escaping),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
