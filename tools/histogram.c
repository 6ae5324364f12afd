/*
 * shimmer allocations --histogram; see histogram.h.  One table per memory:
 * the buckets from the first that holds a block to the last (the empty
 * ones between them too, so the shape reads right), and for lifetimes a
 * last row of the blocks never freed.  Shares are of the memory's
 * allocations; the bar is the count's, the fullest bucket BAR_WIDTH long.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "emit.h"
#include "fmt.h"
#include "histogram.h"
#include "present.h"

#define BAR_WIDTH 40

const char *const histogram_kinds[] = {
	[MODEL_HIST_SIZE] = "size", [MODEL_HIST_LIFETIME] = "lifetime", NULL,
};

/* The bucket's bounds are named per kind; sizes have no row of blocks
 * never freed. */
#define HIST_COLS(lo, hi, head, live)                                            \
	{ "pid", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 },                         \
	{ "proc_id", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 },                     \
	{ "memory", NULL, EMIT_STR, 0, EMIT_IN_CSV, 0, 0 },                      \
	{ "range", head, EMIT_STR, -22, EMIT_IN_TABLE, 0, 0 },                   \
	{ lo, NULL, EMIT_INT, 0, EMIT_IN_DATA, 0, 0 },                           \
	{ hi, NULL, EMIT_INT, 0, EMIT_IN_DATA, 0, 0 },                           \
	{ "live_at_end", NULL, EMIT_BOOL, 0, live, 0, 0 },                       \
	{ "count", "COUNT", EMIT_INT, 10, 0, 0, 0 },                             \
	{ "count_share", "COUNT%", EMIT_SHARE, 7, 0, 0, 0 },                     \
	{ "bytes", "BYTES", EMIT_BYTES, 11, 0, 2, 0 },                           \
	{ "bytes_share", "BYTES%", EMIT_SHARE, 7, 0, 0, 0 },                     \
	{ "estimated", NULL, EMIT_BOOL, 0, EMIT_IN_DATA, 0, 0 },                 \
	{ "complete", NULL, EMIT_BOOL, 0, EMIT_IN_CSV, 0, 0 },                   \
	{ "bar", "", EMIT_STR, -1, EMIT_IN_TABLE, 0, 1 }

static const struct emit_col size_cols[] = { HIST_COLS("lo_bytes", "hi_bytes", "SIZE", EMIT_IN_NONE) };
static const struct emit_col life_cols[] = { HIST_COLS("lo_ns", "hi_ns", "LIFETIME", EMIT_IN_DATA) };

#define NCOLS (sizeof(size_cols) / sizeof(size_cols[0]))

static const struct emit_table tables[] = {
	[MODEL_HIST_SIZE] = { "buckets", size_cols, NCOLS, 4, 0 },
	[MODEL_HIST_LIFETIME] = { "buckets", life_cols, NCOLS, 4, 0 },
};

/* 2^k bytes, exactly: "512 B", "4 KiB", ... */
static char *pow2_bytes(char *buf, size_t len, unsigned k)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };

	snprintf(buf, len, "%llu %s", 1ull << (k % 10), units[k / 10]);
	return buf;
}

char *histogram_bucket_text(char *buf, size_t len, enum model_hist_kind kind, unsigned b)
{
	char lo[FMT_UNIT_MAX], hi[FMT_UNIT_MAX];

	if (kind == MODEL_HIST_SIZE) {
		if (b < 2)
			snprintf(buf, len, "%u B", b);
		else
			snprintf(buf, len, "[%s, %s)", pow2_bytes(lo, sizeof(lo), b - 1),
				 pow2_bytes(hi, sizeof(hi), b));
	} else {
		if (b < 2)
			snprintf(buf, len, "%u ns", b);
		else
			snprintf(buf, len, "[%s, %s)", fmt_duration(lo, sizeof(lo), ldexp(1, (int)b - 1)),
				 fmt_duration(hi, sizeof(hi), ldexp(1, (int)b)));
	}
	return buf;
}

static double share(double part, double whole)
{
	return whole > 0 ? part / whole : 0;
}

static void bar_text(char *buf, size_t len, double count, double max)
{
	size_t n = max > 0 ? (size_t)llround(BAR_WIDTH * count / max) : 0;

	if (n == 0 && count > 0)
		n = 1; /* a bucket that holds a block shows */

	if (n >= len)
		n = len - 1;
	memset(buf, '#', n);
	buf[n] = '\0';
}

