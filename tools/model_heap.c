/*
 * The heap: one pass over the allocations table, and every heap figure
 * computed from what it kept; see model.h.
 *
 * The pass.  The table is the store's largest (a row per allocation: 5
 * million rows for a 10-million-event run), and reading a column of a row
 * through SQLite costs tens of ns, so it is read once, only the columns
 * the command wants, and in parallel: the rowid range is split among up to
 * MAX_WORKERS threads, each with its own read-only connection, each
 * grouping into maps of its own (memories, stacks, timings) that are merged
 * afterwards.  Each row becomes a struct model_block of 32 bytes; the maps
 * stay as small as the groups.  The rowids read are those of the model's
 * snapshot (its max(id)); a collector still writing may update a row
 * between two threads' reads, which at worst shows a free it just stored.
 *
 * This file is the only reader of allocation rows, and of the heap tables
 * aggregated at ingest (schema 9): a process that has a heap_totals row
 * had its host heap aggregated, and its host memory, the host call sites
 * and the heap timings come from the heap_* tables straight into the same
 * figures; its rows (the blocks it kept: long-lived or never freed) add
 * what only rows have (lifetimes above the collector's row_ns, blocks
 * never freed at the peak).  The definitions are the collector's and
 * these readers' alike (heapagg.h): a block live from alloc_ns to free_ns,
 * the peak after each instant's last event, checkpoints at every
 * point_allocs-th allocation.
 *
 * The peak.  A block is live at T when alloc_ns <= T < free_ns, and the
 * peak of a memory is the highest total weight live at any instant, its
 * time the first instant with that total: the total is taken after each
 * instant's last event, so the order of a free and an allocation at the
 * same instant, or a block freed the instant it was made, changes nothing.
 * It is found without sorting the events (search() below): they are split
 * into time bins in place, and only bins that could reach the highest
 * total seen so far are split further.  A memory whose live bytes stay
 * near their peak all along (heavy churn) costs what an in-place radix
 * sort of its events costs, and one with a clear peak far less.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "model_int.h"
#include "sites.h"
#include "store.h"
#include "wire.h"

#define MAX_WORKERS 4
#define PARALLEL_ROWS 200000 /* fewer rows are read by one thread */
#define NO_FREE INT64_MAX

/* Memory codes in map keys; other spaces are OTHER_BASE + their name's index. */
#define OTHER_BASE 16

struct event {
	int64_t t;
	double w; /* negative for a free */
};

/* A distribution's buckets (model_hist). */
struct buckets {
	double count[MODEL_HIST_BUCKETS], bytes[MODEL_HIST_BUCKETS];
};

struct mem_item {
	struct map_key key; /* proc, space code, device */
	struct model_mem mem;
	char label[48];
	int64_t nfreed; /* blocks freed */
	const struct agg_proc *agg; /* its aggregated heap, or NULL */
	struct buckets sizes; /* its rows' (MODEL_WANT_SIZES) */
};

/* A process whose host heap was aggregated at ingest: heap_totals, and its
 * checkpoints (heap_points, heap_steps). */
struct agg_proc {
	int64_t proc_id;
	double allocs, alloc_bytes, frees, freed_bytes, live_count, live_bytes;
	double peak_bytes, peak_count;
	int64_t peak_ns, short_ns, row_ns, late;
	int64_t *points, *steps; /* ns of checkpoint k at [k - 1]; of step i at [i] */
	size_t npoints, points_cap, nsteps, steps_cap;
};

/* A site's live bytes at checkpoints, run-length coded (heap_series). */
struct rle {
	int64_t *idx;
	double *v;
	size_t n, cap;
};

struct life_bucket {
	int64_t b;
	double count, bytes;
};

/* A host key's figures from heap_sites and its histogram and series. */
struct key_agg {
	double allocs, alloc_bytes, live_count, live_bytes, peak_count, peak_bytes;
	double short_count, short_bytes;
	struct life_bucket *life;
	size_t nlife, life_cap;
	struct rle ser[2]; /* 0: at heap_points, 1: at heap_steps */
};

struct key_item {
	struct map_key key; /* mem index, stack_id, Python stack (-1: native site) */
	struct model_key k;
	int resolved, folded_resolved;
	int64_t site, folded; /* into sites' names and folded (folded_resolved) */
	int native_resolved;
	int64_t native_site;  /* the site by native frames (MODEL_BY_NATIVE) */
	struct key_agg *agg;  /* an aggregated memory's key */
};

/* A process's checkpoints computed from its rows. */
struct points_item {
	struct map_key key; /* proc */
	int64_t *t;
	size_t n;
};

struct time_item {
	struct map_key key; /* proc, fn, 0 */
	struct stats st;
	long double sum;
};

struct chunk {
	struct model_block *v;
	size_t n, cap;
};

struct model_heap {
	unsigned want;
	struct agg_proc *aggs; /* by proc_id */
	size_t naggs;
	struct map points;     /* points_item */
	struct map mems;   /* mem_item */
	struct map keys;   /* key_item */
	struct map times;  /* time_item */
	struct strtab others; /* names of spaces other than the four */
	struct chunk *chunks;
	size_t nchunks;
	struct model_mem **mem_list;
	size_t nmems;
	struct sites sites;
	int sites_open;
	int times_added;
	int peaks_done; /* computed on the first question that needs them */
	struct model_hist *hist[2]; /* by enum model_hist_kind, when asked */
};

/* ---- the pass ------------------------------------------------------------------- */

/* The aggregated heap of process proc_id, or NULL. */
static const struct agg_proc *agg_of(const struct model_heap *h, int64_t proc_id)
{
	size_t lo = 0, hi = h->naggs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (h->aggs[mid].proc_id < proc_id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < h->naggs && h->aggs[lo].proc_id == proc_id ? &h->aggs[lo] : NULL;
}

/* A worker's own groups: local indexes, remapped when merged. */
struct wmem {
	struct map_key key;
	struct buckets sizes;
};

struct wkey {
	struct map_key key; /* local mem, stack, python */
};

struct worker {
	struct model *m;
	struct model_heap *h;
	const char *sql;
	int64_t lo, hi; /* rowids [lo, hi) */
	int own_db;     /* reads through a connection of its own */
	int err;
	struct chunk out;
	struct map mems, keys, times;
	struct strtab others;
	unsigned char heap_fn[256]; /* fn_id -> heap family */
	unsigned char release_fn[256]; /* fn_id -> a heap function that releases only
					* (free, an arena's unmap) */
	pthread_t thread;
};

static int space_code(struct worker *w, const unsigned char *s, int64_t *code,
		      int64_t *device)
{
	int64_t idx;
	int err;

	if (!s || strcmp((const char *)s, "host") == 0) {
		*code = MODEL_HOST;
		*device = -1;
	} else if (strcmp((const char *)s, "device") == 0) {
		*code = MODEL_DEVICE;
	} else if (strcmp((const char *)s, "managed") == 0) {
		*code = MODEL_MANAGED;
	} else if (strcmp((const char *)s, "pinned") == 0) {
		*code = MODEL_PINNED;
		*device = -1;
	} else {
		err = strtab_index(&w->others, (const char *)s, &idx);
		if (err)
			return err;
		*code = OTHER_BASE + idx;
	}
	return 0;
}

static int block_add(struct chunk *c, const struct model_block *b)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 4096;
		struct model_block *v = realloc(c->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n++] = *b;
	return 0;
}

static int time_add(struct map *times, int64_t proc_id, int64_t fn, int64_t d)
{
	struct map_key k = { proc_id, fn, 0 };
	struct time_item *t = map_get(times, &k);

	if (!t)
		return -ENOMEM;
	stats_add(&t->st, (double)d);
	t->sum += d;
	return 0;
}

/* The bucket of value v: its bit length. */
static unsigned bit_length(uint64_t v)
{
	return v ? 64u - (unsigned)__builtin_clzll(v) : 0;
}

/* Columns: 0 proc_id, 1 space, 2 device, 3 weight, 4 alloc_ns, 5 free_ns,
 * 6 size; with times 7 alloc_fn, 8 alloc duration, 9 free_fn, 10 free
 * duration; then with sites stack_id, python stack. */
