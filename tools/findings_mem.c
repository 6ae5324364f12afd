/*
 * The findings of memory (see findings.h, docs/usage.md): memory growth
 * (the leak regression's growing sites), the caching allocator giving
 * back reserved memory it was not using (an allocation that failed, frees,
 * and the same allocation again), and heap churn (call sites of short-lived
 * host allocations at high rates).  Every figure comes from the model's
 * one pass over the allocations.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "findings.h"
#include "fmt.h"
#include "leaks.h"
#include "map.h"
#include "present.h"
#include "wire.h"

/* ---- memory growth ------------------------------------------------------------ */

struct growing {
	const struct model_mem *mem;
	const char *site;
	double slope_step, slope_s, r2, live_end, growth;
	size_t points;
	const char *range;
};

/* Of a finding that names call sites: the allocations that have none, the
 * shim's stack table having been full, and the frames without a name
 * (the commands' lines, present.h); and, of host memory (mem NULL: the
 * heap's calls), the pymalloc arenas it is known to miss
 * (model_proc.host_unseen). */
static void stacks_coverage(struct finding *x, const struct model_proc *p,
			    const struct model_mem *mem)
{
	char line[PRESENT_UNNAMED_LINE > PRESENT_STACKS_LINE ? PRESENT_UNNAMED_LINE
							       : PRESENT_STACKS_LINE];

	if (present_stacks_line(line, sizeof(line), p))
		finding_coverage(x, "%s.", line);
	if (present_unnamed_line(line, sizeof(line), p))
		finding_coverage(x, "%s.", line);
	if (p->host_unseen && (!mem || mem->space == MODEL_HOST))
		finding_coverage(x, "%s.", p->host_unseen);
}

struct growth_ctx {
	struct findings *f;
	struct growing *v;
	size_t n, cap;
	const struct model_proc **lost; /* processes whose verdicts were withheld */
	size_t nlost, lost_cap;
};

static int growth_cb(void *ctx, const struct leaks_fit *fit)
{
	struct growth_ctx *c = ctx;
	size_t pts = fit->n > fit->warm ? fit->n - fit->warm : 0;
	struct growing *g;

	if (fit->withheld && !strcmp(fit->withheld, "events were lost")) {
		for (size_t i = 0; i < c->nlost; i++)
			if (c->lost[i] == fit->g->mem->proc)
				return 0;
		if (array_grow(&c->lost, &c->lost_cap, c->nlost, sizeof(*c->lost)) < 0)
			return -ENOMEM;
		c->lost[c->nlost++] = fit->g->mem->proc;
		return 0;
	}
	if (strcmp(fit->verdict, "growing") || pts < 2)
		return 0;
	if (array_grow(&c->v, &c->cap, c->n, sizeof(*c->v)) < 0)
		return -ENOMEM;
	/* the fitted line, for the report's chart */
	{
		struct findings *f = c->f;
		size_t stride = pts > FINDINGS_FIT_POINTS ? pts / FINDINGS_FIT_POINTS : 1;
		struct findings_fit *l;

		if (array_grow(&f->fits, &f->fits_cap, f->nfits, sizeof(*f->fits)) < 0)
			return -ENOMEM;
		l = &f->fits[f->nfits++];
		memset(l, 0, sizeof(*l));
		l->mem = fit->g->mem;
		l->per_step = fit->range != NULL;
		l->slope = l->per_step ? fit->slope_step : fit->slope_s;
		l->r2 = fit->r2;
		l->site = strdup(fit->g->name);
		l->t = malloc((pts / stride + 2) * sizeof(*l->t));
		l->y = malloc((pts / stride + 2) * sizeof(*l->y));
		if (!l->site || !l->t || !l->y)
			return -ENOMEM;
		for (size_t k = fit->warm; k < fit->n; k += stride) {
			l->t[l->n] = fit->t[k];
			l->y[l->n++] = l->per_step ?
					       fit->icpt_step + fit->slope_step * (double)k :
					       fit->icpt_s + fit->slope_s *
								     (double)(fit->t[k] - fit->t[0]) / 1e9;
		}
	}
	g = &c->v[c->n++];
	g->mem = fit->g->mem;
	g->site = fit->g->name;
	g->slope_step = fit->slope_step;
	g->slope_s = fit->slope_s;
	g->r2 = fit->r2;
	g->live_end = fit->g->live_bytes;
	g->points = pts;
	g->range = fit->range;
	/* the fitted rise over the points fitted */
	g->growth = !isnan(fit->slope_step) ? fit->slope_step * (double)(pts - 1) :
		    fit->slope_s * (double)(fit->t[fit->n - 1] - fit->t[fit->warm]) / 1e9;
	return 0;
}

