/*
 * The GPU part of shimmer summary; see gpu.h.
 *
 * Each section is one table description written through the emitter: the
 * table columns, the summary's CSV columns (in SUMMARY_CSV_HEAD's order)
 * and the JSON members, some shared.  A process whose GPU activity was
 * sampled has kernels and copies only for work launched inside its
 * windows: its counts, bytes, totals and busy times are written scaled by
 * the sampling scale and marked as estimates (~, "estimated":true); means,
 * extremes and shares of the kernel time are ratios of the sample and are
 * written as recorded; a share of time is taken of the traced time, not of
 * the wall.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "gpu.h"

/* What the writers need of one process. */
struct view {
	struct emit *e;
	const struct model_proc *p;
	struct model_gpu g;
	const struct model_sampling *samp; /* NULL: recorded whole */
	double scale;  /* recorded count or total -> estimate */
	double whole;  /* what a time share is of: wall or traced time */
	int full_names;
	size_t max_rows; /* table sections: 0 for all */
	/* Synchronizing calls, from the process's call statistics. */
	struct model_calls *const *sync[16];
	size_t nsync;
	double sync_total;
	int64_t sync_count;
	int sync_exact;
	int used_cuda;
};

#define C_PID { "pid", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 }
#define C_RANK { "rank", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 }
#define C_KIND { "kind", NULL, EMIT_STR, 0, EMIT_IN_CSV, 0, 0 }
#define C_PROC { "proc_id", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 }
#define C_NONE(key) { key, NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 }

static struct emit_val rank_val(const struct model_proc *p)
{
	return p->rank >= 0 ? ev_int(p->rank) : ev_none();
}

static int traced(const struct model_proc *p)
{
	return p->gpu_status && strcmp(p->gpu_status, "active") == 0;
}

/* Why GPU activity was not traced, in words; NULL when it was. */
static const char *not_traced_reason(const struct model_proc *p)
{
	static const struct {
		const char *status, *why;
	} why[] = {
		{ "no_cupti", "no CUPTI library could be loaded" },
		{ "busy", "another profiler owns CUPTI" },
		{ "error", "CUPTI failed" },
		{ "disabled", "disabled by SHIMMER_CUPTI=0" },
		{ "attached", "traced by shimmer attach, whose probes see no GPU activity" },
	};

	if (traced(p))
		return NULL;
	if (!p->gpu_status)
		return "no GPU status was recorded for this process";
	for (size_t i = 0; i < sizeof(why) / sizeof(why[0]); i++)
		if (strcmp(p->gpu_status, why[i].status) == 0)
			return why[i].why;
	return p->gpu_status;
}

static int has_activity(const struct view *v)
{
	return v->g.nkernels || v->g.ncopies || v->g.nranges || v->g.ndevices;
}

/* Whether to say anything about the GPU for p. */
static int relevant(const struct view *v)
{
	return v->p->gpu_status || v->used_cuda || has_activity(v) || v->nsync;
}

/* Whether s traced some share of its span, which makes estimates possible. */
static int estimable(const struct model_sampling *s)
{
	return s->scale > 0;
}

/* part / whole as a share, or none when whole is unknown. */
static struct emit_val share(double part, double whole, int approx)
{
	return whole > 0 ? ev_approx(ev_real(part / whole), approx) : ev_none();
}

/* How many of n rows a section writes; the line for the rest. */
static size_t shown(const struct view *v, size_t n)
{
	return v->max_rows && n > v->max_rows ? v->max_rows : n;
}

static void more(const struct view *v, size_t n, const char *what)
{
	if (shown(v, n) < n)
		emit_text(v->e, "  ... %zu more %s\n", n - shown(v, n), what);
}

/* ---- kernels ------------------------------------------------------------ */

