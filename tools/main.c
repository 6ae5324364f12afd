/*
 * shimmer: reads and makes shimmer stores.  One file per subcommand; this
 * file only dispatches, so adding a subcommand means adding its file and one
 * line to the table below.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "version.h"
#include "wire.h"

static const struct command *const commands[] = {
	&run_command,
	&attach_command,
	&summary_command,
	&leaks_command,
	&peak_command,
	&temporary_command,
	&allocations_command,
	&ls_command,
	&ctl_command,
	&compare_command,
	&export_command,
	&bottlenecks_command,
	&report_command,
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static int usage(FILE *out)
{
	fputs("usage: shimmer COMMAND [ARGS...]\n"
	      "\n"
	      "Profile the heap and CUDA runtime calls of a program, then read\n"
	      "the store it produced.\n"
	      "\n"
	      "commands:\n", out);
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(out, "  %-11s %s\n", commands[i]->name, commands[i]->brief);
	fputs("  help        show this text, or 'shimmer help COMMAND'\n"
	      "  --version   the release, the wire format it speaks, the newest store it reads\n"
	      "\n"
	      "exit codes: 0 ok, 1 error, 2 usage, 3 a condition of 'compare --fail-if'\n"
	      "crossed, or a finding at the level of 'bottlenecks --fail-on'; 'run'\n"
	      "exits with its program's status.\n",
	      out);
	return CLI_EXIT_OK;
}

static const struct command *lookup(const char *name)
{
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (strcmp(commands[i]->name, name) == 0)
			return commands[i];
	return NULL;
}

int main(int argc, char **argv)
{
	const struct command *cmd;

	if (argc < 2) {
		cli_error("no command given (see 'shimmer --help')");
		return CLI_EXIT_USAGE;
	}
	if (cli_is_help(argv[1]))
		return usage(stdout);
	if (strcmp(argv[1], "--version") == 0) {
		printf("shimmer %s (wire format %d, reads store schema up to %d)\n", SHIMMER_VERSION,
		       SHM_WIRE_VERSION, shimmer_schema_version);
		return CLI_EXIT_OK;
	}
	if (strcmp(argv[1], "help") == 0) {
		if (argc < 3)
			return usage(stdout);
		cmd = lookup(argv[2]);
		if (!cmd) {
			cli_error("unknown command '%s' (see 'shimmer --help')", argv[2]);
			return CLI_EXIT_USAGE;
		}
		return cli_help(cmd);
	}
	cmd = lookup(argv[1]);
	if (!cmd) {
		cli_error("unknown command '%s' (see 'shimmer --help')", argv[1]);
		return CLI_EXIT_USAGE;
	}
	return cmd->main(argc - 1, argv + 1);
}
