/*
 * shimmer bottlenecks: what is wrong with a run and what to do about it
 * (findings.h; docs/usage.md states every rule).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "emit.h"
#include "findings.h"

static int bottlenecks_main(int argc, char **argv);

const struct command bottlenecks_command = {
	.name = "bottlenecks",
	.brief = "what slows the run down, with the evidence and what to do",
	.usage =
		"usage: shimmer bottlenecks DB [--format table|json] [--pid PID] [--rank R]\n"
		"                              [--threshold PCT] [--fail-on HIGH|MEDIUM|LOW]\n"
		"\n"
		"Runs every rule on the store's processes and prints each finding: its\n"
		"kind, severity (HIGH over 30% of the time it concerns, MEDIUM 10-30%,\n"
		"LOW under 10%, or the rule's own), the evidence (figures, the top\n"
		"kernels or call sites, the Python line where known), what the evidence\n"
		"covers (sampling windows, lost events) and one recommendation.  The\n"
		"rules: sync, gpu_idle, launch_bound, pageable_copy, sync_copy,\n"
		"sync_memset, data_loading, communication, straggler, hot_kernel,\n"
		"hot_api, hot_range, memory_growth, allocator_retry, heap_churn (see\n"
		"docs/usage.md).  A rule that lacks the data to judge a process says so\n"
		"under 'Not judged'.\n"
		"\n"
		"  --format table|json  output (default table)\n"
		"  --pid PID            only the processes with this pid\n"
		"  --rank R             only the processes of rank R\n"
		"  --threshold PCT      hot operations: over PCT% of the time (default 10)\n"
		"  --fail-on SEVERITY   exit 3 when a finding of SEVERITY or higher exists\n"
		"\n"
		"exit codes: 0 ok, 1 error (with --fail-on also a store or selection with\n"
		"no process), 2 usage, 3 a finding at --fail-on's level\n",
	.main = bottlenecks_main,
};

static const char *const formats[] = { "table", "json", NULL };

static int bottlenecks_main(int argc, char **argv)
{
	struct model_filter flt = model_filter_all();
	struct findings_opts o;
	struct findings fs;
	const char *path = NULL, *fail_on = NULL;
	struct cli_args a = CLI_ARGS(&bottlenecks_command, argc, argv, &path, 1);
	enum severity fail = 0;
	struct model *m;
	struct emit e;
	size_t count[4], nselected;
	double pct;
	int f = 0, k, r, rc;

	findings_opts_init(&o);
	while ((k = cli_next(&a)) == CLI_ARG_OPTION) {
		if ((r = cli_format_opt(&a, formats, &f)) != 0 ||
		    (r = cli_filter_opt(&a, &flt)) != 0) {
			if (r < 0)
				return CLI_EXIT_USAGE;
		} else if ((r = cli_number_opt(&a, "--threshold", &pct)) != 0) {
			if (r < 0)
				return CLI_EXIT_USAGE;
			if (pct <= 0 || pct > 100)
				return cli_usage_error(&bottlenecks_command,
						       "--threshold takes a percentage in (0, 100]");
			o.threshold = pct / 100;
		} else if ((r = cli_string_opt(&a, "--fail-on", &fail_on)) != 0) {
			if (r < 0)
				return CLI_EXIT_USAGE;
			fail = !strcmp(fail_on, "HIGH")	    ? SEV_HIGH :
			       !strcmp(fail_on, "MEDIUM")   ? SEV_MEDIUM :
			       !strcmp(fail_on, "LOW")	    ? SEV_LOW : 0;
			if (!fail)
				return cli_usage_error(&bottlenecks_command,
						       "--fail-on takes HIGH, MEDIUM or LOW, not '%s'",
						       fail_on);
		} else if ((rc = cli_store_arg(&a)) != 0) {
			return rc;
		}
	}
	if (k != CLI_ARG_END)
		return k;
	if (model_open(path, &flt, &m) < 0)
		return CLI_EXIT_ERROR;
	rc = findings_run(m, &o, &fs);
	if (!rc) {
		emit_init(&e, stdout, f == 1 ? EMIT_JSON : EMIT_TABLE);
		findings_emit(&e, &fs);
		rc = emit_finish(&e);
	} else if (rc == -ENOMEM) {
		cli_error("out of memory");
	}
	findings_count(&fs, count);
	findings_free(&fs);
	nselected = model_nselected(m);
	model_close(m);
	if (rc < 0)
		return CLI_EXIT_ERROR;
	/* No process, no rule ran: "no finding" would pass a CI job whose
	 * program was never traced (static, LD_PRELOAD cleared). */
	if (fail && !nselected) {
		cli_error("--fail-on %s: no process%s in %s: nothing was judged", fail_on,
			  flt.pid >= 0 || flt.rank >= 0 ? " selected" : "", path);
		return CLI_EXIT_ERROR;
	}
	for (int s = fail; fail && s <= SEV_HIGH; s++)
		if (count[s])
			return 3;
	return CLI_EXIT_OK;
}