static const struct emit_col kernel_cols[] = {
	C_PID,
	C_RANK,
	{ "event", NULL, EMIT_STR, 0, EMIT_IN_CSV, 0, 0 },
	{ "name", NULL, EMIT_STR, 0, EMIT_IN_JSON, 0, 0 },
	{ "estimated", NULL, EMIT_BOOL, 0, EMIT_IN_JSON, 0, 0 },
	{ "timed", NULL, EMIT_INT, 0, EMIT_IN_JSON, 0, 0 },
	{ "count", "Count", EMIT_INT, 10, 0, 0, 0 },
	C_NONE("bytes"),
	{ "total_ns", "Total", EMIT_NS, 11, 0, 0, 0 },
	{ "mean_ns", "Mean", EMIT_NS, 10, 0, 3, 0 },
	{ "stddev_ns", "Std dev", EMIT_NS, 10, 0, 3, 0 },
	{ "min_ns", "Min", EMIT_NS, 10, 0, 0, 0 },
	{ "max_ns", "Max", EMIT_NS, 10, 0, 0, 0 },
	{ "timed", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 },
	{ "kernel_share", "Share", EMIT_SHARE, 7, EMIT_IN_TABLE | EMIT_IN_JSON, 0, 0 },
	{ "wall_share", NULL, EMIT_SHARE, 0, EMIT_IN_DATA, 0, 0 },
	C_KIND,
	C_PROC,
	{ "kernel", "Kernel", EMIT_STR, -1, EMIT_IN_TABLE, 0, 2 },
};

static const struct emit_table kernel_table = {
	"kernels", kernel_cols, sizeof(kernel_cols) / sizeof(kernel_cols[0]), 2, 0,
};

/* The time statistics of a's recorded durations into v[0..4]: total (as
 * the view estimates it), mean, std dev, min, max. */
static void times(struct emit_val *v, const struct model_gpu_agg *a, double scale, int approx)
{
	if (a->st.n == 0) {
		for (int i = 0; i < 5; i++)
			v[i] = ev_none();
		return;
	}
	v[0] = ev_approx(ev_real((double)a->sum * scale), approx);
	v[1] = ev_real(a->st.mean);
	v[2] = ev_real(stats_stddev(&a->st));
	v[3] = ev_real(a->st.min);
	v[4] = ev_real(a->st.max);
}

static void emit_kernels(struct view *v)
{
	struct emit *e = v->e;
	char u[FMT_UNIT_MAX], shortname[256], **kshown = NULL;
	const char **names = calloc(v->g.nkernels ? v->g.nkernels : 1, sizeof(*names));
	int est = v->samp != NULL;

	/* Short names, told apart where two kernels' would read alike (on a
	 * failed allocation each its own short name). */
	for (size_t i = 0; names && i < v->g.nkernels; i++)
		names[i] = v->g.kernels[i]->name;
	if (!names || fmt_short_names(names, v->g.nkernels, &kshown))
		kshown = NULL;
	free(names);
	emit_text(e, "  GPU kernels: %s%s in all", est ? "~" : "",
		  fmt_duration(u, sizeof(u), (double)v->g.kernel_total * v->scale));
	if (v->g.graph_kernels)
		emit_text(e, "; %s%.0f of the %s%.0f kernels were launched by CUDA graphs (their"
			  " launching call: cudaGraphLaunch)", est ? "~" : "",
			  (double)v->g.graph_kernels * v->scale, est ? "~" : "",
			  (double)v->g.kernel_count * v->scale);
	emit_text(e, "\n");
	emit_table_begin(e, &kernel_table);
	for (size_t i = 0; i < shown(v, v->g.nkernels); i++) {
		const struct model_gpu_agg *a = v->g.kernels[i];
		struct emit_val r[19] = {
			ev_int(v->p->pid), rank_val(v->p), ev_str(a->name), ev_str(a->name),
			est ? ev_int(1) : ev_none(), est ? ev_int((int64_t)a->st.n) : ev_none(),
			ev_approx(ev_real((double)a->st.n * v->scale), est), ev_none(),
		};

		times(r + 8, a, v->scale, est);
		r[13] = ev_int((int64_t)a->st.n);
		r[14] = share((double)a->sum, (double)v->g.kernel_total, 0);
		r[15] = share((double)a->sum, v->whole, 0);
		r[16] = ev_str("kernel");
		r[17] = ev_int(v->p->proc_id);
		r[18] = ev_str(v->full_names ? a->name
			       : kshown ? kshown[i]
				       : fmt_short_name(shortname, sizeof(shortname), a->name));
		emit_row(e, r);
	}
	emit_table_end(e);
	fmt_short_names_free(kshown, v->g.nkernels);
	more(v, v->g.nkernels, "kernels");
	emit_text(e, "\n");
}

