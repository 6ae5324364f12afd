/*
 * shimmer run: trace one program from its first call to its exit with a
 * private collector, then print the summary on stderr.  It needs no
 * running daemon, and stdout stays the program's alone.
 *
 * The order matters:
 *  1. Fork the program's process first, paused on a pipe: the store is
 *     named after its pid, and it must not make one call before the
 *     collector listens.
 *  2. Start shimmerd in a process group of its own, so that ^C on the
 *     terminal reaches the program but not the collector, which must
 *     outlive the program to drain its rings; wait (bounded) for its
 *     ready byte.
 *  3. Release the program with 'T' (traced: LD_PRELOAD and SHIMMER_SOCKET
 *     are set) or 'U' (untraced, when the collector could not start).  A
 *     close-on-exec pipe carries execvp's errno back when the exec fails.
 *  4. Wait for it; like time(1), ignore SIGINT and SIGQUIT meanwhile and
 *     forward SIGTERM and SIGHUP.
 *  5. Close the collector's --parent-fd pipe and wait: it drains what is
 *     left and closes the store.  (If shimmer itself is killed, the pipe
 *     closes all the same and the collector goes with it.)  When it failed
 *     (a full disk), end what it left live as a next collector would.
 *     Then note the program's exit status in the store and summarise.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "fmt.h"
#include "lost.h"
#include "model.h"
#include "spawn.h"
#include "store.h"
#include "summary.h"

/* Last: its EV_* macros would clash with emit.h's names. */
#include <elf.h>

#define READY_TIMEOUT_MS 10000
#define SOCK_NAME "shimmer.sock"

struct run {
	char **cmd;
	const char *db_opt;
	struct spawn sp;         /* the collector and its store */
	char lib[PATH_MAX];
	char sock_dir[PATH_MAX]; /* empty when none was made */
	char sock[sizeof(((struct sockaddr_un *)0)->sun_path)];
	pid_t child;
	int64_t before;  /* the store's last proc_id before this run: an
	                  * existing --db holds other runs' processes */
	int go[2];       /* releases the paused child */
	int exec_err[2]; /* the child's execvp errno, or EOF on success */
};

static volatile sig_atomic_t forward_to;

