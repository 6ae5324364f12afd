/*
 * shimmer peak; see peak.h.
 *
 * The peak and its instant T are the model's; the sites are the model's
 * groups of the blocks live at T (alloc_ns <= T < free_ns), which add up
 * to the peak by construction.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "emit.h"
#include "fmt.h"
#include "peak.h"
#include "present.h"

static const struct emit_col cols[] = {
	{ "pid", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 },
	{ "proc_id", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 },
	{ "memory", NULL, EMIT_STR, 0, EMIT_IN_CSV, 0, 0 },
	{ "peak_bytes", NULL, EMIT_BYTES, 0, EMIT_IN_CSV, 0, 0 },
	{ "peak_at_ns", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 },
	{ "estimated", NULL, EMIT_BOOL, 0, EMIT_IN_CSV, 0, 0 },
	{ "complete", NULL, EMIT_BOOL, 0, EMIT_IN_CSV, 0, 0 },
	PRESENT_STACKS_COLS,
	{ "count", "COUNT", EMIT_INT, 8, 0, 0, 0 },
	{ "bytes", "BYTES", EMIT_BYTES, -11, 0, 0, 0 },
	{ "frame", "CALL SITE", EMIT_STR, -1, 0, 0, 1 },
};

#define NCOLS (sizeof(cols) / sizeof(cols[0]))

static const struct emit_table sites_table = { "sites", cols, NCOLS, 4, 0 };

static int folded(struct model *m, FILE *out, const struct model_groups *g)
{
	for (size_t i = 0; i < g->n; i++)
		if (g->v[i].rows && llround(g->v[i].bytes) > 0)
			fprintf(out, "pid %lld;%s;%s %lld\n", (long long)g->v[i].mem->proc->pid,
				g->v[i].mem->label, g->v[i].name, llround(g->v[i].bytes));
	(void)m;
	if (fflush(out) == EOF || ferror(out)) {
		cli_error("cannot write the output");
		return -EIO;
	}
	return 0;
}

int peak_write(struct model *m, FILE *out, int fmt)
{
	struct model_mem *const *mems;
	struct model_groups g;
	struct present_quiet quiet = { 0 };
	struct emit e;
	size_t nmems, gi = 0, mi, rows;
	int err, any_est = 0;

	err = present_need_stacks(m);
	if (!err)
		err = model_load_unnamed(m);
	if (err)
		return err;
	model_want(m, MODEL_WANT_SITES);
	err = model_memories(m, &mems, &nmems);
	if (!err)
		err = model_heap_groups(m, MODEL_AT_PEAK,
					fmt == PRESENT_FOLDED ? MODEL_BY_FOLDED : MODEL_BY_SITE, 0, &g);
	if (err)
		return err;
	if (fmt == PRESENT_FOLDED) {
		err = folded(m, out, &g);
		model_groups_free(&g);
		return err;
	}
	emit_init(&e, out, fmt);
	emit_array_begin(&e, "processes");
	for (size_t pi = 0; pi < model_nprocs(m); pi++) {
		const struct model_proc *p = model_proc(m, pi);
		int complete = model_proc_complete(p);

		if (!p->selected)
			continue;
		for (mi = 0, rows = 0; mi < nmems; mi++)
			rows += mems[mi]->proc == p;
		if (present_quiet(&quiet, &e, p, rows))
			continue;
		emit_object_begin(&e, NULL);
		present_proc(&e, p, "freed blocks whose free was lost count as live, lost"
			     " allocations are missing: the peaks below may be wrong either way");
		present_stacks_refused(&e, p, "  ");
		present_unnamed(&e, p, "  ");
		emit_array_begin(&e, "peaks");
		for (mi = 0; mi < nmems; mi++) {
			const struct model_mem *mm = mems[mi];
			char b[FMT_UNIT_MAX], t[FMT_UNIT_MAX];

			if (mm->proc != p)
				continue;
			any_est |= mm->estimated;
			emit_object_begin(&e, NULL);
			emit_kv(&e, "memory", EMIT_STR, ev_str(mm->label));
			emit_kv(&e, "peak_bytes", EMIT_BYTES, ev_real(mm->peak));
			emit_kv(&e, "peak_at_ns", EMIT_INT, ev_int(mm->peak_ns - p->start_ns));
			emit_kv(&e, "estimated", EMIT_BOOL, ev_int(mm->estimated));
			emit_kv(&e, "complete", EMIT_BOOL, ev_int(complete));
			emit_text(&e, "  %s: peak %s%s at %s after start%s\n", mm->label,
				  mm->estimated ? "~" : "", fmt_bytes(b, sizeof(b), mm->peak),
				  fmt_duration(t, sizeof(t), (double)(mm->peak_ns - p->start_ns)),
				  !complete ? " (events were lost)"
				  : mm->late ? " (events reached the collector out of time order:"
					       " the peak and its sites may be off)"
					     : "");
			emit_table_begin(&e, &sites_table);
			while (gi < g.n && g.v[gi].mem->index < mm->index)
				gi++;
			for (; gi < g.n && g.v[gi].mem == mm; gi++) {
				const struct model_group *s = &g.v[gi];
				struct emit_val r[NCOLS] = {
					ev_int(p->pid), ev_int(p->proc_id), ev_str(mm->label),
					ev_real(mm->peak), ev_int(mm->peak_ns - p->start_ns),
					ev_int(mm->estimated), ev_int(complete),
					PRESENT_STACKS_VALS(p),
					ev_approx(ev_int(llround(s->count)), mm->estimated),
					ev_approx(ev_real(s->bytes), mm->estimated), ev_str(s->name),
				};

				if (s->rows)
					emit_row(&e, r);
			}
			emit_table_end(&e);
			emit_object_end(&e);
		}
		emit_array_end(&e);
		emit_object_end(&e);
	}
	emit_array_end(&e);
	present_quiet_end(&quiet, &e, "no heap or device memory recorded");
	present_estimated_note(&e, any_est, "");
	model_groups_free(&g);
	return emit_finish(&e);
}

/* ---- the command ------------------------------------------------------------------ */