static int work_rows(struct worker *w, sqlite3 *db, sqlite3_stmt *st)
{
	unsigned want = w->h->want;
	int sites_col = want & MODEL_WANT_CALLS ? 11 : 7;
	struct map_key last_mem = { -1, -1, -2 }, last_key = { -1, -2, -2 };
	int64_t mem_idx = -1, key_idx = -1;
	int err = 0, r;

	while ((r = store_step(db, st)) > 0) {
		int64_t proc_id = col_i64(st, 0), code, device = col_i64(st, 2);
		const struct model_proc *p = model_selected(w->m, proc_id);
		struct model_block b;
		struct map_key mk, kk;
		int64_t size;

		if (!p)
			continue;
		err = space_code(w, sqlite3_column_text(st, 1), &code, &device);
		if (err)
			break;
		mk = (struct map_key){ proc_id, code, device };
		if (memcmp(&mk, &last_mem, sizeof(mk)) != 0) {
			struct wmem *wm = map_get(&w->mems, &mk);

			if (!wm) {
				err = -ENOMEM;
				break;
			}
			mem_idx = wm - (struct wmem *)w->mems.items;
			last_mem = mk;
		}
		b.weight = sqlite3_column_double(st, 3);
		b.alloc_ns = col_i64(st, 4);
		b.free_ns = col_i64(st, 5);
		if (b.free_ns == 0 && sqlite3_column_type(st, 5) == SQLITE_NULL)
			b.free_ns = NO_FREE;
		size = col_i64(st, 6);
		b.count = size > 0 ? (float)(b.weight / (double)size) : 1.0f;
		if (want & MODEL_WANT_SIZES) {
			struct wmem *wm = map_item(&w->mems, (size_t)mem_idx);
			unsigned sb = bit_length(size > 0 ? (uint64_t)size : 0);

			wm->sizes.count[sb] += size > 0 ? b.weight / (double)size : 1.0;
			wm->sizes.bytes[sb] += b.weight;
		}
		if (want & MODEL_WANT_CALLS) {
			/* Times are never 0: 0 is NULL, an untimed call. */
			int64_t fn = col_i64(st, 7), end = col_i64(st, 8);
			int64_t ffn = col_i64(st, 9), fend = col_i64(st, 10);
			int64_t d = end ? end - b.alloc_ns : -1;
			int64_t fd = fend && b.free_ns != NO_FREE ? fend - b.free_ns : -1;

			/* CUDA allocations are timed from cuda_calls instead;
			 * the realloc family on its allocation side only; an
			 * aggregated heap's calls from heap_calls. */
			if (code == MODEL_HOST && agg_of(w->h, proc_id))
				d = fd = -1;
			if (d >= 0 && fn >= 0 && fn < 256 && w->heap_fn[fn])
				err = time_add(&w->times, proc_id, fn, d);
			if (!err && fd >= 0 && ffn >= 0 && ffn < 256 && w->release_fn[ffn])
				err = time_add(&w->times, proc_id, ffn, fd);
			if (err)
				break;
		}
		kk = (struct map_key){ mem_idx, -1, -1 };
		if (want & MODEL_WANT_SITES) {
			/* Stack ids start at 1: 0 is NULL, no stack. */
			int64_t stack = col_i64(st, sites_col), py = col_i64(st, sites_col + 1);

			if (py == 0)
				py = -1;
			kk.a = stack ? stack : -1;
			/* Memory allocated with Python frames is the
			 * user's Python line's (sites.h). */
			kk.b = py;
		}
		if (memcmp(&kk, &last_key, sizeof(kk)) != 0) {
			struct wkey *wk = map_get(&w->keys, &kk);

			if (!wk) {
				err = -ENOMEM;
				break;
			}
			key_idx = wk - (struct wkey *)w->keys.items;
			last_key = kk;
		}
		b.key = (uint32_t)key_idx;
		err = block_add(&w->out, &b);
		if (err)
			break;
	}
	if (!err && r < 0)
		err = r;
	return err;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	sqlite3 *db = w->m->db;
	sqlite3_stmt *st = NULL;
	int own = 0;

	if (w->own_db) {
		/* A connection of its own: SQLite serialises one connection. */
		if (store_connect(w->m->path, &db) != SQLITE_OK) {
			cli_error("cannot open the store again: %s", sqlite3_errmsg(db));
			sqlite3_close(db);
			w->err = -EIO;
			return NULL;
		}
		own = 1;
		sqlite3_busy_timeout(db, 10000);
		/* Mapped, not copied through read(): a tenth of the pass. */
		sqlite3_exec(db, "PRAGMA mmap_size = 1099511627776", NULL, NULL, NULL);
	}
	/* A range of rowids holds at most that many rows: no growing. */
	if (w->hi - w->lo < (1ll << 32)) {
		w->out.cap = (size_t)(w->hi - w->lo);
		w->out.v = malloc((w->out.cap + 1) * sizeof(*w->out.v));
		if (!w->out.v)
			w->out.cap = 0;
	}
	w->err = store_prepare(db, w->sql, &st);
	if (!w->err) {
		sqlite3_bind_int64(st, 1, w->lo);
		sqlite3_bind_int64(st, 2, w->hi);
		w->err = work_rows(w, db, st);
	}
	sqlite3_finalize(st);
	if (own)
		sqlite3_close(db);
	return NULL;
}

static void worker_free(struct worker *w)
{
	free(w->out.v);
	map_free(&w->mems);
	map_free(&w->keys);
	map_free(&w->times);
	strtab_free(&w->others);
}

static const char *space_label(int64_t code, int64_t device, const struct strtab *others,
			       char *buf, size_t len)
{
	switch (code) {
	case MODEL_HOST:
		return "host";
	case MODEL_DEVICE:
		snprintf(buf, len, "cuda:%lld", (long long)device);
		return buf;
	case MODEL_MANAGED:
		snprintf(buf, len, "managed:%lld", (long long)device);
		return buf;
	case MODEL_PINNED:
		return "pinned";
	default:
		snprintf(buf, len, "%.40s", others->v[code - OTHER_BASE]);
		return buf;
	}
}

/* Fold worker w's groups into h's and renumber its blocks' keys. */
static int merge(struct model *m, struct model_heap *h, struct worker *w)
{
	int64_t *mem_map = calloc(w->mems.n + 1, sizeof(*mem_map));
	uint32_t *key_map = calloc(w->keys.n + 1, sizeof(*key_map));
	int err = 0;

	if (!mem_map || !key_map) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < w->mems.n; i++) {
		struct wmem *wm = map_item(&w->mems, i);
		struct map_key k = wm->key;
		struct mem_item *mi;
		char buf[48];
		const char *label;

		if (k.a >= OTHER_BASE) {
			int64_t idx;

			err = strtab_index(&h->others, w->others.v[k.a - OTHER_BASE], &idx);
			if (err)
				goto out;
			k.a = OTHER_BASE + idx;
		}
		mi = map_get(&h->mems, &k);
		if (!mi) {
			err = -ENOMEM;
			goto out;
		}
		mem_map[i] = mi - (struct mem_item *)h->mems.items;
		for (unsigned b = 0; b < MODEL_HIST_BUCKETS; b++) {
			mi->sizes.count[b] += wm->sizes.count[b];
			mi->sizes.bytes[b] += wm->sizes.bytes[b];
		}
		if (!mi->mem.proc) {
			label = space_label(k.a, k.b, &h->others, buf, sizeof(buf));
			snprintf(mi->label, sizeof(mi->label), "%s", label);
			mi->mem.proc = model_proc_by_id(m, k.proc_id);
			mi->mem.space = k.a >= OTHER_BASE ? MODEL_OTHER : (enum model_space)k.a;
			mi->mem.device = k.b;
			mi->mem.estimated = mi->mem.space == MODEL_HOST &&
					    mi->mem.proc->mode == MODEL_MALLOC_SAMPLE;
		}
	}
	for (size_t i = 0; i < w->keys.n; i++) {
		struct wkey *wk = map_item(&w->keys, i);
		struct map_key k = { mem_map[wk->key.proc_id], wk->key.a, wk->key.b };
		struct key_item *ki = map_get(&h->keys, &k);

		if (!ki) {
			err = -ENOMEM;
			goto out;
		}
		key_map[i] = (uint32_t)(ki - (struct key_item *)h->keys.items);
		ki->k.stack_id = k.a;
		ki->k.pystack_id = k.b;
	}
	for (size_t i = 0; i < w->times.n; i++) {
		struct time_item *t = map_item(&w->times, i), *g = map_get(&h->times, &t->key);

		if (!g) {
			err = -ENOMEM;
			goto out;
		}
		stats_merge(&g->st, &t->st);
		g->sum += t->sum;
	}
	for (size_t i = 0; i < w->out.n; i++)
		w->out.v[i].key = key_map[w->out.v[i].key];
out:
	free(mem_map);
	free(key_map);
	return err;
}

static int scan(struct model *m, struct model_heap *h)
{
	struct worker w[MAX_WORKERS];
	sqlite3_stmt *st = NULL;
	int64_t lo = 0, hi = 0;
	size_t nw = 1;
	char *sql = NULL;
	int err, started = 0;

	memset(w, 0, sizeof(w));
	err = model_prepare(m, "SELECT min(id), max(id) FROM allocations", &st);
	if (!err && (err = store_step(m->db, st)) > 0) {
		lo = col_i64(st, 0);
		hi = col_i64(st, 1) + 1;
		err = 0;
	}
	sqlite3_finalize(st);
	if (err)
		return err;
	if (hi <= lo || m->nselected == 0)
		return 0;
	/* size only makes counts of sampled rows (call sites). */
	sql = sqlite3_mprintf(
		"SELECT proc_id, space, device, weight, alloc_ns, free_ns, %s%s%s"
		" FROM allocations WHERE id >= ?1 AND id < ?2",
		h->want & (MODEL_WANT_SITES | MODEL_WANT_SIZES) ? "size" : "0",
		h->want & MODEL_WANT_CALLS ? ", alloc_fn, alloc_end_ns, free_fn, free_end_ns" : "",
		!(h->want & MODEL_WANT_SITES) ? "" : m->version >= 3 ? ", stack_id, pystack_id"
								   : ", NULL, NULL");
	if (!sql)
		return -ENOMEM;
	if (m->path && hi - lo >= PARALLEL_ROWS)
		nw = store_readers(MAX_WORKERS);
	for (size_t i = 0; i < nw; i++) {
		w[i].m = m;
		w[i].h = h;
		w[i].sql = sql;
		w[i].mems.item_size = sizeof(struct wmem);
		w[i].keys.item_size = sizeof(struct wkey);
		w[i].times.item_size = sizeof(struct time_item);
		for (size_t f = 0; f < m->nfns; f++) {
			if (m->fns[f].fn_id >= 0 && m->fns[f].fn_id < 256)
				w[i].heap_fn[m->fns[f].fn_id] = (unsigned char)m->fns[f].heap;
			if (m->fns[f].fn_id >= 0 && m->fns[f].fn_id < 256)
				w[i].release_fn[m->fns[f].fn_id] =
					m->fns[f].heap && (m->fns[f].flags & (SHM_FNF_ALLOC |
									   SHM_FNF_FREE)) ==
								  SHM_FNF_FREE;
		}
		w[i].lo = lo + (hi - lo) * (int64_t)i / (int64_t)nw;
		w[i].hi = lo + (hi - lo) * (int64_t)(i + 1) / (int64_t)nw;
		w[i].own_db = nw > 1;
	}
	if (nw == 1) {
		work(&w[0]);
	} else {
		for (; (size_t)started < nw; started++)
			if (pthread_create(&w[started].thread, NULL, work, &w[started]) != 0)
				break;
		for (int i = 0; i < started; i++)
			pthread_join(w[i].thread, NULL);
		/* No thread: read what is left here. */
		for (size_t i = (size_t)started; i < nw; i++)
			work(&w[i]);
	}
	sqlite3_free(sql);
	for (size_t i = 0; i < nw && !err; i++)
		err = w[i].err;
	h->chunks = calloc(nw, sizeof(*h->chunks));
	if (!err && !h->chunks)
		err = -ENOMEM;
	for (size_t i = 0; i < nw && !err; i++) {
		err = merge(m, h, &w[i]);
		h->chunks[h->nchunks++] = w[i].out;
		w[i].out = (struct chunk){ 0 };
	}
	for (size_t i = 0; i < nw; i++)
		worker_free(&w[i]);
	return err;
}

