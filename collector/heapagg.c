/*
 * Heap aggregation (heapagg.h).  Per event: an insertion into the reorder
 * queue (an append unless the event is out of order), then, once it is
 * old enough, one pointer-map operation, one site lookup (a small open
 * hash of (stack, Python stack)), a few counters, a histogram bucket (a
 * short per-site list), and for the order-dependent answers O(1) more:
 *
 *  - The peak, exactly, and the sites holding memory at that instant, by
 *    memray's high-water-mark idea made lazy: each site keeps its live
 *    bytes and the sequence number of its last change; when a site changes
 *    for the first time after the peak's instant it first saves its value
 *    (which is then its value at the peak).  At the end a site's value at
 *    the peak is the saved one if it changed since, else its current one.
 *    No snapshot of every site, no replay.
 *  - Memory over time: at most HEAPAGG_TIMELINE buckets, each the lowest,
 *    highest and last live bytes in it; when the run outgrows them the
 *    width doubles and neighbours merge.
 *  - Each site's live bytes at the checkpoints (the instants of every
 *    step-th allocation of the process, and the ends of top-level push
 *    ranges), run-length coded and lazily again: when a site changes it
 *    first records the value it held at the checkpoints passed since its
 *    last change, if that differs from its last run.  step doubles so that
 *    at most HEAPAGG_POINTS points are kept; the coarser points are points
 *    of the finer ones, so the runs are renumbered, not recomputed.
 *  - A row only for a block freed after row_ns, or never freed.
 *
 * Blocks live in a slab with a free list.  Which block a release ends is
 * the row path's answer (ingest.c): the same map of blocks by address in
 * heap order (blockmap.h), the same orders (rec_heap_birth(),
 * rec_heap_release()).  The queue keeps time order for what depends on
 * time; pairing by instants instead would end a block that an untimed
 * malloc in another thread started (and was stamped) before the free of
 * the address it then returned, and leave the freed one live for ever.
 *
 * Such a race also shapes the peak, as it shapes the rows: the new block
 * is live from its call's start, the old one until its release's start,
 * so for that span both count, as the row store's readers count them
 * (tools/model.h: alloc_ns <= T < free_ns); the peak can hold a block an
 * allocator had not handed out yet, by at most the race's blocks for the
 * race's span.  Both paths give the same figure.
 */
#include "heapagg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "blockmap.h"
#include "ingest.h" /* INGEST_TIME_LIMIT */
#include "record.h"

#define SITE_MIN 256u
#define EV_MIN 1024u
#define NONE UINT32_MAX

/* At one instant: the frees and allocations in heap order (a free first
 * at an equal order, which only the time fallback gives), then checkpoints
 * (which see every event of their instant).  The peak, the timeline and
 * the checkpoints are read once an instant is complete, so the order
 * within it only decides pairing and temporaries: a thread's calls then
 * come in the order it made them. */
enum part { P_FREE, P_ALLOC, P_STEP };

/* One event held for ordering: a free, a step end, or an allocation (a
 * realloc is a free and an allocation, each at its own place in the heap
 * order). */
struct ev {
	int64_t key;      /* its instant: its call's start */
	uint64_t order;   /* heap events: rec_heap_release() or rec_heap_birth() */
	int64_t end_ns;   /* its call's end, -1 untimed */
	uint64_t ptr, size;
	uint32_t stream, tid;
	uint32_t stack_id, pystack_id;
	uint16_t fn;
	uint8_t part;
	uint8_t count_only; /* an allocation of another memory: counted only */
	uint8_t pad[4];
};

struct bucket {
	uint32_t b;
	int64_t count, bytes;
};

struct hist {
	struct bucket *v;
	uint32_t n, cap;
};

/* A site's live bytes at checkpoints, run-length coded: entry i holds
 * val[i] from checkpoint idx[i] on, up to the next entry; before the first
 * entry the value is 0. */
struct rle {
	uint32_t *idx;
	int64_t *val;
	uint32_t n, cap;
};

struct site {
	uint32_t stack_id, pystack_id;
	int64_t allocs, alloc_bytes, frees, freed_bytes;
	int64_t cur_count, cur_bytes;   /* live now */
	int64_t snap_count, snap_bytes; /* live at the peak, once changed since */
	uint64_t touch;                 /* seq of its last change */
	int64_t temp_count, temp_bytes, short_count, short_bytes;
	struct hist sizes, lives;
	struct rle points, steps;
	uint32_t point_next, step_next; /* the first checkpoint its runs do not cover */
};