static void forward(int sig)
{
	if (forward_to > 0)
		kill((pid_t)forward_to, sig);
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* The program's side of the fork: wait for the verdict, then exec. */
static void __attribute__((noreturn)) child_main(struct run *r, const sigset_t *mask)
{
	char mode = 0;
	ssize_t n;
	int e;

	sigprocmask(SIG_SETMASK, mask, NULL);
	close(r->go[1]);
	close(r->exec_err[0]);
	do
		n = read(r->go[0], &mode, 1);
	while (n < 0 && errno == EINTR);
	/* EOF: shimmer died before deciding, so run nothing. */
	if (n != 1)
		_exit(127);
	if (mode == 'T') {
		const char *old = getenv("LD_PRELOAD");
		char *pre = NULL;

		if (old && *old && asprintf(&pre, "%s:%s", r->lib, old) < 0)
			pre = NULL;
		setenv("LD_PRELOAD", pre ? pre : r->lib, 1);
		setenv("SHIMMER_SOCKET", r->sock, 1);
	}
	execvp(r->cmd[0], r->cmd);
	e = errno;
	n = write(r->exec_err[1], &e, sizeof(e));
	(void)n;
	_exit(e == EACCES || e == EPERM ? 126 : 127);
}

/* A private directory for the socket, in XDG_RUNTIME_DIR when it fits. */
static int make_sock_dir(struct run *r)
{
	const char *bases[] = { getenv("XDG_RUNTIME_DIR"), "/tmp" };
	int err = -ENOENT;

	for (size_t i = 0; i < 2; i++) {
		if (!bases[i] || !*bases[i])
			continue;
		if ((size_t)snprintf(r->sock_dir, sizeof(r->sock_dir), "%s/shimmer-XXXXXX",
				     bases[i]) >= sizeof(r->sock_dir) ||
		    strlen(r->sock_dir) + 1 + strlen(SOCK_NAME) >= sizeof(r->sock)) {
			err = -ENAMETOOLONG;
			continue;
		}
		if (!mkdtemp(r->sock_dir)) {
			err = -errno;
			continue;
		}
		snprintf(r->sock, sizeof(r->sock), "%s/%s", r->sock_dir, SOCK_NAME);
		return 0;
	}
	r->sock_dir[0] = '\0';
	return err;
}

/*
 * What the program's process must know before the fork: the shim and the
 * socket.  On failure writes why into `why` and returns a negative errno.
 */
static int prepare_trace(struct run *r, char *why, size_t len)
{
	int err = spawn_find(&r->sp, why, len);

	if (err)
		return err;
	if ((size_t)snprintf(r->lib, sizeof(r->lib), "%s/../lib/libshimmer.so", r->sp.dir) >=
	    sizeof(r->lib)) {
		snprintf(why, len, "cannot find the shimmer installation: %s",
			 strerror(ENAMETOOLONG));
		return -ENAMETOOLONG;
	}
	if (access(r->lib, R_OK) < 0) {
		err = -errno;
		snprintf(why, len, "cannot use %s: %s", r->lib, strerror(errno));
		return err;
	}
	err = make_sock_dir(r);
	if (err)
		snprintf(why, len, "cannot make a socket directory: %s", strerror(-err));
	return err;
}

static void remove_sock_dir(struct run *r)
{
	if (!r->sock_dir[0])
		return;
	unlink(r->sock);
	rmdir(r->sock_dir);
	r->sock_dir[0] = '\0';
}

/*
 * What the collector could not write, written once it has gone, in one
 * transaction: both parts are done or neither (a full disk used to let the
 * first through and fail the second, with one warning for half a write;
 * a row left as it was is what a next collector ends, as store_recover()
 * does).  We made the store and the collector is gone, so these are the
 * only writes the tools make.
 *
 * lost: the collector failed (a full disk, a crash) and left the rows of
 * the processes it served with no end; read later they would say "still
 * running" and their figures would look whole.  No other collector will
 * open this store to end them, so do what one would (common/lost.h, as
 * store_recover() in collector/store.c): end them as 'collector_lost' at its last commit,
 * which the commands read as a recording cut short.  Only when no one
 * else holds the store's flock(): a collector that shares the store (a
 * --db given to two runs) has live processes of its own in it.
 *
 * st: the program's wait status, into its processes row (the latest with
 * its pid: an exec'd program keeps it; of this run: an earlier run's
 * process in the same --db may have had the pid): exit_status, or end_signal for a
 * signal the shim could not see (SIGKILL), which also makes a
 * 'disconnect' a 'signal'.  Nothing when st < 0.
 */
static void finish_store(struct run *r, int st, int lost)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *q = NULL;
	int fd = -1, rc;

	if (lost) {
		fd = open(r->sp.db, O_RDONLY | O_CLOEXEC);
		if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0) {
			close(fd);
			fd = -1;
		}
		lost = fd >= 0;
	}
	if (!lost && st < 0)
		return;
	rc = sqlite3_open_v2(r->sp.db, &db, SQLITE_OPEN_READWRITE, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
	if (rc == SQLITE_OK && lost)
		rc = sqlite3_exec(db, LOST_END_SQL, NULL, NULL, NULL);
	if (rc == SQLITE_OK && st >= 0)
		rc = sqlite3_prepare_v2(db, "UPDATE processes SET exit_status = ?2, "
					"end_signal = coalesce(end_signal, ?3), end_reason = CASE "
					"WHEN ?3 IS NOT NULL AND end_reason = 'disconnect' THEN "
					"'signal' ELSE end_reason END WHERE proc_id = (SELECT "
					"max(proc_id) FROM processes WHERE pid = ?1 AND proc_id > ?4)",
					-1, &q, NULL);
	if (rc == SQLITE_OK && q) {
		sqlite3_bind_int64(q, 1, r->child);
		sqlite3_bind_int64(q, 4, r->before);
		if (WIFEXITED(st))
			sqlite3_bind_int(q, 2, WEXITSTATUS(st));
		if (WIFSIGNALED(st))
			sqlite3_bind_int(q, 3, WTERMSIG(st));
		rc = sqlite3_step(q);
		if (rc == SQLITE_DONE)
			rc = SQLITE_OK;
	}
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		cli_warn("cannot %s in %s: %s", lost && st >= 0 ?
			 "end the processes the collector left live and note the exit status" :
			 lost ? "end the processes the collector left live" :
			 "note the exit status", r->sp.db,
			 db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
		if (db && !sqlite3_get_autocommit(db))
			sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	}
	sqlite3_finalize(q);
	sqlite3_close(db);
	if (fd >= 0)
		close(fd);
}

/* Whether the file exec would run for cmd has no program interpreter
 * (PT_INTERP): a static binary, which LD_PRELOAD cannot reach. */
static int is_static(const char *cmd)
{
	char path[PATH_MAX];
	const char *dirs = strchr(cmd, '/') ? "" : getenv("PATH");
	Elf64_Ehdr eh;
	int fd = -1, interp = 0;

	for (const char *d = dirs ? dirs : "/usr/bin:/bin"; fd < 0;) {
		size_t n = strcspn(d, ":");

		if (strchr(cmd, '/'))
			snprintf(path, sizeof(path), "%s", cmd);
		else
			snprintf(path, sizeof(path), "%.*s/%s", (int)n, n ? d : ".", cmd);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (strchr(cmd, '/') || !d[n])
			break;
		d += n + 1;
	}
	if (fd < 0 || pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	for (unsigned i = 0; i < eh.e_phnum && !interp; i++) {
		Elf64_Phdr ph;

		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + (uint64_t)i * eh.e_phentsize)) !=
		    sizeof(ph))
			break;
		interp = ph.p_type == PT_INTERP;
	}
	close(fd);
	return !interp;
}

