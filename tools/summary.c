/*
 * shimmer summary; see summary.h.
 *
 * Every figure is the model's: calls (function_counts, cuda_calls and the
 * heap's timings), memories (the one peak algorithm, also `peak`'s), GPU
 * aggregates, drops.  This file only chooses what to show and writes it
 * through the emitter, so the three formats carry the same figures.
 *
 * The brief form (`shimmer run`) fits a screen: the processes that did
 * CUDA work, then the longest, at most SUMMARY_BRIEF_PROCS of them in
 * full with their first SUMMARY_BRIEF_ROWS rows per table; the others one
 * line per executable; then where the store is and what to run next.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "byrank.h"
#include "cli.h"
#include "drops.h"
#include "fmt.h"
#include "gpu.h"
#include "present.h"
#include "summary.h"

/* What lost events and a cut recording do to a process's CSV rows. */
#define SUMMARY_LOST_CSV "the time statistics of its rows miss them (its counts and bytes too" \
	" where a thread found no ring: no_slot), and its GPU rows the records CUPTI lost"
#define SUMMARY_CUT_CSV "its rows stop there"

void summary_opts_init(struct summary_opts *o)
{
	*o = (struct summary_opts){ .fmt = EMIT_TABLE };
}

struct ctx {
	struct model *m;
	struct emit *e;
	const struct summary_opts *o;
	struct model_calls *const *calls;
	size_t ncalls;
	struct model_mem *const *mems;
	size_t nmems;
	size_t max_rows;
};

static struct emit_val rank_val(const struct model_proc *p)
{
	return p->rank >= 0 ? ev_int(p->rank) : ev_none();
}

/* ---- the process's heading ------------------------------------------------- */

static void heading(struct ctx *c, const struct model_proc *p)
{
	struct emit *e = c->e;
	char u[2][FMT_UNIT_MAX];

	emit_text(e, "Process %lld", (long long)p->pid);
	if (p->rank >= 0)
		emit_text(e, " (rank %lld)", (long long)p->rank);
	emit_text(e, " on %s: %s\n", fmt_esc(p->host ? p->host : "?"),
		  fmt_esc(p->exe ? p->exe : "?"));
	if (p->args)
		emit_text(e, "  command: %s\n", fmt_esc(p->args));
	if (p->parent)
		emit_text(e, "  parent: pid %lld (%s)\n", (long long)p->parent->pid,
			  fmt_esc(p->parent->exe_base ? p->parent->exe_base : "?"));
	emit_text(e, "  wall: %s%s   malloc: %s", fmt_duration(u[0], FMT_UNIT_MAX, model_proc_wall(p)),
		  p->end_known ? "" : " (no end recorded: to its last event)",
		  fmt_esc(p->mode_name ? p->mode_name : "?"));
	if (p->mode == MODEL_MALLOC_SAMPLE && p->sample_bytes >= 0)
		emit_text(e, " (one sample per %s on average)",
			  fmt_bytes(u[1], FMT_UNIT_MAX, (double)p->sample_bytes));
	emit_text(e, "   end: %s\n", fmt_esc(p->end_reason ? p->end_reason : "still running"));
	if (p->dropped > 0) {
		int noslot = 0;

		emit_text(e, "  WARNING: %lld events were dropped (", (long long)p->dropped);
		for (size_t i = 0, n = 0; i < p->ndrops; i++) {
			/* those stored without a stack are said below */
			if (!drop_is_loss(p->drops[i].reason))
				continue;
			emit_text(e, "%s%s %lld", n++ ? ", " : "", fmt_esc(p->drops[i].reason),
				  (long long)p->drops[i].events);
			/* a thread without a ring has no exact counters either */
			if (p->drops[i].reason && strcmp(p->drops[i].reason, "no_slot") == 0)
				noslot = 1;
		}
		emit_text(e, ")");
		if (p->dropped_host)
			emit_text(e, "; the %stime statistics, peaks and live memory below miss them",
				  noslot ? "counts, " : "");
		/* What CUPTI lost is GPU activity: no call time, no peak. */
		if (p->dropped_gpu)
			emit_text(e, "%s the GPU's counts miss the records CUPTI lost",
				  p->dropped_host ? ", and" : ";");
		emit_text(e, "\n");
	}
	if (p->cut)
		emit_text(e, "  WARNING: %s; the counts, times, peaks and live memory below stop"
			  " there\n", PRESENT_CUT);
	present_stacks_refused(e, p, "  ");
	present_unnamed(e, p, "  ");
	if (p->host_unseen)
		emit_text(e, "  WARNING: %s\n", p->host_unseen);
	emit_text(e, "\n");
}