struct block {
	uint64_t ptr, size;
	int64_t alloc_ns;
	int64_t end_ns; /* its call's end, -1 untimed */
	uint32_t site, tid;
	uint32_t next; /* the free list */
	uint32_t gen;  /* bumped at each reuse of the slot */
	uint16_t fn;
	uint16_t used;
};

struct call_stats {
	int64_t timed, total, min, max;
	double mean, m2; /* Welford's */
};

struct tl_bucket {
	int64_t min, max, last;
};

struct stream_state {
	uint32_t last;     /* block its last traced heap event allocated, or NONE */
	uint32_t last_gen;
	/* the thread that allocated it: a slot's next owner may free it as
	 * its first call, and the reset heapagg_stream_new() makes comes
	 * before the old owner's queued events are applied */
	uint32_t last_tid;
};

struct heapagg {
	struct heapagg_conf conf;
	/* reorder queue: v[head .. tail) sorted by (key, part) */
	struct ev *q;
	size_t head, tail, cap;
	int64_t newest;
	struct ev applied; /* the last event applied from the queue */
	int any_applied;
	/* sites */
	struct site *sites;
	uint32_t nsites, sites_cap;
	uint64_t *site_keys; /* (stack << 32 | py) + 1, 0 empty */
	uint32_t *site_idx;
	uint32_t site_mask;
	/* blocks */
	struct block *blocks;
	uint32_t nblocks, blocks_cap, free_head;
	struct blockmap map; /* slot + 1 by address, in heap order */
	/* totals */
	int64_t allocs, alloc_bytes, frees, freed_bytes, live_count, live_bytes;
	int64_t temp_count, temp_bytes, short_count, short_bytes;
	int64_t late_events, late_steps;
	/* instants and the peak */
	uint64_t seq, peak_seq;
	int64_t cur_t; /* instant of the last applied event */
	int have_t;
	int64_t peak_bytes, peak_count, peak_ns;
	int have_peak;
	/* checkpoints */
	int64_t allocs_all;   /* allocations of every memory, applied (counted) */
	int64_t point_allocs; /* a point every this many of them */
	int64_t *points;      /* points[m - 1]: the instant of allocation m * point_allocs */
	uint32_t npoints, points_cap;
	uint32_t points_passed; /* points before the current instant */
	struct { int64_t ns, range_id; } *steps; /* top-level range ends, in order */
	uint32_t nsteps, steps_cap;
	int err; /* a failed allocation in touch() */
	/* timeline */
	struct tl_bucket tl[HEAPAGG_TIMELINE];
	uint32_t tl_n; /* buckets 0..tl_n-1 hold values */
	int64_t tl_w;
	/* calls */
	struct call_stats calls[SHM_FN_COUNT][2];
	/* streams */
	struct stream_state *streams;
	uint32_t nstreams;
	int64_t next_snapshot;
};

/* ---- small helpers ---- */

static int grow(void **v, uint32_t *cap, uint32_t n, size_t size, uint32_t min)
{
	uint32_t c;
	void *p;

	if (n < *cap)
		return 0;
	c = *cap ? *cap * 2 : min;
	p = realloc(*v, (size_t)c * size);
	if (!p)
		return -ENOMEM;
	*v = p;
	*cap = c;
	return 0;
}

static uint32_t size_bucket(uint64_t size)
{
	return size ? 64u - (uint32_t)__builtin_clzll(size) : 0;
}

/* Quarter octaves: 0..7 exactly, then 4 * e + the two bits after the top
 * one (e = the top bit's position, >= 3). */
static uint32_t life_bucket(int64_t life)
{
	uint64_t l = life > 0 ? (uint64_t)life : 0;
	uint32_t e;

	if (l < 8)
		return (uint32_t)l;
	e = 63u - (uint32_t)__builtin_clzll(l);
	return 4 * e + (uint32_t)((l >> (e - 2)) & 3);
}

static int hist_add(struct hist *h, uint32_t b, int64_t bytes)
{
	uint32_t i;
	int err;

	for (i = 0; i < h->n; i++) {
		if (h->v[i].b == b) {
			h->v[i].count++;
			h->v[i].bytes += bytes;
			return 0;
		}
	}
	err = grow((void **)&h->v, &h->cap, h->n, sizeof(*h->v), 4);
	if (err)
		return err;
	h->v[h->n++] = (struct bucket){ b, 1, bytes };
	return 0;
}

