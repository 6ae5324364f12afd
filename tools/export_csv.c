/*
 * shimmer export --format csv: the detailed event log, one row per event,
 * every kind in one order: by begin time on the export's clock (ties: the
 * kinds in the order of tables[] below, then the process, then the store's
 * order).  Columns: kind,name,pid,rank,tid,device,stream,begin_ns,end_ns,
 * bytes,correlation; times in ns from the export's 0 (export.c).
 *
 * Streaming: the file is a k-way merge of sources that each yield rows in
 * begin order, with a binary min-heap of their current rows, so memory
 * stays that of the sources' cursors, not of the rows.
 *  - Each table but the allocations is read per process in start order:
 *    a closed recording has an index on (proc_id, start_ns) for each
 *    (collector/store.c), so each process's rows come off it in order.
 *  - Allocations have no such index (the largest table: an index would
 *    cost every recording its size and time), but they are stored nearly
 *    in time order: rows are numbered as the collector merges the rings
 *    by time, so a row is out of order only when its call began before an
 *    earlier row's and returned after it (calls of two threads that
 *    overlap, or a thread descheduled inside one).  A first pass reads
 *    each row's id and begin and sets apart the rows below the highest
 *    begin before them ("stragglers": 1.5% of a 4-thread malloc loop);
 *    the rest, read again in id order, are in order by construction, and
 *    the stragglers, sorted by begin (16 bytes each), are fetched by id:
 *    two sorted sources.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "export.h"
#include "store.h"

/* Names by (process, string id): one lookup per distinct name. */
struct names {
	sqlite3 *db;
	sqlite3_stmt *st;
	struct map ids;     /* (proc, id) -> index into text */
	struct strtab text;
};

struct name_item {
	struct map_key key;
	int64_t idx;
};

static const char *name_of(struct names *n, int64_t proc_id, int64_t id, int *err)
{
	struct map_key k = { proc_id, id, 0 };
	struct name_item *it = map_find(&n->ids, &k);
	const char *s;
	int64_t idx;

	if (it)
		return it->idx < 0 ? NULL : n->text.v[it->idx];
	sqlite3_reset(n->st);
	sqlite3_bind_int64(n->st, 1, proc_id);
	sqlite3_bind_int64(n->st, 2, id);
	idx = -1;
	if (store_step(n->db, n->st) > 0 && (s = (const char *)sqlite3_column_text(n->st, 0))) {
		*err = strtab_index(&n->text, s, &idx);
		if (*err)
			return NULL;
	}
	it = map_get(&n->ids, &k);
	if (!it) {
		*err = -ENOMEM;
		return NULL;
	}
	it->idx = idx;
	return idx < 0 ? NULL : n->text.v[idx];
}

struct csv_row {
	const char *kind, *name;
	const struct xproc *p;
	int64_t tid, device, stream, begin, end, bytes, corr;
	int has_tid, has_device, has_stream, has_end, has_bytes, has_corr;
};

struct allocs;

struct csv {
	struct export *x;
	struct names names;
	struct allocs *allocs;
};

/* One table's rows: columns proc_id, start, end (maybe NULL), then what
 * fill() reads. */
struct csv_table {
	const char *kind;
	int min_schema;
	const char *cols, *from;
	const char *pcol, *start, *end; /* the process, the order, the end (for the window) */
	void (*fill)(struct csv *c, struct csv_row *r, sqlite3_stmt *st, int *err);
};

static int64_t col_or(sqlite3_stmt *st, int c, int *has)
{
	*has = sqlite3_column_type(st, c) != SQLITE_NULL;
	return *has ? sqlite3_column_int64(st, c) : 0;
}

static const char *fn_name(struct csv *c, sqlite3_stmt *st, int col)
{
	const struct model_fn *f = model_fn(c->x->m, sqlite3_column_int64(st, col));

	return f ? f->name : NULL;
}

static void fill_cuda(struct csv *c, struct csv_row *r, sqlite3_stmt *st, int *err)
{
	(void)err;
	r->name = fn_name(c, st, 3);
	r->tid = col_or(st, 4, &r->has_tid);
	r->device = col_or(st, 5, &r->has_device);
	r->stream = col_or(st, 6, &r->has_stream);
	r->bytes = col_or(st, 7, &r->has_bytes);
}

