/*
 * shimmer compare A.db B.db: two runs side by side.
 *
 * Processes are paired by rank when both stores have ranks, else by
 * executable and argv, else by executable alone (a run with another batch
 * size has another argv), in store order; what is left is listed as in one
 * run only.  For each pair, one row per figure, all from the model: wall
 * time, steps (the most frequent top-level range: count, mean, median,
 * p90), GPU busy share and kernel time, each kernel, CUDA runtime
 * function, copy kind and range by time, each memory's peak and live bytes
 * at the end, growing sites (the leak verdicts), drops and GPU sampling
 * coverage, and each memory's call sites (count, bytes allocated, bytes at
 * the memory's peak, bytes live at the end: the model's groups, as
 * `allocations` and `peak` have them).  A row present in one run only says
 * so.
 *
 * Call sites pair by name (the site as sites.h renders it, with --callers
 * N its callers too), never by stack id or address: ids are per store and
 * pcs move with ASLR, while "function (file:line)", "module+0xOFFSET" (a
 * file address) and a Python "function (file.py:line)" name the same code
 * in two runs of one build.  Sites of one run with the same name add up.
 *
 * A row is marked changed when the two values differ by more than a run
 * can differ by itself: exact counts and bytes by anything, times by a
 * quarter and 100 us (totals of durations also by a thousandth of the
 * process's wall time: fig_total(); and, for totals and means of many
 * durations, means that differ by 3 standard errors: one slow call among
 * fast ones is noise; a median or p90 by the quarter and 100 us alone,
 * when 5 steps or more lie beyond it in each run),
 * shares by 5 points, estimates (sampled heap, sampled GPU activity) by
 * half.  --fail-if conditions (compare_fail_if() below)
 * exit 3 when a pair crosses one: a CI job's guard against a regression;
 * one that cannot be evaluated (a figure missing, or site_peak where a
 * full stack table left bytes at the peak without their site) exits 1.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "compare.h"
#include "emit.h"
#include "fmt.h"
#include "leaks.h"
#include "map.h"
#include "model.h"
#include "present.h"

#define COMPARE_EXIT_CROSSED 3
/* What lost events and a cut recording do to a process's figures. */
#define COMPARE_LOST "its figures below miss them (calls and times are lower bounds, memory" \
	" figures may be wrong either way), and --fail-if judges none they touch"
#define COMPARE_CUT "its figures below stop there, and --fail-if judges none of them"
#define TOP_ROWS 10           /* per section in the table */
#define QUIET_SHARE 0.01      /* a process this short of the longest may fold */
#define TIME_NOISE 0.25       /* relative change a time may show by itself */
#define TIME_FLOOR_NS 100000.0
#define TOTAL_WALL_SHARE 0.001 /* a total's floor besides: this share of the wall */
#define SHARE_NOISE 0.05
#define T_MIN 3.0
#define QUANTILE_BEYOND 5.0   /* steps a quantile needs on its short side */
#define ESTIMATE_NOISE 0.5
#define MAX_CONDS 16
#define TOP_SITES 10          /* per memory and ranking, in the table */

enum unit { U_NS, U_BYTES, U_COUNT, U_SHARE };

static const char *const unit_names[] = { "ns", "bytes", "count", "share" };

/* One figure of one process. */
struct fig {
	struct map_key key; /* 0, name index, 0 */
	enum unit unit;
	int section;        /* index into sections */
	double v;
	int est;            /* an estimate */
	/* The durations a time is made of, when known: their count, mean and
	 * standard deviation tell a change from noise. */
	double n, mean, sd;
	/* A total of durations: the least change that counts (ns), above
	 * TIME_FLOOR_NS; see fig_total(). */
	double floor;
	int few;            /* a quantile of too few steps to judge: never changed */
	int counted;        /* read from the collector's call counters alone: in
	                     * a process without them (calls_counted 0) it is
	                     * unknown, not absent */
	int64_t order;      /* sites: its memory's place (space, then device) */
	/* An estimate from sampled allocations: the variance sampling gives
	 * it (has_var: model_group's), else the sampling period (bytes), the
	 * weight one sample of a small block carries. */
	int has_var;
	double var, grain;
};

enum section { S_PROCESS, S_STEPS, S_GPU, S_KERNEL, S_API, S_COPY, S_RANGE, S_MEMORY, S_LEAKS,
	       S_SITES, S_N };

static const char *const sections[S_N] = { "process", "steps", "gpu", "kernel", "api",
					   "copy", "range", "memory", "leaks", "sites" };

/* A call site's figures in one memory: its key's b, the CSV's measure. */
enum measure { SM_COUNT, SM_ALLOCATED, SM_PEAK, SM_LIVE, SM_N };

static const char *const measure_names[SM_N] = { "allocations", "allocated", "at_peak",
						 "live_end" };

/* Every figure of one process, keyed by "section\tname" in names (a
 * site's: "sites\tMEMORY\tSITE", and its measure). */
struct prof {
	const struct model_proc *p;
	struct model *m;
	struct map figs;
	int has_steps;
	double step_mean, step_median, step_p90;
};

/* A model's call sites, both groupings read once for every pair. */
struct site_lists {
	struct model *m;
	struct model_groups all, peak; /* MODEL_ALLOCATED, MODEL_AT_PEAK */
	uint32_t *peak_of;             /* all's group -> peak's; UINT32_MAX: none */
};

struct cmp {
	struct strtab names;        /* shared by both sides of every pair */
	struct emit *e;
	int full_names;
	struct site_lists sl[2];
	struct cond *conds;
	size_t nconds;
	int crossed, unknown;
	double longest;              /* the longest wall time of a process selected */
	struct present_quiet quiet;  /* the pairs the table folds (quiet_pair()) */
};

static struct fig *last_fig;

/* Adds v to pf's figure (key, measure), made on first use. */
static int fig_put(struct cmp *c, struct prof *pf, int section, const char *key, int measure,
		   enum unit u, double v, int est)
{
	struct map_key k = { 0, 0, measure };
	struct fig *f;
	int err;

	err = strtab_index(&c->names, key, &k.a);
	if (err)
		return err;
	f = map_get(&pf->figs, &k);
	if (!f)
		return -ENOMEM;
	f->unit = u;
	f->section = section;
	f->v += v;
	f->est |= est;
	last_fig = f;
	return 0;
}

static int fig_add(struct cmp *c, struct prof *pf, int section, const char *name, enum unit u,
		   double v, int est)
{
	char key[600];

	snprintf(key, sizeof(key), "%s\t%.580s", sections[section], name ? name : "?");
	return fig_put(c, pf, section, key, 0, u, v, est);
}

/* The durations behind the figure fig_add() made last. */
static void fig_stats(double n, double mean, double sd)
{
	last_fig->n = n;
	last_fig->mean = mean;
	last_fig->sd = sd;
}

/*
 * The figure fig_add() made last is a total of durations (a function's
 * calls, a kernel's, a copy kind's or a range's, the GPU's kernel time) of
 * process p: it changed only by more than a thousandth of p's wall time.
 * The calls of one run share its machine's state (what else runs on the
 * CPU and its caches, the CPU's clock), which moves every short call
 * alike: no spread within a run shows it, so the test on means cannot,
 * and a total of a few short calls crosses TIME_FLOOR_NS by it alone (ten
 * cudaMalloc calls of about 15 us took 150 us in one run and 255 us in
 * another of the same program on a loaded machine; t_compare.sh).  What
 * moves a total by less than that share of the run is neither told from
 * that nor worth a look; a real change of many calls is far above it.
 */
static void fig_total(const struct model_proc *p)
{
	double floor = TOTAL_WALL_SHARE * model_proc_wall(p);

	if (floor > last_fig->floor)
		last_fig->floor = floor;
}

struct leak_ctx {
	struct cmp *c;
	struct prof *pf;
};

static int leak_site(void *ctx, const struct model_group *g, const char *verdict,
		     const char *withheld)
{
	struct leak_ctx *lc = ctx;
	char name[96];

	(void)withheld;
	if (g->mem->proc != lc->pf->p)
		return 0;
	snprintf(name, sizeof(name), "growing sites (%s)", g->mem->label);
	return fig_add(lc->c, lc->pf, S_LEAKS, name, U_COUNT, strcmp(verdict, "growing") == 0, 0);
}

/* m's call sites: every allocation and the blocks live at each memory's
 * peak, grouped by (memory, site) in the model's one heap pass. */