/* ---- sites ---- */

static uint32_t site_hash(uint64_t key, uint32_t mask)
{
	return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & mask;
}

static int sites_rehash(struct heapagg *h)
{
	uint32_t n = h->site_mask ? (h->site_mask + 1) * 2 : 2 * SITE_MIN;
	uint64_t *keys = calloc(n, sizeof(*keys));
	uint32_t *idx = calloc(n, sizeof(*idx));

	if (!keys || !idx) {
		free(keys);
		free(idx);
		return -ENOMEM;
	}
	for (uint32_t s = 0; s < h->nsites; s++) {
		uint64_t k = ((uint64_t)h->sites[s].stack_id << 32 | h->sites[s].pystack_id) + 1;
		uint32_t i = site_hash(k, n - 1);

		while (keys[i])
			i = (i + 1) & (n - 1);
		keys[i] = k;
		idx[i] = s;
	}
	free(h->site_keys);
	free(h->site_idx);
	h->site_keys = keys;
	h->site_idx = idx;
	h->site_mask = n - 1;
	return 0;
}

/* The site of (stack, py), added if new; NONE on ENOMEM. */
static uint32_t site_of(struct heapagg *h, uint32_t stack, uint32_t py)
{
	uint64_t k = ((uint64_t)stack << 32 | py) + 1;
	uint32_t i;

	if ((h->nsites + 1) * 2 > h->site_mask + 1 && sites_rehash(h))
		return NONE;
	for (i = site_hash(k, h->site_mask); h->site_keys[i]; i = (i + 1) & h->site_mask)
		if (h->site_keys[i] == k)
			return h->site_idx[i];
	if (grow((void **)&h->sites, &h->sites_cap, h->nsites, sizeof(*h->sites), SITE_MIN))
		return NONE;
	h->sites[h->nsites] = (struct site){ .stack_id = stack, .pystack_id = py };
	h->site_keys[i] = k;
	h->site_idx[i] = h->nsites;
	return h->nsites++;
}

static int rle_put(struct rle *r, uint32_t idx, int64_t v)
{
	int64_t last = r->n ? r->val[r->n - 1] : 0;

	if (v == last)
		return 0;
	if (r->n == r->cap) {
		uint32_t cap = r->cap ? r->cap * 2 : 4;
		uint32_t *i = realloc(r->idx, cap * sizeof(*i));
		int64_t *x;

		if (!i)
			return -ENOMEM;
		r->idx = i;
		x = realloc(r->val, cap * sizeof(*x));
		if (!x)
			return -ENOMEM;
		r->val = x;
		r->cap = cap;
	}
	if (r->n && r->idx[r->n - 1] == idx) {
		/* the same checkpoint: the later value holds */
		r->val[r->n - 1] = v;
		if (v == (r->n > 1 ? r->val[r->n - 2] : 0))
			r->n--;
		return 0;
	}
	r->idx[r->n] = idx;
	r->val[r->n++] = v;
	return 0;
}

/* The points halved: point i is old point 2i; an entry from old point k on
 * starts at new point ceil(k / 2), and of two that start there the later
 * one holds. */
static void rle_halve(struct rle *r)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < r->n; i++) {
		uint32_t k = (r->idx[i] + 1) / 2;
		int64_t before;

		if (n && r->idx[n - 1] == k)
			n--;
		before = n ? r->val[n - 1] : 0;
		if (r->val[i] == before)
			continue;
		r->idx[n] = k;
		r->val[n++] = r->val[i];
	}
	r->n = n;
}

/* Before a site's live figures change: keep its value at the peak, and
 * at the checkpoints passed since its last change. */
static void touch(struct heapagg *h, struct site *s)
{
	if (s->touch <= h->peak_seq) {
		s->snap_count = s->cur_count;
		s->snap_bytes = s->cur_bytes;
	}
	s->touch = h->seq;
	if (h->points_passed >= s->point_next) {
		if (rle_put(&s->points, s->point_next, s->cur_bytes))
			h->err = -ENOMEM;
		s->point_next = h->points_passed + 1;
	}
	if (h->nsteps > s->step_next) {
		if (rle_put(&s->steps, s->step_next, s->cur_bytes))
			h->err = -ENOMEM;
		s->step_next = h->nsteps;
	}
}

