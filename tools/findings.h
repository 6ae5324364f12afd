/*
 * Findings: what is wrong with a run and what to do about it, computed
 * from the model (`shimmer bottlenecks`, the findings section of `shimmer
 * report`).  docs/usage.md states every rule: its definition, threshold,
 * severity and advice.
 *
 * A finding is one rule firing for one process (or the run, for the rank
 * rules): its kind, a severity, the share it was judged on, a title, the
 * evidence (a sentence, typed figures, and a small table of the top
 * kernels, call sites or Python lines), the coverage of that evidence
 * (sampling windows, lost events) and one recommendation.  A rule that
 * cannot judge a process for lack of data (CUPTI lost records, events
 * were lost, sampling windows missed the steps) says so as a withheld
 * entry instead of a finding, never as a verdict.
 *
 * The rules live in findings_gpu.c (synchronization, GPU idle, launches,
 * copies, data loading, communication and ranks), findings_mem.c (memory
 * growth, the caching allocator, heap churn) and findings_hot.c (hot
 * kernels, API calls and ranges); this file runs them, orders and writes
 * the findings.  Not thread-safe.
 */
#ifndef SHIMMER_TOOLS_FINDINGS_H
#define SHIMMER_TOOLS_FINDINGS_H

#include <stddef.h>
#include <stdint.h>

#include "emit.h"
#include "model.h"

enum severity { SEV_LOW = 1, SEV_MEDIUM = 2, SEV_HIGH = 3 };

/* The severity of a share (0..1) of the time a finding concerns: HIGH
 * over 30%, MEDIUM from 10%, LOW below. */
#define FINDINGS_HIGH 0.30
#define FINDINGS_MEDIUM 0.10
enum severity findings_severity(double share);
const char *findings_severity_name(enum severity s);

/* Rules' thresholds (docs/usage.md). */
#define FINDINGS_SYNC_SHARE 0.10         /* blocked / GPU busy time */
#define FINDINGS_SYNC_MIN_WALL 0.01      /* and blocked / span, at least */
#define FINDINGS_IDLE_SHARE 0.10         /* device idle / its span */
#define FINDINGS_KERNEL_WAIT_NS 3000     /* HTA's kernel wait: gaps shorter */
#define FINDINGS_DELAY_OUTLIER_NS 100000 /* a launch delay on an idle stream */
#define FINDINGS_UTIL_CHUNKS 30          /* Nsight gpu_time_util: chunks */
#define FINDINGS_UTIL_LOW 0.50           /* and its low-use threshold */
#define FINDINGS_GAP_NS 500000000        /* Nsight gpu_gaps: 500 ms */
#define FINDINGS_LAUNCH_SHORT 0.50       /* kernels shorter than their launch */
#define FINDINGS_LAUNCH_MIN 100          /* kernels, at least */
#define FINDINGS_LAUNCH_HOSTWAIT 0.10    /* host-wait idle / span */
#define FINDINGS_COPIES_MIN 10           /* pageable or synchronous copies */
#define FINDINGS_HOT 0.10                /* --threshold default */
#define FINDINGS_LOADING_SHARE 0.10      /* input wait / steps */
#define FINDINGS_COMM_EXPOSED 0.10       /* communication not overlapped / span */
#define FINDINGS_STRAGGLER_MARGIN 0.05   /* slowest rank's mean over the median */
#define FINDINGS_CHURN_RATE 100000.0     /* short-lived allocations per second */
#define FINDINGS_CHURN_SHARE 0.01        /* and estimated malloc+free time / wall */
#define FINDINGS_CHURN_LIFE_NS 1000000   /* short-lived: freed within 1 ms */

struct findings_opts {
	double threshold; /* hot operations: share of the time */
};

void findings_opts_init(struct findings_opts *o);

/* A figure of the evidence (JSON member; the report's and the table's
 * sentence is written separately). */
struct finding_kv {
	const char *key;
	enum emit_type type;
	struct emit_val v;
};

#define FINDING_KV_MAX 16

struct finding {
	const char *kind;               /* "sync", "gpu_idle", ... (static) */
	enum severity severity;
	double share;                   /* what the severity was judged on */
	const struct model_proc *proc;  /* NULL: the run (rank rules) */
	int64_t device;                 /* -1: none */
	char *title;                    /* one line */
	char *detail;                   /* the evidence, in words and figures */
	struct finding_kv kv[FINDING_KV_MAX];
	size_t nkv;
	const struct emit_table *items; /* the evidence's table (static), or NULL */
	struct emit_val *rows;          /* nrows x items->ncols */
	size_t nrows;
	char *coverage;                 /* what the evidence covers */
	char *advice;                   /* one recommendation */
	char **owned;                   /* strings the values point to */
	size_t nowned, owned_cap;
};

struct withheld {
	const char *kind;
	const struct model_proc *proc;
	char *reason;
};