static const struct emit_col growth_cols[] = {
	{ "per_step", "PER STEP", EMIT_BYTES, 11, 0, 1, 0 },
	{ "per_s", "PER SECOND", EMIT_BYTES, 11, 0, 1, 0 },
	{ "r2", "R2", EMIT_REAL, 5, 0, 3, 0 },
	{ "live_end", "LIVE AT END", EMIT_BYTES, 11, 0, 0, 0 },
	{ "site", "CALL SITE", EMIT_STR, -1, 0, 0, 2 },
};

static const struct emit_table growth_table = { "items", growth_cols, 5, 4, 0 };

static int cmp_growing(const void *x, const void *y)
{
	const struct growing *a = x, *b = y;

	if (a->mem != b->mem)
		return a->mem->index < b->mem->index ? -1 : 1;
	return (a->growth < b->growth) - (a->growth > b->growth);
}

static int rule_growth(struct findings *f)
{
	struct growth_ctx c = { .f = f };
	struct leaks_opts o;
	int err;

	leaks_opts_init(&o);
	err = leaks_each(f->m, &o, growth_cb, &c);
	if (err)
		goto out;
	for (size_t i = 0; i < c.nlost; i++)
		findings_withhold(f, "memory_growth", c.lost[i], "events were lost between the"
				  " program and the store: a lost free would look like growth");
	/* the memories' peaks weigh the growth: asked for only now (a
	 * search over every allocation event) */
	if (c.n) {
		struct model_mem *const *mems;
		size_t nmems;

		err = model_memories(f->m, &mems, &nmems);
		if (err)
			goto out;
	}
	array_sort(c.v, c.n, sizeof(*c.v), cmp_growing);
	for (size_t i = 0; i < c.n;) {
		const struct model_mem *mem = c.v[i].mem;
		double growth = 0, per_step = 0, per_s = 0;
		size_t j, nsites;
		struct finding *x;
		char b[4][FMT_UNIT_MAX];

		for (j = i; j < c.n && c.v[j].mem == mem; j++) {
			growth += c.v[j].growth;
			per_step += isnan(c.v[j].slope_step) ? 0 : c.v[j].slope_step;
			per_s += c.v[j].slope_s;
		}
		nsites = j - i;
		x = finding_new(f, "memory_growth", mem->proc, mem->peak > 0 ? growth / mem->peak : 0,
				"%s grows %s a %s at %zu call site%s", mem->label,
				fmt_bytes(b[0], sizeof(b[0]),
					  c.v[i].range ? per_step : per_s),
				c.v[i].range ? "step" : "second", nsites, nsites == 1 ? "" : "s");
		if (!x) {
			err = -ENOMEM;
			goto out;
		}
		if (c.v[i].range)
			finding_detail(x, "Fitted over %zu '%s' steps, the live bytes of %zu call site%s"
				       " of %s rise along a line (R^2 >= 0.8), %s a step in all: %s over"
				       " the steps fitted, %.0f%% of its peak (%s).", c.v[i].points,
				       c.v[i].range, nsites, nsites == 1 ? "" : "s", mem->label,
				       fmt_bytes(b[0], sizeof(b[0]), per_step),
				       fmt_bytes(b[1], sizeof(b[1]), growth),
				       mem->peak > 0 ? 100 * growth / mem->peak : 0.0,
				       fmt_bytes(b[2], sizeof(b[2]), mem->peak));
		else
			finding_detail(x, "Without steps, fitted over %zu instants of the allocations,"
				       " the live bytes of %zu call site%s of %s rise along a line"
				       " (R^2 >= 0.8), %s a second in all: %s over the run, %.0f%% of its"
				       " peak (%s).", c.v[i].points, nsites, nsites == 1 ? "" : "s",
				       mem->label, fmt_bytes(b[0], sizeof(b[0]), per_s),
				       fmt_bytes(b[1], sizeof(b[1]), growth),
				       mem->peak > 0 ? 100 * growth / mem->peak : 0.0,
				       fmt_bytes(b[2], sizeof(b[2]), mem->peak));
		finding_detail(x, "Most of it from %s.", c.v[i].site);
		finding_kv(x, "memory", EMIT_STR, ev_str(mem->label));
		finding_kv(x, "growth_bytes", EMIT_BYTES, ev_real(growth));
		finding_kv(x, "per_step_bytes", EMIT_BYTES, c.v[i].range ? ev_real(per_step) : ev_none());
		finding_kv(x, "per_s_bytes", EMIT_BYTES, ev_real(per_s));
		finding_kv(x, "peak_bytes", EMIT_BYTES, ev_real(mem->peak));
		finding_kv(x, "top_site", EMIT_STR, ev_str(c.v[i].site));
		finding_table(x, &growth_table);
		for (size_t k = i; k < j && k < i + 5; k++)
			finding_row(x, (struct emit_val[]){
					       isnan(c.v[k].slope_step) ? ev_none() : ev_real(c.v[k].slope_step),
					       ev_real(c.v[k].slope_s), ev_real(c.v[k].r2),
					       ev_real(c.v[k].live_end), ev_str(c.v[k].site) });
		if (mem->estimated)
			finding_coverage(x, "Host memory in sample mode: bytes are estimates from"
					 " sampled allocations.");
		else
			finding_coverage(x, "Every allocation of %s was recorded.", mem->label);
		finding_coverage(x, "The first 20%% of the points are skipped as warm-up.");
		stacks_coverage(x, mem->proc, mem);
		finding_advice(x, "Something keeps a reference to what %s allocates each %s: a list"
			       " of losses or outputs that keeps their graphs (append loss.item() or"
			       " loss.detach()), a cache that never evicts, or state carried across"
			       " steps; release it or cap it.", c.v[i].site,
			       c.v[i].range ? "step" : "time");
		i = j;
	}
out:
	free(c.v);
	free(c.lost);
	return err;
}

