/*
 * The aggregated heap (collector/heapagg.c) against a brute-force oracle
 * computed from the same events.  Random runs: threads (streams) making
 * malloc, calloc, realloc and free calls of random sizes from random call
 * sites, freeing their own and each other's blocks, timed or not, on a
 * coarse clock (so that instants are shared), published late within the
 * reorder window (and a few beyond it, counted), with top-level range ends
 * now and then.  The oracle sorts the events by instant (frees, then
 * allocations, then checkpoints) and recomputes every table: totals, the
 * peak and its first instant, each site's counts, bytes, live bytes at the
 * peak, heaptrack's temporaries, short-lived blocks, both histograms, its
 * live bytes at every allocation point and step end, the timeline, the
 * timed calls, and the rows kept.  Everything is compared exactly.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "collector/heapagg.h"

#define MAXB 4096
#define SITES 7
#define STREAMS 4

/* One event as the oracle sees it. */
struct oev {
	int64_t key, begin, end; /* end -1: untimed */
	int part;                /* 0 free, 1 alloc, 2 step */
	int block;               /* which block (index into blocks); -1: counted only */
	int stream;
	uint16_t fn;
	int64_t pub;             /* when it is handed to heapagg */
	int rec;                 /* the record it belongs to (feeding order) */
};

struct oblock {
	uint64_t ptr, size;
	int site, tid, stream;
	uint16_t fn;
	int64_t alloc_ns, live_ns, end_ns;
	int freed;
	int64_t free_ns, free_end;
	uint16_t free_fn;
	int free_tid;
};

/* A record to hand on: a heap record, or a step end. */
struct feed {
	int64_t pub;
	int step;                /* 1: a step end; 2: an allocation counted only */
	int64_t step_ns;
	int stream, tid;
	struct shm_rec_heap r;
	int64_t begin, end;
};

static struct oev ev[4 * MAXB];
static int nev;
static struct oblock blk[MAXB];
static int nblk;
static struct feed fd_[4 * MAXB];
static int nfeed;
static uint64_t rnd_x;

static uint64_t rnd(uint64_t n)
{
	rnd_x ^= rnd_x << 13;
	rnd_x ^= rnd_x >> 7;
	rnd_x ^= rnd_x << 17;
	return rnd_x % n;
}

static int cmp_ev(const void *a, const void *b)
{
	const struct oev *x = a, *y = b;

	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	if (x->part != y->part)
		return x->part - y->part;
	return x->rec - y->rec;
}

static int cmp_feed(const void *a, const void *b)
{
	const struct feed *x = a, *y = b;

	return x->pub < y->pub ? -1 : x->pub > y->pub;
}

/* ---- generating a run ---- */

struct gen {
	int64_t clock[STREAMS];
	int64_t pub[STREAMS]; /* a stream's records come in order */
	int live[MAXB];
	int nlive;
	int late_beyond; /* records published beyond the window */
	int64_t window;
};

static void add_feed(struct gen *g, int stream, int tid, const struct shm_rec_heap *r,
		     int64_t begin, int64_t end)
{
	struct feed *f = &fd_[nfeed++];
	int64_t done = end >= 0 ? end : begin;

	memset(f, 0, sizeof(*f));
	f->pub = done + (int64_t)rnd(3);
	/* some are published late: within the window, and rarely beyond */
	if (rnd(10) == 0)
		f->pub += (int64_t)rnd((uint64_t)g->window / 2);
	else if (rnd(400) == 0) {
		f->pub += g->window * 3;
		g->late_beyond++;
	}
	if (f->pub < g->pub[stream])
		f->pub = g->pub[stream];
	g->pub[stream] = f->pub;
	f->stream = stream;
	f->tid = tid;
	f->r = *r;
	f->begin = begin;
	f->end = end;
}