/* ---- instants: the peak and the timeline ---- */

static void tl_set(struct heapagg *h, uint32_t i, int64_t v, int first)
{
	struct tl_bucket *b = &h->tl[i];

	if (first) {
		*b = (struct tl_bucket){ v, v, v };
		return;
	}
	if (v < b->min)
		b->min = v;
	if (v > b->max)
		b->max = v;
	b->last = v;
}

/* The live bytes are v from instant t on. */
static void timeline(struct heapagg *h, int64_t t, int64_t v)
{
	int64_t prev = h->tl_n ? h->tl[h->tl_n - 1].last : 0;
	uint64_t i = t > h->conf.start_ns ? (uint64_t)(t - h->conf.start_ns) / (uint64_t)h->tl_w : 0;

	while (i >= HEAPAGG_TIMELINE) {
		/* halve: neighbours merge */
		uint32_t n = 0;

		for (uint32_t k = 0; k < h->tl_n; k += 2) {
			struct tl_bucket m = h->tl[k];

			if (k + 1 < h->tl_n) {
				const struct tl_bucket *b = &h->tl[k + 1];

				m.min = b->min < m.min ? b->min : m.min;
				m.max = b->max > m.max ? b->max : m.max;
				m.last = b->last;
			}
			h->tl[n++] = m;
		}
		h->tl_n = n;
		h->tl_w *= 2;
		i = (uint64_t)(t - h->conf.start_ns) / (uint64_t)h->tl_w;
	}
	/* buckets without events hold the value before */
	while (h->tl_n <= i)
		tl_set(h, h->tl_n++, prev, 1);
	tl_set(h, (uint32_t)i, v, 0);
}

/* Every event of instant cur_t was applied: read the peak there. */
static void end_instant(struct heapagg *h)
{
	if (!h->have_t)
		return;
	/* Instants come from CUDA allocations and range ends too: a heap that
	 * has allocated nothing has no peak instant (heap_totals.peak_ns NULL),
	 * as the rows, which hold no host block then, have no host memory. */
	if (h->allocs && (!h->have_peak || h->live_bytes > h->peak_bytes)) {
		h->have_peak = 1;
		h->peak_bytes = h->live_bytes;
		h->peak_count = h->live_count;
		h->peak_ns = h->cur_t;
		h->peak_seq = h->seq;
	}
	timeline(h, h->cur_t, h->live_bytes);
}

/* One more allocation (of any memory) was applied at instant t: every
 * point_allocs-th is a checkpoint; past HEAPAGG_POINTS of them every
 * other one goes (and point_allocs doubles). */
static int count_alloc(struct heapagg *h, int64_t t)
{
	int err;

	h->allocs_all++;
	if (h->allocs_all % h->point_allocs)
		return 0;
	err = grow((void **)&h->points, &h->points_cap, h->npoints, sizeof(*h->points), 64);
	if (err)
		return err;
	h->points[h->npoints++] = t;
	if (h->npoints <= HEAPAGG_POINTS)
		return 0;
	for (uint32_t i = 1; 2 * i <= h->npoints; i++)
		h->points[i - 1] = h->points[2 * i - 1];
	h->npoints /= 2;
	h->points_passed /= 2;
	h->point_allocs *= 2;
	for (uint32_t i = 0; i < h->nsites; i++) {
		rle_halve(&h->sites[i].points);
		h->sites[i].point_next = (h->sites[i].point_next + 1) / 2;
	}
	return 0;
}

/* ---- blocks ---- */

static uint32_t block_new(struct heapagg *h)
{
	uint32_t i;

	if (h->free_head != NONE) {
		i = h->free_head;
		h->free_head = h->blocks[i].next;
		return i;
	}
	if (grow((void **)&h->blocks, &h->blocks_cap, h->nblocks, sizeof(*h->blocks), 1024))
		return NONE;
	h->blocks[h->nblocks].gen = 0;
	return h->nblocks++;
}

static void block_release(struct heapagg *h, uint32_t i)
{
	h->blocks[i].used = 0;
	h->blocks[i].next = h->free_head;
	h->free_head = i;
}

static void call_add(struct heapagg *h, uint16_t fn, int side, int64_t d)
{
	struct call_stats *c = &h->calls[fn][side];

	if (d < 0)
		d = 0;
	if (!c->timed || d < c->min)
		c->min = d;
	if (!c->timed || d > c->max)
		c->max = d;
	c->timed++;
	c->total += d;
	{
		double x = (double)d, delta = x - c->mean;

		c->mean += delta / (double)c->timed;
		c->m2 += delta * (x - c->mean);
	}
}