static int site_lists(struct cmp *c, struct model *m, struct site_lists **out)
{
	struct site_lists *s;
	int err;

	for (size_t i = 0; i < 2; i++)
		if (c->sl[i].m == m) {
			*out = &c->sl[i];
			return 0;
		}
	s = c->sl[0].m ? &c->sl[1] : &c->sl[0];
	err = model_heap_groups(m, MODEL_ALLOCATED, MODEL_BY_SITE, 0, &s->all);
	if (!err)
		err = model_heap_groups(m, MODEL_AT_PEAK, MODEL_BY_SITE, 0, &s->peak);
	if (!err && !(s->peak_of = malloc((s->all.n + 1) * sizeof(*s->peak_of))))
		err = -ENOMEM;
	if (err) {
		model_groups_free(&s->all);
		model_groups_free(&s->peak);
		return err;
	}
	/* The two groupings are of the same keys: a key's groups are one site. */
	for (size_t i = 0; i < s->all.n; i++)
		s->peak_of[i] = UINT32_MAX;
	for (size_t k = 0; k < s->all.nkeys && k < s->peak.nkeys; k++)
		if (s->all.of_key[k] != UINT32_MAX)
			s->peak_of[s->all.of_key[k]] = s->peak.of_key[k];
	s->m = m;
	*out = s;
	return 0;
}

static void site_lists_free(struct cmp *c)
{
	for (size_t i = 0; i < 2; i++) {
		model_groups_free(&c->sl[i].all);
		model_groups_free(&c->sl[i].peak);
		free(c->sl[i].peak_of);
		memset(&c->sl[i], 0, sizeof(c->sl[i]));
	}
}

/* p's call sites: four figures each, keyed by memory and site name. */
static int site_figs(struct cmp *c, struct model *m, const struct model_proc *p, struct prof *pf)
{
	struct site_lists *s;
	size_t lo = 0, hi, cap = 0;
	char *key = NULL;
	int err = site_lists(c, m, &s);

	if (err)
		return err;
	/* The groups are by memory, the memories by process. */
	hi = s->all.n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->all.v[mid].mem->proc->index < p->index)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; !err && i < s->all.n && s->all.v[i].mem->proc == p; i++) {
		const struct model_group *g = &s->all.v[i];
		const struct model_group *k = s->peak_of[i] == UINT32_MAX ? NULL
					      : &s->peak.v[s->peak_of[i]];
		const struct model_mem *mm = g->mem;
		size_t len = strlen(g->name) + strlen(mm->label) + 8;
		double v[SM_N] = { g->count, g->bytes, k ? k->bytes : 0, g->live_bytes };

		if (!g->rows && !(k && k->rows))
			continue;
		if (len > cap) {
			char *t = realloc(key, len);

			if (!t) {
				err = -ENOMEM;
				break;
			}
			key = t;
			cap = len;
		}
		snprintf(key, cap, "%s\t%s\t%s", sections[S_SITES], mm->label, g->name);
		for (int x = 0; !err && x < SM_N; x++) {
			err = fig_put(c, pf, S_SITES, key, x, x == SM_COUNT ? U_COUNT : U_BYTES, v[x],
				      mm->estimated);
			if (err)
				break;
			last_fig->order = ((int64_t)mm->space << 32) + mm->device + 1;
			if (!mm->estimated)
				continue;
			last_fig->has_var = 1;
			last_fig->var += x == SM_COUNT ? g->var_count
				       : x == SM_ALLOCATED ? g->var_bytes
				       : x == SM_PEAK ? (k ? k->var_bytes : 0)
						      : g->var_live;
		}
	}
	free(key);
	return err;
}

static int profile(struct cmp *c, struct model *m, const struct model_proc *p, struct prof *pf)
{
	struct model_calls *const *calls;
	struct model_mem *const *mems;
	const struct model_steps *s;
	struct model_gpu g;
	struct leaks_opts lo;
	struct leak_ctx lc = { c, pf };
	size_t n;
	double busy = 0, whole;
	int err;
	char name[128];
	/* what the process lost, and the stack captures its tables refused
	 * (not lost, but sites without their stack: rows of CSV and JSON say
	 * both) */
	const struct {
		const char *name;
		int64_t n;
	} counts[] = {
		{ "events lost (host)", p->dropped_host },
		{ "events lost (CUPTI)", p->dropped_gpu },
		{ "recording cut short (1: yes)", p->cut },
		{ "stacks refused (native)", p->stacks_refused },
		{ "stacks refused (Python)", p->pystacks_refused },
	};

	memset(pf, 0, sizeof(*pf));
	pf->p = p;
	pf->m = m;
	pf->figs.item_size = sizeof(struct fig);
	err = fig_add(c, pf, S_PROCESS, "wall time", U_NS, model_proc_wall(p), 0);
	for (size_t i = 0; !err && i < sizeof(counts) / sizeof(counts[0]); i++)
		err = fig_add(c, pf, S_PROCESS, counts[i].name, U_COUNT, (double)counts[i].n, 0);
	if (!err && p->sampling)
		err = fig_add(c, pf, S_PROCESS, "GPU sampling: share traced", U_SHARE,
			      p->sampling->share, 0);
	if (!err)
		err = model_steps(m, p, NULL, &s);
	if (!err && s->n > 0) {
		pf->has_steps = 1;
		pf->step_mean = s->mean_ns;
		pf->step_median = s->median_ns;
		pf->step_p90 = s->p90_ns;
		snprintf(name, sizeof(name), "'%.100s' count", s->name);
		err = fig_add(c, pf, S_STEPS, name, U_COUNT, (double)s->n, 0);
		snprintf(name, sizeof(name), "'%.100s' mean", s->name);
		if (!err && !(err = fig_add(c, pf, S_STEPS, name, U_NS, s->mean_ns, 0)))
			fig_stats((double)s->n, s->mean_ns, s->stddev_ns);
		/* The median and p90 carry no spread: the test on means
		 * does not apply to them (one 300 ms first step among 30 ms
		 * ones makes the means' difference insignificant while
		 * every other step doubled), and one outlying step moves an
		 * order statistic by one rank only. */
		snprintf(name, sizeof(name), "'%.100s' median", s->name);
		if (!err && !(err = fig_add(c, pf, S_STEPS, name, U_NS, s->median_ns, 0)))
			last_fig->few = s->n * 0.5 < QUANTILE_BEYOND;
		/* A quantile with fewer than QUANTILE_BEYOND steps beyond it
		 * (the rule of thumb for the binomial's normal approximation,
		 * which its confidence interval rests on) is one or two steps:
		 * the p90 of 10 steps is about the second slowest, and a
		 * loaded machine that delays two sleeps moves it by a third
		 * (t_compare.sh).  It is shown, never marked changed. */
		snprintf(name, sizeof(name), "'%.100s' p90", s->name);
		if (!err && !(err = fig_add(c, pf, S_STEPS, name, U_NS, s->p90_ns, 0)))
			last_fig->few = s->n * 0.1 < QUANTILE_BEYOND;
	}
	if (!err)
		err = model_gpu(m, p, &g);
	if (err)
		return err;
	for (size_t i = 0; !err && i < g.nkernels + g.ncopies + g.nranges; i++) {
		int k = i < g.nkernels ? S_KERNEL : i < g.nkernels + g.ncopies ? S_COPY : S_RANGE;
		const struct model_gpu_agg *a = k == S_KERNEL ? g.kernels[i]
						: k == S_COPY ? g.copies[i - g.nkernels]
							      : g.ranges[i - g.nkernels - g.ncopies];
		double scale = k == S_RANGE ? 1 : g.scale;

		err = fig_add(c, pf, k, a->name, U_NS, (double)a->sum * scale,
			      k != S_RANGE && p->sampling != NULL);
		if (!err) {
			fig_stats((double)a->st.n, a->st.mean, stats_stddev(&a->st));
			fig_total(p);
		}
	}
	for (size_t i = 0; i < g.ndevices; i++)
		busy += (double)g.devices[i]->busy_ns;
	whole = p->sampling ? (double)p->sampling->traced_ns : model_proc_wall(p);
	if (!err && (g.nkernels || g.ncopies))
		if (!(err = fig_add(c, pf, S_GPU, "kernel time", U_NS,
				    (double)g.kernel_total * g.scale, p->sampling != NULL)))
			fig_total(p);
	if (!err && g.ndevices && whole > 0)
		err = fig_add(c, pf, S_GPU, "busy share", U_SHARE, busy / whole, 0);
	if (!err)
		err = model_calls(m, &calls, &n);
	for (size_t i = 0; !err && i < n; i++) {
		const struct model_calls *k = calls[i];

		if (k->proc != p || !k->fn || k->fn->heap)
			continue;
		err = fig_add(c, pf, S_API, k->fn->name, U_NS, model_calls_total(k),
			      !model_calls_exact(k));
		if (!err) {
			fig_stats((double)k->st.n, k->st.mean, stats_stddev(&k->st));
			fig_total(p);
		}
		snprintf(name, sizeof(name), "%.100s calls", k->fn->name);
		if (!err)
			err = fig_add(c, pf, S_API, name, U_COUNT, (double)model_calls_count(k), 0);
		snprintf(name, sizeof(name), "%.100s bytes", k->fn->name);
		if (!err && k->bytes && !(err = fig_add(c, pf, S_API, name, U_BYTES,
							 (double)k->bytes, 0)))
			last_fig->counted = 1;
	}
	if (!err)
		err = model_memories(m, &mems, &n);
	for (size_t i = 0; !err && i < n; i++) {
		if (mems[i]->proc != p)
			continue;
		snprintf(name, sizeof(name), "%s peak", mems[i]->label);
		err = fig_add(c, pf, S_MEMORY, name, U_BYTES, mems[i]->peak, mems[i]->estimated);
		if (!err && mems[i]->estimated)
			last_fig->grain = (double)p->sample_bytes;
		snprintf(name, sizeof(name), "%s live at end", mems[i]->label);
		if (!err)
			err = fig_add(c, pf, S_MEMORY, name, U_BYTES, mems[i]->live_end,
				      mems[i]->estimated);
		if (!err && mems[i]->estimated)
			last_fig->grain = (double)p->sample_bytes;
	}
	leaks_opts_init(&lo);
	if (!err && model_schema_version(m) >= 3)
		err = leaks_verdicts(m, &lo, leak_site, &lc);
	if (!err && model_schema_version(m) >= 3)
		err = site_figs(c, m, p, pf);
	return err;
}