/* One row: a bucket (lo, hi its bounds), or the blocks never freed (live). */
static void bucket_row(struct emit *e, const struct model_hist *h, const char *range,
		       struct emit_val lo, struct emit_val hi, int live, double count,
		       double bytes, double max)
{
	const struct model_mem *mm = h->mem;
	int est = mm->estimated;
	char bar[BAR_WIDTH + 1];
	struct emit_val r[NCOLS] = {
		ev_int(mm->proc->pid), ev_int(mm->proc->proc_id), ev_str(mm->label),
		ev_str(range), lo, hi, ev_int(live),
		ev_approx(ev_int(llround(count)), est),
		ev_approx(ev_real(share(count, h->total_count)), est),
		ev_approx(ev_real(bytes), est),
		ev_approx(ev_real(share(bytes, h->total_bytes)), est),
		ev_int(est), ev_int(model_proc_complete(mm->proc)), ev_str(bar),
	};

	bar_text(bar, sizeof(bar), count, max);
	emit_row(e, r);
}

static void write_mem(struct emit *e, const struct model_hist *h, enum model_hist_kind kind)
{
	const struct model_mem *mm = h->mem;
	int est = mm->estimated;
	unsigned first = MODEL_HIST_BUCKETS, last = 0;
	double max = h->live_count;
	char b[FMT_UNIT_MAX], range[HISTOGRAM_TEXT_MAX];

	for (unsigned i = 0; i < MODEL_HIST_BUCKETS; i++) {
		if (h->count[i] <= 0)
			continue;
		if (first == MODEL_HIST_BUCKETS)
			first = i;
		last = i;
		if (h->count[i] > max)
			max = h->count[i];
	}
	emit_object_begin(e, NULL);
	emit_kv(e, "memory", EMIT_STR, ev_str(mm->label));
	emit_kv(e, "count", EMIT_INT, ev_int(llround(h->total_count)));
	emit_kv(e, "bytes", EMIT_BYTES, ev_real(h->total_bytes));
	emit_kv(e, "estimated", EMIT_BOOL, ev_int(est));
	emit_kv(e, "complete", EMIT_BOOL, ev_int(model_proc_complete(mm->proc)));
	emit_text(e, "  %s: %s%lld allocations, %s%s\n", mm->label, est ? "~" : "",
		  llround(h->total_count), est ? "~" : "", fmt_bytes(b, sizeof(b), h->total_bytes));
	emit_table_begin(e, &tables[kind]);
	for (unsigned i = first; i <= last && first < MODEL_HIST_BUCKETS; i++) {
		uint64_t lo, hi;

		model_hist_bounds(i, &lo, &hi);
		bucket_row(e, h, histogram_bucket_text(range, sizeof(range), kind, i), ev_int((int64_t)lo),
			   ev_int(hi > INT64_MAX ? INT64_MAX : (int64_t)hi), 0, h->count[i],
			   h->bytes[i], max);
	}
	if (kind == MODEL_HIST_LIFETIME && h->live_count > 0)
		bucket_row(e, h, "live at the end", ev_none(), ev_none(), 1, h->live_count,
			   h->live_bytes, max);
	emit_table_end(e);
	emit_object_end(e);
}

int histogram_write(struct model *m, FILE *out, int fmt, enum model_hist_kind kind)
{
	const struct model_hist *v;
	struct present_quiet quiet = { 0 };
	struct emit e;
	size_t n, hi = 0, k, rows;
	int err, any_est = 0;

	err = model_heap_hist(m, kind, &v, &n);
	if (err)
		return err;
	emit_init(&e, out, fmt);
	emit_kv(&e, "histogram", EMIT_STR, ev_str(histogram_kinds[kind]));
	if (kind == MODEL_HIST_SIZE)
		emit_text(&e, "every allocation by the size it asked for, in power-of-two buckets\n");
	else
		emit_text(&e, "every allocation by its block's lifetime (free_ns - alloc_ns), in"
			  " power-of-two buckets\n");
	emit_array_begin(&e, "processes");
	for (size_t pi = 0; pi < model_nprocs(m); pi++) {
		const struct model_proc *p = model_proc(m, pi);

		if (!p->selected)
			continue;
		while (hi < n && v[hi].mem->proc->index < p->index)
			hi++;
		for (k = hi, rows = 0; k < n && v[k].mem->proc == p; k++)
			rows++;
		if (present_quiet(&quiet, &e, p, rows))
			continue;
		emit_object_begin(&e, NULL);
		present_proc(&e, p, "the allocations that were lost are missing: the counts"
			     " below are lower bounds, and a lost free leaves a block live");
		emit_array_begin(&e, "memories");
		for (; hi < n && v[hi].mem->proc == p; hi++) {
			any_est |= v[hi].mem->estimated;
			write_mem(&e, &v[hi], kind);
		}
		emit_array_end(&e);
		emit_object_end(&e);
	}
	emit_array_end(&e);
	present_quiet_end(&quiet, &e, "no allocation recorded");
	present_estimated_note(&e, any_est, "");
	return emit_finish(&e);
}