/* ---- the aggregated heap ------------------------------------------------------------- */

/* Whether the store has the aggregated heap's tables and they are to be
 * read (SHIMMER_MODEL_HEAP=rows: the rows alone, for tests). */
static int agg_tables(struct model *m)
{
	const char *e = getenv("SHIMMER_MODEL_HEAP");
	sqlite3_stmt *st = NULL;
	int has = 0;

	if (e && strcmp(e, "rows") == 0)
		return 0;
	if (model_prepare(m, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND"
			     " name = 'heap_totals'", &st) == 0 &&
	    store_step(m->db, st) > 0)
		has = col_i64(st, 0) > 0;
	sqlite3_finalize(st);
	return has;
}

static int grow_i64(int64_t **v, size_t *cap, size_t n)
{
	return array_grow(v, cap, n, sizeof(**v));
}

/* The processes with an aggregated heap, and their checkpoints (before the
 * pass: it leaves their heap timings to heap_calls). */
static int agg_totals_load(struct model *m, struct model_heap *h)
{
	sqlite3_stmt *st = NULL;
	size_t cap = 0;
	int err, r;

	if (!agg_tables(m))
		return 0;
	err = model_prepare(m, "SELECT proc_id, allocs, alloc_bytes, frees, freed_bytes, live_count,"
			    " live_bytes, peak_bytes, peak_count, coalesce(peak_ns, -1), short_ns,"
			    " row_ns, late_events FROM heap_totals ORDER BY proc_id", &st);
	while (!err && (r = store_step(m->db, st)) > 0) {
		struct agg_proc *a;

		if (!model_selected(m, col_i64(st, 0)))
			continue;
		err = array_grow(&h->aggs, &cap, h->naggs, sizeof(*h->aggs));
		if (err)
			break;
		a = &h->aggs[h->naggs++];
		*a = (struct agg_proc){
			.proc_id = col_i64(st, 0),
			.allocs = sqlite3_column_double(st, 1),
			.alloc_bytes = sqlite3_column_double(st, 2),
			.frees = sqlite3_column_double(st, 3),
			.freed_bytes = sqlite3_column_double(st, 4),
			.live_count = sqlite3_column_double(st, 5),
			.live_bytes = sqlite3_column_double(st, 6),
			.peak_bytes = sqlite3_column_double(st, 7),
			.peak_count = sqlite3_column_double(st, 8),
			.peak_ns = col_i64(st, 9), .short_ns = col_i64(st, 10),
			.row_ns = col_i64(st, 11), .late = col_i64(st, 12),
		};
	}
	if (!err && r < 0)
		err = r;
	sqlite3_finalize(st);
	st = NULL;
	/* checkpoints, in index order */
	for (int kind = 0; !err && kind < 2; kind++) {
		err = model_prepare(m, kind ? "SELECT proc_id, ns FROM heap_steps ORDER BY proc_id, idx"
					    : "SELECT proc_id, ns FROM heap_points ORDER BY proc_id, idx",
				    &st);
		while (!err && (r = store_step(m->db, st)) > 0) {
			struct agg_proc *a = (struct agg_proc *)agg_of(h, col_i64(st, 0));

			if (!a)
				continue;
			if (kind)
				err = grow_i64(&a->steps, &a->steps_cap, a->nsteps);
			else
				err = grow_i64(&a->points, &a->points_cap, a->npoints);
			if (err)
				break;
			if (kind)
				a->steps[a->nsteps++] = col_i64(st, 1);
			else
				a->points[a->npoints++] = col_i64(st, 1);
		}
		if (!err && r < 0)
			err = r;
		sqlite3_finalize(st);
		st = NULL;
	}
	return err;
}

/* The value from idx on, in a run-length code (0 before its first run). */
static double rle_at(const struct rle *r, int64_t idx)
{
	size_t lo = 0, hi = r->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (r->idx[mid] <= idx)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? r->v[lo - 1] : 0;
}

/* dst += src, both run-length coded. */
static int rle_add(struct rle *dst, const struct rle *src)
{
	struct rle o = { 0 };
	size_t i = 0, j = 0;
	int err = 0;

	while (!err && (i < dst->n || j < src->n)) {
		int64_t k = j >= src->n || (i < dst->n && dst->idx[i] <= src->idx[j]) ? dst->idx[i]
										      : src->idx[j];

		while (i < dst->n && dst->idx[i] == k)
			i++;
		while (j < src->n && src->idx[j] == k)
			j++;
		err = grow_i64(&o.idx, &o.cap, o.n);
		if (!err) {
			double *v = realloc(o.v, o.cap * sizeof(*v));

			if (!v)
				err = -ENOMEM;
			else
				o.v = v;
		}
		if (!err) {
			o.idx[o.n] = k;
			o.v[o.n++] = rle_at(dst, k) + rle_at(src, k);
		}
	}
	if (err) {
		free(o.idx);
		free(o.v);
		return err;
	}
	free(dst->idx);
	free(dst->v);
	*dst = o;
	return 0;
}

/* The host key of (proc's host memory, native stack, Python stack), made
 * if new; ids as the store has them (0: none). */
static struct key_item *agg_key(struct model *m, struct model_heap *h, int64_t proc_id,
				int64_t stack_id, int64_t pystack_id)
{
	struct map_key mk = { proc_id, MODEL_HOST, -1 }, kk;
	struct mem_item *mi = map_get(&h->mems, &mk);
	struct key_item *ki;

	if (!mi)
		return NULL;
	if (!mi->mem.proc) {
		snprintf(mi->label, sizeof(mi->label), "host");
		mi->mem.proc = model_proc_by_id(m, proc_id);
		mi->mem.space = MODEL_HOST;
		mi->mem.device = -1;
	}
	mi->agg = agg_of(h, proc_id);
	kk = (struct map_key){ (int64_t)(mi - (struct mem_item *)h->mems.items),
			       stack_id ? stack_id : -1, pystack_id ? pystack_id : -1 };
	ki = map_get(&h->keys, &kk);
	if (!ki)
		return NULL;
	ki->k.stack_id = kk.a;
	ki->k.pystack_id = kk.b;
	if (!ki->agg && !(ki->agg = calloc(1, sizeof(*ki->agg))))
		return NULL;
	return ki;
}

/* The aggregated processes' host memories, call sites, histograms, series
 * and timings (after the pass). */
static int agg_sites_load(struct model *m, struct model_heap *h)
{
	sqlite3_stmt *st = NULL;
	struct rle run = { 0 };
	int64_t run_key[4] = { -1, -1, -1, -1 }; /* proc, stack, python, kind */
	int err = 0, r = 0;

	if (!h->naggs)
		return 0;
	/* A heap that allocated nothing is no memory, as for the rows (a
	 * collector before this one wrote it a peak of 0 B at some instant). */
	for (size_t i = 0; i < h->naggs && !err; i++)
		if (h->aggs[i].allocs > 0 && !agg_key(m, h, h->aggs[i].proc_id, 0, 0))
			err = -ENOMEM;
	/* the rows: keys of every site */
	if (!err)
		err = model_prepare(m, "SELECT proc_id, stack_id, allocs, alloc_bytes, live_count,"
				    " live_bytes, peak_count, peak_bytes, short_count, short_bytes,"
				    " pystack_id FROM heap_sites", &st);
	while (!err && (r = store_step(m->db, st)) > 0) {
		struct key_item *ki;

		if (!agg_of(h, col_i64(st, 0)))
			continue;
		ki = agg_key(m, h, col_i64(st, 0), col_i64(st, 1), col_i64(st, 10));
		if (!ki) {
			err = -ENOMEM;
			break;
		}
		ki->agg->allocs += sqlite3_column_double(st, 2);
		ki->agg->alloc_bytes += sqlite3_column_double(st, 3);
		ki->agg->live_count += sqlite3_column_double(st, 4);
		ki->agg->live_bytes += sqlite3_column_double(st, 5);
		ki->agg->peak_count += sqlite3_column_double(st, 6);
		ki->agg->peak_bytes += sqlite3_column_double(st, 7);
		ki->agg->short_count += sqlite3_column_double(st, 8);
		ki->agg->short_bytes += sqlite3_column_double(st, 9);
	}
	if (!err && r < 0)
		err = r;
	sqlite3_finalize(st);
	st = NULL;
	/* lifetimes of the blocks freed within row_ns */
	if (!err)
		err = model_prepare(m, "SELECT proc_id, stack_id, bucket, sum(count), sum(bytes),"
				    " pystack_id FROM heap_histograms WHERE kind = 'life'"
				    " GROUP BY proc_id, stack_id, pystack_id, bucket", &st);
	while (!err && (r = store_step(m->db, st)) > 0) {
		struct key_item *ki;
		struct key_agg *a;

		if (!agg_of(h, col_i64(st, 0)))
			continue;
		ki = agg_key(m, h, col_i64(st, 0), col_i64(st, 1), col_i64(st, 5));
		if (!ki) {
			err = -ENOMEM;
			break;
		}
		a = ki->agg;
		err = array_grow(&a->life, &a->life_cap, a->nlife, sizeof(*a->life));
		if (!err)
			a->life[a->nlife++] = (struct life_bucket){ col_i64(st, 2),
								    sqlite3_column_double(st, 3),
								    sqlite3_column_double(st, 4) };
	}
	if (!err && r < 0)
		err = r;
	sqlite3_finalize(st);
	st = NULL;
	/* each site's live bytes at the checkpoints: runs of one (stack,
	 * Python stack, kind) are summed into their key's */
	if (!err)
		err = model_prepare(m, "SELECT proc_id, stack_id, pystack_id, kind = 'step', idx, bytes"
				    " FROM heap_series ORDER BY proc_id, stack_id, pystack_id, kind, idx",
				    &st);
	for (;;) {
		int64_t k[4];
		int end;

		r = err ? 0 : store_step(m->db, st);
		if (r < 0)
			err = r;
		end = err || r == 0;
		if (!end)
			for (int c = 0; c < 4; c++)
				k[c] = col_i64(st, c);
		if (run.n && (end || memcmp(k, run_key, sizeof(k)) != 0)) {
			struct key_item *ki = agg_of(h, run_key[0])
						      ? agg_key(m, h, run_key[0], run_key[1], run_key[2])
						      : NULL;

			if (ki)
				err = rle_add(&ki->agg->ser[run_key[3] ? 1 : 0], &run);
			run.n = 0;
		}
		if (end || err)
			break;
		memcpy(run_key, k, sizeof(k));
		err = grow_i64(&run.idx, &run.cap, run.n);
		if (!err) {
			double *v = realloc(run.v, run.cap * sizeof(*v));

			if (!v)
				err = -ENOMEM;
			else
				run.v = v;
		}
		if (!err) {
			run.idx[run.n] = col_i64(st, 4);
			run.v[run.n++] = sqlite3_column_double(st, 5);
		}
	}
	free(run.idx);
	free(run.v);
	sqlite3_finalize(st);
	st = NULL;
	/* the timed calls: the row path's rules (the release side of the
	 * calls that release only: free, an arena's unmap) */
	if (!err && (h->want & MODEL_WANT_CALLS))
		err = model_prepare(m, "SELECT c.proc_id, c.fn_id, c.timed, c.total_ns, c.m2,"
				    " c.min_ns, c.max_ns, c.side = 'alloc' FROM heap_calls c", &st);
	while (!err && st && (r = store_step(m->db, st)) > 0) {
		struct map_key tk = { col_i64(st, 0), col_i64(st, 1), 0 };
		const struct model_fn *fn = model_fn(m, tk.a);
		struct time_item *t;
		struct stats one;
		double n = sqlite3_column_double(st, 2);

		if (!agg_of(h, tk.proc_id) || n <= 0 ||
		    (!col_i64(st, 7) && (!fn || !fn->heap ||
					 (fn->flags & (SHM_FNF_ALLOC | SHM_FNF_FREE)) != SHM_FNF_FREE)))
			continue;
		t = map_get(&h->times, &tk);
		if (!t) {
			err = -ENOMEM;
			break;
		}
		one = (struct stats){
			.n = (uint64_t)n, .mean = sqlite3_column_double(st, 3) / n,
			.m2 = sqlite3_column_double(st, 4), .min = sqlite3_column_double(st, 5),
			.max = sqlite3_column_double(st, 6),
		};
		stats_merge(&t->st, &one);
		t->sum += (long double)col_i64(st, 3);
	}
	if (!err && r < 0)
		err = r;
	sqlite3_finalize(st);
	return err;
}

