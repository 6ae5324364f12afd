/*
 * shimmer leaks; see leaks.h.
 *
 * The groups (process, memory, call site) are the model's: every block of
 * a site, with those never freed counted as leaked.  For the regression,
 * each process has fit points t_0 < ... < t_{n-1}: the ends of its steps,
 * or without steps its heap's checkpoints (model_heap_points: the
 * instants of every 2^j-th allocation, at most 256 of them: the instants by
 * which each 1/n of its allocations had been made, so that a program that
 * leaks only while it works is fitted over its work, not its idle spells).
 * The live bytes of each group at each point (a block is live at t_k when
 * alloc_ns <= t_k < free_ns) are the model's (model_groups_live_at): from
 * the rows, or, for a heap aggregated at ingest, from what the collector
 * kept at those very instants.
 *
 * The fit is ordinary least squares of live bytes on the step index (the
 * slope per step) and on t_k in seconds (the slope per second), over the
 * points after the warm-up; R^2 is that of the first fit (of the second
 * for a time fit).  A constant series has no R^2 (printed empty) and is
 * never growth.  The verdict (verdict() below) is withheld when the
 * process lost events: a lost free makes a freed block look leaked.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "emit.h"
#include "fmt.h"
#include "leaks.h"
#include "present.h"

enum fit_kind { FIT_NONE, FIT_STEPS, FIT_TIME };

struct fit_proc {
	enum fit_kind kind;
	const char *range; /* the steps' range name */
	const char *asked; /* --steps, or NULL */
	int64_t *t;        /* fit points, ns */
	size_t n;
	size_t warm;       /* points skipped */
};

enum verdict { V_NA = -1, V_OK = 0, V_GROWING = 1 };

struct group {
	double *y; /* difference array, then live bytes per point */
	double slope_step, slope_s, r2;
	double icpt_step, icpt_s; /* the fits' intercepts */
	enum verdict verdict;
	int fitted;      /* slope and R^2 were computed */
	int exact;       /* its live bytes at every point are known */
	const char *why; /* a withheld verdict's reason */
};

struct leaks {
	struct model *m;
	const struct leaks_opts *o;
	struct fit_proc *fits; /* per process (model_proc order) */
	struct model_groups g;
	struct group *groups;  /* parallel to g.v */
};

void leaks_opts_init(struct leaks_opts *o)
{
	*o = (struct leaks_opts){
		.threshold_per_step = LEAKS_THRESHOLD_PER_STEP,
		.threshold_per_s = LEAKS_THRESHOLD_PER_S,
		.warmup_steps = -1,
	};
}

/* ---- fit points ------------------------------------------------------------ */

static int cmp_i64(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;

	return (a > b) - (a < b);
}

static int load_fit(struct leaks *l, const struct model_proc *p, struct fit_proc *f)
{
	const struct model_steps *s;
	int err = model_steps(l->m, p, l->o->steps, &s);

	if (err)
		return err;
	f->asked = l->o->steps;
	if (s->n > 0) {
		f->kind = FIT_STEPS;
		f->range = s->name;
		f->n = s->n;
		f->t = malloc(s->n * sizeof(*f->t));
		if (!f->t)
			return -ENOMEM;
		memcpy(f->t, s->end, s->n * sizeof(*f->t));
		qsort(f->t, f->n, sizeof(*f->t), cmp_i64);
		f->warm = l->o->warmup_steps >= 0 ? (size_t)l->o->warmup_steps
						  : (size_t)((double)f->n * LEAKS_WARMUP_FRACTION);
		if (f->warm > f->n)
			f->warm = f->n;
		return 0;
	}
	{
		const int64_t *pt;
		size_t n;

		err = model_heap_points(l->m, p, &pt, &n);
		if (err || n == 0)
			return err; /* no allocations, no fit */
		f->t = malloc(n * sizeof(*f->t));
		if (!f->t)
			return -ENOMEM;
		memcpy(f->t, pt, n * sizeof(*f->t));
		f->kind = FIT_TIME;
		f->n = n;
		f->warm = (size_t)((double)f->n * LEAKS_WARMUP_FRACTION);
	}
	return 0;
}