static void proc_members(struct ctx *c, const struct model_proc *p)
{
	struct emit *e = c->e;

	emit_kv(e, "proc_id", EMIT_INT, ev_int(p->proc_id));
	emit_kv(e, "pid", EMIT_INT, ev_int(p->pid));
	emit_kv(e, "ppid", EMIT_INT, ev_int(p->ppid));
	emit_kv(e, "parent_proc_id", EMIT_INT, p->parent ? ev_int(p->parent->proc_id) : ev_none());
	emit_kv(e, "rank", EMIT_INT, rank_val(p));
	emit_kv(e, "hostname", EMIT_STR, ev_str(p->host));
	emit_kv(e, "exe", EMIT_STR, ev_str(p->exe));
	emit_kv(e, "argv", EMIT_RAW, ev_str(p->argv_json));
	emit_kv(e, "argv_bytes", EMIT_INT, p->argv_bytes >= 0 ? ev_int(p->argv_bytes) : ev_none());
	emit_kv(e, "malloc_mode", EMIT_STR, ev_str(p->mode_name));
	emit_kv(e, "sample_bytes", EMIT_INT, p->sample_bytes >= 0 ? ev_int(p->sample_bytes) : ev_none());
	emit_kv(e, "wall_ns", EMIT_INT, ev_int(p->end_ns - p->start_ns));
	emit_kv(e, "end_known", EMIT_BOOL, ev_int(p->end_known));
	emit_kv(e, "end_reason", EMIT_STR, ev_str(p->end_reason));
	emit_kv(e, "dropped_events", EMIT_INT, ev_int(p->dropped));
	emit_kv(e, "calls_counted", EMIT_BOOL, ev_int(p->calls_counted));
	emit_kv(e, "host_unseen", EMIT_STR, p->host_unseen ? ev_str(p->host_unseen) : ev_none());
}

/* ---- functions ------------------------------------------------------------ */

static const struct emit_col fn_cols[] = {
	{ "pid", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 },
	{ "rank", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 },
	{ "event", "Function", EMIT_STR, -28, 0, 0, 0 },
	{ "kind", NULL, EMIT_STR, 0, EMIT_IN_JSON, 0, 0 },
	{ "count", "Count", EMIT_INT, 10, 0, 0, 0 },
	{ "bytes", "Bytes", EMIT_BYTES, 10, 0, 0, 0 },
	{ "timed", "Timed", EMIT_INT, 10, EMIT_IN_TABLE | EMIT_IN_JSON, 0, 0 },
	{ "total", "Total", EMIT_NS, 11, EMIT_IN_TABLE, 0, 0 },
	{ "estimated", NULL, EMIT_BOOL, 0, EMIT_IN_JSON, 0, 0 },
	{ "total_ns", NULL, EMIT_NS, 0, EMIT_IN_DATA, 0, 0 },
	{ "total_ns_estimated", NULL, EMIT_NS, 0, EMIT_IN_JSON, 0, 0 },
	{ "mean_ns", "Mean", EMIT_REAL, 10, EMIT_IN_DATA, 3, 0 },
	{ "mean", "Mean", EMIT_NS, 10, EMIT_IN_TABLE, 0, 0 },
	{ "stddev_ns", "Std dev", EMIT_REAL, 10, EMIT_IN_DATA, 3, 0 },
	{ "stddev", "Std dev", EMIT_NS, 10, EMIT_IN_TABLE, 0, 0 },
	{ "min_ns", "Min", EMIT_NS, 10, 0, 0, 0 },
	{ "max_ns", "Max", EMIT_NS, 10, 0, 0, 0 },
	{ "timed", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 },
	{ "wall", "Wall%", EMIT_SHARE, 7, EMIT_IN_TABLE, 0, 0 },
	{ "wall_share", NULL, EMIT_SHARE, 0, EMIT_IN_DATA, 0, 0 },
	{ "kind", NULL, EMIT_STR, 0, EMIT_IN_CSV, 0, 0 },
	{ "proc_id", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 },
};

