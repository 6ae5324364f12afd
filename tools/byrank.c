/*
 * shimmer summary --by-rank; see byrank.h.
 *
 * Events are grouped by (kind, name) over every selected process that
 * has a rank; each group keeps one total per rank.  A rank that never ran
 * an event counts as 0 for it (a rank that skipped work is part of the
 * imbalance); Ranks says how many ran it.  Kernel and copy totals of a
 * sampled process are its estimates (recorded x scale).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "byrank.h"
#include "fmt.h"
#include "map.h"
#include "present.h"

/* What lost events and a cut recording do to a rank's figures. */
#define BYRANK_LOST "its rank's totals below miss them (lower bounds), and a lost range" \
	" can leave its steps out of line with the other ranks'"
#define BYRANK_CUT "its rank's totals below stop there"

enum kind { K_WALL, K_STEP, K_RANGE, K_KERNEL, K_COPY, K_API, K_HEAP, K_N };

static const char *const kind_names[K_N] = { "wall", "step", "range", "kernel", "copy", "api",
					     "heap" };

struct item {
	struct map_key key; /* kind, name index, 0 */
	size_t first;       /* into values: nranks of them */
};

struct byrank {
	struct model *m;
	int64_t *ranks; /* sorted, distinct */
	size_t nranks;
	struct map items;
	struct strtab names;
	double *values;
	unsigned char *present;
	size_t nvalues, cap;
	/* Steps: per rank, the process with the most steps. */
	const struct model_steps **steps;
};

