/*
 * The model: opening, processes, functions, calls, steps, strings and the
 * streams; see model.h.  The heap is model_heap.c's, the GPU aggregates
 * model_gpu.c's.
 *
 * Small tables (processes, drops, functions, sampling) are read whole when
 * the model opens; larger ones on first use, each with one plain scan
 * aggregated in hash maps (SQLite's GROUP BY sorts, several times the cost
 * of the scan on a store of millions of rows).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "drops.h"
#include "model_int.h"
#include "sites.h"
#include "store.h"
#include "wire.h"

/* A function's calls in one process: an item of model.calls. */
struct calls_item {
	struct map_key key; /* proc, fn, 0 */
	struct model_calls c;
};

/* ---- small helpers -------------------------------------------------------------- */

int model_prepare(struct model *m, const char *sql, sqlite3_stmt **st)
{
	return store_prepare(m->db, sql, st);
}

static char *dup_col(sqlite3_stmt *st, int col, int *err)
{
	return store_column_dup(st, col, err);
}

static const char *base_name(const char *path)
{
	const char *p = path ? strrchr(path, '/') : NULL;

	return p ? p + 1 : path;
}

/* ---- processes ------------------------------------------------------------------ */

#define PROCS_SQL(gpu_columns, argv_bytes, exit_cpu)                                  \
	"SELECT proc_id, pid, ppid, parent_proc_id, uid, hostname, exe,"                  \
	" CASE WHEN json_valid(argv) AND json_type(argv) = 'array'"                       \
	"  THEN (SELECT group_concat(value, ' ') FROM json_each(processes.argv))"         \
	"  ELSE argv END,"                                                                \
	" CASE WHEN json_valid(argv) AND json_type(argv) = 'array' THEN json(argv) END,"  \
	" rank, local_rank, malloc_mode, sample_bytes, lossless, start_wall_ns, start_ns," \
	" end_ns, end_reason, " gpu_columns ", " argv_bytes ", " exit_cpu                  \
	" FROM processes ORDER BY proc_id"

static enum model_mode mode_of(const char *s)
{
	if (!s)
		return MODEL_MALLOC_UNKNOWN;
	if (strcmp(s, "off") == 0)
		return MODEL_MALLOC_OFF;
	if (strcmp(s, "sample") == 0)
		return MODEL_MALLOC_SAMPLE;
	if (strcmp(s, "all") == 0)
		return MODEL_MALLOC_ALL;
	return MODEL_MALLOC_UNKNOWN;
}

/* A command line the shim had to cut (processes.argv_bytes): args ends
 * with how much of it is there, so that no printer shows it as whole.  Its
 * arguments joined by spaces take as many bytes as the wire's NUL-separated
 * ones. */
static int mark_cut_args(struct model_proc *p)
{
	char *s;

	if (asprintf(&s, "%s ... (truncated: %zu of %lld bytes)", p->args ? p->args : "",
		     p->args ? strlen(p->args) : 0, (long long)p->argv_bytes) < 0)
		return -ENOMEM;
	free((char *)p->args);
	p->args = s;
	return 0;
}

static int load_procs(struct model *m)
{
	size_t cap = 0;
	sqlite3_stmt *st = NULL;
	int err, r;

	err = model_prepare(m, m->version >= MODEL_V_EXIT_CPU ?
				       PROCS_SQL("gpu_status, gpu_status_detail", "argv_bytes",
						 "exit_cpu_ns")
			       : m->version >= 11 ? PROCS_SQL("gpu_status, gpu_status_detail",
							      "argv_bytes", "NULL")
			       : m->version >= 2 ? PROCS_SQL("gpu_status, gpu_status_detail", "NULL",
							     "NULL")
			       : PROCS_SQL("NULL, NULL", "NULL", "NULL"),
			    &st);
	if (err)
		return err;
	while ((r = store_step(m->db, st)) > 0) {
		struct model_proc *p;

		err = array_grow(&m->procs, &cap, m->nprocs, sizeof(*m->procs));
		if (err)
			goto out;
		p = &m->procs[m->nprocs++];
		*p = (struct model_proc){
			.proc_id = col_i64(st, 0),
			.pid = col_i64(st, 1),
			.ppid = col_i64(st, 2),
			.uid = col_i64(st, 4),
			.rank = col_opt(st, 9),
			.local_rank = col_opt(st, 10),
			.sample_bytes = col_opt(st, 12),
			.lossless = sqlite3_column_int(st, 13),
			.start_wall_ns = col_i64(st, 14),
			.start_ns = col_i64(st, 15),
			.end_ns = col_i64(st, 16),
			.end_known = sqlite3_column_type(st, 16) != SQLITE_NULL,
		};
		/* The parent's id, until the pointers are made below. */
		p->parent = (const struct model_proc *)(intptr_t)(col_opt(st, 3) + 1);
		p->host = dup_col(st, 5, &err);
		p->exe = dup_col(st, 6, &err);
		p->args = dup_col(st, 7, &err);
		p->argv_json = dup_col(st, 8, &err);
		p->mode_name = dup_col(st, 11, &err);
		p->end_reason = dup_col(st, 17, &err);
		p->cut = p->end_reason && strcmp(p->end_reason, "collector_lost") == 0;
		p->gpu_status = dup_col(st, 18, &err);
		p->gpu_detail = dup_col(st, 19, &err);
		p->mode = mode_of(p->mode_name);
		p->exe_base = base_name(p->exe);
		p->argv_bytes = col_opt(st, 20);
		p->exit_cpu_ns = col_opt(st, 21);
		if (!err && p->argv_bytes >= 0)
			err = mark_cut_args(p);
		if (err)
			goto out;
	}
	err = r;
out:
	sqlite3_finalize(st);
	return err;
}

/* Direct lookup by proc_id (dense from 1 in every store the collector
 * writes), the tree, and the filter. */