/* ---- the caching allocator ---------------------------------------------------- */

struct retry {
	const struct model_proc *p;
	int64_t device;
	int64_t a, b;   /* from the failed allocation to the successful retry */
	int64_t bytes;  /* asked for */
};

struct pending {
	int64_t tid, device, bytes, start;
	int freed;
};

struct retry_ctx {
	struct retry *v;
	size_t n, cap;
	struct pending *pend;
	size_t npend, pend_cap;
};

int findings_device_alloc_fn(const struct model_fn *fn)
{
	return fn && (fn->flags & 0x1u /* SHM_FNF_ALLOC */) && fn->name &&
	       strncmp(fn->name, "cudaMalloc", 10) == 0 && strcmp(fn->name, "cudaMallocHost") != 0;
}

#define device_alloc_fn findings_device_alloc_fn

/* In each thread's calls: a device allocation that failed, one or more
 * frees, then the same allocation succeeding. */
static int retry_cb(void *ctx, const struct model_cuda_call *c)
{
	struct retry_ctx *r = ctx;
	size_t i;

	for (i = 0; i < r->npend && r->pend[i].tid != c->tid; i++)
		;
	if (device_alloc_fn(c->fn) && c->ret != 0) {
		if (i == r->npend) {
			if (array_grow(&r->pend, &r->pend_cap, r->npend, sizeof(*r->pend)) < 0)
				return -ENOMEM;
			r->npend++;
		}
		r->pend[i] = (struct pending){ c->tid, c->device, c->bytes, c->start_ns, 0 };
		return 0;
	}
	if (i == r->npend)
		return 0;
	if (c->fn && c->fn->name && !strcmp(c->fn->name, "cudaFree") && c->ret == 0) {
		r->pend[i].freed = 1;
	} else if (device_alloc_fn(c->fn) && c->ret == 0) {
		if (r->pend[i].freed && c->bytes == r->pend[i].bytes) {
			if (array_grow(&r->v, &r->cap, r->n, sizeof(*r->v)) < 0)
				return -ENOMEM;
			r->v[r->n++] = (struct retry){ c->proc, r->pend[i].device, r->pend[i].start,
						       c->end_ns, c->bytes };
		}
		r->pend[i] = r->pend[--r->npend];
	}
	return 0;
}

