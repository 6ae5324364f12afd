/*
 * shimmer export: the command, the processes it selects, the one clock,
 * the buffered writer and the CSV event log; see export.h.
 *
 * The clock: times in the store are each host's CLOCK_MONOTONIC.  Each
 * host's processes are placed on the wall clock by the earliest of them
 * (processes.start_wall_ns was read with start_ns), so processes of one
 * host keep their exact relative times and hosts are aligned as well as
 * their wall clocks are; the export's 0 is the first selected process's
 * start.  --begin/--end are seconds on that clock.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "export.h"
#include "fmt.h"
#include "store.h"

enum { F_CHROME, F_CSV, F_FOLDED, F_SPEEDSCOPE };
static const char *const formats[] = { "chrome", "csv", "folded", "speedscope", NULL };
static const char *const weights[] = { "allocated", "leaked", "peak", "gpu-time", "all", NULL };

const char *export_weight_name(enum export_weight wt)
{
	return weights[wt];
}

/* ---- buffered output ---- */

int xout_init(struct xout *w, FILE *f)
{
	*w = (struct xout){ .f = f, .cap = 1u << 20 };
	w->buf = malloc(w->cap);
	return w->buf ? 0 : -ENOMEM;
}

void xout_flush(struct xout *w)
{
	if (w->n && fwrite(w->buf, 1, w->n, w->f) != w->n)
		w->err = 1;
	w->written += w->n;
	w->n = 0;
}

int xout_finish(struct xout *w)
{
	xout_flush(w);
	if (fflush(w->f))
		w->err = 1;
	free(w->buf);
	w->buf = NULL;
	return w->err ? -EIO : 0;
}

void xout_str(struct xout *w, const char *s)
{
	xout_mem(w, s, strlen(s));
}

void xout_u64(struct xout *w, uint64_t v)
{
	char tmp[24];
	int i = sizeof(tmp);

	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	xout_mem(w, tmp + i, sizeof(tmp) - (size_t)i);
}

void xout_i64(struct xout *w, int64_t v)
{
	if (v < 0) {
		xout_lit(w, "-");
		xout_u64(w, (uint64_t)0 - (uint64_t)v);
	} else {
		xout_u64(w, (uint64_t)v);
	}
}

void xout_us(struct xout *w, int64_t ns)
{
	uint64_t a;
	char frac[4];

	if (ns < 0) {
		xout_lit(w, "-");
		a = (uint64_t)0 - (uint64_t)ns;
	} else {
		a = (uint64_t)ns;
	}
	xout_u64(w, a / 1000);
	frac[0] = '.';
	frac[1] = (char)('0' + a % 1000 / 100);
	frac[2] = (char)('0' + a % 100 / 10);
	frac[3] = (char)('0' + a % 10);
	xout_mem(w, frac, 4);
}

void xout_double(struct xout *w, double v)
{
	char tmp[40];
	int n;

	if (!isfinite(v))
		v = 0;
	n = snprintf(tmp, sizeof(tmp), "%.17g", v);
	xout_mem(w, tmp, (size_t)n);
}

void xout_json(struct xout *w, const char *s)
{
	static const char hex[] = "0123456789abcdef";

	if (!s) {
		xout_lit(w, "null");
		return;
	}
	xout_lit(w, "\"");
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		char e[6] = { '\\', 'u', '0', '0', 0, 0 };

		if (*p == '"' || *p == '\\') {
			e[1] = (char)*p;
			xout_mem(w, e, 2);
		} else if (*p < 0x20 || *p == 0x7f) {
			e[4] = hex[*p >> 4];
			e[5] = hex[*p & 15];
			xout_mem(w, e, 6);
		} else {
			xout_mem(w, (const char *)p, 1);
		}
	}
	xout_lit(w, "\"");
}