static void key_agg_free(struct key_agg *a)
{
	if (!a)
		return;
	free(a->life);
	for (int k = 0; k < 2; k++) {
		free(a->ser[k].idx);
		free(a->ser[k].v);
	}
	free(a);
}

/* ---- memories and the peak -------------------------------------------------------------- */

static struct mem_item *mem_of(struct model_heap *h, uint32_t key)
{
	const struct key_item *k = map_item(&h->keys, key);

	return map_item(&h->mems, (size_t)k->key.proc_id);
}

/*
 * The search.  ev[0..n) are the events of one memory with times in
 * [lo, hi], live bytes `start` before lo.  They are partitioned in place
 * into SEARCH_BINS time bins (an American flag sort pass); the live bytes
 * after each bin's last instant are exact, so the best of them bounds the
 * peak from below (s->bound), and a bin whose start plus the bytes it
 * allocates stays under the bound cannot hold the peak and is skipped.
 * The others are searched the same way, in time order, down to bins of a
 * few events, which are sorted and replayed; the replay takes the total
 * after each instant's last event.  With pruning off (a timeline), every
 * bin is visited and each instant handed to visit().
 */
#define SEARCH_BINS 256
#define SEARCH_LEAF 32

struct search {
	double bound;        /* a value the live bytes reach */
	double best;         /* the highest found by a replay */
	int64_t best_t;      /* its first instant */
	int found;
	int prune;
	int (*visit)(void *ctx, int64_t t, double live);
	void *ctx;
	int err;
};

static void leaf(struct search *s, struct event *ev, size_t n, double cur)
{
	/* Insertion sort: leaves are small, or one instant. */
	for (size_t i = 1; i < n; i++) {
		struct event x = ev[i];
		size_t j = i;

		for (; j > 0 && ev[j - 1].t > x.t; j--)
			ev[j] = ev[j - 1];
		ev[j] = x;
	}
	for (size_t e = 0; e < n && !s->err;) {
		int64_t t = ev[e].t;

		for (; e < n && ev[e].t == t; e++)
			cur += ev[e].w;
		if (!s->found || cur > s->best) {
			s->best = cur;
			s->best_t = t;
			s->found = 1;
		}
		if (cur > s->bound)
			s->bound = cur;
		if (s->visit)
			s->err = s->visit(s->ctx, t, cur);
	}
}

static void search(struct search *s, struct event *ev, size_t n, int64_t lo, int64_t hi,
		   double start)
{
	size_t count[SEARCH_BINS], next[SEARCH_BINS], end[SEARCH_BINS];
	double net[SEARCH_BINS], added[SEARCH_BINS], cur;
	uint64_t width;

	if (n == 0 || s->err)
		return;
	/* A few events, or one instant (which the sort leaves as it is). */
	if (n <= SEARCH_LEAF || lo == hi) {
		leaf(s, ev, n, start);
		return;
	}
	width = ((uint64_t)hi - (uint64_t)lo) / SEARCH_BINS + 1;
	memset(count, 0, sizeof(count));
	memset(net, 0, sizeof(net));
	memset(added, 0, sizeof(added));
	for (size_t i = 0; i < n; i++) {
		size_t b = (size_t)(((uint64_t)ev[i].t - (uint64_t)lo) / width);

		count[b]++;
		net[b] += ev[i].w;
		if (ev[i].w > 0)
			added[b] += ev[i].w;
	}
	/* The exact values after each bin. */
	cur = start;
	for (size_t b = 0, at = 0; b < SEARCH_BINS; b++) {
		next[b] = at;
		at += count[b];
		end[b] = at;
		cur += net[b];
		if (count[b] && cur > s->bound)
			s->bound = cur;
	}
	/* In place: swap each event into its bin. */
	for (size_t b = 0; b < SEARCH_BINS; b++) {
		while (next[b] < end[b]) {
			struct event x = ev[next[b]];
			size_t d = (size_t)(((uint64_t)x.t - (uint64_t)lo) / width);

			while (d != b) {
				struct event y = ev[next[d]];

				ev[next[d]++] = x;
				x = y;
				d = (size_t)(((uint64_t)x.t - (uint64_t)lo) / width);
			}
			ev[next[b]++] = x;
		}
	}
	cur = start;
	for (size_t b = 0; b < SEARCH_BINS && !s->err; b++) {
		size_t first = end[b] - count[b];
		int64_t blo = lo + (int64_t)(width * b);
		int64_t bhi = blo + (int64_t)width - 1;

		if (bhi > hi)
			bhi = hi;
		if (count[b] && (!s->prune || cur + added[b] >= s->bound))
			search(s, ev + first, count[b], blo, bhi, cur);
		cur += net[b];
	}
}

/* The events (an allocation, a free) of mem's blocks, into *out. */
static int mem_event_list(struct model_heap *h, const struct model_mem *mem, struct event **out,
			  size_t *n, int64_t *lo, int64_t *hi)
{
	size_t cap = mem->rows * 2 + 1, k = 0;
	struct event *ev = malloc(cap * sizeof(*ev));

	*out = NULL;
	if (!ev)
		return -ENOMEM;
	*lo = INT64_MAX;
	*hi = INT64_MIN;
	for (size_t c = 0; c < h->nchunks; c++) {
		const struct chunk *ch = &h->chunks[c];

		for (size_t i = 0; i < ch->n; i++) {
			const struct model_block *b = &ch->v[i];

			if (&mem_of(h, b->key)->mem != mem)
				continue;
			ev[k++] = (struct event){ b->alloc_ns, b->weight };
			if (b->alloc_ns < *lo)
				*lo = b->alloc_ns;
			if (b->alloc_ns > *hi)
				*hi = b->alloc_ns;
			if (b->free_ns == NO_FREE)
				continue;
			ev[k++] = (struct event){ b->free_ns, -b->weight };
			if (b->free_ns > *hi)
				*hi = b->free_ns;
		}
	}
	*out = ev;
	*n = k;
	return 0;
}

