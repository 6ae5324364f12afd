/*
 * shimmer export: the command, the processes it selects, the one clock,
 * the buffered writer; see export.h.
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
#include "present.h"
#include "store.h"
#include "utf8.h"

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
	*w = (struct xout){ .f = f, .cap = f ? 1u << 20 : 1u << 16 };
	w->buf = malloc(w->cap);
	return w->buf ? 0 : -ENOMEM;
}

void xout_flush(struct xout *w)
{
	if (!w->f)
		return;
	if (w->n && fwrite(w->buf, 1, w->n, w->f) != w->n)
		w->err = 1;
	w->written += w->n;
	w->n = 0;
}

void xout_room(struct xout *w, size_t n)
{
	size_t cap = w->cap;
	char *b;

	if (w->f) {
		xout_flush(w);
		return;
	}
	while (cap < w->n + n)
		cap *= 2;
	b = realloc(w->buf, cap);
	if (!b) {
		w->err = 1;
		return;
	}
	w->buf = b;
	w->cap = cap;
}

int xout_finish(struct xout *w)
{
	int mem = !w->f;

	xout_flush(w);
	if (w->f && fflush(w->f))
		w->err = 1;
	free(w->buf);
	w->buf = NULL;
	return w->err ? (mem ? -ENOMEM : -EIO) : 0;
}

void xout_str(struct xout *w, const char *s)
{
	xout_mem(w, s, strlen(s));
}

void xout_u64(struct xout *w, uint64_t v)
{
	static const char pairs[] =
		"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
		"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
		"8081828384858687888990919293949596979899";
	char tmp[24];
	int i = sizeof(tmp);

	/* two digits a division: a CSV row or trace event has several numbers */
	while (v >= 100) {
		unsigned d = (unsigned)(v % 100);

		v /= 100;
		tmp[--i] = pairs[2 * d + 1];
		tmp[--i] = pairs[2 * d];
	}
	if (v >= 10) {
		tmp[--i] = pairs[2 * v + 1];
		tmp[--i] = pairs[2 * v];
	} else {
		tmp[--i] = (char)('0' + v);
	}
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
	size_t n, i = 0;

	if (!s) {
		xout_lit(w, "null");
		return;
	}
	n = strlen(s);
	xout_lit(w, "\"");
	/* runs of plain text at once: names are mostly plain */
	while (i < n) {
		size_t plain = fmt_json_plain(s + i, n - i, 0), len;
		char e[FMT_JSON_CHAR_MAX];

		xout_mem(w, s + i, plain);
		i += plain;
		if (i < n) {
			i += fmt_json_char(s + i, n - i, 0, e, &len);
			xout_mem(w, e, len);
		}
	}
	xout_lit(w, "\"");
}