void xout_csv(struct xout *w, const char *s)
{
	if (!s)
		return;
	if (!strpbrk(s, ",\"\r\n")) {
		xout_str(w, s);
		return;
	}
	xout_lit(w, "\"");
	for (; *s; s++) {
		if (*s == '"')
			xout_lit(w, "\"");
		xout_mem(w, s, 1);
	}
	xout_lit(w, "\"");
}

/* ---- processes and the clock ---- */

static int cmp_proc(const void *a, const void *b)
{
	const struct xproc *x = a, *y = b;

	return x->proc_id < y->proc_id ? -1 : x->proc_id > y->proc_id;
}

const struct xproc *export_proc(const struct export *x, int64_t proc_id)
{
	struct xproc k = { .proc_id = proc_id };

	return bsearch(&k, x->procs, x->nprocs, sizeof(k), cmp_proc);
}

static const char *base_name(const char *path)
{
	const char *s = path ? strrchr(path, '/') : NULL;

	return s ? s + 1 : path ? path : "?";
}

/* The model's selected processes, with what the export adds to them. */
static int load_procs(struct export *x)
{
	size_t cap = 0;
	int err;

	for (size_t i = 0; i < model_nprocs(x->m); i++) {
		const struct model_proc *mp = model_proc(x->m, i);
		struct xproc *p;
		char label[512];

		if (!mp->selected)
			continue;
		err = array_grow(&x->procs, &cap, x->nprocs, sizeof(*x->procs));
		if (err)
			return err;
		p = &x->procs[x->nprocs++];
		*p = (struct xproc){
			.mp = mp,
			.proc_id = mp->proc_id,
			.pid = mp->pid,
			.rank = mp->rank,
			.start_ns = mp->start_ns,
			.offset_ns = mp->start_wall_ns - mp->start_ns,
			.end_ns = mp->end_ns,
			.sampled = mp->sampling != NULL,
			.gpu_scale = mp->sampling && mp->sampling->scale > 0 ? mp->sampling->scale : 1,
		};
		p->exe = mp->exe ? strdup(mp->exe) : NULL;
		p->host = mp->host ? strdup(mp->host) : NULL;
		if (p->rank >= 0)
			snprintf(label, sizeof(label), "%.400s rank %lld", base_name(p->exe),
				 (long long)p->rank);
		else
			snprintf(label, sizeof(label), "%.400s", base_name(p->exe));
		p->label = strdup(label);
		if (!p->label || (mp->exe && !p->exe) || (mp->host && !p->host))
			return -ENOMEM;
	}
	return 0;
}

/* One wall-clock offset per host (its earliest process's), the origin,
 * the trace pids and the time window of each process. */
static void place(struct export *x)
{
	const struct export_opts *o = x->o;

	x->origin_ns = INT64_MAX;
	for (size_t i = 0; i < x->nprocs; i++) {
		struct xproc *p = &x->procs[i];
		int64_t first_wall = p->start_ns + p->offset_ns, off = p->offset_ns;

		for (size_t j = 0; j < x->nprocs; j++) {
			const struct xproc *q = &x->procs[j];
			int same = (!p->host && !q->host) ||
				   (p->host && q->host && strcmp(p->host, q->host) == 0);

			if (same && q->start_ns + q->offset_ns < first_wall) {
				first_wall = q->start_ns + q->offset_ns;
				off = q->offset_ns;
			}
		}
		p->offset_ns = off;
	}
	for (size_t i = 0; i < x->nprocs; i++)
		if (x->procs[i].start_ns + x->procs[i].offset_ns < x->origin_ns)
			x->origin_ns = x->procs[i].start_ns + x->procs[i].offset_ns;
	for (size_t i = 0; i < x->nprocs; i++) {
		struct xproc *p = &x->procs[i];
		int shared = 0;

		for (size_t j = 0; j < x->nprocs; j++)
			shared |= j != i && x->procs[j].pid == p->pid;
		/* above any pid Linux hands out, so never a real process's */
		p->trace_pid = shared ? (int64_t)(1 << 22) + p->proc_id : p->pid;
		/* the process's own clock: export time - offset */
		p->begin_abs = o->begin_s < 0 ? INT64_MIN
			       : x->origin_ns + llround(o->begin_s * 1e9) - p->offset_ns;
		p->end_abs = o->end_s < 0 ? INT64_MAX
			     : x->origin_ns + llround(o->end_s * 1e9) - p->offset_ns;
	}
}

