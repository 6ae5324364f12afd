/*
 * What every subcommand of the shimmer command shares: the dispatch table
 * entry, exit codes and the one-line error convention.
 *
 * A subcommand lives in its own file and exports one `struct command`;
 * tools/main.c lists them.  Errors go to stderr as one line,
 * "shimmer: error: ...", never to stdout, which carries results only.
 */
#ifndef SHIMMER_TOOLS_CLI_H
#define SHIMMER_TOOLS_CLI_H

#include <stdint.h>
#include <stdio.h>

/* Exit codes of every subcommand except `run`, which passes its program's on. */
enum {
	CLI_EXIT_OK = 0,
	CLI_EXIT_ERROR = 1, /* the store or the system failed us */
	CLI_EXIT_USAGE = 2, /* bad command line */
};

struct command {
	const char *name;
	const char *brief; /* one line for `shimmer --help` */
	const char *usage; /* full help text, ends with a newline */
	int (*main)(int argc, char **argv); /* argv[0] is the subcommand name */
};

extern const struct command run_command;
extern const struct command attach_command;
extern const struct command summary_command;
extern const struct command leaks_command;
extern const struct command peak_command;
extern const struct command temporary_command;
extern const struct command allocations_command;
extern const struct command ls_command;
extern const struct command ctl_command;
extern const struct command export_command;
extern const struct command compare_command;
extern const struct command bottlenecks_command;
extern const struct command report_command;