struct released_ctx {
	struct model *m;
	struct retry *v;
	size_t n;
	double *released; /* per retry */
	const char **site;
};

static int released_cb(void *ctx, const struct model_block *b)
{
	struct released_ctx *c = ctx;
	const struct model_key *k = model_key(c->m, b->key);

	if (k->mem->space == MODEL_HOST)
		return 0;
	for (size_t i = 0; i < c->n; i++) {
		if (k->mem->proc != c->v[i].p || k->mem->device != c->v[i].device)
			continue;
		if (b->free_ns >= c->v[i].a && b->free_ns <= c->v[i].b)
			c->released[i] += b->weight;
		if (!c->site[i] && b->alloc_ns >= c->v[i].a && b->alloc_ns <= c->v[i].b &&
		    (double)(int64_t)b->weight == (double)c->v[i].bytes) {
			const char *site = NULL, *folded = NULL;

			if (model_key_site(c->m, b->key, &site, &folded) == 0)
				c->site[i] = site;
		}
	}
	return 0;
}

static int rule_retry(struct findings *f)
{
	struct retry_ctx r = { 0 };
	struct released_ctx rc = { .m = f->m };
	struct model_mem *const *mems;
	size_t nmems = 0;
	int err = 0;

	/* findings_gpu counted the failed device allocations (schema 2 on) */
	for (size_t i = 0; i < model_nprocs(f->m) && !err &&
			   (f->failed_allocs || model_schema_version(f->m) < 2); i++) {
		const struct model_proc *p = model_proc(f->m, i);
		struct model_scan w;

		if (!p->selected || !p->gpu_status)
			continue;
		w = model_scan_proc(p, 1);
		r.npend = 0;
		err = model_cuda_calls_each(f->m, &w, retry_cb, &r);
	}
	/* the memories (and their peaks) only when there is a retry to weigh */
	if (err || !r.n || (err = model_memories(f->m, &mems, &nmems)))
		goto out;
	rc.v = r.v;
	rc.n = r.n;
	rc.released = calloc(r.n, sizeof(*rc.released));
	rc.site = calloc(r.n, sizeof(*rc.site));
	if (!rc.released || !rc.site) {
		err = -ENOMEM;
		goto out;
	}
	err = model_blocks_each(f->m, released_cb, &rc);
	for (size_t k = 0; k < nmems && !err; k++) {
		const struct model_mem *mem = mems[k];
		double released = 0;
		size_t n = 0;
		const char *site = NULL;
		char b[3][FMT_UNIT_MAX];
		struct finding *x;

		if (mem->space == MODEL_HOST)
			continue;
		for (size_t i = 0; i < r.n; i++)
			if (r.v[i].p == mem->proc && r.v[i].device == mem->device) {
				n++;
				released += rc.released[i];
				if (!site)
					site = rc.site[i];
			}
		if (!n)
			continue;
		x = finding_new(f, "allocator_retry", mem->proc,
				mem->peak > 0 ? released / mem->peak : 0,
				"%zu allocation%s of %s failed and succeeded only after freeing %s", n,
				n == 1 ? "" : "s", mem->label, fmt_bytes(b[0], sizeof(b[0]), released));
		if (!x) {
			err = -ENOMEM;
			break;
		}
		finding_detail(x, "%zu time%s an allocation of %s failed (out of memory), blocks were"
			       " freed, and the same allocation then succeeded: %s given back to make"
			       " room, %.0f%% of its peak (%s).  That is the pattern of a caching"
			       " allocator (PyTorch's) releasing memory it had reserved but was not"
			       " using: reserved-but-unused memory large enough to fail an allocation.",
			       n, n == 1 ? "" : "s", mem->label, fmt_bytes(b[0], sizeof(b[0]), released),
			       mem->peak > 0 ? 100 * released / mem->peak : 0.0,
			       fmt_bytes(b[1], sizeof(b[1]), mem->peak));
		if (site)
			finding_detail(x, "The allocation that retried: %s.", site);
		finding_kv(x, "memory", EMIT_STR, ev_str(mem->label));
		finding_kv(x, "retries", EMIT_INT, ev_int((int64_t)n));
		finding_kv(x, "released_bytes", EMIT_BYTES, ev_real(released));
		finding_kv(x, "peak_bytes", EMIT_BYTES, ev_real(mem->peak));
		finding_kv(x, "site", EMIT_STR, ev_str(site));
		finding_coverage(x, "Every CUDA call and allocation was recorded.  shimmer sees the"
				 " allocator's cudaMalloc and cudaFree, not the tensors inside its"
				 " blocks: the unused share of reserved memory shows only when the"
				 " allocator gives it back.");
		finding_advice(x, "Reduce fragmentation of the caching allocator: set"
			       " PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, keep tensor shapes"
			       " steady across steps (pad variable lengths to buckets), and watch"
			       " torch.cuda.memory_reserved() against memory_allocated().");
	}
out:
	free(r.v);
	free(r.pend);
	free(rc.released);
	free(rc.site);
	return err;
}

