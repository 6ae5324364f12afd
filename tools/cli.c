/*
 * Error, help and option parsing shared by the subcommands; see cli.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "conf.h"
#include "fmt.h"
#include "model.h"

/* One line on stderr, escaped whole (fmt.h): the paths, names and
 * arguments in it may come from the store or the command line, and a
 * control character in them must neither reach the terminal nor start a
 * line of its own. */
static void vline(const char *what, const char *fmt, va_list ap)
{
	char *msg = NULL;

	fprintf(stderr, "shimmer: %s: ", what);
	if (vasprintf(&msg, fmt, ap) < 0) {
		msg = NULL; /* (undefined after a failure) */
		fputs(fmt, stderr); /* no memory: at least what it was about */
	} else {
		fmt_esc_write(stderr, msg, 0);
	}
	free(msg);
	fputc('\n', stderr);
}

void cli_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vline("error", fmt, ap);
	va_end(ap);
}

void cli_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vline("warning", fmt, ap);
	va_end(ap);
}

int cli_usage_error(const struct command *cmd, const char *fmt, ...)
{
	va_list ap;
	char *msg = NULL;
	int n;

	/* One line: the hint rides on the error instead of a second line. */
	va_start(ap, fmt);
	n = vasprintf(&msg, fmt, ap);
	va_end(ap);
	fprintf(stderr, "shimmer: error: ");
	if (n < 0) {
		msg = NULL;
		fputs(fmt, stderr);
	} else {
		fmt_esc_write(stderr, msg, 0);
	}
	free(msg);
	fprintf(stderr, " (see 'shimmer %s --help')\n", cmd->name);
	return CLI_EXIT_USAGE;
}

int cli_help(const struct command *cmd)
{
	fputs(cmd->usage, stdout);
	return CLI_EXIT_OK;
}

int cli_is_help(const char *arg)
{
	return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

/* Whether the file at path is the one st describes (path may not exist). */
static int same_file(const char *path, const struct stat *st)
{
	struct stat s;

	return stat(path, &s) == 0 && s.st_dev == st->st_dev && s.st_ino == st->st_ino;
}

int cli_output_check(const struct command *cmd, const char *out, const char *const *stores,
		     size_t n)
{
	static const char *const sides[] = { "", "-wal", "-shm", "-journal" };
	static const char magic[16] = "SQLite format 3";
	char head[sizeof(magic)], side[4096];
	struct stat st;
	int fd;

	/* Nothing there yet, or no regular file (a pipe, /dev/stdout): no
	 * store to lose. */
	if (stat(out, &st) < 0 || !S_ISREG(st.st_mode))
		return 0;
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; stores[i] && k < sizeof(sides) / sizeof(sides[0]); k++) {
			if ((size_t)snprintf(side, sizeof(side), "%s%s", stores[i], sides[k]) >=
			    sizeof(side) || !same_file(side, &st))
				continue;
			return cli_usage_error(cmd, "-o %s is the store %s%s: writing it would"
					       " destroy the recording", out, stores[i], sides[k]);
		}
	/* Another store (a report of run2 over run1.db): refused all the
	 * same; a -wal or -shm of one is matched above only. */
	fd = open(out, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd >= 0) {
		ssize_t got = read(fd, head, sizeof(head));

		close(fd);
		if (got == (ssize_t)sizeof(head) && memcmp(head, magic, sizeof(magic)) == 0)
			return cli_usage_error(cmd, "-o %s is an SQLite database (a store?): writing"
					       " it would destroy it; remove it first to replace"
					       " it", out);
	}
	return 0;
}

/* Whether the argument at hand is option name, alone or with "=VALUE". */
static int is_opt(const struct cli_args *a, const char *name)
{
	const char *arg = a->argv[a->i];
	size_t n = strlen(name);

	return strncmp(arg, name, n) == 0 && (!arg[n] || arg[n] == '=');
}

/* The value of option name, the argument at hand; NULL after a usage
 * error. */
