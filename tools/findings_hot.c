/*
 * Hot ranges (see findings.h, docs/usage.md): a range over --threshold of
 * a process's wall time.  (Hot kernels and API calls are findings_gpu.c's:
 * they need the launching calls' stacks and the span analysed.)  A hot
 * operation is where time goes, not a defect: its severity is MEDIUM over
 * 30%, else LOW, never HIGH.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "findings.h"
#include "fmt.h"
#include "map.h"

/* Ranges that stand for most of the run (an epoch, the whole program)
 * say nothing: over this share of the wall time they are left out. */
#define HOT_RANGE_MAX 0.90

static enum severity hot_severity(double share)
{
	return share > FINDINGS_HIGH ? SEV_MEDIUM : SEV_LOW;
}

struct range_agg {
	struct map_key key; /* domain id, name id (the process's strings) */
	const char *domain, *name;
	struct stats st;
	int64_t sum, open;
};

static int range_cb(void *ctx, const struct model_range *r)
{
	struct map *m = ctx;
	/* the model hands out one pointer per string: they stand for the ids */
	struct map_key k = { (int64_t)(uintptr_t)r->domain, (int64_t)(uintptr_t)r->name, 0 };
	struct range_agg *a = map_get(m, &k);

	if (!a)
		return -ENOMEM;
	a->domain = r->domain;
	a->name = r->name;
	if (r->end_ns < 0) {
		a->open++;
	} else {
		stats_add(&a->st, (double)(r->end_ns - r->start_ns));
		a->sum += r->end_ns - r->start_ns;
	}
	return 0;
}

static int hot_ranges(struct findings *f, const struct model_proc *p)
{
	struct map ranges = { .item_size = sizeof(struct range_agg) };
	struct model_scan w = model_scan_proc(p, 0);
	const struct model_steps *s;
	double wall = model_proc_wall(p);
	int err = model_steps(f->m, p, NULL, &s);

	if (!err)
		err = model_ranges_each(f->m, &w, range_cb, &ranges);
	for (size_t i = 0; !err && i < ranges.n && wall > 0; i++) {
		const struct range_agg *r = map_item(&ranges, i);
		double share = (double)r->sum / wall;
		char b[4][FMT_UNIT_MAX], label[512];
		struct finding *x;

		snprintf(label, sizeof(label), "%s%s%s", r->domain ? r->domain : "",
			 r->domain ? ":" : "", r->name ? r->name : "?");
		if (share <= f->o->threshold || share > HOT_RANGE_MAX ||
		    (s->name && r->name && !strcmp(r->name, s->name)))
			continue;
		x = finding_new(f, "hot_range", p, share, "range '%s' took %.0f%% of the time",
				label, 100 * share);
		if (!x) {
			err = -ENOMEM;
			break;
		}
		finding_set_severity(x, hot_severity(share));
		finding_detail(x, "%llu ranges '%s' lasted %s, a mean of %s (max %s), against %s of"
			       " wall time.", (unsigned long long)r->st.n, label,
			       fmt_duration(b[0], sizeof(b[0]), (double)r->sum),
			       fmt_duration(b[1], sizeof(b[1]), r->st.mean),
			       fmt_duration(b[2], sizeof(b[2]), r->st.max),
			       fmt_duration(b[3], sizeof(b[3]), wall));
		finding_kv(x, "range", EMIT_STR, ev_str(label));
		finding_kv(x, "count", EMIT_INT, ev_int((int64_t)r->st.n));
		finding_kv(x, "total_ns", EMIT_NS, ev_int(r->sum));
		finding_coverage(x, "Every range was recorded%s.",
				 r->open ? " (some were still open at the end and are not counted)" :
					   "");
		finding_advice(x, "Look inside '%s' first: its kernels and calls (shimmer export"
			       " --format chrome, or the report's timeline) tell whether the GPU or"
			       " the CPU holds it up.", label);
	}
	map_free(&ranges);
	return err;
}

int findings_hot(struct findings *f)
{
	int err = 0;

	for (size_t i = 0; !err && model_schema_version(f->m) >= 2 && i < model_nprocs(f->m); i++)
		if (model_proc(f->m, i)->selected)
			err = hot_ranges(f, model_proc(f->m, i));
	return err;
}
