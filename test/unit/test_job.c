/*
 * collector/job.c: recordings per (uid, job key) under a state directory,
 * the linger, the index, and retention (oldest first past max-size, past
 * max-age, never a live one), on real files.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "collector/job.h"
#include "collector/log.h"
#include "collector/store.h"
#include "clock_ns.h"

#define LINGER 1000000000ll

struct fixture {
	char dir[64];
	struct jobs *js;
	uint32_t uid;
};

static struct jobs *open_jobs(struct fixture *f, int64_t max_age, uint64_t max_bytes)
{
	struct jobs_conf c = { .state_dir = f->dir, .linger_ns = LINGER,
			       .max_age_ns = max_age, .max_bytes = max_bytes };

	return jobs_open(&c);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	log_level = LOG_LVL_ERROR - 1;
	strcpy(f->dir, "/tmp/shimmer-job-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	f->uid = (uint32_t)geteuid();
	f->js = open_jobs(f, 0, 0);
	assert_non_null(f->js);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];

	jobs_close(f->js);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

static int64_t mono(void)
{
	return (int64_t)clock_ns(CLOCK_MONOTONIC);
}

struct row {
	char job[64], path[256];
	int live;
	uint32_t procs;
	uint64_t bytes;
};

struct rows {
	struct row r[16];
	int n;
};

static int take(void *ctx, const struct job_recording *r)
{
	struct rows *l = ctx;
	struct row *o = &l->r[l->n++];

	snprintf(o->job, sizeof(o->job), "%s", r->job);
	snprintf(o->path, sizeof(o->path), "%s", r->path);
	o->live = r->live;
	o->procs = r->processes;
	o->bytes = r->bytes;
	return 0;
}

static struct rows list(struct jobs *js, int64_t uid)
{
	struct rows l = { .n = 0 };

	assert_int_equal(jobs_list(js, uid, take, &l), 0);
	return l;
}

/* A job of one process, pid, that left again; finished after the linger. */
static void one_job(struct fixture *f, const char *key, uint32_t pid)
{
	struct store_proc p = { .pid = pid, .uid = f->uid, .malloc_mode = "off",
				.rank = SHM_NO_RANK, .local_rank = SHM_NO_RANK,
				.sample_bytes = -1 };
	struct job *j;
	int64_t id;

	assert_int_equal(jobs_join(f->js, f->uid, pid, key, strlen(key), "h", 1, &j), 0);
	assert_int_equal(store_process_add(job_store(j), &p, &id), 0);
	job_leave(j, mono());
	assert_int_equal(jobs_tick(f->js, mono() + LINGER), 0);
	assert_null(jobs_find(f->js, f->uid, key, strlen(key)));
}