/* ---- pairs -------------------------------------------------------------- */

struct pair {
	const struct model_proc *a, *b;
	const char *how; /* "rank", "argv", "exe" */
};

static int same(const char *x, const char *y)
{
	return x && y ? strcmp(x, y) == 0 : x == y;
}

static size_t pair_up(struct model *ma, struct model *mb, struct pair *v)
{
	size_t na = model_nprocs(ma), nb = model_nprocs(mb), n = 0;
	char *used_a = calloc(na + 1, 1), *used_b = calloc(nb + 1, 1);
	int ranked_a = 0, ranked_b = 0;

	if (!used_a || !used_b) {
		free(used_a);
		free(used_b);
		return (size_t)-1;
	}
	for (size_t i = 0; i < na; i++)
		ranked_a |= model_proc(ma, i)->selected && model_proc(ma, i)->rank >= 0;
	for (size_t j = 0; j < nb; j++)
		ranked_b |= model_proc(mb, j)->selected && model_proc(mb, j)->rank >= 0;
	for (int how = 0; how < 3; how++) {
		if (how == 0 && !(ranked_a && ranked_b))
			continue;
		for (size_t i = 0; i < na; i++) {
			const struct model_proc *a = model_proc(ma, i);

			if (!a->selected || used_a[i])
				continue;
			for (size_t j = 0; j < nb; j++) {
				const struct model_proc *b = model_proc(mb, j);
				int ok;

				if (!b->selected || used_b[j])
					continue;
				if (how == 0)
					ok = a->rank >= 0 && a->rank == b->rank &&
					     same(a->exe_base, b->exe_base) && !a->parent == !b->parent;
				else if (how == 1)
					ok = same(a->exe, b->exe) && same(a->args, b->args);
				else
					ok = same(a->exe_base, b->exe_base);
				if (!ok)
					continue;
				used_a[i] = used_b[j] = 1;
				v[n++] = (struct pair){ a, b, how == 0 ? "rank" : how == 1 ? "argv" : "exe" };
				break;
			}
		}
	}
	for (size_t i = 0; i < na; i++)
		if (model_proc(ma, i)->selected && !used_a[i])
			v[n++] = (struct pair){ model_proc(ma, i), NULL, NULL };
	for (size_t j = 0; j < nb; j++)
		if (model_proc(mb, j)->selected && !used_b[j])
			v[n++] = (struct pair){ NULL, model_proc(mb, j), NULL };
	free(used_a);
	free(used_b);
	return n;
}

/* ---- --fail-if ----------------------------------------------------------- */

enum metric { M_STEP, M_STEP_MEDIAN, M_STEP_P90, M_WALL, M_KERNEL, M_BUSY, M_PEAK, M_API,
	      M_LEAKED, M_SITE_PEAK, M_N };

static const char *const metric_names[M_N] = {
	"step_time", "step_time_median", "step_time_p90", "wall_time", "kernel_time",
	"gpu_busy", "peak_memory", "api_time", "leaked_bytes", "site_peak",
};

struct cond {
	char text[128];
	enum metric metric;
	char memory[48];  /* peak_memory[LABEL], site_peak[LABEL]; empty: every memory */
	int op;           /* '>' '<', with ge: >= <= */
	int ge;
	int relative;     /* value is a percentage of A */
	double value;
	int crossed;
	int unknown;      /* not evaluated for some pair (an error line said why) */
};

/* What an amount of a metric is counted in: its unit's dimension. */
enum dim { D_NONE, D_TIME, D_BYTES };

static enum dim metric_dim(enum metric m)
{
	switch (m) {
	case M_BUSY:
		return D_NONE; /* a share: a bare fraction */
	case M_PEAK:
	case M_LEAKED:
	case M_SITE_PEAK:
		return D_BYTES;
	default:
		return D_TIME;
	}
}

/* The scale of a unit and, in *d, its dimension; -1 for no unit known. */
static double unit_scale(const char *u, enum dim *d)
{
	static const struct {
		const char *name;
		double scale;
		enum dim dim;
	} units[] = {
		{ "", 1, D_NONE },	     { "ns", 1, D_TIME },	  { "us", 1e3, D_TIME },
		{ "ms", 1e6, D_TIME },	     { "s", 1e9, D_TIME },	  { "B", 1, D_BYTES },
		{ "KiB", 1024.0, D_BYTES }, { "MiB", 1048576.0, D_BYTES },
		{ "GiB", 1073741824.0, D_BYTES }, { "KB", 1e3, D_BYTES }, { "MB", 1e6, D_BYTES },
		{ "GB", 1e9, D_BYTES },
	};

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (strcmp(u, units[i].name) == 0) {
			*d = units[i].dim;
			return units[i].scale;
		}
	return -1;
}

/*
 * One condition "METRIC OP VALUE"; 0, -EINVAL, -EDOM for a percentage
 * where only an amount will do, or -ERANGE for an amount in a unit of
 * another kind than the metric's (wall_time>+5GiB was read as 5.4 s,
 * leaked_bytes>+5ms as 5 MB, gpu_busy>+5ms as a share of 5 million that
 * nothing crosses) or with no unit for a time (wall_time>+5 was 5 ns).
 * A bare number of bytes is bytes; a bare 0 is 0 in any unit.
 */
static int parse_cond(const char *s, struct cond *c)
{
	size_t n = strcspn(s, "<>");
	const char *v;
	char name[64], *end, *br;
	double scale;
	enum dim d;

	memset(c, 0, sizeof(*c));
	snprintf(c->text, sizeof(c->text), "%s", s);
	if (!s[n] || n == 0 || n >= sizeof(name))
		return -EINVAL;
	memcpy(name, s, n);
	name[n] = 0;
	while (n > 0 && name[n - 1] == ' ')
		name[--n] = 0;
	/* METRIC[MEMORY], MEMORY not empty: [] would be every memory unsaid. */
	br = strchr(name, '[');
	if (br) {
		if (name[n - 1] != ']' || br + 1 == name + n - 1)
			return -EINVAL;
		snprintf(c->memory, sizeof(c->memory), "%.*s", (int)(name + n - 2 - br), br + 1);
		*br = 0;
	}
	for (c->metric = 0; c->metric < M_N && strcmp(metric_names[c->metric], name); c->metric++)
		;
	if (c->metric == M_N || (br && c->metric != M_PEAK && c->metric != M_SITE_PEAK))
		return -EINVAL;
	c->op = s[strcspn(s, "<>")];
	v = s + strcspn(s, "<>") + 1;
	if (*v == '=') {
		c->ge = 1;
		v++;
	}
	while (*v == ' ')
		v++;
	/* Decimal only (docs/usage.md): strtod also reads hex (0x10), an
	 * exponent (1e3) and "inf"; no unit holds an x or an e. */
	if (!strchr("+-.0123456789", *v) || strpbrk(v, "xXeE"))
		return -EINVAL;
	c->value = strtod(v, &end);
	if (end == v || !isfinite(c->value))
		return -EINVAL;
	if (strcmp(end, "%") == 0) {
		/* A site's change in percent: every new site is +inf%, and
		 * a 16-byte site that doubles crosses +50%. */
		c->relative = 1;
		return c->metric == M_SITE_PEAK ? -EDOM : 0;
	}
	scale = unit_scale(end, &d);
	if (scale < 0)
		return -EINVAL;
	/* A bare count of bytes is bytes; a bare time could be any unit. */
	if (d != metric_dim(c->metric) && c->value != 0 &&
	    !(d == D_NONE && metric_dim(c->metric) == D_BYTES))
		return -ERANGE;
	c->value *= scale;
	return 0;
}

/* Whether the change from a to b crosses c; *shown: the change as c reads it. */
static int crosses(const struct cond *c, double a, double b, double *shown)
{
	double d = b - a;

	if (c->relative) {
		if (a == 0)
			d = b == 0 ? 0 : INFINITY;
		else
			d = 100.0 * (b - a) / a;
	}
	*shown = d;
	if (c->op == '>')
		return c->ge ? d >= c->value : d > c->value;
	return c->ge ? d <= c->value : d < c->value;
}

/* ---- output --------------------------------------------------------------- */