#define NFN (sizeof(fn_cols) / sizeof(fn_cols[0]))

static const struct emit_table fn_table = { "functions", fn_cols, NFN, 2, 0 };

/* What fn_row() left out or estimated, for the footnotes. */
enum { ROW_ESTIMATED = 1, ROW_BIASED = 2, ROW_UNCOUNTED = 4 };

/* Writes f's row; returns what its cells were (ROW_*): ~ estimated total,
 * - total not estimable from sampled calls, - count (or bytes) of a
 * process whose counters never reached the store; 0 exact or never
 * timed. */
static int fn_row(struct ctx *c, const struct model_calls *f)
{
	const struct model_proc *p = f->proc;
	double wall = model_proc_wall(p), total = model_calls_total(f);
	int exact = model_calls_exact(f), timed = f->st.n > 0, ok = model_calls_estimable(f);
	/* without counters a CUDA function's calls are its rows; a heap
	 * function's were counted by nobody (timed is a sample of them) */
	int counted = model_calls_counted(f), known = counted || (f->fn && !f->fn->heap);
	struct emit_val r[NFN];
	char name[32];

	if (!f->fn)
		snprintf(name, sizeof(name), "fn?");
	r[0] = ev_int(p->pid);
	r[1] = rank_val(p);
	r[2] = ev_str(f->fn ? f->fn->name : name);
	r[3] = ev_str(f->fn && f->fn->heap ? "heap" : "api");
	r[4] = known ? ev_int(model_calls_count(f)) : ev_none();
	r[5] = counted ? ev_int(f->bytes) : ev_none();
	r[6] = ev_int((int64_t)f->st.n);
	r[7] = timed && ok ? ev_approx(ev_real(total), !exact) : ev_none();
	r[8] = ev_int(timed && !exact);
	r[9] = exact ? ev_real((double)f->sum) : ev_none();
	r[10] = timed && ok ? ev_real(total) : ev_none();
	r[11] = timed ? ev_real(f->st.mean) : ev_none();
	r[12] = r[11];
	r[13] = timed ? ev_real(stats_stddev(&f->st)) : ev_none();
	r[14] = r[13];
	r[15] = timed ? ev_real(f->st.min) : ev_none();
	r[16] = timed ? ev_real(f->st.max) : ev_none();
	r[17] = r[6];
	r[18] = timed && ok && wall > 0 ? ev_approx(ev_real(total / wall), !exact) : ev_none();
	r[19] = exact && wall > 0 ? ev_real((double)f->sum / wall) : ev_none();
	r[20] = r[3];
	r[21] = ev_int(p->proc_id);
	emit_row(c->e, r);
	return (counted ? 0 : ROW_UNCOUNTED) |
	       (!timed ? 0 : !ok ? (counted ? ROW_BIASED : 0) : !exact ? ROW_ESTIMATED : 0);
}

