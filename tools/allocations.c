/*
 * shimmer allocations; see allocations.h.  The groups are the model's
 * (model_heap_groups with MODEL_ALLOCATED): its one pass over the
 * allocations, or the aggregated sites of an exact-mode heap.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "allocations.h"
#include "cli.h"
#include "emit.h"
#include "fmt.h"
#include "histogram.h"
#include "present.h"

static const struct emit_col cols[] = {
	{ "pid", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 },
	{ "proc_id", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 },
	{ "memory", "MEMORY", EMIT_STR, -10, 0, 0, 0 },
	{ "count", "COUNT", EMIT_INT, 10, 0, 0, 0 },
	{ "bytes", "BYTES", EMIT_BYTES, -11, 0, 0, 2 },
	{ "live_count", "LIVE AT END", EMIT_INT, 11, 0, 0, 0 },
	{ "live_bytes", "LIVE BYTES", EMIT_BYTES, -11, 0, 0, 2 },
	{ "estimated", NULL, EMIT_BOOL, 0, EMIT_IN_DATA, 0, 0 },
	{ "complete", NULL, EMIT_BOOL, 0, EMIT_IN_CSV, 0, 0 },
	PRESENT_STACKS_COLS,
	{ "frame", "CALL SITE", EMIT_STR, -1, 0, 0, 0 },
};

#define NCOLS (sizeof(cols) / sizeof(cols[0]))

static const struct emit_table sites_table = { "sites", cols, NCOLS, 2, 0 };

/* Within one memory (the model's groups are by memory, then bytes
 * descending): the most allocations first, ties by bytes, then name, so
 * that the order is the same on every run. */
static int by_count(const void *a, const void *b)
{
	const struct model_group *x = *(const struct model_group *const *)a;
	const struct model_group *y = *(const struct model_group *const *)b;

	if (x->mem != y->mem)
		return x->mem->index < y->mem->index ? -1 : 1;
	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	if (x->bytes != y->bytes)
		return x->bytes > y->bytes ? -1 : 1;
	return strcmp(x->name, y->name);
}

int allocations_write(struct model *m, FILE *out, int fmt, enum allocations_sort sort)
{
	const struct model_group **v = NULL;
	struct model_groups g;
	struct present_quiet quiet = { 0 };
	struct emit e;
	size_t gi = 0, k, rows;
	int err, any_est = 0;

	err = present_need_stacks(m);
	if (!err)
		err = model_load_unnamed(m);
	if (err)
		return err;
	model_want(m, MODEL_WANT_SITES);
	err = model_heap_groups(m, MODEL_ALLOCATED, MODEL_BY_SITE, 0, &g);
	if (err)
		return err;
	v = malloc((g.n + 1) * sizeof(*v));
	if (!v) {
		model_groups_free(&g);
		return -ENOMEM;
	}
	for (size_t i = 0; i < g.n; i++)
		v[i] = &g.v[i];
	if (sort == ALLOCATIONS_BY_COUNT)
		qsort(v, g.n, sizeof(*v), by_count);
	emit_init(&e, out, fmt);
	emit_kv(&e, "sort", EMIT_STR, ev_str(sort == ALLOCATIONS_BY_COUNT ? "count" : "bytes"));
	emit_text(&e, "every allocation, by call site (the most %s first)\n",
		  sort == ALLOCATIONS_BY_COUNT ? "allocations" : "bytes");
	emit_array_begin(&e, "processes");
	for (size_t pi = 0; pi < model_nprocs(m); pi++) {
		const struct model_proc *p = model_proc(m, pi);
		int complete = model_proc_complete(p);

		if (!p->selected)
			continue;
		while (gi < g.n && v[gi]->mem->proc->index < p->index)
			gi++;
		for (k = gi, rows = 0; k < g.n && v[k]->mem->proc == p; k++)
			rows += v[k]->rows != 0;
		if (present_quiet(&quiet, &e, p, rows))
			continue;
		emit_object_begin(&e, NULL);
		present_proc(&e, p, "the allocations that were lost are missing: the counts"
			     " below are lower bounds, and a lost free leaves a block live");
		present_stacks_refused(&e, p, "  ");
		present_unnamed(&e, p, "  ");
		emit_table_begin(&e, &sites_table);
		while (gi < g.n && v[gi]->mem->proc->index < p->index)
			gi++;
		for (; gi < g.n && v[gi]->mem->proc == p; gi++) {
			const struct model_group *s = v[gi];
			int est = s->mem->estimated;
			struct emit_val r[NCOLS] = {
				ev_int(p->pid), ev_int(p->proc_id), ev_str(s->mem->label),
				ev_approx(ev_int(llround(s->count)), est),
				ev_approx(ev_real(s->bytes), est),
				ev_approx(ev_int(llround(s->live_count)), est),
				ev_approx(ev_real(s->live_bytes), est), ev_int(est),
				ev_int(complete), PRESENT_STACKS_VALS(p), ev_str(s->name),
			};

			if (s->rows == 0)
				continue;
			any_est |= est;
			emit_row(&e, r);
		}
		emit_table_end(&e);
		emit_object_end(&e);
	}
	emit_array_end(&e);
	present_quiet_end(&quiet, &e, "no allocation recorded");
	present_estimated_note(&e, any_est, "");
	free(v);
	model_groups_free(&g);
	return emit_finish(&e);
}