static int link_procs(struct model *m)
{
	int64_t max = 0;
	size_t k = 0;

	for (size_t i = 0; i < m->nprocs; i++)
		if (m->procs[i].proc_id > max)
			max = m->procs[i].proc_id;
	if (max < (int64_t)(4 * m->nprocs + 1024)) {
		m->by_id = calloc((size_t)max + 1, sizeof(*m->by_id));
		if (!m->by_id)
			return -ENOMEM;
		m->by_id_n = max + 1;
		for (size_t i = 0; i < m->nprocs; i++)
			if (m->procs[i].proc_id >= 0)
				m->by_id[m->procs[i].proc_id] = &m->procs[i];
	}
	m->children = calloc(m->nprocs + 1, sizeof(*m->children));
	if (!m->children)
		return -ENOMEM;
	for (size_t i = 0; i < m->nprocs; i++) {
		struct model_proc *p = &m->procs[i];
		int64_t parent = (int64_t)(intptr_t)p->parent - 1;

		p->index = i;
		p->parent = parent >= 0 && parent != p->proc_id ? model_proc_by_id(m, parent) : NULL;
		p->selected = (m->filter.pid < 0 || p->pid == m->filter.pid) &&
			      (m->filter.rank < 0 || p->rank == m->filter.rank);
		m->nselected += p->selected != 0;
	}
	/* One run's tree (the filter's after_proc_id and root_pid): the
	 * parent pointers are all set now.  A walk up is bounded: a store's
	 * parent links could make a circle. */
	for (size_t i = 0; i < m->nprocs && (m->filter.after_proc_id > 0 || m->filter.root_pid > 0);
	     i++) {
		struct model_proc *p = &m->procs[i];
		const struct model_proc *q = p;
		int in = 0;

		/* ppid too: the children of a root that was not traced itself
		 * (a static launcher) have no traced parent. */
		for (size_t hops = 0; q && q->proc_id > m->filter.after_proc_id && hops <= m->nprocs;
		     q = q->parent, hops++)
			if (m->filter.root_pid <= 0 || q->pid == m->filter.root_pid ||
			    q->ppid == m->filter.root_pid) {
				in = 1;
				break;
			}
		if (p->selected && !in) {
			p->selected = 0;
			m->nselected--;
		}
	}
	/* Children in runs, in proc_id order: a counting pass, then placing. */
	for (size_t i = 0; i < m->nprocs; i++) {
		struct model_proc *p = &m->procs[i];

		if (p->parent)
			((struct model_proc *)p->parent)->nchildren++;
	}
	for (size_t i = 0; i < m->nprocs; i++) {
		m->procs[i].children = m->children + k;
		k += m->procs[i].nchildren;
		m->procs[i].nchildren = 0;
	}
	for (size_t i = 0; i < m->nprocs; i++) {
		struct model_proc *parent = (struct model_proc *)m->procs[i].parent;

		if (parent)
			((const struct model_proc **)parent->children)[parent->nchildren++] =
				&m->procs[i];
	}
	return 0;
}

/*
 * A process with no recorded end ends at its last recorded event: the
 * latest instant in any table of its rows.  Only such processes pay for
 * this (a scan of each table; a store whose collector died has them).
 */
static int end_unended(struct model *m)
{
	static const char *const parts[] = {
		/* One scan of the largest table for both of its times. */
		"SELECT max(max(alloc_ns, coalesce(free_ns, 0))) FROM allocations WHERE proc_id = ?1",
		"SELECT max(end_ns) FROM cuda_calls WHERE proc_id = ?1",
		"SELECT max(first_ns) FROM threads WHERE proc_id = ?1",
		/* schema 2 */
		"SELECT max(end_ns) FROM kernels WHERE proc_id = ?1",
		"SELECT max(end_ns) FROM gpu_copies WHERE proc_id = ?1",
		"SELECT max(end_ns) FROM gpu_syncs WHERE proc_id = ?1",
		"SELECT max(end_ns) FROM gpu_api WHERE proc_id = ?1",
		"SELECT max(max(start_ns, coalesce(end_ns, 0))) FROM ranges WHERE proc_id = ?1",
		"SELECT max(ts_ns) FROM markers WHERE proc_id = ?1",
		"SELECT max(ts_ns) FROM counters WHERE proc_id = ?1",
		/* schema 4 */
		"SELECT max(end_ns) FROM gpu_windows WHERE proc_id = ?1",
	};
	size_t nparts = m->version >= 4 ? 11 : m->version >= 2 ? 10 : 3;
	int err = 0;

	for (size_t i = 0; i < m->nprocs && !err; i++) {
		struct model_proc *p = &m->procs[i];

		if (p->end_known)
			continue;
		p->end_ns = p->start_ns;
		if (!p->selected)
			continue;
		for (size_t k = 0; k < nparts && !err; k++) {
			sqlite3_stmt *st = NULL;

			err = model_prepare(m, parts[k], &st);
			if (err)
				break;
			sqlite3_bind_int64(st, 1, p->proc_id);
			if ((err = store_step(m->db, st)) > 0) {
				err = 0;
				if (sqlite3_column_type(st, 0) != SQLITE_NULL &&
				    col_i64(st, 0) > p->end_ns)
					p->end_ns = col_i64(st, 0);
			}
			sqlite3_finalize(st);
		}
	}
	return err;
}

/* Which processes have call counters in the store (function_counts): the
 * collector writes them about once a second and at each thread's end, so
 * one cut short before its first write has none. */
static int load_counted(struct model *m)
{
	sqlite3_stmt *st = NULL;
	int err, r;

	err = model_prepare(m, "SELECT DISTINCT proc_id FROM function_counts", &st);
	if (err)
		return err;
	while ((r = store_step(m->db, st)) > 0) {
		struct model_proc *p = (struct model_proc *)model_proc_by_id(m, col_i64(st, 0));

		if (p)
			p->calls_counted = 1;
	}
	sqlite3_finalize(st);
	return r < 0 ? r : 0;
}

static int load_drops(struct model *m)
{
	static const char sql[] = "SELECT proc_id, reason, sum(events) FROM drops"
				  " GROUP BY proc_id, reason HAVING sum(events) > 0"
				  " ORDER BY proc_id, reason";
	sqlite3_stmt *st = NULL;
	size_t cap = 0, *first = NULL;
	int err, r;

	first = calloc(m->nprocs + 1, sizeof(*first));
	if (!first)
		return -ENOMEM;
	err = model_prepare(m, sql, &st);
	if (err)
		goto out;
	while ((r = store_step(m->db, st)) > 0) {
		struct model_proc *p = (struct model_proc *)model_proc_by_id(m, col_i64(st, 0));
		struct model_drop *d;
		int64_t n = col_i64(st, 2);

		/* Rows of a process never stored: nobody reports them. */
		if (!p)
			continue;
		err = array_grow(&m->drops, &cap, m->ndrops, sizeof(*m->drops));
		if (err)
			goto out;
		d = &m->drops[m->ndrops];
		d->events = n;
		d->reason = dup_col(st, 1, &err);
		if (err)
			goto out;
		if (!d->reason)
			d->reason = strdup("?");
		if (!d->reason) {
			err = -ENOMEM;
			goto out;
		}
		if (p->ndrops++ == 0)
			first[p->index] = m->ndrops;
		m->ndrops++;
		/* An event whose stack found no room (the shim's tables, an
		 * attached process's BPF stack map) was stored, without that
		 * stack: listed, not lost (drops.h), so no figure is withheld
		 * for it; the commands that name sites say so. */
		if (strcmp(d->reason, DROP_STACK_FULL) == 0)
			p->stacks_refused += n;
		else if (strcmp(d->reason, DROP_PYSTACK_FULL) == 0)
			p->pystacks_refused += n;
		if (!drop_is_loss(d->reason))
			continue;
		p->dropped += n;
		/* What CUPTI lost is GPU activity; the rest the rings lost. */
		if (strcmp(d->reason, "cupti") == 0)
			p->dropped_gpu += n;
		else
			p->dropped_host += n;
	}
	err = r;
	/* Rows come by process, so each process's drops are one run. */
	for (size_t i = 0; !err && i < m->nprocs; i++)
		if (m->procs[i].ndrops)
			m->procs[i].drops = m->drops + first[i];
out:
	sqlite3_finalize(st);
	free(first);
	return err;
}

/* Whether path names a Python runtime: its last component starts with
 * "python" or "libpython" and a digit (python3.11, libpython3.11.so.1.0). */
static int python_path(const char *path)
{
	const char *b = base_name(path);

	if (strncmp(b, "lib", 3) == 0)
		b += 3;
	return strncmp(b, "python", 6) == 0 && b[6] >= '0' && b[6] <= '9';
}