static void gen_run(struct gen *g, int ncalls, int64_t tick, int64_t quant)
{
	nev = nblk = nfeed = 0;
	memset(g->clock, 0, sizeof(g->clock));
	memset(g->pub, 0, sizeof(g->pub));
	g->nlive = 0;
	g->late_beyond = 0;
	for (int c = 0; c < ncalls && nblk < MAXB - 2; c++) {
		int s = (int)rnd(STREAMS), tid = 100 + s;
		int64_t begin = g->clock[s] + tick * (int64_t)(1 + rnd(20));
		/* a coarse clock: many events share an instant */
		if (quant > 1)
			begin = (begin / quant + 1) * quant;
		int timed = rnd(3) == 0;
		int64_t end = timed ? begin + tick * (int64_t)rnd(4) : -1;
		int64_t done = timed ? end : begin;
		struct shm_rec_heap r = { .hdr = { .type = SHM_REC_HEAP, .size = sizeof(r),
						   .flags = timed ? SHM_F_TIMED : 0 } };
		int op = (int)rnd(10);
		int rec = nfeed;

		g->clock[s] = done + 1;
		r.t_begin = (uint64_t)begin;
		r.t_end = timed ? (uint64_t)end : 0;
		if (rnd(30) == 0) {
			/* another memory's allocation: counted, nothing more */
			struct feed *f = &fd_[nfeed++];

			*f = (struct feed){ .pub = begin + (int64_t)rnd(3), .step = 2, .step_ns = begin };
			ev[nev++] = (struct oev){ .key = begin, .part = 1, .block = -1, .rec = rec };
			continue;
		}
		if (s == 0 && rnd(25) == 0) {
			/* a top-level range ends on stream 0 */
			struct feed *f = &fd_[nfeed++];

			*f = (struct feed){ .pub = begin + (int64_t)rnd(3), .step = 1, .step_ns = begin };
			ev[nev++] = (struct oev){ .key = begin, .part = 2, .rec = rec };
			continue;
		}
		if (op < 4 || g->nlive < 3) {
			/* an allocation */
			struct oblock *b = &blk[nblk];
			int calloc_ = rnd(4) == 0;

			*b = (struct oblock){
				.ptr = 0x10000 + (uint64_t)nblk * 64, .size = rnd(5) ? 1 + rnd(3000) : 0,
				.site = (int)rnd(SITES), .tid = tid, .stream = s,
				.fn = calloc_ ? SHM_FN_CALLOC : SHM_FN_MALLOC,
				.alloc_ns = begin, .live_ns = done, .end_ns = end,
			};
			/* reuse an address now and then, if every block that
			 * had it was freed before this one becomes live (the
			 * streams' clocks differ: not only the live ones) */
			if (nblk > 10 && rnd(4) == 0) {
				int k = (int)rnd((uint64_t)nblk), ok = 1;

				for (int j = 0; j < nblk; j++)
					if (blk[j].ptr == blk[k].ptr)
						ok &= blk[j].freed && blk[j].free_ns < begin;
				if (ok)
					b->ptr = blk[k].ptr;
			}
			r.hdr.fn = b->fn;
			r.ptr = b->ptr;
			r.size = b->size;
			r.stack_id = (uint32_t)b->site % 4;
			r.pystack_id = (uint32_t)b->site / 4;
			ev[nev++] = (struct oev){ .key = begin, .begin = begin, .end = end, .part = 1,
						  .block = nblk, .stream = s, .fn = b->fn, .rec = rec };
			g->live[g->nlive++] = nblk++;
			add_feed(g, s, tid, &r, begin, end);
		} else {
			/* release a live block allocated before this call began
			 * (a free, or a realloc that allocates a new one) */
			int li = (int)rnd((uint64_t)g->nlive), bi = g->live[li];
			struct oblock *b = &blk[bi];
			int realloc_ = op >= 8;

			if (b->live_ns >= begin)
				continue;
			g->live[li] = g->live[--g->nlive];
			b->freed = 1;
			b->free_ns = begin;
			b->free_end = end;
			b->free_tid = tid;
			b->free_fn = realloc_ ? SHM_FN_REALLOC : SHM_FN_FREE;
			ev[nev++] = (struct oev){ .key = begin, .begin = begin, .end = end,
						  .part = 0, .block = bi, .stream = s,
						  .fn = b->free_fn, .rec = rec };
			r.hdr.fn = b->free_fn;
			if (realloc_) {
				struct oblock *n = &blk[nblk];

				*n = (struct oblock){
					.ptr = 0x10000 + (uint64_t)nblk * 64 + 8, .size = 1 + rnd(3000),
					.site = (int)rnd(SITES), .tid = tid, .stream = s,
					.fn = SHM_FN_REALLOC, .alloc_ns = begin, .live_ns = done,
					.end_ns = end,
				};
				r.ptr = n->ptr;
				r.aux = b->ptr;
				r.size = n->size;
				r.stack_id = (uint32_t)n->site % 4;
				r.pystack_id = (uint32_t)n->site / 4;
				ev[nev++] = (struct oev){ .key = begin, .begin = begin, .end = end,
							  .part = 1, .block = nblk, .stream = s,
							  .fn = SHM_FN_REALLOC, .rec = rec };
				g->live[g->nlive++] = nblk++;
			} else {
				r.ptr = b->ptr;
			}
			add_feed(g, s, tid, &r, begin, end);
		}
	}
	qsort(fd_, (size_t)nfeed, sizeof(*fd_), cmp_feed);
}

