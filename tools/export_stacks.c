/*
 * shimmer export --format folded | speedscope: call stacks weighted by
 * allocated bytes, leaked bytes, bytes live at the peak (the memory
 * commands' own folded stacks: leaks and peak), or GPU time by the code
 * that launched the kernels.
 *
 * GPU time: each kernel joins the API call that launched it (same process
 * and correlation id); the call carries the launching code's stacks
 * (schema 5; recorded inside GPU sampling windows, for every launch with
 * SHIMMER_GPU=all).  The stack is rendered as the memory commands render a
 * CUDA allocation's (sites.h): the Python frames when the call had any,
 * else the native frames less those of the CUDA libraries, CUPTI and
 * shimmer.  A line is "pid P;cuda:D;outermost;...;innermost NS": the
 * kernels' total duration in ns, for a sampled process scaled to an
 * estimate of the whole run as `summary` scales its kernel total.
 *
 * speedscope: the same lines as a speedscope file, one "sampled" profile
 * per process, memory and weight, frames shared.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "export.h"
#include "leaks.h"
#include "peak.h"
#include "present.h"
#include "sites.h"
#include "store.h"

#define NO_LAUNCH "(launch call not recorded)"

struct launch_item {
	struct map_key key; /* proc, correlation */
	int64_t stack_id, pystack_id;
};

struct gpu_item {
	struct map_key key; /* proc, label, folded */
	double ns;
};

/* The stacks and the memories' names ("cuda:N", as every command names
 * them), for the comparison. */
struct gpu_names {
	struct sites s;
	struct strtab labels;
};

static int cmp_gpu(const void *a, const void *b, void *ctx)
{
	const struct gpu_item *x = *(struct gpu_item *const *)a, *y = *(struct gpu_item *const *)b;
	const struct gpu_names *n = ctx;
	int c;

	if (x->key.proc_id != y->key.proc_id)
		return x->key.proc_id < y->key.proc_id ? -1 : 1;
	c = strcmp(n->labels.v[x->key.a], n->labels.v[y->key.a]);
	return c ? c : strcmp(n->s.folded.v[x->key.b], n->s.folded.v[y->key.b]);
}

static int64_t col_id(sqlite3_stmt *st, int c)
{
	return sqlite3_column_type(st, c) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, c);
}

/* The launching calls' stacks, by (process, correlation). */
static int load_launches(struct export *x, struct map *launches)
{
	sqlite3_stmt *st = NULL;
	int err, r;

	err = store_prepare(x->db, x->schema >= 5 ? "SELECT proc_id, correlation, stack_id,"
			    " pystack_id FROM gpu_api"
			    : "SELECT proc_id, correlation, NULL, NULL FROM gpu_api", &st);
	if (err)
		return err;
	while ((r = store_step(x->db, st)) > 0) {
		struct map_key k = { sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1), 0 };
		struct launch_item *it;

		if (!export_proc(x, k.proc_id))
			continue;
		it = map_get(launches, &k);
		if (!it) {
			r = -ENOMEM;
			break;
		}
		it->stack_id = col_id(st, 2);
		it->pystack_id = col_id(st, 3);
	}
	sqlite3_finalize(st);
	return r < 0 ? r : 0;
}

/*
 * For each process whose stack tables refused captures and that has GPU
 * time here, on stderr (stdout is the lines alone): the refusal, and the
 * share of its GPU time on its (no stack) lines, where the launches whose
 * native capture was refused are (with others that had no stack for
 * another reason: an upper bound).  A refused Python capture moves a
 * launch to its native site, which no line tells apart: no share.
 */
static void warn_refused(const struct export *x, struct gpu_item *const *order, size_t n,
			 const struct gpu_names *nm)
{
	for (size_t i = 0; i < x->nprocs; i++) {
		const struct xproc *p = &x->procs[i];
		long long total = 0, nostack = 0;
		char line[PRESENT_STACKS_LINE + 160];
		size_t at;

		if (!p->mp->stacks_refused && !p->mp->pystacks_refused)
			continue;
		for (size_t k = 0; k < n; k++) {
			long long ns = llround(order[k]->ns * p->gpu_scale);

			if (order[k]->key.proc_id != p->proc_id || ns <= 0)
				continue;
			total += ns;
			if (strcmp(nm->s.folded.v[order[k]->key.b], "(no stack)") == 0)
				nostack += ns;
		}
		if (total <= 0)
			continue;
		at = present_stacks_line_of(line, sizeof(line), p->mp, "the launches among them",
					    "their GPU time is exact");
		if (p->mp->stacks_refused && at < sizeof(line))
			snprintf(line + at, sizeof(line) - at, "; those the native table refused"
				 " are among its (no stack) lines: %.1f%% of its GPU time (%lld of"
				 " %lld ns)", 100.0 * (double)nostack / (double)total, nostack, total);
		cli_warn("pid %lld (proc %lld): %s", (long long)p->pid, (long long)p->proc_id, line);
	}
}

