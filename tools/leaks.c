/*
 * shimmer leaks; see leaks.h.
 *
 * One scan of allocations groups rows by (process, memory label, call
 * site).  Rows still live count as leaked.  For the regression, each
 * process has fit points t_0 < ... < t_{n-1}: the ends of its steps, or
 * LEAKS_TIME_POINTS evenly spaced instants up to its end.  A block is live
 * at t_k when alloc_ns <= t_k < free_ns, i.e. for k in [lb(alloc_ns),
 * lb(free_ns)) where lb is the first point at or after a time; each row
 * adds its weight to a difference array over that range, so the live
 * bytes of every group at every point cost one binary search per row and
 * one prefix sum per group, and no sort.
 *
 * The fit is ordinary least squares of live bytes on the step index (the
 * slope per step) and on t_k in seconds (the slope per second), over the
 * points after the warm-up; R^2 is that of the first fit (of the second
 * for a time fit).  A constant series has no R^2 (printed empty) and is
 * never growth.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fmt.h"
#include "leaks.h"
#include "map.h"
#include "store.h"

enum fit_kind { FIT_NONE, FIT_STEPS, FIT_TIME };

struct fit_proc {
	enum fit_kind kind;
	char *range;   /* the steps' range name */
	int64_t *t;    /* fit points, ns */
	size_t n;
	size_t warm;   /* points skipped */
};

struct group {
	struct map_key key; /* proc, label, site */
	double count;       /* live at the end; sum(weight / size) when sampled */
	double bytes;
	double *y;          /* difference array, then live bytes per point */
	double slope_step, slope_s, r2;
	int verdict;        /* -1 n/a, 0 ok, 1 growing */
};

struct fold_item {
	struct map_key key; /* proc, label, folded */
	double bytes;
};

struct leaks {
	const struct leaks_opts *o;
	struct sites s;
	struct fit_proc *fits; /* parallel to s.procs */
	struct map groups;
	struct map folds;
};

void leaks_opts_init(struct leaks_opts *o)
{
	*o = (struct leaks_opts){
		.threshold_per_step = LEAKS_THRESHOLD_PER_STEP,
		.threshold_per_s = LEAKS_THRESHOLD_PER_S,
		.warmup_steps = -1,
		.pid = -1,
	};
}

/* ---- fit points ------------------------------------------------------------ */

static const char default_range_sql[] =
	"SELECT s.text FROM ranges r JOIN strings s ON s.proc_id = r.proc_id AND s.id = r.name_id"
	" WHERE r.proc_id = ? AND r.kind = 'push' AND r.depth = 0 AND r.end_ns IS NOT NULL"
	" GROUP BY s.text ORDER BY count(*) DESC, s.text LIMIT 1";

/* Default steps: depth-0 push ranges; a named range: any of that name. */
static const char steps_sql[] =
	"SELECT r.end_ns FROM ranges r JOIN strings s ON s.proc_id = r.proc_id AND s.id = r.name_id"
	" WHERE r.proc_id = ?1 AND s.text = ?2 AND r.end_ns IS NOT NULL"
	" AND (?3 OR (r.kind = 'push' AND r.depth = 0)) ORDER BY r.end_ns";

static int load_steps(struct leaks *l, const struct site_proc *p, struct fit_proc *f)
{
	sqlite3_stmt *st = NULL;
	size_t cap = 0;
	int err, r;

	if (l->o->steps) {
		f->range = strdup(l->o->steps);
	} else {
		err = store_prepare(l->s.db, default_range_sql, &st);
		if (err)
			return err;
		sqlite3_bind_int64(st, 1, p->proc_id);
		r = store_step(l->s.db, st);
		f->range = r > 0 ? store_column_dup(st, 0, &err) : NULL;
		sqlite3_finalize(st);
		st = NULL;
		if (r < 0)
			return r;
		if (!f->range)
			return err;
	}
	if (!f->range)
		return -ENOMEM;
	err = store_prepare(l->s.db, steps_sql, &st);
	if (err)
		return err;
	sqlite3_bind_int64(st, 1, p->proc_id);
	sqlite3_bind_text(st, 2, f->range, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 3, l->o->steps != NULL);
	while ((r = store_step(l->s.db, st)) > 0) {
		err = array_grow(&f->t, &cap, f->n, sizeof(*f->t));
		if (err)
			goto out;
		f->t[f->n++] = sqlite3_column_int64(st, 0);
	}
	err = r;
out:
	sqlite3_finalize(st);
	return err;
}

