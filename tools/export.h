/*
 * shimmer export: a store as files other tools open (docs/usage.md).
 *
 *   chrome      Trace Event Format JSON (Perfetto UI, chrome://tracing)
 *   csv         the detailed event log, one row per event
 *   folded      collapsed stacks (flamegraph.pl, inferno, speedscope)
 *   speedscope  speedscope's own file format
 *
 * This header is shared by the export files only: export.c (the command,
 * the selection of processes, the one clock), export_chrome.c,
 * export_csv.c and export_stacks.c (folded, speedscope).  Every writer goes through struct
 * xout, a buffered writer with the few formatters the formats need, so
 * that a million events take well under a second to write.
 */
#ifndef SHIMMER_TOOLS_EXPORT_H
#define SHIMMER_TOOLS_EXPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <sqlite3.h>

#include "map.h"
#include "model.h"

enum export_weight {
	XW_ALLOCATED, /* bytes of every allocation */
	XW_LEAKED,    /* bytes never freed */
	XW_PEAK,      /* bytes live at each memory's peak */
	XW_GPU_TIME,  /* GPU (kernel) time by launching code location */
	XW_ALL,       /* speedscope only: every weight, a profile each */
};

/* A selected process, and where its times land on the export's clock. */
struct xproc {
	const struct model_proc *mp; /* the model's process */
	int64_t proc_id, pid, rank; /* rank -1: none */
	int64_t trace_pid;          /* pid in the trace (the pid, unless two share it) */
	int64_t start_ns, end_ns;   /* the model's: end recorded, else its last event */
	int64_t offset_ns;          /* add to a time of this process: export clock, ns */
	int64_t begin_abs, end_abs; /* --begin/--end in this process's own clock */
	int sampled;                /* GPU activity recorded only in windows */
	double gpu_scale;           /* recorded -> estimate (1 when whole) */
	char *exe, *host, *label;   /* label: "exe rank R" */
};

struct export_opts {
	const char *path, *out_path;
	int format;
	enum export_weight weight;
	int weight_given;
	int64_t pid, rank;       /* -1: any */
	double begin_s, end_s;   /* -1: open */
	double max_mb;
};

struct export {
	const struct export_opts *o;
	struct model *m;         /* the store, with the --pid and --rank filter */
	sqlite3 *db;             /* the model's connection */
	int schema;
	struct xproc *procs;     /* selected, by proc_id */
	size_t nprocs;
	int64_t origin_ns;       /* export clock 0 (ns): the first selected start */
};

/* The selected process proc_id, or NULL. */
const struct xproc *export_proc(const struct export *x, int64_t proc_id);

/* Whether [start, end] (the process's own ns) overlaps --begin/--end. */
static inline int export_in(const struct xproc *p, int64_t start, int64_t end)
{
	return end >= p->begin_abs && start <= p->end_abs;
}

/* ---- buffered output ---- */

/* To a file (through a 1 MiB buffer), or to memory (f NULL: buf grows
 * and holds everything written, n bytes; err set when it cannot grow). */
struct xout {
	FILE *f;
	char *buf;
	size_t n, cap;
	uint64_t written; /* bytes so far */
	int err;          /* a write failed */
};

int xout_init(struct xout *w, FILE *f); /* f NULL: to memory */
int xout_finish(struct xout *w); /* flush and free; 0 or -EIO (-ENOMEM) */
void xout_flush(struct xout *w); /* to memory: nothing */
void xout_room(struct xout *w, size_t n); /* room for n more bytes in buf, if it can */

static inline void xout_need(struct xout *w, size_t n)
{
	if (w->n + n > w->cap)
		xout_room(w, n);
}

static inline void xout_mem(struct xout *w, const char *s, size_t n)
{
	if (n >= w->cap && w->f) {
		xout_flush(w);
		if (fwrite(s, 1, n, w->f) != n)
			w->err = 1;
		w->written += n;
		return;
	}
	xout_need(w, n);
	if (w->n + n > w->cap)
		return; /* to memory, out of it: err is set */
	memcpy(w->buf + w->n, s, n);
	w->n += n;
}

#define xout_lit(w, s) xout_mem((w), (s), sizeof(s) - 1)

void xout_str(struct xout *w, const char *s);  /* as is */
void xout_i64(struct xout *w, int64_t v);
void xout_u64(struct xout *w, uint64_t v);
void xout_us(struct xout *w, int64_t ns);      /* ns as microseconds, 3 decimals */
void xout_json(struct xout *w, const char *s); /* a JSON string literal; NULL: null */
void xout_csv(struct xout *w, const char *s);  /* one CSV text field, as fmt_csv(); NULL: empty */
void xout_double(struct xout *w, double v);

/* ---- what the files miss ---- */

/* What lost events and a cut recording do to each file, as its stderr
 * warnings (present_warn()) and, for chrome, the trace's own say it. */
#define EXPORT_LOST_CHROME "they are missing from this trace, and its memory counters may be" \
	" wrong either way (a lost free leaves a block live, a lost allocation hides one)"
#define EXPORT_CUT_CHROME "this trace ends there"
#define EXPORT_LOST_CSV "they are missing from these rows (a lost free leaves an alloc" \
	" row's end_ns empty, as a block never freed)"
#define EXPORT_CUT_CSV "these rows end there"
#define EXPORT_LOST_GPU "lost kernels are missing and a kernel whose launch was lost is" \
	" under (launch call not recorded): its gpu-time lines are lower bounds"
#define EXPORT_CUT_GPU "its gpu-time lines stop there"

/* ---- the writers ---- */

int export_chrome(struct export *x, struct xout *w);
int export_csv(struct export *x, struct xout *w);
int export_folded(struct export *x, struct xout *w);
int export_speedscope(struct export *x, struct xout *w);

/* A weight's name as the options spell it. */
const char *export_weight_name(enum export_weight wt);

#endif /* SHIMMER_TOOLS_EXPORT_H */