/* Its allocations row, as the row path writes it. */
static int block_row(struct heapagg *h, const struct block *b, const struct ev *freed,
		     int64_t *id)
{
	const struct site *s = &h->sites[b->site];
	struct store_alloc a = {
		.proc_id = h->conf.proc_id, .space = "host", .device = -1,
		.ptr = b->ptr, .size = b->size, .sampled = 0, .weight = (double)b->size,
		.fn = b->fn, .tid = b->tid, .ns = b->alloc_ns, .end_ns = b->end_ns,
		.stack_id = s->stack_id, .pystack_id = s->pystack_id,
	};
	int err = store_alloc_add(h->conf.store, &a, id);

	if (!err && freed)
		err = store_alloc_free(h->conf.store, *id, freed->fn, freed->tid,
				       freed->key, freed->end_ns);
	return err;
}

/* ---- applying events ---- */

static int apply_free(struct heapagg *h, const struct ev *e)
{
	struct stream_state *ss = &h->streams[e->stream];
	struct block *b;
	struct site *s;
	int64_t life, id;
	uint32_t i;
	int err;

	id = blockmap_take(&h->map, e->ptr, e->order);
	if (id <= 0)
		return (int)id;
	i = (uint32_t)(id - 1);
	b = &h->blocks[i];
	s = &h->sites[b->site];
	life = e->key - b->alloc_ns;
	touch(h, s);
	s->frees++;
	s->freed_bytes += (int64_t)b->size;
	s->cur_count--;
	s->cur_bytes -= (int64_t)b->size;
	h->frees++;
	h->freed_bytes += (int64_t)b->size;
	h->live_count--;
	h->live_bytes -= (int64_t)b->size;
	if (ss->last == i && ss->last_gen == b->gen && ss->last_tid == e->tid) {
		s->temp_count++;
		s->temp_bytes += (int64_t)b->size;
		h->temp_count++;
		h->temp_bytes += (int64_t)b->size;
	}
	ss->last = NONE;
	if (life <= h->conf.short_ns) {
		s->short_count++;
		s->short_bytes += (int64_t)b->size;
		h->short_count++;
		h->short_bytes += (int64_t)b->size;
	}
	if (life <= h->conf.row_ns) {
		err = hist_add(&s->lives, life_bucket(life), (int64_t)b->size);
		if (err)
			return err;
	}
	/* the release side of a call that releases only: free, an arena's
	 * unmap (a realloc is timed once, as an allocation) */
	if (SHM_FN_RELEASES_ONLY(e->fn) && e->end_ns >= 0)
		call_add(h, e->fn, 1, e->end_ns - e->key);
	if (h->conf.rows && life > h->conf.row_ns) {
		err = block_row(h, b, e, &id);
		if (err)
			return err;
	}
	block_release(h, i);
	return 0;
}

static int apply_alloc(struct heapagg *h, const struct ev *e)
{
	struct stream_state *ss = &h->streams[e->stream];
	uint32_t si = site_of(h, e->stack_id, e->pystack_id), i;
	struct block *b;
	struct site *s;
	int err;

	if (si == NONE || (i = block_new(h)) == NONE)
		return -ENOMEM;
	s = &h->sites[si];
	b = &h->blocks[i];
	*b = (struct block){
		.ptr = e->ptr, .size = e->size, .alloc_ns = e->key,
		.end_ns = e->end_ns, .site = si, .tid = e->tid, .gen = b->gen + 1,
		.fn = e->fn, .used = 1,
	};
	err = blockmap_put(&h->map, e->ptr, (int64_t)i + 1, e->order);
	if (err)
		return err;
	touch(h, s);
	s->allocs++;
	s->alloc_bytes += (int64_t)e->size;
	s->cur_count++;
	s->cur_bytes += (int64_t)e->size;
	h->allocs++;
	h->alloc_bytes += (int64_t)e->size;
	h->live_count++;
	h->live_bytes += (int64_t)e->size;
	if (e->end_ns >= 0)
		call_add(h, e->fn, 0, e->end_ns - e->key);
	ss->last = i;
	ss->last_gen = b->gen;
	ss->last_tid = e->tid;
	err = hist_add(&s->sizes, size_bucket(e->size), (int64_t)e->size);
	return err ? err : count_alloc(h, e->key);
}