/* Print "shimmer: error: <fmt>\n" on stderr, the message escaped as text
 * for people (fmt.h: no control character, no newline), so that its
 * arguments need no escaping of their own.  cli_warn and cli_usage_error
 * likewise. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Print "shimmer: warning: <fmt>\n" on stderr. */
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Report a usage error for cmd on stderr; returns CLI_EXIT_USAGE. */
int cli_usage_error(const struct command *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Print cmd's usage on stdout; returns CLI_EXIT_OK. */
int cli_help(const struct command *cmd);

/* True when arg is "-h" or "--help". */
int cli_is_help(const char *arg);

/*
 * A command's arguments, read in the one loop every command shares:
 *
 *	struct cli_args a = CLI_ARGS(&peak_command, argc, argv, &path, 1);
 *
 *	while ((k = cli_next(&a)) == CLI_ARG_OPTION) {
 *		if ((r = cli_format_opt(&a, names, &fmt)) || ...) {
 *			if (r < 0)
 *				return CLI_EXIT_USAGE;
 *		} else if ((rc = cli_store_arg(&a)) != 0) {
 *			return rc;
 *		}
 *	}
 *	if (k != CLI_ARG_END)
 *		return k;
 *
 * "--" ends the options, in every command (a store named "-x.db" reads
 * "shimmer leaks -- -x.db"): the first "--" is skipped, and each argument
 * after it is an operand, never an option nor -h.  Options and operands
 * before it come in any order.
 */
struct cli_args {
	const struct command *cmd;
	int argc;
	char **argv;         /* argv[0] is the subcommand's name */
	int i;               /* argv[i] is the argument at hand */
	int ended;           /* past the first "--" */
	const char **stores; /* where operands go; NULL: the caller reads them */
	size_t nstores;      /* 1 or 2: "more than one store", "more than two" */
};

/* cmd's arguments, the operands into stores[0..n) (NULL, 0: none). */
#define CLI_ARGS(c, ac, av, s, n) \
	((struct cli_args){ .cmd = (c), .argc = (ac), .argv = (av), .stores = (s), .nstores = (n) })

/* What cli_next() found; an exit code (>= 0) says the command is done. */
enum {
	CLI_ARG_END = -1,     /* no argument left */
	CLI_ARG_OPTION = -2,  /* argv[i], before "--" and not -h: for the caller's options */
	CLI_ARG_OPERAND = -3, /* argv[i], after "--": an operand (only without stores) */
};

/*
 * Moves to the next argument, skipping the first "--".  An operand after
 * it goes into the first free store, or is the caller's (CLI_ARG_OPERAND)
 * without stores.  Returns CLI_ARG_END (with every store filled),
 * CLI_ARG_OPTION or CLI_ARG_OPERAND, else the exit code to return:
 * CLI_EXIT_OK after printing the usage for -h or --help, CLI_EXIT_USAGE
 * after "more than one store given", or at the end "no store given" (one
 * store) or "two stores are needed" (two).
 */
int cli_next(struct cli_args *a);

/* The argument at hand, which is no option the command knows: "unknown
 * option" when it starts with "-" (but is not "-"), else a store as after
 * "--".  Returns 0, or CLI_EXIT_USAGE after printing why it is wrong. */
int cli_store_arg(struct cli_args *a);

/* Prints "unknown option 'ARG'" for the argument at hand; returns
 * CLI_EXIT_USAGE. */
int cli_unknown_opt(const struct cli_args *a);

/*
 * Options: each reads the argument at hand, argv[i], and returns 1 when it
 * is the option name (advancing i past a separate value), 0 when it is not,
 * and -1 after printing a usage error for the command.
 */

/* A flag: NAME alone, never NAME=VALUE; sets *flag to 1. */
int cli_flag_opt(struct cli_args *a, const char *name, int *flag);

/* Options with a value, given as "NAME VALUE" or "NAME=VALUE". */

/* Any string; *value points into argv. */
int cli_string_opt(struct cli_args *a, const char *name, const char **value);

/*
 * Numbers follow one set of rules on every command line (docs/usage.md,
 * "Numbers, sizes and durations"): decimal only, never hex ("0x10"), an
 * exponent ("1e3"), "inf" or a sign; a count or pid is whole digits, and
 * one that overflows is refused, never wrapped or rounded.
 */

/* A number >= 0: digits with an optional fraction ("2", "2.5", ".5"). */
int cli_number_opt(struct cli_args *a, const char *name, double *value);

/* A count >= 0: digits only, at most INT64_MAX. */
int cli_int_opt(struct cli_args *a, const char *name, int64_t *value);

/* A duration, as conf_duration() reads it (a decimal number and ns, us,
 * ms, s, m, h or d; seconds without a unit), > 0 and at most INT64_MAX
 * ns.  cli_duration() checks the value s of name (an option or an
 * operand): 0, or -1 after printing the usage error. */
int cli_duration(const struct command *cmd, const char *name, const char *s, uint64_t *ns);
int cli_duration_opt(struct cli_args *a, const char *name, uint64_t *ns);

/* A process id of a live process here, given as an operand: a count in
 * [1, pid_max - 1], this kernel's pid_max (conf_pid_max()).  0, or -1
 * after printing the usage error. */
int cli_pid_arg(const struct command *cmd, const char *arg, int64_t *pid);

/* "NAME PID": a process id recorded in a store (--pid of the readers),
 * perhaps on another machine: a count in [1, CONF_PID_MAX_LIMIT - 1]. */
int cli_store_pid_opt(struct cli_args *a, const char *name, int64_t *pid);

/* "NAME PID": a process id as cli_pid_arg() reads it. */
int cli_pid_opt(struct cli_args *a, const char *name, int64_t *pid);

/* The one process id operand of a command that takes one (attach, ctl
 * attach): cli_pid_arg(), refused with "one process at a time" when *pid
 * is set already.  0, or -1 after printing the usage error. */
int cli_pid_operand(const struct command *cmd, const char *arg, int64_t *pid);

/* How the heap commands name call sites (sites.h): "--callers N", 0 to
 * CLI_CALLERS_MAX, how many of the frames that called a site go with it;
 * "--native", host allocations made from Python code by their native
 * frames rather than the Python line. */
#define CLI_CALLERS_MAX 64
struct cli_sites {
	int callers;
	int native;
};
int cli_sites_opt(struct cli_args *a, struct cli_sites *s);

/*
 * Whether a command may write its output file `out` (-o): not when it is
 * one of the n stores it reads, or a -wal, -shm or -journal of one (the
 * same file, by device and inode, whatever the path), nor any SQLite
 * database (another store: an export or a report is never one), which
 * opening it for writing would truncate.  A file that does not exist yet
 * is fine.  Returns 0, or CLI_EXIT_USAGE after one error line.
 */
int cli_output_check(const struct command *cmd, const char *out, const char *const *stores,
		     size_t n);

/* Opens the output file path (-o) for writing, truncated, made readable
 * by its owner only (0600) when new, as the stores are: an export or a
 * report names the command line, files and functions.  NULL after one
 * error line. */
FILE *cli_output_open(const char *path);

struct model_filter;

/* "--pid PID" (cli_store_pid_opt()) and "--rank R": the processes a
 * command reads. */
int cli_filter_opt(struct cli_args *a, struct model_filter *f);

/* "NAME VALUE": *choice is the index of VALUE in names, a NULL-terminated
 * list; any other value is a usage error naming them. */
int cli_choice_opt(struct cli_args *a, const char *name, const char *const *names,
		   int *choice);

/* "--format": cli_choice_opt() over the formats cmd writes. */
int cli_format_opt(struct cli_args *a, const char *const *names, int *fmt);

#endif /* SHIMMER_TOOLS_CLI_H */