static size_t rank_index(const struct byrank *b, int64_t rank)
{
	size_t lo = 0, hi = b->nranks;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (b->ranks[mid] < rank)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int add(struct byrank *b, enum kind k, const char *name, int64_t rank, double v)
{
	struct map_key key = { k, 0, 0 };
	struct item *it;
	size_t r = rank_index(b, rank);
	int err = strtab_index(&b->names, name ? name : "?", &key.a);

	if (err)
		return err;
	it = map_get(&b->items, &key);
	if (!it)
		return -ENOMEM;
	if (it->first == 0) {
		size_t need = b->nvalues + b->nranks;

		if (need > b->cap) {
			size_t cap = need * 2;
			double *nv = realloc(b->values, cap * sizeof(*nv));
			unsigned char *np;

			if (!nv)
				return -ENOMEM;
			b->values = nv;
			np = realloc(b->present, cap);
			if (!np)
				return -ENOMEM;
			b->present = np;
			b->cap = cap;
		}
		memset(b->values + b->nvalues, 0, b->nranks * sizeof(*b->values));
		memset(b->present + b->nvalues, 0, b->nranks);
		/* Stored + 1: 0 is "not placed yet". */
		it->first = b->nvalues + 1;
		b->nvalues = need;
	}
	b->values[it->first - 1 + r] += v;
	b->present[it->first - 1 + r] = 1;
	return 0;
}

static int cmp_i64(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, c = *(const int64_t *)y;

	return (a > c) - (a < c);
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, c = *(const double *)y;

	return (a > c) - (a < c);
}

static double median_of(const double *v, size_t n, double *tmp)
{
	memcpy(tmp, v, n * sizeof(*tmp));
	qsort(tmp, n, sizeof(*tmp), cmp_double);
	return n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
}

static int collect(struct byrank *b)
{
	struct model *m = b->m;
	struct model_calls *const *calls;
	size_t ncalls, k = 0;
	int err;

	for (size_t i = 0; i < model_nprocs(m); i++) {
		const struct model_proc *p = model_proc(m, i);

		if (p->selected && p->rank >= 0)
			b->nranks++;
	}
	b->ranks = calloc(b->nranks + 1, sizeof(*b->ranks));
	if (!b->ranks)
		return -ENOMEM;
	for (size_t i = 0; i < model_nprocs(m); i++) {
		const struct model_proc *p = model_proc(m, i);

		if (p->selected && p->rank >= 0)
			b->ranks[k++] = p->rank;
	}
	qsort(b->ranks, b->nranks, sizeof(*b->ranks), cmp_i64);
	k = 0;
	for (size_t i = 0; i < b->nranks; i++)
		if (i == 0 || b->ranks[i] != b->ranks[k - 1])
			b->ranks[k++] = b->ranks[i];
	b->nranks = k;
	b->steps = calloc(b->nranks + 1, sizeof(*b->steps));
	if (!b->steps)
		return -ENOMEM;
	err = model_calls(m, &calls, &ncalls);
	for (size_t i = 0; !err && i < ncalls; i++) {
		const struct model_calls *c = calls[i];

		if (c->proc->rank < 0 || !c->fn || !model_calls_estimable(c) || c->st.n == 0)
			continue;
		err = add(b, c->fn->heap ? K_HEAP : K_API, c->fn->name, c->proc->rank,
			  model_calls_total(c));
	}
	for (size_t i = 0; !err && i < model_nprocs(m); i++) {
		const struct model_proc *p = model_proc(m, i);
		const struct model_steps *s;
		struct model_gpu g;
		size_t r;

		if (!p->selected || p->rank < 0)
			continue;
		r = rank_index(b, p->rank);
		err = add(b, K_WALL, "wall", p->rank, model_proc_wall(p));
		if (!err)
			err = model_gpu(m, p, &g);
		for (size_t j = 0; !err && j < g.nkernels; j++)
			err = add(b, K_KERNEL, g.kernels[j]->name, p->rank,
				  (double)g.kernels[j]->sum * g.scale);
		for (size_t j = 0; !err && j < g.ncopies; j++)
			err = add(b, K_COPY, g.copies[j]->name, p->rank,
				  (double)g.copies[j]->sum * g.scale);
		for (size_t j = 0; !err && j < g.nranges; j++)
			err = add(b, K_RANGE, g.ranges[j]->name, p->rank, (double)g.ranges[j]->sum);
		if (!err)
			err = model_steps(m, p, NULL, &s);
		if (!err && s->n > 0 && (!b->steps[r] || s->n > b->steps[r]->n))
			b->steps[r] = s;
	}
	for (size_t r = 0; !err && r < b->nranks; r++)
		if (b->steps[r])
			err = add(b, K_STEP, b->steps[r]->name, b->ranks[r], b->steps[r]->mean_ns);
	return err;
}

static const struct emit_col cols[] = {
	{ "kind", "Kind", EMIT_STR, -7, 0, 0, 0 },
	{ "ranks", "Ranks", EMIT_INT, 5, 0, 0, 0 },
	{ "min_ns", "Min", EMIT_NS, 10, 0, 0, 0 },
	{ "median_ns", "Median", EMIT_NS, 10, 0, 0, 0 },
	{ "max_ns", "Max", EMIT_NS, 10, 0, 0, 0 },
	{ "slowest_rank", "Slowest", EMIT_INT, 7, 0, 0, 0 },
	{ "imbalance", "Imbalance", EMIT_SHARE, 9, 0, 0, 0 },
	{ "event", NULL, EMIT_STR, 0, EMIT_IN_DATA, 0, 0 },
	{ "by_rank_ns", NULL, EMIT_RAW, 0, EMIT_IN_JSON, 0, 0 },
	{ "name", "Event", EMIT_STR, -1, EMIT_IN_TABLE, 0, 2 },
};

#define NCOLS (sizeof(cols) / sizeof(cols[0]))

static const struct emit_table table = { "events", cols, NCOLS, 2, 0 };

struct row {
	const struct item *it;
	double max;
};

static const struct byrank *sort_b;

static int cmp_row(const void *x, const void *y)
{
	const struct row *a = x, *c = y;

	if (a->it->key.proc_id != c->it->key.proc_id)
		return a->it->key.proc_id < c->it->key.proc_id ? -1 : 1;
	if (a->max != c->max)
		return a->max > c->max ? -1 : 1;
	return strcmp(sort_b->names.v[a->it->key.a], sort_b->names.v[c->it->key.a]);
}

/* The first selected process with a rank that lost events of the rings
 * (ranges among them), or NULL: step k of its rank may not be step k of
 * the others, so no straggler is judged. */
static const struct model_proc *misaligned(struct model *m)
{
	for (size_t i = 0; i < model_nprocs(m); i++) {
		const struct model_proc *p = model_proc(m, i);

		if (p->selected && p->rank >= 0 && p->dropped_host)
			return p;
	}
	return NULL;
}

/* The straggler line, when one rank was the slowest in most steps. */
static void straggler(struct emit *e, const struct byrank *b)
{
	size_t n = SIZE_MAX, *slowest = calloc(b->nranks + 1, sizeof(*slowest));
	double *means = calloc(b->nranks + 1, sizeof(*means));
	double *tmp = calloc(b->nranks + 1, sizeof(*tmp));
	char u[2][FMT_UNIT_MAX], why[256];
	const struct model_proc *lost;
	size_t best = 0;
	double med;

	if (!slowest || !means || !tmp)
		goto out;
	for (size_t r = 0; r < b->nranks; r++) {
		if (!b->steps[r]) {
			n = 0;
			break;
		}
		if (b->steps[r]->n < n)
			n = b->steps[r]->n;
		means[r] = b->steps[r]->mean_ns;
	}
	if (b->nranks < 2 || n == SIZE_MAX || n < BYRANK_MIN_STEPS)
		goto out;
	if ((lost = misaligned(b->m))) {
		snprintf(why, sizeof(why), "rank %lld (pid %lld) lost %lld events before the store,"
			 " ranges among them: its steps may not line up with the other ranks'",
			 (long long)lost->rank, (long long)lost->pid, (long long)lost->dropped_host);
		emit_object_begin(e, "straggler");
		emit_kv(e, "withheld", EMIT_STR, ev_str(why));
		emit_object_end(e);
		emit_text(e, "Straggler: not judged: %s\n", why);
		goto out;
	}
	/* Step k of every rank: the k-th of each rank's steps by start. */
	for (size_t k = 0; k < n; k++) {
		size_t w = 0;
		double wd = -1;

		for (size_t r = 0; r < b->nranks; r++) {
			double d = (double)(b->steps[r]->end[k] - b->steps[r]->start[k]);

			if (d > wd) {
				wd = d;
				w = r;
			}
		}
		slowest[w]++;
	}
	for (size_t r = 1; r < b->nranks; r++)
		if (slowest[r] > slowest[best])
			best = r;
	med = median_of(means, b->nranks, tmp);
	emit_object_begin(e, "straggler");
	if (2 * slowest[best] > n && med > 0 && means[best] >= med * (1 + BYRANK_MARGIN)) {
		emit_kv(e, "rank", EMIT_INT, ev_int(b->ranks[best]));
		emit_kv(e, "slowest_steps", EMIT_INT, ev_int((int64_t)slowest[best]));
		emit_kv(e, "steps", EMIT_INT, ev_int((int64_t)n));
		emit_kv(e, "mean_step_ns", EMIT_NS, ev_real(means[best]));
		emit_kv(e, "median_rank_step_ns", EMIT_NS, ev_real(med));
		emit_text(e, "Straggler: rank %lld was the slowest in %zu of %zu '%s' steps; its mean"
			  " step %s against %s for the median rank (+%.0f%%)\n",
			  (long long)b->ranks[best], slowest[best], n,
			  fmt_esc(b->steps[best]->name ? b->steps[best]->name : "?"),
			  fmt_duration(u[0], sizeof(u[0]), means[best]),
			  fmt_duration(u[1], sizeof(u[1]), med), 100.0 * (means[best] / med - 1));
	} else {
		emit_text(e, "No straggler: no rank was the slowest in most of %zu steps by %.0f%%"
			  " or more\n", n, 100.0 * BYRANK_MARGIN);
	}
	emit_object_end(e);
out:
	free(slowest);
	free(means);
	free(tmp);
}

/* The ranks' processes whose recording is incomplete: a WARNING line
 * each in the table (the sentences every command uses), in JSON
 * "incomplete" (rank, pid, proc_id, dropped_events, cut). */
static void incomplete(struct emit *e, struct model *m)
{
	int any = 0;

	emit_array_begin(e, "incomplete");
	for (size_t i = 0; i < model_nprocs(m); i++) {
		const struct model_proc *p = model_proc(m, i);

		if (!p->selected || p->rank < 0 || (!p->cut && !p->dropped))
			continue;
		emit_object_begin(e, NULL);
		emit_kv(e, "rank", EMIT_INT, ev_int(p->rank));
		emit_kv(e, "pid", EMIT_INT, ev_int(p->pid));
		emit_kv(e, "proc_id", EMIT_INT, ev_int(p->proc_id));
		emit_kv(e, "dropped_events", EMIT_INT, ev_int(p->dropped));
		emit_kv(e, "cut", EMIT_BOOL, ev_int(p->cut));
		emit_object_end(e);
		emit_text(e, "rank %lld (pid %lld):\n", (long long)p->rank, (long long)p->pid);
		present_incomplete(e, p, "  ", 1, BYRANK_LOST, BYRANK_CUT);
		any = 1;
	}
	emit_array_end(e);
	if (any)
		emit_text(e, "\n");
}

int byrank_emit(struct emit *e, struct model *m)
{
	struct byrank b = { .m = m, .items = { .item_size = sizeof(struct item) } };
	struct row *rows = NULL;
	const char **knames = NULL;
	char **kshown = NULL;
	double *tmp = NULL;
	char *json = NULL;
	int err = collect(&b);

	if (err)
		goto out;
	emit_text(e, "shimmer summary --by-rank: %zu rank%s", b.nranks, b.nranks == 1 ? "" : "s");
	if (b.nranks)
		emit_text(e, " (%lld to %lld)", (long long)b.ranks[0],
			  (long long)b.ranks[b.nranks - 1]);
	emit_text(e, "; per event its total time on each rank\n\n");
	emit_kv(e, "ranks", EMIT_INT, ev_int((int64_t)b.nranks));
	incomplete(e, m);
	rows = calloc(b.items.n + 1, sizeof(*rows));
	tmp = calloc(b.nranks + 1, sizeof(*tmp));
	json = malloc(b.nranks * 32 + 8);
	if (!rows || !tmp || !json) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < b.items.n; i++) {
		const struct item *it = map_item(&b.items, i);
		const double *v = b.values + it->first - 1;

		rows[i].it = it;
		for (size_t r = 0; r < b.nranks; r++)
			if (v[r] > rows[i].max)
				rows[i].max = v[r];
	}
	sort_b = &b;
	qsort(rows, b.items.n, sizeof(*rows), cmp_row);
	sort_b = NULL;
	/* Kernels by their short names in the table, as everywhere, told
	 * apart where two read alike (on a failed allocation, plain). */
	knames = calloc(b.items.n + 1, sizeof(*knames));
	for (size_t i = 0; knames && i < b.items.n; i++)
		if (rows[i].it->key.proc_id == K_KERNEL)
			knames[i] = b.names.v[rows[i].it->key.a];
	if (!knames || fmt_short_names(knames, b.items.n, &kshown))
		kshown = NULL;
	emit_table_begin(e, &table);
	for (size_t i = 0; i < b.items.n; i++) {
		const struct item *it = rows[i].it;
		const double *v = b.values + it->first - 1;
		const unsigned char *has = b.present + it->first - 1;
		size_t slow = 0, nhas = 0, n = 0;
		double min = v[0], med;
		char shortname[256];
		struct emit_val r[NCOLS];

		for (size_t k = 0; k < b.nranks; k++) {
			nhas += has[k];
			if (v[k] < min)
				min = v[k];
			if (v[k] > v[slow])
				slow = k;
			n += (size_t)snprintf(json + n, 32, "%s%.0f", k ? "," : "[", v[k]);
		}
		snprintf(json + n, 8, "]");
		med = median_of(v, b.nranks, tmp);
		r[0] = ev_str(kind_names[it->key.proc_id]);
		r[1] = ev_int((int64_t)nhas);
		r[2] = ev_real(min);
		r[3] = ev_real(med);
		r[4] = ev_real(v[slow]);
		r[5] = ev_int(b.ranks[slow]);
		r[6] = med > 0 ? ev_real((v[slow] - med) / med) : ev_none();
		r[7] = ev_str(b.names.v[it->key.a]);
		r[8] = ev_str(json);
		r[9] = ev_str(it->key.proc_id != K_KERNEL ? r[7].s
			      : kshown ? kshown[i]
				       : fmt_short_name(shortname, sizeof(shortname), r[7].s));
		emit_row(e, r);
	}
	emit_table_end(e);
	emit_text(e, "\n");
	straggler(e, &b);
out:
	fmt_short_names_free(kshown, b.items.n);
	free(knames);
	free(rows);
	free(tmp);
	free(json);
	free(b.ranks);
	free(b.steps);
	free(b.values);
	free(b.present);
	map_free(&b.items);
	strtab_free(&b.names);
	return err;
}