/* Each selected process's GPU time, as the rules measured it (the
 * report's per-rank table): within its span (or its sampling windows). */
struct findings_proc {
	const struct model_proc *p;
	int sampled;
	int64_t span_ns, busy_ns;               /* span analysed; a device busy, summed */
	int64_t compute_ns, comm_ns, mem_ns;    /* unions of each class, summed */
	int64_t overlap_ns;                     /* communication under compute */
	int64_t hw_ns, kw_ns, other_ns;         /* HTA's idle split */
	int64_t blocked_ns;                     /* CPU blocked on the GPU */
	int64_t *arrivals;                      /* NCCL kernels' launches, in order */
	size_t narrivals;
	struct findings_busy *busy;             /* per device, over the whole run */
	size_t nbusy;
	struct findings_site *sites;            /* kernel time by launching line */
	size_t nsites;
	struct findings_site *kernels;          /* kernel time by (full) name; count too */
	size_t nkernels;
	double kernel_count;                    /* recorded, estimated for the run */
};

/* Kernel time launched from one line: the Python line of the launch, else
 * its native call site (or why there is none); an estimate for the whole
 * run where GPU activity was sampled. */
struct findings_site {
	char *site;
	double ns;
	double count; /* kernels: how many ran */
};

/* A device's busy share over time: FINDINGS_BUSY_BINS equal bins from the
 * first operation's start (a) to the last's end (b); a bin outside every
 * sampling window is NaN (not recorded, not idle). */
#define FINDINGS_BUSY_BINS 400
struct findings_busy {
	int64_t device;
	int64_t a, b;
	float share[FINDINGS_BUSY_BINS];
};

/* A growing call site's fitted line (the leak regression's), for charts:
 * at most FINDINGS_FIT_POINTS of its fit points. */
#define FINDINGS_FIT_POINTS 100
struct findings_fit {
	const struct model_mem *mem;
	char *site;
	double slope, r2; /* bytes a step (per_step) or a second */
	int per_step;
	int64_t *t;       /* ns */
	double *y;        /* fitted live bytes */
	size_t n;
};

struct findings {
	struct model *m;
	const struct findings_opts *o;
	struct finding **v;
	size_t n, cap;
	struct withheld *w;
	size_t nw, wcap;
	struct findings_proc *procs; /* the processes with GPU activity */
	size_t nprocs, procs_cap;
	struct findings_fit *fits;   /* every growing site's */
	size_t nfits, fits_cap;
	int64_t failed_allocs;       /* device allocations that failed, seen by
				      * findings_gpu's pass over the CUDA calls:
				      * the allocator-retry rule reads the calls
				      * again only when there are some */
	int err; /* sticky -ENOMEM */
};

/* Runs every rule on m's selected processes.  Returns 0 or a negative
 * errno; free with findings_free() either way. */
int findings_run(struct model *m, const struct findings_opts *o, struct findings *f);
void findings_free(struct findings *f);

/* Counts by severity (index enum severity). */
void findings_count(const struct findings *f, size_t count[4]);

/* Writes the findings as `shimmer bottlenecks` does (table or JSON). */
void findings_emit(struct emit *e, const struct findings *f);

/* ---- for the rules (findings_*.c) ---- */

/* A new finding of kind for p, with printf-style title; NULL when out of
 * memory (recorded in f->err). */
struct finding *finding_new(struct findings *f, const char *kind, const struct model_proc *p,
			    double share, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* The same with a severity of the rule's own. */
void finding_set_severity(struct finding *x, enum severity s);

/* Appends to the evidence sentence, the coverage, the advice. */
void finding_detail(struct finding *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void finding_coverage(struct finding *x, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void finding_advice(struct finding *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A figure; a string value is copied. */
void finding_kv(struct finding *x, const char *key, enum emit_type t, struct emit_val v);

/* The evidence table: t's columns, one row of values at a time (string
 * values are copied). */
void finding_table(struct finding *x, const struct emit_table *t);
void finding_row(struct finding *x, const struct emit_val *v);

/* A copy of s owned by x (NULL for NULL or out of memory). */
const char *finding_str(struct finding *x, const char *s);

/* Records that kind could not be judged for p, and why. */
void findings_withhold(struct findings *f, const char *kind, const struct model_proc *p,
		       const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* The rules. */
int findings_gpu(struct findings *f);
/* A device allocation function (cudaMalloc*, not cudaMallocHost). */
int findings_device_alloc_fn(const struct model_fn *fn);
int findings_mem(struct findings *f);
int findings_hot(struct findings *f);

/* "pid P (rank R) EXE" of p, into buf. */
char *findings_proc_label(const struct model_proc *p, char *buf, size_t len);

/* A site for a table: "python (native)" or either alone, or none; into buf. */
char *findings_site(const char *native, const char *python, char *buf, size_t len);

#endif /* SHIMMER_TOOLS_FINDINGS_H */