static void fill_api(struct csv *c, struct csv_row *r, sqlite3_stmt *st, int *err)
{
	r->name = name_of(&c->names, r->p->proc_id, sqlite3_column_int64(st, 3), err);
	r->tid = col_or(st, 4, &r->has_tid);
	r->corr = col_or(st, 5, &r->has_corr);
}

static void fill_kernel(struct csv *c, struct csv_row *r, sqlite3_stmt *st, int *err)
{
	r->name = name_of(&c->names, r->p->proc_id, sqlite3_column_int64(st, 3), err);
	r->device = col_or(st, 4, &r->has_device);
	r->stream = col_or(st, 5, &r->has_stream);
	r->corr = col_or(st, 6, &r->has_corr);
}

static void fill_copy(struct csv *c, struct csv_row *r, sqlite3_stmt *st, int *err)
{
	(void)c;
	(void)err;
	r->kind = (const char *)sqlite3_column_text(st, 3);
	r->name = (const char *)sqlite3_column_text(st, 4);
	r->device = col_or(st, 5, &r->has_device);
	r->stream = col_or(st, 6, &r->has_stream);
	r->bytes = col_or(st, 7, &r->has_bytes);
	r->corr = col_or(st, 8, &r->has_corr);
}

static void fill_sync(struct csv *c, struct csv_row *r, sqlite3_stmt *st, int *err)
{
	(void)c;
	(void)err;
	r->name = (const char *)sqlite3_column_text(st, 3);
	r->stream = col_or(st, 4, &r->has_stream);
	r->corr = col_or(st, 5, &r->has_corr);
}

static void fill_named_tid(struct csv *c, struct csv_row *r, sqlite3_stmt *st, int *err)
{
	r->name = name_of(&c->names, r->p->proc_id, sqlite3_column_int64(st, 3), err);
	r->tid = col_or(st, 4, &r->has_tid);
}

static void fill_window(struct csv *c, struct csv_row *r, sqlite3_stmt *st, int *err)
{
	(void)c;
	(void)st;
	(void)err;
	r->name = "GPU sampling window";
}

/* Allocations: columns id, proc_id, alloc_ns, free_ns, then these (NOT
 * NULL in the schema). */
static void fill_alloc(struct csv *c, struct csv_row *r, sqlite3_stmt *st, int *err)
{
	(void)err;
	r->name = fn_name(c, st, 4);
	r->tid = sqlite3_column_int64(st, 5);
	r->device = sqlite3_column_int64(st, 6);
	r->bytes = sqlite3_column_int64(st, 7);
	r->has_tid = r->has_device = r->has_bytes = 1;
}

#define ALLOC_COLS "id, proc_id, alloc_ns, free_ns, alloc_fn, alloc_tid, device, size"

static const struct csv_table tables[] = {
	{ "cuda", 1, "proc_id, start_ns, end_ns, fn_id, tid, device, stream, bytes", "cuda_calls",
	  "proc_id", "start_ns", "end_ns", fill_cuda },
	{ "api", 2, "proc_id, start_ns, end_ns, name_id, tid, correlation", "gpu_api", "proc_id",
	  "start_ns", "end_ns", fill_api },
	{ "kernel", 2, "proc_id, start_ns, end_ns, name_id, device, stream, correlation",
	  "kernels", "proc_id", "start_ns", "end_ns", fill_kernel },
	{ "copy", 2, "proc_id, start_ns, end_ns, op, coalesce(copy_kind, op), device, stream,"
		     " bytes, correlation", "gpu_copies", "proc_id", "start_ns", "end_ns",
	  fill_copy },
	{ "sync", 2, "proc_id, start_ns, end_ns, type, stream, correlation", "gpu_syncs",
	  "proc_id", "start_ns", "end_ns", fill_sync },
	{ "range", 2, "proc_id, start_ns, end_ns, name_id, tid", "ranges", "proc_id", "start_ns",
	  "coalesce(end_ns, 9223372036854775807)", fill_named_tid },
	{ "marker", 2, "proc_id, ts_ns, ts_ns, name_id, tid", "markers", "proc_id", "ts_ns",
	  "ts_ns", fill_named_tid },
	{ "window", 4, "proc_id, start_ns, end_ns", "gpu_windows", "proc_id", "start_ns",
	  "end_ns", fill_window },
};

#define NTABLES (sizeof(tables) / sizeof(tables[0]))

/* ---- sources ---- */