/* ---- copies ------------------------------------------------------------- */

static const struct emit_col copy_cols[] = {
	C_PID,
	C_RANK,
	{ "event", "GPU copies", EMIT_STR, -10, EMIT_IN_TABLE | EMIT_IN_CSV, 0, 0 },
	{ "kind", NULL, EMIT_STR, 0, EMIT_IN_JSON, 0, 0 },
	{ "estimated", NULL, EMIT_BOOL, 0, EMIT_IN_JSON, 0, 0 },
	{ "timed", NULL, EMIT_INT, 0, EMIT_IN_JSON, 0, 0 },
	{ "count", "Count", EMIT_INT, 10, 0, 0, 0 },
	{ "bytes", "Bytes", EMIT_BYTES, 10, 0, 0, 0 },
	{ "total_ns", "Total", EMIT_NS, 11, 0, 0, 0 },
	{ "mean_ns", "Mean", EMIT_NS, 10, 0, 3, 0 },
	{ "stddev_ns", "Std dev", EMIT_NS, 10, 0, 3, 0 },
	{ "min_ns", "Min", EMIT_NS, 10, 0, 0, 0 },
	{ "max_ns", "Max", EMIT_NS, 10, 0, 0, 0 },
	{ "timed", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 },
	{ "wall_share", NULL, EMIT_SHARE, 0, EMIT_IN_CSV, 0, 0 },
	C_KIND,
	C_PROC,
	{ "gb_per_s", "GB/s", EMIT_REAL, 10, EMIT_IN_TABLE | EMIT_IN_JSON, 2, 0 },
};

static void emit_copies(struct view *v)
{
	struct emit_col cols[sizeof(copy_cols) / sizeof(copy_cols[0])];
	struct emit_table t = { "copies", cols, sizeof(cols) / sizeof(cols[0]), 2, 0 };
	int est = v->samp != NULL;

	memcpy(cols, copy_cols, sizeof(cols));
	cols[7].width = est ? 11 : 10; /* room for the ~ of "~512.00 MiB" */
	emit_table_begin(v->e, &t);
	for (size_t i = 0; i < v->g.ncopies; i++) {
		const struct model_gpu_agg *a = v->g.copies[i];
		struct emit_val r[18] = {
			ev_int(v->p->pid), rank_val(v->p), ev_str(a->name), ev_str(a->name),
			est ? ev_int(1) : ev_none(), est ? ev_int((int64_t)a->st.n) : ev_none(),
			ev_approx(ev_real((double)a->st.n * v->scale), est),
			ev_approx(ev_real((double)a->bytes * v->scale), est),
		};

		times(r + 8, a, v->scale, est);
		r[13] = ev_int((int64_t)a->st.n);
		r[14] = share((double)a->sum, v->whole, 0);
		r[15] = ev_str(strcmp(a->name, "memset") == 0 ? "memset" : "memcpy");
		r[16] = ev_int(v->p->proc_id);
		r[17] = a->sum > 0 ? ev_real((double)a->bytes / (double)a->sum) : ev_none();
		emit_row(v->e, r);
	}
	emit_table_end(v->e);
	emit_text(v->e, "\n");
}

/* ---- ranges ------------------------------------------------------------- */

