/*
 * Jobs, recordings, the index and retention (job.h).
 *
 * The index is a small SQLite database of the daemon's own: one row per
 * recording, made when the recording is, completed (end, size, processes,
 * ranks) when it is finished.  Live recordings are also kept in memory
 * (struct job), which is what processes join; `shimmer ls` reads both.
 */
#include "job.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock_ns.h"
#include "log.h"
#include "wire.h"

#define RETENTION_NS 60000000000ll /* retention runs at least this often */
#define JOBS_PER_USER 64          /* live recordings one user may have at once */
#define REFUSAL_LOG_NS 1000000000ll

struct job {
	struct job *next;
	struct jobs *js;
	uint32_t uid;
	char key[SHM_JOB_MAX + 1];
	char *host, *path;
	struct store *store;
	int64_t index_id;
	unsigned procs;      /* connected processes */
	int64_t idle_since;  /* CLOCK_MONOTONIC, when procs fell to 0 */
	int64_t start_wall_ns;
	int64_t end_wall_ns; /* when its last process so far ended */
	uint32_t *pids;      /* of every process it had, for jobs_find_pid() */
	size_t npids, pids_cap;
};

struct jobs {
	struct jobs_conf conf;
	char *db, *state_dir;
	struct job *live;
	struct job single; /* the one store (conf.db) */
	sqlite3 *index;
	gid_t gid;
	int64_t last_retention;
	int64_t last_refusal_log;
};

static int64_t wall_ns(void)
{
	return (int64_t)clock_ns(CLOCK_REALTIME);
}

/* ---- the index ---- */

static const char index_schema[] =
	"PRAGMA journal_mode = WAL;"
	"CREATE TABLE IF NOT EXISTS recordings ("
	" id INTEGER PRIMARY KEY,"
	" uid INTEGER NOT NULL,"
	" job TEXT NOT NULL,"
	" host TEXT,"
	" path TEXT NOT NULL UNIQUE,"
	" start_wall_ns INTEGER NOT NULL,"
	" end_wall_ns INTEGER,"
	" processes INTEGER NOT NULL DEFAULT 0,"
	" ranks INTEGER NOT NULL DEFAULT 0,"
	" bytes INTEGER NOT NULL DEFAULT 0);"
	/* The processes a crashed daemon left live in a recording, ended
	 * 'collector_lost' at the next start (adopt_orphans()): each may say
	 * HELLO again (jobs_resume()). */
	"CREATE TABLE IF NOT EXISTS lost ("
	" recording INTEGER NOT NULL,"
	" uid INTEGER NOT NULL,"
	" pid INTEGER NOT NULL,"
	" host TEXT NOT NULL,"
	" start_ns INTEGER NOT NULL,"
	" UNIQUE (uid, pid, host, start_ns, recording));"
	"CREATE TRIGGER IF NOT EXISTS recording_gone AFTER DELETE ON recordings"
	" BEGIN DELETE FROM lost WHERE recording = old.id; END;";

/* Runs sql with the values given ('i': int64, 's': text) and, when row is
 * not NULL, hands it each result row.  0 or -EIO (logged). */
static int index_exec(struct jobs *js, const char *sql, const char *types,
		      int (*row)(void *ctx, sqlite3_stmt *st), void *ctx, ...)
{
	sqlite3_stmt *st = NULL;
	va_list ap;
	int rc, err = 0;

	rc = sqlite3_prepare_v2(js->index, sql, -1, &st, NULL);
	va_start(ap, ctx);
	for (int i = 0; rc == SQLITE_OK && types[i]; i++) {
		if (types[i] == 'i')
			sqlite3_bind_int64(st, i + 1, va_arg(ap, int64_t));
		else
			sqlite3_bind_text(st, i + 1, va_arg(ap, const char *), -1, SQLITE_STATIC);
	}
	va_end(ap);
	if (rc == SQLITE_OK)
		while ((rc = sqlite3_step(st)) == SQLITE_ROW)
			if (row && (err = row(ctx, st)))
				break;
	if (rc == SQLITE_ROW || rc == SQLITE_DONE)
		rc = SQLITE_OK;
	if (rc != SQLITE_OK) {
		log_error("index %s/index.db: %s", js->state_dir, sqlite3_errmsg(js->index));
		err = -EIO;
	}
	sqlite3_finalize(st);
	return err;
}