static const char *opt_value(struct cli_args *a, const char *name)
{
	size_t n = strlen(name);

	if (a->argv[a->i][n] == '=')
		return a->argv[a->i] + n + 1;
	/* "--" where the value should be is a value forgotten ("run --db --
	 * CMD"), not a file or a name: taken, it made a store named "--". */
	if (a->i + 1 == a->argc || strcmp(a->argv[a->i + 1], "--") == 0) {
		cli_usage_error(a->cmd, "%s needs a value", name);
		return NULL;
	}
	return a->argv[++a->i];
}

/* An operand into the first free store. */
static int store_operand(struct cli_args *a, const char *arg)
{
	for (size_t k = 0; k < a->nstores; k++)
		if (!a->stores[k]) {
			a->stores[k] = arg;
			return 0;
		}
	return cli_usage_error(a->cmd, "more than %s given",
			       a->nstores == 1 ? "one store" : "two stores");
}

int cli_next(struct cli_args *a)
{
	while (++a->i < a->argc) {
		const char *arg = a->argv[a->i];

		if (!a->ended && strcmp(arg, "--") == 0) {
			a->ended = 1;
			continue;
		}
		if (!a->ended)
			return cli_is_help(arg) ? cli_help(a->cmd) : CLI_ARG_OPTION;
		if (!a->stores)
			return CLI_ARG_OPERAND;
		if (store_operand(a, arg))
			return CLI_EXIT_USAGE;
	}
	if (a->nstores && !a->stores[a->nstores - 1])
		return cli_usage_error(a->cmd, "%s", a->nstores == 1 ? "no store given"
						     : "two stores are needed");
	return CLI_ARG_END;
}

int cli_unknown_opt(const struct cli_args *a)
{
	return cli_usage_error(a->cmd, "unknown option '%s'", a->argv[a->i]);
}

int cli_store_arg(struct cli_args *a)
{
	const char *arg = a->argv[a->i];

	if (arg[0] == '-' && arg[1])
		return cli_unknown_opt(a);
	return store_operand(a, arg);
}

int cli_flag_opt(struct cli_args *a, const char *name, int *flag)
{
	if (strcmp(a->argv[a->i], name) != 0)
		return 0;
	*flag = 1;
	return 1;
}

int cli_string_opt(struct cli_args *a, const char *name, const char **value)
{
	if (!is_opt(a, name))
		return 0;
	*value = opt_value(a, name);
	return *value ? 1 : -1;
}

/* Digits with an optional fraction, nothing else: what strtod() is
 * allowed to read (it alone would take 0x10, 1e3, inf and a sign). */
static int decimal(const char *s)
{
	size_t whole = strspn(s, "0123456789"), frac = 0;

	if (s[whole] == '.')
		frac = strspn(s + whole + 1, "0123456789");
	return (whole || frac) && !s[whole + (s[whole] == '.') + frac];
}

int cli_number_opt(struct cli_args *a, const char *name, double *value)
{
	const char *v;

	if (!is_opt(a, name))
		return 0;
	v = opt_value(a, name);
	if (!v)
		return -1;
	errno = 0;
	if (!decimal(v) || (*value = strtod(v, NULL), errno) || !isfinite(*value)) {
		cli_usage_error(a->cmd, "%s wants a decimal number >= 0 (2, 2.5), not '%s'", name,
				v);
		return -1;
	}
	return 1;
}

/* name's value as a whole number from min to max: 1 when given, 0 when
 * absent, -1 (said) when not such a number; `want` says what it must be. */
static int count_opt(struct cli_args *a, const char *name, uint64_t min, uint64_t max,
		     const char *want, int64_t *value)
{
	const char *v;
	uint64_t n;

	if (!is_opt(a, name))
		return 0;
	v = opt_value(a, name);
	if (!v)
		return -1;
	if (conf_count(v, strlen(v), max, &n) < 0 || n < min) {
		cli_usage_error(a->cmd, "%s wants %s, not '%s'", name, want, v);
		return -1;
	}
	*value = (int64_t)n;
	return 1;
}