/* Each group's live bytes at its process's fit points. */
static int live_at_points(struct leaks *l)
{
	size_t np = model_nprocs(l->m);
	const int64_t **t = calloc(np + 1, sizeof(*t));
	size_t *n = calloc(np + 1, sizeof(*n));
	double **y = calloc(l->g.n + 1, sizeof(*y));
	int *exact = calloc(l->g.n + 1, sizeof(*exact));
	int err = 0;

	if (!t || !n || !y || !exact) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < np; i++) {
		t[i] = l->fits[i].t;
		n[i] = l->fits[i].kind == FIT_NONE ? 0 : l->fits[i].n;
	}
	for (size_t gi = 0; gi < l->g.n && !err; gi++) {
		size_t k = n[l->g.v[gi].mem->proc->index];

		if (k && !(l->groups[gi].y = calloc(k + 1, sizeof(double))))
			err = -ENOMEM;
		y[gi] = l->groups[gi].y;
	}
	if (!err)
		err = model_groups_live_at(l->m, &l->g, t, n, y, exact);
	for (size_t gi = 0; gi < l->g.n && !err; gi++)
		l->groups[gi].exact = exact[gi];
out:
	free(t);
	free(n);
	free(y);
	free(exact);
	return err;
}

/* ---- the fit ------------------------------------------------------------------ */

/* Least squares of y on x over n points: slope, intercept and R^2 (NaN when
 * y is constant). */
static void fit_line(const double *x, const double *y, size_t n, double *slope, double *icpt,
		     double *r2)
{
	double mx = 0, my = 0, sxx = 0, sxy = 0, syy = 0;

	for (size_t i = 0; i < n; i++) {
		mx += x[i];
		my += y[i];
	}
	mx /= (double)n;
	my /= (double)n;
	for (size_t i = 0; i < n; i++) {
		sxx += (x[i] - mx) * (x[i] - mx);
		sxy += (x[i] - mx) * (y[i] - my);
		syy += (y[i] - my) * (y[i] - my);
	}
	*slope = sxx > 0 ? sxy / sxx : 0;
	*icpt = my - *slope * mx;
	*r2 = sxx > 0 && syy > 0 ? sxy * sxy / (sxx * syy) : NAN;
}

/*
 * Growth is steady when the live bytes rise along a line (R^2 >= the
 * minimum) at least as fast as the threshold.
 */
static enum verdict verdict(double slope, double r2, double threshold)
{
	return !isnan(r2) && r2 >= LEAKS_MIN_R2 && slope >= threshold ? V_GROWING : V_OK;
}