static void free_procs(struct export *x)
{
	for (size_t i = 0; i < x->nprocs; i++) {
		free(x->procs[i].exe);
		free(x->procs[i].host);
		free(x->procs[i].label);
	}
	free(x->procs);
}

/* ---- csv ---- */

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

static int names_open(struct names *n, sqlite3 *db)
{
	memset(n, 0, sizeof(*n));
	n->db = db;
	n->ids.item_size = sizeof(struct name_item);
	return store_prepare(db, "SELECT coalesce(demangled, text) FROM strings"
			     " WHERE proc_id = ?1 AND id = ?2", &n->st);
}

static void names_close(struct names *n)
{
	sqlite3_finalize(n->st);
	map_free(&n->ids);
	strtab_free(&n->text);
}

struct csv_row {
	const char *kind, *name;
	const struct xproc *p;
	int64_t tid, device, stream, begin, end, bytes, corr;
	int has_tid, has_device, has_stream, has_end, has_bytes, has_corr;
};

static void csv_opt(struct xout *w, int has, int64_t v)
{
	xout_lit(w, ",");
	if (has)
		xout_i64(w, v);
}

static void csv_write(const struct export *x, struct xout *w, const struct csv_row *r)
{
	xout_str(w, r->kind);
	xout_lit(w, ",");
	xout_csv(w, r->name);
	xout_lit(w, ",");
	xout_i64(w, r->p->pid);
	csv_opt(w, r->p->rank >= 0, r->p->rank);
	csv_opt(w, r->has_tid, r->tid);
	csv_opt(w, r->has_device, r->device);
	csv_opt(w, r->has_stream, r->stream);
	csv_opt(w, 1, r->begin + r->p->offset_ns - x->origin_ns);
	csv_opt(w, r->has_end, r->end + r->p->offset_ns - x->origin_ns);
	csv_opt(w, r->has_bytes, r->bytes);
	csv_opt(w, r->has_corr, r->corr);
	xout_lit(w, "\n");
}

/* One table's rows: sql's columns are proc_id, start, end (maybe NULL),
 * then what fill() reads. */
struct csv_table {
	const char *kind;
	int min_schema;
	const char *sql;
	void (*fill)(struct csv_row *r, sqlite3_stmt *st, struct names *n, int *err);
};

static int64_t col_or(sqlite3_stmt *st, int c, int *has)
{
	*has = sqlite3_column_type(st, c) != SQLITE_NULL;
	return *has ? sqlite3_column_int64(st, c) : 0;
}

static void fill_cuda(struct csv_row *r, sqlite3_stmt *st, struct names *n, int *err)
{
	(void)n;
	(void)err;
	r->name = (const char *)sqlite3_column_text(st, 3);
	r->tid = col_or(st, 4, &r->has_tid);
	r->device = col_or(st, 5, &r->has_device);
	r->stream = col_or(st, 6, &r->has_stream);
	r->bytes = col_or(st, 7, &r->has_bytes);
}

static void fill_api(struct csv_row *r, sqlite3_stmt *st, struct names *n, int *err)
{
	r->name = name_of(n, r->p->proc_id, sqlite3_column_int64(st, 3), err);
	r->tid = col_or(st, 4, &r->has_tid);
	r->corr = col_or(st, 5, &r->has_corr);
}