static int load_fit(struct leaks *l, const struct site_proc *p, struct fit_proc *f)
{
	int err = load_steps(l, p, f);

	if (err)
		return err;
	if (f->n > 0) {
		f->kind = FIT_STEPS;
		f->warm = l->o->warmup_steps >= 0 ? (size_t)l->o->warmup_steps
						  : (size_t)(f->n * LEAKS_WARMUP_FRACTION);
		if (f->warm > f->n)
			f->warm = f->n;
		return 0;
	}
	free(f->range);
	f->range = NULL;
	if (p->end_ns <= p->start_ns)
		return 0; /* no time to fit over */
	f->t = calloc(LEAKS_TIME_POINTS, sizeof(*f->t));
	if (!f->t)
		return -ENOMEM;
	f->kind = FIT_TIME;
	f->n = LEAKS_TIME_POINTS;
	f->warm = (size_t)(f->n * LEAKS_WARMUP_FRACTION);
	for (size_t k = 0; k < f->n; k++)
		f->t[k] = p->start_ns + (int64_t)((double)(p->end_ns - p->start_ns) *
						  (double)(k + 1) / (double)f->n);
	return 0;
}

/* The first point at or after t. */
static size_t lower_bound(const int64_t *v, size_t n, int64_t t)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid] < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* ---- the scan ---------------------------------------------------------------- */

static const char scan_sql[] = "SELECT proc_id, space, device, stack_id, pystack_id, weight,"
			       " alloc_ns, free_ns, size FROM allocations";

static int scan_row(void *ctx, sqlite3_stmt *st)
{
	struct leaks *l = ctx;
	int64_t proc_id = sqlite3_column_int64(st, 0);
	const struct site_proc *p = sites_proc(&l->s, proc_id);
	int live = sqlite3_column_type(st, 7) == SQLITE_NULL;
	double w = sqlite3_column_double(st, 5);
	const struct fit_proc *f;
	struct map_key k;
	int64_t folded;
	struct group *g;
	size_t ka, kf;
	int err;

	if (!p)
		return 0; /* another pid, or a process row never stored */
	f = &l->fits[p - l->s.procs];
	err = sites_row(&l->s, st, 0, &k, &folded);
	if (err)
		return err;
	if (live || l->o->all_allocations) {
		struct map_key fk = { proc_id, k.a, folded };
		struct fold_item *fi = map_get(&l->folds, &fk);

		if (!fi)
			return -ENOMEM;
		fi->bytes += w;
	}
	g = map_get(&l->groups, &k);
	if (!g)
		return -ENOMEM;
	if (live) {
		g->count += sites_count(w, sqlite3_column_int64(st, 8));
		g->bytes += w;
	}
	if (f->kind == FIT_NONE)
		return 0;
	ka = lower_bound(f->t, f->n, sqlite3_column_int64(st, 6));
	kf = live ? f->n : lower_bound(f->t, f->n, sqlite3_column_int64(st, 7));
	if (ka >= kf)
		return 0;
	if (!g->y && !(g->y = calloc(f->n + 1, sizeof(*g->y))))
		return -ENOMEM;
	g->y[ka] += w;
	g->y[kf] -= w;
	return 0;
}

/* ---- the fit ------------------------------------------------------------------ */

/* Least squares of y on x over n points: slope and R^2 (NaN when y is constant). */
static void fit_line(const double *x, const double *y, size_t n, double *slope, double *r2)
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
	*r2 = sxx > 0 && syy > 0 ? sxy * sxy / (sxx * syy) : NAN;
}