static void fit_group(struct leaks *l, size_t gi, double *xs, double *xt)
{
	const struct model_proc *p = l->g.v[gi].mem->proc;
	const struct fit_proc *f = &l->fits[p->index];
	struct group *g = &l->groups[gi];
	size_t n = f->n - f->warm;
	double r2s = NAN, r2t = NAN;
	double *y;

	g->verdict = V_NA;
	g->slope_step = g->slope_s = 0;
	g->r2 = NAN;
	if (f->kind == FIT_NONE) {
		g->why = "no steps and no allocations over time";
		return;
	}
	if (n < LEAKS_MIN_POINTS) {
		g->why = "too few points";
		return;
	}
	if (!g->exact) {
		g->why = "its live bytes are kept only at the heap's checkpoints (top-level ranges)";
		return;
	}
	y = g->y ? g->y + f->warm : NULL;
	g->fitted = 1;
	if (!y) {
		/* Never live at a point: a flat zero series. */
		g->verdict = V_OK;
	} else {
		for (size_t k = 0; k < n; k++) {
			xs[k] = (double)(f->warm + k);
			xt[k] = (double)(f->t[f->warm + k] - f->t[0]) / 1e9;
		}
		fit_line(xt, y, n, &g->slope_s, &g->icpt_s, &r2t);
		fit_line(xs, y, n, &g->slope_step, &g->icpt_step, &r2s);
		/* Steadiness along the steps, or along the allocations; the
		 * threshold per step, or per second. */
		g->r2 = r2s;
		if (f->kind == FIT_STEPS)
			g->verdict = verdict(g->slope_step, r2s, l->o->threshold_per_step);
		else
			g->verdict = verdict(g->slope_s, r2s, l->o->threshold_per_s);
		/* Over time, the rate is a second's growth: a run shorter than
		 * that must still have grown by it.  Every program that builds
		 * its state and exits rises along a line; gcc's assembler, 7
		 * ms and 284 KiB, read as "36.73 MiB a second". */
		if (f->kind != FIT_STEPS && g->verdict == V_GROWING &&
		    g->slope_s * (xt[n - 1] - xt[0]) < l->o->threshold_per_s)
			g->verdict = V_OK;
	}
	/* A handful of weighted samples draws a staircase of a few steps:
	 * neither a line nor its absence can be told from it. */
	if (l->g.v[gi].mem->estimated && l->g.v[gi].rows < LEAKS_MIN_SAMPLES) {
		g->verdict = V_NA;
		g->why = "too few samples";
	}
	/* A lost free looks like a leak, a lost allocation hides one; a
	 * process not ended yet may still free what is live now. */
	if (!model_proc_complete(p)) {
		g->verdict = V_NA;
		g->why = p->dropped_host ? "events were lost" : "the collector was lost";
	} else if (!p->end_known) {
		g->verdict = V_NA;
		g->why = "the process had not ended when read";
	}
}

/* ---- output --------------------------------------------------------------------- */

static const char *fit_name(enum fit_kind k)
{
	return k == FIT_STEPS ? "steps" : k == FIT_TIME ? "time" : "none";
}

static const char *verdict_name(enum verdict v)
{
	return v == V_GROWING ? "growing" : v == V_OK ? "ok" : "n/a";
}

static const struct emit_col cols[] = {
	{ "pid", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 },
	{ "proc_id", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 },
	{ "memory", "MEMORY", EMIT_STR, -10, 0, 0, 0 },
	{ "count", "COUNT", EMIT_INT, 8, 0, 0, 0 },
	{ "bytes", "LIVE AT END", EMIT_BYTES, -12, 0, 0, 2 },
	{ "estimated", NULL, EMIT_BOOL, 0, EMIT_IN_DATA, 0, 0 },
	{ "frame", NULL, EMIT_STR, 0, EMIT_IN_DATA, 0, 0 },
	{ "fit", NULL, EMIT_STR, 0, EMIT_IN_CSV, 0, 0 },
	{ "steps_range", NULL, EMIT_STR, 0, EMIT_IN_CSV, 0, 0 },
	{ "points", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 },
	{ "slope_bytes_per_step", "PER STEP", EMIT_BYTES, 12, 0, 1, 0 },
	{ "slope_bytes_per_s", "PER SECOND", EMIT_BYTES, 12, 0, 1, 0 },
	{ "r2", "R2", EMIT_REAL, 6, 0, 3, 0 },
	{ "verdict", "VERDICT", EMIT_STR, -8, 0, 0, 2 },
	{ "withheld", NULL, EMIT_STR, 0, EMIT_IN_DATA, 0, 0 },
	{ "complete", NULL, EMIT_BOOL, 0, EMIT_IN_CSV, 0, 0 },
	PRESENT_STACKS_COLS,
	{ "site", "CALL SITE", EMIT_STR, -1, EMIT_IN_TABLE, 0, 0 },
};

#define NCOLS (sizeof(cols) / sizeof(cols[0]))

static const struct emit_table sites_table = { "sites", cols, NCOLS, 2, 0 };