static const char *col_text(sqlite3_stmt *st, int i)
{
	const char *s = (const char *)sqlite3_column_text(st, i);

	return s ? s : "";
}

/* Bytes on disk of a store and its -wal and -journal. */
static uint64_t store_bytes(const char *path)
{
	static const char *const ext[] = { "", "-wal", "-journal" };
	char name[PATH_MAX];
	struct stat sb;
	uint64_t n = 0;

	for (size_t i = 0; i < 3; i++)
		if ((size_t)snprintf(name, sizeof(name), "%s%s", path, ext[i]) < sizeof(name) &&
		    stat(name, &sb) == 0)
			n += (uint64_t)sb.st_size;
	return n;
}

static void remove_files(const char *path)
{
	static const char *const ext[] = { "", "-wal", "-shm", "-journal" };
	char name[PATH_MAX];

	for (size_t i = 0; i < 4; i++)
		if ((size_t)snprintf(name, sizeof(name), "%s%s", path, ext[i]) < sizeof(name))
			unlink(name);
}

/* ---- finishing a recording ---- */

/* Closes j's store as one file and completes its index row. */
static int finish(struct job *j, int64_t end_wall_ns)
{
	uint32_t procs = 0, ranks = 0;
	int err, cerr;

	err = store_count_processes(j->store, &procs, &ranks);
	if (!err)
		err = store_finish(j->store);
	cerr = store_close(j->store);
	j->store = NULL;
	if (!err)
		err = cerr;
	if (j->index_id)
		cerr = index_exec(j->js, "UPDATE recordings SET end_wall_ns = ?1, processes = ?2, "
				  "ranks = ?3, bytes = ?4 WHERE id = ?5", "iiiii", NULL, NULL,
				  end_wall_ns, (int64_t)procs, (int64_t)ranks,
				  (int64_t)store_bytes(j->path), j->index_id);
	log_info("recording %s of uid %u finished: %u processes", j->path, (unsigned)j->uid,
		 (unsigned)procs);
	return err ? err : cerr;
}

static void job_free(struct job *j)
{
	free(j->pids);
	free(j->host);
	free(j->path);
	if (j != &j->js->single)
		free(j);
}

/* ---- retention ---- */

struct doomed {
	int64_t id;
	char *path;
	uint64_t bytes;
	uint32_t uid;
};

struct doomed_list {
	struct doomed *v;
	size_t n, cap;
};

static int collect(void *ctx, sqlite3_stmt *st)
{
	struct doomed_list *l = ctx;

	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		struct doomed *v = realloc(l->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n].id = sqlite3_column_int64(st, 0);
	l->v[l->n].path = strdup((const char *)sqlite3_column_text(st, 1));
	l->v[l->n].bytes = (uint64_t)sqlite3_column_int64(st, 2);
	l->v[l->n].uid = (uint32_t)sqlite3_column_int64(st, 3); /* when asked for */
	if (!l->v[l->n].path)
		return -ENOMEM;
	l->n++;
	return 0;
}

static int drop_recording(struct jobs *js, const struct doomed *d, const char *why)
{
	remove_files(d->path);
	log_info("retention: removed %s (%s)", d->path, why);
	return index_exec(js, "DELETE FROM recordings WHERE id = ?1", "i", NULL, NULL, d->id);
}

static int sum_bytes(void *ctx, sqlite3_stmt *st)
{
	*(uint64_t *)ctx = (uint64_t)sqlite3_column_int64(st, 0);
	return 0;
}

static int retention(struct jobs *js, int64_t now_wall)
{
	struct doomed_list l = { 0 };
	uint64_t total = 0;
	int err = 0;

	if (js->conf.max_age_ns) {
		err = index_exec(js, "SELECT id, path, bytes FROM recordings WHERE end_wall_ns "
				 "IS NOT NULL AND end_wall_ns < ?1 ORDER BY start_wall_ns", "i",
				 collect, &l, now_wall - js->conf.max_age_ns);
		for (size_t i = 0; i < l.n && !err; i++)
			err = drop_recording(js, &l.v[i], "older than max-age");
	}
	for (size_t i = 0; i < l.n; i++)
		free(l.v[i].path);
	l.n = 0;
	if (!err && js->conf.max_bytes) {
		err = index_exec(js, "SELECT coalesce(sum(bytes), 0) FROM recordings WHERE "
				 "end_wall_ns IS NOT NULL", "", sum_bytes, &total);
		for (struct job *j = js->live; j; j = j->next)
			total += store_bytes(j->path);
		if (!err && total > js->conf.max_bytes)
			err = index_exec(js, "SELECT id, path, bytes FROM recordings WHERE "
					 "end_wall_ns IS NOT NULL ORDER BY start_wall_ns, id", "",
					 collect, &l);
		for (size_t i = 0; i < l.n && !err && total > js->conf.max_bytes; i++) {
			err = drop_recording(js, &l.v[i], "the oldest, over max-size");
			total -= l.v[i].bytes < total ? l.v[i].bytes : total;
		}
		if (!err && total > js->conf.max_bytes)
			log_warn("retention: live recordings alone take %llu bytes, over max-size",
				 (unsigned long long)total);
	}
	for (size_t i = 0; i < l.n; i++)
		free(l.v[i].path);
	free(l.v);
	return err;
}