static const struct emit_col range_cols[] = {
	C_PID,
	C_RANK,
	{ "event", NULL, EMIT_STR, 0, EMIT_IN_CSV, 0, 0 },
	{ "name", NULL, EMIT_STR, 0, EMIT_IN_JSON, 0, 0 },
	{ "count", "Count", EMIT_INT, 10, EMIT_IN_TABLE | EMIT_IN_JSON, 0, 0 },
	{ "count", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 }, /* open ones too */
	{ "open", "Open", EMIT_INT, 6, EMIT_IN_TABLE | EMIT_IN_JSON, 0, 0 },
	C_NONE("bytes"),
	{ "total_ns", "Total", EMIT_NS, 11, 0, 0, 0 },
	{ "mean_ns", "Mean", EMIT_NS, 10, 0, 3, 0 },
	{ "stddev_ns", "Std dev", EMIT_NS, 10, 0, 3, 0 },
	{ "min_ns", "Min", EMIT_NS, 10, 0, 0, 0 },
	{ "max_ns", "Max", EMIT_NS, 10, 0, 0, 0 },
	{ "timed", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 },
	{ "wall_share", NULL, EMIT_SHARE, 0, EMIT_IN_CSV, 0, 0 },
	C_KIND,
	C_PROC,
	{ "range", "Range", EMIT_STR, -1, EMIT_IN_TABLE, 0, 2 },
};

static const struct emit_table range_table = {
	"ranges", range_cols, sizeof(range_cols) / sizeof(range_cols[0]), 2, 0,
};

static void emit_ranges(struct view *v)
{
	emit_kv(v->e, "open_ranges", EMIT_INT, ev_int(v->g.open_ranges));
	emit_text(v->e, "  Ranges (closed ones; Open: still open at the end)\n");
	emit_table_begin(v->e, &range_table);
	for (size_t i = 0; i < shown(v, v->g.nranges); i++) {
		const struct model_gpu_agg *a = v->g.ranges[i];
		struct emit_val r[18] = {
			ev_int(v->p->pid), rank_val(v->p), ev_str(a->name), ev_str(a->name),
			ev_int((int64_t)a->st.n), ev_int((int64_t)a->st.n + a->open),
			ev_int(a->open), ev_none(),
		};

		times(r + 8, a, 1, 0);
		r[13] = ev_int((int64_t)a->st.n);
		r[14] = a->st.n ? share((double)a->sum, model_proc_wall(v->p), 0) : ev_none();
		r[15] = ev_str("range");
		r[16] = ev_int(v->p->proc_id);
		r[17] = ev_str(a->name);
		emit_row(v->e, r);
	}
	emit_table_end(v->e);
	more(v, v->g.nranges, "ranges");
	if (v->g.open_ranges > 0)
		emit_text(v->e, "  %lld range%s left open: not in the times above\n",
			  (long long)v->g.open_ranges, v->g.open_ranges == 1 ? " was" : "s were");
	emit_text(v->e, "\n");
}

/* ---- busy time ------------------------------------------------------------ */

static const struct emit_col busy_cols[] = {
	C_PID,
	C_RANK,
	{ "event", NULL, EMIT_STR, 0, EMIT_IN_CSV, 0, 0 },
	{ "device", "Device", EMIT_INT, -8, EMIT_IN_TABLE | EMIT_IN_JSON, 0, 0 },
	{ "stream", "Stream", EMIT_STR, 18, EMIT_IN_TABLE, 0, 0 },
	{ "stream", NULL, EMIT_INT, 0, EMIT_IN_JSON, 0, 0 },
	{ "estimated", NULL, EMIT_BOOL, 0, EMIT_IN_JSON, 0, 0 },
	{ "kernels", "Kernels", EMIT_INT, 10, EMIT_IN_TABLE | EMIT_IN_JSON, 0, 0 },
	{ "copies", "Copies", EMIT_INT, 10, EMIT_IN_TABLE | EMIT_IN_JSON, 0, 0 },
	{ "count", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 },
	C_NONE("bytes"),
	{ "total_ns", NULL, EMIT_NS, 0, EMIT_IN_CSV, 0, 0 },
	{ "busy_ns", "Busy", EMIT_NS, 11, EMIT_IN_TABLE | EMIT_IN_JSON, 0, 0 },
	C_NONE("mean_ns"),
	C_NONE("stddev_ns"),
	C_NONE("min_ns"),
	C_NONE("max_ns"),
	C_NONE("timed"),
	{ "wall_share", "Wall%", EMIT_SHARE, 7, 0, 0, 0 },
	C_KIND,
	C_PROC,
};