static const struct emit_col cols[] = {
	{ "a_pid", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 },
	{ "b_pid", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 },
	{ "section", NULL, EMIT_STR, 0, EMIT_IN_DATA, 0, 0 },
	{ "name", NULL, EMIT_STR, 0, EMIT_IN_DATA, 0, 0 },
	{ "unit", NULL, EMIT_STR, 0, EMIT_IN_DATA, 0, 0 },
	{ "figure", "Figure", EMIT_STR, -36, EMIT_IN_TABLE, 0, 0 },
	{ "a", "A", EMIT_STR, 12, EMIT_IN_TABLE, 0, 0 },
	{ "b", "B", EMIT_STR, 12, EMIT_IN_TABLE, 0, 0 },
	{ "diff", "Diff", EMIT_STR, 13, EMIT_IN_TABLE, 0, 0 },
	{ "a", NULL, EMIT_REAL, 0, EMIT_IN_DATA, 0, 0 },
	{ "b", NULL, EMIT_REAL, 0, EMIT_IN_DATA, 0, 0 },
	{ "diff", NULL, EMIT_REAL, 0, EMIT_IN_DATA, 0, 0 },
	{ "ratio", "Ratio", EMIT_REAL, 7, 0, 2, 0 },
	{ "estimated", NULL, EMIT_BOOL, 0, EMIT_IN_DATA, 0, 0 },
	{ "changed", "", EMIT_STR, -1, EMIT_IN_TABLE, 0, 2 },
	{ "changed", NULL, EMIT_BOOL, 0, EMIT_IN_DATA, 0, 0 },
	{ "only", NULL, EMIT_STR, 0, EMIT_IN_DATA, 0, 0 },
	{ "memory", NULL, EMIT_STR, 0, EMIT_IN_DATA, 0, 0 },
	{ "measure", NULL, EMIT_STR, 0, EMIT_IN_DATA, 0, 0 },
	{ "unknown", NULL, EMIT_STR, 0, EMIT_IN_DATA, 0, 0 },
};

#define NCOLS (sizeof(cols) / sizeof(cols[0]))

static const struct emit_table rows_table = { "rows", cols, NCOLS, 2, 0 };

static void value_str(char *buf, size_t len, enum unit u, double v, int est)
{
	char tmp[FMT_UNIT_MAX];

	if (u == U_NS)
		fmt_duration(tmp, sizeof(tmp), v);
	else if (u == U_BYTES)
		fmt_bytes(tmp, sizeof(tmp), v);
	else if (u == U_SHARE)
		snprintf(tmp, sizeof(tmp), "%.1f%%", 100.0 * v);
	else
		snprintf(tmp, sizeof(tmp), "%.0f", v);
	snprintf(buf, len, "%s%s", est ? "~" : "", tmp);
}

/*
 * Whether two estimates from sampled allocations differ by no more than
 * sampling moves them: by at most three standard deviations of their
 * difference (a row missing on one side had no sample: 0, exactly).  The
 * variance is the groups' own where known; else, every sample taken for
 * a small block of the period's weight S, v / S samples: S v.  One small
 * block sampled in one run and not the other is no change: a shell
 * script's site of one sample (~512 KiB) in run B and none in run A was
 * "only in B", changed; a 10 MiB block (kept for sure, no variance) in
 * one run only is.
 */
static int sampling_noise(const struct fig *a, const struct fig *b)
{
	const struct fig *f = a ? a : b;
	double va = a ? a->v : 0, vb = b ? b->v : 0, var, grain;

	if ((!a || a->has_var) && (!b || b->has_var)) {
		var = (a ? a->var : 0) + (b ? b->var : 0);
	} else {
		grain = fmax(a ? a->grain : 0, b ? b->grain : 0);
		if (f->unit != U_BYTES || grain <= 0)
			return 0;
		var = grain * (fabs(va) + fabs(vb));
	}
	return fabs(vb - va) <= 3 * sqrt(var);
}

static int changed(const struct fig *a, const struct fig *b)
{
	double big;

	if (((a && a->est) || (b && b->est)) && sampling_noise(a, b))
		return 0;
	if (!a || !b)
		return 1;
	big = fabs(a->v) > fabs(b->v) ? fabs(a->v) : fabs(b->v);
	if (a->v == b->v || a->few || b->few)
		return 0;
	if (a->est || b->est)
		return fabs(b->v - a->v) > ESTIMATE_NOISE * big;
	switch (a->unit) {
	case U_NS:
		if (fabs(b->v - a->v) <= TIME_NOISE * big || fabs(b->v - a->v) <= TIME_FLOOR_NS ||
		    fabs(b->v - a->v) <= a->floor || fabs(b->v - a->v) <= b->floor)
			return 0;
		/* Totals of many durations: their means must differ by more
		 * than their spread explains (Welch's t above T_MIN); a count
		 * that changed has its own row. */
		if (a->n >= 2 && b->n >= 2) {
			double se = sqrt(a->sd * a->sd / a->n + b->sd * b->sd / b->n);

			if (se > 0 && fabs(b->mean - a->mean) / se < T_MIN)
				return 0;
		}
		return 1;
	case U_SHARE:
		return fabs(b->v - a->v) > SHARE_NOISE;
	default:
		return 1;
	}
}

struct row {
	int section;
	size_t name;
	const struct fig *a, *b;
	double key;
	const char *str;    /* names.v[name] */
};

/* By section; then the larger value first, or sites by memory, name and
 * measure (a site's four rows together). */
static int cmp_row(const void *x, const void *y)
{
	const struct row *r = x, *s = y;
	const struct fig *f = r->a ? r->a : r->b, *g = s->a ? s->a : s->b;
	int d;

	if (r->section != s->section)
		return r->section - s->section;
	if (r->section == S_SITES) {
		if (f->order != g->order)
			return f->order < g->order ? -1 : 1;
		d = strcmp(r->str, s->str);
		return d ? d : (int)(f->key.b - g->key.b);
	}
	if (r->key != s->key)
		return r->key > s->key ? -1 : 1;
	return r->name < s->name ? -1 : r->name > s->name;
}

/* A site's memory label (into buf) and name, from its key
 * "sites\tMEMORY\tSITE". */
static const char *site_of_key(const char *key, char *buf, size_t len)
{
	const char *mem = strchr(key, '\t') + 1, *name = strchr(mem, '\t') + 1;

	snprintf(buf, len, "%.*s", (int)(name - 1 - mem), mem);
	return name;
}

/* kname: a kernel's name as the table shows it (fmt_short_names() over the
 * pair's kernels), NULL for its short name alone. */
static void emit_row_of(struct cmp *c, const struct pair *pr, const struct row *r,
			const char *kname)
{
	const struct fig *f = r->a ? r->a : r->b;
	const char *name = strchr(c->names.v[r->name], '\t') + 1;
	char shown[300], av[40], bv[40], dv[48], shortname[256], mem[64] = "";
	int ch = changed(r->a, r->b), est = (r->a && r->a->est) || (r->b && r->b->est);
	struct emit_val v[NCOLS];
	/* A side without the figure that could not have it: its process's
	 * counters never reached the store (a recording cut before the
	 * collector's first count write): unknown there, not absent. */
	int unk_a = !r->a && f->counted && pr->a && !pr->a->calls_counted;
	int unk_b = !r->b && f->counted && pr->b && !pr->b->calls_counted;

	if (unk_a || unk_b)
		ch = 0;
	if (f->section == S_KERNEL && !c->full_names && !kname)
		kname = fmt_short_name(shortname, sizeof(shortname), name);
	if (f->section == S_SITES)
		name = site_of_key(c->names.v[r->name], mem, sizeof(mem));
	snprintf(shown, sizeof(shown), "%s %s", sections[f->section],
		 f->section == S_KERNEL && !c->full_names ? kname : name);
	snprintf(av, sizeof(av), "-");
	snprintf(bv, sizeof(bv), "-");
	snprintf(dv, sizeof(dv), "-");
	if (r->a)
		value_str(av, sizeof(av), f->unit, r->a->v, r->a->est);
	else if (unk_a)
		snprintf(av, sizeof(av), "?");
	if (r->b)
		value_str(bv, sizeof(bv), f->unit, r->b->v, r->b->est);
	else if (unk_b)
		snprintf(bv, sizeof(bv), "?");
	if (r->a && r->b) {
		char t[40];

		value_str(t, sizeof(t), f->unit, fabs(r->b->v - r->a->v), 0);
		snprintf(dv, sizeof(dv), "%s%s", r->b->v >= r->a->v ? "+" : "-", t);
	}
	v[0] = pr->a ? ev_int(pr->a->pid) : ev_none();
	v[1] = pr->b ? ev_int(pr->b->pid) : ev_none();
	v[2] = ev_str(sections[f->section]);
	v[3] = ev_str(name);
	v[4] = ev_str(unit_names[f->unit]);
	v[5] = ev_str(shown);
	v[6] = ev_str(av);
	v[7] = ev_str(bv);
	v[8] = ev_str(dv);
	v[9] = r->a ? ev_real(r->a->v) : ev_none();
	v[10] = r->b ? ev_real(r->b->v) : ev_none();
	v[11] = r->a && r->b ? ev_real(r->b->v - r->a->v) : ev_none();
	v[12] = r->a && r->b && r->a->v != 0 ? ev_real(r->b->v / r->a->v) : ev_none();
	v[13] = ev_int(est);
	v[14] = ev_str(unk_a ? "unknown in A (no call counters)"
		       : unk_b ? "unknown in B (no call counters)"
		       : !r->a ? "only in B" : !r->b ? "only in A" : ch ? "changed" : "");
	v[15] = ev_int(ch);
	v[16] = ev_str(unk_a || unk_b ? NULL : !r->a ? "b" : !r->b ? "a" : NULL);
	v[17] = ev_str(f->section == S_SITES ? mem : NULL);
	v[18] = ev_str(f->section == S_SITES ? measure_names[f->key.b] : NULL);
	v[19] = ev_str(unk_a ? "a" : unk_b ? "b" : NULL);
	emit_row(c->e, v);
}