static void fill_kernel(struct csv_row *r, sqlite3_stmt *st, struct names *n, int *err)
{
	r->name = name_of(n, r->p->proc_id, sqlite3_column_int64(st, 3), err);
	r->device = col_or(st, 4, &r->has_device);
	r->stream = col_or(st, 5, &r->has_stream);
	r->corr = col_or(st, 6, &r->has_corr);
}

static void fill_copy(struct csv_row *r, sqlite3_stmt *st, struct names *n, int *err)
{
	(void)n;
	(void)err;
	r->kind = (const char *)sqlite3_column_text(st, 3);
	r->name = (const char *)sqlite3_column_text(st, 4);
	r->device = col_or(st, 5, &r->has_device);
	r->stream = col_or(st, 6, &r->has_stream);
	r->bytes = col_or(st, 7, &r->has_bytes);
	r->corr = col_or(st, 8, &r->has_corr);
}

static void fill_sync(struct csv_row *r, sqlite3_stmt *st, struct names *n, int *err)
{
	(void)n;
	(void)err;
	r->name = (const char *)sqlite3_column_text(st, 3);
	r->stream = col_or(st, 4, &r->has_stream);
	r->corr = col_or(st, 5, &r->has_corr);
}

static void fill_named_tid(struct csv_row *r, sqlite3_stmt *st, struct names *n, int *err)
{
	r->name = name_of(n, r->p->proc_id, sqlite3_column_int64(st, 3), err);
	r->tid = col_or(st, 4, &r->has_tid);
}

static void fill_window(struct csv_row *r, sqlite3_stmt *st, struct names *n, int *err)
{
	(void)st;
	(void)n;
	(void)err;
	r->name = "GPU sampling window";
}

static void fill_alloc(struct csv_row *r, sqlite3_stmt *st, struct names *n, int *err)
{
	(void)n;
	(void)err;
	r->name = (const char *)sqlite3_column_text(st, 3);
	r->tid = col_or(st, 4, &r->has_tid);
	r->device = col_or(st, 5, &r->has_device);
	r->bytes = col_or(st, 6, &r->has_bytes);
}

static const struct csv_table csv_tables[] = {
	{ "cuda", 1, "SELECT c.proc_id, c.start_ns, c.end_ns, f.name, c.tid, c.device, c.stream,"
		     " c.bytes FROM cuda_calls c LEFT JOIN functions f USING (fn_id)", fill_cuda },
	{ "api", 2, "SELECT proc_id, start_ns, end_ns, name_id, tid, correlation FROM gpu_api",
	  fill_api },
	{ "kernel", 2, "SELECT proc_id, start_ns, end_ns, name_id, device, stream, correlation"
		       " FROM kernels", fill_kernel },
	{ "copy", 2, "SELECT proc_id, start_ns, end_ns, op, coalesce(copy_kind, op), device,"
		     " stream, bytes, correlation FROM gpu_copies", fill_copy },
	{ "sync", 2, "SELECT proc_id, start_ns, end_ns, type, stream, correlation FROM gpu_syncs",
	  fill_sync },
	{ "range", 2, "SELECT proc_id, start_ns, end_ns, name_id, tid FROM ranges",
	  fill_named_tid },
	{ "marker", 2, "SELECT proc_id, ts_ns, ts_ns, name_id, tid FROM markers", fill_named_tid },
	{ "window", 4, "SELECT proc_id, start_ns, end_ns FROM gpu_windows", fill_window },
	{ "alloc", 1, "SELECT a.proc_id, a.alloc_ns, a.free_ns, f.name, a.alloc_tid, a.device,"
		      " a.size FROM allocations a LEFT JOIN functions f ON f.fn_id = a.alloc_fn",
	  fill_alloc },
};