static void functions(struct ctx *c, const struct model_proc *p, size_t first, size_t n)
{
	struct emit *e = c->e;
	int t = 0;
	size_t shown = c->max_rows && n > c->max_rows ? c->max_rows : n;

	(void)p;
	if (n == 0) {
		emit_text(e, "  no intercepted calls\n\n");
		emit_array_begin(e, "functions");
		emit_array_end(e);
		return;
	}
	emit_table_begin(e, &fn_table);
	for (size_t i = first; i < first + shown; i++)
		t |= fn_row(c, c->calls[i]);
	emit_table_end(e);
	if (shown < n)
		emit_text(e, "  ... %zu more functions\n", n - shown);
	if (t & ROW_ESTIMATED)
		emit_text(e, "\n  ~ estimated as mean x count: only the Timed calls were timed"
			  " (one heap call in 8 on average in `all` mode, or frees of blocks"
			  " allocated before tracing)\n");
	if (t & ROW_BIASED)
		emit_text(e, "%s  - no total: in sample mode only sampled heap calls are timed,"
			  " and sampling favours large blocks; their mean is not that of"
			  " all calls\n", t & ROW_ESTIMATED ? "" : "\n");
	if (t & ROW_UNCOUNTED)
		emit_text(e, "%s  - no count, bytes or heap total: the collector was lost before it"
			  " stored this process's call counters (about a second in); Timed is the"
			  " calls stored (every CUDA call made before the cut, each timed; the"
			  " heap calls that were timed, a sample of an unknown number)\n",
			  t & (ROW_ESTIMATED | ROW_BIASED) ? "" : "\n");
	emit_text(e, "\n");
}

/* ---- memory ----------------------------------------------------------------- */

/* Not in the CSV, whose rows are calls and GPU activity. */
#define TJ (EMIT_IN_TABLE | EMIT_IN_JSON)

static const struct emit_col mem_cols[] = {
	{ "memory", "Memory", EMIT_STR, -28, TJ, 0, 0 },
	{ "space", NULL, EMIT_STR, 0, EMIT_IN_JSON, 0, 0 },
	{ "device", NULL, EMIT_INT, 0, EMIT_IN_JSON, 0, 0 },
	{ "peak_bytes", "Peak", EMIT_BYTES, 11, TJ, 0, 0 },
	{ "at_ns", "At", EMIT_NS, 12, TJ, 0, 0 },
	{ "live_end_bytes", "Live at end", EMIT_BYTES, 12, TJ, 0, 0 },
	{ "estimated", NULL, EMIT_BOOL, 0, EMIT_IN_JSON, 0, 0 },
	{ "complete", NULL, EMIT_BOOL, 0, EMIT_IN_JSON, 0, 0 },
	{ "note", "", EMIT_STR, -1, EMIT_IN_TABLE, 0, 3 },
};

#define NMEM (sizeof(mem_cols) / sizeof(mem_cols[0]))

static const struct emit_table mem_table = { "peaks", mem_cols, NMEM, 2, 0 };

static const char *space_name(enum model_space s)
{
	static const char *const names[] = { "host", "device", "managed", "pinned", "other" };

	return names[s];
}

static void memories(struct ctx *c, const struct model_proc *p)
{
	int any = 0;

	for (size_t i = 0; i < c->nmems; i++) {
		const struct model_mem *mm = c->mems[i];
		struct emit_val r[NMEM];
		int complete = model_proc_complete(p);

		if (mm->proc != p)
			continue;
		if (!any)
			emit_table_begin(c->e, &mem_table);
		any = 1;
		r[0] = ev_str(mm->label);
		r[1] = ev_str(space_name(mm->space));
		r[2] = ev_int(mm->device);
		r[3] = ev_approx(ev_real(mm->peak), mm->estimated);
		r[4] = ev_int(mm->peak_ns - p->start_ns);
		r[5] = ev_approx(ev_real(mm->live_end), mm->estimated);
		r[6] = ev_int(mm->estimated);
		r[7] = ev_int(complete);
		r[8] = ev_str(!complete ? mm->estimated
						  ? "(estimated from weighted samples; events were"
						    " lost: may be wrong either way)"
						  : "(events were lost: may be wrong either way)"
			      : mm->estimated ? "(estimated from weighted samples)"
			      : mm->late ? "(some events reached the collector out of time"
					   " order: the peak may be off)"
					 : "");
		emit_row(c->e, r);
	}
	if (any) {
		emit_table_end(c->e);
		emit_text(c->e, "\n");
	} else {
		emit_array_begin(c->e, "peaks");
		emit_array_end(c->e);
	}
}