static void proc_line(struct emit *e, const char *side, const struct model_proc *p)
{
	emit_object_begin(e, side);
	emit_kv(e, "proc_id", EMIT_INT, ev_int(p->proc_id));
	emit_kv(e, "pid", EMIT_INT, ev_int(p->pid));
	emit_kv(e, "rank", EMIT_INT, p->rank >= 0 ? ev_int(p->rank) : ev_none());
	emit_kv(e, "exe", EMIT_STR, ev_str(p->exe));
	emit_kv(e, "argv", EMIT_RAW, ev_str(p->argv_json));
	emit_text(e, "  %s: pid %lld", side, (long long)p->pid);
	if (p->rank >= 0)
		emit_text(e, " (rank %lld)", (long long)p->rank);
	emit_text(e, " %s\n", fmt_esc(p->args ? p->args : p->exe ? p->exe : "?"));
	/* the process rows count the lost events; the table says what they,
	 * and a cut recording, do to the figures (and --fail-if withholds) */
	emit_kv(e, "complete", EMIT_BOOL, ev_int(!p->cut && !p->dropped));
	present_incomplete(e, p, "    ", 1, COMPARE_LOST, COMPARE_CUT);
	present_stacks_refused(e, p, "    ");
	present_unnamed(e, p, "    ");
	emit_object_end(e);
}

/* The figure of prof named "section\tname", or NULL. */
static const struct fig *fig_named(const struct cmp *c, const struct prof *pf, const char *key)
{
	for (size_t i = 0; i < pf->figs.n; i++) {
		const struct fig *f = map_item(&pf->figs, i);

		if (strcmp(c->names.v[f->key.a], key) == 0)
			return f;
	}
	return NULL;
}

/* Whether figure key (its name after the tab) counts towards metric k:
 * the sums of api_time and leaked_bytes, each memory of peak_memory. */
static int of_metric(const struct cond *k, const char *key)
{
	const char *name = strchr(key, '\t') + 1;
	size_t len = strlen(name), m = strlen(k->memory);

	if (k->metric == M_API)
		return strncmp(key, "api\t", 4) == 0 && (len < 6 || strcmp(name + len - 6, " calls")) &&
		       (len < 6 || strcmp(name + len - 6, " bytes"));
	if (k->metric == M_LEAKED)
		return strncmp(key, "memory\t", 7) == 0 && len > 12 &&
		       strcmp(name + len - 12, " live at end") == 0;
	/* peak_memory */
	return strncmp(key, "memory\t", 7) == 0 && len > 5 && strcmp(name + len - 5, " peak") == 0 &&
	       (!m || (strncmp(name, k->memory, m) == 0 && name[m] == ' '));
}

static void cross(struct cmp *c, struct cond *k, const struct pair *pr, const char *what,
		  double a, double b)
{
	double shown;

	if (!crosses(k, a, b, &shown))
		return;
	k->crossed = 1;
	c->crossed = 1;
	emit_text(c->e, "FAIL: %s: %s%spid %lld -> pid %lld: %+.1f%s\n", fmt_esc(k->text),
		  fmt_esc(what ? what : ""), what ? ", " : "", (long long)pr->a->pid,
		  (long long)pr->b->pid, shown, k->relative ? "%" : "");
}

/* Whether fig f is a site's bytes at the peak that condition k reads. */
static int site_peak_of(const struct cmp *c, const struct cond *k, const struct fig *f)
{
	char mem[64];

	if (f->section != S_SITES || f->key.b != SM_PEAK)
		return 0;
	site_of_key(c->names.v[f->key.a], mem, sizeof(mem));
	return !k->memory[0] || strcmp(mem, k->memory) == 0;
}

/* Whether pf has bytes at the peak without a site ("(no stack)", as
 * sites.c names them) in the memory that k reads. */
static int unsited_at_peak(const struct cmp *c, const struct cond *k, const struct prof *pf)
{
	char mem[64];

	for (size_t x = 0; x < pf->figs.n; x++) {
		const struct fig *f = map_item(&pf->figs, x);

		if (site_peak_of(c, k, f) && f->v > 0 &&
		    strcmp(site_of_key(c->names.v[f->key.a], mem, sizeof(mem)), "(no stack)") == 0)
			return 1;
	}
	return 0;
}

/* site_peak: each site on its own, one in one run only against 0 (a new
 * site holding 1 GiB at the peak is the regression it guards against).
 * -1: no site of the memory in one run; -2: not evaluated, one error line
 * said why. */
static int check_site_peak(struct cmp *c, struct cond *k, const struct pair *pr,
			   const struct prof *pa, const struct prof *pb)
{
	int in_a = 0, in_b = 0;

	/* Where the shim's native stack table was full, the allocations of
	 * the call paths that came after it, unless a Python line names them,
	 * count under (no stack), not at their sites: which paths those are
	 * depends on the order they came in, so a site's bytes can move
	 * between runs that do the same; where none was live at the peak,
	 * every site's bytes there are whole.  Where the Python table was
	 * full, an allocation is named by its native site instead of its
	 * Python line, unseen. */
	for (int side = 0; side < 2; side++) {
		const struct model_proc *p = side ? pr->b : pr->a;

		if (!p->pystacks_refused &&
		    !(p->stacks_refused && unsited_at_peak(c, k, side ? pb : pa)))
			continue;
		cli_error("--fail-if %s: the shim's stack table was full in %s (pid %lld: %lld stack"
			  " captures refused): bytes at the peak are missing from their call sites;"
			  " not evaluated", k->text, side ? "B" : "A", (long long)p->pid,
			  (long long)(p->stacks_refused + p->pystacks_refused));
		return -2;
	}

	for (size_t x = 0; x < pa->figs.n && !in_a; x++)
		in_a = site_peak_of(c, k, map_item(&pa->figs, x));
	for (size_t x = 0; x < pb->figs.n && !in_b; x++)
		in_b = site_peak_of(c, k, map_item(&pb->figs, x));
	if (!in_a || !in_b)
		return -1;
	for (int side = 0; side < 2; side++) {
		const struct prof *p = side ? pb : pa, *o = side ? pa : pb;

		for (size_t x = 0; x < p->figs.n; x++) {
			const struct fig *f = map_item(&p->figs, x);
			const struct fig *g = map_find(&o->figs, &f->key);
			char mem[64], what[400];
			const char *name;

			if (!site_peak_of(c, k, f) || (side && g))
				continue;
			name = site_of_key(c->names.v[f->key.a], mem, sizeof(mem));
			snprintf(what, sizeof(what), "%.60s %.300s", mem, name);
			if (side)
				cross(c, k, pr, what, 0, f->v);
			else
				cross(c, k, pr, what, f->v, g ? g->v : 0);
		}
	}
	return 1;
}

/*
 * Why k's verdict on p's figures cannot be supported, or NULL: a recording
 * cut short, or with no end recorded, has figures that stop at the cut or
 * the last event (every metric); events lost
 * by the rings (heap calls, CUDA calls, ranges) leave the steps, call
 * times and memory figures short or wrong either way, but not the wall
 * time (its end is recorded) nor the GPU's (its records wait for room);
 * what CUPTI lost, those.  Into buf.
 */
static const char *unsupported(const struct cond *k, const struct model_proc *p, char *buf,
			       size_t len)
{
	int gpu = k->metric == M_KERNEL || k->metric == M_BUSY;

	if (p->cut)
		snprintf(buf, len, "its recording was cut short (the collector was lost): its"
			 " figures stop there");
	else if (!p->end_known)
		snprintf(buf, len, "no end recorded (still running, or its collector died): its"
			 " figures stop at its last event");
	else if (p->dropped_host && !gpu && k->metric != M_WALL)
		snprintf(buf, len, "it lost %lld events before the store: its figures miss them",
			 (long long)p->dropped_host);
	else if (p->dropped_gpu && gpu)
		snprintf(buf, len, "CUPTI lost %lld of its records: its GPU figures miss them",
			 (long long)p->dropped_gpu);
	else
		return NULL;
	return buf;
}