/* ---- start ---- */

static int mkdir_mode(const char *path, mode_t mode)
{
	if (mkdir(path, mode) < 0 && errno != EEXIST)
		return -errno;
	/* The umask does not decide who may reach the recordings. */
	return chmod(path, mode) < 0 ? -errno : 0;
}

struct lost_ctx {
	struct jobs *js;
	int64_t recording;
};

static int add_lost(void *ctx, const struct store_lost *l)
{
	struct lost_ctx *x = ctx;

	return index_exec(x->js, "INSERT OR IGNORE INTO lost (recording, uid, pid, host, "
			  "start_ns) VALUES (?1, ?2, ?3, ?4, ?5)", "iiisi", NULL, NULL,
			  x->recording, (int64_t)l->uid, (int64_t)l->pid, l->host, l->start_ns);
}

/* Recordings a crashed daemon left live: their processes ended as
 * collector_lost and listed in the index (they may come back: jobs_resume()),
 * the store finished, the row completed at the file's last change. */
static int adopt_orphans(struct jobs *js)
{
	struct doomed_list l = { 0 };
	int err;

	err = index_exec(js, "SELECT id, path, 0, uid FROM recordings WHERE end_wall_ns IS NULL",
			 "", collect, &l);
	for (size_t i = 0; i < l.n && !err; i++) {
		struct job j = { .js = js, .index_id = l.v[i].id, .path = l.v[i].path,
				 .uid = l.v[i].uid };
		struct stat sb;
		unsigned lost = 0;

		if (stat(j.path, &sb) < 0) {
			err = index_exec(js, "DELETE FROM recordings WHERE id = ?1", "i", NULL,
					 NULL, j.index_id);
			continue;
		}
		j.store = store_reopen(j.path);
		if (!j.store) {
			log_warn("cannot reopen %s, left by a daemon that stopped: %s", j.path,
				 strerror(errno));
			continue;
		}
		err = store_recover(j.store, &lost);
		if (!err)
			err = store_each_lost(j.store, add_lost,
					      &(struct lost_ctx){ js, j.index_id });
		if (lost)
			log_warn("%s: %u processes were live when the collector stopped without "
				 "ending them: ended as 'collector_lost' at its last commit", j.path,
				 lost);
		if (err) {
			store_close(j.store);
			break;
		}
		err = finish(&j, (int64_t)sb.st_mtim.tv_sec * 1000000000ll + sb.st_mtim.tv_nsec);
	}
	for (size_t i = 0; i < l.n; i++)
		free(l.v[i].path);
	free(l.v);
	return err;
}

