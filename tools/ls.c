/*
 * shimmer ls: the recordings the daemon keeps that the caller may read
 * (their own; root: everyone's), live ones first, then newest first.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "daemon.h"
#include "fmt.h"
#include "rows.h"

static const struct rows_col cols[] = {
	{ "job", 0, 0 },      { "user", 0, 0 },      { "host", 0, 0 },  { "start", 0, 1 },
	{ "duration", 1, 0 }, { "processes", 1, 0 }, { "ranks", 1, 0 }, { "size", 1, 0 },
	{ "state", 0, 0 },    { "path", 0, 0 },
};

#define NCOLS (int)(sizeof(cols) / sizeof(cols[0]))

/* Local time, to the second. */
static const char *when(int64_t wall_ns, char *buf, size_t len)
{
	time_t t = (time_t)(wall_ns / 1000000000ll);
	struct tm tm;

	localtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
	return buf;
}

static int row(void *ctx, const struct daemon_row *r)
{
	struct rows *t = ctx;
	const struct shm_reply_recording *m = &r->u.rec;
	char job[SHM_JOB_MAX + 1], host[256], path[4097], user[64], start[32], dur[32],
		procs[16], ranks[16], size[32], raw_start[24], raw_dur[24], raw_size[24];
	int64_t d = m->end_wall_ns - m->start_wall_ns;

	if (r->kind != SHM_REPLY_RECORDING)
		return -EPROTO;
	snprintf(job, sizeof(job), "%.*s", (int)r->len[0], r->s[0]);
	snprintf(host, sizeof(host), "%.*s", (int)r->len[1], r->s[1]);
	snprintf(path, sizeof(path), "%.*s", (int)r->len[2], r->s[2]);
	daemon_user_name(m->uid, user, sizeof(user));
	snprintf(procs, sizeof(procs), "%u", m->processes);
	snprintf(ranks, sizeof(ranks), "%u", m->ranks);
	snprintf(raw_start, sizeof(raw_start), "%lld", (long long)m->start_wall_ns);
	snprintf(raw_dur, sizeof(raw_dur), "%lld", (long long)(d > 0 ? d : 0));
	snprintf(raw_size, sizeof(raw_size), "%llu", (unsigned long long)m->bytes);
	{
		const char *human[NCOLS] = {
			job, user, host, when(m->start_wall_ns, start, sizeof(start)),
			fmt_duration(dur, sizeof(dur), d > 0 ? (double)d : 0), procs, ranks,
			fmt_bytes(size, sizeof(size), (double)m->bytes),
			m->live ? "live" : "done", path,
		};
		const char *raw[NCOLS] = {
			job, user, host, raw_start, raw_dur, procs, ranks, raw_size,
			m->live ? "live" : "done", path,
		};

		return rows_add(t, human, raw);
	}
}

static int ls_main(int argc, char **argv)
{
	struct rows t = { .cols = cols, .ncols = NCOLS };
	const char *sock = NULL;
	char why[512];
	int fmt = ROWS_TABLE, r, err;

	for (int i = 1; i < argc; i++) {
		if (cli_is_help(argv[i]))
			return cli_help(&ls_command);
		if ((r = cli_format_opt(&ls_command, argc, argv, &i, rows_formats, &fmt)) ||
		    (r = cli_string_opt(&ls_command, argc, argv, &i, "--socket", &sock))) {
			if (r < 0)
				return CLI_EXIT_USAGE;
			continue;
		}
		return cli_usage_error(&ls_command, "unknown argument '%s'", argv[i]);
	}
	err = daemon_ask(daemon_socket(sock), SHM_REQ_LIST, 0, 0, NULL, row, &t, why,
			 sizeof(why));
	if (err) {
		cli_error("%s", why[0] ? why : strerror(-err));
		rows_free(&t);
		return CLI_EXIT_ERROR;
	}
	if (fmt == ROWS_TABLE && !t.n)
		fputs("no recordings\n", stdout);
	else
		rows_print(&t, fmt, stdout);
	rows_free(&t);
	return CLI_EXIT_OK;
}

const struct command ls_command = {
	.name = "ls",
	.brief = "the recordings shimmerd keeps for you (job, user, host, start, size, ...)",
	.usage =
		"usage: shimmer ls [--format table|csv|json] [--socket PATH]\n"
		"\n"
		"Lists the recordings the shimmerd service keeps that you may read:\n"
		"your own (root: everyone's), live ones first, then newest first.  Each\n"
		"is one job's store: read it with `shimmer summary PATH` and the other\n"
		"commands.  Columns: job (its key), user, host, start (local time),\n"
		"duration (to its last process's end; live: until now), processes\n"
		"(an exec counts twice), ranks (distinct RANK values), size on disk,\n"
		"state (live or done), path.  CSV and JSON give start (wall-clock ns),\n"
		"duration (ns) and size (bytes) unscaled.\n"
		"\n"
		"  --socket PATH   the daemon's socket (default: $SHIMMER_SOCKET, else\n"
		"                  the socket of /etc/shimmer/shimmerd.conf, else\n"
		"                  /run/shimmer/shimmer.sock)\n",
	.main = ls_main,
};