void xout_csv(struct xout *w, const char *s)
{
	const unsigned char *p = (const unsigned char *)s, *end;
	int quote;

	if (!s)
		return;
	end = p + strlen(s);
	quote = fmt_csv_quoted(s);
	if (!quote) { /* ASCII (most names): as it is */
		const unsigned char *q = p;

		while (q < end && *q < 0x80)
			q++;
		if (q == end) {
			xout_mem(w, s, (size_t)(end - p));
			return;
		}
	}
	/* as fmt_csv() writes it: RFC 4180, U+FFFD for what is not UTF-8,
	 * a ' before what a spreadsheet would run */
	if (quote)
		xout_lit(w, "\"");
	if (fmt_csv_guarded(s))
		xout_lit(w, "'");
	while (p < end) {
		size_t k = utf8_len(p, (size_t)(end - p));

		if (k == 0) {
			xout_lit(w, "\xef\xbf\xbd");
			p++;
			continue;
		}
		if (*p == '"')
			xout_lit(w, "\"");
		xout_mem(w, (const char *)p, k);
		p += k;
	}
	if (quote)
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

	/* no process selected: procs is NULL, which bsearch may not be given */
	return x->nprocs ? bsearch(&k, x->procs, x->nprocs, sizeof(k), cmp_proc) : NULL;
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

/* ---- the command ---- */

/*
 * A heap aggregated at ingest (SHIMMER_MALLOC=all's default, schema 9)
 * keeps a row only for each block that lived past heap_totals.row_ns or was
 * never freed: the chrome and csv event logs hold those blocks alone, so
 * each such process is named, once, with what it holds.  (folded and
 * speedscope weigh from the aggregates: complete.)
 */
static int warn_aggregated(const struct export *x)
{
	sqlite3_stmt *st = NULL;
	int r, err;

	if (x->schema < 9)
		return 0;
	err = store_prepare(x->db, "SELECT t.proc_id, t.allocs, t.row_ns,"
				   " (SELECT count(*) FROM allocations a WHERE a.proc_id = t.proc_id"
				   "  AND a.space = 'host')"
				   " FROM heap_totals t ORDER BY t.proc_id", &st);
	if (err)
		return err;
	while ((r = store_step(x->db, st)) > 0) {
		const struct xproc *p = export_proc(x, sqlite3_column_int64(st, 0));

		/* SHIMMER_HEAP_ROWS=both kept every row */
		if (p && sqlite3_column_int64(st, 3) < sqlite3_column_int64(st, 1))
			cli_warn("pid %lld: its host heap was aggregated as recorded (SHIMMER_MALLOC=all):"
				 " %lld of its %lld allocations are events here (those that lived past"
				 " %.3g s or were never freed); record with SHIMMER_HEAP_ROWS=all for"
				 " every one",
				 (long long)p->pid, (long long)sqlite3_column_int64(st, 3),
				 (long long)sqlite3_column_int64(st, 1),
				 (double)sqlite3_column_int64(st, 2) / 1e9);
	}
	sqlite3_finalize(st);
	return r < 0 ? r : 0;
}

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
		"  -o FILE          write to FILE, not standard output (never a store; '-':\n"
		"                   standard output)\n"
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
	struct cli_args a = CLI_ARGS(cmd, argc, argv, &o->path, 1);
	const char *wname = NULL;
	int k, r;

	*o = (struct export_opts){ .pid = -1, .rank = -1, .begin_s = -1, .end_s = -1,
				   .max_mb = 500, .format = F_CHROME };
	while ((k = cli_next(&a)) == CLI_ARG_OPTION) {
		if ((r = cli_format_opt(&a, formats, &o->format)) ||
		    (r = cli_string_opt(&a, "-o", &o->out_path)) ||
		    (r = cli_store_pid_opt(&a, "--pid", &o->pid)) ||
		    (r = cli_int_opt(&a, "--rank", &o->rank)) ||
		    (r = cli_number_opt(&a, "--begin", &o->begin_s)) ||
		    (r = cli_number_opt(&a, "--end", &o->end_s)) ||
		    (r = cli_number_opt(&a, "--max-mb", &o->max_mb)) ||
		    (r = cli_string_opt(&a, "--weight", &wname))) {
			if (r < 0)
				return CLI_EXIT_USAGE;
			continue;
		}
		if (cli_store_arg(&a))
			return CLI_EXIT_USAGE;
	}
	if (k != CLI_ARG_END)
		return k;
	/* "-o -": standard output, as most tools read it */
	if (o->out_path && strcmp(o->out_path, "-") == 0)
		o->out_path = NULL;
	if (o->out_path && cli_output_check(cmd, o->out_path, &o->path, 1))
		return CLI_EXIT_USAGE;
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
	/* The model warned when --pid or --rank matched nothing, or the
	 * store holds no process. */
	place(&x);
	/* what the files miss, on stderr (each file holds its data alone;
	 * the trace says it inside too) */
	if (o.format == F_CHROME || o.format == F_CSV) {
		present_warn(x.m, 1, o.format == F_CHROME ? EXPORT_LOST_CHROME : EXPORT_LOST_CSV,
			     o.format == F_CHROME ? EXPORT_CUT_CHROME : EXPORT_CUT_CSV);
		err = warn_aggregated(&x);
		if (err)
			goto out;
	} else {
		/* the stacks' names that never reached the store, said with
		 * the memory weights' lines, or alone */
		err = model_load_unnamed(x.m);
		if (err)
			goto out;
		if (o.weight == XW_GPU_TIME)
			for (size_t i = 0; i < model_nprocs(x.m); i++)
				if (model_proc(x.m, i)->selected)
					present_warn_unnamed(model_proc(x.m, i));
		/* the memory weights' lines: as `leaks` and `peak` --format
		 * folded say what they miss (allocated: lower bounds) */
		if (o.weight != XW_GPU_TIME && x.schema >= 3)
			present_warn_folded(x.m, o.weight != XW_ALLOCATED);
		/* gpu-time's: its lines' kernels and launches (a full stack
		 * table is said with the share it touches, by the weight) */
		if (o.weight == XW_GPU_TIME || o.weight == XW_ALL)
			present_warn(x.m, 1, EXPORT_LOST_GPU, EXPORT_CUT_GPU);
	}
	if (o.out_path && !(out = cli_output_open(o.out_path))) {
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