/*
 * model_proc.host_unseen.  A store whose functions have no
 * pymalloc_arena_mmap was written by a shimmer that did not record the
 * arenas; an attached process's probes never do.  Only processes that
 * traced the heap and ran a Python runtime are concerned.
 */
static int load_host_unseen(struct model *m)
{
	sqlite3_stmt *st = NULL;
	char *py = calloc(m->nprocs + 1, 2); /* per process: a runtime; attached */
	int err = py ? 0 : -ENOMEM, r = 0, recorded = 0;

	if (!err)
		err = model_prepare(m, "SELECT count(*) FROM functions"
				    " WHERE name = 'pymalloc_arena_mmap'", &st);
	if (!err && (r = store_step(m->db, st)) > 0)
		recorded = sqlite3_column_int(st, 0) > 0;
	else if (!err)
		err = r;
	sqlite3_finalize(st);
	st = NULL;
	/* the Python runtimes among the modules (schema 3) */
	if (!err && m->version >= 3)
		err = model_prepare(m, "SELECT DISTINCT d.proc_id, s.text FROM modules d"
				    " JOIN strings s ON s.proc_id = d.proc_id AND s.id = d.path_id"
				    " WHERE s.text GLOB '*python[0-9]*'", &st);
	while (!err && st && (r = store_step(m->db, st)) > 0) {
		const struct model_proc *p = model_proc_by_id(m, col_i64(st, 0));
		const char *path = (const char *)sqlite3_column_text(st, 1);

		if (p && path && python_path(path))
			py[2 * p->index] = 1;
	}
	if (!err && st && r < 0)
		err = r;
	sqlite3_finalize(st);
	st = NULL;
	/* attached: schema 7 */
	if (!err && m->version >= 7)
		err = model_prepare(m, "SELECT proc_id FROM processes WHERE traced_by = 'attach'",
				    &st);
	while (!err && st && (r = store_step(m->db, st)) > 0) {
		const struct model_proc *p = model_proc_by_id(m, col_i64(st, 0));

		if (p)
			py[2 * p->index + 1] = 1;
	}
	if (!err && st && r < 0)
		err = r;
	sqlite3_finalize(st);
	for (size_t i = 0; !err && i < m->nprocs; i++) {
		struct model_proc *p = &m->procs[i];

		if (p->mode == MODEL_MALLOC_OFF || !(py[2 * i] || (p->exe && python_path(p->exe))))
			continue;
		p->host_unseen = py[2 * i + 1] ? MODEL_ARENAS_ATTACHED
						: !recorded ? MODEL_ARENAS_OLDER : NULL;
	}
	free(py);
	return err;
}

/* A frame's name is missing where its string id has no strings row (the
 * shim sends 0 for a name it could not announce); the row that stands for
 * the frames left out of a deep stack, (0, 0, 0), has none by design. */
#define UNNAMED_PY_SQL                                                              \
	"SELECT f.proc_id, count(*), count(DISTINCT f.pystack_id) FROM python_frames f"  \
	" WHERE NOT (f.file_id = 0 AND f.func_id = 0 AND f.line = 0) AND"                 \
	" (NOT EXISTS (SELECT 1 FROM strings s WHERE s.proc_id = f.proc_id"              \
	"  AND s.id = f.file_id) OR NOT EXISTS (SELECT 1 FROM strings s"                 \
	"  WHERE s.proc_id = f.proc_id AND s.id = f.func_id)) GROUP BY f.proc_id"
#define UNNAMED_MOD_SQL                                                             \
	"SELECT d.proc_id, count(*) FROM modules d WHERE NOT EXISTS (SELECT 1 FROM"      \
	" strings s WHERE s.proc_id = d.proc_id AND s.id = d.path_id) GROUP BY d.proc_id"

int model_load_unnamed(struct model *m)
{
	sqlite3_stmt *st = NULL;
	int err = 0, r = 0;

	if (m->version < 3 || m->unnamed_loaded)
		return 0;
	for (int pass = 0; pass < 2 && !err; pass++) {
		err = model_prepare(m, pass ? UNNAMED_MOD_SQL : UNNAMED_PY_SQL, &st);
		while (!err && (r = store_step(m->db, st)) > 0) {
			struct model_proc *p =
				(struct model_proc *)model_proc_by_id(m, col_i64(st, 0));

			if (p && pass)
				p->unnamed_modules = col_i64(st, 1);
			else if (p) {
				p->unnamed_frames = col_i64(st, 1);
				p->unnamed_stacks = col_i64(st, 2);
			}
		}
		if (!err && r < 0)
			err = r;
		sqlite3_finalize(st);
		st = NULL;
	}
	m->unnamed_loaded = !err;
	return err;
}

static int load_sampling(struct model *m)
{
	static const char sql12[] = "SELECT proc_id, since_ns, until_ns, span_ns, windows,"
				    " traced_ns, traced_share, calls, calls_traced, scale, NULL"
				    " FROM gpu_sampling";
	static const char sql[] = "SELECT proc_id, since_ns, until_ns, span_ns, windows, traced_ns,"
				  " traced_share, calls, calls_traced, scale, whole_from_ns"
				  " FROM gpu_sampling";
	sqlite3_stmt *st = NULL;
	size_t cap = 0;
	int err, r;

	if (m->version < 4)
		return 0;
	err = model_prepare(m, m->version < 13 ? sql12 : sql, &st);
	if (err)
		return err;
	while ((r = store_step(m->db, st)) > 0) {
		if (!model_proc_by_id(m, col_i64(st, 0)))
			continue;
		err = array_grow(&m->samplings, &cap, m->nsamplings, sizeof(*m->samplings));
		if (err)
			goto out;
		/* NULLs (a live process with no window yet) read as 0: unknown. */
		m->samplings[m->nsamplings++] = (struct model_sampling){
			.since_ns = col_i64(st, 1),
			.until_ns = col_i64(st, 2),
			.span_ns = col_i64(st, 3),
			.windows = col_i64(st, 4),
			.traced_ns = col_i64(st, 5),
			.share = sqlite3_column_double(st, 6),
			.calls = col_i64(st, 7),
			.calls_traced = col_i64(st, 8),
			.scale = sqlite3_column_double(st, 9),
			.whole_from_ns = col_i64(st, 10),
		};
		/* Its index + 1, until the array is final. */
		((struct model_proc *)model_proc_by_id(m, col_i64(st, 0)))->sampling =
			(const struct model_sampling *)(uintptr_t)m->nsamplings;
	}
	err = r;
	for (size_t i = 0; !err && i < m->nprocs; i++)
		if (m->procs[i].sampling)
			m->procs[i].sampling = m->samplings + ((uintptr_t)m->procs[i].sampling - 1);
out:
	sqlite3_finalize(st);
	return err;
}

/* ---- functions -------------------------------------------------------------------- */

/* The wire format's flags of the function called name: the one list of
 * which functions synchronize, launch, copy (common/wire.h). */
static unsigned wire_flags(const char *name)
{
	for (int fn = 1; name && fn < SHM_FN_COUNT; fn++)
		if (strcmp(shm_fn_info[fn].name, name) == 0)
			return shm_fn_info[fn].flags;
	return 0;
}

int model_fn_syncs(const struct model_fn *f)
{
	return f && (f->flags & SHM_FNF_SYNC);
}