/* ---- the command ------------------------------------------------------------------ */

static int allocations_main(int argc, char **argv);

const struct command allocations_command = {
	.name = "allocations",
	.brief = "every allocation by call site, or by size or lifetime (--histogram)",
	.usage =
		"usage: shimmer allocations DB [--sort bytes|count] [--format table|csv|json]\n"
		"                              [--pid PID] [--rank R] [--callers N] [--native]\n"
		"       shimmer allocations DB --histogram size|lifetime [--format table|csv|json]\n"
		"                              [--pid PID] [--rank R]\n"
		"\n"
		"Per process, memory (host, cuda:N, managed:N, pinned) and call site:\n"
		"every allocation made (count, bytes requested) and those of them still\n"
		"allocated when the process ended.  With --histogram, per process and\n"
		"memory instead: how the allocations spread over sizes, or over their\n"
		"blocks' lifetimes (the blocks never freed on a line of their own), in\n"
		"power-of-two buckets, with each bucket's share and a bar.  Host figures\n"
		"in sample mode are estimates, marked ~.  A process that lost events says\n"
		"so: its counts are then lower bounds.  See docs/usage.md for the columns.\n"
		"\n"
		"  --sort bytes|count        the most bytes (default) or allocations first\n"
		"  --histogram size          the distribution of the sizes asked for\n"
		"  --histogram lifetime      the distribution of the lifetimes\n"
		"  --format table|csv|json   output (default table)\n"
		"  --pid PID                 only the processes with this pid\n"
		"  --rank R                  only the processes of rank R\n"
		"  --callers N               name each call site with N of its callers,\n"
		"                            \"site <- caller <- ...\" (default 0)\n"
		"  --native                  host allocations made from Python code by\n"
		"                            their native frames, not the Python line\n"
		"\n"
		"exit codes: 0 ok, 1 error (missing or unreadable store, no stacks), 2 usage\n",
	.main = allocations_main,
};

static int allocations_main(int argc, char **argv)
{
	struct cli_sites sites = { 0 };
	static const char *const sorts[] = { [ALLOCATIONS_BY_BYTES] = "bytes",
					      [ALLOCATIONS_BY_COUNT] = "count", NULL };
	struct model_filter f = model_filter_all();
	const char *path = NULL;
	struct cli_args a = CLI_ARGS(&allocations_command, argc, argv, &path, 1);
	const char *by_site = NULL; /* an option of the sites' report */
	struct model *m;
	int fmt = EMIT_TABLE, by = ALLOCATIONS_BY_BYTES, hist = -1, k, r, rc;

	while ((k = cli_next(&a)) == CLI_ARG_OPTION) {
		const char *opt = argv[a.i];

		r = cli_format_opt(&a, emit_format_names, &fmt);
		if (!r)
			r = cli_filter_opt(&a, &f);
		if (!r && (r = cli_sites_opt(&a, &sites)) > 0)
			by_site = opt;
		if (!r && (r = cli_choice_opt(&a, "--sort", sorts, &by)) > 0)
			by_site = "--sort";
		if (!r)
			r = cli_choice_opt(&a, "--histogram", histogram_kinds, &hist);
		if (r < 0)
			return CLI_EXIT_USAGE;
		if (r == 0 && (rc = cli_store_arg(&a)) != 0)
			return rc;
	}
	if (k != CLI_ARG_END)
		return k;
	if (hist >= 0 && by_site)
		return cli_usage_error(&allocations_command,
				       "%s orders or names call sites, which --histogram does not show",
				       by_site);
	if (model_open(path, &f, &m) < 0)
		return CLI_EXIT_ERROR;
	model_set_callers(m, sites.callers);
	model_set_native(m, sites.native);
	if (hist >= 0)
		rc = histogram_write(m, stdout, fmt, (enum model_hist_kind)hist);
	else
		rc = allocations_write(m, stdout, fmt, (enum allocations_sort)by);
	if (rc == -ENOMEM)
		cli_error("out of memory");
	model_close(m);
	return rc < 0 ? CLI_EXIT_ERROR : CLI_EXIT_OK;
}