static void fit_heading(struct emit *e, const struct fit_proc *f)
{
	emit_kv(e, "fit", EMIT_STR, ev_str(fit_name(f->kind)));
	emit_kv(e, "steps_range", EMIT_STR, ev_str(f->kind == FIT_STEPS ? f->range : NULL));
	emit_kv(e, "points", EMIT_INT, ev_int(f->kind == FIT_NONE ? 0 : (int64_t)(f->n - f->warm)));
	emit_kv(e, "warmup", EMIT_INT, ev_int((int64_t)f->warm));
	if (f->kind == FIT_STEPS)
		emit_text(e, "  growth fitted over %zu of %zu '%s' ranges (first %zu skipped as"
			  " warm-up)\n", f->n - f->warm, f->n, fmt_esc(f->range), f->warm);
	else if (f->kind == FIT_TIME && f->asked)
		/* --steps named a range this process never closed (a typo, or
		 * another process's): say so, not a bare "no steps". */
		emit_text(e, "  no '%s' range (--steps): growth fitted over the allocations, at %zu"
			  " of %zu instants (each 1/%zu of them made)\n", fmt_esc(f->asked),
			  f->n - f->warm, f->n, f->n);
	else if (f->kind == FIT_TIME)
		emit_text(e, "  no steps: growth fitted over the allocations, at %zu of %zu instants"
			  " (each 1/%zu of them made)\n", f->n - f->warm, f->n, f->n);
	else
		emit_text(e, "  no steps and no allocations over time: no growth fit\n");
}

static struct emit_val num(double v)
{
	return isnan(v) ? ev_none() : ev_real(v);
}

static void row(struct leaks *l, struct emit *e, size_t gi)
{
	const struct model_group *s = &l->g.v[gi];
	const struct group *g = &l->groups[gi];
	const struct model_proc *p = s->mem->proc;
	const struct fit_proc *f = &l->fits[p->index];
	int est = s->mem->estimated, fitted = g->fitted;
	struct emit_val r[NCOLS] = {
		ev_int(p->pid),
		ev_int(p->proc_id),
		ev_str(s->mem->label),
		ev_approx(ev_int(llround(s->live_count)), est),
		ev_approx(ev_real(s->live_bytes), est),
		ev_int(est),
		ev_str(s->name),
		ev_str(fit_name(f->kind)),
		ev_str(f->kind == FIT_STEPS ? f->range : NULL),
		ev_int(f->kind == FIT_NONE ? 0 : (int64_t)(f->n - f->warm)),
		f->kind == FIT_STEPS && fitted ? num(g->slope_step) : ev_none(),
		fitted && f->kind != FIT_NONE ? num(g->slope_s) : ev_none(),
		fitted ? num(g->r2) : ev_none(),
		ev_str(verdict_name(g->verdict)),
		ev_str(g->verdict == V_NA ? g->why : NULL),
		ev_int(model_proc_complete(p)),
		PRESENT_STACKS_VALS(p),
		ev_str(s->name),
	};

	emit_row(e, r);
}

static const struct leaks *order_l;

static int cmp_rows(const void *x, const void *y)
{
	size_t a = *(const size_t *)x, b = *(const size_t *)y;
	const struct model_group *ga = &order_l->g.v[a], *gb = &order_l->g.v[b];
	const struct group *va = &order_l->groups[a], *vb = &order_l->groups[b];

	if (ga->mem->proc != gb->mem->proc)
		return ga->mem->proc->index < gb->mem->proc->index ? -1 : 1;
	if (ga->mem != gb->mem)
		return strcmp(ga->mem->label, gb->mem->label);
	if (va->verdict != vb->verdict)
		return va->verdict > vb->verdict ? -1 : 1;
	if (ga->live_bytes != gb->live_bytes)
		return ga->live_bytes > gb->live_bytes ? -1 : 1;
	return strcmp(ga->name, gb->name);
}

