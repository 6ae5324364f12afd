/*
 * common/conf.c: the configuration file's lines, durations and sizes.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "conf.h"

struct seen {
	char text[1024];
	size_t len;
	int n;
};

static int collect(void *ctx, const struct conf_line *l)
{
	struct seen *s = ctx;

	s->len += (size_t)snprintf(s->text + s->len, sizeof(s->text) - s->len, "%u:%s%.*s=%.*s;",
				   l->lineno, l->key ? "" : "!", (int)l->key_len,
				   l->key ? l->key : "", (int)l->val_len, l->val);
	s->n++;
	return 0;
}

static void test_conf_lines(void **state)
{
	static const char text[] =
		"# a comment\n"
		"\n"
		"socket = /run/x.sock\n"
		"  max-age=7d  \n"
		"\t# indented comment\n"
		"SHIMMER_START = \"after-range:step:20\"\n"
		"empty =\n"
		"no equals sign\n"
		"= no key\n"
		"quoted = \"unterminated\n"
		"last = line without newline";
	struct seen s = { 0 };

	(void)state;
	assert_int_equal(conf_parse(text, sizeof(text) - 1, collect, &s), 0);
	assert_string_equal(s.text, "3:socket=/run/x.sock;4:max-age=7d;"
				    "6:SHIMMER_START=after-range:step:20;7:empty=;"
				    "8:!=no equals sign;9:!== no key;10:!=quoted = \"unterminated;"
				    "11:last=line without newline;");
}

static int stop_at_two(void *ctx, const struct conf_line *l)
{
	(void)l;
	return ++*(int *)ctx == 2 ? 42 : 0;
}

static void test_conf_stops(void **state)
{
	static const char text[] = "a=1\nb=2\nc=3\n";
	int n = 0;

	(void)state;
	assert_int_equal(conf_parse(text, sizeof(text) - 1, stop_at_two, &n), 42);
	assert_int_equal(n, 2);
}

static void test_conf_is(void **state)
{
	struct conf_line l = { .key = "socketx", .key_len = 6 };

	(void)state;
	assert_true(conf_is(&l, "socket"));
	assert_false(conf_is(&l, "socketx"));
	assert_false(conf_is(&l, "sock"));
	l.key = NULL;
	assert_false(conf_is(&l, "socket"));
}

static uint64_t dur(const char *s)
{
	uint64_t ns = 0;

	return conf_duration(s, strlen(s), &ns) ? UINT64_MAX : ns;
}

static void test_conf_durations(void **state)
{
	(void)state;
	assert_int_equal(dur("30"), 30000000000ull);
	assert_int_equal(dur("30s"), 30000000000ull);
	assert_int_equal(dur("1.5s"), 1500000000ull);
	assert_int_equal(dur("500ms"), 500000000ull);
	assert_int_equal(dur("250us"), 250000ull);
	assert_int_equal(dur("7ns"), 7ull);
	assert_int_equal(dur("10m"), 600000000000ull);
	assert_int_equal(dur("2h"), 7200000000000ull);
	assert_int_equal(dur("30d"), 2592000000000000ull);
	assert_int_equal(dur("0"), 0);
	assert_int_equal(dur("0.25m"), 15000000000ull);
	assert_int_equal(dur(""), UINT64_MAX);
	assert_int_equal(dur("s"), UINT64_MAX);
	assert_int_equal(dur("10x"), UINT64_MAX);
	assert_int_equal(dur("10 s"), UINT64_MAX);
	assert_int_equal(dur("-1s"), UINT64_MAX);
	assert_int_equal(dur("99999999999999999999s"), UINT64_MAX);
	assert_int_equal(dur("999999999d"), UINT64_MAX);
	/* Many digits after the point of a long unit: frac x unit overflowed
	 * 64 bits (0.333333d read as about 1.6 hours). */
	assert_int_equal(dur("0.333333d"), 28799971200000ull);
	assert_int_equal(dur("1.9999999h"), 7199999640000ull);
	assert_int_equal(dur("0.999999999m"), 59999999940ull);
	assert_int_equal(dur("0.999999999ms"), 999999ull);
}

/* Forms every number of shimmer's refuses (docs/usage.md): hex, an
 * exponent, a sign, blanks, inf; the shim reads its SHIMMER_DURATION,
 * SHIMMER_START=after:... and SHIMMER_STOP=after:... through conf_duration
 * too, so these pin its behaviour as well. */
static void test_conf_durations_refused(void **state)
{
	static const char *const bad[] = { "1e3", "1e3s", "0x10", "0x10s", "+1s", " 1s", "1s ",
					   "inf", "nan", "1.5.5s", "1S", "1sec", "1min", "1D",
					   ".", "-0", "1ss" };

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		print_message("%s\n", bad[i]);
		assert_int_equal(dur(bad[i]), UINT64_MAX);
	}
	/* The bare number is seconds; a point with no digits after it is
	 * still the number before it (as the shim has always read it). */
	assert_int_equal(dur("1d"), 86400000000000ull);
	assert_int_equal(dur("1."), 1000000000ull);
	assert_int_equal(dur(".5"), 500000000ull);
	assert_int_equal(dur("0010ms"), 10000000ull);
}