/* A step checkpoint: it sees every site's value as it is now (the sites
 * record it when they next change). */
static int apply_step(struct heapagg *h, const struct ev *e)
{
	int err = grow((void **)&h->steps, &h->steps_cap, h->nsteps, sizeof(*h->steps), 64);

	if (err)
		return err;
	h->steps[h->nsteps].ns = e->key;
	h->steps[h->nsteps].range_id = (int64_t)e->ptr;
	h->nsteps++;
	return 0;
}

static int apply(struct heapagg *h, const struct ev *e)
{
	int err;

	if (!h->have_t || e->key > h->cur_t) {
		end_instant(h);
		h->cur_t = e->key;
		h->have_t = 1;
		/* the points of earlier instants have their values */
		h->points_passed = h->npoints;
	}
	h->seq++;
	switch (e->part) {
	case P_FREE:
		err = apply_free(h, e);
		break;
	case P_ALLOC:
		err = e->count_only ? count_alloc(h, e->key) : apply_alloc(h, e);
		break;
	default:
		err = apply_step(h, e);
	}
	return err ? err : h->err;
}

/* ---- the reorder queue ---- */

/* Whether a is applied before b (see enum part). */
static int before(const struct ev *a, const struct ev *b)
{
	if (a->key != b->key)
		return a->key < b->key;
	if ((a->part == P_STEP) != (b->part == P_STEP))
		return b->part == P_STEP;
	if (a->order != b->order)
		return a->order < b->order;
	return a->part < b->part;
}

/* Applies the queued events up to instant until. */
static int drain(struct heapagg *h, int64_t until)
{
	int err = 0;

	while (!err && h->head < h->tail && h->q[h->head].key <= until) {
		const struct ev *e = &h->q[h->head++];

		/* what before() reads of it */
		h->applied.key = e->key;
		h->applied.order = e->order;
		h->applied.part = e->part;
		h->any_applied = 1;
		err = apply(h, e);
	}
	if (h->head == h->tail)
		h->head = h->tail = 0;
	return err;
}

static int enqueue(struct heapagg *h, const struct ev *e)
{
	size_t i;

	if (e->key > h->newest)
		h->newest = e->key;
	if (h->any_applied && before(e, &h->applied)) {
		/* too late for its place: apply it now, counted */
		if (e->part == P_STEP)
			h->late_steps++;
		else
			h->late_events++;
		return apply(h, e);
	}
	if (h->tail == h->cap) {
		if (h->head > h->cap / 2) {
			memmove(h->q, h->q + h->head, (h->tail - h->head) * sizeof(*h->q));
			h->tail -= h->head;
			h->head = 0;
		} else {
			size_t cap = h->cap ? h->cap * 2 : EV_MIN;
			struct ev *q = realloc(h->q, cap * sizeof(*q));

			if (!q)
				return -ENOMEM;
			h->q = q;
			h->cap = cap;
		}
	}
	/* after every queued event it does not come before */
	for (i = h->tail; i > h->head && before(e, &h->q[i - 1]); i--)
		;
	if (i < h->tail)
		memmove(h->q + i + 1, h->q + i, (h->tail - i) * sizeof(*h->q));
	h->q[i] = *e;
	h->tail++;
	return 0;
}

/* ---- writing the tables ---- */

/* A site's runs as they stand: the value since its last change holds
 * from its first uncovered checkpoint on (written, not kept: the site may
 * still change). */
static int write_series(struct heapagg *h, const struct site *s)
{
	static const char *const kinds[] = { "alloc", "step" };
	const struct rle *r[2] = { &s->points, &s->steps };
	const uint32_t next[2] = { s->point_next, s->step_next };
	int err = 0;

	for (int k = 0; !err && k < 2; k++) {
		uint32_t n = r[k]->n;
		int64_t before;

		if (k == 0 ? !h->npoints : !h->nsteps)
			continue; /* no checkpoints of the kind, no runs */

		/* an entry at next itself gives way to the current value */
		if (n && r[k]->idx[n - 1] == next[k])
			n--;
		for (uint32_t i = 0; !err && i < n; i++)
			err = store_heap_series(h->conf.store, h->conf.proc_id, s->stack_id,
						s->pystack_id, kinds[k], r[k]->idx[i], r[k]->val[i]);
		before = n ? r[k]->val[n - 1] : 0;
		if (!err && s->cur_bytes != before)
			err = store_heap_series(h->conf.store, h->conf.proc_id, s->stack_id,
						s->pystack_id, kinds[k], next[k], s->cur_bytes);
	}
	return err;
}