static int gpu_time(struct export *x, struct xout *w)
{
	struct map launches = { .item_size = sizeof(struct launch_item) };
	struct map groups = { .item_size = sizeof(struct gpu_item) };
	struct gpu_item **order = NULL;
	sqlite3_stmt *st = NULL;
	struct gpu_names nm = { 0 };
	int err, r = 0;

	if (x->schema < 2)
		return 0;
	err = sites_open(&nm.s, x->db);
	if (err)
		return err;
	err = load_launches(x, &launches);
	if (!err)
		err = store_prepare(x->db, "SELECT proc_id, device, correlation, start_ns, end_ns"
				    " FROM kernels", &st);
	while (!err && (r = store_step(x->db, st)) > 0) {
		const struct xproc *p = export_proc(x, sqlite3_column_int64(st, 0));
		struct map_key lk = { 0, sqlite3_column_int64(st, 2), 0 }, gk;
		int64_t start = sqlite3_column_int64(st, 3), end = sqlite3_column_int64(st, 4);
		const struct launch_item *l;
		struct gpu_item *g;
		char label[32];
		int64_t site;

		if (!p || !export_in(p, start, end))
			continue;
		lk.proc_id = p->proc_id;
		l = map_find(&launches, &lk);
		gk.proc_id = p->proc_id;
		snprintf(label, sizeof(label), "cuda:%lld", (long long)sqlite3_column_int64(st, 1));
		err = strtab_index(&nm.labels, label, &gk.a);
		/* A launch with Python frames is the user's Python line's. */
		if (!err && l)
			err = sites_of(&nm.s, p->proc_id, l->stack_id, l->pystack_id, &site, &gk.b);
		else if (!err)
			err = strtab_index(&nm.s.folded, NO_LAUNCH, &gk.b);
		if (err)
			break;
		g = map_get(&groups, &gk);
		if (!g) {
			err = -ENOMEM;
			break;
		}
		g->ns += (double)(end > start ? end - start : 0);
	}
	if (!err && r < 0)
		err = r;
	sqlite3_finalize(st);
	if (!err && groups.n && !(order = malloc(groups.n * sizeof(*order))))
		err = -ENOMEM;
	if (!err) {
		for (size_t i = 0; i < groups.n; i++)
			order[i] = map_item(&groups, i);
		/* by process, memory, stack: the order of the memory commands'
		 * lines (none: order is NULL, which qsort_r may not be given) */
		if (groups.n)
			qsort_r(order, groups.n, sizeof(*order), cmp_gpu, &nm);
		for (size_t i = 0; i < groups.n; i++) {
			const struct gpu_item *g = order[i];
			const struct xproc *p = export_proc(x, g->key.proc_id);
			long long ns = llround(g->ns * p->gpu_scale);

			if (ns <= 0)
				continue;
			xout_lit(w, "pid ");
			xout_i64(w, p->pid);
			xout_lit(w, ";");
			xout_str(w, nm.labels.v[g->key.a]);
			xout_lit(w, ";");
			xout_str(w, nm.s.folded.v[g->key.b]);
			xout_lit(w, " ");
			xout_i64(w, ns);
			xout_lit(w, "\n");
		}
		warn_refused(x, order, groups.n, &nm);
	}
	free(order);
	map_free(&launches);
	map_free(&groups);
	sites_close(&nm.s);
	strtab_free(&nm.labels);
	return err;
}

/* The memory weights: the memory commands' own folded lines (leaks, peak)
 * of the selected processes, from the model. */
static int memory_folded(struct export *x, struct xout *w, enum export_weight wt)
{
	struct leaks_opts lo;

	xout_flush(w);
	if (w->err)
		return -EIO;
	if (wt == XW_PEAK)
		return peak_write(x->m, w->f, PRESENT_FOLDED);
	leaks_opts_init(&lo);
	lo.fmt = PRESENT_FOLDED;
	lo.all_allocations = wt == XW_ALLOCATED;
	return leaks_write(x->m, w->f, &lo);
}

static int folded_weight(struct export *x, struct xout *w, enum export_weight wt)
{
	return wt == XW_GPU_TIME ? gpu_time(x, w) : memory_folded(x, w, wt);
}

int export_folded(struct export *x, struct xout *w)
{
	return folded_weight(x, w, x->o->weight);
}

/* ---- speedscope ---- */

struct profile {
	struct map_key key;  /* weight, (pid;label) index */
	size_t first, n;     /* its samples in the sample arrays */
	double total;
};

struct sample {
	uint32_t profile;
	uint32_t nframes;
	size_t frames;       /* index into the frame index array */
	long long weight;
};

struct scope {
	struct strtab frames, heads;
	struct map profiles;
	struct sample *samples;
	size_t nsamples, samples_cap;
	uint32_t *idx;
	size_t nidx, idx_cap;
};