/* ---- drops ----------------------------------------------------------------------- */

static const struct emit_col drop_cols[] = {
	{ "reason", NULL, EMIT_STR, 0, EMIT_IN_JSON, 0, 0 },
	{ "events", NULL, EMIT_INT, 0, EMIT_IN_JSON, 0, 0 },
};

static const struct emit_table drop_table = { "drops", drop_cols, 2, 0, 0 };

static void drops(struct ctx *c, const struct model_proc *p)
{
	emit_table_begin(c->e, &drop_table);
	for (size_t i = 0; i < p->ndrops; i++) {
		struct emit_val r[2] = { ev_str(p->drops[i].reason), ev_int(p->drops[i].events) };

		emit_row(c->e, r);
	}
	emit_table_end(c->e);
}

/* ---- a process --------------------------------------------------------------------- */

/* The run of c->calls that belongs to p: [*first, *first + n). */
static size_t calls_of(const struct ctx *c, const struct model_proc *p, size_t *first)
{
	size_t i = 0, n = 0;

	while (i < c->ncalls && c->calls[i]->proc->index < p->index)
		i++;
	*first = i;
	while (i + n < c->ncalls && c->calls[i + n]->proc == p)
		n++;
	return n;
}

static int process(struct ctx *c, const struct model_proc *p)
{
	size_t first, n = calls_of(c, p, &first);
	int err;

	emit_object_begin(c->e, NULL);
	proc_members(c, p);
	heading(c, p);
	functions(c, p, first, n);
	err = gpu_emit(c->e, c->m, p, c->o->full_names, c->max_rows);
	if (err)
		return err;
	memories(c, p);
	drops(c, p);
	emit_object_end(c->e);
	return 0;
}

/* ---- the brief form -------------------------------------------------------------- */

/* Whether p did CUDA work: a CUDA call, a GPU status or GPU rows. */
static int did_cuda(const struct ctx *c, const struct model_proc *p)
{
	size_t first, n = calls_of(c, p, &first);

	if (p->gpu_status)
		return 1;
	for (size_t i = first; i < first + n; i++)
		if (c->calls[i]->fn && !c->calls[i]->fn->heap)
			return 1;
	return 0;
}

static const struct ctx *brief_ctx;

static int cmp_brief(const void *x, const void *y)
{
	const struct model_proc *a = *(const struct model_proc *const *)x;
	const struct model_proc *b = *(const struct model_proc *const *)y;
	int ca = did_cuda(brief_ctx, a), cb = did_cuda(brief_ctx, b);

	if (ca != cb)
		return cb - ca;
	if (model_proc_wall(a) != model_proc_wall(b))
		return model_proc_wall(a) > model_proc_wall(b) ? -1 : 1;
	return a->index < b->index ? -1 : 1;
}

struct exe_line {
	const char *exe;
	size_t n, incomplete;
	double wall;
};

