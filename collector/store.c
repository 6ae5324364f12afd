/*
 * Ingestion speed comes from: one open transaction per batch, statements
 * prepared once and reset after each step, exactly one statement per
 * event, no secondary index to maintain, static text bound without a copy,
 * and a page cache large enough that a batch rarely spills.  Durability
 * comes from WAL with synchronous=NORMAL: a committed batch survives the
 * daemon's death; a power cut may lose the last commits but never corrupts
 * the file.
 */
#include "store.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

extern const char shimmer_schema_sql[];

enum {
	ST_BEGIN,
	ST_COMMIT,
	ST_PROC,
	ST_PROC_END,
	ST_PROC_FIND,
	ST_PROC_EXEC,
	ST_THREAD,
	ST_CUDA,
	ST_ALLOC,
	ST_FREE,
	ST_COUNT,
	ST_DROP,
	ST_N
};

static const char *const sql[ST_N] = {
	[ST_BEGIN] = "BEGIN",
	[ST_COMMIT] = "COMMIT",
	[ST_PROC] = "INSERT INTO processes (pid, ppid, parent_proc_id, uid, "
		    "hostname, exe, argv, rank, local_rank, malloc_mode, "
		    "sample_bytes, lossless, start_wall_ns, start_ns) "
		    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
	[ST_PROC_END] = "UPDATE processes SET end_ns = ?2, end_reason = ?3 "
			"WHERE proc_id = ?1",
	[ST_PROC_FIND] = "SELECT proc_id FROM processes WHERE pid = ?1 AND "
			 "hostname = ?2 ORDER BY proc_id DESC LIMIT 1",
	[ST_PROC_EXEC] = "UPDATE processes SET end_reason = 'exec' WHERE proc_id = "
			 "(SELECT max(proc_id) FROM processes WHERE pid = ?1 AND "
			 "hostname = ?2) AND end_reason = 'disconnect' AND end_ns >= ?3",
	[ST_THREAD] = "INSERT OR IGNORE INTO threads (proc_id, tid, name, first_ns) "
		      "VALUES (?1, ?2, ?3, ?4)",
	[ST_CUDA] = "INSERT INTO cuda_calls (proc_id, tid, fn_id, start_ns, end_ns, "
		    "ret, device, ptr, bytes, stream, copy_kind, aux, aux2, "
		    "grid_x, grid_y, grid_z, block_x, block_y, block_z, "
		    "per_thread_stream) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
		    "?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)",
	[ST_ALLOC] = "INSERT INTO allocations (proc_id, space, device, ptr, size, "
		     "sampled, weight, alloc_fn, alloc_tid, alloc_ns, alloc_end_ns) "
		     "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
	[ST_FREE] = "UPDATE allocations SET free_fn = ?2, free_tid = ?3, "
		    "free_ns = ?4, free_end_ns = ?5 WHERE id = ?1",
	[ST_COUNT] = "INSERT INTO function_counts (proc_id, tid, fn_id, count, bytes) "
		     "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (proc_id, tid, fn_id) "
		     "DO UPDATE SET count = count + excluded.count, "
		     "bytes = bytes + excluded.bytes",
	[ST_DROP] = "INSERT INTO drops (proc_id, tid, reason, events) "
		    "VALUES (?1, ?2, ?3, ?4) ON CONFLICT (proc_id, tid, reason) "
		    "DO UPDATE SET events = events + excluded.events",
};

struct store {
	sqlite3 *db;
	sqlite3_stmt *st[ST_N];
	int in_tx;
	int broken; /* 0 or the negative errno every call now returns */
	char *path;
};

/* Logs the failure, rolls the batch back and breaks the store. */
static int fail(struct store *s, int rc)
{
	int err = rc == SQLITE_FULL ? -ENOSPC
		  : (rc & 0xff) == SQLITE_IOERR ? -EIO
		  : rc == SQLITE_NOMEM ? -ENOMEM : -EPROTO;

	log_error("cannot write %s: %s; the batch in progress was rolled back, "
		  "every earlier batch is intact", s->path, sqlite3_errmsg(s->db));
	if (!sqlite3_get_autocommit(s->db))
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	s->in_tx = 0;
	s->broken = err;
	return err;
}

