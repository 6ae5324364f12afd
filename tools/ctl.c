/*
 * shimmer ctl: the traced processes the daemon serves, and recording
 * switched on and off in them at run time (`status`, `pause`, `resume`,
 * `window DURATION`), for one process (--pid) or a whole job (--job).  The
 * daemon decides who may (the processes' owner, or root) and tells when
 * the command was in force in each process.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "conf.h"
#include "daemon.h"
#include "emit.h"
#include "fmt.h"

static const struct emit_col status_cols[] = {
	{ "pid", "PID", EMIT_INT, 7, 0, 0, 0 },
	{ "user", "USER", EMIT_STR, -8, 0, 0, 2 },
	{ "job", "JOB", EMIT_STR, -16, 0, 0, 2 },
	{ "rank", "RANK", EMIT_INT, 4, 0, 0, 2 },
	{ "state", "STATE", EMIT_STR, -9, 0, 0, 2 },
	{ "events", "EVENTS", EMIT_INT, 10, 0, 0, 2 },
	{ "events_per_s", "EVENTS/S", EMIT_REAL, 9, 0, 0, 2 },
	{ "dropped", "DROPPED", EMIT_INT, 9, 0, 0, 2 },
	{ "dropped_per_s", "DROPPED/S", EMIT_REAL, 9, 0, 0, 2 },
	{ "command", "COMMAND", EMIT_STR, -1, 0, 0, 2 },
};

static const struct emit_col acted_cols[] = {
	{ "pid", "PID", EMIT_INT, 7, 0, 0, 0 },
	{ "user", "USER", EMIT_STR, -8, 0, 0, 2 },
	{ "job", "JOB", EMIT_STR, -16, 0, 0, 2 },
	{ "acted_after_ns", "ACTED AFTER", EMIT_NS, 11, 0, 0, 2 },
	{ "note", "", EMIT_STR, -1, 0, 0, 2 },
};

#define NSTATUS (sizeof(status_cols) / sizeof(status_cols[0]))
#define NACTED (sizeof(acted_cols) / sizeof(acted_cols[0]))

static const struct emit_table status_table = { "processes", status_cols, NSTATUS, 0, 0 };
static const struct emit_table acted_table = { "processes", acted_cols, NACTED, 0, 0 };

struct out {
	struct emit e;
	const struct emit_table *table;
	unsigned n, none;
	int64_t slowest;
};

static const char *state_name(uint32_t s)
{
	if (!(s & SHM_STATE_CONTROL))
		return s & SHM_STATE_RECORDING ? "recording (no control)" : "paused (no control)";
	return s & SHM_STATE_RECORDING ? "recording" : "paused";
}

/* A table gets its heading with its first row; CSV and JSON have theirs
 * from the start. */
static void row(struct out *o, const struct emit_val *v)
{
	if (!o->n++ && o->e.fmt == EMIT_TABLE)
		emit_table_begin(&o->e, o->table);
	emit_row(&o->e, v);
}

static int status_row(void *ctx, const struct daemon_row *r)
{
	struct out *o = ctx;
	const struct shm_reply_process *m = &r->u.proc;
	char user[64], job[SHM_JOB_MAX + 1], exe[4097];

	if (r->kind != SHM_REPLY_PROCESS)
		return -EPROTO;
	snprintf(job, sizeof(job), "%.*s", (int)r->len[0], r->s[0]);
	snprintf(exe, sizeof(exe), "%.*s", (int)r->len[1], r->s[1]);
	{
		struct emit_val v[NSTATUS] = {
			ev_int(m->pid), ev_str(daemon_user_name(m->uid, user, sizeof(user))),
			ev_str(job), m->rank == SHM_NO_RANK ? ev_none() : ev_int(m->rank),
			ev_str(state_name(m->state)), ev_int((int64_t)m->events),
			ev_real(m->events_per_s), ev_int((int64_t)m->dropped),
			ev_real(m->dropped_per_s), ev_str(exe),
		};

		row(o, v);
	}
	return 0;
}

static int acted_row(void *ctx, const struct daemon_row *r)
{
	struct out *o = ctx;
	const struct shm_reply_acted *m = &r->u.acted;
	char user[64], job[SHM_JOB_MAX + 1];
	int acted = m->latency_ns >= 0;

	if (r->kind != SHM_REPLY_ACTED)
		return -EPROTO;
	snprintf(job, sizeof(job), "%.*s", (int)r->len[0], r->s[0]);
	if (acted && m->latency_ns > o->slowest)
		o->slowest = m->latency_ns;
	o->none += !acted;
	{
		struct emit_val v[NACTED] = {
			ev_int(m->pid), ev_str(daemon_user_name(m->uid, user, sizeof(user))),
			ev_str(job), acted ? ev_int(m->latency_ns) : ev_none(),
			ev_str(acted ? "" : "takes no commands"),
		};

		row(o, v);
	}
	return 0;
}

