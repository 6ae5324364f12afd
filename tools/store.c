/*
 * store_open() and the row readers; see store.h.  A store is recognised by
 * its meta table's schema_version, which every schema file since version 1
 * keeps.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "store.h"
#include "version.h"

/*
 * Read-only, and creating nothing beside the store: the tools never write,
 * and the store's directory may be read-only or another user's.  A store
 * with no -wal file beside it was closed cleanly (the collector
 * checkpoints and removes it) and nobody is writing it: it is opened
 * immutable, so SQLite neither locks it nor makes -wal and -shm files, as it
 * otherwise would to read a WAL-mode file.  With a -wal file a collector
 * may be writing it: a plain read-only connection then reads the WAL too.
 * With a -journal file a collector is writing it in journal mode DELETE
 * (compacting it at its close), or was killed doing so: a plain read-only
 * connection then waits for the writer, or refuses to read what a hot
 * journal must first roll back (SQLITE_READONLY_ROLLBACK, see
 * store_open()), where an immutable one would read torn pages.
 */
int store_connect(const char *path, sqlite3 **db)
{
	static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				   "0123456789/._-~";
	char wal[PATH_MAX + 8], *uri, *p;
	struct stat sb;
	int rc;

	snprintf(wal, sizeof(wal), "%s-wal", path);
	if (stat(wal, &sb) == 0)
		return sqlite3_open_v2(path, db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
	snprintf(wal, sizeof(wal), "%s-journal", path);
	if (stat(wal, &sb) == 0)
		return sqlite3_open_v2(path, db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
	/* file: URI, every byte outside `safe` percent-encoded */
	uri = malloc(strlen(path) * 3 + 32);
	if (!uri)
		return SQLITE_NOMEM;
	p = uri + sprintf(uri, "file:");
	for (const unsigned char *c = (const unsigned char *)path; *c; c++)
		p += strchr(safe, *c) ? sprintf(p, "%c", *c) : sprintf(p, "%%%02X", *c);
	strcpy(p, "?immutable=1");
	rc = sqlite3_open_v2(uri, db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX,
			     NULL);
	free(uri);
	return rc;
}

size_t store_readers(size_t max)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : (size_t)n > max ? max : (size_t)n;
}

/*
 * While a command reads a store it holds a shared flock() on it, as each
 * collector writing it does: a collector compacts a store at its close only
 * when it can have it exclusively (collector/store.c), so a store is never
 * rewritten under a reader that opened it immutable, and a reader that
 * comes during a compaction waits for its end.  One lock per file for the
 * life of the command (its worker connections read under it too); the
 * descriptors close at exit.  Past LOCKS_MAX files, or when the file cannot
 * be opened for it, no lock is taken and the store is read as before.
 */
#define LOCKS_MAX 16

static void read_lock(const struct stat *sb, const char *path)
{
	static struct {
		dev_t dev;
		ino_t ino;
	} held[LOCKS_MAX];
	static size_t nheld;
	int fd;

	for (size_t i = 0; i < nheld; i++)
		if (held[i].dev == sb->st_dev && held[i].ino == sb->st_ino)
			return;
	if (nheld == LOCKS_MAX)
		return;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return;
	while (flock(fd, LOCK_SH) < 0 && errno == EINTR)
		;
	held[nheld].dev = sb->st_dev;
	held[nheld].ino = sb->st_ino;
	nheld++;
}

int store_open(const char *path, sqlite3 **out)
{
	char side[PATH_MAX + 8];
	sqlite3 *db = NULL;
	struct stat sb;
	int err, rc, version;

	*out = NULL;
	if (stat(path, &sb) < 0) {
		err = -errno;
		cli_error("cannot open store %s: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(sb.st_mode)) {
		err = -EINVAL;
		cli_error("%s is not a shimmer store (not a regular file)", path);
		goto out;
	}
	read_lock(&sb, path);
	rc = store_connect(path, &db);
	if (rc != SQLITE_OK) {
		err = -EIO;
		cli_error("cannot open store %s: %s", path,
			  db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
		goto out;
	}
	/* The collector may be writing it right now. */
	sqlite3_busy_timeout(db, 10000);
	/* No memory map: the model reads the largest table through several
	 * connections at once, and a mapped file counts its pages in the
	 * process's memory (300 MB for a 10-million-event store) for a few
	 * percent of speed. */
	if (store_schema_version(db) < 1 &&
	    sqlite3_extended_errcode(db) == SQLITE_READONLY_ROLLBACK) {
		err = -EIO;
		cli_error("%s has a hot journal (%s-journal): a collector was killed while "
			  "compacting it; its recording is whole once a writer rolls the journal "
			  "back: sqlite3 %s 'PRAGMA quick_check'", path, path, path);
		goto out;
	}
	snprintf(side, sizeof(side), "%s-wal", path);
	if (store_schema_version(db) < 1 && sqlite3_errcode(db) == SQLITE_CANTOPEN &&
	    stat(side, &sb) == 0) {
		/* A store with a -wal is read through its -shm, which SQLite
		 * opens or makes beside it: a read-only directory (a copy of
		 * a live store, a read-only mount) or a -shm it may not open
		 * refuses that, and the store is whole all the same. */
		err = -EACCES;
		cli_error("cannot read store %s: it has a -wal file (a collector is writing it, or"
			  " was killed), which SQLite reads through %s-shm, and it cannot open or"
			  " create that file there: copy %s and %s-wal to a directory you may write",
			  path, path, path, path);
		goto out;
	}
	if (store_schema_version(db) < 1) {
		/* A file that is no database, or has no meta table, leaves
		 * SQLite's reason in db's error. */
		err = -EINVAL;
		cli_error("%s is not a shimmer store (%s)", path,
			  sqlite3_errcode(db) == SQLITE_OK ? "no schema version"
							   : sqlite3_errmsg(db));
		goto out;
	}
	/* A newer collector's tables may mean what this reader cannot know
	 * (a column that changed its unit, a table that now holds part of
	 * the events): no figure from it, only the way out. */
	version = store_schema_version(db);
	if (version > shimmer_schema_version) {
		err = -EPROTO;
		cli_error("store %s has schema version %d; this shimmer reads up to %d: use a "
			  "newer shimmer", path, version, shimmer_schema_version);
		goto out;
	}
	err = 0;
	*out = db;
	db = NULL;
out:
	sqlite3_close(db);
	return err;
}

int store_prepare(sqlite3 *db, const char *sql, sqlite3_stmt **st)
{
	if (sqlite3_prepare_v2(db, sql, -1, st, NULL) == SQLITE_OK)
		return 0;
	cli_error("cannot read the store: %s", sqlite3_errmsg(db));
	return -EIO;
}

int store_step(sqlite3 *db, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	if (rc == SQLITE_ROW)
		return 1;
	if (rc == SQLITE_DONE)
		return 0;
	cli_error("cannot read the store: %s", sqlite3_errmsg(db));
	return -EIO;
}

int store_each_row(sqlite3 *db, const char *sql,
		   int (*row)(void *ctx, sqlite3_stmt *st), void *ctx)
{
	sqlite3_stmt *st = NULL;
	int err, r;

	err = store_prepare(db, sql, &st);
	if (err)
		goto out;
	while ((r = store_step(db, st)) > 0) {
		err = row(ctx, st);
		if (err)
			goto out;
	}
	err = r;
out:
	sqlite3_finalize(st);
	return err;
}

int store_schema_version(sqlite3 *db)
{
	sqlite3_stmt *st = NULL;
	int v = 0;

	if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = 'schema_version'", -1,
			       &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return v;
}

char *store_column_dup(sqlite3_stmt *st, int col, int *err)
{
	const char *t = (const char *)sqlite3_column_text(st, col);
	char *d;

	if (!t)
		return NULL;
	d = strdup(t);
	if (!d)
		*err = -ENOMEM;
	return d;
}