static int write_tables(struct heapagg *h, int final)
{
	struct store *st = h->conf.store;
	int64_t p = h->conf.proc_id;
	struct store_heap_totals t = {
		.proc_id = p, .final = final,
		.allocs = h->allocs, .alloc_bytes = h->alloc_bytes,
		.frees = h->frees, .freed_bytes = h->freed_bytes,
		.live_count = h->live_count, .live_bytes = h->live_bytes,
		.peak_bytes = h->peak_bytes, .peak_count = h->peak_count,
		.peak_ns = h->peak_ns,
		.temp_count = h->temp_count, .temp_bytes = h->temp_bytes,
		.short_ns = h->conf.short_ns, .row_ns = h->conf.row_ns,
		.short_count = h->short_count,
		.short_bytes = h->short_bytes, .point_allocs = h->point_allocs,
		.late_events = h->late_events, .late_steps = h->late_steps,
	};
	int err = store_heap_totals(st, &t);

	for (uint32_t i = 0; !err && i < h->nsites; i++) {
		const struct site *s = &h->sites[i];
		int changed = s->touch > h->peak_seq;
		struct store_heap_site r = {
			.stack_id = s->stack_id, .pystack_id = s->pystack_id,
			.allocs = s->allocs, .alloc_bytes = s->alloc_bytes,
			.frees = s->frees, .freed_bytes = s->freed_bytes,
			.live_count = s->cur_count, .live_bytes = s->cur_bytes,
			.peak_count = changed ? s->snap_count : s->cur_count,
			.peak_bytes = changed ? s->snap_bytes : s->cur_bytes,
			.temp_count = s->temp_count, .temp_bytes = s->temp_bytes,
			.short_count = s->short_count, .short_bytes = s->short_bytes,
		};

		err = store_heap_site(st, p, &r);
		for (uint32_t k = 0; !err && k < s->sizes.n; k++)
			err = store_heap_hist(st, p, s->stack_id, s->pystack_id, "size",
					      s->sizes.v[k].b, s->sizes.v[k].count,
					      s->sizes.v[k].bytes);
		for (uint32_t k = 0; !err && k < s->lives.n; k++)
			err = store_heap_hist(st, p, s->stack_id, s->pystack_id, "life",
					      s->lives.v[k].b, s->lives.v[k].count,
					      s->lives.v[k].bytes);
	}
	for (uint16_t fn = 0; !err && fn < SHM_FN_COUNT; fn++) {
		for (int side = 0; !err && side < 2; side++) {
			const struct call_stats *c = &h->calls[fn][side];

			if (c->timed)
				err = store_heap_call(st, p, fn, side ? "free" : "alloc", c->timed,
						      c->total, c->m2, c->min, c->max);
		}
	}
	if (!err)
		err = store_heap_clear(st, p);
	for (uint32_t i = 0; !err && i < h->tl_n; i++) {
		int64_t b = h->conf.start_ns + (int64_t)i * h->tl_w;

		err = store_heap_timeline(st, p, b, b + h->tl_w, h->tl[i].min, h->tl[i].max,
					  h->tl[i].last);
	}
	for (uint32_t i = 0; !err && i < h->nsites; i++)
		err = write_series(h, &h->sites[i]);
	for (uint32_t i = 0; !err && i < h->nsteps; i++)
		err = store_heap_step(st, p, i, h->steps[i].ns, h->steps[i].range_id);
	for (uint32_t i = 0; !err && i < h->npoints; i++)
		err = store_heap_point(st, p, i + 1, h->points[i]);
	return err;
}

/* ---- the interface ---- */