static const char *status_text(int st, char *buf, size_t len)
{
	if (st >= 0 && WIFSIGNALED(st))
		snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(st),
			 sigdescr_np(WTERMSIG(st)) ? sigdescr_np(WTERMSIG(st)) : "unknown");
	else if (st >= 0 && WIFEXITED(st))
		snprintf(buf, len, "exit status %d", WEXITSTATUS(st));
	else
		snprintf(buf, len, "status unknown");
	return buf;
}

/*
 * The last proc_id of an existing store, before this run adds any: the
 * processes after it that are (or descend from) the program's are this
 * run's.  0 when there is none or it cannot be read (the collector then
 * says why, or makes the store).
 */
static int64_t last_proc_id(const char *path)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *q = NULL;
	int64_t id = 0;

	if (store_connect(path, &db) == SQLITE_OK &&
	    sqlite3_prepare_v2(db, "SELECT coalesce(max(proc_id), 0) FROM processes", -1, &q,
			       NULL) == SQLITE_OK &&
	    sqlite3_step(q) == SQLITE_ROW)
		id = sqlite3_column_int64(q, 0);
	sqlite3_finalize(q);
	sqlite3_close(db);
	return id;
}

/* How the command ended (and why nothing was traced, when nothing was),
 * then the brief summary of this run's processes alone (a --db store may
 * hold other runs', earlier or at the same time), which ends by naming the
 * store and what to run next; the store's name alone when it cannot be
 * read. */
static void print_summary(struct run *r, int st, int collector_failed)
{
	struct model_filter f = model_filter_all();
	struct summary_opts o;
	struct model *m = NULL;
	char how[128];
	long procs = -1;

	/* A store we made is this run's alone: no condition (a child of
	 * an untraced grandchild of CMD is this run's too).  An existing
	 * one holds other runs': this run's tree only. */
	if (!r->sp.db_is_ours) {
		f.after_proc_id = r->before;
		f.root_pid = r->child;
	}
	if (model_open(r->sp.db, &f, &m) == 0)
		procs = (long)model_nselected(m);
	if (procs == 0 && collector_failed)
		cli_warn("the collector failed before it stored any process of %s (its "
			 "message above says why)", r->cmd[0]);
	else if (procs == 0)
		cli_warn(is_static(r->cmd[0]) ?
			 "%s is statically linked: LD_PRELOAD cannot reach it, so nothing was "
			 "traced (link it dynamically to profile it)" :
			 "no process of %s was traced: it may have cleared LD_PRELOAD, or be "
			 "setuid (the loader then ignores LD_PRELOAD)", r->cmd[0]);
	fprintf(stderr, "shimmer: %s: %s\n", fmt_esc(r->cmd[0]), status_text(st, how, sizeof(how)));
	summary_opts_init(&o);
	o.brief = 1;
	o.path = r->sp.db;
	if (m && summary_write(m, stderr, &o) == 0) {
		model_close(m);
		return;
	}
	model_close(m);
	fprintf(stderr, "shimmer: store: %s\n", fmt_esc(r->sp.db));
}

/* 0 to go on; else -1 with *code the exit code (help or usage error). */
static int parse(struct run *r, int argc, char **argv, int *code)
{
	struct cli_args a = CLI_ARGS(&run_command, argc, argv, NULL, 0);
	int k;

	*code = CLI_EXIT_USAGE;
	/* The options end at "--" or at the command, the first operand. */
	while ((k = cli_next(&a)) == CLI_ARG_OPTION) {
		int got = cli_string_opt(&a, "--db", &r->db_opt);

		if (got < 0)
			return -1;
		if (got)
			continue;
		if (argv[a.i][0] == '-') {
			cli_unknown_opt(&a);
			return -1;
		}
		break;
	}
	if (k >= 0) {
		*code = k;
		return -1;
	}
	if (k == CLI_ARG_END) {
		cli_usage_error(&run_command, "no command given");
		return -1;
	}
	if (r->db_opt && !*r->db_opt) {
		cli_usage_error(&run_command, "--db needs a file name");
		return -1;
	}
	r->cmd = argv + a.i;
	return 0;
}