static int brief(struct ctx *c)
{
	size_t np = model_nselected(c->m), k = 0, nlines = 0;
	const struct model_proc **v = calloc(np + 1, sizeof(*v));
	struct exe_line *lines = calloc(np + 1, sizeof(*lines));
	char u[FMT_UNIT_MAX];
	int err = 0;

	if (!v || !lines) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < model_nprocs(c->m); i++)
		if (model_proc(c->m, i)->selected)
			v[k++] = model_proc(c->m, i);
	brief_ctx = c;
	qsort(v, np, sizeof(*v), cmp_brief);
	brief_ctx = NULL;
	c->max_rows = SUMMARY_BRIEF_ROWS;
	for (size_t i = 0; i < np && i < SUMMARY_BRIEF_PROCS && !err; i++)
		err = process(c, v[i]);
	/* The rest: one line per executable, in order of first appearance. */
	for (size_t i = SUMMARY_BRIEF_PROCS; i < np; i++) {
		const char *exe = v[i]->exe_base ? v[i]->exe_base : "?";
		size_t j;

		for (j = 0; j < nlines && strcmp(lines[j].exe, exe) != 0; j++)
			;
		if (j == nlines)
			lines[nlines++].exe = exe;
		lines[j].n++;
		lines[j].incomplete += v[i]->cut || v[i]->dropped;
		lines[j].wall += model_proc_wall(v[i]);
	}
	if (nlines)
		emit_text(c->e, "%zu more process%s:\n", np - SUMMARY_BRIEF_PROCS,
			  np - SUMMARY_BRIEF_PROCS == 1 ? "" : "es");
	for (size_t j = 0; j < nlines; j++) {
		emit_text(c->e, "  %s x%zu, %s total", fmt_esc(lines[j].exe), lines[j].n,
			  fmt_duration(u, sizeof(u), lines[j].wall));
		/* as incomplete as the processes shown in full, which say so */
		if (lines[j].incomplete)
			emit_text(c->e, "; WARNING: %zu of them incomplete (events lost, or the"
				  " recording cut short: shimmer summary says which)",
				  lines[j].incomplete);
		emit_text(c->e, "\n");
	}
	if (nlines)
		emit_text(c->e, "\n");
	if (c->o->path) {
		const char *db = fmt_esc(c->o->path);

		emit_text(c->e,
			  "store: %s\n"
			  "look further: shimmer bottlenecks %s    (findings, with advice)\n"
			  "              shimmer report %s    (one HTML page: charts, flame graphs)\n"
			  "              shimmer export %s -o trace.json    (a timeline for"
			  " ui.perfetto.dev)\n"
			  "              shimmer summary %s    (every process and row)\n"
			  "              shimmer leaks %s | peak | temporary | allocations\n"
			  "              shimmer compare %s OTHER.db\n",
			  db, db, db, db, db, db, db);
	}
out:
	free(v);
	free(lines);
	return err;
}

/* ---- entry points ---------------------------------------------------------------- */

int summary_write(struct model *m, FILE *out, const struct summary_opts *o)
{
	struct emit e;
	struct ctx c = { .m = m, .e = &e, .o = o };
	int err;

	model_want(m, MODEL_WANT_CALLS);
	/* (not for the screen at the end of `shimmer run`, which names no
	 * site: the count scans every Python frame of the store) */
	err = o->brief ? 0 : model_load_unnamed(m);
	if (!err)
		err = model_calls(m, &c.calls, &c.ncalls);
	if (!err)
		err = model_memories(m, &c.mems, &c.nmems);
	if (err)
		return err;
	emit_init(&e, out, o->brief ? EMIT_TABLE : o->fmt);
	if (o->by_rank) {
		err = byrank_emit(&e, m);
		return err ? err : emit_finish(&e);
	}
	if (!o->brief) {
		int64_t dropped = 0;
		size_t np = model_nselected(m);

		for (size_t i = 0; i < model_nprocs(m); i++)
			if (model_proc(m, i)->selected)
				dropped += model_proc(m, i)->dropped;
		emit_text(&e, "shimmer summary: %zu process%s\n", np, np == 1 ? "" : "es");
		if (dropped > 0)
			emit_text(&e, "WARNING: %lld events were dropped in all; see each process\n",
				  (long long)dropped);
		emit_text(&e, "\n");
	}
	emit_array_begin(&e, "processes");
	if (o->brief) {
		err = brief(&c);
	} else {
		for (size_t i = 0; i < model_nprocs(m) && !err; i++)
			if (model_proc(m, i)->selected)
				err = process(&c, model_proc(m, i));
	}
	emit_array_end(&e);
	if (err)
		return err;
	return emit_finish(&e);
}

