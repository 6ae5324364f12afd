/*
 * The collector's CPU time readings: /proc/PID/stat and schedstat lines
 * parsed as the kernel writes them (a command name with spaces and
 * parentheses; malformed lines refused), and a reading of this very
 * process stored as cpu_time rows only when a thread's times changed.
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
#include <sqlite3.h>

#include "collector/cputime.h"
#include "collector/store.h"

static void test_cputime_parse_stat(void **state)
{
	/* fields 14 and 15: utime 7, stime 5; field 22: starttime 4242 */
	const char *line = "123 (a (weird) name) S 1 123 123 0 -1 4194304 100 0 0 0 7 5 0 0 20 0 3 0"
			   " 4242 1000000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0\n";
	uint64_t cpu = 0, start = 0;

	(void)state;
	assert_int_equal(cputime_parse_stat(line, &cpu, &start), 0);
	assert_int_equal(cpu, 12);
	assert_int_equal(start, 4242);
	assert_int_equal(cputime_parse_stat("123 no parenthesis S 1", &cpu, &start), -EINVAL);
	assert_int_equal(cputime_parse_stat("123 (short) S 1 2 3", &cpu, &start), -EINVAL);
}

static void test_cputime_parse_schedstat(void **state)
{
	int64_t run = 0, wait = 0;

	(void)state;
	assert_int_equal(cputime_parse_schedstat("1474598 5266737 4\n", &run, &wait), 0);
	assert_int_equal(run, 1474598);
	assert_int_equal(wait, 5266737);
	assert_int_equal(cputime_parse_schedstat("garbage", &run, &wait), -EINVAL);
	assert_int_equal(cputime_parse_schedstat("99999999999999999999 1 1", &run, &wait), -EINVAL);
}

static int64_t count(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	int64_t n = -1;

	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return n;
}

/* This process, sampled twice with work between: a row per thread the
 * first time, and for the thread that worked a second row. */
static void test_cputime_sample_self(void **state)
{
	char path[] = "/tmp/shimmer-test-cputime-XXXXXX";
	struct store *s = NULL;
	struct cputime c;
	sqlite3 *db;
	volatile double x = 0;
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	unlink(path);
	s = store_open(path);
	assert_non_null(s);
	cputime_init(&c, (uint32_t)getpid());
	assert_int_equal(cputime_sample(&c, s, 1, 1000), 0);
	for (int i = 0; i < 20000000; i++)
		x += i;
	assert_int_equal(cputime_sample(&c, s, 1, 2000), 0);
	/* the same times again: no new row */
	assert_int_equal(cputime_sample(&c, s, 1, 3000), 0);
	assert_int_equal(store_close(s), 0);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_true(count(db, "SELECT count(*) FROM cpu_time WHERE ts_ns = 1000") >= 1);
	assert_int_equal(count(db, "SELECT count(*) FROM cpu_time WHERE ts_ns = 2000 AND tid = "
			 "(SELECT min(tid) FROM cpu_time)"), 1);
	assert_true(count(db, "SELECT max(cpu_ns) - min(cpu_ns) FROM cpu_time WHERE tid = "
			  "(SELECT min(tid) FROM cpu_time)") > 0);
	sqlite3_close(db);
	cputime_free(&c);
	/* a pid that is no process: nothing read, nothing stored, no error */
	cputime_init(&c, 0x7fffffff);
	assert_int_equal(cputime_sample(&c, NULL, 1, 1), 0);
	assert_true(c.off);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cputime_parse_stat),
		cmocka_unit_test(test_cputime_parse_schedstat),
		cmocka_unit_test(test_cputime_sample_self),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