static int peaks(struct model_heap *h)
{
	struct event *all = NULL;
	size_t *at = NULL, total = 0;

	/* Every memory's events, in one array of runs, filled in one pass. */
	at = calloc(h->mems.n + 1, sizeof(*at));
	if (!at)
		return -ENOMEM;
	for (size_t i = 0; i < h->mems.n; i++) {
		const struct mem_item *mi = map_item(&h->mems, i);

		at[i] = total;
		if (!mi->agg)
			total += mi->mem.rows + (size_t)mi->nfreed;
	}
	at[h->mems.n] = total;
	all = malloc((total + 1) * sizeof(*all));
	if (!all) {
		free(at);
		return -ENOMEM;
	}
	for (size_t c = 0; c < h->nchunks; c++) {
		const struct chunk *ch = &h->chunks[c];

		for (size_t i = 0; i < ch->n; i++) {
			const struct model_block *b = &ch->v[i];
			size_t mi = (size_t)((const struct key_item *)map_item(&h->keys, b->key))->key.proc_id;

			if (((const struct mem_item *)map_item(&h->mems, mi))->agg)
				continue;
			all[at[mi]++] = (struct event){ b->alloc_ns, b->weight };
			if (b->free_ns != NO_FREE)
				all[at[mi]++] = (struct event){ b->free_ns, -b->weight };
		}
	}
	for (size_t i = 0, first = 0; i < h->mems.n; i++) {
		struct mem_item *mi = map_item(&h->mems, i);
		struct search s = { .prune = 1 };
		size_t n = at[i] - first;
		int64_t lo = INT64_MAX, hi = INT64_MIN;

		if (mi->agg) {
			first = at[i];
			continue; /* the collector's peak, set at load */
		}
		for (size_t k = first; k < at[i]; k++) {
			if (all[k].t < lo)
				lo = all[k].t;
			if (all[k].t > hi)
				hi = all[k].t;
		}
		search(&s, all + first, n, lo, hi, 0);
		mi->mem.peak = s.found ? s.best : 0;
		mi->mem.peak_ns = s.found ? s.best_t : mi->mem.proc->start_ns;
		first = at[i];
	}
	free(all);
	free(at);
	return 0;
}

static int space_rank(enum model_space s)
{
	static const int rank[] = { [MODEL_HOST] = 0, [MODEL_DEVICE] = 1, [MODEL_MANAGED] = 2,
				    [MODEL_PINNED] = 3, [MODEL_OTHER] = 4 };

	return rank[s];
}

static int cmp_mem(const void *x, const void *y)
{
	const struct model_mem *a = *(struct model_mem *const *)x;
	const struct model_mem *b = *(struct model_mem *const *)y;

	if (a->proc != b->proc)
		return a->proc->index < b->proc->index ? -1 : 1;
	if (a->space != b->space)
		return space_rank(a->space) - space_rank(b->space);
	if (a->device != b->device)
		return a->device < b->device ? -1 : 1;
	return strcmp(a->label, b->label);
}

static int load(struct model *m)
{
	struct model_heap *h = calloc(1, sizeof(*h));
	int err;

	if (!h)
		return -ENOMEM;
	h->want = m->want;
	h->mems.item_size = sizeof(struct mem_item);
	h->keys.item_size = sizeof(struct key_item);
	h->times.item_size = sizeof(struct time_item);
	h->points.item_size = sizeof(struct points_item);
	m->heap = h;
	err = agg_totals_load(m, h);
	if (!err)
		err = scan(m, h);
	if (!err)
		err = agg_sites_load(m, h);
	if (err)
		return err;
	/* Pointers into the maps are final now. */
	for (size_t i = 0; i < h->mems.n; i++) {
		struct mem_item *mi = map_item(&h->mems, i);

		mi->mem.label = mi->label;
	}
	for (size_t i = 0; i < h->keys.n; i++) {
		struct key_item *ki = map_item(&h->keys, i);

		ki->k.mem = &((struct mem_item *)map_item(&h->mems, (size_t)ki->key.proc_id))->mem;
	}
	for (size_t c = 0; c < h->nchunks; c++) {
		const struct chunk *ch = &h->chunks[c];

		for (size_t i = 0; i < ch->n; i++) {
			const struct model_block *b = &ch->v[i];
			struct model_mem *mm = &mem_of(h, b->key)->mem;

			if (mem_of(h, b->key)->agg)
				continue; /* its figures are heap_totals' */
			mm->rows++;
			mm->allocated += b->weight;
			mm->blocks += b->count;
			if (b->free_ns == NO_FREE) {
				mm->live_end += b->weight;
			} else {
				mm->freed += b->weight;
				mem_of(h, b->key)->nfreed++;
			}
		}
	}
	/* An aggregated memory's figures are the collector's (peaks() leaves
	 * them alone). */
	for (size_t i = 0; i < h->mems.n; i++) {
		struct mem_item *mi = map_item(&h->mems, i);
		const struct agg_proc *a = mi->agg;

		if (!a)
			continue;
		mi->mem.aggregated = 1;
		mi->mem.late = a->late;
		mi->mem.rows = (size_t)a->allocs;
		mi->mem.allocated = a->alloc_bytes;
		mi->mem.blocks = a->allocs;
		mi->mem.freed = a->freed_bytes;
		mi->mem.live_end = a->live_bytes;
		mi->mem.peak = a->peak_bytes;
		mi->mem.peak_ns = a->peak_ns >= 0 ? a->peak_ns : mi->mem.proc->start_ns;
		mi->nfreed = (int64_t)a->frees;
	}
	h->mem_list = calloc(h->mems.n + 1, sizeof(*h->mem_list));
	if (!h->mem_list)
		return -ENOMEM;
	for (size_t i = 0; i < h->mems.n; i++)
		h->mem_list[h->nmems++] = &((struct mem_item *)map_item(&h->mems, i))->mem;
	qsort(h->mem_list, h->nmems, sizeof(*h->mem_list), cmp_mem);
	for (size_t i = 0; i < h->nmems; i++)
		h->mem_list[i]->index = i;
	return 0;
}

void model_heap_free(struct model_heap *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < h->keys.n; i++)
		key_agg_free(((struct key_item *)map_item(&h->keys, i))->agg);
	for (size_t i = 0; i < h->naggs; i++) {
		free(h->aggs[i].points);
		free(h->aggs[i].steps);
	}
	free(h->aggs);
	for (size_t i = 0; i < h->points.n; i++)
		free(((struct points_item *)map_item(&h->points, i))->t);
	map_free(&h->points);
	map_free(&h->mems);
	map_free(&h->keys);
	map_free(&h->times);
	strtab_free(&h->others);
	for (size_t i = 0; i < h->nchunks; i++)
		free(h->chunks[i].v);
	free(h->chunks);
	free(h->mem_list);
	free(h->hist[0]);
	free(h->hist[1]);
	if (h->sites_open)
		sites_close(&h->sites);
	free(h);
}

/* The heap, read with at least the figures of want. */
static int heap(struct model *m, unsigned want)
{
	m->want |= want;
	if (m->heap && (m->heap->want & want) == want)
		return 0;
	/* Asked for more than was read: read again (a command that says
	 * what it wants with model_want never gets here twice). */
	model_heap_free(m->heap);
	m->heap = NULL;
	return load(m);
}

void model_want(struct model *m, unsigned what)
{
	m->want |= what;
}

/* The heap, with its memories' peaks. */
static int heap_peaks(struct model *m, unsigned want)
{
	int err = heap(m, want);

	if (!err && !m->heap->peaks_done) {
		err = peaks(m->heap);
		m->heap->peaks_done = !err;
	}
	return err;
}

int model_memories(struct model *m, struct model_mem *const **v, size_t *n)
{
	int err = heap_peaks(m, 0);

	*v = err ? NULL : m->heap->mem_list;
	*n = err ? 0 : m->heap->nmems;
	return err;
}

int model_heap_add_times(struct model *m)
{
	int err = heap(m, MODEL_WANT_CALLS);

	if (err || m->heap->times_added)
		return err;
	m->heap->times_added = 1;
	for (size_t i = 0; i < m->heap->times.n && !err; i++) {
		const struct time_item *t = map_item(&m->heap->times, i);

		err = model_calls_add(m, t->key.proc_id, t->key.a, &t->st, t->sum);
	}
	return err;
}

const struct model_key *model_key(const struct model *m, uint32_t key)
{
	if (!m->heap || key >= m->heap->keys.n)
		return NULL;
	return &((const struct key_item *)map_item(&m->heap->keys, key))->k;
}

int model_blocks_each(struct model *m, int (*cb)(void *ctx, const struct model_block *b),
		      void *ctx)
{
	int err = heap(m, 0);

	for (size_t c = 0; !err && c < m->heap->nchunks; c++)
		for (size_t i = 0; !err && i < m->heap->chunks[c].n; i++)
			err = cb(ctx, &m->heap->chunks[c].v[i]);
	return err;
}

/* ---- call sites and groups ------------------------------------------------------------- */

/* The sites of the model, opened once. */
static int sites_ready(struct model *m)
{
	struct model_heap *h = m->heap;
	int err;

	if (h->sites_open)
		return 0;
	err = sites_open(&h->sites, m->db);
	if (!err && m->peer)
		err = sites_add_paths(&h->sites, m->peer);
	if (err) {
		sites_close(&h->sites);
		return err;
	}
	h->sites.callers = m->callers;
	h->sites_open = 1;
	return 0;
}

/* ki's Python stack as its site is named: none for host memory under
 * --native. */
static int64_t key_pystack(const struct model *m, const struct key_item *ki)
{
	return m->native && ki->k.mem->space == MODEL_HOST ? -1 : ki->k.pystack_id;
}

/* ki's site and its folded stack. */
static int resolve_folded(struct model *m, struct key_item *ki)
{
	int err = sites_ready(m);

	if (err || ki->folded_resolved)
		return err;
	err = sites_of(&m->heap->sites, ki->k.mem->proc->proc_id, ki->k.stack_id,
		       key_pystack(m, ki), &ki->site, &ki->folded);
	if (!err)
		ki->resolved = ki->folded_resolved = 1;
	return err;
}

/* ki's site from the frames its name takes alone, native or Python (a
 * framework's stacks are dozens of frames, and only the folded outputs
 * want them all: resolve_folded()). */
static int resolve(struct model *m, struct key_item *ki)
{
	int err = sites_ready(m);

	if (err || ki->resolved)
		return err;
	if (key_pystack(m, ki) >= 0)
		err = sites_python_site(&m->heap->sites, ki->k.mem->proc->proc_id,
					key_pystack(m, ki), &ki->site);
	else
		err = sites_native_site(&m->heap->sites, ki->k.mem->proc->proc_id,
					ki->k.stack_id, &ki->site);
	if (!err)
		ki->resolved = 1;
	return err;
}

/* ki's site by its native frames alone (its own site when it has no
 * Python stack or is not host memory). */