static int report(struct leaks *l, FILE *out)
{
	size_t *v = calloc(l->g.n + 1, sizeof(*v)), n = 0, j = 0;
	struct present_quiet quiet = { 0 };
	struct emit e;
	int est = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < l->g.n; i++)
		if (l->g.v[i].live_count > 0 || l->groups[i].verdict == V_GROWING)
			v[n++] = i;
	order_l = l;
	qsort(v, n, sizeof(*v), cmp_rows);
	order_l = NULL;
	emit_init(&e, out, l->o->fmt);
	emit_array_begin(&e, "processes");
	for (size_t pi = 0; pi < model_nprocs(l->m); pi++) {
		const struct model_proc *p = model_proc(l->m, pi);
		size_t rows = 0;

		if (!p->selected)
			continue;
		while (j + rows < n && l->g.v[v[j + rows]].mem->proc == p)
			rows++;
		if (present_quiet(&quiet, &e, p, rows))
			continue;
		emit_object_begin(&e, NULL);
		present_proc(&e, p, "blocks whose free was lost count as leaked, lost allocations"
			     " are missing: no verdict is given");
		present_stacks_refused(&e, p, "  ");
		present_unnamed(&e, p, "  ");
		fit_heading(&e, &l->fits[pi]);
		emit_table_begin(&e, &sites_table);
		for (; j < n && l->g.v[v[j]].mem->proc == p; j++) {
			row(l, &e, v[j]);
			est |= l->g.v[v[j]].mem->estimated;
		}
		emit_table_end(&e);
		emit_object_end(&e);
	}
	emit_array_end(&e);
	present_quiet_end(&quiet, &e, "nothing live at the end nor growing");
	present_estimated_note(&e, est, "");
	free(v);
	return emit_finish(&e);
}

static int folded(struct leaks *l, FILE *out)
{
	struct model_groups g;
	int err = model_heap_groups(l->m, l->o->all_allocations ? MODEL_ALLOCATED : MODEL_LIVE_END,
				    MODEL_BY_FOLDED, 0, &g);

	if (err)
		return err;
	for (size_t i = 0; i < g.n; i++)
		if (llround(g.v[i].bytes) > 0)
			fprintf(out, "pid %lld;%s;%s %lld\n", (long long)g.v[i].mem->proc->pid,
				g.v[i].mem->label, g.v[i].name, llround(g.v[i].bytes));
	model_groups_free(&g);
	if (fflush(out) == EOF || ferror(out)) {
		cli_error("cannot write the output");
		return -EIO;
	}
	return 0;
}

/* The groups, their series and their fits (not folded). */
static int analyze(struct leaks *l)
{
	struct model *m = l->m;
	double *xs = NULL, *xt = NULL;
	size_t maxn = 0;
	int err;

	l->fits = calloc(model_nprocs(m) + 1, sizeof(*l->fits));
	if (!l->fits)
		return -ENOMEM;
	for (size_t i = 0; i < model_nprocs(m); i++) {
		if (!model_proc(m, i)->selected)
			continue;
		err = load_fit(l, model_proc(m, i), &l->fits[i]);
		if (err)
			return err;
	}
	err = model_heap_groups(m, MODEL_ALLOCATED, MODEL_BY_SITE, 0, &l->g);
	if (err)
		return err;
	for (size_t i = 0; i < model_nprocs(m); i++)
		if (l->fits[i].n > maxn)
			maxn = l->fits[i].n;
	l->groups = calloc(l->g.n + 1, sizeof(*l->groups));
	xs = calloc(maxn + 1, sizeof(*xs));
	xt = calloc(maxn + 1, sizeof(*xt));
	if (!l->groups || !xs || !xt) {
		err = -ENOMEM;
		goto out;
	}
	err = live_at_points(l);
	for (size_t i = 0; !err && i < l->g.n; i++)
		fit_group(l, i, xs, xt);
out:
	free(xs);
	free(xt);
	return err;
}

static void leaks_free(struct leaks *l)
{
	for (size_t i = 0; l->groups && i < l->g.n; i++)
		free(l->groups[i].y);
	free(l->groups);
	model_groups_free(&l->g);
	for (size_t i = 0; l->fits && i < model_nprocs(l->m); i++)
		free(l->fits[i].t);
	free(l->fits);
}