/* ---- the command ------------------------------------------------------------------- */

static int summary_main(int argc, char **argv)
{
	struct model_filter f = model_filter_all();
	struct summary_opts o;
	const char *path = NULL;
	struct cli_args a = CLI_ARGS(&summary_command, argc, argv, &path, 1);
	struct model *m;
	int fmt = EMIT_TABLE, k, r, rc;

	summary_opts_init(&o);
	while ((k = cli_next(&a)) == CLI_ARG_OPTION) {
		if ((r = cli_format_opt(&a, emit_format_names, &fmt)) != 0 ||
		    (r = cli_filter_opt(&a, &f)) != 0 ||
		    (r = cli_flag_opt(&a, "--by-rank", &o.by_rank)) != 0 ||
		    (r = cli_flag_opt(&a, "--full-names", &o.full_names)) != 0) {
			if (r < 0)
				return CLI_EXIT_USAGE;
		} else if ((rc = cli_store_arg(&a)) != 0) {
			return rc;
		}
	}
	if (k != CLI_ARG_END)
		return k;
	o.fmt = fmt;
	if (model_open(path, &f, &m) < 0)
		return CLI_EXIT_ERROR;
	/* CSV rows have no room for it (the table and JSON say it in
	 * their own words): on stderr, as the export's files do */
	if (fmt == EMIT_CSV)
		present_warn(m, 1, SUMMARY_LOST_CSV, SUMMARY_CUT_CSV);
	rc = summary_write(m, stdout, &o);
	if (rc == -ENOMEM)
		cli_error("out of memory reading the store");
	model_close(m);
	return rc < 0 ? CLI_EXIT_ERROR : CLI_EXIT_OK;
}

const struct command summary_command = {
	.name = "summary",
	.brief = "per-process calls, GPU activity, memory and drops; or across ranks",
	.usage =
		"usage: shimmer summary DB [--format table|csv|json] [--pid PID] [--rank R]\n"
		"                          [--by-rank] [--full-names]\n"
		"\n"
		"For each traced process in the store DB: every intercepted function\n"
		"that was called, with its exact count and bytes and the time statistics\n"
		"of the calls that were timed (std dev is the population one); whether\n"
		"GPU activity was traced, kernels per name, copies per kind, memsets,\n"
		"ranges, per-stream and per-device GPU busy time (overlaps counted once)\n"
		"and CPU time blocked in synchronizing calls; peak and end-of-run live\n"
		"memory per memory (host, cuda:N, managed:N, pinned); dropped events.\n"
		"Where GPU activity was sampled (the default), kernel and copy counts and\n"
		"totals are estimates from the sampling windows, marked ~\n"
		"(SHIMMER_GPU=all records everything).\n"
		"Output goes to stdout; see docs/usage.md for the columns.\n"
		"\n"
		"  --format table   aligned tables in human units (default)\n"
		"  --format csv     one row per process and function, times in ns\n"
		"  --format json    one object with processes[]\n"
		"  --pid PID        only the processes with this pid\n"
		"  --rank R         only the processes of rank R\n"
		"  --by-rank        each function, kernel, copy and range across ranks:\n"
		"                   min, median, max, the slowest rank, the imbalance,\n"
		"                   and the straggler, if one rank is slowest in most steps\n"
		"  --full-names     kernel names in tables as recorded (CSV and JSON\n"
		"                   always have them)\n"
		"\n"
		"exit codes: 0 ok, 1 error (missing or unreadable store), 2 usage\n",
	.main = summary_main,
};
