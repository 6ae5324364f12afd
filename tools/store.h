/*
 * Opening a shimmer store for reading.  A store is the collector's SQLite
 * file (see schema/); the tools never create one and never change its
 * data, so a path that is missing or holds something else is an error,
 * not an empty store.
 */
#ifndef SHIMMER_TOOLS_STORE_H
#define SHIMMER_TOOLS_STORE_H

#include <sqlite3.h>

/*
 * Open the store at path for reading; a collector may still be writing it.
 * On failure prints one "shimmer: error:" line, sets *db to NULL and
 * returns -ENOENT (no such file), -EINVAL (not a shimmer store) or another
 * negative errno.  The caller closes *db with sqlite3_close().
 */
int store_open(const char *path, sqlite3 **db);

#endif /* SHIMMER_TOOLS_STORE_H */