/* ---- the oracle ---- */

struct osite {
	int64_t allocs, alloc_bytes, frees, freed_bytes, live_count, live_bytes;
	int64_t peak_count, peak_bytes, temp_count, temp_bytes, short_count, short_bytes;
	int64_t size_c[65], size_b[65], life_c[256], life_b[256];
};

struct oracle {
	struct osite site[SITES];
	int64_t allocs, alloc_bytes, frees, freed_bytes, live_count, live_bytes;
	int64_t peak_bytes, peak_count, peak_ns;
	int64_t temp_count, temp_bytes, short_count, short_bytes;
	int64_t calls_t[SHM_FN_COUNT][2], calls_tot[SHM_FN_COUNT][2];
	int64_t calls_min[SHM_FN_COUNT][2], calls_max[SHM_FN_COUNT][2];
	int64_t point_allocs;
	int nsteps;
	int64_t step_ns[4 * MAXB];
	int64_t point_ns[4 * MAXB];
	int64_t *point_val; /* [site * (npoints + 1) + m] */
	int64_t *step_val;  /* [site * (nev + 1) + i] */
	int npoints;
	int kept[MAXB];
};

static uint32_t life_bucket(int64_t l)
{
	uint32_t e;

	if (l < 8)
		return (uint32_t)(l < 0 ? 0 : l);
	e = 63u - (uint32_t)__builtin_clzll((uint64_t)l);
	return 4 * e + (uint32_t)(((uint64_t)l >> (e - 2)) & 3);
}