static int step(struct store *s, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	sqlite3_reset(st);
	return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : fail(s, rc);
}

/* Every write calls this first: it joins the batch or opens one. */
static int tx(struct store *s)
{
	int err;

	if (s->broken || s->in_tx)
		return s->broken;
	err = step(s, s->st[ST_BEGIN]);
	if (!err)
		s->in_tx = 1;
	return err;
}

int store_commit(struct store *s)
{
	int err;

	if (s->broken || !s->in_tx)
		return s->broken;
	err = step(s, s->st[ST_COMMIT]);
	if (!err)
		s->in_tx = 0;
	return err;
}

static void bind_text(sqlite3_stmt *st, int i, const char *text, size_t len)
{
	if (text)
		sqlite3_bind_text(st, i, text, (int)len, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, i);
}

int store_process_add(struct store *s, const struct store_proc *p, int64_t *proc_id)
{
	sqlite3_stmt *st = s->st[ST_PROC];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, p->pid);
	sqlite3_bind_int64(st, 2, p->ppid);
	if (p->parent_proc_id)
		sqlite3_bind_int64(st, 3, p->parent_proc_id);
	else
		sqlite3_bind_null(st, 3);
	sqlite3_bind_int64(st, 4, p->uid);
	bind_text(st, 5, p->host, p->host_len);
	bind_text(st, 6, p->exe, p->exe_len);
	bind_text(st, 7, p->argv_json, p->argv_json_len);
	if (p->rank == SHM_NO_RANK)
		sqlite3_bind_null(st, 8);
	else
		sqlite3_bind_int(st, 8, p->rank);
	if (p->local_rank == SHM_NO_RANK)
		sqlite3_bind_null(st, 9);
	else
		sqlite3_bind_int(st, 9, p->local_rank);
	sqlite3_bind_text(st, 10, p->malloc_mode, -1, SQLITE_STATIC);
	if (p->sample_bytes >= 0)
		sqlite3_bind_int64(st, 11, p->sample_bytes);
	else
		sqlite3_bind_null(st, 11);
	sqlite3_bind_int(st, 12, p->lossless);
	sqlite3_bind_int64(st, 13, p->start_wall_ns);
	sqlite3_bind_int64(st, 14, p->start_ns);
	err = step(s, st);
	if (!err)
		*proc_id = sqlite3_last_insert_rowid(s->db);
	return err;
}

int store_process_end(struct store *s, int64_t proc_id, int64_t end_ns,
		      const char *reason)
{
	sqlite3_stmt *st = s->st[ST_PROC_END];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int64(st, 2, end_ns);
	sqlite3_bind_text(st, 3, reason, -1, SQLITE_STATIC);
	return step(s, st);
}

int store_process_find(struct store *s, uint32_t pid, const char *host,
		       size_t host_len, int64_t *proc_id)
{
	sqlite3_stmt *st = s->st[ST_PROC_FIND];
	int rc;

	if (s->broken)
		return s->broken;
	sqlite3_bind_int64(st, 1, pid);
	sqlite3_bind_text(st, 2, host, (int)host_len, SQLITE_STATIC);
	rc = sqlite3_step(st);
	*proc_id = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
	sqlite3_reset(st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : fail(s, rc);
}

int store_process_exec(struct store *s, uint32_t pid, const char *host,
		       size_t host_len, int64_t since_ns)
{
	sqlite3_stmt *st = s->st[ST_PROC_EXEC];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, pid);
	sqlite3_bind_text(st, 2, host, (int)host_len, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, since_ns);
	return step(s, st);
}

int store_thread_add(struct store *s, int64_t proc_id, uint32_t tid,
		     const char *name, size_t name_len, int64_t first_ns)
{
	sqlite3_stmt *st = s->st[ST_THREAD];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int64(st, 2, tid);
	bind_text(st, 3, name, name_len);
	sqlite3_bind_int64(st, 4, first_ns);
	return step(s, st);
}