/* An answer to attach or detach has no rows. */
static int no_rows(void *ctx, const struct daemon_row *r)
{
	(void)ctx;
	(void)r;
	return -EPROTO;
}

/*
 * Where the verb is: the first operand, past the options and the values of
 * those that take one, whatever their order ("ctl --socket S attach PID"
 * is "ctl attach PID --socket S"); 0 when there is none.  attach and
 * detach take options of their own (attach_verb()), so the verb decides
 * which loop reads the line: valued[] lists the options of both that take
 * a separate value.
 */
static int verb_at(int argc, char **argv)
{
	static const char *const valued[] = { "--format", "--socket", "--job", "--pid", "--for",
					      NULL };

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			return i + 1 < argc ? i + 1 : 0;
		if (argv[i][0] != '-')
			return i;
		for (int k = 0; valued[k]; k++)
			if (!strcmp(argv[i], valued[k])) {
				i++;
				break;
			}
	}
	return 0;
}

/* attach PID [--for DURATION] [--heap] [--no-offcpu] | detach PID, the
 * verb argv[at]: the daemon's one line, on stdout when it did it, as the
 * error otherwise. */
static int attach_verb(int argc, char **argv, int at)
{
	struct cli_args a = CLI_ARGS(&ctl_command, argc, argv, NULL, 0);
	const char *sock = NULL, *verb = argv[at];
	int detach = !strcmp(verb, "detach"), heap = 0, no_offcpu = 0;
	uint64_t window = 0;
	uint32_t flags;
	int64_t pid = 0, v;
	char why[1200];
	int k, r, err;

	while ((k = cli_next(&a)) == CLI_ARG_OPTION || k == CLI_ARG_OPERAND) {
		if (a.i == at)
			continue;
		if (k == CLI_ARG_OPTION) {
			/* --pid PID is the operand PID: one process */
			if ((r = cli_pid_opt(&a, "--pid", &v)) > 0 && pid)
				return cli_usage_error(&ctl_command, "one process at a time"
						       " (--pid %lld)", (long long)v);
			if (r > 0)
				pid = v;
			if (r ||
			    (r = cli_string_opt(&a, "--socket", &sock)) ||
			    (!detach && (r = cli_duration_opt(&a, "--for", &window))) ||
			    (!detach && (r = cli_flag_opt(&a, "--heap", &heap))) ||
			    (!detach && (r = cli_flag_opt(&a, "--no-offcpu", &no_offcpu)))) {
				if (r < 0)
					return CLI_EXIT_USAGE;
				continue;
			}
			if (argv[a.i][0] == '-')
				return cli_unknown_opt(&a);
		}
		if (cli_pid_operand(&ctl_command, argv[a.i], &pid) < 0)
			return CLI_EXIT_USAGE;
	}
	if (k != CLI_ARG_END)
		return k;
	flags = (heap ? SHM_ATTACH_HEAP : 0) | (no_offcpu ? SHM_ATTACH_NO_OFFCPU : 0);
	if (pid <= 0 || pid > INT32_MAX)
		return cli_usage_error(&ctl_command, "%s needs a process id", verb);
	err = daemon_ask(daemon_socket(sock), detach ? SHM_REQ_DETACH : SHM_REQ_ATTACH,
			 (uint32_t)pid, window, flags, NULL, no_rows, NULL, why, sizeof(why));
	if (err) {
		cli_error("%s", why[0] ? why : strerror(-err));
		return CLI_EXIT_ERROR;
	}
	printf("%s\n", fmt_esc(why));
	return fflush(stdout) ? CLI_EXIT_ERROR : CLI_EXIT_OK;
}