static uint64_t count(const char *s, uint64_t max)
{
	uint64_t n = 0;

	return conf_count(s, strlen(s), max, &n) ? UINT64_MAX - 1 : n;
}

static void test_conf_counts(void **state)
{
	static const struct {
		const char *s;
		uint64_t max, want; /* UINT64_MAX - 1: refused */
	} t[] = {
		{ "0", 10, 0 },
		{ "16", 100, 16 },
		{ "007", 100, 7 },
		{ "100", 100, 100 },
		{ "101", 100, UINT64_MAX - 1 },
		{ "2147483647", INT32_MAX, 2147483647 },
		{ "2147483648", INT32_MAX, UINT64_MAX - 1 },
		{ "9223372036854775807", INT64_MAX, 9223372036854775807ull },
		{ "9223372036854775808", INT64_MAX, UINT64_MAX - 1 },
		{ "18446744073709551614", UINT64_MAX, UINT64_MAX - 1 }, /* (the marker) */
		{ "18446744073709551615", UINT64_MAX, UINT64_MAX },
		{ "18446744073709551616", UINT64_MAX, UINT64_MAX - 1 },
		{ "99999999999999999999", UINT64_MAX, UINT64_MAX - 1 },
		{ "", 10, UINT64_MAX - 1 },
		{ "0x10", 100, UINT64_MAX - 1 },
		{ "1e3", 10000, UINT64_MAX - 1 },
		{ "+1", 10, UINT64_MAX - 1 },
		{ "-1", 10, UINT64_MAX - 1 },
		{ " 1", 10, UINT64_MAX - 1 },
		{ "1 ", 10, UINT64_MAX - 1 },
		{ "1.0", 10, UINT64_MAX - 1 },
		{ "1k", 10000, UINT64_MAX - 1 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		print_message("%s\n", t[i].s);
		assert_int_equal(count(t[i].s, t[i].max), t[i].want);
	}
}

static uint64_t size(const char *s)
{
	uint64_t b = 0;

	return conf_size(s, strlen(s), &b) ? UINT64_MAX : b;
}

/* The kernel's pid_max, as /proc says it (read here with stdio). */
static void test_conf_pid_max(void **state)
{
	FILE *f = fopen("/proc/sys/kernel/pid_max", "r");
	unsigned long long v = 0;

	(void)state;
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%llu", &v), 1);
	fclose(f);
	assert_int_equal(conf_pid_max(), v);
	assert_true(conf_pid_max() >= 2 && conf_pid_max() <= CONF_PID_MAX_LIMIT);
}

static void test_conf_sizes(void **state)
{
	(void)state;
	assert_int_equal(size("0"), 0);
	assert_int_equal(size("4096"), 4096);
	assert_int_equal(size("500K"), 500ull << 10);
	assert_int_equal(size("500KiB"), 500ull << 10);
	assert_int_equal(size("10M"), 10ull << 20);
	assert_int_equal(size("20G"), 20ull << 30);
	assert_int_equal(size("2TB"), 2ull << 40);
	assert_int_equal(size(""), UINT64_MAX);
	assert_int_equal(size("G"), UINT64_MAX);
	assert_int_equal(size("10X"), UINT64_MAX);
	assert_int_equal(size("10GG"), UINT64_MAX);
	assert_int_equal(size("1.5G"), UINT64_MAX);
	assert_int_equal(size("99999999999T"), UINT64_MAX);
	assert_int_equal(size("1e3"), UINT64_MAX);
	assert_int_equal(size("0x10"), UINT64_MAX);
	assert_int_equal(size("+10"), UINT64_MAX);
	assert_int_equal(size("-10"), UINT64_MAX);
	assert_int_equal(size("10 K"), UINT64_MAX);
}

static void test_conf_read(void **state)
{
	char dir[] = "/tmp/shimmer-conf-XXXXXX", path[64], buf[16];
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/c", dir);
	assert_int_equal(conf_read(path, buf, sizeof(buf)), -ENOENT);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("a = 1\nb = 2\n", f); /* 12 bytes: fits in 16 */
	fclose(f);
	assert_int_equal(conf_read(path, buf, sizeof(buf)), 12);
	assert_string_equal(buf, "a = 1\nb = 2\n");
	f = fopen(path, "a");
	fputs("c = 3\n", f); /* 18 bytes: does not */
	fclose(f);
	assert_int_equal(conf_read(path, buf, sizeof(buf)), -EFBIG);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_conf_lines),     cmocka_unit_test(test_conf_stops),
		cmocka_unit_test(test_conf_is),        cmocka_unit_test(test_conf_durations),
		cmocka_unit_test(test_conf_sizes),     cmocka_unit_test(test_conf_read),
		cmocka_unit_test(test_conf_durations_refused),
		cmocka_unit_test(test_conf_counts),
		cmocka_unit_test(test_conf_pid_max),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
