/*
 * shimmer attach: trace a process that is already running, without
 * restarting it, through eBPF, into the same store and schema as shimmer
 * run.  The work is shimmerd's (--attach: collector/attach.c and bpfsrc.c),
 * started privately as for run: this command names the store, waits until
 * the probes are in, says what was attached, and when the window ends (the
 * collector then exits by itself), the process exits, or a signal comes
 * (SIGINT, SIGTERM, SIGHUP: the collector is told to detach by closing its
 * --parent-fd pipe), prints the summary on stderr.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "conf.h"
#include "fmt.h"
#include "model.h"
#include "spawn.h"
#include "summary.h"

#define READY_TIMEOUT_MS 60000

static volatile sig_atomic_t stop_fd = -1, stop_asked;

/* Closing the pipe is what tells the collector to detach; it is all a
 * handler may do (close is async-signal-safe). */
static void on_signal(int sig)
{
	(void)sig;
	stop_asked = 1;
	if (stop_fd >= 0) {
		close(stop_fd);
		stop_fd = -1;
	}
}

struct opts {
	int64_t pid;
	const char *db;
	uint64_t for_ns; /* 0: until stopped */
	int heap, no_offcpu;
};

/* 0 to go on; else -1 with *code the exit code (help or usage error). */
static int parse(struct opts *o, int argc, char **argv, int *code)
{
	struct cli_args a = CLI_ARGS(&attach_command, argc, argv, NULL, 0);
	int k, r;

	*code = CLI_EXIT_USAGE;
	while ((k = cli_next(&a)) == CLI_ARG_OPTION || k == CLI_ARG_OPERAND) {
		if (k == CLI_ARG_OPTION && ((r = cli_string_opt(&a, "--db", &o->db)) ||
					    (r = cli_duration_opt(&a, "--for", &o->for_ns)) ||
					    (r = cli_flag_opt(&a, "--heap", &o->heap)) ||
					    (r = cli_flag_opt(&a, "--no-offcpu", &o->no_offcpu)))) {
			if (r < 0)
				return -1;
			continue;
		}
		if (k == CLI_ARG_OPTION && argv[a.i][0] == '-') {
			cli_unknown_opt(&a);
			return -1;
		}
		if (cli_pid_operand(&attach_command, argv[a.i], &o->pid) < 0)
			return -1;
	}
	if (k != CLI_ARG_END) {
		*code = k;
		return -1;
	}
	if (!o->pid) {
		cli_usage_error(&attach_command, "no process id given");
		return -1;
	}
	if (o->db && !*o->db) {
		cli_usage_error(&attach_command, "--db needs a file name");
		return -1;
	}
	return 0;
}

/* The brief summary, as shimmer run prints it (it names the store); the
 * store's name alone when it cannot be read. */
static void print_summary(const struct spawn *sp)
{
	struct model_filter f = model_filter_all();
	struct summary_opts o;
	struct model *m = NULL;

	summary_opts_init(&o);
	o.brief = 1;
	o.path = sp->db;
	if (model_open(sp->db, &f, &m) == 0 && summary_write(m, stderr, &o) == 0) {
		model_close(m);
		return;
	}
	model_close(m);
	fprintf(stderr, "shimmer: store: %s\n", fmt_esc(sp->db));
}

