/*
 * Error and help printing shared by the subcommands; see cli.h.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void vline(const char *what, const char *fmt, va_list ap)
{
	fprintf(stderr, "shimmer: %s: ", what);
	vfprintf(stderr, fmt, ap);
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

	/* One line: the hint rides on the error instead of a second line. */
	fprintf(stderr, "shimmer: error: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
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