int store_cuda_add(struct store *s, int64_t proc_id, uint32_t tid,
		   const struct shm_rec_cuda *r, int64_t start_ns, int64_t end_ns)
{
	sqlite3_stmt *st = s->st[ST_CUDA];
	unsigned flags = shm_fn_info[r->hdr.fn].flags;
	int has_kind = (flags & SHM_FNF_COPY) || r->hdr.fn == SHM_FN_CUDA_STREAM_WAIT_EVENT;
	int has_dims = (flags & SHM_FNF_LAUNCH) && r->hdr.fn != SHM_FN_CUDA_GRAPH_LAUNCH;
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int64(st, 2, tid);
	sqlite3_bind_int(st, 3, r->hdr.fn);
	sqlite3_bind_int64(st, 4, start_ns);
	sqlite3_bind_int64(st, 5, end_ns);
	sqlite3_bind_int(st, 6, r->ret);
	if (r->device >= 0)
		sqlite3_bind_int(st, 7, r->device);
	else
		sqlite3_bind_null(st, 7);
	sqlite3_bind_int64(st, 8, (int64_t)r->ptr);
	sqlite3_bind_int64(st, 9, (int64_t)r->bytes);
	sqlite3_bind_int64(st, 10, (int64_t)r->stream);
	if (has_kind)
		sqlite3_bind_int64(st, 11, r->kind);
	else
		sqlite3_bind_null(st, 11);
	sqlite3_bind_int64(st, 12, (int64_t)r->aux);
	sqlite3_bind_int64(st, 13, (int64_t)r->aux2);
	for (int i = 0; i < 3; i++) {
		if (has_dims) {
			sqlite3_bind_int64(st, 14 + i, r->grid[i]);
			sqlite3_bind_int64(st, 17 + i, r->block[i]);
		} else {
			sqlite3_bind_null(st, 14 + i);
			sqlite3_bind_null(st, 17 + i);
		}
	}
	sqlite3_bind_int(st, 20, !!(r->hdr.flags & SHM_F_PTSZ));
	return step(s, st);
}

int store_alloc_add(struct store *s, const struct store_alloc *a, int64_t *id)
{
	sqlite3_stmt *st = s->st[ST_ALLOC];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, a->proc_id);
	sqlite3_bind_text(st, 2, a->space, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 3, a->device);
	sqlite3_bind_int64(st, 4, (int64_t)a->ptr);
	sqlite3_bind_int64(st, 5, (int64_t)a->size);
	sqlite3_bind_int(st, 6, a->sampled);
	sqlite3_bind_double(st, 7, a->weight);
	sqlite3_bind_int(st, 8, a->fn);
	sqlite3_bind_int64(st, 9, a->tid);
	sqlite3_bind_int64(st, 10, a->ns);
	if (a->end_ns >= 0)
		sqlite3_bind_int64(st, 11, a->end_ns);
	else
		sqlite3_bind_null(st, 11);
	err = step(s, st);
	if (!err)
		*id = sqlite3_last_insert_rowid(s->db);
	return err;
}

int store_alloc_free(struct store *s, int64_t id, uint16_t fn, uint32_t tid,
		     int64_t ns, int64_t end_ns)
{
	sqlite3_stmt *st = s->st[ST_FREE];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int(st, 2, fn);
	sqlite3_bind_int64(st, 3, tid);
	sqlite3_bind_int64(st, 4, ns);
	if (end_ns >= 0)
		sqlite3_bind_int64(st, 5, end_ns);
	else
		sqlite3_bind_null(st, 5);
	return step(s, st);
}

int store_count_add(struct store *s, int64_t proc_id, uint32_t tid, uint16_t fn,
		    uint64_t count, uint64_t bytes)
{
	sqlite3_stmt *st = s->st[ST_COUNT];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int64(st, 2, tid);
	sqlite3_bind_int(st, 3, fn);
	sqlite3_bind_int64(st, 4, (int64_t)count);
	sqlite3_bind_int64(st, 5, (int64_t)bytes);
	return step(s, st);
}

int store_drop_add(struct store *s, int64_t proc_id, uint32_t tid,
		   const char *reason, uint64_t events)
{
	sqlite3_stmt *st = s->st[ST_DROP];
	int err = tx(s);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int64(st, 2, tid);
	sqlite3_bind_text(st, 3, reason, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, (int64_t)events);
	return step(s, st);
}

/* The store's schema_version, 0 for a new file.  Returns 0 or a negative
 * errno (logged). */