static int resolve_native(struct model *m, struct key_item *ki)
{
	int err = resolve(m, ki);

	if (err || ki->native_resolved)
		return err;
	if (ki->k.pystack_id < 0 || ki->k.mem->space != MODEL_HOST)
		ki->native_site = ki->site;
	else if ((err = sites_native_site(&m->heap->sites, ki->k.mem->proc->proc_id,
					  ki->k.stack_id, &ki->native_site)) != 0)
		return err;
	ki->native_resolved = 1;
	return 0;
}

void model_set_callers(struct model *m, int n)
{
	m->callers = n > 0 ? n : 0;
}

void model_set_native(struct model *m, int on)
{
	m->native = !!on;
}

void model_share_names(struct model *a, struct model *b)
{
	a->peer = b->db;
	b->peer = a->db;
}

int model_key_site(struct model *m, uint32_t key, const char **site, const char **folded)
{
	struct key_item *ki;
	int err = heap(m, MODEL_WANT_SITES);

	if (err)
		return err;
	if (key >= m->heap->keys.n)
		return -EINVAL;
	ki = map_item(&m->heap->keys, key);
	err = resolve_folded(m, ki);
	if (err)
		return err;
	*site = m->heap->sites.names.v[ki->site];
	*folded = m->heap->sites.folded.v[ki->folded];
	return 0;
}

struct group_item {
	struct map_key key; /* mem index, name index, 0 */
	uint32_t group;
};

static int cmp_i64(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;

	return (a > b) - (a < b);
}

/* Lifetimes with how many blocks had each: a row's (1), or a histogram
 * bucket's (its midpoint, its count). */
struct life {
	double ns, n;
};

struct life_list {
	struct life *v;
	size_t n, cap;
};

static int cmp_life(const void *x, const void *y)
{
	double a = ((const struct life *)x)->ns, b = ((const struct life *)y)->ns;

	return (a > b) - (a < b);
}

static int life_add(struct life_list *l, double ns, double n)
{
	int err = array_grow(&l->v, &l->cap, l->n, sizeof(*l->v));

	if (!err)
		l->v[l->n++] = (struct life){ ns, n };
	return err;
}

/* The median of the lifetimes (the mean of the two middle ones for an even
 * number), each counted as often as it says. */
static double life_median(struct life_list *l)
{
	double total = 0, lo = 0, hi = 0, acc = 0;
	size_t i;

	qsort(l->v, l->n, sizeof(*l->v), cmp_life);
	for (i = 0; i < l->n; i++)
		total += l->v[i].n;
	/* positions (from 1) total/2 and total/2 + 1, or (total + 1)/2 twice */
	{
		double a = total / 2, b = total / 2 + 1;
		int odd = fmod(total, 2.0) != 0;

		if (odd)
			a = b = (total + 1) / 2;
		for (i = 0; i < l->n; i++) {
			double first = acc + 1;

			acc += l->v[i].n;
			if (first <= a && a <= acc)
				lo = l->v[i].ns;
			if (first <= b && b <= acc) {
				hi = l->v[i].ns;
				break;
			}
		}
	}
	return (lo + hi) / 2;
}

/* Lifetime bucket b's bounds (heap_histograms, kind 'life'). */
static void life_bucket_bounds(int64_t b, double *lo, double *hi)
{
	if (b < 8) {
		*lo = *hi = (double)b;
		return;
	}
	*lo = (double)((4 + b % 4) << (b / 4 - 2));
	*hi = (double)(((4 + (b + 1) % 4) << ((b + 1) / 4 - 2)) - 1);
}

/*
 * An aggregated key's blocks freed within max_life, from its histogram
 * (the lifetimes up to row_ns; longer ones are rows): count, bytes, and
 * into l the lifetimes (a bucket as its middle).  The collector counted
 * exactly at short_ns and at row_ns; another limit falling inside a bucket
 * takes a share of it in proportion to its width: *estimated.
 */
static int agg_short(const struct key_agg *a, const struct agg_proc *p, int64_t max_life,
		     double *count, double *bytes, struct life_list *l, int *estimated)
{
	double full_c = 0, full_b = 0, part_c = 0, part_b = 0, part_lo = 0, part_hi = 0;
	int err = 0, part = 0;

	for (size_t i = 0; i < a->nlife; i++) {
		double lo, hi;

		life_bucket_bounds(a->life[i].b, &lo, &hi);
		if (hi <= (double)max_life) {
			full_c += a->life[i].count;
			full_b += a->life[i].bytes;
			if (l)
				err = life_add(l, (lo + hi) / 2, a->life[i].count);
		} else if (lo <= (double)max_life) {
			part = 1;
			part_c = a->life[i].count;
			part_b = a->life[i].bytes;
			part_lo = lo;
			part_hi = hi;
		}
		if (err)
			return err;
	}
	if (part) {
		double share;

		if (max_life == p->short_ns) {
			/* exact: what short_count has beyond the full buckets */
			share = part_c > 0 ? (a->short_count - full_c) / part_c : 0;
		} else if (max_life >= p->row_ns) {
			share = 1; /* every bucket is within */
		} else {
			share = ((double)max_life - part_lo + 1) / (part_hi - part_lo + 1);
			*estimated = 1;
		}
		part_c *= share;
		part_b = max_life == p->short_ns ? a->short_bytes - full_b : part_b * share;
		full_c += part_c;
		full_b += part_b;
		if (l && part_c > 0)
			err = life_add(l, (part_lo + (max_life < part_hi ? (double)max_life : part_hi)) / 2,
				       part_c);
	}
	*count += full_c;
	*bytes += full_b;
	return err;
}

struct tagged {
	struct model_group g;
	uint32_t old;
};

static int cmp_group(const void *x, const void *y)
{
	const struct model_group *a = &((const struct tagged *)x)->g;
	const struct model_group *b = &((const struct tagged *)y)->g;

	if (a->mem != b->mem)
		return a->mem->index < b->mem->index ? -1 : 1;
	if (a->bytes != b->bytes)
		return a->bytes > b->bytes ? -1 : 1;
	return strcmp(a->name, b->name);
}

/* Sort g's groups by memory, then bytes, keeping of_key right. */
static int sort_groups(struct model_groups *g)
{
	struct tagged *t = malloc((g->n + 1) * sizeof(*t));
	uint32_t *pos = malloc((g->n + 1) * sizeof(*pos));
	int err = 0;

	if (!t || !pos) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < g->n; i++)
		t[i] = (struct tagged){ g->v[i], (uint32_t)i };
	qsort(t, g->n, sizeof(*t), cmp_group);
	for (size_t i = 0; i < g->n; i++) {
		g->v[i] = t[i].g;
		pos[t[i].old] = (uint32_t)i;
	}
	for (size_t i = 0; i < g->nkeys; i++)
		if (g->of_key[i] != UINT32_MAX)
			g->of_key[i] = pos[g->of_key[i]];
out:
	free(t);
	free(pos);
	return err;
}

static int selected(const struct model_block *b, const struct model_mem *mem,
		    enum model_select sel, int64_t max_life)
{
	switch (sel) {
	case MODEL_LIVE_END:
		return b->free_ns == NO_FREE;
	case MODEL_AT_PEAK:
		return b->alloc_ns <= mem->peak_ns && mem->peak_ns < b->free_ns;
	case MODEL_SHORT:
		return b->free_ns != NO_FREE && b->free_ns - b->alloc_ns <= max_life;
	default:
		return 1;
	}
}