/* The --fail-if conditions on the pair's figures. */
static void check_conds(struct cmp *c, const struct pair *pr, const struct prof *pa,
			const struct prof *pb)
{
	static const char *const single[M_N] = {
		[M_WALL] = "process\twall time", [M_KERNEL] = "gpu\tkernel time",
		[M_BUSY] = "gpu\tbusy share",
	};

	for (size_t i = 0; i < c->nconds; i++) {
		struct cond *k = &c->conds[i];
		double sa = 0, sb = 0;
		int any = 0;
		char why[160];

		/* One run's host memory holds pymalloc's arenas, the other's
		 * leaves them out: their memory differs by what was recorded. */
		if ((k->metric == M_PEAK || k->metric == M_LEAKED || k->metric == M_SITE_PEAK) &&
		    !pr->a->host_unseen != !pr->b->host_unseen) {
			const struct model_proc *p = pr->a->host_unseen ? pr->a : pr->b;

			cli_error("--fail-if %s: pid %lld in %s: %s; not evaluated", k->text,
				  (long long)p->pid, p == pr->b ? "B" : "A", p->host_unseen);
			c->unknown = k->unknown = 1;
			continue;
		}
		for (int side = 0; side < 2 && !any; side++) {
			const struct model_proc *p = side ? pr->b : pr->a;

			if (!unsupported(k, p, why, sizeof(why)))
				continue;
			cli_error("--fail-if %s: pid %lld in %s: %s; not evaluated", k->text,
				  (long long)p->pid, side ? "B" : "A", why);
			c->unknown = k->unknown = 1;
			any = 1;
		}
		if (any)
			continue;
		if (k->metric <= M_STEP_P90) {
			if (!pa->has_steps || !pb->has_steps) {
				cli_error("--fail-if %s: no steps in %s (pid %lld): nothing to compare",
					  k->text, pa->has_steps ? "B" : "A",
					  (long long)(pa->has_steps ? pr->b->pid : pr->a->pid));
				c->unknown = k->unknown = 1;
				continue;
			}
			cross(c, k, pr, NULL,
			      k->metric == M_STEP ? pa->step_mean
			      : k->metric == M_STEP_MEDIAN ? pa->step_median : pa->step_p90,
			      k->metric == M_STEP ? pb->step_mean
			      : k->metric == M_STEP_MEDIAN ? pb->step_median : pb->step_p90);
			continue;
		}
		if (k->metric == M_SITE_PEAK) {
			any = check_site_peak(c, k, pr, pa, pb);
		} else if (single[k->metric]) {
			const struct fig *fa = fig_named(c, pa, single[k->metric]);
			const struct fig *fb = fig_named(c, pb, single[k->metric]);

			if (fa && fb)
				cross(c, k, pr, NULL, fa->v, fb->v);
			else
				any = -1;
		} else {
			/* Each memory on its own for peaks; sums otherwise. */
			for (size_t x = 0; x < pa->figs.n; x++) {
				const struct fig *f = map_item(&pa->figs, x);
				const struct fig *g = map_find(&pb->figs, &f->key);
				const char *key = c->names.v[f->key.a];

				if (!of_metric(k, key))
					continue;
				if (k->metric == M_PEAK) {
					if (g) {
						any = 1;
						cross(c, k, pr, strchr(key, '\t') + 1, f->v, g->v);
					}
					continue;
				}
				sa += f->v;
				sb += g ? g->v : 0;
				any = 1;
			}
			for (size_t x = 0; k->metric != M_PEAK && x < pb->figs.n; x++) {
				const struct fig *g = map_item(&pb->figs, x);

				if (!map_find(&pa->figs, &g->key) && of_metric(k, c->names.v[g->key.a])) {
					sb += g->v;
					any = 1;
				}
			}
			if (any && k->metric != M_PEAK)
				cross(c, k, pr, NULL, sa, sb);
			if (!any)
				any = -1;
		}
		if (any == -2) {
			c->unknown = k->unknown = 1;
		} else if (any < 0) {
			cli_error("--fail-if %s: not in both runs (pid %lld, pid %lld): nothing to"
				  " compare", k->text, (long long)pr->a->pid, (long long)pr->b->pid);
			c->unknown = k->unknown = 1;
		}
	}
}

/* ---- call sites in the table ------------------------------------------------- */

static const struct emit_col site_cols[] = {
	{ "allocations", "ALLOCS", EMIT_STR, 9, EMIT_IN_TABLE, 0, 0 },
	{ "allocated", "ALLOCATED", EMIT_STR, 12, EMIT_IN_TABLE, 0, 0 },
	{ "at_peak", "AT PEAK", EMIT_STR, 12, EMIT_IN_TABLE, 0, 0 },
	{ "live_end", "LIVE AT END", EMIT_STR, 12, EMIT_IN_TABLE, 0, 0 },
	{ "only", "", EMIT_STR, -9, EMIT_IN_TABLE, 0, 2 },
	{ "site", "CALL SITE", EMIT_STR, -1, EMIT_IN_TABLE, 0, 0 },
};

static const struct emit_table site_table = { NULL, site_cols, 6, 4, 0 };

/* One site of one memory: its four rows. */
struct site_line {
	const char *name;
	const struct row *r[SM_N];
	double d[SM_N];  /* B - A, a run without the site counting 0 */
	double big;      /* the largest of |d| in bytes */
	int differs, shown, est;
};

static int rank_measure; /* the measure by_diff ranks by */

static int by_diff(const void *x, const void *y)
{
	const struct site_line *a = *(const struct site_line *const *)x;
	const struct site_line *b = *(const struct site_line *const *)y;
	double da = fabs(a->d[rank_measure]), db = fabs(b->d[rank_measure]);

	if (da != db)
		return da > db ? -1 : 1;
	return strcmp(a->name, b->name);
}

static int by_big(const void *x, const void *y)
{
	const struct site_line *a = *(const struct site_line *const *)x;
	const struct site_line *b = *(const struct site_line *const *)y;

	if (a->big != b->big)
		return a->big > b->big ? -1 : 1;
	return strcmp(a->name, b->name);
}

static void diff_str(char *buf, size_t len, enum unit u, double d, int est)
{
	char t[40];

	value_str(t, sizeof(t), u, fabs(d), 0);
	snprintf(buf, len, "%s%s%s", est ? "~" : "", d < 0 ? "-" : "+", t);
}

/*
 * The table's view of one memory's sites (rows[0..n), sorted by name and
 * measure): of those that differ (a figure changed, or in one run only),
 * the TOP_SITES largest changes of bytes allocated, of bytes at the peak
 * and of bytes live at the end, each ranking on its own (a site whose
 * peak moved is shown however many sites churned more bytes), the largest
 * change first; then how many more differ.  *est: a figure shown is an
 * estimate.
 */
static int site_table_of(struct cmp *c, const struct row *rows, size_t n, int *est)
{
	static const int ranked[] = { SM_ALLOCATED, SM_PEAK, SM_LIVE };
	struct site_line *v = calloc(n + 1, sizeof(*v));
	struct site_line **p = calloc(n + 1, sizeof(*p));
	size_t nl = 0, ndiff = 0, nshown = 0;
	char mem[64];

	if (!v || !p) {
		free(v);
		free(p);
		return -ENOMEM;
	}
	site_of_key(rows[0].str, mem, sizeof(mem));
	for (size_t i = 0; i < n; i++) {
		const struct row *r = &rows[i];
		const struct fig *f = r->a ? r->a : r->b;
		struct site_line *l;

		if (i == 0 || r->name != rows[i - 1].name)
			v[nl++].name = site_of_key(r->str, mem, sizeof(mem));
		l = &v[nl - 1];
		l->r[f->key.b] = r;
		l->d[f->key.b] = (r->b ? r->b->v : 0) - (r->a ? r->a->v : 0);
		l->differs |= changed(r->a, r->b);
		l->est |= (r->a && r->a->est) || (r->b && r->b->est);
		if (f->key.b != SM_COUNT && fabs(l->d[f->key.b]) > l->big)
			l->big = fabs(l->d[f->key.b]);
	}
	for (size_t i = 0; i < nl; i++)
		if (v[i].differs)
			p[ndiff++] = &v[i];
	for (size_t k = 0; k < sizeof(ranked) / sizeof(ranked[0]); k++) {
		size_t taken = 0;

		rank_measure = ranked[k];
		array_sort(p, ndiff, sizeof(*p), by_diff);
		for (size_t i = 0; i < ndiff && taken < TOP_SITES; i++)
			if (p[i]->d[ranked[k]] != 0) {
				p[i]->shown = 1;
				taken++;
			}
	}
	for (size_t i = 0; i < ndiff; i++)
		if (p[i]->shown)
			p[nshown++] = p[i];
	array_sort(p, nshown, sizeof(*p), by_big);
	if (!ndiff)
		emit_text(c->e, "\n  call sites, %s: none of %zu differs\n", mem, nl);
	else
		emit_text(c->e, "\n  call sites, %s: %zu of %zu differ (B - A; the largest changes)\n",
			  mem, ndiff, nl);
	if (nshown)
		emit_table_begin(c->e, &site_table);
	for (size_t i = 0; i < nshown; i++) {
		const struct site_line *l = p[i];
		const struct row *r = l->r[SM_COUNT] ? l->r[SM_COUNT] : l->r[SM_ALLOCATED];
		char d[SM_N][48];
		struct emit_val ev[6];

		for (int x = 0; x < SM_N; x++)
			diff_str(d[x], sizeof(d[x]), x == SM_COUNT ? U_COUNT : U_BYTES, l->d[x],
				 l->est);
		*est |= l->est;
		for (int x = 0; x < SM_N; x++)
			ev[x] = ev_str(d[x]);
		ev[4] = ev_str(!r->a ? "only in B" : !r->b ? "only in A" : "");
		ev[5] = ev_str(l->name);
		emit_row(c->e, ev);
	}
	if (nshown)
		emit_table_end(c->e);
	if (ndiff > nshown)
		emit_text(c->e, "    %zu more differ%s: --format csv or json lists every site\n",
			  ndiff - nshown, ndiff - nshown == 1 ? "s" : "");
	free(v);
	free(p);
	return 0;
}