#define NBUSY (sizeof(busy_cols) / sizeof(busy_cols[0]))

static void busy_row(struct view *v, const struct model_busy *b, int device_row)
{
	char stream[24], event[64];
	int est = v->samp != NULL;
	struct emit_val r[NBUSY];

	if (device_row)
		snprintf(stream, sizeof(stream), "all (GPU busy)");
	else if (b->stream < 0)
		snprintf(stream, sizeof(stream), "?");
	else
		snprintf(stream, sizeof(stream), "%lld", (long long)b->stream);
	if (device_row)
		snprintf(event, sizeof(event), "device %lld", (long long)b->device);
	else
		snprintf(event, sizeof(event), "device %lld stream %s", (long long)b->device,
			 stream);
	r[0] = ev_int(v->p->pid);
	r[1] = rank_val(v->p);
	r[2] = ev_str(event);
	r[3] = ev_int(b->device);
	r[4] = ev_str(stream);
	r[5] = device_row || b->stream < 0 ? ev_none() : ev_int(b->stream);
	r[6] = est ? ev_int(1) : ev_none();
	r[7] = ev_approx(ev_real((double)b->kernels * v->scale), est);
	r[8] = ev_approx(ev_real((double)b->copies * v->scale), est);
	r[9] = ev_real((double)(b->kernels + b->copies) * v->scale);
	r[10] = ev_none();
	r[11] = ev_real((double)b->busy_ns * v->scale);
	r[12] = ev_approx(ev_real((double)b->busy_ns * v->scale), est);
	for (int i = 13; i < 18; i++)
		r[i] = ev_none();
	r[18] = share((double)b->busy_ns, v->whole, est);
	r[19] = ev_str(device_row ? "gpu" : "stream");
	r[20] = ev_int(v->p->proc_id);
	emit_row(v->e, r);
}

static void emit_busy(struct view *v)
{
	struct emit_table streams = { "streams", busy_cols, NBUSY, 2, 0 };
	struct emit_table devices = { "devices", busy_cols, NBUSY, 2, 1 };

	emit_table_begin(v->e, &streams);
	for (size_t i = 0; i < v->g.nstreams; i++)
		busy_row(v, v->g.streams[i], 0);
	emit_table_end(v->e);
	emit_table_begin(v->e, &devices);
	for (size_t i = 0; i < v->g.ndevices; i++)
		busy_row(v, v->g.devices[i], 1);
	emit_table_end(v->e);
	emit_text(v->e, "  GPU busy: kernels, copies and memsets, overlaps counted once%s\n\n",
		  v->samp ? "; Wall%: share of the traced time" : "");
}

/* ---- synchronizing calls ----------------------------------------------------- */

static const struct emit_col sync_cols[] = {
	{ "event", "Function", EMIT_STR, -28, EMIT_IN_TABLE | EMIT_IN_JSON, 0, 0 },
	{ "count", "Count", EMIT_INT, 10, EMIT_IN_TABLE | EMIT_IN_JSON, 0, 0 },
	{ "estimated", NULL, EMIT_BOOL, 0, EMIT_IN_JSON, 0, 0 },
	{ "total_ns", "Total", EMIT_NS, 11, EMIT_IN_TABLE | EMIT_IN_JSON, 0, 0 },
	{ "wall_share", "Wall%", EMIT_SHARE, 7, EMIT_IN_TABLE | EMIT_IN_JSON, 0, 0 },
};

static const struct emit_table sync_table = {
	"functions", sync_cols, sizeof(sync_cols) / sizeof(sync_cols[0]), 2, 0,
};