int model_fn_launches(const struct model_fn *f)
{
	return f && (f->flags & SHM_FNF_LAUNCH);
}

static int load_fns(struct model *m)
{
	sqlite3_stmt *st = NULL;
	size_t cap = 0;
	int err, r;

	err = model_prepare(m, "SELECT fn_id, name, family FROM functions ORDER BY fn_id", &st);
	if (err)
		return err;
	while ((r = store_step(m->db, st)) > 0) {
		const char *family = (const char *)sqlite3_column_text(st, 2);
		struct model_fn *f;

		err = array_grow(&m->fns, &cap, m->nfns, sizeof(*m->fns));
		if (err)
			goto out;
		f = &m->fns[m->nfns++];
		f->fn_id = col_i64(st, 0);
		f->heap = family && strcmp(family, "heap") == 0;
		f->name = dup_col(st, 1, &err);
		f->flags = wire_flags(f->name);
		if (err)
			goto out;
	}
	err = r;
out:
	sqlite3_finalize(st);
	return err;
}

const struct model_fn *model_fn(const struct model *m, int64_t fn_id)
{
	size_t lo = 0, hi = m->nfns;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->fns[mid].fn_id == fn_id)
			return &m->fns[mid];
		if (m->fns[mid].fn_id < fn_id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* ---- opening and closing ------------------------------------------------------------ */

static int read_indexed(struct model *m)
{
	sqlite3_stmt *st = NULL;

	if (sqlite3_prepare_v2(m->db, "SELECT value FROM meta WHERE key = 'indexed'", -1, &st,
			       NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		m->indexed = sqlite3_column_int(st, 0) == 1;
	sqlite3_finalize(st);
	return 0;
}

int model_load(sqlite3 *db, const struct model_filter *f, struct model **out)
{
	struct model *m = calloc(1, sizeof(*m));
	const char *file;
	int err = -ENOMEM;

	*out = NULL;
	if (!m)
		goto fail;
	m->db = db;
	m->filter = f ? *f : model_filter_all();
	m->strings.item_size = sizeof(struct string_item);
	m->calls.item_size = sizeof(struct calls_item);
	file = sqlite3_db_filename(db, "main");
	if (file && *file && !(m->path = strdup(file)))
		goto fail;
	/* One read transaction: every table as of one instant. */
	m->own_txn = sqlite3_get_autocommit(db);
	if (m->own_txn && sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
		m->own_txn = 0;
		cli_error("cannot read the store: %s", sqlite3_errmsg(db));
		err = -EIO;
		goto fail;
	}
	m->version = store_schema_version(db);
	read_indexed(m);
	err = load_procs(m);
	if (!err)
		err = link_procs(m);
	if (!err)
		err = end_unended(m);
	if (!err)
		err = load_drops(m);
	if (!err)
		err = load_counted(m);
	if (!err)
		err = load_sampling(m);
	if (!err)
		err = load_fns(m);
	if (!err)
		err = load_host_unseen(m);
	if (err)
		goto fail;
	/* An empty store read with no filter: an empty table or no output at
	 * all would read as "nothing wrong" (no leak, no finding). */
	if (m->nprocs == 0 && m->filter.pid < 0 && m->filter.rank < 0 &&
	    m->filter.after_proc_id <= 0 && m->filter.root_pid <= 0)
		cli_warn("%s holds no process: nothing was traced into it", m->path ? m->path : "the store");
	if (m->nselected == 0 && (m->filter.pid >= 0 || m->filter.rank >= 0)) {
		if (m->filter.pid >= 0 && m->filter.rank >= 0)
			cli_warn("no process with pid %lld and rank %lld in the store",
				 (long long)m->filter.pid, (long long)m->filter.rank);
		else if (m->filter.pid >= 0)
			cli_warn("no process with pid %lld in the store", (long long)m->filter.pid);
		else
			cli_warn("no process with rank %lld in the store", (long long)m->filter.rank);
	}
	*out = m;
	return 0;
fail:
	if (err == -ENOMEM)
		cli_error("out of memory reading the store");
	model_close(m);
	return err;
}

int model_open(const char *path, const struct model_filter *f, struct model **out)
{
	sqlite3 *db;
	int err;

	*out = NULL;
	err = store_open(path, &db);
	if (err)
		return err;
	err = model_load(db, f, out);
	if (err) {
		sqlite3_close(db);
		return err;
	}
	(*out)->own_db = 1;
	return 0;
}

void model_close(struct model *m)
{
	if (!m)
		return;
	model_heap_free(m->heap);
	model_gpu_free(m->gpu);
	if (m->call_sites) {
		sites_close(m->call_sites);
		free(m->call_sites);
	}
	for (size_t i = 0; i < m->nsteps; i++) {
		free(m->steps[i]->name);
		free(m->steps[i]->start);
		free(m->steps[i]->end);
		free(m->steps[i]);
	}
	free(m->steps);
	for (size_t i = 0; i < m->strings.n; i++) {
		struct string_item *s = map_item(&m->strings, i);

		free(s->text);
		free(s->demangled);
	}
	map_free(&m->strings);
	map_free(&m->calls);
	free(m->call_list);
	for (size_t i = 0; i < m->nthreads; i++)
		free((char *)m->threads[i].name);
	free(m->threads);
	free(m->thread_first);
	for (size_t i = 0; i < m->nfns; i++)
		free((char *)m->fns[i].name);
	free(m->fns);
	for (size_t i = 0; i < m->ndrops; i++)
		free((char *)m->drops[i].reason);
	free(m->drops);
	free(m->samplings);
	for (size_t i = 0; i < m->nprocs; i++) {
		struct model_proc *p = &m->procs[i];

		free((char *)p->host);
		free((char *)p->exe);
		free((char *)p->args);
		free((char *)p->argv_json);
		free((char *)p->mode_name);
		free((char *)p->end_reason);
		free((char *)p->gpu_status);
		free((char *)p->gpu_detail);
	}
	free(m->procs);
	free(m->by_id);
	free(m->children);
	if (m->own_txn)
		sqlite3_exec(m->db, "COMMIT", NULL, NULL, NULL);
	if (m->own_db)
		sqlite3_close(m->db);
	free(m->path);
	free(m);
}

sqlite3 *model_db(const struct model *m)
{
	return m->db;
}

int model_schema_version(const struct model *m)
{
	return m->version;
}

int model_indexed(const struct model *m)
{
	return m->indexed;
}

size_t model_nprocs(const struct model *m)
{
	return m->nprocs;
}

const struct model_proc *model_proc(const struct model *m, size_t i)
{
	return i < m->nprocs ? &m->procs[i] : NULL;
}

size_t model_nselected(const struct model *m)
{
	return m->nselected;
}

const struct model_proc *model_proc_by_id(const struct model *m, int64_t proc_id)
{
	size_t lo = 0, hi = m->nprocs;

	if (proc_id >= 0 && proc_id < m->by_id_n)
		return m->by_id[proc_id];
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->procs[mid].proc_id == proc_id)
			return &m->procs[mid];
		if (m->procs[mid].proc_id < proc_id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* ---- threads and strings -------------------------------------------------------------- */

static int load_threads(struct model *m)
{
	sqlite3_stmt *st = NULL;
	size_t cap = 0, pi = 0;
	int err, r;

	m->threads_loaded = 1;
	m->thread_first = calloc(m->nprocs + 1, sizeof(*m->thread_first));
	if (!m->thread_first)
		return -ENOMEM;
	err = model_prepare(m, "SELECT proc_id, tid, name, first_ns FROM threads"
			    " ORDER BY proc_id, tid", &st);
	if (err)
		return err;
	while ((r = store_step(m->db, st)) > 0) {
		const struct model_proc *p = model_proc_by_id(m, col_i64(st, 0));
		struct model_thread *t;

		if (!p)
			continue;
		/* Processes before p (and p itself) start here. */
		for (; pi <= p->index; pi++)
			m->thread_first[pi] = m->nthreads;
		err = array_grow(&m->threads, &cap, m->nthreads, sizeof(*m->threads));
		if (err)
			goto out;
		t = &m->threads[m->nthreads++];
		t->tid = col_i64(st, 1);
		t->first_ns = col_i64(st, 3);
		t->name = dup_col(st, 2, &err);
		if (err)
			goto out;
	}
	err = r;
	for (; pi <= m->nprocs; pi++)
		m->thread_first[pi] = m->nthreads;
out:
	sqlite3_finalize(st);
	return err;
}

int model_threads(struct model *m, const struct model_proc *p, const struct model_thread **v,
		  size_t *n)
{
	int err;

	*v = NULL;
	*n = 0;
	if (!m->threads_loaded && (err = load_threads(m)))
		return err;
	*v = m->threads + m->thread_first[p->index];
	*n = m->thread_first[p->index + 1] - m->thread_first[p->index];
	return 0;
}

static int load_strings(struct model *m)
{
	sqlite3_stmt *st = NULL;
	int err, r;

	m->strings_loaded = 1;
	if (m->version < 2)
		return 0;
	err = model_prepare(m, "SELECT proc_id, id, text, demangled FROM strings", &st);
	if (err)
		return err;
	while ((r = store_step(m->db, st)) > 0) {
		struct map_key k = { col_i64(st, 0), col_i64(st, 1), 0 };
		struct string_item *s;

		if (!model_proc_by_id(m, k.proc_id))
			continue;
		s = map_get(&m->strings, &k);
		if (!s) {
			err = -ENOMEM;
			goto out;
		}
		free(s->text);
		free(s->demangled);
		s->text = dup_col(st, 2, &err);
		s->demangled = dup_col(st, 3, &err);
		if (err)
			goto out;
	}
	err = r;
out:
	sqlite3_finalize(st);
	return err;
}

const char *model_string(struct model *m, int64_t proc_id, int64_t id)
{
	struct map_key k = { proc_id, id, 0 };
	const struct string_item *s;

	if (!m->strings_loaded && load_strings(m))
		return NULL;
	s = map_find(&m->strings, &k);
	if (!s)
		return NULL;
	return s->demangled ? s->demangled : s->text;
}

/* ---- calls ----------------------------------------------------------------------------------- */

static struct model_calls *calls_get(struct model *m, int64_t proc_id, int64_t fn_id)
{
	struct map_key k = { proc_id, fn_id, 0 };
	struct calls_item *it = map_get(&m->calls, &k);

	return it ? &it->c : NULL;
}

int model_calls_add(struct model *m, int64_t proc_id, int64_t fn_id, const struct stats *st,
		    long double sum)
{
	struct model_calls *c = calls_get(m, proc_id, fn_id);

	if (!c)
		return -ENOMEM;
	stats_merge(&c->st, st);
	c->sum += sum;
	return 0;
}

int64_t model_calls_count(const struct model_calls *c)
{
	return (uint64_t)c->counted > c->st.n ? c->counted : (int64_t)c->st.n;
}

int model_calls_counted(const struct model_calls *c)
{
	return c->proc->calls_counted;
}

int model_calls_exact(const struct model_calls *c)
{
	/* Without counters, the calls stored as rows are all there is: every
	 * CUDA call is one, and timed; a heap call is timed one in 8 (all
	 * mode) or when sampled, of a number nobody counted. */
	if (!c->proc->calls_counted)
		return c->st.n > 0 && c->fn && !c->fn->heap;
	return c->st.n > 0 && c->st.n >= (uint64_t)c->counted;
}

double model_calls_total(const struct model_calls *c)
{
	if (model_calls_exact(c))
		return (double)c->sum;
	return c->st.mean * (double)model_calls_count(c);
}

/*
 * In sample mode the timed heap calls are the byte-sampled ones, biased
 * towards large blocks (slower to allocate and free), so their mean says
 * nothing of the other calls.  `all` mode times 1 in 8 at random, of every
 * size alike.
 */
int model_calls_estimable(const struct model_calls *c)
{
	if (!c->proc->calls_counted)
		return model_calls_exact(c); /* no count to scale the mean by */
	return model_calls_exact(c) || c->proc->mode != MODEL_MALLOC_SAMPLE || !c->fn || !c->fn->heap;
}

static int counts_pass(struct model *m)
{
	sqlite3_stmt *st = NULL;
	int err, r;

	err = model_prepare(m, "SELECT proc_id, fn_id, count, bytes FROM function_counts", &st);
	while (!err && (r = store_step(m->db, st)) > 0) {
		struct model_calls *c;

		if (!model_selected(m, col_i64(st, 0)))
			continue;
		c = calls_get(m, col_i64(st, 0), col_i64(st, 1));
		if (!c) {
			err = -ENOMEM;
			break;
		}
		c->counted += col_i64(st, 2);
		c->bytes += col_i64(st, 3);
	}
	if (!err)
		err = r < 0 ? r : 0;
	sqlite3_finalize(st);
	if (err)
		return err;
	err = model_prepare(m, "SELECT proc_id, fn_id, end_ns - start_ns FROM cuda_calls", &st);
	while (!err && (r = store_step(m->db, st)) > 0) {
		struct model_calls *c;
		int64_t d = col_i64(st, 2);

		if (!model_selected(m, col_i64(st, 0)))
			continue;
		c = calls_get(m, col_i64(st, 0), col_i64(st, 1));
		if (!c) {
			err = -ENOMEM;
			break;
		}
		stats_add(&c->st, (double)d);
		c->sum += d;
	}
	if (!err)
		err = r < 0 ? r : 0;
	sqlite3_finalize(st);
	return err;
}

static int cmp_calls(const void *x, const void *y)
{
	const struct model_calls *a = *(struct model_calls *const *)x;
	const struct model_calls *b = *(struct model_calls *const *)y;
	double ta, tb;

	if (a->proc != b->proc)
		return a->proc->index < b->proc->index ? -1 : 1;
	ta = model_calls_total(a);
	tb = model_calls_total(b);
	if (ta != tb)
		return ta > tb ? -1 : 1;
	if (model_calls_count(a) != model_calls_count(b))
		return model_calls_count(a) > model_calls_count(b) ? -1 : 1;
	if (a->fn && b->fn)
		return strcmp(a->fn->name, b->fn->name);
	return (a->fn != NULL) - (b->fn != NULL);
}

int model_calls(struct model *m, struct model_calls *const **v, size_t *n)
{
	int err;

	if (!m->calls_loaded) {
		m->calls_loaded = 1;
		err = counts_pass(m);
		if (!err && !(m->want & MODEL_NO_HEAP_TIMES))
			err = model_heap_add_times(m);
		if (err)
			return err;
		m->call_list = calloc(m->calls.n + 1, sizeof(*m->call_list));
		if (!m->call_list)
			return -ENOMEM;
		for (size_t i = 0; i < m->calls.n; i++) {
			struct calls_item *it = map_item(&m->calls, i);

			it->c.proc = model_proc_by_id(m, it->key.proc_id);
			it->c.fn = model_fn(m, it->key.a);
			/* A counter row of zero calls is a function not called. */
			if (it->c.proc && model_calls_count(&it->c) > 0)
				m->call_list[m->ncalls++] = &it->c;
		}
		qsort(m->call_list, m->ncalls, sizeof(*m->call_list), cmp_calls);
	}
	*v = m->call_list;
	*n = m->ncalls;
	return 0;
}

/* ---- steps ---------------------------------------------------------------------------------- */

/*
 * The steps, unless named: the most frequent depth-0 push range; of ranges
 * as frequent, the one that lasted longest in all.  (Depth is per thread:
 * PyTorch's autograd thread runs the backward pass outside the main
 * thread's "step" and opens CUB's own ranges there at depth 0, once a step
 * in a training loop that sorts, as often as the steps themselves.)
 */
static const char default_step_sql[] =
	"SELECT s.text FROM ranges r JOIN strings s ON s.proc_id = r.proc_id AND s.id = r.name_id"
	" WHERE r.proc_id = ? AND r.kind = 'push' AND r.depth = 0 AND r.end_ns IS NOT NULL"
	" GROUP BY s.text ORDER BY count(*) DESC, sum(r.end_ns - r.start_ns) DESC, s.text LIMIT 1";

/* Default steps: depth-0 push ranges; a named range: any of that name. */
static const char steps_sql[] =
	"SELECT r.start_ns, r.end_ns FROM ranges r"
	" JOIN strings s ON s.proc_id = r.proc_id AND s.id = r.name_id"
	" WHERE r.proc_id = ?1 AND s.text = ?2 AND r.end_ns IS NOT NULL"
	" AND (?3 OR (r.kind = 'push' AND r.depth = 0)) ORDER BY r.start_ns, r.end_ns";

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return (a > b) - (a < b);
}

/* The p-quantile of the n sorted values v, linearly between closest ranks. */
static double quantile(const double *v, size_t n, double q)
{
	double h = (double)(n - 1) * q;
	size_t lo = (size_t)floor(h);

	if (lo + 1 >= n)
		return v[n - 1];
	return v[lo] + (h - (double)lo) * (v[lo + 1] - v[lo]);
}

static int load_steps(struct model *m, const struct model_proc *p, const char *name,
		      struct steps_item *it)
{
	sqlite3_stmt *st = NULL;
	size_t cap = 0;
	double *d = NULL;
	int err = 0, r;

	it->s.proc = p;
	if (m->version < 2)
		return 0;
	if (name) {
		it->name = strdup(name);
		if (!it->name)
			return -ENOMEM;
	} else {
		err = model_prepare(m, default_step_sql, &st);
		if (err)
			return err;
		sqlite3_bind_int64(st, 1, p->proc_id);
		r = store_step(m->db, st);
		if (r > 0)
			it->name = dup_col(st, 0, &err);
		sqlite3_finalize(st);
		st = NULL;
		if (r < 0)
			return r;
		if (err || !it->name)
			return err;
	}
	err = model_prepare(m, steps_sql, &st);
	if (err)
		return err;
	sqlite3_bind_int64(st, 1, p->proc_id);
	sqlite3_bind_text(st, 2, it->name, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 3, name != NULL);
	while ((r = store_step(m->db, st)) > 0) {
		size_t c2 = cap;

		err = array_grow(&it->start, &cap, it->s.n, sizeof(*it->start));
		if (!err)
			err = array_grow(&it->end, &c2, it->s.n, sizeof(*it->end));
		if (err)
			goto out;
		it->start[it->s.n] = col_i64(st, 0);
		it->end[it->s.n++] = col_i64(st, 1);
	}
	err = r;
	if (err || it->s.n == 0)
		goto out;
	d = malloc(it->s.n * sizeof(*d));
	if (!d) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < it->s.n; i++) {
		d[i] = (double)(it->end[i] - it->start[i]);
		it->s.total_ns += d[i];
	}
	qsort(d, it->s.n, sizeof(*d), cmp_double);
	it->s.mean_ns = it->s.total_ns / (double)it->s.n;
	for (size_t i = 0; i < it->s.n; i++)
		it->s.stddev_ns += (d[i] - it->s.mean_ns) * (d[i] - it->s.mean_ns);
	it->s.stddev_ns = sqrt(it->s.stddev_ns / (double)it->s.n);
	it->s.median_ns = quantile(d, it->s.n, 0.5);
	it->s.p90_ns = quantile(d, it->s.n, 0.9);
	it->s.min_ns = d[0];
	it->s.max_ns = d[it->s.n - 1];
out:
	free(d);
	sqlite3_finalize(st);
	return err;
}

int model_steps(struct model *m, const struct model_proc *p, const char *name,
		const struct model_steps **out)
{
	struct steps_item *it;
	int err;

	for (size_t i = 0; i < m->nsteps; i++) {
		it = m->steps[i];
		if (it->s.proc == p && it->named == (name != NULL) &&
		    (!name || strcmp(name, it->name) == 0)) {
			*out = &it->s;
			return 0;
		}
	}
	err = array_grow(&m->steps, &m->steps_cap, m->nsteps, sizeof(*m->steps));
	if (err)
		return err;
	it = calloc(1, sizeof(*it));
	if (!it)
		return -ENOMEM;
	m->steps[m->nsteps++] = it;
	it->named = name != NULL;
	err = load_steps(m, p, name, it);
	it->s.name = it->name;
	it->s.start = it->start;
	it->s.end = it->end;
	*out = &it->s;
	return err;
}

/* ---- streams ---------------------------------------------------------------------------------- */

struct stream_def {
	const char *table;
	const char *cols;  /* after proc_id */
	const char *start; /* the start (or instant) column */
	const char *end;   /* the end expression; NULL: rows are instants */
	int version;       /* the schema that has the table */
};

typedef int (*stream_row)(struct model *m, const struct model_proc *p, sqlite3_stmt *st,
			  void *cb, void *ctx);

/*
 * Run d's query over the selected processes and window w.  With the
 * indexes a closed recording has, a filter or an order reads each process
 * through its index; without, one scan (sorted by SQLite when an order is
 * asked) with processes filtered here.
 */
static int stream(struct model *m, const struct model_scan *w, const struct stream_def *d,
		  stream_row row, void *cb, void *ctx)
{
	int by_time = w && w->by_time;
	int one = w && w->proc_id > 0;
	int per_proc = one || (m->indexed && (by_time || m->nselected < m->nprocs));
	sqlite3_stmt *st = NULL;
	char sql[1024];
	size_t n;
	int err = 0, r;

	if (m->version < d->version || m->nselected == 0)
		return 0;
	n = (size_t)snprintf(sql, sizeof(sql), "SELECT proc_id, %s FROM %s WHERE 1", d->cols,
			     d->table);
	if (per_proc)
		n += (size_t)snprintf(sql + n, sizeof(sql) - n, " AND proc_id = ?3");
	if (w && d->end)
		n += (size_t)snprintf(sql + n, sizeof(sql) - n, " AND %s < ?2 AND %s > ?1",
				      d->start, d->end);
	else if (w)
		n += (size_t)snprintf(sql + n, sizeof(sql) - n, " AND %s >= ?1 AND %s < ?2",
				      d->start, d->start);
	if (by_time)
		n += (size_t)snprintf(sql + n, sizeof(sql) - n, " ORDER BY %s%s",
				      per_proc ? "" : "proc_id, ", d->start);
	if (n >= sizeof(sql))
		return -EOVERFLOW;
	err = model_prepare(m, sql, &st);
	if (err)
		return err;
	if (w) {
		sqlite3_bind_int64(st, 1, w->begin_ns);
		sqlite3_bind_int64(st, 2, w->end_ns);
	}
	for (size_t i = 0; i < (per_proc ? m->nprocs : 1) && !err; i++) {
		if (per_proc) {
			if (!m->procs[i].selected || (one && m->procs[i].proc_id != w->proc_id))
				continue;
			sqlite3_reset(st);
			sqlite3_bind_int64(st, 3, m->procs[i].proc_id);
		}
		while ((r = store_step(m->db, st)) > 0) {
			const struct model_proc *p = model_selected(m, col_i64(st, 0));

			if (p && (err = row(m, p, st, cb, ctx)))
				break;
		}
		if (!err && r < 0)
			err = r;
	}
	sqlite3_finalize(st);
	return err;
}

static const char *domain_of(struct model *m, int64_t proc_id, int64_t id)
{
	return id == 0 ? NULL : model_string(m, proc_id, id);
}

/* A kernel's columns that both reads have (1-8); the rest unknown (-1). */
static struct model_kernel kernel_brief(struct model *m, const struct model_proc *p,
					sqlite3_stmt *st)
{
	return (struct model_kernel){
		.proc = p,
		.id = col_i64(st, 1),
		.device = col_i64(st, 2),
		.context = col_opt(st, 3),
		.stream = col_opt(st, 4),
		.correlation = col_i64(st, 5),
		.name = model_string(m, p->proc_id, col_i64(st, 6)),
		.start_ns = col_i64(st, 7),
		.end_ns = col_i64(st, 8),
		.grid = { -1, -1, -1 },
		.block = { -1, -1, -1 },
		.registers = -1,
		.static_smem = -1,
		.dynamic_smem = -1,
		.graph_id = -1,
	};
}

static int kernel_row(struct model *m, const struct model_proc *p, sqlite3_stmt *st, void *cb,
		      void *ctx)
{
	struct model_kernel k = kernel_brief(m, p, st);

	k.registers = col_opt(st, 15);
	k.static_smem = col_opt(st, 16);
	k.dynamic_smem = col_opt(st, 17);
	k.graph_id = col_opt(st, 18);
	for (int i = 0; i < 3; i++) {
		k.grid[i] = col_i64(st, 9 + i);
		k.block[i] = col_i64(st, 12 + i);
	}
	return ((int (*)(void *, const struct model_kernel *))cb)(ctx, &k);
}

static int kernel_brief_row(struct model *m, const struct model_proc *p, sqlite3_stmt *st,
			    void *cb, void *ctx)
{
	struct model_kernel k = kernel_brief(m, p, st);

	k.graph_id = col_opt(st, 9);
	return ((int (*)(void *, const struct model_kernel *))cb)(ctx, &k);
}

int model_kernels_each(struct model *m, const struct model_scan *w,
		       int (*cb)(void *ctx, const struct model_kernel *k), void *ctx)
{
	static const struct stream_def d = {
		"kernels",
		"id, device, context, stream, correlation, name_id, start_ns, end_ns, grid_x, grid_y,"
		" grid_z, block_x, block_y, block_z, registers, static_smem, dynamic_smem, graph_id",
		"start_ns", "end_ns", 2,
	};
	static const struct stream_def brief = {
		"kernels", "id, device, context, stream, correlation, name_id, start_ns, end_ns,"
		" graph_id", "start_ns", "end_ns", 2,
	};

	if (w && w->brief)
		return stream(m, w, &brief, kernel_brief_row, (void *)cb, ctx);
	return stream(m, w, &d, kernel_row, (void *)cb, ctx);
}

static int copy_row(struct model *m, const struct model_proc *p, sqlite3_stmt *st, void *cb,
		    void *ctx)
{
	const char *op = (const char *)sqlite3_column_text(st, 2);
	struct model_copy c = {
		.proc = p,
		.id = col_i64(st, 1),
		.memset = op && strcmp(op, "memset") == 0,
		.device = col_i64(st, 3),
		.context = col_opt(st, 4),
		.stream = col_opt(st, 5),
		.correlation = col_i64(st, 6),
		.start_ns = col_i64(st, 7),
		.end_ns = col_i64(st, 8),
		.bytes = col_i64(st, 9),
		.kind = (const char *)sqlite3_column_text(st, 10),
		.src_kind = (const char *)sqlite3_column_text(st, 11),
		.dst_kind = (const char *)sqlite3_column_text(st, 12),
		.value = col_i64(st, 13),
	};

	(void)m;
	if (c.memset)
		c.kind = NULL;
	return ((int (*)(void *, const struct model_copy *))cb)(ctx, &c);
}

int model_copies_each(struct model *m, const struct model_scan *w,
		      int (*cb)(void *ctx, const struct model_copy *c), void *ctx)
{
	static const struct stream_def d = {
		"gpu_copies",
		"id, op, device, context, stream, correlation, start_ns, end_ns, bytes, copy_kind,"
		" src_kind, dst_kind, value",
		"start_ns", "end_ns", 2,
	};

	return stream(m, w, &d, copy_row, (void *)cb, ctx);
}

static int api_row(struct model *m, const struct model_proc *p, sqlite3_stmt *st, void *cb,
		   void *ctx)
{
	struct model_api a = {
		.proc = p,
		.id = col_i64(st, 1),
		.tid = col_i64(st, 2),
		.domain = (const char *)sqlite3_column_text(st, 3),
		.name = model_string(m, p->proc_id, col_i64(st, 4)),
		.cbid = col_i64(st, 5),
		.correlation = col_i64(st, 6),
		.start_ns = col_i64(st, 7),
		.end_ns = col_i64(st, 8),
		.stack_id = col_opt(st, 9),
		.pystack_id = col_opt(st, 10),
	};

	return ((int (*)(void *, const struct model_api *))cb)(ctx, &a);
}

int model_api_each(struct model *m, const struct model_scan *w,
		   int (*cb)(void *ctx, const struct model_api *a), void *ctx)
{
	static const struct stream_def d4 = {
		"gpu_api", "id, tid, domain, name_id, cbid, correlation, start_ns, end_ns, NULL, NULL",
		"start_ns", "end_ns", 2,
	};
	static const struct stream_def d5 = {
		"gpu_api", "id, tid, domain, name_id, cbid, correlation, start_ns, end_ns, stack_id,"
		" pystack_id", "start_ns", "end_ns", 5,
	};

	return stream(m, w, m->version >= 5 ? &d5 : &d4, api_row, (void *)cb, ctx);
}

static int cuda_call_row(struct model *m, const struct model_proc *p, sqlite3_stmt *st,
			 void *cb, void *ctx)
{
	struct model_cuda_call c = {
		.proc = p,
		.id = col_i64(st, 1),
		.tid = col_i64(st, 2),
		.fn = model_fn(m, col_i64(st, 3)),
		.start_ns = col_i64(st, 4),
		.end_ns = col_i64(st, 5),
		.ret = col_i64(st, 6),
		.device = col_opt(st, 7),
		.stream = col_i64(st, 8),
		.bytes = col_i64(st, 9),
		.copy_kind = col_opt(st, 10),
	};

	for (int i = 0; i < 3; i++) {
		c.grid[i] = col_i64(st, 11 + i);
		c.block[i] = col_i64(st, 14 + i);
	}
	c.stack_id = col_opt(st, 17);
	c.pystack_id = col_opt(st, 18);
	return ((int (*)(void *, const struct model_cuda_call *))cb)(ctx, &c);
}

int model_cuda_calls_each(struct model *m, const struct model_scan *w,
			  int (*cb)(void *ctx, const struct model_cuda_call *c), void *ctx)
{
	static const struct stream_def d1 = {
		"cuda_calls",
		"id, tid, fn_id, start_ns, end_ns, ret, device, stream, bytes, copy_kind, grid_x,"
		" grid_y, grid_z, block_x, block_y, block_z, NULL, NULL",
		"start_ns", "end_ns", 1,
	};
	static const struct stream_def d7 = {
		"cuda_calls",
		"id, tid, fn_id, start_ns, end_ns, ret, device, stream, bytes, copy_kind, grid_x,"
		" grid_y, grid_z, block_x, block_y, block_z, stack_id, pystack_id",
		"start_ns", "end_ns", MODEL_V_FINDINGS,
	};

	static const struct stream_def brief7 = {
		"cuda_calls",
		"id, tid, fn_id, start_ns, end_ns, ret, device, stream, bytes, copy_kind, -1, -1, -1,"
		" -1, -1, -1, stack_id, pystack_id",
		"start_ns", "end_ns", MODEL_V_FINDINGS,
	};

	if (w && w->brief && m->version >= MODEL_V_FINDINGS)
		return stream(m, w, &brief7, cuda_call_row, (void *)cb, ctx);
	return stream(m, w, m->version >= MODEL_V_FINDINGS ? &d7 : &d1, cuda_call_row, (void *)cb,
		      ctx);
}

static int cpu_row(struct model *m, const struct model_proc *p, sqlite3_stmt *st, void *cb,
		   void *ctx)
{
	struct model_cpu c = {
		.proc = p, .tid = col_i64(st, 1), .ts_ns = col_i64(st, 2), .cpu_ns = col_i64(st, 3),
		.wait_ns = col_opt(st, 4),
	};

	(void)m;
	return ((int (*)(void *, const struct model_cpu *))cb)(ctx, &c);
}

int model_cpu_each(struct model *m, const struct model_scan *w,
		   int (*cb)(void *ctx, const struct model_cpu *c), void *ctx)
{
	static const struct stream_def d = { "cpu_time", "tid, ts_ns, cpu_ns, wait_ns", "ts_ns", NULL,
					     MODEL_V_FINDINGS };

	return stream(m, w, &d, cpu_row, (void *)cb, ctx);
}

int model_stack_site(struct model *m, int64_t proc_id, int64_t stack_id, int64_t pystack_id,
		     const char **native, const char **python)
{
	int64_t site, folded;
	int err = 0;

	*native = *python = NULL;
	if (stack_id < 0 && pystack_id < 0)
		return 0;
	if (!m->call_sites) {
		m->call_sites = calloc(1, sizeof(*m->call_sites));
		if (!m->call_sites)
			return -ENOMEM;
		err = sites_open(m->call_sites, m->db);
		if (err) {
			free(m->call_sites);
			m->call_sites = NULL;
			return err;
		}
	}
	if (stack_id >= 0)
		err = sites_of(m->call_sites, proc_id, stack_id, -1, &site, &folded);
	if (!err && stack_id >= 0)
		*native = m->call_sites->names.v[site];
	if (!err && pystack_id >= 0)
		err = sites_of(m->call_sites, proc_id, -1, pystack_id, &site, &folded);
	if (!err && pystack_id >= 0)
		*python = m->call_sites->names.v[site];
	return err;
}

static int range_row(struct model *m, const struct model_proc *p, sqlite3_stmt *st, void *cb,
		     void *ctx)
{
	const char *kind = (const char *)sqlite3_column_text(st, 3);
	struct model_range r = {
		.proc = p,
		.id = col_i64(st, 1),
		.tid = col_i64(st, 2),
		.push = kind && strcmp(kind, "push") == 0,
		.domain = domain_of(m, p->proc_id, col_i64(st, 4)),
		.name = model_string(m, p->proc_id, col_i64(st, 5)),
		.start_ns = col_i64(st, 6),
		.end_ns = col_opt(st, 7),
		.depth = col_i64(st, 8),
		.parent_id = col_opt(st, 9),
	};

	return ((int (*)(void *, const struct model_range *))cb)(ctx, &r);
}

int model_ranges_each(struct model *m, const struct model_scan *w,
		      int (*cb)(void *ctx, const struct model_range *r), void *ctx)
{
	static const struct stream_def d = {
		"ranges", "id, tid, kind, domain_id, name_id, start_ns, end_ns, depth, parent_id",
		"start_ns", "coalesce(end_ns, 9223372036854775807)", 2,
	};

	return stream(m, w, &d, range_row, (void *)cb, ctx);
}

static int marker_row(struct model *m, const struct model_proc *p, sqlite3_stmt *st, void *cb,
		      void *ctx)
{
	struct model_marker k = {
		.proc = p,
		.tid = col_i64(st, 1),
		.domain = domain_of(m, p->proc_id, col_i64(st, 2)),
		.name = model_string(m, p->proc_id, col_i64(st, 3)),
		.ns = col_i64(st, 4),
	};

	return ((int (*)(void *, const struct model_marker *))cb)(ctx, &k);
}

int model_markers_each(struct model *m, const struct model_scan *w,
		       int (*cb)(void *ctx, const struct model_marker *k), void *ctx)
{
	static const struct stream_def d = {
		"markers", "tid, domain_id, name_id, ts_ns", "ts_ns", NULL, 2,
	};

	return stream(m, w, &d, marker_row, (void *)cb, ctx);
}

static int window_row(struct model *m, const struct model_proc *p, sqlite3_stmt *st, void *cb,
		      void *ctx)
{
	struct model_window g = {
		.proc = p,
		.start_ns = col_i64(st, 1),
		.end_ns = col_i64(st, 2),
		.calls = col_i64(st, 3),
	};

	(void)m;
	return ((int (*)(void *, const struct model_window *))cb)(ctx, &g);
}

int model_windows_each(struct model *m, const struct model_scan *w,
		       int (*cb)(void *ctx, const struct model_window *g), void *ctx)
{
	static const struct stream_def d = {
		"gpu_windows", "start_ns, end_ns, calls", "start_ns", "end_ns", 4,
	};

	return stream(m, w, &d, window_row, (void *)cb, ctx);
}
