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

/* Ranges that stand for most of the run (an epoch, the whole program)
 * say nothing: over this share of the wall time they are left out. */
#define HOT_RANGE_MAX 0.90

static enum severity hot_severity(double share)
{
	return share > FINDINGS_HIGH ? SEV_MEDIUM : SEV_LOW;
}

static int hot_ranges(struct findings *f, const struct model_proc *p)
{
	const struct model_steps *s;
	struct model_gpu g;
	double wall = model_proc_wall(p);
	int err = model_steps(f->m, p, NULL, &s);

	if (!err)
		err = model_gpu(f->m, p, &g);
	if (err || wall <= 0)
		return err;
	for (size_t i = 0; i < g.nranges; i++) {
		const struct model_gpu_agg *r = g.ranges[i];
		double share = (double)r->sum / wall;
		char b[4][FMT_UNIT_MAX];
		struct finding *x;

		/* the steps' name, in its domain or not */
		const char *bare = r->domain && !strncmp(r->name, r->domain, strlen(r->domain)) &&
						   r->name[strlen(r->domain)] == ':'
					   ? r->name + strlen(r->domain) + 1
					   : r->name;

		if (share <= f->o->threshold || share > HOT_RANGE_MAX ||
		    (s->name && !strcmp(bare, s->name)))
			continue;
		x = finding_new(f, "hot_range", p, share, "range '%s' took %.0f%% of the time",
				r->name, 100 * share);
		if (!x)
			return -ENOMEM;
		finding_set_severity(x, hot_severity(share));
		finding_detail(x, "%llu ranges '%s' lasted %s, a mean of %s (max %s), against %s of"
			       " wall time.", (unsigned long long)r->st.n, r->name,
			       fmt_duration(b[0], sizeof(b[0]), (double)r->sum),
			       fmt_duration(b[1], sizeof(b[1]), r->st.mean),
			       fmt_duration(b[2], sizeof(b[2]), r->st.max),
			       fmt_duration(b[3], sizeof(b[3]), wall));
		finding_kv(x, "range", EMIT_STR, ev_str(r->name));
		finding_kv(x, "count", EMIT_INT, ev_int((int64_t)r->st.n));
		finding_kv(x, "total_ns", EMIT_NS, ev_int(r->sum));
		finding_coverage(x, "Every range was recorded%s.",
				 r->open ? " (some were still open at the end and are not counted)" :
					   "");
		finding_advice(x, "Look inside '%s' first: its kernels and calls (shimmer export"
			       " --format chrome, or the report's timeline) tell whether the GPU or"
			       " the CPU holds it up.", r->name);
	}
	return 0;
}

int findings_hot(struct findings *f)
{
	int err = 0;

	for (size_t i = 0; !err && model_schema_version(f->m) >= 2 && i < model_nprocs(f->m); i++)
		if (model_proc(f->m, i)->selected)
			err = hot_ranges(f, model_proc(f->m, i));
	return err;
}
