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
#include "emit.h"

static const struct emit_col cols[] = {
	{ "job", "JOB", EMIT_STR, -16, 0, 0, 0 },
	{ "user", "USER", EMIT_STR, -8, 0, 0, 2 },
	{ "host", "HOST", EMIT_STR, -8, 0, 0, 2 },
	{ "start", "START", EMIT_STR, -19, EMIT_IN_TABLE, 0, 2 },
	{ "start_ns", NULL, EMIT_INT, 0, EMIT_IN_DATA, 0, 0 },
	{ "duration_ns", "DURATION", EMIT_NS, 10, 0, 0, 2 },
	{ "processes", "PROCS", EMIT_INT, 5, 0, 0, 2 },
	{ "ranks", "RANKS", EMIT_INT, 5, 0, 0, 2 },
	{ "bytes", "SIZE", EMIT_BYTES, 10, 0, 0, 2 },
	{ "state", "STATE", EMIT_STR, -5, 0, 0, 2 },
	{ "path", "PATH", EMIT_STR, -1, 0, 0, 2 },
};

#define NCOLS (sizeof(cols) / sizeof(cols[0]))

static const struct emit_table table = { "recordings", cols, NCOLS, 0, 0 };

struct ls {
	struct emit e;
	size_t n;
};

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
	struct ls *l = ctx;
	const struct shm_reply_recording *m = &r->u.rec;
	char job[SHM_JOB_MAX + 1], host[256], path[4097], user[64], start[32];
	int64_t d = m->end_wall_ns - m->start_wall_ns;

	if (r->kind != SHM_REPLY_RECORDING)
		return -EPROTO;
	snprintf(job, sizeof(job), "%.*s", (int)r->len[0], r->s[0]);
	snprintf(host, sizeof(host), "%.*s", (int)r->len[1], r->s[1]);
	snprintf(path, sizeof(path), "%.*s", (int)r->len[2], r->s[2]);
	{
		struct emit_val v[NCOLS] = {
			ev_str(job), ev_str(daemon_user_name(m->uid, user, sizeof(user))),
			ev_str(host), ev_str(when(m->start_wall_ns, start, sizeof(start))),
			ev_int(m->start_wall_ns), ev_int(d > 0 ? d : 0), ev_int(m->processes),
			ev_int(m->ranks), ev_int((int64_t)m->bytes),
			ev_str(m->live ? "live" : "done"), ev_str(path),
		};

		/* A table gets its heading with its first row ("no recordings"
		 * otherwise); CSV and JSON have theirs from the start. */
		if (!l->n++ && l->e.fmt == EMIT_TABLE)
			emit_table_begin(&l->e, &table);
		emit_row(&l->e, v);
	}
	return 0;
}

static int ls_main(int argc, char **argv)
{
	struct ls l = { .n = 0 };
	const char *sock = NULL;
	struct cli_args a = CLI_ARGS(&ls_command, argc, argv, NULL, 0);
	char why[512];
	int fmt = EMIT_TABLE, k, r, err;

	/* No operands: anything but an option is an unknown argument. */
	while ((k = cli_next(&a)) == CLI_ARG_OPTION || k == CLI_ARG_OPERAND) {
		if (k == CLI_ARG_OPTION && ((r = cli_format_opt(&a, emit_format_names, &fmt)) ||
					    (r = cli_string_opt(&a, "--socket", &sock)))) {
			if (r < 0)
				return CLI_EXIT_USAGE;
			continue;
		}
		return cli_usage_error(&ls_command, "unknown argument '%s'", argv[a.i]);
	}
	if (k != CLI_ARG_END)
		return k;
	emit_init(&l.e, stdout, (enum emit_format)fmt);
	if (fmt != EMIT_TABLE)
		emit_table_begin(&l.e, &table);
	err = daemon_ask(daemon_socket(sock), SHM_REQ_LIST, 0, 0, 0, NULL, row, &l, why,
			 sizeof(why));
	if (l.n || fmt != EMIT_TABLE)
		emit_table_end(&l.e);
	else if (!err)
		emit_text(&l.e, "no recordings\n");
	if (emit_finish(&l.e) < 0)
		return CLI_EXIT_ERROR;
	if (err) {
		cli_error("%s", why[0] ? why : strerror(-err));
		return CLI_EXIT_ERROR;
	}
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
		"state (live or done), path.  CSV and JSON give start_ns (wall-clock),\n"
		"duration_ns and bytes unscaled.\n"
		"\n"
		"  --socket PATH   the daemon's socket (default: $SHIMMER_SOCKET, else\n"
		"                  the socket of /etc/shimmer/shimmerd.conf, else\n"
		"                  /run/shimmer/shimmer.sock)\n",
	.main = ls_main,
};