static void oracle_run(struct oracle *o, const struct heapagg_conf *conf)
{
	int64_t live_site[SITES] = { 0 }, cnt_site[SITES] = { 0 };
	int last_alloc[STREAMS];
	int64_t cur_t = 0, nallocs = 0, seen = 0;
	int have = 0, i, s;

	memset(o, 0, sizeof(*o));
	for (i = 0; i < STREAMS; i++)
		last_alloc[i] = -1;
	qsort(ev, (size_t)nev, sizeof(*ev), cmp_ev);
	o->peak_ns = -1;
	/* points: every point_allocs-th allocation, at most HEAPAGG_POINTS */
	for (i = 0; i < nev; i++)
		nallocs += ev[i].part == 1;
	o->point_allocs = 1;
	while (nallocs / o->point_allocs > (int64_t)HEAPAGG_POINTS)
		o->point_allocs *= 2;
	o->npoints = (int)(nallocs / o->point_allocs);
	o->point_val = calloc((size_t)SITES * (size_t)(o->npoints + 1), sizeof(int64_t));
	o->step_val = calloc((size_t)SITES * (size_t)(nev + 1), sizeof(int64_t));
	for (i = 0; i <= nev; i++) {
		const struct oev *e = i < nev ? &ev[i] : NULL;

		if (have && (!e || e->key > cur_t)) {
			/* the instant cur_t is complete */
			if (o->peak_ns < 0 || o->live_bytes > o->peak_bytes) {
				o->peak_bytes = o->live_bytes;
				o->peak_count = o->live_count;
				o->peak_ns = cur_t;
				for (s = 0; s < SITES; s++) {
					o->site[s].peak_bytes = live_site[s];
					o->site[s].peak_count = cnt_site[s];
				}
			}
			/* points at this instant take its final values */
			for (int k = 1; k <= o->npoints; k++)
				if (o->point_ns[k] == cur_t)
					for (s = 0; s < SITES; s++)
						o->point_val[s * (o->npoints + 1) + k] = live_site[s];
		}
		if (!e)
			break;
		cur_t = e->key;
		have = 1;
		if (e->part == 1 && ++seen % o->point_allocs == 0 && seen / o->point_allocs <= o->npoints)
			o->point_ns[seen / o->point_allocs] = e->key;
		if (e->part == 1 && e->block < 0)
			continue;
		if (e->part == 2) {
			o->step_ns[o->nsteps] = e->key;
			for (s = 0; s < SITES; s++)
				o->step_val[s * (nev + 1) + o->nsteps] = live_site[s];
			o->nsteps++;
			continue;
		}
		{
			struct oblock *b = &blk[e->block];
			struct osite *st = &o->site[b->site];
			int64_t sz = (int64_t)b->size;

			if (e->part == 1) {
				st->allocs++;
				st->alloc_bytes += sz;
				o->allocs++;
				o->alloc_bytes += sz;
				live_site[b->site] += sz;
				cnt_site[b->site]++;
				o->live_bytes += sz;
				o->live_count++;
				st->size_c[sz ? 64 - __builtin_clzll((uint64_t)sz) : 0]++;
				st->size_b[sz ? 64 - __builtin_clzll((uint64_t)sz) : 0] += sz;
				if (b->end_ns >= 0) {
					int64_t d = b->end_ns - b->alloc_ns;
					int64_t *t = &o->calls_t[b->fn][0];

					if (!*t || d < o->calls_min[b->fn][0])
						o->calls_min[b->fn][0] = d;
					if (!*t || d > o->calls_max[b->fn][0])
						o->calls_max[b->fn][0] = d;
					(*t)++;
					o->calls_tot[b->fn][0] += d;
				}
				last_alloc[e->stream] = e->block;
			} else {
				int64_t life = b->free_ns - b->alloc_ns;

				st->frees++;
				st->freed_bytes += sz;
				o->frees++;
				o->freed_bytes += sz;
				live_site[b->site] -= sz;
				cnt_site[b->site]--;
				o->live_bytes -= sz;
				o->live_count--;
				if (last_alloc[e->stream] == e->block) {
					st->temp_count++;
					st->temp_bytes += sz;
					o->temp_count++;
					o->temp_bytes += sz;
				}
				last_alloc[e->stream] = -1;
				if (life <= conf->short_ns) {
					st->short_count++;
					st->short_bytes += sz;
					o->short_count++;
					o->short_bytes += sz;
				}
				if (life <= conf->row_ns) {
					st->life_c[life_bucket(life)]++;
					st->life_b[life_bucket(life)] += sz;
				} else {
					o->kept[e->block] = 1;
				}
				if (b->free_fn == SHM_FN_FREE && b->free_end >= 0) {
					int64_t d = b->free_end - b->free_ns;
					int64_t *t = &o->calls_t[SHM_FN_FREE][1];

					if (!*t || d < o->calls_min[SHM_FN_FREE][1])
						o->calls_min[SHM_FN_FREE][1] = d;
					if (!*t || d > o->calls_max[SHM_FN_FREE][1])
						o->calls_max[SHM_FN_FREE][1] = d;
					(*t)++;
					o->calls_tot[SHM_FN_FREE][1] += d;
				}
			}
		}
	}
	for (s = 0; s < SITES; s++) {
		o->site[s].live_bytes = live_site[s];
		o->site[s].live_count = cnt_site[s];
	}
	for (i = 0; i < nblk; i++)
		if (!blk[i].freed)
			o->kept[i] = 1;
}