/* ---- heap churn ------------------------------------------------------------------ */

static const struct emit_col churn_cols[] = {
	{ "count", "COUNT", EMIT_INT, 10, 0, 0, 0 },
	{ "per_s", "PER SECOND", EMIT_REAL, 11, 0, 0, 0 },
	{ "median_life_ns", "MEDIAN LIFE", EMIT_NS, 11, 0, 0, 0 },
	{ "bytes", "BYTES", EMIT_BYTES, 10, 0, 0, 0 },
	{ "site", "CALL SITE", EMIT_STR, -1, 0, 0, 2 },
};

static const struct emit_table churn_table = { "items", churn_cols, 5, 4, 0 };

/* Mean time of a malloc-family call and of free in p; -1 unknown.  In
 * sample mode the timed calls are the sampled ones, which sampling by
 * bytes picks among the large blocks (mmap'd, page-faulting): their mean
 * (cc1: 597 ns) is not that of the calls (74 ns timed one in 8 in `all`
 * mode), so it is unknown there, as summary gives no total for it. */
static void heap_call_times(struct model_calls *const *calls, size_t ncalls,
			    const struct model_proc *p, double *alloc, double *release)
{
	double an = 0, at = 0, fn = 0, ft = 0;

	for (size_t i = 0; i < ncalls; i++) {
		const struct model_calls *c = calls[i];

		/* an arena's map or unmap (SHM_FNF_PAGES) is a system call
		 * for thousands of objects, not an allocation's cost */
		if (c->proc != p || !c->fn->heap || (c->fn->flags & SHM_FNF_PAGES) || !c->st.n ||
		    !model_calls_estimable(c))
			continue;
		if (!strcmp(c->fn->name, "free")) {
			fn += (double)c->st.n;
			ft += c->st.mean * (double)c->st.n;
		} else {
			an += (double)c->st.n;
			at += c->st.mean * (double)c->st.n;
		}
	}
	*alloc = an ? at / an : -1;
	*release = fn ? ft / fn : -1;
}