/* One folded line "pid P;LABEL;f1;...;fn W" of weight wt. */
static int scope_line(struct scope *sc, enum export_weight wt, char *line)
{
	char *sp = strrchr(line, ' '), *head_end, *f;
	struct map_key k = { wt, 0, 0 };
	struct profile *pr;
	struct sample *sm;
	int64_t hi, fi;
	int err;

	if (!sp)
		return 0;
	*sp = 0;
	/* the profile: "pid P;LABEL" */
	head_end = strchr(line, ';');
	head_end = head_end ? strchr(head_end + 1, ';') : NULL;
	if (!head_end)
		return 0;
	*head_end = 0;
	err = strtab_index(&sc->heads, line, &hi);
	if (err)
		return err;
	k.a = hi;
	pr = map_get(&sc->profiles, &k);
	if (!pr)
		return -ENOMEM;
	err = array_grow(&sc->samples, &sc->samples_cap, sc->nsamples, sizeof(*sc->samples));
	if (err)
		return err;
	sm = &sc->samples[sc->nsamples++];
	*sm = (struct sample){ .profile = (uint32_t)(pr - (struct profile *)sc->profiles.items),
			       .frames = sc->nidx, .weight = atoll(sp + 1) };
	pr->total += (double)sm->weight;
	pr->n++;
	for (f = head_end + 1; f; ) {
		char *next = strchr(f, ';');

		if (next)
			*next = 0;
		err = strtab_index(&sc->frames, f, &fi);
		if (!err)
			err = array_grow(&sc->idx, &sc->idx_cap, sc->nidx, sizeof(*sc->idx));
		if (err)
			return err;
		sc->idx[sc->nidx++] = (uint32_t)fi;
		sm->nframes++;
		f = next ? next + 1 : NULL;
	}
	return 0;
}

static int scope_weight(struct export *x, struct scope *sc, enum export_weight wt)
{
	char *text = NULL, *line, *save = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	struct xout mw;
	int err;

	if (!mem)
		return -ENOMEM;
	err = xout_init(&mw, mem);
	if (!err)
		err = folded_weight(x, &mw, wt);
	if (xout_finish(&mw) < 0 && !err)
		err = -ENOMEM;
	fclose(mem);
	for (line = text ? strtok_r(text, "\n", &save) : NULL; !err && line;
	     line = strtok_r(NULL, "\n", &save))
		err = scope_line(sc, wt, line);
	free(text);
	return err;
}

int export_speedscope(struct export *x, struct xout *w)
{
	struct scope sc = { .profiles = { .item_size = sizeof(struct profile) } };
	int err = 0, first;

	for (int wt = XW_ALLOCATED; !err && wt <= XW_GPU_TIME; wt++)
		if (x->o->weight == XW_ALL || x->o->weight == (enum export_weight)wt)
			err = scope_weight(x, &sc, (enum export_weight)wt);
	if (err)
		goto out;
	xout_lit(w, "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\","
		    "\"exporter\":\"shimmer\",\"name\":");
	xout_json(w, x->o->path);
	xout_lit(w, ",\"activeProfileIndex\":0,\"shared\":{\"frames\":[");
	for (size_t i = 0; i < sc.frames.n; i++) {
		xout_str(w, i ? ",{\"name\":" : "{\"name\":");
		xout_json(w, sc.frames.v[i]);
		xout_lit(w, "}");
	}
	xout_lit(w, "]},\"profiles\":[");
	for (size_t p = 0; p < sc.profiles.n; p++) {
		const struct profile *pr = map_item(&sc.profiles, p);
		enum export_weight wt = (enum export_weight)pr->key.proc_id;
		char name[600];

		snprintf(name, sizeof(name), "%.500s %s", sc.heads.v[pr->key.a],
			 export_weight_name(wt));
		for (char *c = name; *c; c++)
			if (*c == ';')
				*c = ' ';
		xout_str(w, p ? ",\n{\"type\":\"sampled\",\"name\":" : "\n{\"type\":\"sampled\",\"name\":");
		xout_json(w, name);
		xout_lit(w, ",\"unit\":");
		xout_str(w, wt == XW_GPU_TIME ? "\"nanoseconds\"" : "\"bytes\"");
		xout_lit(w, ",\"startValue\":0,\"endValue\":");
		xout_i64(w, llround(pr->total));
		xout_lit(w, ",\"samples\":[");
		first = 1;
		for (size_t i = 0; i < sc.nsamples; i++) {
			const struct sample *sm = &sc.samples[i];

			if (sm->profile != p)
				continue;
			xout_str(w, first ? "[" : ",[");
			for (uint32_t f = 0; f < sm->nframes; f++) {
				if (f)
					xout_lit(w, ",");
				xout_u64(w, sc.idx[sm->frames + f]);
			}
			xout_lit(w, "]");
			first = 0;
		}
		xout_lit(w, "],\"weights\":[");
		first = 1;
		for (size_t i = 0; i < sc.nsamples; i++) {
			if (sc.samples[i].profile != p)
				continue;
			if (!first)
				xout_lit(w, ",");
			xout_i64(w, sc.samples[i].weight);
			first = 0;
		}
		xout_lit(w, "]}");
	}
	xout_lit(w, "]}\n");
out:
	strtab_free(&sc.frames);
	strtab_free(&sc.heads);
	map_free(&sc.profiles);
	free(sc.samples);
	free(sc.idx);
	return err;
}