struct heapagg *heapagg_new(const struct heapagg_conf *conf, uint32_t nstreams)
{
	struct heapagg *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	h->conf = *conf;
	if (h->conf.short_ns <= 0)
		h->conf.short_ns = HEAPAGG_SHORT_NS;
	if (h->conf.row_ns <= 0)
		h->conf.row_ns = HEAPAGG_ROW_NS;
	if (h->conf.window_ns <= 0)
		h->conf.window_ns = HEAPAGG_WINDOW_NS;
	h->nstreams = nstreams ? nstreams : 1;
	h->streams = malloc(h->nstreams * sizeof(*h->streams));
	if (!h->streams || sites_rehash(h)) {
		heapagg_free(h);
		errno = ENOMEM;
		return NULL;
	}
	for (uint32_t i = 0; i < h->nstreams; i++)
		h->streams[i].last = NONE;
	h->free_head = NONE;
	if (h->conf.timeline_ns <= 0)
		h->conf.timeline_ns = HEAPAGG_TIMELINE_NS;
	h->point_allocs = 1;
	h->tl_w = h->conf.timeline_ns;
	/* no event yet: the earliest time one can have (ingest.h) */
	h->newest = -INGEST_TIME_LIMIT;
	h->peak_ns = -1;
	h->next_snapshot = conf->start_ns + HEAPAGG_SNAPSHOT_NS;
	return h;
}

/* Applies what is old enough, and rewrites the tables now and then. */
static int progress(struct heapagg *h)
{
	int err = drain(h, h->newest - h->conf.window_ns);

	if (!err && h->newest >= h->next_snapshot) {
		h->next_snapshot = h->newest + HEAPAGG_SNAPSHOT_NS;
		err = write_tables(h, 0);
	}
	return err;
}

int heapagg_heap(struct heapagg *h, uint32_t stream, uint32_t tid, const struct shm_rec_heap *r,
		 int64_t begin_ns, int64_t end_ns)
{
	unsigned fnf = shm_fn_info[r->hdr.fn].flags;
	struct ev e = {
		.key = begin_ns, .end_ns = end_ns, .stream = stream % h->nstreams,
		.tid = tid, .stack_id = r->stack_id, .pystack_id = r->pystack_id, .fn = r->hdr.fn,
	};
	int err = 0;

	if (r->hdr.flags & SHM_F_FAILED)
		return 0;
	if (fnf & SHM_FNF_FREE) {
		/* realloc: the old block goes unless the call failed (NULL
		 * for a non-zero size); realloc(p, 0) frees p. */
		uint64_t old = fnf & SHM_FNF_ALLOC ? r->aux : r->ptr;
		int gone = !(fnf & SHM_FNF_ALLOC) || r->ptr || r->size == 0;

		if (old && gone) {
			e.order = rec_heap_release(r);
			e.ptr = old;
			e.part = P_FREE;
			err = enqueue(h, &e);
		}
	}
	if (!err && (fnf & SHM_FNF_ALLOC) && r->ptr) {
		e.order = rec_heap_birth(r);
		e.end_ns = end_ns;
		e.ptr = r->ptr;
		e.size = r->size;
		e.part = P_ALLOC;
		err = enqueue(h, &e);
	}
	return err ? err : progress(h);
}

int heapagg_step_end(struct heapagg *h, int64_t ns, int64_t range_id)
{
	struct ev e = { .key = ns, .part = P_STEP, .ptr = (uint64_t)range_id };
	int err = enqueue(h, &e);

	return err ? err : progress(h);
}

int heapagg_count(struct heapagg *h, int64_t ns)
{
	struct ev e = { .key = ns, .part = P_ALLOC, .count_only = 1 };
	int err = enqueue(h, &e);

	return err ? err : progress(h);
}

void heapagg_stream_new(struct heapagg *h, uint32_t stream)
{
	h->streams[stream % h->nstreams].last = NONE;
}

int heapagg_end(struct heapagg *h)
{
	int err = drain(h, INT64_MAX);

	if (err)
		return err;
	end_instant(h);
	h->have_t = 0;
	if (h->conf.rows) {
		for (uint32_t i = 0; !err && i < h->nblocks; i++) {
			int64_t id;

			if (h->blocks[i].used)
				err = block_row(h, &h->blocks[i], NULL, &id);
		}
	}
	return err ? err : write_tables(h, 1);
}

void heapagg_free(struct heapagg *h)
{
	if (!h)
		return;
	for (uint32_t i = 0; i < h->nsites; i++) {
		free(h->sites[i].sizes.v);
		free(h->sites[i].lives.v);
		free(h->sites[i].points.idx);
		free(h->sites[i].points.val);
		free(h->sites[i].steps.idx);
		free(h->sites[i].steps.val);
	}
	free(h->sites);
	free(h->site_keys);
	free(h->site_idx);
	free(h->blocks);
	blockmap_free(&h->map);
	free(h->q);
	free(h->steps);
	free(h->points);
	free(h->streams);
	free(h);
}