int cli_int_opt(struct cli_args *a, const char *name, int64_t *value)
{
	return count_opt(a, name, 0, INT64_MAX, "a whole decimal number >= 0", value);
}

int cli_duration(const struct command *cmd, const char *name, const char *s, uint64_t *ns)
{
	if (conf_duration(s, strlen(s), ns) == 0 && *ns && *ns <= INT64_MAX)
		return 0;
	cli_usage_error(cmd, "%s wants a duration > 0 (a decimal number and ns, us, ms, s, m, h"
			" or d; seconds without a unit), not '%s'", name, s);
	return -1;
}

int cli_duration_opt(struct cli_args *a, const char *name, uint64_t *ns)
{
	const char *v;

	if (!is_opt(a, name))
		return 0;
	v = opt_value(a, name);
	if (!v || cli_duration(a->cmd, name, v, ns) < 0)
		return -1;
	return 1;
}

int cli_pid_arg(const struct command *cmd, const char *arg, int64_t *pid)
{
	uint64_t n, max = conf_pid_max() - 1;

	if (conf_count(arg, strlen(arg), max, &n) < 0 || !n) {
		cli_usage_error(cmd, "'%s' is not a process id (a whole decimal number, 1 to %llu:"
				" below the kernel's pid_max)", arg, (unsigned long long)max);
		return -1;
	}
	*pid = (int64_t)n;
	return 0;
}

int cli_store_pid_opt(struct cli_args *a, const char *name, int64_t *pid)
{
	char want[80];

	snprintf(want, sizeof(want), "a process id (a whole decimal number, 1 to %llu)",
		 (unsigned long long)(CONF_PID_MAX_LIMIT - 1));
	return count_opt(a, name, 1, CONF_PID_MAX_LIMIT - 1, want, pid);
}

int cli_pid_opt(struct cli_args *a, const char *name, int64_t *pid)
{
	const char *v;

	if (!is_opt(a, name))
		return 0;
	v = opt_value(a, name);
	if (!v || cli_pid_arg(a->cmd, v, pid) < 0)
		return -1;
	return 1;
}

int cli_pid_operand(const struct command *cmd, const char *arg, int64_t *pid)
{
	if (*pid) {
		cli_usage_error(cmd, "one process at a time ('%s')", arg);
		return -1;
	}
	return cli_pid_arg(cmd, arg, pid);
}

int cli_sites_opt(struct cli_args *a, struct cli_sites *s)
{
	int64_t v;
	int r;

	if (cli_flag_opt(a, "--native", &s->native))
		return 1;
	r = cli_int_opt(a, "--callers", &v);
	if (r <= 0)
		return r;
	if (v > CLI_CALLERS_MAX) {
		cli_usage_error(a->cmd, "--callers wants at most %d", CLI_CALLERS_MAX);
		return -1;
	}
	s->callers = (int)v;
	return 1;
}

int cli_choice_opt(struct cli_args *a, const char *name, const char *const *names,
		   int *choice)
{
	char list[128] = "";
	const char *v;
	size_t n = 0;

	if (!is_opt(a, name))
		return 0;
	v = opt_value(a, name);
	if (!v)
		return -1;
	for (int k = 0; names[k]; k++) {
		if (strcmp(v, names[k]) == 0) {
			*choice = k;
			return 1;
		}
		if (n < sizeof(list))
			n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%s", k ? "|" : "",
					      names[k]);
	}
	cli_usage_error(a->cmd, "%s wants %s, not '%s'", name, list, v);
	return -1;
}

int cli_format_opt(struct cli_args *a, const char *const *names, int *fmt)
{
	return cli_choice_opt(a, "--format", names, fmt);
}

FILE *cli_output_open(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;

	if (!f) {
		cli_error("cannot write %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
	}
	return f;
}

int cli_filter_opt(struct cli_args *a, struct model_filter *f)
{
	int r = cli_store_pid_opt(a, "--pid", &f->pid);

	if (r == 0)
		r = cli_int_opt(a, "--rank", &f->rank);
	return r;
}