static int fit_group(struct leaks *l, struct group *g, double *xs, double *xt)
{
	const struct fit_proc *f = &l->fits[sites_proc(&l->s, g->key.proc_id) - l->s.procs];
	size_t n = f->n - f->warm;
	double r2s = NAN, r2t = NAN;
	double *y;

	g->verdict = -1;
	g->slope_step = g->slope_s = 0;
	g->r2 = NAN;
	if (f->kind == FIT_NONE || n < LEAKS_MIN_POINTS)
		return 0;
	if (g->y)
		for (size_t k = 1; k < f->n; k++)
			g->y[k] += g->y[k - 1];
	y = g->y ? g->y + f->warm : NULL;
	if (!y) {
		/* Never live at a point: a flat zero series. */
		g->verdict = 0;
		return 0;
	}
	for (size_t k = 0; k < n; k++) {
		xs[k] = (double)(f->warm + k);
		xt[k] = (double)(f->t[f->warm + k] - f->t[0]) / 1e9;
	}
	fit_line(xt, y, n, &g->slope_s, &r2t);
	if (f->kind == FIT_STEPS) {
		fit_line(xs, y, n, &g->slope_step, &r2s);
		g->r2 = r2s;
		g->verdict = !isnan(r2s) && r2s >= LEAKS_MIN_R2 &&
			     g->slope_step >= l->o->threshold_per_step;
	} else {
		g->r2 = r2t;
		g->verdict = !isnan(r2t) && r2t >= LEAKS_MIN_R2 &&
			     g->slope_s >= l->o->threshold_per_s;
	}
	return 0;
}

/* ---- output --------------------------------------------------------------------- */

static const struct leaks *sort_ctx;

static int cmp_group(const void *x, const void *y)
{
	const struct group *a = *(struct group *const *)x, *b = *(struct group *const *)y;
	int c;

	c = sites_cmp_key(&sort_ctx->s, &a->key, &b->key);
	if (c)
		return c;
	if (a->verdict != b->verdict)
		return a->verdict > b->verdict ? -1 : 1;
	if (a->bytes != b->bytes)
		return a->bytes > b->bytes ? -1 : 1;
	return strcmp(sort_ctx->s.names.v[a->key.b], sort_ctx->s.names.v[b->key.b]);
}

static const char *fit_name(enum fit_kind k)
{
	return k == FIT_STEPS ? "steps" : k == FIT_TIME ? "time" : "none";
}

static const char *verdict_name(int v)
{
	return v > 0 ? "growing" : v == 0 ? "ok" : "n/a";
}

static void num(FILE *out, double v, const char *nan)
{
	if (isnan(v))
		fputs(nan, out);
	else
		fprintf(out, "%.17g", v);
}

static void write_csv_row(struct leaks *l, FILE *out, const struct group *g)
{
	const struct site_proc *p = sites_proc(&l->s, g->key.proc_id);
	const struct fit_proc *f = &l->fits[p - l->s.procs];

	fprintf(out, "%lld,%lld,", (long long)p->pid, (long long)p->proc_id);
	fmt_csv(out, l->s.labels.v[g->key.a]);
	fprintf(out, ",%lld,%lld,%d,", sites_round(g->count), sites_round(g->bytes),
		sites_estimated(&l->s, p, g->key.a));
	fmt_csv(out, l->s.names.v[g->key.b]);
	fprintf(out, ",%s,", fit_name(f->kind));
	fmt_csv(out, f->range);
	fprintf(out, ",%zu,", f->kind == FIT_NONE ? 0 : f->n - f->warm);
	if (f->kind == FIT_STEPS)
		num(out, g->slope_step, "");
	fputc(',', out);
	if (g->verdict >= 0)
		num(out, g->slope_s, "");
	fputc(',', out);
	num(out, g->r2, "");
	fprintf(out, ",%s\n", verdict_name(g->verdict));
}

static void write_json_group(struct leaks *l, FILE *out, const struct group *g, int first)
{
	const struct site_proc *p = sites_proc(&l->s, g->key.proc_id);
	const struct fit_proc *f = &l->fits[p - l->s.procs];

	fprintf(out, "%s\n    {\"device\": ", first ? "" : ",");
	fmt_json(out, l->s.labels.v[g->key.a]);
	fprintf(out, ", \"count\": %lld, \"bytes\": %lld, \"estimated\": %s, \"frame\": ",
		sites_round(g->count), sites_round(g->bytes),
		sites_estimated(&l->s, p, g->key.a) ? "true" : "false");
	fmt_json(out, l->s.names.v[g->key.b]);
	fputs(", \"slope_bytes_per_step\": ", out);
	num(out, f->kind == FIT_STEPS && g->verdict >= 0 ? g->slope_step : NAN, "null");
	fputs(", \"slope_bytes_per_s\": ", out);
	num(out, g->verdict >= 0 ? g->slope_s : NAN, "null");
	fputs(", \"r2\": ", out);
	num(out, g->r2, "null");
	fprintf(out, ", \"verdict\": \"%s\"}", verdict_name(g->verdict));
}