int leaks_write(struct model *m, FILE *out, const struct leaks_opts *o)
{
	struct leaks l = { .m = m, .o = o };
	int err = present_need_stacks(m);

	if (!err)
		err = model_load_unnamed(m);
	if (err)
		return err;
	model_want(m, MODEL_WANT_SITES);
	if (o->fmt == PRESENT_FOLDED)
		return folded(&l, out);
	err = analyze(&l);
	if (!err)
		err = report(&l, out);
	leaks_free(&l);
	return err;
}

int leaks_each(struct model *m, const struct leaks_opts *o,
	       int (*cb)(void *ctx, const struct leaks_fit *fit), void *ctx)
{
	struct leaks l = { .m = m, .o = o };
	int err = present_need_stacks(m);

	if (!err)
		err = model_load_unnamed(m);
	if (err)
		return err;
	model_want(m, MODEL_WANT_SITES);
	err = analyze(&l);
	for (size_t i = 0; !err && i < l.g.n; i++) {
		const struct group *g = &l.groups[i];
		const struct fit_proc *f = &l.fits[l.g.v[i].mem->proc->index];
		struct leaks_fit fit = {
			.g = &l.g.v[i],
			.verdict = verdict_name(g->verdict),
			.withheld = g->verdict == V_NA ? g->why : NULL,
			.fit = fit_name(f->kind),
			.range = f->kind == FIT_STEPS ? f->range : NULL,
			.slope_step = g->fitted && f->kind == FIT_STEPS ? g->slope_step : NAN,
			.slope_s = g->fitted ? g->slope_s : NAN,
			.r2 = g->fitted ? g->r2 : NAN,
			.icpt_step = g->icpt_step,
			.icpt_s = g->icpt_s,
			.n = f->kind == FIT_NONE ? 0 : f->n,
			.warm = f->warm,
			.t = f->t,
			.y = g->y,
		};

		if (l.g.v[i].live_count > 0 || g->verdict == V_GROWING)
			err = cb(ctx, &fit);
	}
	leaks_free(&l);
	return err;
}

/* leaks_verdicts() is leaks_each() with the verdicts alone. */
struct verdicts {
	int (*cb)(void *ctx, const struct model_group *g, const char *verdict, const char *withheld);
	void *ctx;
};

static int verdict_of(void *ctx, const struct leaks_fit *fit)
{
	struct verdicts *v = ctx;

	return v->cb(v->ctx, fit->g, fit->verdict, fit->withheld);
}

int leaks_verdicts(struct model *m, const struct leaks_opts *o,
		   int (*cb)(void *ctx, const struct model_group *g, const char *verdict,
			     const char *withheld),
		   void *ctx)
{
	struct verdicts v = { cb, ctx };

	return leaks_each(m, o, verdict_of, &v);
}

/* ---- the command ------------------------------------------------------------------ */

static int leaks_main(int argc, char **argv);