struct src {
	int64_t key;   /* the current row's begin on the export clock */
	size_t rank;   /* ties: sources in the order they were made */
	struct csv_row row;
	const char *line; /* the row formatted already (allocations), or NULL */
	size_t len;
	int (*next)(struct csv *c, struct src *s); /* 1: a row, 0: done, < 0: error */
	sqlite3_stmt *st;
	const struct csv_table *t;
	const struct xproc *p;
	size_t at;     /* allocations: the next straggler, or row of the chunk */
};

static int64_t export_ns(const struct export *x, const struct xproc *p, int64_t ns)
{
	return ns + p->offset_ns - x->origin_ns;
}

static void opt(struct xout *w, int has, int64_t v)
{
	xout_lit(w, ",");
	if (has)
		xout_i64(w, v);
}

static void write_row(const struct export *x, struct xout *w, const struct csv_row *r)
{
	xout_str(w, r->kind);
	xout_lit(w, ",");
	xout_csv(w, r->name);
	xout_lit(w, ",");
	xout_i64(w, r->p->pid);
	opt(w, r->p->rank >= 0, r->p->rank);
	opt(w, r->has_tid, r->tid);
	opt(w, r->has_device, r->device);
	opt(w, r->has_stream, r->stream);
	opt(w, 1, export_ns(x, r->p, r->begin));
	opt(w, r->has_end, export_ns(x, r->p, r->end));
	opt(w, r->has_bytes, r->bytes);
	opt(w, r->has_corr, r->corr);
	xout_lit(w, "\n");
}

static int table_next(struct csv *c, struct src *s)
{
	int err = 0, r = store_step(c->x->db, s->st);

	if (r <= 0)
		return r;
	s->row = (struct csv_row){ .kind = s->t->kind, .p = s->p,
				   .begin = sqlite3_column_int64(s->st, 1) };
	s->row.end = col_or(s->st, 2, &s->row.has_end);
	s->key = export_ns(c->x, s->p, s->row.begin);
	s->t->fill(c, &s->row, s->st, &err);
	return err ? err : 1;
}

/* An allocation row (ALLOC_COLS) of a selected process inside the window,
 * into *r; 0 when it is not one. */
static int alloc_row(struct csv *c, sqlite3_stmt *st, struct csv_row *r)
{
	const struct xproc *p = export_proc(c->x, sqlite3_column_int64(st, 1));
	int err = 0;

	if (!p)
		return 0;
	*r = (struct csv_row){ .kind = "alloc", .p = p, .begin = sqlite3_column_int64(st, 2) };
	r->end = col_or(st, 3, &r->has_end);
	if (!export_in(p, r->begin, r->has_end ? r->end : INT64_MAX))
		return 0;
	fill_alloc(c, r, st, &err);
	return err ? err : 1;
}

/* ---- allocations ---- */

/*
 * Both passes run on worker threads, each with a connection of its own
 * (SQLite serialises one), over chunks of CHUNK_IDS rowids: the first
 * pass finds each chunk's stragglers against the chunk's own earlier
 * rows (a chunk whose first row is below the highest begin of the chunks
 * before it is read again, in order, to find those that are below it
 * too); the second formats each chunk's other rows, a few chunks ahead
 * of the merge, which copies the lines out in order.
 */
#define CHUNK_IDS 65536
#define MAX_WORKERS 4
#define AHEAD 2 /* chunks formatted ahead of the merge, per worker */

struct straggler {
	int64_t key, id;
};

struct chunk {
	int64_t lo, hi;          /* rowids [lo, hi) */
	int64_t first, high;     /* first pass: the first row's key, the highest */
	struct straggler *strag; /* its stragglers, by id */
	size_t nstrag, scap;
	struct xout text;        /* second pass: its other rows, formatted */
	int64_t *keys;
	size_t *ends;            /* each row's end in text */
	size_t nrows, rcap;
	int ready;
	int err;
};

struct allocs {
	struct csv *c;
	struct chunk *ch;
	size_t nchunks;
	int pass;                /* 1 or 2 */
	int with_free;           /* a window: the first pass reads free_ns too */
	size_t next;             /* the next chunk to claim */
	size_t merged;           /* chunks the merge is done with */
	size_t ahead;
	int stop;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	const struct straggler *by_id; /* every straggler, by id */
	size_t nstrag;
	struct straggler *by_key;      /* the same, by key */
};

static int grow_strag(struct chunk *ch)
{
	return array_grow(&ch->strag, &ch->scap, ch->nstrag, sizeof(*ch->strag));
}

