/*
 * store: a real SQLite file, read back through a second connection.  The
 * full-disk case writes into a 256 KiB tmpfs mounted in a private mount
 * namespace (as root), or else under RLIMIT_FSIZE: either way the write
 * fails for real inside SQLite.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "sqlexec.h"

#include "collector/log.h"
#include "collector/store.h"
#include "wire.h"

extern const char *const shimmer_schema_steps[];

/* The first line cmd prints. */
static void query_text_cmd(const char *cmd, char *out, size_t n)
{
	FILE *p = popen(cmd, "r");

	assert_non_null(p);
	assert_non_null(fgets(out, (int)n, p));
	assert_int_equal(pclose(p), 0);
}

struct fixture {
	char dir[64], db[96];
	int mounted;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	log_level = LOG_LVL_ERROR - 1;
	strcpy(f->dir, "/tmp/shimmer-store-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->db, sizeof(f->db), "%s/t.db", f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];

	if (f->mounted)
		umount2(f->dir, MNT_DETACH);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

static void test_store_creates_schema(void **state)
{
	struct fixture *f = *state;
	struct store *s = store_open(f->db);
	char text[64], sql[128];

	assert_non_null(s);
	/* WAL while it records; compacted, one file, once closed */
	query_text(f->db, "PRAGMA journal_mode", text, sizeof(text));
	assert_string_equal(text, "wal");
	assert_int_equal(store_close(s), 0);
	assert_int_equal(query_int(f->db, "SELECT value FROM meta WHERE key = 'schema_version'"),
			 STORE_SCHEMA_VERSION);
	query_text(f->db, "PRAGMA journal_mode", text, sizeof(text));
	assert_string_equal(text, "delete");
	assert_int_equal(query_int(f->db, "SELECT count(*) FROM functions"), SHM_FN_COUNT - 1);
	for (int fn = 1; fn < SHM_FN_COUNT; fn++) {
		snprintf(sql, sizeof(sql), "SELECT name || ' ' || family FROM functions "
			 "WHERE fn_id = %d", fn);
		query_text(f->db, sql, text, sizeof(text));
		assert_memory_equal(text, shm_fn_info[fn].name, strlen(shm_fn_info[fn].name));
		assert_string_equal(text + strlen(shm_fn_info[fn].name) + 1,
				    shm_fn_info[fn].family == SHM_FAMILY_HEAP ? "heap" : "cuda");
	}
	/* opening again keeps what is there */
	s = store_open(f->db);
	assert_non_null(s);
	assert_int_equal(store_close(s), 0);
	assert_int_equal(query_int(f->db, "SELECT count(*) FROM functions"), SHM_FN_COUNT - 1);
}

#define NINDEXES "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
#define INDEXED "SELECT value FROM meta WHERE key = 'indexed'"

/* No secondary index slows ingestion: the readers' indexes are made when
 * the recording closes, and a store opened to record again loses them
 * until it closes. */
static void test_store_indexes_at_close(void **state)
{
	struct fixture *f = *state;
	struct store *s = store_open(f->db);
	char text[64];

	assert_non_null(s);
	assert_int_equal(store_commit(s), 0);
	assert_int_equal(query_int(f->db, NINDEXES), 0);
	assert_int_equal(query_int(f->db, INDEXED), -999);
	assert_int_equal(store_close(s), 0);
	assert_int_equal(query_int(f->db, NINDEXES), 8);
	assert_int_equal(query_int(f->db, INDEXED), 1);
	query_text(f->db, "SELECT group_concat(name) FROM (SELECT name FROM sqlite_master"
			  " WHERE type = 'index' AND tbl_name = 'gpu_api' ORDER BY name)",
		   text, sizeof(text));
	assert_string_equal(text, "gpu_api_correlation,gpu_api_proc_start");
	s = store_open(f->db);
	assert_non_null(s);
	assert_int_equal(query_int(f->db, NINDEXES), 0);
	assert_int_equal(query_int(f->db, INDEXED), -999);
	assert_int_equal(store_close(s), 0);
	assert_int_equal(query_int(f->db, NINDEXES), 8);
	query_text(f->db, "PRAGMA integrity_check", text, sizeof(text));
	assert_string_equal(text, "ok");
}

static void test_store_refuses_newer_schema(void **state)
{
	struct fixture *f = *state;
	struct store *s = store_open(f->db);

	assert_non_null(s);
	assert_int_equal(store_close(s), 0);
	assert_int_equal(query_int(f->db, "UPDATE meta SET value = '99' WHERE key = 'schema_version' "
					  "RETURNING 1"), 1);
	errno = 0;
	assert_null(store_open(f->db));
	assert_int_equal(errno, EPROTO);
	assert_int_equal(query_int(f->db, "SELECT value FROM meta WHERE key = 'schema_version'"), 99);
}

static void exec_sql(const char *path, const char *sql)
{
	sqlite3 *db;
	char *msg = NULL;

	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
		fail_msg("%s", msg);
	sqlite3_close(db);
}

/* The schema's definitions and the rows a store holds, as one text. */
/* Room for a snapshot of the whole schema (every table and view's SQL: about
 * 40 KB at schema 9); query_text() stops at the room it has, and a cut
 * snapshot loses its "|" separator, which snapshot() checks. */
#define SNAP_MAX 131072

static void snapshot(const char *path, char *out, size_t n)
{
	/* The tables and views; the readers' indexes are test_store_indexes_at_close's. */
	query_text(path, "SELECT group_concat(x, ';') FROM (SELECT type || ' ' || name || ' ' || "
			 "coalesce(sql, '') AS x FROM sqlite_master WHERE type <> 'index' OR sql IS NULL"
			 " ORDER BY name)", out, n);
	assert_true(strlen(out) + 2 < n); /* SNAP_MAX is too small if not */
	strncat(out, "|", n - strlen(out) - 1);
	query_text(path, "SELECT (SELECT group_concat(key || '=' || value) FROM meta"
			 " WHERE key <> 'indexed') || ',' || "
			 "(SELECT count(*) FROM functions) || ',' || "
			 "(SELECT group_concat(proc_id || ':' || pid) FROM processes) "
			 "|| ',' || (SELECT count(*) FROM allocations)",
	       out + strlen(out), n - strlen(out));
}

/* A store written by a version-1 shimmerd: schema/001 alone, with rows. */
static void make_v1_store(const char *path)
{
	exec_sql(path, shimmer_schema_steps[0]);
	exec_sql(path, "PRAGMA journal_mode = WAL; "
		       "INSERT INTO functions VALUES (1, 'malloc', 'heap'); "
		       "INSERT INTO processes (pid, ppid, uid, malloc_mode, lossless, "
		       "start_wall_ns, start_ns, end_ns, end_reason) "
		       "VALUES (77, 1, 0, 'all', 0, 5, 6, 7, 'exit'); "
		       "INSERT INTO allocations (proc_id, space, device, ptr, size, sampled, "
		       "weight, alloc_fn, alloc_tid, alloc_ns) "
		       "VALUES (1, 'host', -1, 4096, 16, 0, 16, 1, 77, 6)");
}

static void test_store_migrates_v1(void **state)
{
	struct fixture *f = *state;
	struct store *s;
	struct store_proc p = { .pid = 78, .host = "h", .host_len = 1,
				.rank = SHM_NO_RANK, .local_rank = SHM_NO_RANK,
				.malloc_mode = "all", .sample_bytes = -1 };
	struct shm_rec_kernel k = { .start = 10, .end = 20, .name_id = 1, .correlation = 5 };
	static char before[SNAP_MAX], after[SNAP_MAX], fresh[SNAP_MAX];
	int64_t proc_id;

	make_v1_store(f->db);
	assert_int_equal(query_int(f->db, "SELECT value FROM meta WHERE key = 'schema_version'"), 1);
	assert_int_equal(query_int(f->db, "SELECT count(*) FROM sqlite_master WHERE name = 'kernels'"), 0);
	s = store_open(f->db);
	assert_non_null(s);
	/* the new tables and columns take rows, beside the old rows */
	assert_int_equal(store_process_add(s, &p, &proc_id), 0);
	assert_int_equal(proc_id, 2);
	assert_int_equal(store_process_gpu_status(s, proc_id, SHM_GPU_NO_CUPTI, "none", 4), 0);
	assert_int_equal(store_string_add(s, proc_id, 1, "_Z3fooi", 7, "foo(int)"), 0);
	assert_int_equal(store_kernel_add(s, proc_id, &k, 10, 20), 0);
	assert_int_equal(store_close(s), 0);
	assert_int_equal(query_int(f->db, "SELECT value FROM meta WHERE key = 'schema_version'"),
			 STORE_SCHEMA_VERSION);
	assert_int_equal(query_int(f->db, "SELECT count(*) FROM processes WHERE pid = 77 AND "
					  "end_reason = 'exit' AND gpu_status IS NULL"), 1);
	assert_int_equal(query_int(f->db, "SELECT count(*) FROM allocations WHERE proc_id = 1 AND "
					  "size = 16"), 1);
	assert_int_equal(query_int(f->db, "SELECT count(*) FROM processes WHERE pid = 78 AND "
					  "gpu_status = 'no_cupti' AND gpu_status_detail = 'none'"), 1);
	assert_int_equal(query_int(f->db, "SELECT count(*) FROM kernels_named WHERE "
					  "name = 'foo(int)' AND dur_ns = 10"), 1);
	assert_int_equal(query_int(f->db, "SELECT count(*) FROM functions"), SHM_FN_COUNT - 1);

	/* reopening a current store changes nothing */
	snapshot(f->db, before, sizeof(before));
	s = store_open(f->db);
	assert_non_null(s);
	assert_int_equal(store_close(s), 0);
	snapshot(f->db, after, sizeof(after));
	assert_string_equal(before, after);

	/* the migrated schema is the one a new store gets, to the letter */
	*strchr(before, '|') = 0;
	snprintf(f->db + strlen(f->db) - 4, 8, "n.db");
	s = store_open(f->db);
	assert_non_null(s);
	assert_int_equal(store_close(s), 0);
	snapshot(f->db, fresh, sizeof(fresh));
	*strchr(fresh, '|') = 0;
	assert_string_equal(before, fresh);
}

/* The schema steps run in order by themselves (as readers' tests do)
 * make the schema that store_open() makes. */
static void test_store_schema_sql_whole(void **state)
{
	struct fixture *f = *state;
	static char a[SNAP_MAX], b[SNAP_MAX];
	struct store *s = store_open(f->db);

	assert_non_null(s);
	assert_int_equal(store_close(s), 0);
	snapshot(f->db, a, sizeof(a));
	*strchr(a, '|') = 0;
	snprintf(f->db + strlen(f->db) - 4, 8, "w.db");
	for (int v = 0; shimmer_schema_steps[v]; v++)
		exec_sql(f->db, shimmer_schema_steps[v]);
	snapshot(f->db, b, sizeof(b));
	*strchr(b, '|') = 0;
	assert_string_equal(a, b);
	assert_int_equal(query_int(f->db, "SELECT value FROM meta WHERE key = 'schema_version'"),
			 STORE_SCHEMA_VERSION);
	assert_null(shimmer_schema_steps[STORE_SCHEMA_VERSION]);
}

/* A migration that fails leaves the store as it was: one transaction. */
static void test_store_migration_atomic(void **state)
{
	struct fixture *f = *state;
	static char before[SNAP_MAX], after[SNAP_MAX];

	make_v1_store(f->db);
	/* a column 002 adds is already there: its ALTER TABLE fails */
	exec_sql(f->db, "ALTER TABLE processes ADD COLUMN gpu_status_detail TEXT");
	snapshot(f->db, before, sizeof(before));
	errno = 0;
	assert_null(store_open(f->db));
	assert_int_equal(errno, EPROTO);
	snapshot(f->db, after, sizeof(after));
	assert_string_equal(before, after);
	assert_int_equal(query_int(f->db, "SELECT count(*) FROM sqlite_master WHERE name IN "
					  "('strings', 'kernels')"), 0);
	assert_int_equal(query_int(f->db, "SELECT value FROM meta WHERE key = 'schema_version'"), 1);
}

static void test_store_refuses_non_database(void **state)
{
	struct fixture *f = *state;
	FILE *fp = fopen(f->db, "w");

	fputs("this is not an SQLite database, it is a text file long enough to "
	      "hold a header of one hundred bytes.............................\n", fp);
	fclose(fp);
	assert_null(store_open(f->db));
}

static int mode_of(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 ? (int)(sb.st_mode & 07777) : -1;
}

/* Defect 4 of issue 13: under the usual umask a store and its -wal and
 * -shm were 0644, so any user read every traced command line. */
static void test_store_private(void **state)
{
	struct fixture *f = *state;
	struct store_proc p = { .pid = 5, .ppid = 1, .uid = 1000, .host = "h", .host_len = 1,
				.rank = SHM_NO_RANK, .local_rank = SHM_NO_RANK,
				.malloc_mode = "all", .sample_bytes = -1 };
	char wal[128], shm[128];
	mode_t old = umask(022);
	struct store *s = store_open(f->db);
	int64_t id;

	umask(old);
	assert_non_null(s);
	assert_int_equal(store_process_add(s, &p, &id), 0);
	assert_int_equal(store_commit(s), 0);
	snprintf(wal, sizeof(wal), "%s-wal", f->db);
	snprintf(shm, sizeof(shm), "%s-shm", f->db);
	assert_int_equal(mode_of(f->db), 0600);
	assert_int_equal(mode_of(wal), 0600);
	assert_int_equal(mode_of(shm), 0600);
	assert_int_equal(store_close(s), 0);
	/* a symbolic link where a new store would be made is not followed */
	assert_int_equal(unlink(f->db), 0);
	assert_int_equal(symlink("/nonexistent/target", f->db), 0);
	assert_null(store_open(f->db));
}

/* Defect 5 of issue 13: a database that is not a shimmer store is
 * refused before anything is written: the file is byte-identical after. */
static void refuse_foreign(struct fixture *f, const char *sql)
{
	char before[4096], after[4096], cmd[256];
	sqlite3 *db;

	unlink(f->db);
	assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
	exec(db, "%s", sql);
	sqlite3_close(db);
	snprintf(cmd, sizeof(cmd), "sha256sum < %s", f->db);
	query_text_cmd(cmd, before, sizeof(before));
	assert_null(store_open(f->db));
	assert_int_equal(errno, EEXIST);
	query_text_cmd(cmd, after, sizeof(after));
	assert_string_equal(before, after);
	assert_int_equal(query_int(f->db, "SELECT count(*) FROM sqlite_master WHERE name IN "
					  "('allocations', 'functions', 'strings')"), 0);
}

static void test_store_refuses_foreign(void **state)
{
	struct fixture *f = *state;

	refuse_foreign(f, "CREATE TABLE notes (t TEXT); INSERT INTO notes VALUES ('mine');");
	/* a name clash: the daemon used to fail half-way, the file changed */
	refuse_foreign(f, "CREATE TABLE processes (x); INSERT INTO processes VALUES (1);");
	refuse_foreign(f, "CREATE TABLE meta (key TEXT, value TEXT);");
	refuse_foreign(f, "CREATE VIEW v AS SELECT 1;");
	/* an empty database is a new store */
	unlink(f->db);
	{
		sqlite3 *db;
		struct store *s;

		assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
		exec(db, "PRAGMA user_version = 0;");
		sqlite3_close(db);
		s = store_open(f->db);
		assert_non_null(s);
		store_close(s);
	}
}

/* Defect 11 of issue 13: a collector killed with live processes left
 * their rows without an end forever.  The next one to open the store
 * alone ends them as 'collector_lost' at the last commit; one that opens
 * it beside a live collector leaves them to it. */
static void test_store_recover_lost(void **state)
{
	struct fixture *f = *state;
	struct store_proc p = { .pid = 5, .ppid = 1, .uid = 1000, .host = "h", .host_len = 1,
				.rank = SHM_NO_RANK, .local_rank = SHM_NO_RANK,
				.malloc_mode = "all", .sample_bytes = -1, .start_ns = 10 };
	struct store *s = store_open(f->db), *other;
	unsigned lost = 99;
	int64_t id, ended;

	assert_non_null(s);
	assert_int_equal(store_recover(s, &lost), 0);
	assert_int_equal(lost, 0);
	assert_int_equal(store_process_add(s, &p, &id), 0);
	assert_int_equal(store_process_add(s, &p, &ended), 0);
	assert_int_equal(store_process_end(s, ended, 20, "exit", 0), 0);
	assert_int_equal(store_commit(s), 0);
	/* a second collector beside the live one recovers nothing */
	other = store_open(f->db);
	assert_non_null(other);
	assert_int_equal(store_recover(other, &lost), 0);
	assert_int_equal(lost, 0);
	store_close(other);
	assert_int_equal(query_int(f->db, "SELECT count(*) FROM processes WHERE end_reason IS NULL"), 1);
	/* the first "dies": its lock goes with its descriptors */
	store_close(s);
	s = store_open(f->db);
	assert_non_null(s);
	assert_int_equal(store_recover(s, &lost), 0);
	assert_int_equal(lost, 1);
	/* at the dead one's last commit: before the recovery's own */
	assert_int_equal(query_int(f->db, "SELECT count(*) FROM processes WHERE "
					  "end_reason = 'collector_lost' AND end_ns > 10 AND end_ns < "
					  "(SELECT CAST(value AS INTEGER) FROM meta WHERE "
					  "key = 'last_commit_ns')"), 1);
	assert_int_equal(query_int(f->db, "SELECT end_ns FROM processes WHERE end_reason = 'exit'"), 20);
	store_close(s);
}

static void test_store_batches(void **state)
{
	struct fixture *f = *state;
	struct store *s = store_open(f->db);
	struct store_proc p = { .pid = 5, .ppid = 1, .uid = 1000, .host = "h", .host_len = 1,
				.rank = SHM_NO_RANK, .local_rank = SHM_NO_RANK,
				.malloc_mode = "all", .sample_bytes = -1 };
	int64_t proc_id, id;
	struct store_alloc a = { .space = "host", .device = -1, .ptr = 0x10, .size = 8,
				 .weight = 8, .fn = SHM_FN_MALLOC, .tid = 5, .ns = 1,
				 .end_ns = -1 };

	assert_int_equal(store_process_add(s, &p, &proc_id), 0);
	a.proc_id = proc_id;
	assert_int_equal(store_alloc_add(s, &a, &id), 0);
	/* not committed: another connection does not see it */
	assert_int_equal(query_int(f->db, "SELECT count(*) FROM allocations"), 0);
	assert_int_equal(store_commit(s), 0);
	assert_int_equal(query_int(f->db, "SELECT count(*) FROM allocations"), 1);
	assert_int_equal(store_alloc_free(s, id, SHM_FN_FREE, 6, 20, 25), 0);
	assert_int_equal(store_count_add(s, proc_id, 5, SHM_FN_MALLOC, 3, 30), 0);
	assert_int_equal(store_count_add(s, proc_id, 5, SHM_FN_MALLOC, 4, 40), 0);
	assert_int_equal(store_drop_add(s, proc_id, 5, "ring_full", 2), 0);
	assert_int_equal(store_drop_add(s, proc_id, 5, "ring_full", 5), 0);
	assert_int_equal(store_string_add(s, proc_id, 3, "main", 4, NULL), 0);
	assert_int_equal(store_string_add(s, proc_id, 4, "again", 5, NULL), 0);
	assert_int_equal(store_thread_add(s, proc_id, 5, 3, 100), 0);
	assert_int_equal(store_thread_add(s, proc_id, 5, 4, 200), 0);
	assert_int_equal(store_thread_add(s, proc_id, 6, 0, 300), 0);
	assert_int_equal(store_thread_add(s, proc_id, 7, 99, 400), 0);
	assert_int_equal(store_process_find(s, 5, 1000, "h", 1, &id), 0);
	assert_int_equal(id, proc_id);
	assert_int_equal(store_process_find(s, 5, 1000, "other", 5, &id), 0);
	assert_int_equal(id, 0);
	/* another user's process of that pid is never found */
	assert_int_equal(store_process_find(s, 5, 1001, "h", 1, &id), 0);
	assert_int_equal(id, 0);
	assert_int_equal(store_process_end(s, proc_id, 999, "exit", 0), 0);
	assert_int_equal(store_close(s), 0);
	assert_int_equal(query_int(f->db, "SELECT free_tid * 1000 + free_end_ns FROM allocations "
					  "WHERE free_fn = 2 AND free_ns = 20"), 6025);
	assert_int_equal(query_int(f->db, "SELECT count * 1000 + bytes FROM function_counts"), 7070);
	assert_int_equal(query_int(f->db, "SELECT events FROM drops"), 7);
	assert_int_equal(query_int(f->db, "SELECT first_ns FROM threads WHERE name = 'main'"), 100);
	assert_int_equal(query_int(f->db, "SELECT count(*) FROM threads WHERE name IS NULL AND "
					  "tid IN (6, 7)"), 2);
	assert_int_equal(query_int(f->db, "SELECT end_ns FROM processes WHERE end_reason = 'exit'"), 999);
	/* a clean close leaves no WAL behind */
	assert_int_equal(query_int(f->db, "PRAGMA wal_checkpoint"), 0);
}

/* Allocation rows wait for the commit; their ids are final when added,
 * also when another writer took ids between batches, and frees of pending
 * rows (here more than one multi-row INSERT's worth) complete them. */
static void test_store_pending_allocs(void **state)
{
	struct fixture *f = *state;
	struct store *s = store_open(f->db);
	struct store_proc p = { .pid = 5, .host = "h", .host_len = 1,
				.rank = SHM_NO_RANK, .local_rank = SHM_NO_RANK,
				.malloc_mode = "all", .sample_bytes = -1 };
	struct store_alloc a = { .space = "host", .device = -1, .size = 8, .weight = 8,
				 .fn = SHM_FN_MALLOC, .tid = 5, .end_ns = -1 };
	int64_t proc_id, id, first = 0;
	sqlite3 *other;

	assert_int_equal(store_process_add(s, &p, &proc_id), 0);
	a.proc_id = proc_id;
	for (int i = 0; i < 100; i++) {
		a.ptr = (uint64_t)i + 1;
		a.ns = i;
		a.stack_id = (uint32_t)i % 3;
		assert_int_equal(store_alloc_add(s, &a, &id), 0);
		if (!i)
			first = id;
		assert_int_equal(id, first + i);
		if (i % 2)
			assert_int_equal(store_alloc_free(s, id, SHM_FN_FREE, 6, 1000 + i,
							  i % 4 == 1 ? -1 : 2000 + i), 0);
	}
	assert_int_equal(query_int(f->db, "SELECT count(*) FROM allocations"), 0);
	assert_int_equal(store_commit(s), 0);
	assert_int_equal(query_int(f->db, "SELECT count(*) FROM allocations"), 100);
	assert_int_equal(query_int(f->db, "SELECT sum(id - ptr) FROM allocations"), 100 * (first - 1));
	assert_int_equal(query_int(f->db, "SELECT count(*) FROM allocations WHERE free_ns = 1000 + "
					  "alloc_ns AND free_fn = 2 AND free_tid = 6"), 50);
	assert_int_equal(query_int(f->db, "SELECT count(*) FROM allocations WHERE free_end_ns = "
					  "2000 + alloc_ns"), 25);
	assert_int_equal(query_int(f->db, "SELECT count(*) FROM allocations WHERE free_ns IS NULL AND "
					  "free_fn IS NULL AND free_tid IS NULL AND free_end_ns IS NULL"), 50);
	assert_int_equal(query_int(f->db, "SELECT count(*) FROM allocations WHERE stack_id IS NULL"), 34);
	assert_int_equal(query_int(f->db, "SELECT count(*) FROM allocations WHERE pystack_id IS NULL"),
			 100);
	/* another writer between batches: the next batch's ids follow its row */
	assert_int_equal(sqlite3_open(f->db, &other), SQLITE_OK);
	assert_int_equal(sqlite3_exec(other, "INSERT INTO allocations (id, proc_id, space, device, "
				      "ptr, size, sampled, weight, alloc_fn, alloc_tid, alloc_ns) "
				      "VALUES (1000, 1, 'host', -1, 1, 1, 0, 1, 1, 1, 1)",
				      NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(other);
	a.ptr = 0x999;
	assert_int_equal(store_alloc_add(s, &a, &id), 0);
	assert_int_equal(id, 1001);
	/* a row of an earlier batch is updated */
	assert_int_equal(store_alloc_free(s, first, SHM_FN_FREE, 7, 77, -1), 0);
	assert_int_equal(store_close(s), 0);
	assert_int_equal(query_int(f->db, "SELECT ptr FROM allocations WHERE id = 1001"), 0x999);
	assert_int_equal(query_int(f->db, "SELECT free_ns FROM allocations WHERE ptr = 1"), 77);
}

/* A small file system: a tmpfs when we may mount one, else a file size
 * limit on this process. */
static void make_disk_small(struct fixture *f)
{
	struct rlimit rl = { 256 << 10, 256 << 10 };

	if (unshare(CLONE_NEWNS) == 0 &&
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
	    mount("tmpfs", f->dir, "tmpfs", 0, "size=256k") == 0) {
		f->mounted = 1;
		return;
	}
	signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &rl), 0);
}

static void test_store_disk_full(void **state)
{
	struct fixture *f = *state;
	struct store_proc p = { .pid = 5, .host = "h", .host_len = 1,
				.rank = SHM_NO_RANK, .local_rank = SHM_NO_RANK,
				.malloc_mode = "all", .sample_bytes = -1 };
	struct store *s;
	struct rlimit unlimited = { RLIM_INFINITY, RLIM_INFINITY };
	int64_t proc_id, id, committed = 0;
	char log_path[128], line[512] = { 0 }, text[32];
	int err = 0, saved_stderr, log_fd;
	FILE *fp;

	make_disk_small(f);
	s = store_open(f->db);
	assert_non_null(s);
	assert_int_equal(store_process_add(s, &p, &proc_id), 0);
	assert_int_equal(store_commit(s), 0);
	snprintf(log_path, sizeof(log_path), "/tmp/shimmer-store-log-%d", getpid());
	log_fd = open(log_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	saved_stderr = dup(2);
	dup2(log_fd, 2);
	log_level = LOG_LVL_ERROR;
	for (int64_t n = 0; !err && n < 1000000; n += 100) {
		for (int i = 0; !err && i < 100; i++) {
			struct store_alloc a = { .proc_id = proc_id, .space = "host",
						 .device = -1, .ptr = (uint64_t)(n + i + 1),
						 .size = 8, .weight = 8, .fn = SHM_FN_MALLOC,
						 .tid = 5, .ns = n + i, .end_ns = -1 };

			err = store_alloc_add(s, &a, &id);
		}
		if (!err)
			err = store_commit(s);
		if (!err)
			committed += 100;
	}
	dup2(saved_stderr, 2);
	close(saved_stderr);
	log_level = LOG_LVL_ERROR - 1;
	assert_true(err == -ENOSPC || err == -EIO);
	assert_true(committed > 0);
	/* broken from now on, with the same error */
	assert_int_equal(store_commit(s), err);
	assert_int_equal(store_drop_add(s, proc_id, 0, "no_slot", 1), err);
	assert_int_equal(store_close(s), err);
	setrlimit(RLIMIT_FSIZE, &unlimited);

	fp = fdopen(log_fd, "r");
	rewind(fp);
	assert_non_null(fgets(line, sizeof(line), fp));
	fclose(fp);
	unlink(log_path);
	assert_non_null(strstr(line, "shimmerd: error: cannot write "));
	assert_non_null(strstr(line, f->db));
	if (err == -ENOSPC)
		assert_non_null(strstr(line, "database or disk is full"));
	/* consistent, and holding exactly the committed batches */
	query_text(f->db, "PRAGMA integrity_check", text, sizeof(text));
	assert_string_equal(text, "ok");
	assert_int_equal(query_int(f->db, "SELECT count(*) FROM allocations"), committed);
	assert_int_equal(query_int(f->db, "SELECT count(*) FROM processes"), 1);
}

/* A store of n allocations rows in process 1 (and a stack), closed. */
static void make_store(const char *path, int n)
{
	struct store *s = store_open(path);
	struct store_proc p = { .pid = 5, .ppid = 1, .uid = 1000, .host = "h", .host_len = 1,
				.rank = SHM_NO_RANK, .local_rank = SHM_NO_RANK,
				.malloc_mode = "all", .sample_bytes = -1 };
	struct store_alloc a = { .space = "host", .device = -1, .size = 8, .weight = 8,
				 .fn = SHM_FN_MALLOC, .tid = 5, .end_ns = -1 };
	static const uint64_t pc[] = { 0x401000, 0x402000 };
	struct stacktree t = { 0 };
	int64_t id;

	assert_non_null(s);
	assert_int_equal(store_process_add(s, &p, &a.proc_id), 0);
	assert_int_equal(store_stack_add(s, a.proc_id, &t, 1, pc, 2), 0);
	for (int i = 0; i < n; i++) {
		a.ptr = 0x10000 + 16 * (uint64_t)i;
		a.ns = i;
		assert_int_equal(store_alloc_add(s, &a, &id), 0);
	}
	assert_int_equal(store_close(s), 0);
	stacktree_free(&t);
}

static void assert_store_whole(const char *path, int n)
{
	char text[64];

	query_text(path, "PRAGMA integrity_check", text, sizeof(text));
	assert_string_equal(text, "ok");
	assert_int_equal(query_int(path, "SELECT count(*) FROM allocations"), n);
	assert_int_equal(query_int(path, "SELECT sum(ptr) FROM allocations"),
			 (int64_t)n * 0x10000 + 16 * (int64_t)n * (n - 1) / 2);
	query_text(path, "SELECT group_concat(pc, ' ') FROM (SELECT pc FROM stack_frames"
			 " ORDER BY level)", text, sizeof(text));
	assert_string_equal(text, "4198400 4202496");
}

/* A small store is rewritten with smaller pages at its close (512 bytes
 * up to 512 KiB, 1 KiB up to 4 MiB; a larger one is left); not while a
 * reader holds it, nor while another collector has it open. */
static void test_store_compacts_at_close(void **state)
{
	struct fixture *f = *state;
	struct store *s, *other;
	sqlite3 *reader;

	make_store(f->db, 100);
	assert_int_equal(query_int(f->db, "PRAGMA page_size"), 512);
	assert_store_whole(f->db, 100);
	snprintf(f->db + strlen(f->db) - 4, 8, "m.db");
	make_store(f->db, 40000); /* 1.3 MB */
	assert_int_equal(query_int(f->db, "PRAGMA page_size"), 1024);
	assert_store_whole(f->db, 40000);
	snprintf(f->db + strlen(f->db) - 4, 8, "l.db");
	make_store(f->db, 160000); /* 5 MB */
	assert_int_equal(query_int(f->db, "PRAGMA page_size"), 4096);

	/* a larger-page store that a reader holds at the close */
	snprintf(f->db + strlen(f->db) - 4, 8, "r.db");
	assert_int_equal(sqlite3_open(f->db, &reader), SQLITE_OK);
	s = store_open(f->db);
	assert_non_null(s);
	exec(reader, "BEGIN; SELECT count(*) FROM meta");
	assert_int_equal(store_close(s), 0);
	exec(reader, "COMMIT");
	sqlite3_close(reader);
	assert_int_equal(query_int(f->db, "PRAGMA page_size"), 4096);

	/* two collectors: the first to close leaves it, the last compacts */
	snprintf(f->db + strlen(f->db) - 4, 8, "c.db");
	s = store_open(f->db);
	other = store_open(f->db);
	assert_non_null(s);
	assert_non_null(other);
	assert_int_equal(store_close(s), 0);
	assert_int_equal(query_int(f->db, "PRAGMA page_size"), 4096);
	assert_int_equal(store_close(other), 0);
	assert_int_equal(query_int(f->db, "PRAGMA page_size"), 512);
}

/* Copies the template to the store, then forks a collector that opens it
 * and closes it; kills it after delay_us unless delay_us < 0.  Returns
 * 1 when the close completed, 0 when it was killed. */
static int close_killed(const char *tmpl, const char *db, const char *journal, long delay_us)
{
	char cmd[512];
	pid_t pid;
	int status;

	snprintf(cmd, sizeof(cmd), "cp %s %s && rm -f %s", tmpl, db, journal);
	assert_int_equal(system(cmd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct store *s = store_open(db);

		_exit(s && store_close(s) == 0 ? 0 : 1);
	}
	if (delay_us >= 0) {
		usleep((useconds_t)delay_us);
		kill(pid, SIGKILL);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* A collector killed (SIGKILL) at any instant of its close, compaction
 * included, loses nothing of the recording: the store reads whole, before
 * or after the VACUUM.  The kill lands at instants spread over the time
 * a close of a ~1 MB store takes; three must land inside the VACUUM
 * (a hot journal of the store's pages left behind: the journal of the
 * switch to WAL mode at the open is much smaller), or the test proves
 * nothing. */
static void test_store_compact_killed(void **state)
{
	struct fixture *f = *state;
	char tmpl[128], journal[128];
	int hot = 0, n = 20000, i;
	struct timespec t0, t1;
	long whole_us;
	struct stat sb;
	off_t tmpl_size;

	snprintf(tmpl, sizeof(tmpl), "%s/tmpl.db", f->dir);
	snprintf(journal, sizeof(journal), "%s-journal", f->db);
	/* the template: a recording with 4 KiB pages, not compacted */
	make_store(tmpl, n);
	exec_sql(tmpl, "PRAGMA page_size = 4096; VACUUM");
	assert_int_equal(query_int(tmpl, "PRAGMA page_size"), 4096);
	assert_int_equal(stat(tmpl, &sb), 0);
	tmpl_size = sb.st_size;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_true(close_killed(tmpl, f->db, journal, -1));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_true(query_int(f->db, "PRAGMA page_size") < 4096);
	whole_us = (t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000;
	/* Instants over 0 .. 1.25 times the close, in a scattered order, until
	 * three have landed inside the VACUUM (about one in ten does). */
	for (i = 0; i < 300 && hot < 3; i++) {
		if (!close_killed(tmpl, f->db, journal, whole_us * ((i * 37) % 101) / 80) &&
		    stat(journal, &sb) == 0 && sb.st_size >= tmpl_size / 2)
			hot++;
		assert_store_whole(f->db, n);
	}
	print_message("%d of %d kills during a compaction\n", hot, i);
	assert_int_equal(hot, 3);
	unlink(tmpl);
}

/* The stack_frames view of a store, "proc:stack:level:pc" rows, space-separated. */
static void frames_text(const char *path, char *out, size_t n)
{
	query_text(path, "SELECT group_concat(x, ' ') FROM (SELECT proc_id || ':' || stack_id ||"
			 " ':' || level || ':' || pc AS x FROM stack_frames"
			 " ORDER BY proc_id, stack_id, level)", out, n);
}

/* Stacks go in as the shim sends them (pc[0] innermost) and come out of
 * stack_frames exactly so; a (caller, pc) is one node per process, so
 * stacks that share outer frames share nodes, and the same pc under
 * another caller is another node. */
static void test_store_stack_tree(void **state)
{
	struct fixture *f = *state;
	static const uint64_t a[] = { 0x10, 0x11, 0x12, 0x13 }, b[] = { 0x20, 0x11, 0x12, 0x13 },
			      c[] = { 0x10, 0x11, 0x30, 0x13 }, d[] = { 0x13 },
			      other[] = { 0x99, 0x98 };
	static char got[SNAP_MAX], want[SNAP_MAX];
	uint64_t deep[SHM_STACK_MAX];
	struct stacktree t1 = { 0 }, t2 = { 0 }, again = { 0 };
	struct store *s = store_open(f->db);
	size_t w = 0;

	assert_non_null(s);
	for (uint32_t i = 0; i < SHM_STACK_MAX; i++)
		deep[i] = 0x1000 + (i % 3); /* repeated pcs: each level its own node */
	assert_int_equal(store_stack_add(s, 1, &t1, 1, a, 4), 0);
	assert_int_equal(store_stack_add(s, 1, &t1, 2, b, 4), 0);
	assert_int_equal(store_stack_add(s, 1, &t1, 3, c, 4), 0);
	assert_int_equal(store_stack_add(s, 1, &t1, 4, d, 1), 0);
	assert_int_equal(store_stack_add(s, 1, &t1, 1, b, 4), 0); /* a known id keeps its frames */
	assert_int_equal(store_stack_add(s, 1, &t1, 5, b, 0), 0); /* no frames: not stored */
	assert_int_equal(store_stack_add(s, 2, &t2, 1, other, 2), 0);
	assert_int_equal(store_stack_add(s, 2, &t2, 2, deep, SHM_STACK_MAX), 0);
	/* A second ingest of process 1 (its tree forgotten) numbers after the
	 * nodes the store has. */
	assert_int_equal(store_stack_add(s, 1, &again, 6, a, 4), 0);
	assert_int_equal(store_close(s), 0);

	w += (size_t)snprintf(want + w, sizeof(want) - w, "1:1:0:16 1:1:1:17 1:1:2:18 1:1:3:19 "
			      "1:2:0:32 1:2:1:17 1:2:2:18 1:2:3:19 1:3:0:16 1:3:1:17 1:3:2:48 "
			      "1:3:3:19 1:4:0:19 1:6:0:16 1:6:1:17 1:6:2:18 1:6:3:19 "
			      "2:1:0:153 2:1:1:152");
	for (uint32_t i = 0; i < SHM_STACK_MAX; i++)
		w += (size_t)snprintf(want + w, sizeof(want) - w, " 2:2:%u:%llu", i,
				      (unsigned long long)deep[i]);
	frames_text(f->db, got, sizeof(got));
	assert_string_equal(got, want);
	/* a: 4 nodes; b: 1 more; c: 3 (0x30, then 0x11 and 0x10 under it); d:
	 * none; the second ingest: 4 new ones after them. */
	assert_int_equal(query_int(f->db, "SELECT count(*) FROM stack_nodes WHERE proc_id = 1"),
			 12);
	assert_int_equal(query_int(f->db, "SELECT min(node_id) FROM stack_nodes n JOIN stacks s"
					  " USING (proc_id, node_id) WHERE proc_id = 1 AND"
					  " stack_id = 6"), 12);
	assert_int_equal(query_int(f->db, "SELECT count(*) FROM stack_nodes WHERE proc_id = 2"),
			 2 + SHM_STACK_MAX);
	/* every caller has a lower id than its callees */
	assert_int_equal(query_int(f->db, "SELECT count(*) FROM stack_nodes"
					  " WHERE parent_id >= node_id"), 0);
	stacktree_free(&t1);
	stacktree_free(&t2);
	stacktree_free(&again);
}

/* A store of schema 9 (a stack_frames table) keeps every frame when it is
 * brought to schema 10, and reads the same through the view. */
static void test_store_migrates_stack_frames(void **state)
{
	struct fixture *f = *state;
	static char before[SNAP_MAX], after[SNAP_MAX];
	sqlite3 *db;

	assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
	for (int v = 0; v < 9; v++)
		exec(db, "%s", shimmer_schema_steps[v]);
	exec(db, "INSERT INTO stack_frames VALUES (1, 7, 0, 100), (1, 7, 1, 101), (1, 7, 2, 102),"
		 " (1, 3, 0, 100), (1, 3, 1, 101), (2, 7, 0, 140737488351232), (2, 9, 0, 5)");
	sqlite3_close(db);
	frames_text(f->db, before, sizeof(before));
	assert_string_equal(before, "1:3:0:100 1:3:1:101 1:7:0:100 1:7:1:101 1:7:2:102 "
				    "2:7:0:140737488351232 2:9:0:5");
	assert_int_equal(store_close(store_open(f->db)), 0);
	assert_int_equal(query_int(f->db, "SELECT value FROM meta WHERE key = 'schema_version'"),
			 STORE_SCHEMA_VERSION);
	assert_int_equal(query_int(f->db, "SELECT type = 'view' FROM sqlite_master"
					  " WHERE name = 'stack_frames'"), 1);
	frames_text(f->db, after, sizeof(after));
	assert_string_equal(before, after);
	assert_int_equal(query_int(f->db, "SELECT count(*) FROM stack_nodes"), 7);
	assert_int_equal(query_int(f->db, "SELECT count(*) FROM stack_nodes"
					  " WHERE parent_id >= node_id"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
		T(test_store_private),
		T(test_store_recover_lost),
		T(test_store_refuses_foreign),
		T(test_store_creates_schema),
		T(test_store_indexes_at_close),
		T(test_store_refuses_newer_schema),
		T(test_store_refuses_non_database),
		T(test_store_migrates_v1),
		T(test_store_schema_sql_whole),
		T(test_store_migration_atomic),
		T(test_store_stack_tree),
		T(test_store_migrates_stack_frames),
		T(test_store_compacts_at_close),
		T(test_store_compact_killed),
		T(test_store_batches),
		T(test_store_pending_allocs),
		T(test_store_disk_full),
#undef T
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
