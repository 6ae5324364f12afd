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
#include "collector/ingest.h"

#define MAXB 4096
#define SITES 7
#define STREAMS 4

/* One event as the oracle sees it. */
struct oev {
	int64_t key, begin, end; /* end -1: untimed */
	uint64_t ord;            /* its place in the heap order (heapagg's) */
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
	int64_t ret_ns; /* its call returned it by then */
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

	/* an instant's frees and allocations in heap order (a free first at
	 * an equal one), then its checkpoints */
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	if ((x->part == 2) != (y->part == 2))
		return x->part == 2 ? 1 : -1;
	if (x->ord != y->ord)
		return x->ord < y->ord ? -1 : 1;
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
	/* the shim's heap order (wire.h): seq in the order the calls are
	 * made here, which is not the streams' time order; 0: none, the
	 * records are paired by their times */
	int seqmode;
	uint64_t seq;
	int races; /* allocations stamped before the release of their address */
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
	g->seq = 0;
	g->races = 0;
	for (int c = 0; c < ncalls && nblk < MAXB - 2; c++) {
		int s = (int)rnd(STREAMS), tid = 100 + s;
		int64_t begin = g->clock[s] + tick * (int64_t)(1 + rnd(20));
		/* a coarse clock: many events share an instant (with a
		 * heap order, a thread's successive calls too: only that
		 * order says which came first) */
		if (quant > 1)
			begin = g->seqmode ? begin / quant * quant : (begin / quant + 1) * quant;
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
			int calloc_ = rnd(4) == 0, arena = rnd(8) == 0;

			/* now and then a pymalloc arena: an allocation of its own
			 * function, released by its unmap */
			*b = (struct oblock){
				.ptr = 0x10000 + (uint64_t)nblk * 64,
				.size = arena ? 1u << 20 : rnd(5) ? 1 + rnd(3000) : 0,
				.site = (int)rnd(SITES), .tid = tid, .stream = s,
				.fn = arena ? SHM_FN_PYMALLOC_ARENA_MMAP
					    : calloc_ ? SHM_FN_CALLOC : SHM_FN_MALLOC,
				.alloc_ns = begin, .live_ns = done, .end_ns = end, .ret_ns = done,
			};
			/* reuse an address now and then, if every block that
			 * had it was freed before this one becomes live (the
			 * streams' clocks differ: not only the live ones).
			 * With a heap order, before it in that order is
			 * enough: an untimed malloc may have begun before the
			 * free of the address it returns (a timed one ended
			 * after that free began) */
			if (nblk > 10 && rnd(4) == 0) {
				int k = (int)rnd((uint64_t)nblk), ok = 1;
				int64_t last_free = 0;

				for (int j = 0; j < nblk; j++) {
					if (blk[j].ptr != blk[k].ptr)
						continue;
					ok &= blk[j].freed && (g->seqmode || blk[j].free_ns < begin);
					if (blk[j].freed && blk[j].free_ns > last_free)
						last_free = blk[j].free_ns;
				}
				if (ok && g->seqmode && timed && end <= last_free)
					ok = 0;
				if (ok) {
					b->ptr = blk[k].ptr;
					if (last_free >= begin)
						g->races++;
					if (last_free + 1 > b->ret_ns)
						b->ret_ns = last_free + 1;
				}
			}
			r.hdr.fn = b->fn;
			r.ptr = b->ptr;
			r.size = b->size;
			r.stack_id = (uint32_t)b->site % 4;
			r.pystack_id = (uint32_t)b->site / 4;
			r.seq = g->seqmode ? ++g->seq : 0;
			ev[nev++] = (struct oev){ .key = begin, .begin = begin, .end = end,
						  .ord = g->seqmode ? r.seq : (uint64_t)done,
						  .part = 1, .block = nblk, .stream = s, .fn = b->fn,
						  .rec = rec };
			g->live[g->nlive++] = nblk++;
			add_feed(g, s, tid, &r, begin, end);
		} else {
			/* release a live block allocated before this call began
			 * (a free, or a realloc that allocates a new one) */
			int li = (int)rnd((uint64_t)g->nlive), bi = g->live[li];
			struct oblock *b = &blk[bi];
			int realloc_ = op >= 8 && b->fn != SHM_FN_PYMALLOC_ARENA_MMAP;

			if (g->seqmode ? b->ret_ns > begin : b->ret_ns >= begin)
				continue;
			g->live[li] = g->live[--g->nlive];
			b->freed = 1;
			b->free_ns = begin;
			b->free_end = end;
			b->free_tid = tid;
			b->free_fn = b->fn == SHM_FN_PYMALLOC_ARENA_MMAP ? SHM_FN_PYMALLOC_ARENA_MUNMAP
				     : realloc_ ? SHM_FN_REALLOC : SHM_FN_FREE;
			r.seq_free = g->seqmode ? ++g->seq : 0;
			ev[nev++] = (struct oev){ .key = begin, .begin = begin, .end = end,
						  .ord = g->seqmode ? r.seq_free : (uint64_t)begin,
						  .part = 0, .block = bi, .stream = s,
						  .fn = b->free_fn, .rec = rec };
			r.hdr.fn = b->free_fn;
			if (realloc_) {
				struct oblock *n = &blk[nblk];

				*n = (struct oblock){
					.ptr = 0x10000 + (uint64_t)nblk * 64 + 8, .size = 1 + rnd(3000),
					.site = (int)rnd(SITES), .tid = tid, .stream = s,
					.fn = SHM_FN_REALLOC, .alloc_ns = begin, .live_ns = done,
					.end_ns = end, .ret_ns = done,
				};
				r.ptr = n->ptr;
				r.aux = b->ptr;
				r.size = n->size;
				r.stack_id = (uint32_t)n->site % 4;
				r.pystack_id = (uint32_t)n->site / 4;
				r.seq = g->seqmode ? ++g->seq : 0;
				ev[nev++] = (struct oev){ .key = begin, .begin = begin, .end = end,
							  .ord = g->seqmode ? r.seq : (uint64_t)done,
							  .part = 1, .block = nblk, .stream = s,
							  .fn = SHM_FN_REALLOC, .rec = rec };
				g->live[g->nlive++] = nblk++;
			} else {
				r.ptr = b->ptr;
				/* an unmap's bytes are those it gives back */
				if (b->free_fn == SHM_FN_PYMALLOC_ARENA_MUNMAP)
					r.size = b->size;
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
				/* the release side of free and an arena's unmap */
				if (SHM_FN_RELEASES_ONLY(b->free_fn) && b->free_end >= 0) {
					int64_t d = b->free_end - b->free_ns;
					uint16_t ff = b->free_fn;
					int64_t *t = &o->calls_t[ff][1];

					if (!*t || d < o->calls_min[ff][1])
						o->calls_min[ff][1] = d;
					if (!*t || d > o->calls_max[ff][1])
						o->calls_max[ff][1] = d;
					(*t)++;
					o->calls_tot[ff][1] += d;
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

/* Removes a store and its WAL files. */
static void store_remove(const char *path)
{
	char p[96];

	unlink(path);
	snprintf(p, sizeof(p), "%s-wal", path);
	unlink(p);
	snprintf(p, sizeof(p), "%s-shm", path);
	unlink(p);
}

static int one_run_ord(uint64_t seed, int ncalls, int64_t tick, int64_t quant, int beyond,
		       int seqmode)
{
	char path[64] = "/tmp/test_heapagg.XXXXXX";
	int fd = mkstemp(path);
	struct store *st;
	struct heapagg *h;
	struct gen g = { .window = 2000, .seqmode = seqmode };
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
	store_remove(path);
	return g.races;
}

static void one_run(uint64_t seed, int ncalls, int64_t tick, int64_t quant, int beyond)
{
	one_run_ord(seed, ncalls, tick, quant, beyond, 0);
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

/* Random runs numbered in heap order, with races: an untimed malloc
 * stamped before another thread's free of the address it returns.  The
 * oracle knows which block each release ended. */
static void test_heapagg_heap_order_runs(void **state)
{
	int races = 0;

	(void)state;
	for (uint64_t seed = 1; seed <= 12; seed++)
		races += one_run_ord(seed * 0x2545f4914f6cdd1dull, 1500, 3, 1, 0, 1);
	for (uint64_t seed = 1; seed <= 4; seed++)
		races += one_run_ord(seed * 6700417, 3500, 2, 60, 0, 1);
	/* not a comparison of runs without the case */
	assert_true(races > 20);
}

/* ---- the row path and the aggregates on the same records ---- */

struct hrec {
	int stream;
	uint16_t fn;
	int64_t t;
	uint64_t ptr, size, aux, seq, seq_free;
	uint32_t stack;
	uint32_t tid; /* 0: 100 + stream; fn 0: the stream's slot has a new owner */
};

/* One heap record, untimed, to the sink. */
static void send(const struct rec_sink *sk, const struct hrec *h)
{
	union rec r;

	if (!h->fn) {
		sk->stream_new(sk->ctx, (uint32_t)h->stream);
		return;
	}
	memset(&r, 0, sizeof(r));
	r.heap = (struct shm_rec_heap){
		.hdr = { .type = SHM_REC_HEAP, .size = sizeof(r.heap), .fn = h->fn },
		.t_begin = (uint64_t)h->t, .ptr = h->ptr, .size = h->size, .aux = h->aux,
		.stack_id = h->stack, .seq = h->seq, .seq_free = h->seq_free,
	};
	assert_int_equal(sk->record(sk->ctx, (uint32_t)h->stream,
				    h->tid ? h->tid : 100u + (uint32_t)h->stream, &r),
			 0);
}

/* recs, in the order the source merged them, through an ingest with rows
 * and aggregates into a new store at path; db opens it. */
static void ingest_all(char *path, const struct hrec *recs, size_t n, uint32_t nstreams)
{
	int fd = mkstemp(path);
	struct store *st;
	struct ingest *in;
	struct ingest_conf ic = { .proc_id = 1, .clock = SHM_CLOCK_MONOTONIC,
				  .malloc_mode = SHM_MALLOC_ALL, .nstreams = nstreams,
				  .heap_rows = SHM_HELLO_HEAP_ROWS | SHM_HELLO_HEAP_AGG };
	int64_t id;

	assert_true(fd >= 0);
	close(fd);
	unlink(path);
	st = store_open(path);
	assert_non_null(st);
	assert_int_equal(store_process_add(st, &(struct store_proc){ .pid = 1, .malloc_mode = "all",
					       .rank = SHM_NO_RANK, .local_rank = SHM_NO_RANK,
					       .sample_bytes = -1 },
					   &id),
			 0);
	ic.store = st;
	ic.proc_id = id;
	in = ingest_new(&ic);
	assert_non_null(in);
	for (size_t i = 0; i < n; i++)
		send(ingest_sink(in), &recs[i]);
	assert_int_equal(ingest_end(in), 0);
	ingest_free(in);
	assert_int_equal(store_close(st), 0);
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
}

/* The highest live bytes of the rows at any instant, as tools/model.h
 * reads them (live when alloc_ns <= T < free_ns), and the first such T. */
static const char rows_peak[] =
	"SELECT (SELECT coalesce(sum(size), 0) FROM allocations a WHERE a.alloc_ns <= t.ns "
	"AND (a.free_ns IS NULL OR a.free_ns > t.ns)) AS live, t.ns FROM "
	"(SELECT DISTINCT alloc_ns AS ns FROM allocations) t ORDER BY live DESC, t.ns LIMIT 1";

/*
 * Five threads race for address P, each malloc untimed (stamped when it
 * began), each returning P only after the release before it (heap order):
 *
 *   t 100  X1 = malloc -> P  seq 1     t 200  free(P) seq 2: ends X1
 *   t 150  X2 = malloc -> P  seq 3     t 250  free(P) seq 4: ends X2
 *   t 180  X3 = malloc -> P  seq 5     t 260  free(P) seq 6: ends X3
 *   t 190  X4 = malloc -> P  seq 7     (never freed)
 *
 * In time order three blocks wait behind X4 when the first free comes; by
 * instants every free would end the newest block (X4, X3, none), leaving
 * X1 and X2 live for ever.  Then a realloc of P in the same race (its
 * release before a malloc's seq, its new block after), and a temporary.
 * Both paths (SHIMMER_HEAP_ROWS=both: the rows and the aggregates from the
 * same records) must pair alike: the same leaks, live bytes, per-site
 * counts and peak.
 */
static void test_heapagg_rows_agree(void **state)
{
	enum { P = 0x1000, Q = 0x2000, R = 0x3000 };
	static const struct hrec recs[] = {
		{ 0, SHM_FN_MALLOC, 100, P, 100, 0, 1, 0, 1, 0 },
		{ 1, SHM_FN_MALLOC, 150, P, 200, 0, 3, 0, 2, 0 },
		{ 3, SHM_FN_MALLOC, 180, P, 400, 0, 5, 0, 3, 0 },
		{ 4, SHM_FN_MALLOC, 190, P, 800, 0, 7, 0, 1, 0 },
		{ 2, SHM_FN_FREE, 200, P, 0, 0, 0, 2, 0, 0 },
		{ 0, SHM_FN_FREE, 250, P, 0, 0, 0, 4, 0, 0 },
		{ 2, SHM_FN_FREE, 260, P, 0, 0, 0, 6, 0, 0 },
		/* X4 moves to R (release seq 8, birth seq 10); a malloc
		 * stamped before it gets P after that release (seq 9) */
		{ 3, SHM_FN_MALLOC, 280, P, 16, 0, 9, 0, 2, 0 },
		{ 4, SHM_FN_REALLOC, 300, R, 1000, P, 10, 8, 3, 0 },
		/* a temporary: freed by its thread's next heap call, at the
		 * same instant (a coarse clock): the heap order says which
		 * came first */
		{ 2, SHM_FN_MALLOC, 400, Q, 8, 0, 11, 0, 3, 0 },
		{ 2, SHM_FN_FREE, 400, Q, 0, 0, 0, 12, 0, 0 },
	};
	char path[64] = "/tmp/test_heapagg.XXXXXX";

	(void)state;
	/* in time order, as the source merges them */
	ingest_all(path, recs, sizeof(recs) / sizeof(recs[0]), 5);

	/* the rows: each release ended the block before it in heap order */
	eq("X1 freed at", qf("SELECT free_ns FROM allocations WHERE size = 100"), 200);
	eq("X2 freed at", qf("SELECT free_ns FROM allocations WHERE size = 200"), 250);
	eq("X3 freed at", qf("SELECT free_ns FROM allocations WHERE size = 400"), 260);
	eq("X4 moved at", qf("SELECT free_ns FROM allocations WHERE size = 800"), 300);
	eq("rows live", qf("SELECT count(*) FROM allocations WHERE free_ns IS NULL"), 2);
	/* the aggregates as the rows give them */
	eq("live_bytes", qf("SELECT live_bytes FROM heap_totals"),
	   qf("SELECT sum(size) FROM allocations WHERE free_ns IS NULL"));
	eq("live_bytes", qf("SELECT live_bytes FROM heap_totals"), 1016);
	eq("live_count", qf("SELECT live_count FROM heap_totals"), 2);
	eq("allocs", qf("SELECT allocs FROM heap_totals"), qf("SELECT count(*) FROM allocations"));
	eq("frees", qf("SELECT frees FROM heap_totals"),
	   qf("SELECT count(*) FROM allocations WHERE free_ns IS NOT NULL"));
	eq("peak_bytes", qf("SELECT peak_bytes FROM heap_totals"),
	   qf("SELECT live FROM (%s)", rows_peak));
	eq("peak_ns", qf("SELECT peak_ns FROM heap_totals"), qf("SELECT ns FROM (%s)", rows_peak));
	/* X1..X4 all counted from 190 to 200 (the race's span) */
	eq("peak_bytes", qf("SELECT peak_bytes FROM heap_totals"), 1500);
	/* temporaries: X4 (its thread's next heap call moved it) and Q, not
	 * X1 (its thread's next call freed X2) */
	eq("temp_count", qf("SELECT temp_count FROM heap_totals"), 2);
	eq("temp_bytes", qf("SELECT temp_bytes FROM heap_totals"), 808);
	for (int s = 1; s <= 3; s++) {
		eq("site allocs", qf("SELECT allocs FROM heap_sites WHERE stack_id = %d", s),
		   qf("SELECT count(*) FROM allocations WHERE stack_id = %d", s));
		eq("site frees", qf("SELECT frees FROM heap_sites WHERE stack_id = %d", s),
		   qf("SELECT count(*) FROM allocations WHERE stack_id = %d AND free_ns IS NOT "
		      "NULL", s));
		eq("site live", qf("SELECT live_bytes FROM heap_sites WHERE stack_id = %d", s),
		   qf("SELECT coalesce(sum(size), 0) FROM allocations WHERE stack_id = %d AND "
		      "free_ns IS NULL", s));
		eq("site freed", qf("SELECT freed_bytes FROM heap_sites WHERE stack_id = %d", s),
		   qf("SELECT coalesce(sum(size), 0) FROM allocations WHERE stack_id = %d AND "
		      "free_ns IS NOT NULL", s));
	}
	sqlite3_close(db);
	store_remove(path);
}

/*
 * A thread moved to a CPU whose clock is behind: its free of P is stamped
 * 51 ns before its own malloc of P (heap order: malloc seq 1, free seq 2).
 * The free is raised to the malloc's instant: no negative lifetime, and
 * the pair is the temporary it is on the rows and in the aggregates.
 */
static void test_heapagg_thread_clock_back(void **state)
{
	enum { P = 0x1000 };
	static const struct hrec recs[] = {
		{ 0, SHM_FN_MALLOC, 500, P, 64, 0, 1, 0, 1, 0 },
		{ 0, SHM_FN_FREE, 449, P, 0, 0, 0, 2, 0, 0 },
		{ 0, SHM_FN_MALLOC, 600, P, 64, 0, 3, 0, 1, 0 },
	};
	char path[64] = "/tmp/test_heapagg.XXXXXX";

	(void)state;
	ingest_all(path, recs, sizeof(recs) / sizeof(recs[0]), 1);
	eq("freed at", qf("SELECT free_ns FROM allocations WHERE alloc_ns = 500"), 500);
	eq("temp_count", qf("SELECT temp_count FROM heap_totals"), 1);
	eq("live_count", qf("SELECT live_count FROM heap_totals"), 1);
	sqlite3_close(db);
	store_remove(path);
}

/*
 * A thread's last allocation, P, is freed by the next owner of its ring
 * slot (the thread ended, another took the slot) as that thread's first
 * heap call.  P was not freed before its thread's next allocation: it is
 * no temporary, whatever order the slot's new owner and the old owner's
 * queued records reach the aggregates in.
 */
static void test_heapagg_slot_new_owner(void **state)
{
	enum { P = 0x1000 };
	static const struct hrec recs[] = {
		{ 0, SHM_FN_MALLOC, 100, P, 64, 0, 1, 0, 1, 0 },
		{ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 },
		{ 0, SHM_FN_FREE, 150, P, 0, 0, 0, 2, 0, 777 },
		{ 0, SHM_FN_MALLOC, 200, P, 64, 0, 3, 0, 1, 777 },
		{ 0, SHM_FN_FREE, 250, P, 0, 0, 0, 4, 0, 777 },
	};
	char path[64] = "/tmp/test_heapagg.XXXXXX";

	(void)state;
	ingest_all(path, recs, sizeof(recs) / sizeof(recs[0]), 1);
	eq("frees", qf("SELECT frees FROM heap_totals"), 2);
	/* only the new owner's own pair */
	eq("temp_count", qf("SELECT temp_count FROM heap_totals"), 1);
	sqlite3_close(db);
	store_remove(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_heapagg_random_runs),
		cmocka_unit_test(test_heapagg_ties),
		cmocka_unit_test(test_heapagg_long_run),
		cmocka_unit_test(test_heapagg_late_counted),
		cmocka_unit_test(test_heapagg_heap_order_runs),
		cmocka_unit_test(test_heapagg_rows_agree),
		cmocka_unit_test(test_heapagg_thread_clock_back),
		cmocka_unit_test(test_heapagg_slot_new_owner),
	};

	return cmocka_run_group_tests(tests, 0, 0);
}