/* First pass over ch: its stragglers against `high` and its own rows. */
static int scan_chunk(struct allocs *a, sqlite3 *db, sqlite3_stmt *st, struct chunk *ch,
		      int64_t high)
{
	struct export *x = a->c->x;
	const struct xproc *p = NULL;
	int64_t last_proc = -1;
	int err = 0, r;

	ch->nstrag = 0;
	ch->first = INT64_MIN;
	ch->high = high;
	sqlite3_reset(st);
	sqlite3_bind_int64(st, 1, ch->lo);
	sqlite3_bind_int64(st, 2, ch->hi);
	while (!err && (r = store_step(db, st)) > 0) {
		int64_t proc_id = sqlite3_column_int64(st, 1), begin, end, key;

		if (proc_id != last_proc) {
			p = export_proc(x, proc_id);
			last_proc = proc_id;
		}
		if (!p)
			continue;
		begin = sqlite3_column_int64(st, 2);
		end = !a->with_free || sqlite3_column_type(st, 3) == SQLITE_NULL
			      ? INT64_MAX : sqlite3_column_int64(st, 3);
		if (!export_in(p, begin, end))
			continue;
		key = export_ns(x, p, begin);
		if (ch->first == INT64_MIN)
			ch->first = key;
		if (key >= ch->high) {
			ch->high = key;
			continue;
		}
		err = grow_strag(ch);
		if (!err)
			ch->strag[ch->nstrag++] = (struct straggler){ key, sqlite3_column_int64(st, 0) };
	}
	if (!err && r < 0)
		err = r;
	return err;
}