int model_heap_groups(struct model *m, enum model_select sel, enum model_naming naming,
		      int64_t max_life_ns, struct model_groups *out)
{
	struct map groups = { .item_size = sizeof(struct group_item) };
	struct life_list *lives = NULL;
	size_t cap = 0;
	struct model_heap *h;
	int err;

	memset(out, 0, sizeof(*out));
	err = sel == MODEL_AT_PEAK ? heap_peaks(m, MODEL_WANT_SITES) : heap(m, MODEL_WANT_SITES);
	if (err)
		return err;
	h = m->heap;
	out->nkeys = h->keys.n;
	out->of_key = malloc((h->keys.n + 1) * sizeof(*out->of_key));
	if (!out->of_key)
		return -ENOMEM;
	/* Each key's group: its memory and site (or folded stack). */
	for (size_t i = 0; i < h->keys.n; i++) {
		struct key_item *ki = map_item(&h->keys, i);
		struct map_key gk;
		struct group_item *g;
		int64_t idx;

		out->of_key[i] = UINT32_MAX;
		if (!ki->k.mem->proc->selected)
			continue;
		err = naming == MODEL_BY_NATIVE ? resolve_native(m, ki)
		      : naming == MODEL_BY_FOLDED ? resolve_folded(m, ki) : resolve(m, ki);
		if (err)
			goto out;
		idx = naming == MODEL_BY_FOLDED ? ki->folded
		      : naming == MODEL_BY_NATIVE ? ki->native_site : ki->site;
		gk = (struct map_key){ (int64_t)ki->k.mem->index, idx, 0 };
		g = map_get(&groups, &gk);
		if (!g) {
			err = -ENOMEM;
			goto out;
		}
		if (g->group == 0) {
			err = array_grow(&out->v, &cap, out->n, sizeof(*out->v));
			if (err)
				goto out;
			out->v[out->n] = (struct model_group){
				.mem = ki->k.mem,
				.name = naming == MODEL_BY_FOLDED ? h->sites.folded.v[idx]
								  : h->sites.names.v[idx],
			};
			g->group = (uint32_t)++out->n;
		}
		out->of_key[i] = g->group - 1;
	}
	if (sel == MODEL_SHORT && !(lives = calloc(out->n + 1, sizeof(*lives)))) {
		err = -ENOMEM;
		goto out;
	}
	/* Aggregated keys: their figures from heap_sites and histograms. */
	for (size_t i = 0; i < h->keys.n && !err; i++) {
		struct key_item *ki = map_item(&h->keys, i);
		const struct key_agg *a = ki->agg;
		uint32_t gi = out->of_key[i];
		struct model_group *g;
		double c = 0, b = 0;

		if (!a || gi == UINT32_MAX)
			continue;
		g = &out->v[gi];
		switch (sel) {
		case MODEL_ALLOCATED:
			g->count += a->allocs;
			g->bytes += a->alloc_bytes;
			g->rows += (size_t)a->allocs;
			g->live_count += a->live_count;
			g->live_bytes += a->live_bytes;
			break;
		case MODEL_LIVE_END:
			g->count += a->live_count;
			g->bytes += a->live_bytes;
			g->rows += (size_t)a->live_count;
			g->live_count += a->live_count;
			g->live_bytes += a->live_bytes;
			break;
		case MODEL_AT_PEAK:
			/* its blocks never freed (rows) add live_* below */
			g->count += a->peak_count;
			g->bytes += a->peak_bytes;
			g->rows += (size_t)a->peak_count;
			break;
		case MODEL_SHORT:
			err = agg_short(a, ((struct mem_item *)map_item(&h->mems,
									  (size_t)ki->key.proc_id))->agg,
					max_life_ns, &c, &b, &lives[gi], &out->estimated);
			g->count += c;
			g->bytes += b;
			g->rows += (size_t)llround(c);
			break;
		}
	}
	if (err)
		goto out;
	for (size_t c = 0; c < h->nchunks && !err; c++) {
		const struct chunk *ch = &h->chunks[c];

		for (size_t i = 0; i < ch->n; i++) {
			const struct model_block *b = &ch->v[i];
			uint32_t gi = out->of_key[b->key];
			struct model_group *g;

			if (gi == UINT32_MAX)
				continue;
			g = &out->v[gi];
			if (!selected(b, g->mem, sel, max_life_ns))
				continue;
			if (g->mem->aggregated) {
				/* a kept row adds only what the tables lack */
				const struct agg_proc *a = mem_of(h, b->key)->agg;

				if (sel == MODEL_AT_PEAK && b->free_ns == NO_FREE) {
					g->live_count += b->count;
					g->live_bytes += b->weight;
				}
				if (sel != MODEL_SHORT || b->free_ns - b->alloc_ns <= a->row_ns)
					continue;
			}
			g->count += b->count;
			g->bytes += b->weight;
			g->rows++;
			if (b->count > 1) {
				double v = (double)b->weight * (double)b->weight *
					   (1 - 1 / (double)b->count);

				g->var_count += (double)b->count * ((double)b->count - 1);
				g->var_bytes += v;
				if (b->free_ns == NO_FREE)
					g->var_live += v;
			}
			if (b->free_ns == NO_FREE) {
				g->live_count += b->count;
				g->live_bytes += b->weight;
			}
			if (lives) {
				err = life_add(&lives[gi], (double)(b->free_ns - b->alloc_ns), 1);
				if (err)
					break;
			}
		}
	}
	if (err)
		goto out;
	for (size_t i = 0; lives && i < out->n; i++) {
		struct life_list *l = &lives[i];

		if (!l->n)
			continue;
		/* The median of the rows (the sampled ones in sample mode);
		 * with an even count, the mean of the two middle ones. */
		out->v[i].median_life = life_median(l);
	}
	err = sort_groups(out);
out:
	for (size_t i = 0; lives && i < out->n; i++)
		free(lives[i].v);
	free(lives);
	map_free(&groups);
	if (err)
		model_groups_free(out);
	return err;
}

void model_groups_free(struct model_groups *g)
{
	free(g->v);
	free(g->of_key);
	memset(g, 0, sizeof(*g));
}

/* ---- distributions ---------------------------------------------------------------------------- */

void model_hist_bounds(unsigned b, uint64_t *lo, uint64_t *hi)
{
	*lo = b ? (uint64_t)1 << (b - 1) : 0;
	*hi = b == 0 ? 0 : b >= 64 ? UINT64_MAX : ((uint64_t)1 << b) - 1;
}

/* The bucket holding quarter-octave lifetime bucket q (heap_histograms,
 * kind 'life': 0..7 exactly, then 4 x the top bit's position + the two
 * bits after it), or -1 when q is none. */
static int life_octave(int64_t q)
{
	if (q < 0 || q > 255 || (q >= 8 && q < 12))
		return -1;
	return q < 8 ? (int)bit_length((uint64_t)q) : (int)(q / 4 + 1);
}

static int bad_bucket(const char *kind, int64_t b)
{
	cli_error("the store's heap_histograms has a %s bucket %lld, which no collector writes",
		  kind, (long long)b);
	return -EIO;
}

/* The aggregated memories' sizes: the collector's histograms, summed over
 * their sites. */
static int agg_sizes(struct model *m, struct model_heap *h, struct model_hist *v)
{
	sqlite3_stmt *st = NULL;
	int err, r = 0;

	err = model_prepare(m, "SELECT proc_id, bucket, sum(count), sum(bytes) FROM heap_histograms"
			    " WHERE kind = 'size' GROUP BY proc_id, bucket", &st);
	while (!err && (r = store_step(m->db, st)) > 0) {
		struct map_key k = { col_i64(st, 0), MODEL_HOST, -1 };
		const struct mem_item *mi = map_find(&h->mems, &k);
		int64_t b = col_i64(st, 1);
		struct model_hist *hv;

		if (!mi || !mi->agg)
			continue;
		if (b < 0 || b >= MODEL_HIST_BUCKETS) {
			err = bad_bucket("size", b);
			break;
		}
		hv = &v[mi->mem.index];
		hv->count[b] += sqlite3_column_double(st, 2);
		hv->bytes[b] += sqlite3_column_double(st, 3);
	}
	if (!err && r < 0)
		err = r;
	sqlite3_finalize(st);
	return err;
}

/* Lifetimes: the rows', and the aggregated keys' histograms (the lifetimes
 * up to row_ns, which their rows leave out). */
static int lifetimes(struct model_heap *h, struct model_hist *v)
{
	for (size_t c = 0; c < h->nchunks; c++) {
		const struct chunk *ch = &h->chunks[c];

		for (size_t i = 0; i < ch->n; i++) {
			const struct model_block *b = &ch->v[i];
			const struct mem_item *mi = mem_of(h, b->key);
			struct model_hist *hv = &v[mi->mem.index];
			int64_t life = b->free_ns - b->alloc_ns;
			unsigned lb;

			if (b->free_ns == NO_FREE) {
				hv->live_count += b->count;
				hv->live_bytes += b->weight;
				continue;
			}
			if (mi->agg && life <= mi->agg->row_ns)
				continue; /* in its histogram */
			lb = bit_length(life > 0 ? (uint64_t)life : 0);
			hv->count[lb] += b->count;
			hv->bytes[lb] += b->weight;
		}
	}
	for (size_t i = 0; i < h->keys.n; i++) {
		const struct key_item *ki = map_item(&h->keys, i);
		struct model_hist *hv;

		if (!ki->agg)
			continue;
		hv = &v[mem_of(h, (uint32_t)i)->mem.index];
		for (size_t k = 0; k < ki->agg->nlife; k++) {
			int lb = life_octave(ki->agg->life[k].b);

			if (lb < 0)
				return bad_bucket("lifetime", ki->agg->life[k].b);
			hv->count[lb] += ki->agg->life[k].count;
			hv->bytes[lb] += ki->agg->life[k].bytes;
		}
	}
	return 0;
}

int model_heap_hist(struct model *m, enum model_hist_kind kind, const struct model_hist **out,
		    size_t *n)
{
	struct model_heap *h;
	struct model_hist *v;
	int err = heap(m, kind == MODEL_HIST_SIZE ? MODEL_WANT_SIZES : 0);

	*out = NULL;
	*n = 0;
	if (err)
		return err;
	h = m->heap;
	if (!h->hist[kind]) {
		v = calloc(h->nmems + 1, sizeof(*v));
		if (!v)
			return -ENOMEM;
		for (size_t i = 0; i < h->nmems; i++)
			v[i].mem = h->mem_list[i];
		if (kind == MODEL_HIST_SIZE) {
			for (size_t i = 0; i < h->mems.n; i++) {
				const struct mem_item *mi = map_item(&h->mems, i);

				if (!mi->agg) {
					memcpy(v[mi->mem.index].count, mi->sizes.count,
					       sizeof(mi->sizes.count));
					memcpy(v[mi->mem.index].bytes, mi->sizes.bytes,
					       sizeof(mi->sizes.bytes));
				}
			}
			err = h->naggs ? agg_sizes(m, h, v) : 0;
		} else {
			err = lifetimes(h, v);
		}
		if (err) {
			free(v);
			return err;
		}
		for (size_t i = 0; i < h->nmems; i++) {
			v[i].total_count = v[i].live_count;
			v[i].total_bytes = v[i].live_bytes;
			for (unsigned b = 0; b < MODEL_HIST_BUCKETS; b++) {
				v[i].total_count += v[i].count[b];
				v[i].total_bytes += v[i].bytes[b];
			}
		}
		h->hist[kind] = v;
	}
	*out = h->hist[kind];
	*n = h->nmems;
	return 0;
}

/* ---- memory over time ------------------------------------------------------------------------ */

static size_t lower_bound(const int64_t *v, size_t n, int64_t t)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid] < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* ---- checkpoints ---------------------------------------------------------------------------- */

/* Every point_allocs-th value of the sorted v[0..n) (point_allocs the least
 * power of two leaving at most MODEL_POINTS), into *out. */
static int points_of(int64_t *v, size_t n, int64_t **out, size_t *nout)
{
	size_t every = 1, k;

	*out = NULL;
	*nout = 0;
	while (n / every > MODEL_POINTS)
		every *= 2;
	if (n / every == 0)
		return 0;
	qsort(v, n, sizeof(*v), cmp_i64);
	*out = malloc((n / every) * sizeof(**out));
	if (!*out)
		return -ENOMEM;
	for (k = 1; k * every <= n; k++)
		(*out)[k - 1] = v[k * every - 1];
	*nout = k - 1;
	return 0;
}