/* The table's call sites: one table per memory (rows[0..n), the sites
 * section's rows, sorted by memory). */
static int site_tables(struct cmp *c, const struct row *rows, size_t n)
{
	int err = 0, est = 0;

	for (size_t i = 0, j; !err && i < n; i = j) {
		const struct fig *f = rows[i].a ? rows[i].a : rows[i].b;

		for (j = i; j < n; j++) {
			const struct fig *g = rows[j].a ? rows[j].a : rows[j].b;

			if (g->order != f->order)
				break;
		}
		err = site_table_of(c, rows + i, j - i, &est);
	}
	present_estimated_note(c->e, est, "  ");
	return err;
}

/*
 * Whether the table folds the pair into one line at the end: two short
 * processes (each under QUIET_SHARE of the longest's wall time) of which
 * nothing changed but the wall time, with no condition to check.  A run
 * of a Python started by pyenv is 79 pairs, 78 of them its shell scripts
 * of a few milliseconds whose wall times are noise: a thousand lines
 * before the interpreter's pair.  Not a process with something to warn of
 * (present_settled()): equal losses on both sides are no change, but are
 * said.  CSV and JSON keep every pair.
 */
static int quiet_pair(const struct cmp *c, const struct pair *pr, const struct row *rows,
		      size_t n)
{
	double limit = QUIET_SHARE * c->longest;

	if (c->e->fmt != EMIT_TABLE || c->nconds || model_proc_wall(pr->a) >= limit ||
	    model_proc_wall(pr->b) >= limit || !present_settled(pr->a) || !present_settled(pr->b))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (changed(rows[i].a, rows[i].b) && strcmp(rows[i].str, "process\twall time") != 0)
			return 0;
	return 1;
}

static int compare_pair(struct cmp *c, const struct pair *pr, struct model *ma,
			struct model *mb)
{
	struct prof pa = { 0 }, pb = { 0 };
	struct row *rows = NULL;
	const char **knames = NULL;
	char **kshown = NULL;
	size_t n = 0, cap, first_site = 0, nsites = 0;
	int err;

	pa.figs.item_size = pb.figs.item_size = sizeof(struct fig);
	err = profile(c, ma, pr->a, &pa);
	if (!err)
		err = profile(c, mb, pr->b, &pb);
	if (err)
		goto out;
	cap = pa.figs.n + pb.figs.n + 1;
	rows = calloc(cap, sizeof(*rows));
	if (!rows) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < pa.figs.n; i++) {
		const struct fig *f = map_item(&pa.figs, i), *g = map_find(&pb.figs, &f->key);

		rows[n++] = (struct row){ f->section, (size_t)f->key.a, f, g,
					  g && g->v > f->v ? g->v : f->v, c->names.v[f->key.a] };
	}
	for (size_t i = 0; i < pb.figs.n; i++) {
		const struct fig *g = map_item(&pb.figs, i);

		if (!map_find(&pa.figs, &g->key))
			rows[n++] = (struct row){ g->section, (size_t)g->key.a, NULL, g, g->v,
						  c->names.v[g->key.a] };
	}
	qsort(rows, n, sizeof(*rows), cmp_row);
	if (quiet_pair(c, pr, rows, n)) {
		err = present_quiet_add(&c->quiet, pr->a);
		goto out;
	}
	/* Kernels whose short names read alike are told apart (on a failed
	 * allocation each shows its own short name). */
	knames = calloc(n + 1, sizeof(*knames));
	for (size_t i = 0; knames && i < n; i++)
		if (rows[i].section == S_KERNEL)
			knames[i] = strchr(c->names.v[rows[i].name], '\t') + 1;
	if (!knames || fmt_short_names(knames, n, &kshown))
		kshown = NULL;
	emit_object_begin(c->e, NULL);
	emit_kv(c->e, "matched_by", EMIT_STR, ev_str(pr->how));
	emit_text(c->e, "\n");
	proc_line(c->e, "a", pr->a);
	proc_line(c->e, "b", pr->b);
	emit_text(c->e, "  matched by %s\n\n", pr->how);
	emit_table_begin(c->e, &rows_table);
	for (size_t i = 0, shown = 0; i < n; i++) {
		/* Tables: the first rows of the long sections, and every row
		 * in one run only or changed; call sites in tables of their
		 * own below. */
		int longsec = rows[i].section >= S_KERNEL && rows[i].section <= S_RANGE;

		if (rows[i].section == S_SITES) {
			if (!nsites++)
				first_site = i;
			if (c->e->fmt == EMIT_TABLE)
				continue;
		}
		if (i == 0 || rows[i].section != rows[i - 1].section)
			shown = 0;
		if (c->e->fmt == EMIT_TABLE && longsec && shown >= TOP_ROWS &&
		    !changed(rows[i].a, rows[i].b))
			continue;
		shown++;
		emit_row_of(c, pr, &rows[i], kshown ? kshown[i] : NULL);
	}
	emit_table_end(c->e);
	if (c->e->fmt == EMIT_TABLE && nsites)
		err = site_tables(c, rows + first_site, nsites);
	check_conds(c, pr, &pa, &pb);
	emit_object_end(c->e);
out:
	fmt_short_names_free(kshown, n);
	free(knames);
	map_free(&pa.figs);
	map_free(&pb.figs);
	free(rows);
	return err;
}

static int compare(struct model *ma, struct model *mb, const char *pa, const char *pb,
		   struct cmp *c, FILE *out, int fmt)
{
	struct pair *pairs = calloc(model_nprocs(ma) + model_nprocs(mb) + 1, sizeof(*pairs));
	struct emit e;
	size_t n, paired = 0;
	int err = 0;

	if (!pairs)
		return -ENOMEM;
	n = pair_up(ma, mb, pairs);
	if (n == (size_t)-1) {
		free(pairs);
		return -ENOMEM;
	}
	c->e = &e;
	emit_init(&e, out, fmt);
	emit_kv(&e, "a", EMIT_STR, ev_str(pa));
	emit_kv(&e, "b", EMIT_STR, ev_str(pb));
	emit_text(&e, "shimmer compare\n  A: %s\n  B: %s\n", fmt_esc(pa), fmt_esc(pb));
	for (size_t i = 0; i < n; i++)
		for (int side = 0; side < 2; side++) {
			const struct model_proc *p = side ? pairs[i].b : pairs[i].a;

			if (p && model_proc_wall(p) > c->longest)
				c->longest = model_proc_wall(p);
		}
	emit_array_begin(&e, "pairs");
	for (size_t i = 0; i < n && !err; i++)
		if (pairs[i].a && pairs[i].b) {
			err = compare_pair(c, &pairs[i], ma, mb);
			paired++;
		}
	emit_array_end(&e);
	if (c->quiet.procs) {
		emit_text(&e, "\n%zu more pair%s of short processes (each under %.0f%% of the"
			  " longest's wall time) of which nothing changed but the wall time",
			  c->quiet.procs, c->quiet.procs == 1 ? "" : "s", 100 * QUIET_SHARE);
		present_quiet_list(&c->quiet, &e);
	}
	/* No pair, no condition evaluated: not a pass (a run left untraced,
	 * or of another executable, passed every condition). */
	if (!err && !paired && c->nconds) {
		cli_error("--fail-if: no process of A pairs with one of B (%zu and %zu processes selected):"
			  " nothing to compare", model_nselected(ma), model_nselected(mb));
		c->unknown = 1;
		for (size_t i = 0; i < c->nconds; i++)
			c->conds[i].unknown = 1;
	}
	emit_array_begin(&e, "only");
	for (size_t i = 0; i < n && !err; i++) {
		const struct model_proc *p = pairs[i].a ? pairs[i].a : pairs[i].b;

		if (pairs[i].a && pairs[i].b)
			continue;
		emit_object_begin(&e, NULL);
		emit_kv(&e, "run", EMIT_STR, ev_str(pairs[i].a ? "a" : "b"));
		emit_kv(&e, "pid", EMIT_INT, ev_int(p->pid));
		emit_kv(&e, "rank", EMIT_INT, p->rank >= 0 ? ev_int(p->rank) : ev_none());
		emit_kv(&e, "exe", EMIT_STR, ev_str(p->exe));
		emit_kv(&e, "wall_ns", EMIT_INT, ev_int(p->end_ns - p->start_ns));
		emit_object_end(&e);
		emit_text(&e, "\nOnly in %s: pid %lld %s\n", pairs[i].a ? "A" : "B",
			  (long long)p->pid, fmt_esc(p->args ? p->args : p->exe ? p->exe : "?"));
	}
	emit_array_end(&e);
	emit_array_begin(&e, "fail_if");
	for (size_t i = 0; i < c->nconds; i++) {
		emit_object_begin(&e, NULL);
		emit_kv(&e, "condition", EMIT_STR, ev_str(c->conds[i].text));
		emit_kv(&e, "crossed", EMIT_BOOL, ev_int(c->conds[i].crossed));
		emit_kv(&e, "evaluated", EMIT_BOOL, ev_int(!c->conds[i].unknown));
		emit_object_end(&e);
		if (!c->conds[i].crossed)
			emit_text(&e, "%s: %s\n", c->conds[i].unknown ? "not evaluated" : "ok",
				  fmt_esc(c->conds[i].text));
	}
	emit_array_end(&e);
	free(pairs);
	site_lists_free(c);
	if (err)
		return err;
	return emit_finish(&e);
}