static const struct straggler *strag_from(const struct allocs *a, int64_t id)
{
	size_t lo = 0, hi = a->nstrag;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (a->by_id[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return a->by_id + lo;
}

/* Second pass over ch: its rows but the stragglers, formatted. */
static int format_chunk(struct allocs *a, sqlite3 *db, sqlite3_stmt *st, struct chunk *ch)
{
	const struct straggler *sg = strag_from(a, ch->lo), *end = a->by_id + a->nstrag;
	int err = xout_init(&ch->text, NULL), r;

	sqlite3_reset(st);
	sqlite3_bind_int64(st, 1, ch->lo);
	sqlite3_bind_int64(st, 2, ch->hi);
	while (!err && (r = store_step(db, st)) > 0) {
		int64_t id = sqlite3_column_int64(st, 0);
		struct csv_row row;

		while (sg < end && sg->id < id)
			sg++;
		if (sg < end && sg->id == id)
			continue;
		r = alloc_row(a->c, st, &row);
		if (r <= 0) {
			err = r;
			continue;
		}
		if (ch->nrows == ch->rcap) {
			size_t cap = ch->rcap ? 2 * ch->rcap : 4096;
			int64_t *k = realloc(ch->keys, cap * sizeof(*k));
			size_t *e = k ? realloc(ch->ends, cap * sizeof(*e)) : NULL;

			if (k)
				ch->keys = k;
			if (e)
				ch->ends = e;
			if (!k || !e) {
				err = -ENOMEM;
				break;
			}
			ch->rcap = cap;
		}
		write_row(a->c->x, &ch->text, &row);
		ch->keys[ch->nrows] = export_ns(a->c->x, row.p, row.begin);
		ch->ends[ch->nrows++] = ch->text.n;
		if (ch->text.err)
			err = -ENOMEM;
	}
	if (!err && r < 0)
		err = r;
	return err;
}

static void *alloc_worker(void *arg)
{
	struct allocs *a = arg;
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	char sql[160];
	int err = 0;

	/* as the model's heap pass makes its own (store_connect: immutable
	 * when no collector writes the store) */
	if (store_connect(a->c->x->o->path, &db) != SQLITE_OK) {
		cli_error("cannot open the store again: %s", sqlite3_errmsg(db));
		err = -EIO;
	} else {
		sqlite3_busy_timeout(db, 10000);
		snprintf(sql, sizeof(sql), a->pass == 1
			 ? "SELECT id, proc_id, alloc_ns%s FROM allocations WHERE id >= ?1 AND id < ?2"
			 : "SELECT " ALLOC_COLS "%s FROM allocations WHERE id >= ?1 AND id < ?2",
			 a->pass == 1 && a->with_free ? ", free_ns" : "");
		err = store_prepare(db, sql, &st);
	}
	for (;;) {
		struct chunk *ch;
		size_t i;

		pthread_mutex_lock(&a->lock);
		while (a->pass == 2 && !a->stop && a->next < a->nchunks &&
		       a->next >= a->merged + a->ahead)
			pthread_cond_wait(&a->cv, &a->lock);
		i = a->next;
		if (a->stop || i >= a->nchunks) {
			pthread_mutex_unlock(&a->lock);
			break;
		}
		a->next++;
		pthread_mutex_unlock(&a->lock);
		ch = &a->ch[i];
		ch->err = err;
		if (!err)
			ch->err = a->pass == 1 ? scan_chunk(a, db, st, ch, INT64_MIN)
					       : format_chunk(a, db, st, ch);
		pthread_mutex_lock(&a->lock);
		ch->ready = 1;
		pthread_cond_broadcast(&a->cv);
		pthread_mutex_unlock(&a->lock);
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	return NULL;
}

/* Runs pass (1 or 2) on the workers: pass 1 to its end; pass 2 is left
 * running, ahead of the merge (allocs_stop() ends it). */
static int allocs_run(struct allocs *a, int pass, pthread_t *tid, size_t *nthreads)
{
	size_t n = store_readers(MAX_WORKERS);

	a->pass = pass;
	a->next = 0;
	a->merged = 0;
	a->ahead = AHEAD * n;
	for (size_t i = 0; i < a->nchunks; i++)
		a->ch[i].ready = 0;
	*nthreads = 0;
	for (size_t i = 0; i < n; i++) {
		if (pthread_create(&tid[i], NULL, alloc_worker, a))
			break;
		(*nthreads)++;
	}
	if (!*nthreads)
		return -EAGAIN;
	if (pass == 2)
		return 0;
	for (size_t i = 0; i < *nthreads; i++)
		pthread_join(tid[i], NULL);
	*nthreads = 0;
	for (size_t i = 0; i < a->nchunks; i++)
		if (a->ch[i].err)
			return a->ch[i].err;
	return 0;
}

static void allocs_stop(struct allocs *a, pthread_t *tid, size_t nthreads)
{
	pthread_mutex_lock(&a->lock);
	a->stop = 1;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->lock);
	for (size_t i = 0; i < nthreads; i++)
		pthread_join(tid[i], NULL);
}

static int cmp_strag_key(const void *x, const void *y)
{
	const struct straggler *a = x, *b = y;

	if (a->key != b->key)
		return a->key < b->key ? -1 : 1;
	return a->id < b->id ? -1 : a->id > b->id;
}

/* After the first pass: each chunk's stragglers against every earlier row
 * (reading again those that begin below the chunks before them), then
 * every straggler by id and by key. */
static int allocs_stragglers(struct allocs *a)
{
	struct export *x = a->c->x;
	sqlite3_stmt *st = NULL;
	struct straggler *all;
	int64_t high = INT64_MIN;
	size_t n = 0;
	int err = 0;

	for (size_t i = 0; !err && i < a->nchunks; i++) {
		struct chunk *ch = &a->ch[i];

		if (ch->first == INT64_MIN)
			continue;
		if (ch->first < high) {
			if (!st)
				err = store_prepare(x->db, a->with_free
						    ? "SELECT id, proc_id, alloc_ns, free_ns FROM"
						      " allocations WHERE id >= ?1 AND id < ?2"
						    : "SELECT id, proc_id, alloc_ns FROM allocations"
						      " WHERE id >= ?1 AND id < ?2", &st);
			if (!err)
				err = scan_chunk(a, x->db, st, ch, high);
		}
		if (ch->high > high)
			high = ch->high;
		n += ch->nstrag;
	}
	sqlite3_finalize(st);
	if (err || !n)
		return err;
	all = malloc(n * sizeof(*all));
	a->by_key = malloc(n * sizeof(*a->by_key));
	if (!all || !a->by_key) {
		free(all);
		return -ENOMEM;
	}
	n = 0;
	for (size_t i = 0; i < a->nchunks; i++) {
		struct chunk *ch = &a->ch[i];

		memcpy(all + n, ch->strag, ch->nstrag * sizeof(*all));
		n += ch->nstrag;
		free(ch->strag);
		ch->strag = NULL;
		ch->nstrag = 0;
	}
	memcpy(a->by_key, all, n * sizeof(*all));
	qsort(a->by_key, n, sizeof(*a->by_key), cmp_strag_key);
	a->by_id = all;
	a->nstrag = n;
	return 0;
}

/* The merge's source of the formatted rows: chunk s->p... in order. */
static int alloc_chunks_next(struct csv *c, struct src *s)
{
	struct allocs *a = c->allocs;

	for (;;) {
		struct chunk *ch;

		if (a->merged >= a->nchunks)
			return 0;
		ch = &a->ch[a->merged];
		pthread_mutex_lock(&a->lock);
		while (!ch->ready)
			pthread_cond_wait(&a->cv, &a->lock);
		pthread_mutex_unlock(&a->lock);
		if (ch->err)
			return ch->err;
		if (s->at < ch->nrows) {
			size_t from = s->at ? ch->ends[s->at - 1] : 0;

			s->key = ch->keys[s->at];
			s->line = ch->text.buf + from;
			s->len = ch->ends[s->at] - from;
			s->at++;
			return 1;
		}
		/* done with it: its memory, and room for one more ahead */
		xout_finish(&ch->text);
		free(ch->keys);
		free(ch->ends);
		ch->keys = NULL;
		ch->ends = NULL;
		s->at = 0;
		pthread_mutex_lock(&a->lock);
		a->merged++;
		pthread_cond_broadcast(&a->cv);
		pthread_mutex_unlock(&a->lock);
	}
}

/* The stragglers, by begin, each fetched by id on the main connection. */
static int alloc_strag_next(struct csv *c, struct src *s)
{
	struct allocs *a = c->allocs;

	while (s->at < a->nstrag) {
		int r;

		sqlite3_reset(s->st);
		sqlite3_bind_int64(s->st, 1, a->by_key[s->at++].id);
		r = store_step(c->x->db, s->st);
		if (r > 0)
			r = alloc_row(c, s->st, &s->row);
		if (r < 0)
			return r;
		if (r > 0) {
			s->key = export_ns(c->x, s->row.p, s->row.begin);
			return 1;
		}
	}
	return 0;
}

static int allocs_init(struct csv *c, struct allocs *a)
{
	struct export *x = c->x;
	sqlite3_stmt *st = NULL;
	int64_t lo = 0, hi = -1;
	int err;

	memset(a, 0, sizeof(*a));
	a->c = c;
	a->with_free = x->o->begin_s >= 0 || x->o->end_s >= 0;
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->cv, NULL);
	/* the rows of the model's snapshot */
	err = store_prepare(x->db, "SELECT min(id), max(id) FROM allocations", &st);
	if (!err && store_step(x->db, st) > 0 && sqlite3_column_type(st, 0) != SQLITE_NULL) {
		lo = sqlite3_column_int64(st, 0);
		hi = sqlite3_column_int64(st, 1);
	}
	sqlite3_finalize(st);
	if (err || hi < lo || !x->nprocs)
		return err;
	a->nchunks = (size_t)((hi - lo) / CHUNK_IDS + 1);
	a->ch = calloc(a->nchunks, sizeof(*a->ch));
	if (!a->ch)
		return -ENOMEM;
	for (size_t i = 0; i < a->nchunks; i++) {
		a->ch[i].lo = lo + (int64_t)i * CHUNK_IDS;
		a->ch[i].hi = i + 1 < a->nchunks ? a->ch[i].lo + CHUNK_IDS : hi + 1;
	}
	return 0;
}

static void allocs_free(struct allocs *a)
{
	for (size_t i = 0; a->ch && i < a->nchunks; i++) {
		free(a->ch[i].strag);
		if (a->ch[i].text.buf)
			xout_finish(&a->ch[i].text);
		free(a->ch[i].keys);
		free(a->ch[i].ends);
	}
	free(a->ch);
	free((void *)a->by_id);
	free(a->by_key);
	pthread_mutex_destroy(&a->lock);
	pthread_cond_destroy(&a->cv);
}

/* ---- the merge ---- */

struct heap {
	struct src **v;
	size_t n;
};

static int src_less(const struct src *a, const struct src *b)
{
	return a->key != b->key ? a->key < b->key : a->rank < b->rank;
}

static void sift_down(struct heap *h, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		struct src *t;

		if (l < h->n && src_less(h->v[l], h->v[m]))
			m = l;
		if (l + 1 < h->n && src_less(h->v[l + 1], h->v[m]))
			m = l + 1;
		if (m == i)
			return;
		t = h->v[i];
		h->v[i] = h->v[m];
		h->v[m] = t;
		i = m;
	}
}