/* The CSV's one row of the synchronizing calls. */
static const struct emit_col sync_csv_cols[] = {
	C_PID,
	C_RANK,
	{ "event", NULL, EMIT_STR, 0, EMIT_IN_CSV, 0, 0 },
	{ "count", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 },
	C_NONE("bytes"),
	{ "total_ns", NULL, EMIT_NS, 0, EMIT_IN_CSV, 0, 0 },
	C_NONE("mean_ns"),
	C_NONE("stddev_ns"),
	C_NONE("min_ns"),
	C_NONE("max_ns"),
	C_NONE("timed"),
	{ "wall_share", NULL, EMIT_SHARE, 0, EMIT_IN_CSV, 0, 0 },
	C_KIND,
	C_PROC,
};

static const struct emit_table sync_csv_table = {
	NULL, sync_csv_cols, sizeof(sync_csv_cols) / sizeof(sync_csv_cols[0]), 0, 0,
};

static void emit_sync(struct view *v)
{
	char u[FMT_UNIT_MAX], pct[16];
	double wall = model_proc_wall(v->p);
	struct emit_val c[14] = {
		ev_int(v->p->pid), rank_val(v->p), ev_str("sync"), ev_int(v->sync_count),
		ev_none(), v->sync_exact ? ev_real(v->sync_total) : ev_none(),
		ev_none(), ev_none(), ev_none(), ev_none(), ev_none(),
		v->sync_exact ? share(v->sync_total, wall, 0) : ev_none(),
		ev_str("gpu"), ev_int(v->p->proc_id),
	};

	emit_table_begin(v->e, &sync_csv_table);
	emit_row(v->e, c);
	emit_table_end(v->e);
	emit_object_begin(v->e, "sync");
	emit_kv(v->e, "count", EMIT_INT, ev_int(v->sync_count));
	emit_kv(v->e, "estimated", EMIT_BOOL, ev_int(!v->sync_exact));
	emit_kv(v->e, "total_ns", EMIT_NS, ev_real(v->sync_total));
	emit_kv(v->e, "wall_share", EMIT_SHARE, share(v->sync_total, wall, 0));
	emit_cell(&sync_cols[4], share(v->sync_total, wall, !v->sync_exact), pct, sizeof(pct));
	emit_text(v->e, "  CPU blocked in synchronizing calls: %s%s, %s of wall\n",
		  v->sync_exact ? "" : "~", fmt_duration(u, sizeof(u), v->sync_total), pct);
	emit_table_begin(v->e, &sync_table);
	for (size_t i = 0; i < v->nsync; i++) {
		const struct model_calls *f = *v->sync[i];
		int exact = model_calls_exact(f);
		struct emit_val r[5] = {
			ev_str(f->fn->name),
			ev_int(model_calls_count(f)),
			ev_int(!exact),
			ev_approx(ev_real(model_calls_total(f)), !exact),
			share(model_calls_total(f), wall, !exact),
		};

		emit_row(v->e, r);
	}
	emit_table_end(v->e);
	emit_object_end(v->e);
	emit_text(v->e, "\n");
}

/* ---- status and sampling ------------------------------------------------------- */

static const struct emit_col note_cols[] = {
	C_PID,
	C_RANK,
	{ "event", NULL, EMIT_STR, 0, EMIT_IN_CSV, 0, 0 },
	{ "count", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 },
	C_NONE("bytes"),
	{ "total_ns", NULL, EMIT_NS, 0, EMIT_IN_CSV, 0, 0 },
	C_NONE("mean_ns"),
	C_NONE("stddev_ns"),
	C_NONE("min_ns"),
	C_NONE("max_ns"),
	C_NONE("timed"),
	{ "wall_share", NULL, EMIT_REAL, 0, EMIT_IN_CSV, 9, 0 },
	C_KIND,
	C_PROC,
};

static const struct emit_table note_table = {
	NULL, note_cols, sizeof(note_cols) / sizeof(note_cols[0]), 0, 0,
};

/* A CSV row of the GPU status or of the sampling. */
static void note_row(struct view *v, const char *event, struct emit_val count,
		     struct emit_val total, struct emit_val shr, const char *kind)
{
	struct emit_val r[14] = {
		ev_int(v->p->pid), rank_val(v->p), ev_str(event), count, ev_none(), total,
		ev_none(), ev_none(), ev_none(), ev_none(), ev_none(), shr, ev_str(kind),
		ev_int(v->p->proc_id),
	};