static int export_csv(struct export *x, struct xout *w)
{
	struct names n;
	int err = names_open(&n, x->db);

	xout_lit(w, "kind,name,pid,rank,tid,device,stream,begin_ns,end_ns,bytes,correlation\n");
	for (size_t t = 0; !err && t < sizeof(csv_tables) / sizeof(csv_tables[0]); t++) {
		const struct csv_table *ct = &csv_tables[t];
		sqlite3_stmt *st = NULL;
		int r;

		if (x->schema < ct->min_schema)
			continue;
		err = store_prepare(x->db, ct->sql, &st);
		while (!err && (r = store_step(x->db, st)) > 0) {
			struct csv_row row = { .kind = ct->kind };
			int64_t begin = sqlite3_column_int64(st, 1);

			row.p = export_proc(x, sqlite3_column_int64(st, 0));
			if (!row.p)
				continue;
			row.begin = begin;
			row.end = col_or(st, 2, &row.has_end);
			if (!export_in(row.p, begin, row.has_end ? row.end : INT64_MAX))
				continue;
			ct->fill(&row, st, &n, &err);
			if (!err)
				csv_write(x, w, &row);
		}
		if (!err && r < 0)
			err = r;
		sqlite3_finalize(st);
	}
	names_close(&n);
	return err;
}

/* ---- the command ---- */

static int export_main(int argc, char **argv);

const struct command export_command = {
	.name = "export",
	.brief = "write a store as a Chrome trace, CSV, folded stacks or speedscope",
	.usage =
		"usage: shimmer export DB [--format chrome|csv|folded|speedscope] [-o FILE]\n"
		"                         [--pid PID] [--rank RANK] [--begin S] [--end S]\n"
		"                         [--weight allocated|leaked|peak|gpu-time|all]\n"
		"                         [--max-mb N]\n"
		"\n"
		"Write the store DB in a format other tools open (docs/usage.md):\n"
		"  chrome      Trace Event Format JSON for ui.perfetto.dev and chrome://tracing\n"
		"              (default): a process per traced process, a track per thread\n"
		"              and per GPU stream, flows from launches to kernels, memory\n"
		"              counters, the GPU sampling windows\n"
		"  csv         one row per event: kind,name,pid,rank,tid,device,stream,\n"
		"              begin_ns,end_ns,bytes,correlation\n"
		"  folded      collapsed stacks for flamegraph.pl, inferno or speedscope\n"
		"  speedscope  speedscope's own format (a profile per process, memory, weight)\n"
		"\n"
		"options:\n"
		"  -o FILE          write to FILE, not standard output\n"
		"  --pid PID        only the processes with this pid\n"
		"  --rank RANK      only the processes of this rank\n"
		"  --begin S, --end S  only events overlapping [S, E], in seconds from the\n"
		"                   start of the first process selected (chrome, csv, gpu-time)\n"
		"  --weight W       folded and speedscope: allocated bytes (default), leaked\n"
		"                   bytes, bytes live at the peak, or GPU time (ns) by the\n"
		"                   code that launched the kernels; speedscope: all\n"
		"  --max-mb N       chrome: refuse a file estimated above N MB (500)\n",
	.main = export_main,
};

