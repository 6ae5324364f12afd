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
 * This file is the only reader of allocation rows: heap tables aggregated
 * at ingest would be read here, into the same blocks or straight into the
 * same figures.
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

#define MAX_WORKERS 4
#define PARALLEL_ROWS 200000 /* fewer rows are read by one thread */
#define NO_FREE INT64_MAX

/* Memory codes in map keys; other spaces are OTHER_BASE + their name's index. */
#define OTHER_BASE 16

struct event {
	int64_t t;
	double w; /* negative for a free */
};

struct mem_item {
	struct map_key key; /* proc, space code, device */
	struct model_mem mem;
	char label[48];
	int64_t nfreed; /* blocks freed */
};

struct key_item {
	struct map_key key; /* mem index, stack_id, Python stack (-1: native site) */
	struct model_key k;
	int resolved;
	int64_t site, folded; /* into sites' names and folded */
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
};

/* ---- the pass ------------------------------------------------------------------- */

/* A worker's own groups: local indexes, remapped when merged. */
struct wmem {
	struct map_key key;
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
	int64_t free_fn;
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
		if (want & MODEL_WANT_CALLS) {
			int64_t fn = col_i64(st, 7), d = col_i64(st, 8);
			int64_t ffn = col_i64(st, 9), fd = col_i64(st, 10);

			/* CUDA allocations are timed from cuda_calls instead;
			 * the realloc family on its allocation side only. */
			if (d >= 0 && fn >= 0 && fn < 256 && w->heap_fn[fn])
				err = time_add(&w->times, proc_id, fn, d);
			if (!err && fd >= 0 && ffn == w->free_fn)
				err = time_add(&w->times, proc_id, ffn, fd);
			if (err)
				break;
		}
		kk = (struct map_key){ mem_idx, -1, -1 };
		if (want & MODEL_WANT_SITES) {
			int64_t py = col_i64(st, sites_col + 1);

			kk.a = col_i64(st, sites_col);
			/* CUDA memory with Python frames is the user's
			 * Python line's; the host heap's is native. */
			kk.b = py >= 0 && code != MODEL_HOST ? py : -1;
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
		if (sqlite3_open_v2(w->m->path, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX,
				    NULL) != SQLITE_OK) {
			cli_error("cannot open the store again: %s", sqlite3_errmsg(db));
			sqlite3_close(db);
			w->err = -EIO;
			return NULL;
		}
		own = 1;
		sqlite3_busy_timeout(db, 10000);
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

static size_t cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n > MAX_WORKERS ? MAX_WORKERS : (size_t)n;
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
	sql = sqlite3_mprintf(
		"SELECT proc_id, space, device, weight, alloc_ns, free_ns, size%s%s"
		" FROM allocations WHERE id >= ?1 AND id < ?2",
		h->want & MODEL_WANT_CALLS ? ", alloc_fn, coalesce(alloc_end_ns - alloc_ns, -1),"
					     " free_fn, coalesce(free_end_ns - free_ns, -1)" : "",
		h->want & MODEL_WANT_SITES ? ", coalesce(stack_id, -1), coalesce(pystack_id, -1)"
					   : "");
	if (!sql)
		return -ENOMEM;
	if (m->path && hi - lo >= PARALLEL_ROWS)
		nw = cpus();
	for (size_t i = 0; i < nw; i++) {
		w[i].m = m;
		w[i].h = h;
		w[i].sql = sql;
		w[i].free_fn = -1;
		w[i].mems.item_size = sizeof(struct wmem);
		w[i].keys.item_size = sizeof(struct wkey);
		w[i].times.item_size = sizeof(struct time_item);
		for (size_t f = 0; f < m->nfns; f++) {
			if (m->fns[f].fn_id >= 0 && m->fns[f].fn_id < 256)
				w[i].heap_fn[m->fns[f].fn_id] = (unsigned char)m->fns[f].heap;
			if (strcmp(m->fns[f].name, "free") == 0)
				w[i].free_fn = m->fns[f].fn_id;
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
	m->heap = h;
	err = scan(m, h);
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
	err = peaks(h);
	if (err)
		return err;
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
	map_free(&h->mems);
	map_free(&h->keys);
	map_free(&h->times);
	strtab_free(&h->others);
	for (size_t i = 0; i < h->nchunks; i++)
		free(h->chunks[i].v);
	free(h->chunks);
	free(h->mem_list);
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

int model_memories(struct model *m, struct model_mem *const **v, size_t *n)
{
	int err = heap(m, 0);

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

static int resolve(struct model *m, struct key_item *ki)
{
	struct model_heap *h = m->heap;
	int err;

	if (ki->resolved)
		return 0;
	if (!h->sites_open) {
		err = sites_open(&h->sites, m->db);
		if (err)
			return err;
		h->sites_open = 1;
	}
	err = sites_of(&h->sites, ki->k.mem->proc->proc_id, ki->k.stack_id, ki->k.pystack_id,
		       &ki->site, &ki->folded);
	if (!err)
		ki->resolved = 1;
	return err;
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
	err = resolve(m, ki);
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

struct life_list {
	int64_t *v;
	size_t n, cap;
};

static int cmp_i64(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;

	return (a > b) - (a < b);
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

int model_heap_groups(struct model *m, enum model_select sel, int folded, int64_t max_life_ns,
		      struct model_groups *out)
{
	struct map groups = { .item_size = sizeof(struct group_item) };
	struct life_list *lives = NULL;
	size_t cap = 0;
	struct model_heap *h;
	int err;

	memset(out, 0, sizeof(*out));
	err = heap(m, MODEL_WANT_SITES);
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

		out->of_key[i] = UINT32_MAX;
		if (!ki->k.mem->proc->selected)
			continue;
		err = resolve(m, ki);
		if (err)
			goto out;
		gk = (struct map_key){ (int64_t)ki->k.mem->index, folded ? ki->folded : ki->site,
				       0 };
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
				.name = folded ? h->sites.folded.v[ki->folded]
					       : h->sites.names.v[ki->site],
			};
			g->group = (uint32_t)++out->n;
		}
		out->of_key[i] = g->group - 1;
	}
	if (sel == MODEL_SHORT && !(lives = calloc(out->n + 1, sizeof(*lives)))) {
		err = -ENOMEM;
		goto out;
	}
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
			g->count += b->count;
			g->bytes += b->weight;
			g->rows++;
			if (b->free_ns == NO_FREE) {
				g->live_count += b->count;
				g->live_bytes += b->weight;
			}
			if (lives) {
				struct life_list *l = &lives[gi];

				err = array_grow(&l->v, &l->cap, l->n, sizeof(*l->v));
				if (err)
					break;
				l->v[l->n++] = b->free_ns - b->alloc_ns;
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
		qsort(l->v, l->n, sizeof(*l->v), cmp_i64);
		out->v[i].median_life = l->n % 2 ? (double)l->v[l->n / 2]
						 : ((double)l->v[l->n / 2 - 1] +
						    (double)l->v[l->n / 2]) / 2;
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

int model_mem_series(struct model *m, const struct model_mem *mem, const int64_t *t, size_t n,
		     double *live)
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

int model_mem_events(struct model *m, const struct model_mem *mem,
		     int (*cb)(void *ctx, int64_t t, double live), void *ctx)
{
	struct search s = { .visit = cb, .ctx = ctx };
	struct event *ev;
	int64_t lo, hi;
	size_t n;
	int err = heap(m, 0);

	if (!err)
		err = mem_event_list(m->heap, mem, &ev, &n, &lo, &hi);
	if (err)
		return err;
	search(&s, ev, n, lo, hi, 0);
	free(ev);
	return s.err;
}
