/*
 * `shimmer leaks`: memory still allocated at exit, by process, memory
 * (host, cuda:N, ...) and call site, and for each such
 * group a least-squares fit of its live bytes over the training steps (or
 * over time when the process has no steps) that flags steady growth.
 * docs/usage.md describes the columns.
 */
#ifndef SHIMMER_TOOLS_LEAKS_H
#define SHIMMER_TOOLS_LEAKS_H

#include <stdint.h>
#include <stdio.h>

#include "model.h"

/* Defaults, documented in docs/usage.md. */
#define LEAKS_THRESHOLD_PER_STEP (1024.0 * 1024.0) /* bytes per step */
#define LEAKS_THRESHOLD_PER_S (1024.0 * 1024.0)    /* bytes per second, time fits */
#define LEAKS_WARMUP_FRACTION 0.2                  /* of the points, skipped */
#define LEAKS_MIN_R2 0.8                           /* below: not steady growth */
#define LEAKS_MIN_POINTS 3                         /* fewer: no verdict */
#define LEAKS_MIN_SAMPLES 8                        /* sampled rows of a site, fewer: no verdict */

struct leaks_opts {
	int fmt;                   /* an emit_format, or PRESENT_FOLDED */
	double threshold_per_step; /* bytes */
	double threshold_per_s;    /* bytes */
	const char *steps;         /* range name; NULL: the most frequent at depth 0 */
	int64_t warmup_steps;      /* -1: LEAKS_WARMUP_FRACTION of the points */
	int all_allocations;       /* folded: every allocation, not only the live */
};

/* Initialise o with the defaults. */
void leaks_opts_init(struct leaks_opts *o);

/*
 * Write the report on m's selected processes to out.  The model's one pass
 * over the allocations; memory is proportional to call sites x fit points.
 * Returns 0, -EINVAL after one error line (no call stacks), or another
 * negative errno.
 */
int leaks_write(struct model *m, FILE *out, const struct leaks_opts *o);

/*
 * The same analysis, handed over site by site (those with memory live at
 * the end, or growing): cb(ctx, group, verdict, withheld) with verdict
 * "growing", "ok" or "n/a" and withheld the reason of an "n/a" (else
 * NULL).  Stops at cb's first nonzero return, which it returns.
 */
int leaks_verdicts(struct model *m, const struct leaks_opts *o,
		   int (*cb)(void *ctx, const struct model_group *g, const char *verdict,
			     const char *withheld),
		   void *ctx);

/* One site's analysis with its fit (leaks_each). */
struct leaks_fit {
	const struct model_group *g;
	const char *verdict;     /* "growing", "ok", "n/a" */
	const char *withheld;    /* an "n/a"'s reason, else NULL */
	const char *fit;         /* "steps", "time", "none" */
	const char *range;       /* the steps' range, for a steps fit */
	double slope_step, slope_s, r2; /* NaN: none */
	double icpt_step;        /* live bytes = icpt_step + slope_step * k at point k */
	double icpt_s;           /* live bytes = icpt_s + slope_s * (t - t[0]) s */
	size_t n, warm;          /* fit points, the first warm of them skipped */
	const int64_t *t;        /* the points, absolute ns */
	const double *y;         /* the site's live bytes at each point; NULL: always 0 */
};

/* The same analysis with each site's fit; the pointers are valid during
 * the call only.  Stops at cb's first nonzero return, which it returns. */
int leaks_each(struct model *m, const struct leaks_opts *o,
	       int (*cb)(void *ctx, const struct leaks_fit *fit), void *ctx);

#endif /* SHIMMER_TOOLS_LEAKS_H */