static int peak_main(int argc, char **argv);

const struct command peak_command = {
	.name = "peak",
	.brief = "peak live memory per process and memory, and the call sites holding it",
	.usage =
		"usage: shimmer peak DB [--format table|csv|json|folded] [--pid PID] [--rank R]\n"
		"                       [--callers N] [--native]\n"
		"\n"
		"Per process and memory (host, cuda:N, managed:N, pinned): the highest\n"
		"live bytes, when it was reached (after the process started), and the\n"
		"call sites of the blocks live at that instant, with their count and\n"
		"bytes; the same peak `shimmer summary` shows.  Host bytes in sample mode\n"
		"are estimates, marked ~.  A process that lost events says so: its peak\n"
		"may then be wrong.  See docs/usage.md for the columns.\n"
		"\n"
		"  --format table|csv|json   output (default table)\n"
		"  --format folded           'outer;...;inner BYTES' lines of the bytes\n"
		"                            live at each peak, for flame graph tools\n"
		"  --pid PID                 only the processes with this pid\n"
		"  --rank R                  only the processes of rank R\n"
		"  --callers N               name each call site with N of its callers,\n"
		"                            \"site <- caller <- ...\" (default 0)\n"
		"  --native                  host allocations made from Python code by\n"
		"                            their native frames, not the Python line\n"
		"\n"
		"exit codes: 0 ok, 1 error (missing or unreadable store, no stacks), 2 usage\n",
	.main = peak_main,
};

static int peak_main(int argc, char **argv)
{
	struct cli_sites sites = { 0 };
	struct model_filter f = model_filter_all();
	const char *path = NULL;
	struct cli_args a = CLI_ARGS(&peak_command, argc, argv, &path, 1);
	struct model *m;
	int fmt = EMIT_TABLE, k, r, rc;

	while ((k = cli_next(&a)) == CLI_ARG_OPTION) {
		if ((r = cli_format_opt(&a, present_mem_formats, &fmt)) != 0 ||
		    (r = cli_filter_opt(&a, &f)) != 0 || (r = cli_sites_opt(&a, &sites)) != 0) {
			if (r < 0)
				return CLI_EXIT_USAGE;
		} else if ((rc = cli_store_arg(&a)) != 0) {
			return rc;
		}
	}
	if (k != CLI_ARG_END)
		return k;
	if (model_open(path, &f, &m) < 0)
		return CLI_EXIT_ERROR;
	model_set_callers(m, sites.callers);
	model_set_native(m, sites.native);
	/* folded lines are a flame graph's input: what they miss goes to stderr */
	if (fmt == PRESENT_FOLDED && model_schema_version(m) >= 3 && model_load_unnamed(m) == 0)
		present_warn_folded(m, 1);
	rc = peak_write(m, stdout, fmt);
	if (rc == -ENOMEM)
		cli_error("out of memory");
	model_close(m);
	return rc < 0 ? CLI_EXIT_ERROR : CLI_EXIT_OK;
}