	emit_row(v->e, r);
}

/* How much of a sampled process was traced, and what that makes of the
 * figures below it. */
static void emit_sampling(struct view *v)
{
	const struct model_sampling *s = v->samp;
	struct emit *e = v->e;
	char u[FMT_UNIT_MAX];

	emit_table_begin(e, &note_table);
	note_row(v, "windows", ev_int(s->windows), ev_int(s->traced_ns),
		 s->span_ns > 0 ? ev_real(s->share) : ev_none(), "sampling");
	note_row(v, "span", ev_none(), s->span_ns > 0 ? ev_int(s->span_ns) : ev_none(),
		 s->span_ns > 0 ? ev_real((double)s->span_ns / model_proc_wall(v->p)) : ev_none(),
		 "sampling");
	note_row(v, "calls", ev_int(s->calls_traced), ev_none(),
		 s->scale > 0 ? ev_real(1.0 / s->scale) : ev_none(), "sampling");
	emit_table_end(e);

	emit_object_begin(e, "sampling");
	emit_kv(e, "windows", EMIT_INT, ev_int(s->windows));
	emit_kv(e, "traced_ns", EMIT_INT, ev_int(s->traced_ns));
	emit_kv(e, "span_ns", EMIT_INT, s->span_ns > 0 ? ev_int(s->span_ns) : ev_none());
	emit_kv(e, "traced_share", EMIT_REAL, s->span_ns > 0 ? ev_real(s->share) : ev_none());
	emit_kv(e, "calls", EMIT_INT, ev_int(s->calls));
	emit_kv(e, "calls_traced", EMIT_INT, ev_int(s->calls_traced));
	emit_kv(e, "scale", EMIT_REAL, s->scale > 0 ? ev_real(s->scale) : ev_none());
	emit_kv(e, "whole_after_ns", EMIT_INT,
		s->whole_from_ns > 0 ? ev_int(s->whole_from_ns - s->since_ns) : ev_none());
	emit_object_end(e);

	emit_text(e, "  GPU activity sampled: ");
	if (s->windows == 0)
		emit_text(e, "no window was traced");
	else
		emit_text(e, "%lld window%s, %s traced", (long long)s->windows,
			  s->windows == 1 ? "" : "s",
			  fmt_duration(u, FMT_UNIT_MAX, (double)s->traced_ns));
	if (s->span_ns > 0)
		emit_text(e, " %s %s", s->windows ? "of" : "in",
			  fmt_duration(u, FMT_UNIT_MAX, (double)s->span_ns));
	if (estimable(s)) {
		emit_text(e, " (%.2f%%)", 100.0 * s->share);
		if (s->calls_traced > 0)
			emit_text(e, ", with %lld of the process's %lld launch, copy and memset"
				  " calls", (long long)s->calls_traced, (long long)s->calls);
		emit_text(e, "; kernel and copy counts and totals are estimates (~), scaled"
			  " by %.4g", s->scale);
	} else {
		emit_text(e, "; no traced share to estimate from: kernel and copy counts and totals"
			  " (~) are only what was recorded");
	}
	if (s->whole_from_ns > 0)
		emit_text(e, "; recorded whole from %s on (a CUDA graph was launched: from then"
			  " every kernel is recorded)",
			  fmt_duration(u, FMT_UNIT_MAX, (double)(s->whole_from_ns - s->since_ns)));
	emit_text(e, "; SHIMMER_GPU=all records every kernel\n");
}

/* ---- the section ------------------------------------------------------------------- */