int compare_write(struct model *ma, struct model *mb, const char *pa, const char *pb, FILE *out,
		  int fmt)
{
	struct cmp c = { 0 };
	int err;

	model_want(ma, MODEL_WANT_SITES | MODEL_NO_HEAP_TIMES);
	model_want(mb, MODEL_WANT_SITES | MODEL_NO_HEAP_TIMES);
	err = compare(ma, mb, pa, pb, &c, out, fmt);
	strtab_free(&c.names);
	return err;
}

/* ---- the command ------------------------------------------------------------ */

static int compare_main(int argc, char **argv);

const struct command compare_command = {
	.name = "compare",
	.brief = "two runs side by side, and a CI guard (--fail-if)",
	.usage =
		"usage: shimmer compare A.db B.db [--format table|csv|json] [--fail-if EXPR]...\n"
		"                       [--pid PID] [--rank R] [--callers N] [--native]\n"
		"                       [--full-names]\n"
		"\n"
		"Pairs the processes of two stores (by rank, else executable and argv,\n"
		"else executable) and shows each pair's figures side by side with their\n"
		"difference and ratio: wall time, steps (count, mean, median, p90 of the\n"
		"most frequent top-level range), GPU busy share and kernel time, kernels,\n"
		"CUDA calls, copies and ranges by time, peak and end-of-run memory per\n"
		"memory, growing sites, lost events and GPU sampling coverage; then per\n"
		"memory the call sites (paired by name): allocations, bytes allocated,\n"
		"bytes at the memory's peak and live at the end, the table showing the\n"
		"largest changes.  Rows in one run only say so; rows that differ by more\n"
		"than a run differs by itself are marked changed.  See docs/usage.md.\n"
		"\n"
		"  --format table|csv|json   output (default table; csv and json have\n"
		"                            every row and every call site)\n"
		"  --fail-if EXPR            exit 3 when B crosses a condition against A:\n"
		"                            METRIC OP VALUE[, ...], OP one of > < >= <=,\n"
		"                            VALUE a change in percent (+5%) or an amount\n"
		"                            (+200ms, +1GiB); METRIC one of step_time,\n"
		"                            step_time_median, step_time_p90, wall_time,\n"
		"                            kernel_time, gpu_busy, peak_memory,\n"
		"                            peak_memory[cuda:0], api_time, leaked_bytes,\n"
		"                            site_peak, site_peak[cuda:0] (any one call\n"
		"                            site's bytes at the peak; an amount only; not\n"
		"                            evaluated where a full stack table left bytes\n"
		"                            at the peak without a site)\n"
		"  --pid PID, --rank R       only the processes with this pid, of this rank,\n"
		"                            in both stores\n"
		"  --callers N               name each call site with N of its callers,\n"
		"                            \"site <- caller <- ...\" (default 0)\n"
		"  --native                  host allocations made from Python code by\n"
		"                            their native frames, not the Python line\n"
		"  --full-names              kernel names in tables as recorded\n"
		"\n"
		"exit codes: 0 ok, 1 error (a store, or a condition that cannot be\n"
		"evaluated), 2 usage, 3 a --fail-if condition crossed\n",
	.main = compare_main,
};

static int add_conds(struct cmp *c, struct cond *store, const char *expr)
{
	char buf[512], *save = NULL;
	int r, any = 0;

	/* Cut, the last condition could read as another (+100ms as +10). */
	if ((size_t)snprintf(buf, sizeof(buf), "%s", expr) >= sizeof(buf))
		return cli_usage_error(&compare_command, "--fail-if: more than %zu characters;"
				       " give the conditions in several --fail-if",
				       sizeof(buf) - 1);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		while (*t == ' ')
			t++;
		if (!*t)
			continue;
		any = 1;
		if (c->nconds == MAX_CONDS)
			return cli_usage_error(&compare_command, "more than %d --fail-if conditions",
					       MAX_CONDS);
		r = parse_cond(t, &store[c->nconds]);
		if (r == -EDOM)
			return cli_usage_error(&compare_command, "--fail-if: '%s': site_peak takes an"
					       " amount (+100MiB), not a percentage", t);
		if (r == -ERANGE)
			return cli_usage_error(&compare_command, "--fail-if: '%s': %s", t,
					       metric_dim(store[c->nconds].metric) == D_TIME ?
					       "a time wants ns, us, ms or s (+200ms), or a percentage" :
					       metric_dim(store[c->nconds].metric) == D_BYTES ?
					       "bytes want B, KiB, MiB, GiB, KB, MB or GB (+1GiB), a"
					       " number of bytes, or a percentage" :
					       "a share wants a fraction (+0.05) or a percentage");
		if (r < 0)
			return cli_usage_error(&compare_command, "--fail-if: cannot read '%s' (METRIC"
					       " OP VALUE, VALUE a decimal change: +200ms, +1GiB,"
					       " -5%%)", t);
		c->nconds++;
	}
	/* An empty --fail-if (an unset shell variable) would guard nothing. */
	if (!any)
		return cli_usage_error(&compare_command, "--fail-if: no condition in '%s'", expr);
	return 0;
}

static int compare_main(int argc, char **argv)
{
	struct cli_sites sites = { 0 };
	struct model_filter f = model_filter_all();
	struct cond conds[MAX_CONDS];
	struct cmp c = { .conds = conds };
	const char *paths[2] = { NULL, NULL }, *expr;
	struct cli_args a = CLI_ARGS(&compare_command, argc, argv, paths, 2);
	struct model *ma = NULL, *mb = NULL;
	int fmt = EMIT_TABLE, k, r, rc = CLI_EXIT_ERROR, err;

	while ((k = cli_next(&a)) == CLI_ARG_OPTION) {
		if ((r = cli_format_opt(&a, emit_format_names, &fmt)) != 0 ||
		    (r = cli_filter_opt(&a, &f)) != 0 || (r = cli_sites_opt(&a, &sites)) != 0 ||
		    (r = cli_flag_opt(&a, "--full-names", &c.full_names)) != 0) {
			if (r < 0)
				return CLI_EXIT_USAGE;
		} else if ((r = cli_string_opt(&a, "--fail-if", &expr)) != 0) {
			if (r < 0 || add_conds(&c, conds, expr))
				return CLI_EXIT_USAGE;
		} else if ((err = cli_store_arg(&a)) != 0) {
			return err;
		}
	}
	if (k != CLI_ARG_END)
		return k;
	if (model_open(paths[0], &f, &ma) < 0 || model_open(paths[1], &f, &mb) < 0)
		goto out;
	/* Heap calls are not compared by time: their columns stay unread. */
	model_want(ma, MODEL_WANT_SITES | MODEL_NO_HEAP_TIMES);
	model_want(mb, MODEL_WANT_SITES | MODEL_NO_HEAP_TIMES);
	model_set_callers(ma, sites.callers);
	model_set_native(ma, sites.native);
	model_set_callers(mb, sites.callers);
	model_set_native(mb, sites.native);
	model_share_names(ma, mb);
	err = model_load_unnamed(ma);
	if (!err)
		err = model_load_unnamed(mb);
	if (!err)
		err = compare(ma, mb, paths[0], paths[1], &c, stdout, fmt);
	if (err == -ENOMEM)
		cli_error("out of memory");
	rc = err ? CLI_EXIT_ERROR : c.unknown ? CLI_EXIT_ERROR
		   : c.crossed ? COMPARE_EXIT_CROSSED : CLI_EXIT_OK;
out:
	strtab_free(&c.names);
	model_close(ma);
	model_close(mb);
	return rc;
}
