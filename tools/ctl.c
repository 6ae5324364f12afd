/*
 * shimmer ctl: the traced processes the daemon serves, and recording
 * switched on and off in them at run time (`status`, `pause`, `resume`,
 * `window DURATION`), for one process (--pid) or a whole job (--job).  The
 * daemon decides who may (the processes' owner, or root) and tells how
 * fast each process acted.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "conf.h"
#include "daemon.h"
#include "fmt.h"
#include "rows.h"

static const struct rows_col status_cols[] = {
	{ "pid", 1, 0 },      { "user", 0, 0 },    { "job", 0, 0 },      { "rank", 1, 0 },
	{ "state", 0, 0 },    { "events", 1, 0 },  { "events/s", 1, 0 }, { "dropped", 1, 0 },
	{ "dropped/s", 1, 0 }, { "command", 0, 0 },
};

static const struct rows_col acted_cols[] = {
	{ "pid", 1, 0 }, { "user", 0, 0 }, { "job", 0, 0 }, { "acted_after", 1, 0 },
};

#define NSTATUS (int)(sizeof(status_cols) / sizeof(status_cols[0]))
#define NACTED (int)(sizeof(acted_cols) / sizeof(acted_cols[0]))

static const char *state_name(uint32_t s)
{
	if (!(s & SHM_STATE_CONTROL))
		return s & SHM_STATE_RECORDING ? "recording (no control)" : "paused (no control)";
	return s & SHM_STATE_RECORDING ? "recording" : "paused";
}

static int status_row(void *ctx, const struct daemon_row *r)
{
	struct rows *t = ctx;
	const struct shm_reply_process *m = &r->u.proc;
	char pid[16], user[64], job[SHM_JOB_MAX + 1], rank[16], ev[24], evs[24], dr[24],
		drs[24], exe[4097], raw_evs[32], raw_drs[32];

	if (r->kind != SHM_REPLY_PROCESS)
		return -EPROTO;
	snprintf(pid, sizeof(pid), "%u", m->pid);
	daemon_user_name(m->uid, user, sizeof(user));
	snprintf(job, sizeof(job), "%.*s", (int)r->len[0], r->s[0]);
	snprintf(exe, sizeof(exe), "%.*s", (int)r->len[1], r->s[1]);
	if (m->rank == SHM_NO_RANK)
		rank[0] = 0;
	else
		snprintf(rank, sizeof(rank), "%d", m->rank);
	snprintf(ev, sizeof(ev), "%" PRIu64, m->events);
	snprintf(dr, sizeof(dr), "%" PRIu64, m->dropped);
	snprintf(evs, sizeof(evs), "%.0f", m->events_per_s);
	snprintf(drs, sizeof(drs), "%.0f", m->dropped_per_s);
	snprintf(raw_evs, sizeof(raw_evs), "%.3f", m->events_per_s);
	snprintf(raw_drs, sizeof(raw_drs), "%.3f", m->dropped_per_s);
	{
		const char *human[NSTATUS] = { pid, user, job, rank[0] ? rank : "-",
					       state_name(m->state), ev, evs, dr, drs, exe };
		const char *raw[NSTATUS] = { pid, user, job, rank, state_name(m->state),
					     ev, raw_evs, dr, raw_drs, exe };

		return rows_add(t, human, raw);
	}
}

struct acted {
	struct rows t;
	unsigned n, late, none;
	int64_t slowest;
};

static int acted_row(void *ctx, const struct daemon_row *r)
{
	struct acted *a = ctx;
	const struct shm_reply_acted *m = &r->u.acted;
	char pid[16], user[64], job[SHM_JOB_MAX + 1], lat[32], raw[24];

	if (r->kind != SHM_REPLY_ACTED)
		return -EPROTO;
	a->n++;
	snprintf(pid, sizeof(pid), "%u", m->pid);
	daemon_user_name(m->uid, user, sizeof(user));
	snprintf(job, sizeof(job), "%.*s", (int)r->len[0], r->s[0]);
	if (m->latency_ns >= 0) {
		fmt_duration(lat, sizeof(lat), (double)m->latency_ns);
		snprintf(raw, sizeof(raw), "%lld", (long long)m->latency_ns);
		if (m->latency_ns > a->slowest)
			a->slowest = m->latency_ns;
	} else {
		snprintf(lat, sizeof(lat), "%s", m->latency_ns == -2 ? "no control thread"
								     : "did not act");
		raw[0] = 0;
		a->late += m->latency_ns == -1;
		a->none += m->latency_ns == -2;
	}
	{
		const char *human[NACTED] = { pid, user, job, lat };
		const char *rawv[NACTED] = { pid, user, job, raw };

		return rows_add(&a->t, human, rawv);
	}
}

static int ctl_main(int argc, char **argv)
{
	const char *sock = NULL, *job = NULL, *verb = NULL, *dur = NULL;
	int64_t pid = 0;
	uint64_t window = 0;
	uint32_t op;
	char why[512];
	int fmt = ROWS_TABLE, r, err;

	for (int i = 1; i < argc; i++) {
		if (cli_is_help(argv[i]))
			return cli_help(&ctl_command);
		if ((r = cli_format_opt(&ctl_command, argc, argv, &i, rows_formats, &fmt)) ||
		    (r = cli_string_opt(&ctl_command, argc, argv, &i, "--socket", &sock)) ||
		    (r = cli_string_opt(&ctl_command, argc, argv, &i, "--job", &job)) ||
		    (r = cli_int_opt(&ctl_command, argc, argv, &i, "--pid", &pid))) {
			if (r < 0)
				return CLI_EXIT_USAGE;
			continue;
		}
		if (argv[i][0] == '-')
			return cli_usage_error(&ctl_command, "unknown option '%s'", argv[i]);
		if (!verb)
			verb = argv[i];
		else if (!strcmp(verb, "window") && !dur)
			dur = argv[i];
		else
			return cli_usage_error(&ctl_command, "unexpected argument '%s'", argv[i]);
	}
	if (!verb)
		return cli_usage_error(&ctl_command, "no verb given (status, pause, resume, window)");
	if (pid < 0 || pid > UINT32_MAX)
		return cli_usage_error(&ctl_command, "--pid %lld is not a pid", (long long)pid);
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
		if (conf_duration(dur, strlen(dur), &window) < 0 || !window)
			return cli_usage_error(&ctl_command, "'%s' is not a duration (10s, 500ms, 2m)",
					       dur);
	} else {
		return cli_usage_error(&ctl_command, "unknown verb '%s'", verb);
	}
	if (op != SHM_REQ_STATUS && !pid && !job)
		return cli_usage_error(&ctl_command, "%s needs --pid PID or --job JOB", verb);
	if (op == SHM_REQ_STATUS) {
		struct rows t = { .cols = status_cols, .ncols = NSTATUS };

		err = daemon_ask(daemon_socket(sock), op, (uint32_t)pid, 0, job, status_row, &t,
				 why, sizeof(why));
		if (!err) {
			if (fmt == ROWS_TABLE && !t.n)
				fputs("no traced processes\n", stdout);
			else
				rows_print(&t, fmt, stdout);
		}
		rows_free(&t);
	} else {
		struct acted a = { .t = { .cols = acted_cols, .ncols = NACTED } };
		char slow[32];

		err = daemon_ask(daemon_socket(sock), op, (uint32_t)pid, window, job, acted_row, &a,
				 why, sizeof(why));
		if (a.n)
			rows_print(&a.t, fmt, stdout);
		if (a.n && fmt == ROWS_TABLE && a.n > a.late + a.none)
			printf("%s: %u of %u processes acted; the slowest after %s\n", verb,
			       a.n - a.late - a.none, a.n,
			       fmt_duration(slow, sizeof(slow), (double)a.slowest));
		rows_free(&a.t);
	}
	if (err) {
		cli_error("%s", why[0] ? why : strerror(-err));
		return CLI_EXIT_ERROR;
	}
	return CLI_EXIT_OK;
}

const struct command ctl_command = {
	.name = "ctl",
	.brief = "traced processes at run time: status, pause, resume, window",
	.usage =
		"usage: shimmer ctl status [--pid PID | --job JOB] [--format table|csv|json]\n"
		"       shimmer ctl pause|resume (--pid PID | --job JOB) [--format ...]\n"
		"       shimmer ctl window DURATION (--pid PID | --job JOB) [--format ...]\n"
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
		"  window   record for DURATION (10s, 500ms, 2m), then pause\n"
		"\n"
		"A command cancels what SHIMMER_START, SHIMMER_STOP and SHIMMER_DURATION\n"
		"had still planned.  Only a process's owner, or root, may command it.\n"
		"Each process is listed with how long it took to act; a process that\n"
		"did not act within a second makes the exit status 1.\n"
		"\n"
		"  --socket PATH   the daemon's socket (as for shimmer ls)\n",
	.main = ctl_main,
};