int model_heap_points(struct model *m, const struct model_proc *p, const int64_t **t,
		      size_t *n)
{
	struct model_heap *h;
	struct points_item *pi;
	struct map_key k = { p->proc_id, 0, 0 };
	const struct agg_proc *a;
	int64_t *v = NULL;
	size_t nv = 0, cap = 0;
	int err = heap(m, 0);

	if (err)
		return err;
	h = m->heap;
	a = agg_of(h, p->proc_id);
	if (a) {
		/* the collector's */
		*t = a->points;
		*n = a->npoints;
		return 0;
	}
	pi = map_find(&h->points, &k);
	if (!pi) {
		/* every allocation's instant, all memories */
		for (size_t c = 0; !err && c < h->nchunks; c++) {
			const struct chunk *ch = &h->chunks[c];

			for (size_t i = 0; i < ch->n; i++) {
				if (mem_of(h, ch->v[i].key)->mem.proc != p)
					continue;
				err = grow_i64(&v, &cap, nv);
				if (err)
					break;
				v[nv++] = ch->v[i].alloc_ns;
			}
		}
		pi = err ? NULL : map_get(&h->points, &k);
		if (!err && !pi)
			err = -ENOMEM;
		if (!err)
			err = points_of(v, nv, &pi->t, &pi->n);
		free(v);
		if (err)
			return err;
	}
	*t = pi->t;
	*n = pi->n;
	return 0;
}

/* The index of t among the n sorted instants v (first index: base), or -1. */
static int64_t find_instant(const int64_t *v, size_t n, int64_t t, int64_t base)
{
	size_t k = lower_bound(v, n, t);

	return k < n && v[k] == t ? (int64_t)k + base : -1;
}

int model_groups_live_at(struct model *m, const struct model_groups *g,
			 const int64_t *const *t, const size_t *n, double **y, int *exact)
{
	struct model_heap *h;
	int err = heap(m, MODEL_WANT_SITES);

	if (err)
		return err;
	h = m->heap;
	for (size_t gi = 0; gi < g->n; gi++) {
		exact[gi] = 1;
		if (y[gi])
			memset(y[gi], 0, n[g->v[gi].mem->proc->index] * sizeof(*y[gi]));
	}
	/* rows: a difference array per group, then its sums */
	for (size_t c = 0; c < h->nchunks; c++) {
		const struct chunk *ch = &h->chunks[c];

		for (size_t i = 0; i < ch->n; i++) {
			const struct model_block *b = &ch->v[i];
			uint32_t gi = b->key < g->nkeys ? g->of_key[b->key] : UINT32_MAX;
			size_t pi, ka, kf;

			if (gi == UINT32_MAX || !y[gi] || g->v[gi].mem->aggregated)
				continue;
			pi = g->v[gi].mem->proc->index;
			ka = lower_bound(t[pi], n[pi], b->alloc_ns);
			kf = b->free_ns == NO_FREE ? n[pi] : lower_bound(t[pi], n[pi], b->free_ns);
			if (ka >= kf)
				continue;
			y[gi][ka] += b->weight;
			if (kf < n[pi])
				y[gi][kf] -= b->weight;
		}
	}
	for (size_t gi = 0; gi < g->n; gi++)
		if (y[gi] && !g->v[gi].mem->aggregated)
			for (size_t k = 1; k < n[g->v[gi].mem->proc->index]; k++)
				y[gi][k] += y[gi][k - 1];
	/* aggregated keys: their runs at the checkpoints */
	for (size_t i = 0; i < h->keys.n && i < g->nkeys; i++) {
		const struct key_item *ki = map_item(&h->keys, i);
		uint32_t gi = g->of_key[i];
		const struct agg_proc *a;
		size_t pi;

		if (!ki->agg || gi == UINT32_MAX || !y[gi])
			continue;
		a = mem_of(h, (uint32_t)i)->agg;
		pi = g->v[gi].mem->proc->index;
		for (size_t k = 0; k < n[pi]; k++) {
			int64_t idx = find_instant(a->points, a->npoints, t[pi][k], 1);

			if (idx >= 0) {
				y[gi][k] += rle_at(&ki->agg->ser[0], idx);
				continue;
			}
			idx = find_instant(a->steps, a->nsteps, t[pi][k], 0);
			if (idx >= 0)
				y[gi][k] += rle_at(&ki->agg->ser[1], idx);
			else
				exact[gi] = 0;
		}
	}
	return 0;
}

/*
 * An aggregated memory over time, from its timeline: each bucket's highest
 * value at its start (when in the bucket it came is not stored), its last
 * value at its end.  The bucket that holds the peak starts with the value
 * live at its start (the bucket before's last) and has the peak at its
 * instant: drawn at the bucket's start, the peak came up to a bucket's
 * width before the instant summary and peak give it.
 */
static int agg_timeline(struct model *m, const struct model_mem *mem,
			int (*cb)(void *ctx, int64_t t, double live), void *ctx)
{
	sqlite3_stmt *st = NULL;
	double before = 0; /* live at the start of the next bucket */
	int err, r = 0;

	err = model_prepare(m, "SELECT start_ns, end_ns, max_bytes, end_bytes FROM heap_timeline"
			    " WHERE proc_id = ?1 ORDER BY start_ns", &st);
	if (!err)
		sqlite3_bind_int64(st, 1, mem->proc->proc_id);
	while (!err && (r = store_step(m->db, st)) > 0) {
		int64_t a = col_i64(st, 0), b = col_i64(st, 1);

		if (mem->peak_ns >= a && mem->peak_ns < b) {
			err = cb(ctx, a, before);
			if (!err)
				err = cb(ctx, mem->peak_ns, mem->peak);
		} else {
			err = cb(ctx, a, sqlite3_column_double(st, 2));
		}
		before = sqlite3_column_double(st, 3);
		if (!err)
			err = cb(ctx, b - 1, before);
	}
	if (!err && r < 0)
		err = r;
	sqlite3_finalize(st);
	return err;
}

struct series_ctx {
	const int64_t *t;
	size_t n, k;
	double *live;
	double last;
};

static int series_at(void *ctx, int64_t t, double live)
{
	struct series_ctx *c = ctx;

	while (c->k < c->n && c->t[c->k] < t)
		c->live[c->k++] = c->last;
	c->last = live;
	return 0;
}

static int rows_mem_series(struct model *m, const struct model_mem *mem, const int64_t *t,
			   size_t n, double *live)
{
	struct model_heap *h;
	int err = heap(m, 0);

	if (err)
		return err;
	h = m->heap;
	memset(live, 0, n * sizeof(*live));
	if (n == 0)
		return 0;
	/* A difference array: a block is live at t[k] for k in
	 * [lb(alloc_ns), lb(free_ns)). */
	for (size_t c = 0; c < h->nchunks; c++) {
		const struct chunk *ch = &h->chunks[c];

		for (size_t i = 0; i < ch->n; i++) {
			const struct model_block *b = &ch->v[i];
			size_t ka, kf;

			if (&mem_of(h, b->key)->mem != mem)
				continue;
			ka = lower_bound(t, n, b->alloc_ns);
			kf = b->free_ns == NO_FREE ? n : lower_bound(t, n, b->free_ns);
			if (ka >= kf)
				continue;
			live[ka] += b->weight;
			if (kf < n)
				live[kf] -= b->weight;
		}
	}
	for (size_t k = 1; k < n; k++)
		live[k] += live[k - 1];
	return 0;
}

int model_mem_series(struct model *m, const struct model_mem *mem, const int64_t *t, size_t n,
		     double *live)
{
	struct series_ctx c = { .t = t, .n = n, .live = live };
	int err;

	if (!mem->aggregated)
		return rows_mem_series(m, mem, t, n, live);
	err = agg_timeline(m, mem, series_at, &c);
	while (!err && c.k < n)
		live[c.k++] = c.last;
	return err;
}

/*
 * Every event of a memory in time order (a timeline wants each instant, so
 * nothing is pruned): a least-significant-digit radix sort on the time
 * less the first, 16 bits a pass (two for a run of 4 s, three up to three
 * days), into a second array; then one replay.  Stable, so the events of
 * one instant keep their order, which the replay's per-instant totals do
 * not depend on anyway.
 */
#define RADIX_BITS 16

static int sort_events(struct event **ev, size_t n, int64_t lo, int64_t hi)
{
	uint64_t span = (uint64_t)hi - (uint64_t)lo;
	struct event *src = *ev, *dst;
	size_t *count;
	int shift;

	if (n < 2 || span == 0)
		return 0;
	dst = malloc(n * sizeof(*dst));
	count = malloc(((size_t)1 << RADIX_BITS) * sizeof(*count));
	if (!dst || !count) {
		free(dst);
		free(count);
		return -ENOMEM;
	}
	for (shift = 0; shift < 64 && (span >> shift); shift += RADIX_BITS) {
		size_t mask = ((size_t)1 << RADIX_BITS) - 1, sum = 0;
		struct event *t;

		memset(count, 0, (mask + 1) * sizeof(*count));
		for (size_t i = 0; i < n; i++)
			count[(((uint64_t)src[i].t - (uint64_t)lo) >> shift) & mask]++;
		for (size_t b = 0; b <= mask; b++) {
			size_t c = count[b];

			count[b] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			dst[count[(((uint64_t)src[i].t - (uint64_t)lo) >> shift) & mask]++] = src[i];
		t = src;
		src = dst;
		dst = t;
	}
	free(dst);
	free(count);
	*ev = src;
	return 0;
}

int model_mem_events(struct model *m, const struct model_mem *mem,
		     int (*cb)(void *ctx, int64_t t, double live), void *ctx)
{
	struct event *ev;
	int64_t lo, hi;
	double cur = 0;
	size_t n;
	int err;

	if (mem->aggregated)
		return agg_timeline(m, mem, cb, ctx);
	err = heap(m, 0);
	if (!err)
		err = mem_event_list(m->heap, mem, &ev, &n, &lo, &hi);
	if (err)
		return err;
	err = sort_events(&ev, n, lo, hi);
	for (size_t e = 0; !err && e < n;) {
		int64_t t = ev[e].t;

		for (; e < n && ev[e].t == t; e++)
			cur += ev[e].w;
		err = cb(ctx, t, cur);
	}
	free(ev);
	return err;
}