static int attach_main(int argc, char **argv)
{
	struct opts o = { 0 };
	struct spawn sp;
	struct sigaction sa = { .sa_handler = on_signal };
	const char *args[12];
	char why[PATH_MAX + 256], pid[24], secs[32], forarg[32], bytes[32], probes[32];
	const char *sample = getenv("SHIMMER_SAMPLE_BYTES");
	uint64_t sample_n = 0;
	sigset_t block, mask;
	size_t n = 0;
	int rc, st, err;

	if (parse(&o, argc, argv, &rc) < 0)
		return rc;
	/* Read as the shim reads it (whole bytes, 1 to 2^40), so that one
	 * value means the same to both ways of tracing. */
	if (sample && *sample &&
	    (conf_count(sample, strlen(sample), 1ull << 40, &sample_n) < 0 || sample_n == 0)) {
		cli_error("SHIMMER_SAMPLE_BYTES wants a whole number of bytes from 1 to 2^40,"
			  " as the shim reads it, not '%s'", sample);
		return CLI_EXIT_USAGE;
	}
	if (kill((pid_t)o.pid, 0) < 0 && errno == ESRCH) {
		cli_error("no process %" PRId64, o.pid);
		return CLI_EXIT_ERROR;
	}
	spawn_init(&sp, o.db);
	if (spawn_find(&sp, why, sizeof(why)) || spawn_name_store(&sp, o.pid, why, sizeof(why))) {
		cli_error("%s", why);
		return CLI_EXIT_ERROR;
	}
	snprintf(pid, sizeof(pid), "%" PRId64, o.pid);
	snprintf(probes, sizeof(probes), "cuda%s%s", o.heap ? ",heap" : "",
		 o.no_offcpu ? "" : ",offcpu");
	args[n++] = "--attach";
	args[n++] = pid;
	args[n++] = "--probes";
	args[n++] = probes;
	if (o.for_ns) {
		/* Exact, in the unit shimmerd reads as well as this command. */
		snprintf(forarg, sizeof(forarg), "%" PRIu64 "ns", o.for_ns);
		snprintf(secs, sizeof(secs), "%.9g", (double)o.for_ns / 1e9);
		args[n++] = "--for";
		args[n++] = forarg;
	}
	if (sample && *sample) {
		snprintf(bytes, sizeof(bytes), "%s", sample);
		args[n++] = "--sample-bytes";
		args[n++] = bytes;
	}
	args[n] = NULL;

	/* The handlers see the pipe only once the collector holds it. */
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	sigprocmask(SIG_BLOCK, &block, &mask);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	err = spawn_start(&sp, args, &mask, READY_TIMEOUT_MS, why, sizeof(why));
	if (err) {
		sigprocmask(SIG_SETMASK, &mask, NULL);
		/* The collector said why (one line) when it exited early. */
		if (err != -ECHILD)
			cli_error("%s", why);
		spawn_remove_store(&sp);
		return CLI_EXIT_ERROR;
	}
	stop_fd = sp.stop;
	sp.stop = -1; /* the handler owns it now */
	fprintf(stderr, "shimmer: attached to %" PRId64 ": %s; detaching %s%s%swhen it exits or on ^C\n",
		o.pid, fmt_esc(sp.ready), o.for_ns ? "after " : "", o.for_ns ? secs : "",
		o.for_ns ? " s, " : "");
	sigprocmask(SIG_SETMASK, &mask, NULL);
	st = spawn_reap(sp.pid);
	sp.pid = 0;
	sigprocmask(SIG_BLOCK, &block, NULL);
	if (stop_fd >= 0) {
		close(stop_fd);
		stop_fd = -1;
	}
	sigprocmask(SIG_SETMASK, &mask, NULL);
	rc = CLI_EXIT_OK;
	if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		if (st >= 0 && WIFSIGNALED(st))
			cli_warn("the collector was killed by signal %d; the store may be incomplete",
				 WTERMSIG(st));
		else
			cli_warn("the collector exited with status %d; the store may be incomplete",
				 st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		rc = CLI_EXIT_ERROR;
	}
	print_summary(&sp);
	return rc;
}

const struct command attach_command = {
	.name = "attach",
	.brief = "trace a running process (eBPF) until ^C, a time limit or its exit",
	.usage =
		"usage: shimmer attach PID [--db FILE] [--for DURATION] [--heap] [--no-offcpu]\n"
		"\n"
		"Trace the running process PID without restarting it, into the same\n"
		"store as shimmer run: uprobes on its CUDA runtime (allocations, frees,\n"
		"copies, launches, synchronizations) and the CUDA driver's launches,\n"
		"and its threads' off-CPU time.  Each probed call costs about a\n"
		"microsecond or more (a uprobe and a uretprobe).  Detaches after\n"
		"DURATION, on ^C (SIGINT, SIGTERM, SIGHUP) or when PID exits, then\n"
		"prints the summary on stderr; PID never notices.  Needs root, or\n"
		"CAP_BPF and CAP_PERFMON (and CAP_SYS_PTRACE for another user's\n"
		"process).  Exits 0, 1 when it cannot attach, 2 for a usage error.\n"
		"\n"
		"  --db FILE       the store (default ./shimmer-HOST-PID-YYYYmmdd-HHMMSS.db)\n"
		"  --for DURATION  detach after DURATION (500ms, 30s, 2m, 1h, 1d; seconds\n"
		"                  when it has no unit; see docs/usage.md)\n"
		"  --heap          the malloc family too, byte-sampled as SHIMMER_SAMPLE_BYTES\n"
		"                  says (512 KiB by default): every malloc and free then\n"
		"                  pays the probes\n"
		"  --no-offcpu     no off-CPU time\n",
	.main = attach_main,
};