/* ---- reading the store back ---- */

static sqlite3 *db;

static int64_t q1(const char *sql)
{
	sqlite3_stmt *st;
	int64_t v = INT64_MIN;

	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

static int64_t qf(const char *fmt, ...)
{
	char sql[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(sql, sizeof(sql), fmt, ap);
	va_end(ap);
	return q1(sql);
}

static void eq(const char *what, int64_t got, int64_t want)
{
	if (got != want)
		fail_msg("%s: %lld, expected %lld", what, (long long)got, (long long)want);
}

/* A site's value at checkpoint idx of kind, from its runs. */
static int64_t series_at(int site, const char *kind, int64_t idx)
{
	int64_t v = qf("SELECT bytes FROM heap_series WHERE proc_id = 1 AND stack_id = %d AND "
		       "pystack_id = %d AND kind = '%s' AND idx <= %lld ORDER BY idx DESC LIMIT 1",
		       site % 4, site / 4, kind, (long long)idx);

	return v == INT64_MIN ? 0 : v;
}

static void check_store(const struct oracle *o, const struct heapagg_conf *conf, int late)
{
	static const char *const cols[] = { "allocs", "alloc_bytes", "frees", "freed_bytes",
					    "live_count", "live_bytes", "peak_count", "peak_bytes",
					    "temp_count", "temp_bytes", "short_count", "short_bytes" };
	int s, k;

	assert_int_equal(qf("SELECT final FROM heap_totals WHERE proc_id = 1"), 1);
	assert_int_equal(qf("SELECT late_events FROM heap_totals"), late);
	if (late)
		return; /* order-dependent answers may differ: counted, not checked */
	eq("allocs", qf("SELECT allocs FROM heap_totals"), o->allocs);
	eq("alloc_bytes", qf("SELECT alloc_bytes FROM heap_totals"), o->alloc_bytes);
	eq("frees", qf("SELECT frees FROM heap_totals"), o->frees);
	eq("freed_bytes", qf("SELECT freed_bytes FROM heap_totals"), o->freed_bytes);
	eq("live_count", qf("SELECT live_count FROM heap_totals"), o->live_count);
	eq("live_bytes", qf("SELECT live_bytes FROM heap_totals"), o->live_bytes);
	eq("peak_bytes", qf("SELECT peak_bytes FROM heap_totals"), o->peak_bytes);
	eq("peak_count", qf("SELECT peak_count FROM heap_totals"), o->peak_count);
	eq("peak_ns", qf("SELECT coalesce(peak_ns, -1) FROM heap_totals"), o->peak_ns);
	eq("temp_count", qf("SELECT temp_count FROM heap_totals"), o->temp_count);
	eq("temp_bytes", qf("SELECT temp_bytes FROM heap_totals"), o->temp_bytes);
	eq("short_count", qf("SELECT short_count FROM heap_totals"), o->short_count);
	eq("short_bytes", qf("SELECT short_bytes FROM heap_totals"), o->short_bytes);
	eq("point_allocs", qf("SELECT point_allocs FROM heap_totals"), o->point_allocs);
	for (s = 0; s < SITES; s++) {
		const struct osite *os = &o->site[s];
		const int64_t want[] = { os->allocs, os->alloc_bytes, os->frees, os->freed_bytes,
					 os->live_count, os->live_bytes, os->peak_count,
					 os->peak_bytes, os->temp_count, os->temp_bytes,
					 os->short_count, os->short_bytes };

		if (!os->allocs) {
			assert_int_equal(qf("SELECT count(*) FROM heap_sites WHERE stack_id = %d "
					    "AND pystack_id = %d", s % 4, s / 4), 0);
			continue;
		}
		for (k = 0; k < 12; k++) {
			int64_t got = qf("SELECT %s FROM heap_sites WHERE proc_id = 1 AND "
					 "stack_id = %d AND pystack_id = %d", cols[k], s % 4, s / 4);

			if (got != want[k])
				fail_msg("site %d %s: %lld, expected %lld", s, cols[k],
					 (long long)got, (long long)want[k]);
		}
		for (k = 0; k < 65; k++) {
			int64_t c = qf("SELECT coalesce(sum(count), 0) FROM heap_histograms WHERE "
				       "stack_id = %d AND pystack_id = %d AND kind = 'size' AND "
				       "bucket = %d", s % 4, s / 4, k);
			int64_t b = qf("SELECT coalesce(sum(bytes), 0) FROM heap_histograms WHERE "
				       "stack_id = %d AND pystack_id = %d AND kind = 'size' AND "
				       "bucket = %d", s % 4, s / 4, k);

			assert_int_equal(c, os->size_c[k]);
			assert_int_equal(b, os->size_b[k]);
		}
		for (k = 0; k < 256; k++) {
			int64_t c = qf("SELECT coalesce(sum(count), 0) FROM heap_histograms WHERE "
				       "stack_id = %d AND pystack_id = %d AND kind = 'life' AND "
				       "bucket = %d", s % 4, s / 4, k);

			assert_int_equal(c, os->life_c[k]);
		}
		/* live bytes at every point and step end */
		for (k = 1; k <= o->npoints; k++)
			if (series_at(s, "alloc", k) != o->point_val[s * (o->npoints + 1) + k])
				fail_msg("site %d point %d: %lld, expected %lld", s, k,
					 (long long)series_at(s, "alloc", k),
					 (long long)o->point_val[s * (o->npoints + 1) + k]);
		for (k = 0; k < o->nsteps; k++)
			if (series_at(s, "step", k) != o->step_val[s * (nev + 1) + k])
				fail_msg("site %d step %d: %lld, expected %lld", s, k,
					 (long long)series_at(s, "step", k),
					 (long long)o->step_val[s * (nev + 1) + k]);
	}
	assert_int_equal(qf("SELECT count(*) FROM heap_points"), o->npoints);
	for (k = 1; k <= o->npoints; k++)
		assert_int_equal(qf("SELECT ns FROM heap_points WHERE idx = %d", k), o->point_ns[k]);
	assert_int_equal(qf("SELECT count(*) FROM heap_steps"), o->nsteps);
	for (k = 0; k < o->nsteps; k++)
		assert_int_equal(qf("SELECT ns FROM heap_steps WHERE idx = %d", k), o->step_ns[k]);
	for (int fn = 0; fn < SHM_FN_COUNT; fn++)
		for (int side = 0; side < 2; side++) {
			const char *sd = side ? "free" : "alloc";

			if (!o->calls_t[fn][side]) {
				assert_int_equal(qf("SELECT count(*) FROM heap_calls WHERE fn_id = %d "
						    "AND side = '%s'", fn, sd), 0);
				continue;
			}
			assert_int_equal(qf("SELECT timed FROM heap_calls WHERE fn_id = %d AND "
					    "side = '%s'", fn, sd), o->calls_t[fn][side]);
			assert_int_equal(qf("SELECT total_ns FROM heap_calls WHERE fn_id = %d AND "
					    "side = '%s'", fn, sd), o->calls_tot[fn][side]);
			assert_int_equal(qf("SELECT min_ns FROM heap_calls WHERE fn_id = %d AND "
					    "side = '%s'", fn, sd), o->calls_min[fn][side]);
			assert_int_equal(qf("SELECT max_ns FROM heap_calls WHERE fn_id = %d AND "
					    "side = '%s'", fn, sd), o->calls_max[fn][side]);
		}
	/* rows: exactly the blocks kept, each as the row path writes it */
	{
		int nkept = 0;

		for (k = 0; k < nblk; k++) {
			const struct oblock *b = &blk[k];

			if (!o->kept[k])
				continue;
			nkept++;
			assert_int_equal(qf("SELECT count(*) FROM allocations WHERE ptr = %lld AND "
					    "alloc_ns = %lld AND size = %lld AND alloc_tid = %d AND "
					    "alloc_fn = %d AND coalesce(stack_id, 0) = %d AND "
					    "coalesce(pystack_id, 0) = %d AND %s",
					    (long long)b->ptr, (long long)b->alloc_ns,
					    (long long)b->size, b->tid, b->fn, b->site % 4, b->site / 4,
					    b->freed ? "free_ns IS NOT NULL" : "free_ns IS NULL"),
					 1);
			if (b->freed)
				assert_int_equal(qf("SELECT free_ns FROM allocations WHERE ptr = %lld "
						    "AND alloc_ns = %lld", (long long)b->ptr,
						    (long long)b->alloc_ns),
						 b->free_ns);
		}
		assert_int_equal(qf("SELECT count(*) FROM allocations"), nkept);
	}
	(void)conf;
}

/* The timeline: each bucket's lowest, highest and last live bytes. */
static void check_timeline(const struct heapagg_conf *conf)
{
	sqlite3_stmt *st;
	int64_t live = 0, prev_end = 0;
	int i = 0;

	assert_int_equal(sqlite3_prepare_v2(db, "SELECT start_ns, end_ns, min_bytes, max_bytes, "
						"end_bytes FROM heap_timeline ORDER BY start_ns",
					    -1, &st, NULL),
			 SQLITE_OK);
	while (sqlite3_step(st) == SQLITE_ROW) {
		int64_t a = sqlite3_column_int64(st, 0), b = sqlite3_column_int64(st, 1);
		int64_t lo = live, hi = live;

		if (prev_end)
			assert_int_equal(a, prev_end);
		else
			assert_int_equal(a, conf->start_ns);
		prev_end = b;
		/* apply each instant in [a, b) */
		while (i < nev && ev[i].key < b) {
			int64_t t = ev[i].key;

			for (; i < nev && ev[i].key == t; i++) {
				if (ev[i].part == 2 || ev[i].block < 0)
					continue;
				live += ev[i].part == 1 ? (int64_t)blk[ev[i].block].size
							: -(int64_t)blk[ev[i].block].size;
			}
			if (live < lo)
				lo = live;
			if (live > hi)
				hi = live;
		}
		assert_int_equal(sqlite3_column_int64(st, 2), lo);
		assert_int_equal(sqlite3_column_int64(st, 3), hi);
		assert_int_equal(sqlite3_column_int64(st, 4), live);
	}
	sqlite3_finalize(st);
	assert_int_equal(i, nev);
}

static void one_run(uint64_t seed, int ncalls, int64_t tick, int64_t quant, int beyond)
{
	char path[64] = "/tmp/test_heapagg.XXXXXX";
	int fd = mkstemp(path);
	struct store *st;
	struct heapagg *h;
	struct gen g = { .window = 2000 };
	struct heapagg_conf conf = { .proc_id = 1, .start_ns = 0, .rows = 1, .short_ns = 300,
				     .row_ns = 3000, .window_ns = 2000, .timeline_ns = 100 };
	struct oracle o;
	int err = 0, i;

	assert_true(fd >= 0);
	close(fd);
	unlink(path);
	rnd_x = seed;
	gen_run(&g, ncalls, tick, quant);
	if (!beyond) {
		/* no record later than the window: every answer exact */
		for (i = 0; i < nfeed; i++) {
			int64_t due = fd_[i].step ? fd_[i].step_ns
				      : fd_[i].end >= 0 ? fd_[i].end : fd_[i].begin;

			if (fd_[i].pub > due + g.window / 2)
				fd_[i].pub = due + (int64_t)rnd(3);
		}
		qsort(fd_, (size_t)nfeed, sizeof(*fd_), cmp_feed);
		/* a stream's records still in its order: by key, stably */
		{
			int64_t last[STREAMS] = { 0 };

			for (i = 0; i < nfeed; i++) {
				if (fd_[i].step)
					continue;
				if (fd_[i].pub < last[fd_[i].stream])
					fd_[i].pub = last[fd_[i].stream];
				last[fd_[i].stream] = fd_[i].pub;
			}
			qsort(fd_, (size_t)nfeed, sizeof(*fd_), cmp_feed);
		}
		g.late_beyond = 0;
	}
	st = store_open(path);
	assert_non_null(st);
	conf.store = st;
	assert_int_equal(store_process_add(st, &(struct store_proc){ .pid = 1, .malloc_mode = "all",
					       .rank = SHM_NO_RANK, .local_rank = SHM_NO_RANK,
					       .sample_bytes = -1 },
					   &(int64_t){ 0 }),
			 0);
	h = heapagg_new(&conf, STREAMS);
	assert_non_null(h);
	for (i = 0; !err && i < nfeed; i++) {
		if (fd_[i].step == 2)
			err = heapagg_count(h, fd_[i].step_ns);
		else if (fd_[i].step)
			err = heapagg_step_end(h, fd_[i].step_ns, 0);
		else
			err = heapagg_heap(h, (uint32_t)fd_[i].stream, (uint32_t)fd_[i].tid,
					   &fd_[i].r, fd_[i].begin, fd_[i].end);
	}
	assert_int_equal(err, 0);
	assert_int_equal(heapagg_end(h), 0);
	heapagg_free(h);
	assert_int_equal(store_close(st), 0);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	oracle_run(&o, &conf);
	if (!beyond) {
		check_store(&o, &conf, 0);
		check_timeline(&conf);
	} else {
		/* late records are counted (each may be one or two events) */
		assert_true(qf("SELECT late_events FROM heap_totals") > 0 || !g.late_beyond);
	}
	sqlite3_close(db);
	free(o.point_val);
	free(o.step_val);
	unlink(path);
	strcat(path, "-wal");
	unlink(path);
	path[strlen(path) - 4] = 0;
	strcat(path, "-shm");
	unlink(path);
}

static void test_heapagg_random_runs(void **state)
{
	(void)state;
	for (uint64_t seed = 1; seed <= 12; seed++)
		one_run(seed * 0x9e3779b97f4a7c15ull, 1500, 3, 1, 0);
}

/* A long run: the grid doubles several times, the timeline too. */
static void test_heapagg_long_run(void **state)
{
	(void)state;
	one_run(77, 3500, 40, 1, 0);
}

static void test_heapagg_late_counted(void **state)
{
	(void)state;
	for (uint64_t seed = 1; seed <= 4; seed++)
		one_run(seed * 7919, 1500, 3, 1, 1);
}

/* Many events to an instant, across the halvings of the points. */
static void test_heapagg_ties(void **state)
{
	(void)state;
	for (uint64_t seed = 1; seed <= 4; seed++)
		one_run(seed * 104729, 3500, 2, 60, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_heapagg_random_runs),
		cmocka_unit_test(test_heapagg_ties),
		cmocka_unit_test(test_heapagg_long_run),
		cmocka_unit_test(test_heapagg_late_counted),
	};

	return cmocka_run_group_tests(tests, 0, 0);
}