const struct command leaks_command = {
	.name = "leaks",
	.brief = "memory still allocated at exit by call site, and steady growth per step",
	.usage =
		"usage: shimmer leaks DB [--format table|csv|json|folded] [--pid PID] [--rank R]\n"
		"                        [--steps RANGE_NAME] [--warmup-steps N]\n"
		"                        [--threshold-mb-per-step X] [--threshold-mb-per-s X]\n"
		"                        [--all-allocations] [--callers N] [--native]\n"
		"\n"
		"Per process, memory (host, cuda:N, managed:N, pinned) and call site:\n"
		"the blocks still allocated when the process ended (count, bytes; host\n"
		"bytes in sample mode are estimates, marked ~), and a least-squares fit\n"
		"of the site's live bytes at the end of each step (slope per step and\n"
		"per second, R^2).  Steps are the ranges named RANGE_NAME, by default\n"
		"the most frequent push range at depth 0; without any, the fit is over\n"
		"time.  A site is 'growing' when, after the warm-up, R^2 >= 0.8 and the\n"
		"slope reaches the threshold.  A process that lost events gets no\n"
		"verdict ('n/a'): a lost free would look like a leak.  See\n"
		"docs/usage.md for the columns.\n"
		"\n"
		"  --format table|csv|json   output (default table)\n"
		"  --format folded           'outer;...;inner BYTES' lines of the leaked\n"
		"                            bytes, for flame graph tools\n"
		"  --all-allocations         with folded: every allocation's bytes\n"
		"  --pid PID                 only the processes with this pid\n"
		"  --rank R                  only the processes of rank R\n"
		"  --steps RANGE_NAME        the range that marks a step\n"
		"  --warmup-steps N          steps skipped before the fit (default 20%)\n"
		"  --threshold-mb-per-step X growth flagged from X MiB per step (default 1)\n"
		"  --threshold-mb-per-s X    the same for fits over time, which must\n"
		"                            also rise X MiB in all (default 1)\n"
		"  --callers N               name each call site with N of its callers,\n"
		"                            \"site <- caller <- ...\" (default 0)\n"
		"  --native                  host allocations made from Python code by\n"
		"                            their native frames, not the Python line\n"
		"\n"
		"exit codes: 0 ok, 1 error (missing or unreadable store, no stacks), 2 usage\n",
	.main = leaks_main,
};

static int leaks_main(int argc, char **argv)
{
	struct cli_sites sites = { 0 };
	struct model_filter flt = model_filter_all();
	struct leaks_opts o;
	const char *path = NULL;
	struct cli_args a = CLI_ARGS(&leaks_command, argc, argv, &path, 1);
	struct model *m;
	double step_mb = -1, s_mb = -1; /* -1: not given */
	int k, r, rc;

	leaks_opts_init(&o);
	while ((k = cli_next(&a)) == CLI_ARG_OPTION) {
		if ((r = cli_format_opt(&a, present_mem_formats, &o.fmt)) != 0 ||
		    (r = cli_filter_opt(&a, &flt)) != 0 || (r = cli_sites_opt(&a, &sites)) != 0 ||
		    (r = cli_number_opt(&a, "--threshold-mb-per-step", &step_mb)) != 0 ||
		    (r = cli_number_opt(&a, "--threshold-mb-per-s", &s_mb)) != 0 ||
		    (r = cli_int_opt(&a, "--warmup-steps", &o.warmup_steps)) != 0 ||
		    (r = cli_string_opt(&a, "--steps", &o.steps)) != 0 ||
		    (r = cli_flag_opt(&a, "--all-allocations", &o.all_allocations)) != 0) {
			if (r < 0)
				return CLI_EXIT_USAGE;
		} else if ((rc = cli_store_arg(&a)) != 0) {
			return rc;
		}
	}
	if (k != CLI_ARG_END)
		return k;
	if (step_mb >= 0)
		o.threshold_per_step = step_mb * 1024 * 1024;
	if (s_mb >= 0)
		o.threshold_per_s = s_mb * 1024 * 1024;
	if (o.steps && !*o.steps)
		return cli_usage_error(&leaks_command, "--steps needs a range name");
	if (o.all_allocations && o.fmt != PRESENT_FOLDED)
		return cli_usage_error(&leaks_command, "--all-allocations goes with --format folded");
	if (model_open(path, &flt, &m) < 0)
		return CLI_EXIT_ERROR;
	model_set_callers(m, sites.callers);
	model_set_native(m, sites.native);
	/* folded lines are a flame graph's input: what they miss goes to stderr */
	if (o.fmt == PRESENT_FOLDED && model_schema_version(m) >= 3 &&
	    model_load_unnamed(m) == 0)
		present_warn_folded(m, !o.all_allocations);
	rc = leaks_write(m, stdout, &o);
	if (rc == -ENOMEM)
		cli_error("out of memory");
	model_close(m);
	return rc < 0 ? CLI_EXIT_ERROR : CLI_EXIT_OK;
}