/* Returns whether the row's bytes are estimates. */
static int write_table_group(struct leaks *l, FILE *out, const struct group *g)
{
	const struct site_proc *p = sites_proc(&l->s, g->key.proc_id);
	const struct fit_proc *f = &l->fits[p - l->s.procs];
	char b[FMT_UNIT_MAX], ss[FMT_UNIT_MAX + 8], st[FMT_UNIT_MAX + 8], r2[16];

	fmt_bytes(b, sizeof(b), g->bytes);
	snprintf(ss, sizeof(ss), "-");
	snprintf(st, sizeof(st), "-");
	snprintf(r2, sizeof(r2), "-");
	if (g->verdict >= 0) {
		if (f->kind == FIT_STEPS)
			fmt_bytes(ss, sizeof(ss), g->slope_step);
		fmt_bytes(st, sizeof(st), g->slope_s);
		if (!isnan(g->r2))
			snprintf(r2, sizeof(r2), "%.3f", g->r2);
	}
	fprintf(out, "  %-10s %8lld %s%-11s %12s %12s %6s  %-8s %s\n", l->s.labels.v[g->key.a],
		sites_round(g->count), sites_estimated(&l->s, p, g->key.a) ? "~" : " ", b, ss, st,
		r2, verdict_name(g->verdict), l->s.names.v[g->key.b]);
	return sites_estimated(&l->s, p, g->key.a);
}

static void write_table_heading(struct leaks *l, FILE *out, const struct site_proc *p)
{
	const struct fit_proc *f = &l->fits[p - l->s.procs];

	fputc('\n', out);
	sites_heading(out, p);
	if (f->kind == FIT_STEPS)
		fprintf(out, "  growth fitted over %zu of %zu '%s' ranges (first %zu skipped as warm-up)\n",
			f->n - f->warm, f->n, f->range, f->warm);
	else if (f->kind == FIT_TIME)
		fprintf(out, "  no steps: growth fitted over time, %zu of %zu evenly spaced instants\n",
			f->n - f->warm, f->n);
	else
		fputs("  no steps and no duration: no growth fit\n", out);
	fprintf(out, "  %-10s %8s  %-11s %12s %12s %6s  %-8s %s\n", "MEMORY", "COUNT", "LIVE AT END",
		"PER STEP", "PER SECOND", "R2", "VERDICT", "CALL SITE");
}

static int cmp_fold(const void *x, const void *y)
{
	const struct fold_item *a = *(struct fold_item *const *)x, *b = *(struct fold_item *const *)y;

	int c = sites_cmp_key(&sort_ctx->s, &a->key, &b->key);

	if (c)
		return c;
	return strcmp(sort_ctx->s.folded.v[a->key.b], sort_ctx->s.folded.v[b->key.b]);
}

static int write_folded(struct leaks *l, FILE *out)
{
	struct fold_item **v = calloc(l->folds.n + 1, sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < l->folds.n; i++)
		v[i] = map_item(&l->folds, i);
	sort_ctx = l;
	qsort(v, l->folds.n, sizeof(*v), cmp_fold);
	for (size_t i = 0; i < l->folds.n; i++) {
		const struct site_proc *p = sites_proc(&l->s, v[i]->key.proc_id);

		if (sites_round(v[i]->bytes) > 0)
			fprintf(out, "pid %lld;%s;%s %lld\n", (long long)p->pid,
				l->s.labels.v[v[i]->key.a], l->s.folded.v[v[i]->key.b],
				sites_round(v[i]->bytes));
	}
	free(v);
	return 0;
}