static int rule_churn(struct findings *f)
{
	struct model_calls *const *calls;
	struct model_groups g;
	size_t ncalls;
	int err;

	err = model_calls(f->m, &calls, &ncalls);
	if (!err)
		/* by the native site: the code that calls malloc, which
		 * is what can reuse its blocks (a Python line runs them
		 * all) */
		err = model_heap_groups(f->m, MODEL_SHORT, MODEL_BY_NATIVE,
					FINDINGS_CHURN_LIFE_NS, &g);
	if (err)
		return err;
	for (size_t i = 0; i < g.n && !err;) {
		const struct model_mem *mem = g.v[i].mem;
		const struct model_proc *p = mem->proc;
		double wall = model_proc_wall(p) / 1e9, ta, tf, share = -1, count = 0;
		size_t j, hot = 0;
		struct finding *x;
		char b[2][FMT_UNIT_MAX];

		for (j = i; j < g.n && g.v[j].mem == mem; j++)
			if (wall > 0 && g.v[j].count / wall >= FINDINGS_CHURN_RATE) {
				hot++;
				count += g.v[j].count;
			}
		if (mem->space != MODEL_HOST || !hot) {
			i = j;
			continue;
		}
		heap_call_times(calls, ncalls, p, &ta, &tf);
		/* frees are not timed in every mode: then a lower bound */
		if (ta >= 0)
			share = count * (ta + (tf >= 0 ? tf : 0)) / (wall * 1e9);
		if (share >= 0 && share < FINDINGS_CHURN_SHARE) {
			i = j;
			continue;
		}
		x = finding_new(f, "heap_churn", p, share >= 0 ? share : 0,
				"%zu call site%s made ~%.0f short-lived host allocations a second", hot,
				hot == 1 ? "" : "s", count / wall);
		if (!x) {
			err = -ENOMEM;
			break;
		}
		if (share < 0)
			finding_set_severity(x, SEV_LOW);
		finding_detail(x, "%zu call site%s made %.0f allocations freed within %s of being"
			       " made (~%.0f a second over the process's %.1f s).", hot,
			       hot == 1 ? "" : "s", count, fmt_duration(b[0], sizeof(b[0]),
									 FINDINGS_CHURN_LIFE_NS),
			       count / wall, wall);
		if (share >= 0 && tf >= 0)
			finding_detail(x, "At the mean allocation call (%s) and free (%s) of this"
				       " process, that is %.1f%% of its time.", fmt_duration(b[0], sizeof(b[0]), ta),
				       fmt_duration(b[1], sizeof(b[1]), tf), 100 * share);
		else if (share >= 0)
			finding_detail(x, "At the mean allocation call of this process (%s; frees were"
				       " not timed), that is %.1f%% of its time or more.",
				       fmt_duration(b[0], sizeof(b[0]), ta), 100 * share);

		finding_kv(x, "allocations", EMIT_REAL, ev_real(count));
		finding_kv(x, "per_s", EMIT_REAL, ev_real(count / wall));
		finding_kv(x, "sites", EMIT_INT, ev_int((int64_t)hot));
		finding_table(x, &churn_table);
		for (size_t k = i, shown = 0; k < j && shown < 5; k++) {
			if (g.v[k].count / wall < FINDINGS_CHURN_RATE)
				continue;
			finding_row(x, (struct emit_val[]){ ev_approx(ev_real(g.v[k].count),
								      mem->estimated),
							    ev_real(g.v[k].count / wall),
							    ev_real(g.v[k].median_life),
							    ev_approx(ev_real(g.v[k].bytes), mem->estimated),
							    ev_str(g.v[k].name) });
			shown++;
		}
		if (mem->estimated)
			finding_coverage(x, "Sample mode: counts are estimated from sampled"
					 " allocations.");
		else
			finding_coverage(x, "Every host allocation was recorded.");
		if (share < 0 && p->mode == MODEL_MALLOC_SAMPLE)
			finding_coverage(x, "The time these calls cost is not known in sample mode:"
					 " only sampled calls are timed, and sampling favours large"
					 " blocks, whose calls are slower (SHIMMER_MALLOC=all times one"
					 " call in 8); the severity is LOW.");
		else if (share < 0)
			finding_coverage(x, "No heap call was timed: the time they cost is not known;"
					 " the severity is LOW.");
		if (!model_proc_complete(p))
			finding_coverage(x, "Events were lost: some frees may be missing.");
		stacks_coverage(x, p, NULL);
		finding_advice(x, "Allocate once and reuse: hoist the buffer out of the loop (or keep"
			       " a per-thread scratch buffer), reserve() containers to their final"
			       " size, and avoid building temporary strings or objects per"
			       " iteration; an arena or pool allocator helps when sizes repeat.");
		i = j;
	}
	model_groups_free(&g);
	return err;
}

int findings_mem(struct findings *f)
{
	int err;

	if (model_schema_version(f->m) < 3)
		return 0;
	model_want(f->m, MODEL_WANT_SITES | MODEL_WANT_CALLS);
	err = rule_growth(f);
	if (!err)
		err = rule_retry(f);
	if (!err)
		err = rule_churn(f);
	return err;
}