static int ctl_main(int argc, char **argv)
{
	const char *sock = NULL, *job = NULL, *verb = NULL, *dur = NULL;
	struct cli_args a = CLI_ARGS(&ctl_command, argc, argv, NULL, 0);
	int64_t pid = 0;
	uint64_t window = 0;
	uint32_t op;
	char why[512];
	int fmt = EMIT_TABLE, at = verb_at(argc, argv), k, r, err;
	struct out o = { .n = 0 };
	char slow[FMT_UNIT_MAX];

	if (at && (!strcmp(argv[at], "attach") || !strcmp(argv[at], "detach")))
		return attach_verb(argc, argv, at);
	while ((k = cli_next(&a)) == CLI_ARG_OPTION || k == CLI_ARG_OPERAND) {
		if (k == CLI_ARG_OPTION) {
			if ((r = cli_format_opt(&a, emit_format_names, &fmt)) ||
			    (r = cli_string_opt(&a, "--socket", &sock)) ||
			    (r = cli_string_opt(&a, "--job", &job)) ||
			    (r = cli_pid_opt(&a, "--pid", &pid))) {
				if (r < 0)
					return CLI_EXIT_USAGE;
				continue;
			}
			if (argv[a.i][0] == '-')
				return cli_unknown_opt(&a);
		}
		if (!verb)
			verb = argv[a.i];
		else if (!strcmp(verb, "window") && !dur)
			dur = argv[a.i];
		else
			return cli_usage_error(&ctl_command, "unexpected argument '%s'", argv[a.i]);
	}
	if (k != CLI_ARG_END)
		return k;
	if (!verb)
		return cli_usage_error(&ctl_command, "no verb given (status, pause, resume, window, "
				       "attach, detach)");
	if (pid && job)
		return cli_usage_error(&ctl_command, "give --pid or --job, not both");
	if (!strcmp(verb, "status")) {
		op = SHM_REQ_STATUS;
	} else if (!strcmp(verb, "pause")) {
		op = SHM_REQ_PAUSE;
	} else if (!strcmp(verb, "resume")) {
		op = SHM_REQ_RESUME;
	} else if (!strcmp(verb, "window")) {
		op = SHM_REQ_WINDOW;
		if (!dur)
			return cli_usage_error(&ctl_command, "window needs a duration (10s, 500ms)");
		if (cli_duration(&ctl_command, "window", dur, &window) < 0)
			return CLI_EXIT_USAGE;
	} else {
		return cli_usage_error(&ctl_command, "unknown verb '%s'", verb);
	}
	if (op != SHM_REQ_STATUS && !pid && !job)
		return cli_usage_error(&ctl_command, "%s needs --pid PID or --job JOB", verb);
	o.table = op == SHM_REQ_STATUS ? &status_table : &acted_table;
	emit_init(&o.e, stdout, (enum emit_format)fmt);
	if (fmt != EMIT_TABLE)
		emit_table_begin(&o.e, o.table);
	err = daemon_ask(daemon_socket(sock), op, (uint32_t)pid, window, 0, job,
			 op == SHM_REQ_STATUS ? status_row : acted_row, &o, why, sizeof(why));
	if (o.n || fmt != EMIT_TABLE)
		emit_table_end(&o.e);
	if (op == SHM_REQ_STATUS && !o.n && !err)
		emit_text(&o.e, "no traced processes\n");
	if (op != SHM_REQ_STATUS && o.n > o.none)
		emit_text(&o.e, "%s: in force in %u of %u processes, the last after %s\n", verb,
			  o.n - o.none, o.n,
			  fmt_duration(slow, sizeof(slow), (double)o.slowest));
	if (emit_finish(&o.e) < 0)
		return CLI_EXIT_ERROR;
	if (err) {
		cli_error("%s", why[0] ? why : strerror(-err));
		return CLI_EXIT_ERROR;
	}
	return CLI_EXIT_OK;
}

const struct command ctl_command = {
	.name = "ctl",
	.brief = "traced processes at run time: status, pause, resume, window, attach",
	.usage =
		"usage: shimmer ctl status [--pid PID | --job JOB] [--format table|csv|json]\n"
		"       shimmer ctl pause|resume (--pid PID | --job JOB) [--format ...]\n"
		"       shimmer ctl window DURATION (--pid PID | --job JOB) [--format ...]\n"
		"       shimmer ctl attach PID [--for DURATION] [--heap] [--no-offcpu]\n"
		"       shimmer ctl detach PID\n"
		"\n"
		"Through the shimmerd service, without restarting anything.\n"
		"\n"
		"  status   the traced processes you own (root: all), with the job each\n"
		"           records into, its rank, whether it records or is paused,\n"
		"           events stored and dropped, in all and per second\n"
		"  pause    stop recording in the process, or in every process of the\n"
		"           job (the launcher and every worker); paused, a process pays\n"
		"           one branch per intercepted call\n"
		"  resume   record again\n"
		"  window   record for DURATION (500ms, 10s, 2m; seconds without a\n"
		"           unit; see docs/usage.md), then pause\n"
		"  attach   the daemon traces the running process PID (eBPF, as shimmer\n"
		"           attach does) into a recording of its owner's (job\n"
		"           attach:PID, in shimmer ls) until DURATION is over, PID exits,\n"
		"           shimmer ctl detach PID, or the daemon stops; --heap and\n"
		"           --no-offcpu as for shimmer attach.  Needs a daemon with\n"
		"           CAP_BPF and CAP_PERFMON (docs/service.md)\n"
		"  detach   end the daemon's attach to PID\n"
		"\n"
		"A command cancels what SHIMMER_START, SHIMMER_STOP and SHIMMER_DURATION\n"
		"had still planned.  Only a process's owner, or root, may command it,\n"
		"attach to it or detach from it.\n"
		"A command is in force in a process as soon as the daemon wrote it into\n"
		"its region (each is listed with how long that took): whatever the\n"
		"process does afterwards is recorded, or not, as it says.  A process\n"
		"that takes no commands (SHIMMER_CONTROL=0) makes the exit status 1.\n"
		"\n"
		"  --socket PATH   the daemon's socket (as for shimmer ls)\n",
	.main = ctl_main,
};