static int open_state(struct jobs *js)
{
	char path[PATH_MAX];
	int rc, err;

	err = mkdir_mode(js->state_dir, 0711);
	if (!err && (size_t)snprintf(path, sizeof(path), "%s/recordings", js->state_dir) >=
			    sizeof(path))
		err = -ENAMETOOLONG;
	if (!err)
		err = mkdir_mode(path, 0711);
	if (err) {
		log_error("cannot make %s: %s", path, strerror(-err));
		return err;
	}
	snprintf(path, sizeof(path), "%s/index.db", js->state_dir);
	rc = sqlite3_open_v2(path, &js->index, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
			     SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW, NULL);
	if (rc == SQLITE_OK)
		chmod(path, 0600);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(js->index, index_schema, NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_busy_timeout(js->index, 5000);
	if (rc != SQLITE_OK) {
		log_error("cannot open %s: %s", path,
			  js->index ? sqlite3_errmsg(js->index) : sqlite3_errstr(rc));
		return -EIO;
	}
	err = adopt_orphans(js);
	if (!err)
		err = retention(js, wall_ns());
	return err;
}

struct jobs *jobs_open(const struct jobs_conf *conf)
{
	struct jobs *js = calloc(1, sizeof(*js));
	int err = -ENOMEM;

	if (!js)
		goto out;
	js->conf = *conf;
	js->gid = getegid();
	js->single.js = js;
	if (conf->db) {
		unsigned lost = 0;

		if (!(js->db = strdup(conf->db)) || !(js->single.path = strdup(conf->db)))
			goto out;
		js->single.store = store_open(conf->db);
		if (!js->single.store) {
			err = -errno;
			goto out;
		}
		err = store_recover(js->single.store, &lost);
		if (err)
			goto out;
		if (lost)
			log_warn("%u processes were live in %s when the collector writing it stopped "
				 "without ending them: ended as 'collector_lost' at its last commit; "
				 "what they did after it is not stored", lost, conf->db);
		js->single.uid = (uint32_t)geteuid();
		js->single.start_wall_ns = wall_ns();
		strcpy(js->single.key, "-");
		return js;
	}
	if (!conf->state_dir || !(js->state_dir = strdup(conf->state_dir)))
		goto out;
	err = open_state(js);
	if (!err)
		return js;
out:
	jobs_close(js);
	errno = -err;
	return NULL;
}

int jobs_close(struct jobs *js)
{
	int err = 0, e;

	if (!js)
		return 0;
	while (js->live) {
		struct job *j = js->live;

		js->live = j->next;
		e = finish(j, wall_ns());
		err = err ? err : e;
		job_free(j);
	}
	if (js->single.store) {
		e = store_close(js->single.store);
		err = err ? err : e;
	}
	free(js->single.path);
	sqlite3_close(js->index);
	free(js->db);
	free(js->state_dir);
	free(js);
	return err;
}

/* ---- joining ---- */

/* The key as kept: printable ASCII without blanks. */
static size_t sanitize(char *out, const char *key, size_t len)
{
	if (len > SHM_JOB_MAX)
		len = SHM_JOB_MAX;
	for (size_t i = 0; i < len; i++)
		out[i] = key[i] > 0x20 && key[i] < 0x7f ? key[i] : '_';
	out[len] = 0;
	return len;
}

struct job *jobs_find(struct jobs *js, uint32_t uid, const char *key, size_t key_len)
{
	char k[SHM_JOB_MAX + 1];

	if (js->db)
		return &js->single;
	sanitize(k, key, key_len);
	for (struct job *j = js->live; j; j = j->next)
		if (j->uid == uid && !strcmp(j->key, k))
			return j;
	return NULL;
}

/* STATE/recordings/UID/KEY-YYYYmmdd-HHMMSS[-N].db, made unique. */
static int new_path(struct jobs *js, struct job *j, char **out)
{
	char dir[PATH_MAX], name[80], stamp[32], *path;
	time_t t = (time_t)(j->start_wall_ns / 1000000000ll);
	struct tm tm;
	size_t n = 0;
	int err;

	if ((size_t)snprintf(dir, sizeof(dir), "%s/recordings/%u", js->state_dir,
			     (unsigned)j->uid) >= sizeof(dir))
		return -ENAMETOOLONG;
	err = mkdir_mode(dir, 0711);
	if (err)
		return err;
	/* A file name from the key: no '/', no leading '.', no ':'. */
	for (const char *k = j->key; *k && n < 64; k++)
		name[n++] = *k == '/' || *k == '\\' ? '_' : *k == ':' ? '-' : *k;
	name[n] = 0;
	if (name[0] == '.')
		name[0] = '_';
	localtime_r(&t, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	for (int i = 1; i < 1000; i++) {
		struct stat sb;

		if (i == 1 ? asprintf(&path, "%s/%s-%s.db", dir, name, stamp) < 0
			   : asprintf(&path, "%s/%s-%s-%d.db", dir, name, stamp, i) < 0)
			return -ENOMEM;
		if (lstat(path, &sb) < 0 && errno == ENOENT) {
			*out = path;
			return 0;
		}
		free(path);
	}
	return -EEXIST;
}

static int make_job(struct jobs *js, uint32_t uid, const char *key, size_t key_len,
		    const char *host, size_t host_len, struct job **out)
{
	struct job *j = calloc(1, sizeof(*j));
	char num[16];
	int err = -ENOMEM;

	if (!j || !(j->host = strndup(host, host_len)))
		goto fail;
	j->js = js;
	j->uid = uid;
	sanitize(j->key, key, key_len);
	j->start_wall_ns = wall_ns();
	err = new_path(js, j, &j->path);
	if (err)
		goto fail;
	j->store = store_open_owned(j->path, uid, js->gid);
	if (!j->store) {
		err = errno == EPERM ? -EPERM : -errno;
		goto fail;
	}
	snprintf(num, sizeof(num), "%u", (unsigned)uid);
	err = store_set_meta(j->store, "job", j->key);
	if (!err)
		err = store_set_meta(j->store, "job_uid", num);
	if (!err)
		err = store_commit(j->store);
	if (!err)
		err = index_exec(js, "INSERT INTO recordings (uid, job, host, path, start_wall_ns) "
				 "VALUES (?1, ?2, ?3, ?4, ?5)", "isssi", NULL, NULL, (int64_t)uid,
				 j->key, j->host, j->path, j->start_wall_ns);
	if (err)
		goto fail;
	j->index_id = sqlite3_last_insert_rowid(js->index);
	j->next = js->live;
	js->live = j;
	log_info("recording job %s of uid %u into %s", j->key, (unsigned)uid, j->path);
	*out = j;
	return 0;
fail:
	if (j && j->store) {
		store_close(j->store);
		remove_files(j->path);
	}
	if (j)
		job_free(j);
	return err;
}

struct job *jobs_find_pid(struct jobs *js, uint32_t uid, uint32_t pid)
{
	if (js->db)
		return &js->single;
	for (struct job *j = js->live; j; j = j->next)
		if (j->uid == uid)
			for (size_t i = j->npids; i-- > 0;)
				if (j->pids[i] == pid)
					return j;
	return NULL;
}

int jobs_join(struct jobs *js, uint32_t uid, uint32_t pid, const char *key, size_t key_len,
	      const char *host, size_t host_len, struct job **out)
{
	struct job *j = jobs_find(js, uid, key, key_len);
	int err;

	if (!j) {
		unsigned n = 0;

		/* Each live recording holds a store open (four descriptors):
		 * one user's jobs must not take them all. */
		for (struct job *o = js->live; o; o = o->next)
			n += o->uid == uid;
		if (n >= JOBS_PER_USER) {
			int64_t now = (int64_t)clock_ns(CLOCK_MONOTONIC);

			if (now - js->last_refusal_log >= REFUSAL_LOG_NS) {
				js->last_refusal_log = now;
				log_warn("uid %u has %u live recordings, the most one user may have; "
					 "not recording its new job %.*s", (unsigned)uid, n,
					 (int)(key_len < 64 ? key_len : 64), key);
			}
			return -EPERM;
		}
		err = make_job(js, uid, key, key_len, host, host_len, &j);
		if (err == -EPERM || err == -EACCES) {
			int64_t now = (int64_t)clock_ns(CLOCK_MONOTONIC);

			if (now - js->last_refusal_log >= REFUSAL_LOG_NS) {
				js->last_refusal_log = now;
				log_warn("cannot give uid %u a recording (shimmerd needs CAP_CHOWN to "
					 "make stores for other users); not recording its processes",
					 (unsigned)uid);
			}
			return -EPERM;
		}
		if (err)
			return err;
	}
	err = job_hold(j, pid);
	if (!err)
		*out = j;
	return err;
}

/* ---- a process that comes back ---- */

struct found {
	int64_t id, start_wall_ns;
	char *path, *key, *host;
	int finished;
};

static int take_found(void *ctx, sqlite3_stmt *st)
{
	struct found *f = ctx;

	f->id = sqlite3_column_int64(st, 0);
	f->path = strdup(col_text(st, 1));
	f->key = strdup(col_text(st, 2));
	f->host = strdup(col_text(st, 3));
	f->start_wall_ns = sqlite3_column_int64(st, 4);
	f->finished = sqlite3_column_int(st, 5);
	return f->path && f->key && f->host ? 0 : -ENOMEM;
}

/*
 * Opens f's finished recording again as a live job of uid.  The file must
 * still be there, a regular file and uid's (the directories are the
 * daemon's alone; checked all the same).  0 with *out, 0 with *out NULL
 * and why said when it cannot be continued, or an index error.
 */
static int reopen(struct jobs *js, struct found *f, uint32_t uid, struct job **out,
		  char *why, size_t why_len)
{
	struct job *j, **tail;
	struct stat sb;
	unsigned n = 0;
	int err;

	*out = NULL;
	for (struct job *o = js->live; o; o = o->next)
		n += o->uid == uid;
	if (n >= JOBS_PER_USER) {
		snprintf(why, why_len, "uid %u has %u live recordings, the most one user may have; "
			 "its recording %s is not continued", (unsigned)uid, n, f->path);
		return 0;
	}
	if (lstat(f->path, &sb) < 0) {
		err = errno;
		snprintf(why, why_len, "its recording %s is gone (%s)", f->path, strerror(err));
		/* as adopt_orphans() does with a recording whose file went */
		return err == ENOENT ? index_exec(js, "DELETE FROM recordings WHERE id = ?1", "i",
						  NULL, NULL, f->id) : 0;
	}
	if (!S_ISREG(sb.st_mode) || sb.st_uid != uid) {
		snprintf(why, why_len, "its recording %s is not a file of uid %u", f->path,
			 (unsigned)uid);
		return 0;
	}
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->js = js;
	j->uid = uid;
	j->index_id = f->id;
	j->start_wall_ns = f->start_wall_ns;
	sanitize(j->key, f->key, strlen(f->key));
	j->path = f->path;
	j->host = f->host;
	f->path = f->host = NULL;
	j->store = store_reopen_finished(j->path, uid, js->gid);
	if (!j->store) {
		snprintf(why, why_len, "its recording %s cannot be continued: %s", j->path,
			 errno == EBUSY ? "a reader holds it" : strerror(errno));
		job_free(j);
		return 0;
	}
	/* live again: listed so, never a retention's, and adopted again if
	 * this daemon dies too */
	err = index_exec(js, "UPDATE recordings SET end_wall_ns = NULL WHERE id = ?1", "i",
			 NULL, NULL, j->index_id);
	if (err) {
		store_close(j->store);
		job_free(j);
		return err;
	}
	/* Last: a job made since for the same key (a later process of it)
	 * stays the one jobs_find() gives. */
	for (tail = &js->live; *tail; tail = &(*tail)->next)
		;
	*tail = j;
	log_info("recording %s of uid %u continued: a process of it came back", j->path,
		 (unsigned)uid);
	*out = j;
	return 0;
}

int jobs_resume(struct jobs *js, uint32_t uid, uint32_t pid, const char *host,
		int64_t start_ns, struct job **out, char *why, size_t why_len)
{
	struct found f = { 0 };
	struct job *j = NULL;
	int err;

	*out = NULL;
	why[0] = 0;
	if (js->db) {
		j = &js->single;
		goto hold;
	}
	/* Only uid's recordings, and only a process listed as lost in one. */
	err = index_exec(js, "SELECT r.id, r.path, r.job, r.host, r.start_wall_ns, "
			 "r.end_wall_ns IS NOT NULL FROM lost l JOIN recordings r ON r.id = "
			 "l.recording WHERE l.uid = ?1 AND l.pid = ?2 AND l.host = ?3 AND "
			 "l.start_ns = ?4 AND r.uid = ?1 ORDER BY r.id DESC LIMIT 1", "iisi",
			 take_found, &f, (int64_t)uid, (int64_t)pid, host, start_ns);
	if (err || !f.id)
		goto out;
	for (j = js->live; j && j->index_id != f.id; j = j->next)
		;
	if (!j && f.finished)
		err = reopen(js, &f, uid, &j, why, why_len);
	else if (!j)
		snprintf(why, why_len, "its recording %s is not open", f.path);
	if (!err && j)
		err = index_exec(js, "DELETE FROM lost WHERE recording = ?1 AND uid = ?2 AND "
				 "pid = ?3 AND host = ?4 AND start_ns = ?5", "iiisi", NULL, NULL,
				 f.id, (int64_t)uid, (int64_t)pid, host, start_ns);
	if (err || !j)
		goto out;
hold:
	err = job_hold(j, pid);
	if (!err)
		*out = j;
out:
	free(f.path);
	free(f.key);
	free(f.host);
	return err;
}

int job_hold(struct job *j, uint32_t pid)
{
	if (j->js->db)
		goto out;
	if (j->npids == j->pids_cap) {
		size_t cap = j->pids_cap ? j->pids_cap * 2 : 16;
		uint32_t *v = realloc(j->pids, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		j->pids = v;
		j->pids_cap = cap;
	}
	j->pids[j->npids++] = pid;
out:
	j->procs++;
	j->idle_since = 0;
	return 0;
}

void job_leave(struct job *j, int64_t now_ns)
{
	j->end_wall_ns = wall_ns();
	if (j->procs && --j->procs == 0)
		j->idle_since = now_ns;
}

struct store *job_store(const struct job *j)
{
	return j->store;
}

struct store *jobs_single_store(const struct jobs *js)
{
	return js->db ? js->single.store : NULL;
}

const char *job_key(const struct job *j)
{
	return j->key;
}

uint32_t job_uid(const struct job *j)
{
	return j->uid;
}

int jobs_commit(struct jobs *js)
{
	int err = 0;

	if (js->db)
		return store_commit(js->single.store);
	for (struct job *j = js->live; j && !err; j = j->next)
		err = store_commit(j->store);
	return err;
}

int jobs_tick(struct jobs *js, int64_t now_ns)
{
	struct job **pj = &js->live;
	int err = 0, finished = 0;

	if (js->db)
		return 0;
	while (*pj && !err) {
		struct job *j = *pj;

		if (j->procs || now_ns - j->idle_since < js->conf.linger_ns) {
			pj = &j->next;
			continue;
		}
		*pj = j->next;
		err = finish(j, j->end_wall_ns ? j->end_wall_ns : wall_ns());
		job_free(j);
		finished = 1;
	}
	if (!err && (finished || now_ns - js->last_retention >= RETENTION_NS)) {
		js->last_retention = now_ns;
		err = retention(js, wall_ns());
	}
	return err;
}

unsigned jobs_live(const struct jobs *js)
{
	unsigned n = 0;

	if (js->db)
		return 1;
	for (const struct job *j = js->live; j; j = j->next)
		n++;
	return n;
}

/* ---- listing ---- */

static int live_row(struct job *j, int (*fn)(void *ctx, const struct job_recording *r),
		    void *ctx)
{
	struct job_recording r = {
		.uid = j->uid, .live = 1, .start_wall_ns = j->start_wall_ns,
		.end_wall_ns = wall_ns(), .bytes = store_bytes(j->path),
		.job = j->key, .host = j->host ? j->host : "", .path = j->path,
	};
	int err = store_count_processes(j->store, &r.processes, &r.ranks);

	return err ? err : fn(ctx, &r);
}

struct list_ctx {
	int (*fn)(void *ctx, const struct job_recording *r);
	void *ctx;
};

static int index_row(void *ctx, sqlite3_stmt *st)
{
	struct list_ctx *l = ctx;
	struct job_recording r = {
		.uid = (uint32_t)sqlite3_column_int64(st, 0),
		.job = col_text(st, 1), .host = col_text(st, 2), .path = col_text(st, 3),
		.start_wall_ns = sqlite3_column_int64(st, 4),
		.end_wall_ns = sqlite3_column_int64(st, 5),
		.processes = (uint32_t)sqlite3_column_int64(st, 6),
		.ranks = (uint32_t)sqlite3_column_int64(st, 7),
		.bytes = (uint64_t)sqlite3_column_int64(st, 8),
	};

	return l->fn(l->ctx, &r);
}

int jobs_list(struct jobs *js, int64_t uid,
	      int (*fn)(void *ctx, const struct job_recording *r), void *ctx)
{
	struct list_ctx l = { fn, ctx };
	int err = 0;

	if (js->db)
		return uid < 0 || (uint32_t)uid == js->single.uid ? live_row(&js->single, fn, ctx)
								    : 0;
	for (struct job *j = js->live; j && !err; j = j->next)
		if (uid < 0 || (uint32_t)uid == j->uid)
			err = live_row(j, fn, ctx);
	if (!err)
		err = index_exec(js, "SELECT uid, job, host, path, start_wall_ns, end_wall_ns, "
				 "processes, ranks, bytes FROM recordings WHERE end_wall_ns IS NOT "
				 "NULL AND (?1 < 0 OR uid = ?1) ORDER BY start_wall_ns DESC, id DESC",
				 "i", index_row, &l, uid);
	return err;
}