static int run_main(int argc, char **argv)
{
	struct run r = {
		.go = { -1, -1 },
		.exec_err = { -1, -1 },
	};
	struct sigaction fwd = { .sa_handler = forward, .sa_flags = SA_RESTART }, old;
	sigset_t block, mask;
	char why[PATH_MAX + 256];
	int rc, st, e = 0, traced;
	ssize_t n;

	if (parse(&r, argc, argv, &rc) < 0)
		return rc;
	spawn_init(&r.sp, r.db_opt);
	rc = prepare_trace(&r, why, sizeof(why));
	traced = rc == 0;
	if (pipe2(r.go, O_CLOEXEC) < 0 || pipe2(r.exec_err, O_CLOEXEC) < 0) {
		cli_error("cannot make a pipe: %s", strerror(errno));
		rc = CLI_EXIT_ERROR;
		goto out;
	}
	/* Hold SIGTERM/SIGHUP until the forwarding handler knows the pid. */
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	sigprocmask(SIG_BLOCK, &block, &mask);
	r.child = fork();
	if (r.child < 0) {
		cli_error("cannot fork: %s", strerror(errno));
		sigprocmask(SIG_SETMASK, &mask, NULL);
		rc = CLI_EXIT_ERROR;
		goto out;
	}
	if (r.child == 0)
		child_main(&r, &mask);
	close_fd(&r.go[0]);
	close_fd(&r.exec_err[1]);
	forward_to = r.child;
	sigemptyset(&fwd.sa_mask);
	/* A signal the caller chose to ignore (nohup) stays ignored. */
	if (sigaction(SIGTERM, NULL, &old) == 0 && old.sa_handler != SIG_IGN)
		sigaction(SIGTERM, &fwd, NULL);
	if (sigaction(SIGHUP, NULL, &old) == 0 && old.sa_handler != SIG_IGN)
		sigaction(SIGHUP, &fwd, NULL);
	signal(SIGINT, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	/* A child killed while paused must not take us down with EPIPE. */
	signal(SIGPIPE, SIG_IGN);
	sigprocmask(SIG_SETMASK, &mask, NULL);

	if (traced && spawn_name_store(&r.sp, (long)r.child, why, sizeof(why)) < 0)
		traced = 0;
	if (traced && !r.sp.db_is_ours)
		r.before = last_proc_id(r.sp.db);
	if (traced) {
		const char *args[] = { "--socket", r.sock, NULL };

		traced = spawn_start(&r.sp, args, &mask, READY_TIMEOUT_MS, why, sizeof(why)) == 0;
	}
	if (!traced) {
		cli_warn("%s; running %s untraced", why, r.cmd[0]);
		remove_sock_dir(&r);
		spawn_remove_store(&r.sp);
	}
	n = write(r.go[1], traced ? "T" : "U", 1);
	(void)n;
	close_fd(&r.go[1]);
	do
		n = read(r.exec_err[0], &e, sizeof(e));
	while (n < 0 && errno == EINTR);
	st = spawn_reap(r.child);
	forward_to = 0;
	signal(SIGINT, SIG_DFL);
	signal(SIGQUIT, SIG_DFL);
	if (n == (ssize_t)sizeof(e)) {
		cli_error("cannot run %s: %s", r.cmd[0], strerror(e));
		spawn_stop(&r.sp);
		spawn_remove_store(&r.sp);
		rc = e == EACCES || e == EPERM ? 126 : 127;
		goto out;
	}
	if (traced) {
		int cst = spawn_stop(&r.sp), failed = cst >= 0 && cst != 0;

		finish_store(&r, st, failed);
		print_summary(&r, st, failed);
	}
	if (st < 0)
		rc = CLI_EXIT_ERROR;
	else if (WIFSIGNALED(st))
		rc = 128 + WTERMSIG(st);
	else
		rc = WEXITSTATUS(st);
out:
	remove_sock_dir(&r);
	close_fd(&r.go[0]);
	close_fd(&r.go[1]);
	close_fd(&r.exec_err[0]);
	close_fd(&r.exec_err[1]);
	return rc;
}

const struct command run_command = {
	.name = "run",
	.brief = "run a program under the profiler and print its summary",
	.usage =
		"usage: shimmer run [--db FILE] [--] CMD [ARGS...]\n"
		"\n"
		"Run CMD with the shim preloaded and a private collector, which needs\n"
		"no running daemon.  When CMD exits, print its summary and the store's\n"
		"name on stderr; stdout stays CMD's.  Exits with CMD's status (128 + N\n"
		"when killed by signal N); 127 when CMD is not found, 126 when it cannot\n"
		"be executed; 2 for a usage error.  ^C and ^\\ go to CMD only; SIGTERM\n"
		"and SIGHUP are forwarded to it.  When the collector cannot start, CMD\n"
		"runs untraced, with a warning.\n"
		"\n"
		"  --db FILE   the store (default ./shimmer-HOST-PID-YYYYmmdd-HHMMSS.db)\n",
	.main = run_main,
};