static int make_view(struct view *v, struct emit *e, struct model *m,
		     const struct model_proc *p, int full_names, size_t max_rows)
{
	struct model_calls *const *calls;
	size_t n;
	int err;

	memset(v, 0, sizeof(*v));
	v->e = e;
	v->p = p;
	v->full_names = full_names;
	v->max_rows = e->fmt == EMIT_TABLE ? max_rows : 0;
	v->sync_exact = 1;
	v->scale = 1;
	v->whole = model_proc_wall(p);
	err = model_gpu(m, p, &v->g);
	if (!err)
		err = model_calls(m, &calls, &n);
	if (err)
		return err;
	v->samp = p->sampling;
	if (v->samp) {
		v->whole = (double)v->samp->traced_ns;
		/* Nothing to scale by: the figures stay as recorded. */
		if (estimable(v->samp))
			v->scale = v->samp->scale;
	}
	for (size_t i = 0; i < n; i++) {
		const struct model_calls *c = calls[i];

		if (c->proc != p || !c->fn || c->fn->heap)
			continue;
		v->used_cuda = 1;
		if (model_fn_syncs(c->fn) && v->nsync < sizeof(v->sync) / sizeof(v->sync[0])) {
			v->sync[v->nsync++] = &calls[i];
			v->sync_total += model_calls_total(c);
			v->sync_count += model_calls_count(c);
			v->sync_exact &= model_calls_exact(c);
		}
	}
	return 0;
}

int gpu_emit(struct emit *e, struct model *m, const struct model_proc *p, int full_names,
	     size_t max_rows)
{
	struct view v;
	const char *why;
	char status[64];
	int err = make_view(&v, e, m, p, full_names, max_rows);

	if (err)
		return err;
	why = not_traced_reason(p);
	emit_object_begin(e, "gpu");
	emit_kv(e, "status", EMIT_STR, ev_str(p->gpu_status));
	emit_kv(e, "status_detail", EMIT_STR, ev_str(p->gpu_detail));
	emit_kv(e, "traced", EMIT_BOOL, ev_int(traced(p)));
	/* A process that never touched CUDA has nothing missing to explain. */
	emit_kv(e, "not_traced_reason", EMIT_STR, ev_str(relevant(&v) ? why : NULL));
	if (!relevant(&v)) {
		emit_object_end(e);
		return 0;
	}
	snprintf(status, sizeof(status), "status:%s", p->gpu_status ? p->gpu_status : "none");
	emit_table_begin(e, &note_table);
	note_row(&v, status, ev_none(), ev_none(), ev_none(), "gpu");
	emit_table_end(e);
	if (why) {
		/* the detail only where it adds to the reason ("disabled by
		 * SHIMMER_CUPTI=0" has the shim's "SHIMMER_CUPTI=0" in it) */
		const char *detail = p->gpu_detail && !strstr(why, p->gpu_detail) ? p->gpu_detail
										     : NULL;

		emit_text(e, "  GPU activity: NOT traced: %s%s%s; kernels, copies and GPU busy time"
			  " are unknown, not zero\n",
			  fmt_esc(why), detail ? ": " : "", fmt_esc(detail ? detail : ""));
	}
	else
		emit_text(e, "  GPU activity: traced%s%s%s\n",
			  v.g.nkernels ? "" : v.samp ? "; no kernels ran in a window" : "; no kernels ran",
			  p->gpu_detail ? ": " : "", fmt_esc(p->gpu_detail ? p->gpu_detail : ""));
	if (v.samp)
		emit_sampling(&v);
	emit_text(e, "\n");
	emit_kv(e, "kernel_total_ns", EMIT_NS, ev_real((double)v.g.kernel_total * v.scale));
	emit_kv(e, "graph_kernels", EMIT_REAL, ev_approx(ev_real((double)v.g.graph_kernels * v.scale),
							  v.samp != NULL));
	if (v.g.nkernels || e->fmt == EMIT_JSON)
		emit_kernels(&v);
	if (v.g.ncopies || e->fmt == EMIT_JSON)
		emit_copies(&v);
	if (v.g.nranges || e->fmt == EMIT_JSON)
		emit_ranges(&v);
	if (v.g.ndevices || e->fmt == EMIT_JSON)
		emit_busy(&v);
	if (v.nsync || e->fmt == EMIT_JSON)
		emit_sync(&v);
	emit_object_end(e);
	return 0;
}
