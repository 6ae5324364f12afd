/*
 * For unit tests that build real stores: store_create() makes a store of
 * the current schema in a new temporary file, store_remove() closes and
 * deletes it; exec() runs SQL formatted like sqlite3_mprintf() (%q, %Q,
 * %lld, ...), failing the test with the statement and SQLite's message
 * when it does not succeed.  struct store_fixture is the cmocka state of
 * tests that need one such store: store_fixture_new() in their setup,
 * store_fixture_teardown() as their teardown.  query_int() and
 * query_text() read one value from a store through a connection of their
 * own, as another reader sees it.
 */
#ifndef SHIMMER_TEST_SQLEXEC_H
#define SHIMMER_TEST_SQLEXEC_H

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

extern const char *const shimmer_schema_steps[];

/* path: a mkstemp() template, rewritten to the file's name. */
static inline sqlite3 *store_create(char *path)
{
	sqlite3 *db = NULL;
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	for (int v = 0; shimmer_schema_steps[v]; v++)
		exec(db, "%s", shimmer_schema_steps[v]);
	return db;
}

static inline void store_remove(sqlite3 *db, const char *path)
{
	sqlite3_close(db);
	unlink(path);
}

/* The first column of the first row of sql, run on a new connection to the
 * store at path: -999 when there is no row, -1000 when it is NULL. */
static inline sqlite3_int64 query_int(const char *path, const char *sql)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	sqlite3_int64 v = -999;

	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		fail_msg("%s: %s", sql, sqlite3_errmsg(db));
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_type(st, 0) == SQLITE_NULL ? -1000 : sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

/* The same value as text in out[n]: "" when there is no row or it is NULL. */
static inline void query_text(const char *path, const char *sql, char *out, size_t n)
{
	sqlite3 *db;
	sqlite3_stmt *st;

	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		fail_msg("%s: %s", sql, sqlite3_errmsg(db));
	out[0] = 0;
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
		snprintf(out, n, "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	sqlite3_close(db);
}

/* Stores stack stack of process proc, its n frames pc[0] (innermost) ..
 * pc[n - 1], as the collector does (schema 10: stacks and stack_nodes),
 * sharing no node with other stacks. */
static inline void stack_add(sqlite3 *db, int64_t proc, int64_t stack, int n, const int64_t *pc)
{
	for (int i = n; i-- > 0;)
		exec(db, "INSERT INTO stack_nodes SELECT %lld, coalesce(max(node_id), 0) + 1,"
			 " %s, %lld FROM stack_nodes WHERE proc_id = %lld", (long long)proc,
		     i == n - 1 ? "0" : "max(node_id)", (long long)pc[i], (long long)proc);
	exec(db, "INSERT INTO stacks SELECT %lld, %lld, max(node_id) FROM stack_nodes"
		 " WHERE proc_id = %lld", (long long)proc, (long long)stack, (long long)proc);
}

struct store_fixture {
	char path[64];
	sqlite3 *db;
};

/* tmpl: a mkstemp() template such as "/tmp/test_foo.XXXXXX". */
static inline struct store_fixture *store_fixture_new(const char *tmpl)
{
	struct store_fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_true(strlen(tmpl) < sizeof(f->path));
	strcpy(f->path, tmpl);
	f->db = store_create(f->path);
	return f;
}

static inline int store_fixture_teardown(void **state)
{
	struct store_fixture *f = *state;

	store_remove(f->db, f->path);
	free(f);
	return 0;
}

#endif
