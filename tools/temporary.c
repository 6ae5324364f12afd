/*
 * shimmer temporary; see temporary.h.  The groups are the model's
 * (model_heap_groups with MODEL_SHORT): its one pass over the allocations.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "emit.h"
#include "fmt.h"
#include "present.h"
#include "temporary.h"

static const struct emit_col cols[] = {
	{ "pid", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 },
	{ "proc_id", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 },
	{ "memory", "MEMORY", EMIT_STR, -10, 0, 0, 0 },
	{ "count", "COUNT", EMIT_INT, 10, 0, 0, 0 },
	{ "bytes", "BYTES", EMIT_BYTES, -11, 0, 0, 2 },
	{ "estimated", NULL, EMIT_BOOL, 0, EMIT_IN_DATA, 0, 0 },
	{ "complete", NULL, EMIT_BOOL, 0, EMIT_IN_CSV, 0, 0 },
	PRESENT_STACKS_COLS,
	{ "median_lifetime_ns", "MEDIAN LIFE", EMIT_NS, -11, 0, 1, 0 },
	{ "frame", "CALL SITE", EMIT_STR, -1, 0, 0, 0 },
};

#define NCOLS (sizeof(cols) / sizeof(cols[0]))

static const struct emit_table sites_table = { "sites", cols, NCOLS, 2, 0 };

int temporary_write(struct model *m, FILE *out, int fmt, int64_t max_lifetime_ns)
{
	struct model_groups g;
	struct emit e;
	char d[FMT_UNIT_MAX];
	size_t gi = 0, k, rows;
	struct present_quiet quiet = { 0 };
	int err, any_est = 0, any_agg = 0;

	err = present_need_stacks(m);
	if (!err)
		err = model_load_unnamed(m);
	if (err)
		return err;
	model_want(m, MODEL_WANT_SITES);
	err = model_heap_groups(m, MODEL_SHORT, MODEL_BY_SITE, max_lifetime_ns, &g);
	if (err)
		return err;
	emit_init(&e, out, fmt);
	emit_kv(&e, "max_lifetime_ns", EMIT_INT, ev_int(max_lifetime_ns));
	emit_text(&e, "allocations freed within %s of being made\n",
		  fmt_duration(d, sizeof(d), (double)max_lifetime_ns));
	emit_array_begin(&e, "processes");
	for (size_t pi = 0; pi < model_nprocs(m); pi++) {
		const struct model_proc *p = model_proc(m, pi);
		int complete = model_proc_complete(p);

		if (!p->selected)
			continue;
		while (gi < g.n && g.v[gi].mem->proc->index < p->index)
			gi++;
		for (k = gi, rows = 0; k < g.n && g.v[k].mem->proc == p; k++)
			rows += g.v[k].rows != 0;
		if (present_quiet(&quiet, &e, p, rows))
			continue;
		emit_object_begin(&e, NULL);
		present_proc(&e, p, "the counts below miss the allocations and frees that were"
			     " lost: they are lower bounds");
		present_stacks_refused(&e, p, "  ");
		present_unnamed(&e, p, "  ");
		emit_table_begin(&e, &sites_table);
		while (gi < g.n && g.v[gi].mem->proc->index < p->index)
			gi++;
		for (; gi < g.n && g.v[gi].mem->proc == p; gi++) {
			const struct model_group *s = &g.v[gi];
			int est = s->mem->estimated || (g.estimated && s->mem->aggregated);
			struct emit_val r[NCOLS] = {
				ev_int(p->pid), ev_int(p->proc_id), ev_str(s->mem->label),
				ev_approx(ev_int(llround(s->count)), est),
				ev_approx(ev_real(s->bytes), est), ev_int(est), ev_int(complete),
				PRESENT_STACKS_VALS(p),
				ev_real(s->median_life), ev_str(s->name),
			};

			if (s->rows == 0)
				continue;
			any_est |= est;
			any_agg |= s->mem->aggregated;
			emit_row(&e, r);
		}
		emit_table_end(&e);
		emit_object_end(&e);
	}
	emit_array_end(&e);
	present_quiet_end(&quiet, &e, "no temporary allocation");
	if (any_est)
		emit_text(&e, "\n~: estimated%s\n",
			  g.estimated ? " (sampled allocations, or a share of a lifetime bucket:"
					" the collector counted exactly at 1 ms and 1 s)"
				      : " from sampled allocations");
	if (any_agg)
		emit_text(&e, "\nmedian lifetimes of exact-mode heaps come from a histogram: within"
			  " a quarter octave\n");
	model_groups_free(&g);
	return emit_finish(&e);
}

/* ---- the command ------------------------------------------------------------------ */

static int temporary_main(int argc, char **argv);

const struct command temporary_command = {
	.name = "temporary",
	.brief = "allocations freed soon after they were made, by call site",
	.usage =
		"usage: shimmer temporary DB [--max-lifetime-ms N] [--format table|csv|json]\n"
		"                            [--pid PID] [--rank R] [--callers N] [--native]\n"
		"\n"
		"Per process, memory (host, cuda:N, managed:N, pinned) and call site:\n"
		"the allocations freed at most N ms after they were made (default 1 ms),\n"
		"with their count, bytes and median lifetime.  Host figures in sample\n"
		"mode are estimates, marked ~.  A process that lost events says so: its\n"
		"counts are then lower bounds.  See docs/usage.md for the columns.\n"
		"\n"
		"  --max-lifetime-ms N       the longest lifetime counted (default 1)\n"
		"  --format table|csv|json   output (default table)\n"
		"  --pid PID                 only the processes with this pid\n"
		"  --rank R                  only the processes of rank R\n"
		"  --callers N               name each call site with N of its callers,\n"
		"                            \"site <- caller <- ...\" (default 0)\n"
		"  --native                  host allocations made from Python code by\n"
		"                            their native frames, not the Python line\n"
		"\n"
		"exit codes: 0 ok, 1 error (missing or unreadable store, no stacks), 2 usage\n",
	.main = temporary_main,
};

static int temporary_main(int argc, char **argv)
{
	struct cli_sites sites = { 0 };
	struct model_filter f = model_filter_all();
	double ms = TEMPORARY_MAX_LIFETIME_MS;
	const char *path = NULL;
	struct cli_args a = CLI_ARGS(&temporary_command, argc, argv, &path, 1);
	struct model *m;
	int fmt = EMIT_TABLE, k, r, rc;

	while ((k = cli_next(&a)) == CLI_ARG_OPTION) {
		if ((r = cli_format_opt(&a, emit_format_names, &fmt)) != 0 ||
		    (r = cli_filter_opt(&a, &f)) != 0 || (r = cli_sites_opt(&a, &sites)) != 0 ||
		    (r = cli_number_opt(&a, "--max-lifetime-ms", &ms)) != 0) {
			if (r < 0)
				return CLI_EXIT_USAGE;
		} else if ((rc = cli_store_arg(&a)) != 0) {
			return rc;
		}
	}
	if (k != CLI_ARG_END)
		return k;
	if (ms > 9e12)
		return cli_usage_error(&temporary_command, "--max-lifetime-ms is too large");
	if (model_open(path, &f, &m) < 0)
		return CLI_EXIT_ERROR;
	model_set_callers(m, sites.callers);
	model_set_native(m, sites.native);
	rc = temporary_write(m, stdout, fmt, (int64_t)(ms * 1e6));
	if (rc == -ENOMEM)
		cli_error("out of memory");
	model_close(m);
	return rc < 0 ? CLI_EXIT_ERROR : CLI_EXIT_OK;
}