/* A source of each table for each selected process, in srcs. */
static int table_sources(struct csv *c, struct src *srcs, size_t *n)
{
	struct export *x = c->x;
	char sql[512];
	int err = 0;

	for (size_t t = 0; !err && t < NTABLES; t++) {
		const struct csv_table *ct = &tables[t];

		if (x->schema < ct->min_schema)
			continue;
		snprintf(sql, sizeof(sql), "SELECT %s FROM %s WHERE %s = ?1 AND %s >= ?2"
			 " AND %s <= ?3 ORDER BY %s", ct->cols, ct->from, ct->pcol, ct->end,
			 ct->start, ct->start);
		for (size_t i = 0; !err && i < x->nprocs; i++) {
			struct src *s = &srcs[*n];

			*s = (struct src){ .t = ct, .p = &x->procs[i], .next = table_next,
					   .rank = *n };
			err = store_prepare(x->db, sql, &s->st);
			if (err)
				break;
			(*n)++;
			sqlite3_bind_int64(s->st, 1, s->p->proc_id);
			sqlite3_bind_int64(s->st, 2, s->p->begin_abs);
			sqlite3_bind_int64(s->st, 3, s->p->end_abs);
		}
	}
	return err;
}

int export_csv(struct export *x, struct xout *w)
{
	struct csv c = { .x = x };
	struct allocs a;
	struct src *srcs = calloc(NTABLES * x->nprocs + 2, sizeof(*srcs));
	struct heap h = { 0 };
	pthread_t tid[MAX_WORKERS];
	size_t n = 0, nthreads = 0;
	int err;

	h.v = calloc(NTABLES * x->nprocs + 2, sizeof(*h.v));
	c.names.db = x->db;
	c.names.ids.item_size = sizeof(struct name_item);
	c.allocs = &a;
	err = allocs_init(&c, &a);
	if (!err && (!srcs || !h.v))
		err = -ENOMEM;
	/* Named rows came with strings in schema 2 (see export_chrome.c). */
	if (!err && x->schema >= 2)
		err = store_prepare(x->db, "SELECT coalesce(demangled, text) FROM strings"
				    " WHERE proc_id = ?1 AND id = ?2", &c.names.st);
	if (!err)
		err = table_sources(&c, srcs, &n);
	/* the allocations: stragglers, then the rest formatted ahead */
	if (!err && a.nchunks)
		err = allocs_run(&a, 1, tid, &nthreads);
	if (!err && a.nchunks)
		err = allocs_stragglers(&a);
	if (!err && a.nchunks) {
		srcs[n] = (struct src){ .next = alloc_chunks_next, .rank = n };
		n++;
		if (a.nstrag) {
			srcs[n] = (struct src){ .next = alloc_strag_next, .rank = n };
			err = store_prepare(x->db, "SELECT " ALLOC_COLS " FROM allocations"
					    " WHERE id = ?1", &srcs[n].st);
			n += !err;
		}
		if (!err)
			err = allocs_run(&a, 2, tid, &nthreads);
	}
	xout_lit(w, "kind,name,pid,rank,tid,device,stream,begin_ns,end_ns,bytes,correlation\n");
	/* each source's first row, then the heap */
	for (size_t i = 0; !err && i < n; i++) {
		int r = srcs[i].next(&c, &srcs[i]);

		if (r < 0)
			err = r;
		else if (r > 0)
			h.v[h.n++] = &srcs[i];
	}
	for (size_t i = h.n / 2; i-- > 0;)
		sift_down(&h, i);
	while (!err && h.n) {
		struct src *s = h.v[0];
		int r;

		if (s->line)
			xout_mem(w, s->line, s->len);
		else
			write_row(x, w, &s->row);
		r = s->next(&c, s);
		if (r < 0)
			err = r;
		else if (r == 0)
			h.v[0] = h.v[--h.n];
		sift_down(&h, 0);
		if (w->err)
			err = -EIO;
	}
	allocs_stop(&a, tid, nthreads);
	for (size_t i = 0; i < n; i++)
		sqlite3_finalize(srcs[i].st);
	sqlite3_finalize(c.names.st);
	map_free(&c.names.ids);
	strtab_free(&c.names.text);
	allocs_free(&a);
	free(srcs);
	free(h.v);
	return err;
}
