/*
 * Opening a shimmer store for reading.  A store is the collector's SQLite
 * file (see schema/); the tools never create one and never change its
 * data, so a path that is missing or holds something else is an error,
 * not an empty store.
 */
#ifndef SHIMMER_TOOLS_STORE_H
#define SHIMMER_TOOLS_STORE_H

#include <stddef.h>

#include <sqlite3.h>

/*
 * Open the store at path for reading; a collector may still be writing it.
 * On failure prints one "shimmer: error:" line, sets *db to NULL and
 * returns -ENOENT (no such file), -EINVAL (not a shimmer store), -EPROTO
 * (a schema version newer than shimmer_schema_version) or another
 * negative errno.  The caller closes *db with sqlite3_close().
 */
int store_open(const char *path, sqlite3 **db);

/* A read-only connection to the store at path, made as store_open()
 * makes its own (creating nothing beside the store; see store.c), for a
 * reader that wants one more.  Returns SQLite's result code; *db must be
 * closed either way.  Prints nothing. */
int store_connect(const char *path, sqlite3 **db);

/* How many connections a reader reading one table in parallel should use:
 * the CPUs online, at least 1 and at most max. */
size_t store_readers(size_t max);

/* ---- reading: each failure prints one "shimmer: error:" line ---- */

/* Prepare sql on db.  Returns 0, or -EIO with *st NULL. */
int store_prepare(sqlite3 *db, const char *sql, sqlite3_stmt **st);

/* Step st: 1 for a row, 0 at the end, -EIO on error. */
int store_step(sqlite3 *db, sqlite3_stmt *st);

/*
 * Run sql and hand each row to row(ctx, st), stopping at the first nonzero
 * return, which is returned.  Returns 0 after the last row, or -EIO.
 */
int store_each_row(sqlite3 *db, const char *sql,
		   int (*row)(void *ctx, sqlite3_stmt *st), void *ctx);

/* strdup of text column col of st, NULL for NULL; sets *err to -ENOMEM
 * when the copy fails. */
char *store_column_dup(sqlite3_stmt *st, int col, int *err);

/* The store's meta schema_version; 0 when it cannot be read. */
int store_schema_version(sqlite3 *db);

#endif /* SHIMMER_TOOLS_STORE_H */