static int schema_version(struct store *s, int *version)
{
	sqlite3_stmt *st;
	int rc;

	*version = 0;
	rc = sqlite3_prepare_v2(s->db, "SELECT name FROM sqlite_master WHERE "
				"name = 'meta'", -1, &st, NULL);
	if (rc == SQLITE_OK) {
		rc = sqlite3_step(st);
		sqlite3_finalize(st);
	}
	if (rc == SQLITE_DONE)
		return 0;
	if (rc == SQLITE_ROW)
		rc = sqlite3_prepare_v2(s->db, "SELECT value FROM meta WHERE key = "
					"'schema_version'", -1, &st, NULL);
	if (rc == SQLITE_OK) {
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW)
			*version = sqlite3_column_int(st, 0);
		sqlite3_finalize(st);
	}
	if (rc == SQLITE_ROW || rc == SQLITE_DONE)
		return 0;
	log_error("cannot read %s: %s", s->path, sqlite3_errmsg(s->db));
	return -EIO;
}

/* WAL, the schema and the functions table, in one transaction. */
static int prepare_db(struct store *s)
{
	sqlite3_stmt *st = NULL;
	int version, rc, err;

	err = schema_version(s, &version);
	if (err)
		return err;
	if (version > STORE_SCHEMA_VERSION) {
		log_error("%s has schema version %d, newer than this shimmerd's (%d): "
			  "use a newer shimmerd or another --db", s->path, version,
			  STORE_SCHEMA_VERSION);
		return -EPROTO;
	}
	rc = sqlite3_prepare_v2(s->db, "PRAGMA journal_mode = WAL", -1, &st, NULL);
	if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
	    strcmp((const char *)sqlite3_column_text(st, 0), "wal") != 0) {
		log_error("cannot put %s in WAL mode (is it on a network file system?)",
			  s->path);
		sqlite3_finalize(st);
		return -ENOTSUP;
	}
	sqlite3_finalize(st);
	st = NULL;
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(s->db, "PRAGMA synchronous = NORMAL; "
				  "PRAGMA cache_size = -65536; "
				  "PRAGMA busy_timeout = 5000; BEGIN", NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(s->db, shimmer_schema_sql, NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(s->db, "INSERT OR REPLACE INTO functions "
					"(fn_id, name, family) VALUES (?1, ?2, ?3)",
					-1, &st, NULL);
	for (int fn = 1; rc == SQLITE_OK && fn < SHM_FN_COUNT; fn++) {
		sqlite3_bind_int(st, 1, fn);
		sqlite3_bind_text(st, 2, shm_fn_info[fn].name, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 3, shm_fn_info[fn].family == SHM_FAMILY_HEAP ?
					 "heap" : "cuda", -1, SQLITE_STATIC);
		rc = sqlite3_step(st);
		sqlite3_reset(st);
		if (rc == SQLITE_DONE)
			rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
	for (int i = 0; rc == SQLITE_OK && i < ST_N; i++)
		rc = sqlite3_prepare_v3(s->db, sql[i], -1, SQLITE_PREPARE_PERSISTENT,
					&s->st[i], NULL);
	if (rc == SQLITE_OK)
		return 0;
	return fail(s, rc);
}

struct store *store_open(const char *path)
{
	struct store *s = calloc(1, sizeof(*s));
	int err = -ENOMEM, rc;

	if (!s || !(s->path = strdup(path)))
		goto out;
	rc = sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
			     SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		log_error("cannot open %s: %s", path,
			  s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
		err = -EIO;
		goto out;
	}
	sqlite3_extended_result_codes(s->db, 1);
	err = prepare_db(s);
out:
	if (!err)
		return s;
	if (s)
		s->broken = err;
	store_close(s);
	errno = -err;
	return NULL;
}

int store_close(struct store *s)
{
	int err;

	if (!s)
		return 0;
	err = store_commit(s);
	for (int i = 0; i < ST_N; i++)
		sqlite3_finalize(s->st[i]);
	if (s->db && !s->broken)
		sqlite3_wal_checkpoint_v2(s->db, NULL, SQLITE_CHECKPOINT_TRUNCATE,
					  NULL, NULL);
	sqlite3_close(s->db);
	free(s->path);
	free(s);
	return err;
}