static int write_report(struct leaks *l, FILE *out)
{
	struct group **v = calloc(l->groups.n + 1, sizeof(*v));
	size_t n = 0, j = 0;
	int first = 1, est = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < l->groups.n; i++) {
		struct group *g = map_item(&l->groups, i);

		if (g->count > 0 || g->verdict > 0)
			v[n++] = g;
	}
	sort_ctx = l;
	qsort(v, n, sizeof(*v), cmp_group);
	if (l->o->fmt == MEM_CSV)
		fputs("pid,proc_id,device,count,bytes,estimated,frame,fit,steps_range,points,"
		      "slope_bytes_per_step,slope_bytes_per_s,r2,verdict\n", out);
	if (l->o->fmt == MEM_JSON)
		fputs("{\"processes\": [", out);
	for (size_t pi = 0; pi < l->s.nprocs; pi++) {
		const struct site_proc *p = &l->s.procs[pi];
		const struct fit_proc *f = &l->fits[pi];

		if (l->o->fmt == MEM_JSON) {
			fprintf(out, "%s\n  {\"proc_id\": %lld, \"pid\": %lld, \"exe\": ", pi ? "," : "",
				(long long)p->proc_id, (long long)p->pid);
			fmt_json(out, p->exe);
			fprintf(out, ", \"fit\": \"%s\", \"steps_range\": ", fit_name(f->kind));
			fmt_json(out, f->range);
			fprintf(out, ", \"points\": %zu, \"warmup\": %zu, \"sites\": [",
				f->kind == FIT_NONE ? 0 : f->n - f->warm, f->warm);
			first = 1;
		} else if (l->o->fmt == MEM_TABLE) {
			write_table_heading(l, out, p);
		}
		for (; j < n && v[j]->key.proc_id == p->proc_id; j++) {
			if (l->o->fmt == MEM_CSV)
				write_csv_row(l, out, v[j]);
			else if (l->o->fmt == MEM_JSON)
				write_json_group(l, out, v[j], first);
			else
				est |= write_table_group(l, out, v[j]);
			first = 0;
		}
		if (l->o->fmt == MEM_JSON)
			fputs("]}", out);
	}
	if (l->o->fmt == MEM_JSON)
		fputs("\n]}\n", out);
	if (est)
		fputs("\n~: estimated from sampled allocations\n", out);
	free(v);
	return 0;
}

int leaks_write(sqlite3 *db, FILE *out, const struct leaks_opts *o)
{
	struct leaks l = { .o = o };
	double *xs = NULL, *xt = NULL;
	size_t maxn = 0;
	int err;

	l.groups.item_size = sizeof(struct group);
	l.folds.item_size = sizeof(struct fold_item);
	err = sites_open(&l.s, db, o->pid);
	if (err)
		goto out;
	l.fits = calloc(l.s.nprocs + 1, sizeof(*l.fits));
	if (!l.fits) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < l.s.nprocs; i++) {
		err = load_fit(&l, &l.s.procs[i], &l.fits[i]);
		if (err)
			goto out;
		if (l.fits[i].n > maxn)
			maxn = l.fits[i].n;
	}
	err = store_each_row(db, scan_sql, scan_row, &l);
	if (err)
		goto out;
	xs = calloc(maxn + 1, sizeof(*xs));
	xt = calloc(maxn + 1, sizeof(*xt));
	if (!xs || !xt) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < l.groups.n; i++)
		fit_group(&l, map_item(&l.groups, i), xs, xt);
	err = o->fmt == MEM_FOLDED ? write_folded(&l, out) : write_report(&l, out);
out:
	for (size_t i = 0; i < l.groups.n; i++)
		free(((struct group *)map_item(&l.groups, i))->y);
	for (size_t i = 0; l.fits && i < l.s.nprocs; i++) {
		free(l.fits[i].range);
		free(l.fits[i].t);
	}
	free(l.fits);
	free(xs);
	free(xt);
	map_free(&l.groups);
	map_free(&l.folds);
	sites_close(&l.s);
	return err;
}

/* ---- the command ------------------------------------------------------------------ */

static int leaks_main(int argc, char **argv);