static void test_job_one_per_key(void **state)
{
	struct fixture *f = *state;
	struct job *a, *b, *c;
	struct stat sb;
	struct rows l;
	char dir[128];

	assert_int_equal(jobs_join(f->js, f->uid, 10, "slurm:1", 7, "h", 1, &a), 0);
	assert_int_equal(jobs_join(f->js, f->uid, 11, "slurm:1", 7, "h", 1, &b), 0);
	assert_int_equal(jobs_join(f->js, f->uid, 12, "slurm:2", 7, "h", 1, &c), 0);
	assert_ptr_equal(a, b);
	assert_ptr_not_equal(a, c);
	assert_ptr_equal(jobs_find(f->js, f->uid, "slurm:1", 7), a);
	assert_ptr_equal(jobs_find_pid(f->js, f->uid, 11), a);
	assert_ptr_equal(jobs_find_pid(f->js, f->uid, 12), c);
	assert_null(jobs_find_pid(f->js, f->uid, 13));
	assert_null(jobs_find_pid(f->js, f->uid + 1, 11));
	assert_string_equal(job_key(a), "slurm:1");
	l = list(f->js, -1);
	assert_int_equal(l.n, 2);
	assert_true(l.r[0].live && l.r[1].live);
	snprintf(dir, sizeof(dir), "%s/recordings/%u", f->dir, f->uid);
	assert_int_equal(stat(dir, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0711);
	assert_int_equal(strncmp(l.r[0].path, dir, strlen(dir)), 0);
	assert_int_equal(stat(l.r[0].path, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0600); /* our own: no group needed */
	assert_int_equal(list(f->js, f->uid + 1).n, 0);
}

/* Keys become printable ASCII; file names lose '/', ':' and a leading '.'. */
static void test_job_key_sanitized(void **state)
{
	struct fixture *f = *state;
	struct job *j;
	struct rows l;

	assert_int_equal(jobs_join(f->js, f->uid, 1, "../a b/\n:c", 10, "h", 1, &j), 0);
	assert_string_equal(job_key(j), "../a_b/_:c");
	l = list(f->js, -1);
	assert_non_null(strstr(l.r[0].path, "/_._a_b__-c-"));
	assert_null(strstr(l.r[0].path, "/../"));
}

static void test_job_linger(void **state)
{
	struct fixture *f = *state;
	struct job *j, *k;
	struct rows l;
	char wal[300];
	int64_t t;

	assert_int_equal(jobs_join(f->js, f->uid, 20, "pgid:5", 6, "h", 1, &j), 0);
	assert_int_equal(jobs_join(f->js, f->uid, 21, "pgid:5", 6, "h", 1, &k), 0);
	t = mono();
	job_leave(j, t);
	assert_int_equal(jobs_tick(f->js, t + 2 * LINGER), 0);
	assert_non_null(jobs_find(f->js, f->uid, "pgid:5", 6)); /* one process left */
	job_leave(k, t);
	assert_int_equal(jobs_tick(f->js, t + LINGER - 1), 0);
	assert_non_null(jobs_find(f->js, f->uid, "pgid:5", 6)); /* lingers */
	/* A child of the ended process still finds its job. */
	assert_ptr_equal(jobs_find_pid(f->js, f->uid, 21), k);
	assert_int_equal(jobs_tick(f->js, t + LINGER), 0);
	assert_null(jobs_find(f->js, f->uid, "pgid:5", 6));
	assert_null(jobs_find_pid(f->js, f->uid, 21));
	l = list(f->js, f->uid);
	assert_int_equal(l.n, 1);
	assert_false(l.r[0].live);
	snprintf(wal, sizeof(wal), "%s-wal", l.r[0].path);
	assert_int_equal(access(wal, F_OK), -1); /* finished: one file */
}

/* Finished recordings are listed from the index, with their processes. */
static void test_job_index(void **state)
{
	struct fixture *f = *state;
	struct rows l;

	one_job(f, "a", 1);
	one_job(f, "b", 2);
	jobs_close(f->js);
	f->js = open_jobs(f, 0, 0);
	assert_non_null(f->js);
	l = list(f->js, f->uid);
	assert_int_equal(l.n, 2);
	assert_string_equal(l.r[0].job, "b"); /* newest first */
	assert_string_equal(l.r[1].job, "a");
	assert_int_equal(l.r[0].procs, 1);
	assert_true(l.r[0].bytes > 0);
}

static void test_job_retention_size_oldest_first(void **state)
{
	struct fixture *f = *state;
	struct rows l;
	uint64_t keep;

	one_job(f, "first", 1);
	usleep(2000);
	one_job(f, "second", 2);
	usleep(2000);
	one_job(f, "third", 3);
	l = list(f->js, f->uid);
	assert_int_equal(l.n, 3);
	assert_string_equal(l.r[2].job, "first");
	/* Room for two: the oldest goes, whatever the sizes. */
	keep = l.r[0].bytes + l.r[1].bytes;
	jobs_close(f->js);
	f->js = open_jobs(f, 0, keep);
	assert_non_null(f->js);
	l = list(f->js, f->uid);
	assert_int_equal(l.n, 2);
	assert_string_equal(l.r[0].job, "third");
	assert_string_equal(l.r[1].job, "second");
}

static void test_job_retention_age_spares_live(void **state)
{
	struct fixture *f = *state;
	struct job *live;
	struct rows l;
	char old[256];

	one_job(f, "old", 1);
	l = list(f->js, f->uid);
	snprintf(old, sizeof(old), "%s", l.r[0].path);
	jobs_close(f->js);
	/* Everything finished is past a 1 ns age. */
	f->js = open_jobs(f, 1, 0);
	assert_non_null(f->js);
	assert_int_equal(list(f->js, f->uid).n, 0);
	assert_int_equal(access(old, F_OK), -1);
	/* A live recording is never removed: retention runs as another
	 * finishes (and is removed at once). */
	assert_int_equal(jobs_join(f->js, f->uid, 5, "live", 4, "h", 1, &live), 0);
	one_job(f, "gone", 6);
	l = list(f->js, f->uid);
	assert_int_equal(l.n, 1);
	assert_string_equal(l.r[0].job, "live");
	assert_true(l.r[0].live);
	assert_int_equal(access(l.r[0].path, F_OK), 0);
}

/* Another user's recording: made for them (as root: CAP_CHOWN), group
 * ours, 0660; without the capability refused as -EPERM. */
static void test_job_other_user(void **state)
{
	struct fixture *f = *state;
	struct job *j;
	struct stat sb;
	struct rows l;
	int err = jobs_join(f->js, 4242, 1, "x", 1, "h", 1, &j);

	if (geteuid() != 0) {
		assert_int_equal(err, -EPERM);
		assert_int_equal(list(f->js, 4242).n, 0);
		return;
	}
	assert_int_equal(err, 0);
	l = list(f->js, 4242);
	assert_int_equal(l.n, 1);
	assert_int_equal(stat(l.r[0].path, &sb), 0);
	assert_int_equal(sb.st_uid, 4242);
	assert_int_equal(sb.st_gid, getegid());
	assert_int_equal(sb.st_mode & 07777, 0660);
	assert_int_equal(list(f->js, f->uid).n, 0);
	assert_int_equal(list(f->js, -1).n, 1);
}

/* One user holds at most 64 live recordings; others are not held back. */
static void test_job_per_user_limit(void **state)
{
	struct fixture *f = *state;
	struct job *j;
	char key[16];

	for (int i = 0; i < 64; i++) {
		snprintf(key, sizeof(key), "j%d", i);
		assert_int_equal(jobs_join(f->js, f->uid, (uint32_t)i + 1, key, strlen(key), "h", 1,
					   &j), 0);
	}
	assert_int_equal(jobs_join(f->js, f->uid, 100, "one-more", 8, "h", 1, &j), -EPERM);
	/* an existing job still takes processes */
	assert_int_equal(jobs_join(f->js, f->uid, 101, "j3", 2, "h", 1, &j), 0);
	if (geteuid() == 0)
		assert_int_equal(jobs_join(f->js, 4243, 102, "other", 5, "h", 1, &j), 0);
}

/* ---- a daemon that crashed, and its processes that come back ---- */

#define START 5000

/*
 * A daemon that dies (its process exits without closing anything, as a
 * SIGKILL leaves it) while job "train" records: pid 100 of ours (started
 * at START) and pid 200, a row of uid + 1 in our recording (no client can
 * make one; here to show the recording's owner is checked too), both live;
 * pid 300 ended in order.  Then the next daemon starts on the state
 * directory (max_bytes: its retention).  Returns the recording's path.
 */
static void crash(struct fixture *f, uint64_t max_bytes, char *path, size_t len)
{
	struct rows l;
	pid_t child;
	int status;

	jobs_close(f->js);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		struct jobs *js = open_jobs(f, 0, 0);
		struct store_proc p = { .uid = f->uid, .host = "h", .host_len = 1,
					.malloc_mode = "off", .rank = SHM_NO_RANK,
					.local_rank = SHM_NO_RANK, .sample_bytes = -1,
					.start_ns = START };
		struct job *j;
		int64_t id;
		int err = !js || jobs_join(js, f->uid, 100, "train", 5, "h", 1, &j);

		p.pid = 100;
		err = err || store_process_add(job_store(j), &p, &id);
		p.pid = 200;
		p.uid = f->uid + 1;
		err = err || store_process_add(job_store(j), &p, &id);
		p.pid = 300;
		p.uid = f->uid;
		err = err || store_process_add(job_store(j), &p, &id) ||
		      store_process_end(job_store(j), id, START + 1, "exit", 0) ||
		      jobs_commit(js);
		_exit(err);
	}
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	f->js = open_jobs(f, 0, max_bytes);
	assert_non_null(f->js);
	if (max_bytes)
		return;
	l = list(f->js, f->uid);
	assert_int_equal(l.n, 1);
	assert_false(l.r[0].live); /* finished at the start */
	snprintf(path, len, "%s", l.r[0].path);
}

static int resume(struct fixture *f, uint32_t uid, uint32_t pid, const char *host,
		  int64_t start, struct job **j, char *why)
{
	return jobs_resume(f->js, uid, pid, host, start, j, why, 256);
}

/* Only the lost process itself, of its user, in its user's recording,
 * continues it: the recording is live again, later processes of the job
 * join it, and it is finished again when the last one left. */
static void test_job_resume(void **state)
{
	struct fixture *f = *state;
	struct job *j, *k;
	struct rows l;
	char path[256], wal[300], why[256];
	int64_t id;

	crash(f, 0, path, sizeof(path));
	/* another user; a row of another user's in ours; an orderly end;
	 * another start; another host */
	assert_int_equal(resume(f, f->uid + 1, 200, "h", START, &j, why), 0);
	assert_null(j);
	assert_string_equal(why, ""); /* not even found */
	assert_int_equal(resume(f, f->uid, 200, "h", START, &j, why), 0);
	assert_null(j);
	assert_string_equal(why, "");
	assert_int_equal(resume(f, f->uid, 300, "h", START, &j, why), 0);
	assert_null(j);
	assert_string_equal(why, "");
	assert_int_equal(resume(f, f->uid, 100, "h", START + 1, &j, why), 0);
	assert_null(j);
	assert_string_equal(why, "");
	assert_int_equal(resume(f, f->uid, 100, "g", START, &j, why), 0);
	assert_null(j);
	assert_string_equal(why, "");
	assert_int_equal(list(f->js, -1).n, 1);
	assert_false(list(f->js, -1).r[0].live);
	snprintf(wal, sizeof(wal), "%s-wal", path);
	assert_int_equal(access(wal, F_OK), -1);

	/* the process itself: its recording live again, its row resumable */
	assert_int_equal(resume(f, f->uid, 100, "h", START, &j, why), 0);
	assert_non_null(j);
	assert_string_equal(job_key(j), "train");
	assert_ptr_equal(jobs_find_pid(f->js, f->uid, 100), j);
	assert_int_equal(store_process_resume(job_store(j), 100, f->uid, "h", 1, START, &id), 0);
	assert_int_equal(id, 1);
	l = list(f->js, -1);
	assert_int_equal(l.n, 1);
	assert_true(l.r[0].live);
	assert_string_equal(l.r[0].path, path);
	assert_int_equal(access(wal, F_OK), 0);
	/* once only */
	assert_int_equal(resume(f, f->uid, 100, "h", START, &k, why), 0);
	assert_null(k);
	/* a later process of the job joins it */
	assert_int_equal(jobs_join(f->js, f->uid, 101, "train", 5, "h", 1, &k), 0);
	assert_ptr_equal(k, j);
	job_leave(j, mono());
	job_leave(k, mono());
	assert_int_equal(jobs_tick(f->js, mono() + LINGER), 0);
	l = list(f->js, -1);
	assert_int_equal(l.n, 1);
	assert_false(l.r[0].live);
	assert_int_equal(l.r[0].procs, 3);
	assert_int_equal(access(wal, F_OK), -1);
	assert_null(jobs_find(f->js, f->uid, "train", 5));
}

/* A recording that cannot be continued: a reader holds it (it may read
 * the file immutable), then its file is gone.  Refused, said, the file
 * left as it was. */
static void test_job_resume_refused(void **state)
{
	struct fixture *f = *state;
	struct job *j;
	char path[256], wal[300], why[256];
	struct stat before, after;
	int fd;

	crash(f, 0, path, sizeof(path));
	snprintf(wal, sizeof(wal), "%s-wal", path);
	assert_int_equal(stat(path, &before), 0);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(flock(fd, LOCK_SH), 0);
	assert_int_equal(resume(f, f->uid, 100, "h", START, &j, why), 0);
	assert_null(j);
	assert_non_null(strstr(why, "a reader holds it"));
	assert_int_equal(access(wal, F_OK), -1);
	assert_int_equal(stat(path, &after), 0);
	assert_int_equal(before.st_mtim.tv_sec, after.st_mtim.tv_sec);
	assert_int_equal(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec);
	assert_false(list(f->js, -1).r[0].live);
	close(fd);
	/* gone: forgotten, as at the start */
	assert_int_equal(unlink(path), 0);
	assert_int_equal(resume(f, f->uid, 100, "h", START, &j, why), 0);
	assert_null(j);
	assert_non_null(strstr(why, "is gone"));
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(list(f->js, -1).n, 0);
}

/* Retention removes a finished recording whose processes may still come
 * back: they are refused, and the index keeps nothing of them. */
static void test_job_resume_after_retention(void **state)
{
	struct fixture *f = *state;
	struct job *j;
	char index[128], why[256];
	sqlite3 *db;
	sqlite3_stmt *st;

	crash(f, 1, NULL, 0);
	assert_int_equal(list(f->js, -1).n, 0);
	assert_int_equal(resume(f, f->uid, 100, "h", START, &j, why), 0);
	assert_null(j);
	assert_string_equal(why, "");
	snprintf(index, sizeof(index), "%s/index.db", f->dir);
	assert_int_equal(sqlite3_open_v2(index, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*) FROM lost", -1, &st, NULL),
			 SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int(st, 0), 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_job_one_per_key, setup, teardown),
		cmocka_unit_test_setup_teardown(test_job_key_sanitized, setup, teardown),
		cmocka_unit_test_setup_teardown(test_job_linger, setup, teardown),
		cmocka_unit_test_setup_teardown(test_job_index, setup, teardown),
		cmocka_unit_test_setup_teardown(test_job_retention_size_oldest_first, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_job_retention_age_spares_live, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_job_other_user, setup, teardown),
		cmocka_unit_test_setup_teardown(test_job_per_user_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_job_resume, setup, teardown),
		cmocka_unit_test_setup_teardown(test_job_resume_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_job_resume_after_retention, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