static int parse(int argc, char **argv, struct export_opts *o)
{
	const struct command *cmd = &export_command;
	const char *wname = NULL;

	*o = (struct export_opts){ .pid = -1, .rank = -1, .begin_s = -1, .end_s = -1,
				   .max_mb = 500, .format = F_CHROME };
	for (int i = 1; i < argc; i++) {
		int r;

		if (cli_is_help(argv[i]))
			return cli_help(cmd);
		if ((r = cli_format_opt(cmd, argc, argv, &i, formats, &o->format)) ||
		    (r = cli_string_opt(cmd, argc, argv, &i, "-o", &o->out_path)) ||
		    (r = cli_int_opt(cmd, argc, argv, &i, "--pid", &o->pid)) ||
		    (r = cli_int_opt(cmd, argc, argv, &i, "--rank", &o->rank)) ||
		    (r = cli_number_opt(cmd, argc, argv, &i, "--begin", &o->begin_s)) ||
		    (r = cli_number_opt(cmd, argc, argv, &i, "--end", &o->end_s)) ||
		    (r = cli_number_opt(cmd, argc, argv, &i, "--max-mb", &o->max_mb)) ||
		    (r = cli_string_opt(cmd, argc, argv, &i, "--weight", &wname))) {
			if (r < 0)
				return CLI_EXIT_USAGE;
			continue;
		}
		if (cli_store_arg(cmd, argv[i], &o->path))
			return CLI_EXIT_USAGE;
	}
	if (!o->path)
		return cli_usage_error(cmd, "no store given");
	if (o->begin_s >= 0 && o->end_s >= 0 && o->end_s < o->begin_s)
		return cli_usage_error(cmd, "--end is before --begin");
	if (wname) {
		int f;

		for (f = 0; weights[f] && strcmp(weights[f], wname); f++)
			;
		if (!weights[f])
			return cli_usage_error(cmd, "unknown weight '%s'", wname);
		o->weight = (enum export_weight)f;
		o->weight_given = 1;
	}
	if (o->weight_given && o->format != F_FOLDED && o->format != F_SPEEDSCOPE)
		return cli_usage_error(cmd, "--weight is for the folded and speedscope formats");
	if (o->weight == XW_ALL && o->format != F_SPEEDSCOPE)
		return cli_usage_error(cmd, "--weight all is for the speedscope format (folded lines"
				       " carry one weight)");
	if ((o->format == F_FOLDED || o->format == F_SPEEDSCOPE) && o->weight != XW_GPU_TIME &&
	    (o->begin_s >= 0 || o->end_s >= 0))
		return cli_usage_error(cmd, "--begin/--end select a time span; the memory weights"
				       " describe the whole run (use --weight gpu-time)");
	return -1;
}

static int export_main(int argc, char **argv)
{
	struct model_filter f = model_filter_all();
	struct export_opts o;
	struct export x = { .o = &o };
	struct xout w = { 0 };
	FILE *out = stdout;
	int err, rc = parse(argc, argv, &o);

	if (rc >= 0)
		return rc;
	f.pid = o.pid;
	f.rank = o.rank;
	if (model_open(o.path, &f, &x.m) < 0)
		return CLI_EXIT_ERROR;
	x.db = model_db(x.m);
	x.schema = model_schema_version(x.m);
	err = load_procs(&x);
	if (err)
		goto out;
	/* The model warned when --pid or --rank matched nothing. */
	if (!x.nprocs && o.pid < 0 && o.rank < 0)
		cli_warn("no process selected in %s", o.path);
	place(&x);
	if (o.out_path && !(out = fopen(o.out_path, "w"))) {
		cli_error("cannot write %s: %s", o.out_path, strerror(errno));
		err = -EIO;
		goto out;
	}
	err = xout_init(&w, out);
	if (err)
		goto out;
	switch (o.format) {
	case F_CHROME:
		err = export_chrome(&x, &w);
		break;
	case F_CSV:
		err = export_csv(&x, &w);
		break;
	case F_FOLDED:
		err = export_folded(&x, &w);
		break;
	default:
		err = export_speedscope(&x, &w);
		break;
	}
	if (xout_finish(&w) < 0 && !err) {
		cli_error("writing %s: %s", o.out_path ? o.out_path : "standard output",
			  strerror(errno ? errno : EIO));
		err = -EIO;
	}
out:
	if (out && out != stdout && fclose(out) && !err) {
		cli_error("writing %s: %s", o.out_path, strerror(errno));
		err = -EIO;
	}
	/* a refused or failed file is not left half written */
	if (err && o.out_path && out)
		remove(o.out_path);
	free_procs(&x);
	model_close(x.m);
	if (err == -ENOMEM)
		cli_error("out of memory");
	return err ? CLI_EXIT_ERROR : CLI_EXIT_OK;
}