const struct command leaks_command = {
	.name = "leaks",
	.brief = "memory still allocated at exit by call site, and steady growth per step",
	.usage =
		"usage: shimmer leaks DB [--format table|csv|json|folded] [--pid PID]\n"
		"                        [--steps RANGE_NAME] [--warmup-steps N]\n"
		"                        [--threshold-mb-per-step X] [--threshold-mb-per-s X]\n"
		"                        [--all-allocations]\n"
		"\n"
		"Per process, memory (host heap, cuda:N, pinned, managed:N) and call site:\n"
		"the blocks still allocated when the process ended (count, bytes; host\n"
		"bytes in sample mode are estimates, marked ~), and a least-squares fit\n"
		"of the site's live bytes at the end of each step (slope per step and\n"
		"per second, R^2).  Steps are the ranges named RANGE_NAME, by default\n"
		"the most frequent push range at depth 0; without any, the fit is over\n"
		"time.  A site is 'growing' when, after the warm-up, R^2 >= 0.8 and the\n"
		"slope reaches the threshold.  See docs/usage.md for the columns.\n"
		"\n"
		"  --format table|csv|json   output (default table)\n"
		"  --format folded           'outer;...;inner BYTES' lines of the leaked\n"
		"                            bytes, for flame graph tools\n"
		"  --all-allocations         with folded: every allocation's bytes\n"
		"  --pid PID                 only the processes with this pid\n"
		"  --steps RANGE_NAME        the range that marks a step\n"
		"  --warmup-steps N          steps skipped before the fit (default 20%)\n"
		"  --threshold-mb-per-step X growth flagged from X MiB per step (default 1)\n"
		"  --threshold-mb-per-s X    the same for fits over time (default 1)\n"
		"\n"
		"exit codes: 0 ok, 1 error (missing or unreadable store, no stacks), 2 usage\n",
	.main = leaks_main,
};

static const char *const leaks_formats[] = {
	[MEM_TABLE] = "table", [MEM_CSV] = "csv", [MEM_JSON] = "json", [MEM_FOLDED] = "folded",
	NULL,
};

static int leaks_main(int argc, char **argv)
{
	struct leaks_opts o;
	const char *path = NULL;
	sqlite3 *db;
	double v;
	int f, r, rc;

	leaks_opts_init(&o);
	for (int i = 1; i < argc; i++) {
		if (cli_is_help(argv[i]))
			return cli_help(&leaks_command);
		if ((r = cli_format_opt(&leaks_command, argc, argv, &i, leaks_formats, &f)) != 0) {
			if (r < 0)
				return CLI_EXIT_USAGE;
			o.fmt = f;
		} else if ((r = cli_number_opt(&leaks_command, argc, argv, &i,
						 "--threshold-mb-per-step", &v)) != 0) {
			if (r < 0)
				return CLI_EXIT_USAGE;
			o.threshold_per_step = v * 1024 * 1024;
		} else if ((r = cli_number_opt(&leaks_command, argc, argv, &i,
						 "--threshold-mb-per-s", &v)) != 0) {
			if (r < 0)
				return CLI_EXIT_USAGE;
			o.threshold_per_s = v * 1024 * 1024;
		} else if ((r = cli_int_opt(&leaks_command, argc, argv, &i, "--warmup-steps",
					    &o.warmup_steps)) != 0) {
			if (r < 0)
				return CLI_EXIT_USAGE;
		} else if ((r = cli_int_opt(&leaks_command, argc, argv, &i, "--pid", &o.pid)) != 0) {
			if (r < 0)
				return CLI_EXIT_USAGE;
		} else if ((r = cli_string_opt(&leaks_command, argc, argv, &i, "--steps",
					       &o.steps)) != 0) {
			if (r < 0)
				return CLI_EXIT_USAGE;
		} else if (strcmp(argv[i], "--all-allocations") == 0) {
			o.all_allocations = 1;
		} else if ((rc = cli_store_arg(&leaks_command, argv[i], &path)) != 0) {
			return rc;
		}
	}
	if (!path)
		return cli_usage_error(&leaks_command, "no store given");
	if (o.all_allocations && o.fmt != MEM_FOLDED)
		return cli_usage_error(&leaks_command, "--all-allocations goes with --format folded");
	if (store_open(path, &db) < 0)
		return CLI_EXIT_ERROR;
	rc = sites_result(leaks_write(db, stdout, &o));
	sqlite3_close(db);
	return rc;
}
