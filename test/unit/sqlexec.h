/*
 * exec(): runs SQL formatted like sqlite3_mprintf() (%q, %Q, %lld, ...) on
 * a test's store, failing the test with the statement and SQLite's message
 * when it does not succeed.  For unit tests that build real stores.
 */
#ifndef SHIMMER_TEST_SQLEXEC_H
#define SHIMMER_TEST_SQLEXEC_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <sqlite3.h>

static inline void exec(sqlite3 *db, const char *fmt, ...)
{
	char *sql;
	va_list ap;

	va_start(ap, fmt);
	sql = sqlite3_vmprintf(fmt, ap);
	va_end(ap);
	assert_non_null(sql);
	if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
		fail_msg("%s: %s", sql, sqlite3_errmsg(db));
	sqlite3_free(sql);
}

#endif
