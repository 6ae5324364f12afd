/*
 * shimmer peak; see peak.h.
 *
 * The peak is the one `summary` finds: the running sum of allocations and
 * frees in time order, frees first on equal times (a block freed and
 * another allocated at the same instant are not both live); the first
 * instant the sum is highest wins.  It is found without sorting the table
 * (see sweep() below).  The blocks
 * live at that instant T are those with alloc_ns <= T < free_ns (or never
 * freed): every allocation at T counts, since the frees at T came first and
 * each allocation only raises the sum.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fmt.h"
#include "map.h"
#include "peak.h"
#include "store.h"

struct peak_span;

struct peak_item {
	struct map_key key; /* proc, label */
	double peak;
	int64_t at;
	int seen;
	struct peak_span *span;
};

struct site_item {
	struct map_key key; /* proc, label, site (or folded stack) */
	double count, bytes;
};

struct peak {
	struct sites s;
	struct map peaks;
	struct map at_sites;
	struct map at_folds;
};

/*
 * Finding the peaks without sorting allocations.  Pass 1 adds each
 * event's weight into one of PEAK_BUCKETS time buckets of its (process,
 * memory), spread over the process's lifetime: the net change and the
 * bytes allocated per bucket.  The live bytes at each bucket's end are
 * then exact values the sum took, so their maximum L is a lower bound of
 * the peak; within bucket b the sum never exceeds its value at the start
 * plus the bytes allocated in b.  Only buckets where that bound reaches L
 * can hold the peak: pass 2 keeps the events of those buckets, sorts them
 * (time, frees first) and replays them from each bucket's start value.
 * Times map to buckets monotonically (times outside the lifetime go to the
 * first or last), so the replay sees events in true time order.
 */
#define PEAK_BUCKETS 8192

struct bucket {
	double net;   /* change over the bucket */
	double added; /* bytes allocated in it */
	double start; /* live bytes at its start (after pass 1) */
	int candidate;
};

struct event {
	int64_t t;
	double w; /* negative for a free */
};

struct peak_span {
	int64_t lo, hi;
	struct bucket *b;
	struct event *ev;
	size_t nev, cap;
};

static size_t bucket_of(const struct peak_span *sp, int64_t t)
{
	double x;

	if (t <= sp->lo)
		return 0;
	if (t >= sp->hi)
		return PEAK_BUCKETS - 1;
	x = (double)(t - sp->lo) / (double)(sp->hi - sp->lo) * PEAK_BUCKETS;
	return x >= PEAK_BUCKETS - 1 ? PEAK_BUCKETS - 1 : (size_t)x;
}

/* The span of (proc, label), made on first use. */
static struct peak_span *span_get(struct peak *pk, struct peak_item *p)
{
	struct peak_span *sp;
	const struct site_proc *pr;

	if (p->span)
		return p->span;
	pr = sites_proc(&pk->s, p->key.proc_id);
	sp = calloc(1, sizeof(*sp));
	if (!sp)
		return NULL;
	sp->b = calloc(PEAK_BUCKETS, sizeof(*sp->b));
	if (!sp->b) {
		free(sp);
		return NULL;
	}
	sp->lo = pr->start_ns;
	sp->hi = pr->end_ns > pr->start_ns ? pr->end_ns : pr->start_ns + 1;
	p->span = sp;
	return sp;
}

static const char events_sql[] = "SELECT proc_id, space, device, weight, alloc_ns, free_ns"
				 " FROM allocations";

/* Pass 1 (pass 0) or 2 (pass 1) over one row. */
static int event_row(struct peak *pk, sqlite3_stmt *st, int pass)
{
	struct map_key k = { sqlite3_column_int64(st, 0), 0, 0 };
	int has_free = sqlite3_column_type(st, 5) != SQLITE_NULL;
	double w = sqlite3_column_double(st, 3);
	struct peak_span *sp;
	struct peak_item *p;
	int err;

	if (!sites_proc(&pk->s, k.proc_id))
		return 0;
	err = sites_label(&pk->s, (const char *)sqlite3_column_text(st, 1),
			  sqlite3_column_int64(st, 2), &k.a);
	if (err)
		return err;
	p = map_get(&pk->peaks, &k);
	if (!p || !(sp = span_get(pk, p)))
		return -ENOMEM;
	for (int side = 0; side <= has_free; side++) {
		int64_t t = sqlite3_column_int64(st, 4 + side);
		struct bucket *b = &sp->b[bucket_of(sp, t)];

		if (pass == 0) {
			b->net += side ? -w : w;
			b->added += side ? 0 : w;
			p->seen = 1;
		} else if (b->candidate) {
			err = array_grow(&sp->ev, &sp->cap, sp->nev, sizeof(*sp->ev));
			if (err)
				return err;
			sp->ev[sp->nev++] = (struct event){ t, side ? -w : w };
		}
	}
	return 0;
}

static int cmp_event(const void *x, const void *y)
{
	const struct event *a = x, *b = y;

	if (a->t != b->t)
		return a->t < b->t ? -1 : 1;
	return (a->w >= 0) - (b->w >= 0); /* frees first */
}

/* Between the passes: bucket start values and the candidates. */
static void mark_candidates(struct peak_span *sp)
{
	double cur = 0, low = 0;
	int first = 1;

	for (size_t i = 0; i < PEAK_BUCKETS; i++) {
		sp->b[i].start = cur;
		cur += sp->b[i].net;
		if (sp->b[i].added > 0 || sp->b[i].net != 0) {
			if (first || cur > low)
				low = cur;
			first = 0;
		}
	}
	for (size_t i = 0; i < PEAK_BUCKETS; i++)
		sp->b[i].candidate = (sp->b[i].added > 0 || sp->b[i].net != 0) &&
				     sp->b[i].start + sp->b[i].added >= low;
}

/* After pass 2: replay the candidates' events in time order. */
static void replay(struct peak_item *p)
{
	struct peak_span *sp = p->span;
	size_t e = 0;

	qsort(sp->ev, sp->nev, sizeof(*sp->ev), cmp_event);
	p->seen = 0;
	while (e < sp->nev) {
		double cur = sp->b[bucket_of(sp, sp->ev[e].t)].start;
		size_t b = bucket_of(sp, sp->ev[e].t);

		for (; e < sp->nev && bucket_of(sp, sp->ev[e].t) == b; e++) {
			cur += sp->ev[e].w;
			if (!p->seen || cur > p->peak) {
				p->peak = cur;
				p->at = sp->ev[e].t;
				p->seen = 1;
			}
		}
	}
}

static int sweep(struct peak *pk)
{
	sqlite3_stmt *st = NULL;
	int err, r;

	err = store_prepare(pk->s.db, events_sql, &st);
	for (int pass = 0; !err && pass < 2; pass++) {
		sqlite3_reset(st);
		while ((r = store_step(pk->s.db, st)) > 0)
			if ((err = event_row(pk, st, pass)))
				break;
		if (!err)
			err = r;
		for (size_t i = 0; !err && pass == 0 && i < pk->peaks.n; i++)
			mark_candidates(((struct peak_item *)map_item(&pk->peaks, i))->span);
	}
	for (size_t i = 0; !err && i < pk->peaks.n; i++)
		replay(map_item(&pk->peaks, i));
	sqlite3_finalize(st);
	return err;
}

static const char live_sql[] = "SELECT proc_id, space, device, stack_id, pystack_id, weight,"
			       " alloc_ns, free_ns, size FROM allocations";

static int live_row(void *ctx, sqlite3_stmt *st)
{
	struct peak *pk = ctx;
	struct map_key k, pk_key, fk;
	const struct peak_item *p;
	struct site_item *si, *fi;
	double w = sqlite3_column_double(st, 5);
	int64_t folded;
	int err;

	if (!sites_proc(&pk->s, sqlite3_column_int64(st, 0)))
		return 0;
	err = sites_row(&pk->s, st, 0, &k, &folded);
	if (err)
		return err;
	pk_key = (struct map_key){ k.proc_id, k.a, 0 };
	p = map_find(&pk->peaks, &pk_key);
	if (!p || sqlite3_column_int64(st, 6) > p->at ||
	    (sqlite3_column_type(st, 7) != SQLITE_NULL && sqlite3_column_int64(st, 7) <= p->at))
		return 0;
	fk = (struct map_key){ k.proc_id, k.a, folded };
	si = map_get(&pk->at_sites, &k);
	fi = si ? map_get(&pk->at_folds, &fk) : NULL;
	if (!fi)
		return -ENOMEM;
	si->count += sites_count(w, sqlite3_column_int64(st, 8));
	si->bytes += w;
	fi->count += sites_count(w, sqlite3_column_int64(st, 8));
	fi->bytes += w;
	return 0;
}

/* ---- output -------------------------------------------------------------------- */

static const struct peak *sort_ctx;

static int cmp_site(const void *x, const void *y)
{
	const struct site_item *a = *(struct site_item *const *)x, *b = *(struct site_item *const *)y;
	int c;

	c = sites_cmp_key(&sort_ctx->s, &a->key, &b->key);
	if (c)
		return c;
	if (a->bytes != b->bytes)
		return a->bytes > b->bytes ? -1 : 1;
	return a->key.b < b->key.b ? -1 : a->key.b > b->key.b;
}

static int write_report(struct peak *pk, FILE *out, enum mem_format fmt)
{
	const struct map *m = fmt == MEM_FOLDED ? &pk->at_folds : &pk->at_sites;
	struct site_item **v = calloc(m->n + 1, sizeof(*v));
	int first_proc = 1, any_est = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < m->n; i++)
		v[i] = map_item(m, i);
	sort_ctx = pk;
	qsort(v, m->n, sizeof(*v), cmp_site);
	if (fmt == MEM_CSV)
		fputs("pid,proc_id,device,peak_bytes,peak_at_ns,estimated,count,bytes,frame\n", out);
	if (fmt == MEM_JSON)
		fputs("{\"peaks\": [", out);
	for (size_t i = 0; i < m->n; i++) {
		const struct site_item *si = v[i];
		const struct site_proc *p = sites_proc(&pk->s, si->key.proc_id);
		struct map_key k = { si->key.proc_id, si->key.a, 0 };
		const struct peak_item *pi = map_find(&pk->peaks, &k);
		const char *label = pk->s.labels.v[si->key.a];
		int est = sites_estimated(&pk->s, p, si->key.a);
		int new_peak = i == 0 || v[i - 1]->key.proc_id != si->key.proc_id ||
			       v[i - 1]->key.a != si->key.a;
		char b[FMT_UNIT_MAX], t[FMT_UNIT_MAX];

		if (fmt == MEM_FOLDED) {
			if (sites_round(si->bytes) > 0)
				fprintf(out, "pid %lld;%s;%s %lld\n", (long long)p->pid, label,
					pk->s.folded.v[si->key.b], sites_round(si->bytes));
		} else if (fmt == MEM_CSV) {
			fprintf(out, "%lld,%lld,", (long long)p->pid, (long long)p->proc_id);
			fmt_csv(out, label);
			fprintf(out, ",%lld,%lld,%d,%lld,%lld,", sites_round(pi->peak),
				(long long)(pi->at - p->start_ns), est, sites_round(si->count),
				sites_round(si->bytes));
			fmt_csv(out, pk->s.names.v[si->key.b]);
			fputc('\n', out);
		} else if (fmt == MEM_JSON) {
			if (new_peak) {
				fprintf(out, "%s\n  {\"proc_id\": %lld, \"pid\": %lld, \"device\": ",
					first_proc ? "" : "]},", (long long)p->proc_id, (long long)p->pid);
				fmt_json(out, label);
				fprintf(out, ", \"peak_bytes\": %lld, \"peak_at_ns\": %lld,"
					" \"estimated\": %s, \"sites\": [",
					sites_round(pi->peak), (long long)(pi->at - p->start_ns),
					est ? "true" : "false");
				first_proc = 0;
			} else {
				fputc(',', out);
			}
			fprintf(out, "\n    {\"count\": %lld, \"bytes\": %lld, \"frame\": ",
				sites_round(si->count), sites_round(si->bytes));
			fmt_json(out, pk->s.names.v[si->key.b]);
			fputc('}', out);
		} else {
			any_est |= est;
			if (new_peak) {
				if (i == 0 || v[i - 1]->key.proc_id != si->key.proc_id) {
					fputc('\n', out);
					sites_heading(out, p);
				}
				fmt_bytes(b, sizeof(b), pi->peak);
				fmt_duration(t, sizeof(t), (double)(pi->at - p->start_ns));
				fprintf(out, "  %s: peak %s%s at %s after start\n", label, est ? "~" : "",
					b, t);
				fprintf(out, "    %8s  %-11s %s\n", "COUNT", "BYTES", "CALL SITE");
			}
			fmt_bytes(b, sizeof(b), si->bytes);
			fprintf(out, "    %8lld %s%-11s %s\n", sites_round(si->count), est ? "~" : " ", b,
				pk->s.names.v[si->key.b]);
		}
	}
	if (fmt == MEM_JSON)
		fputs(first_proc ? "]}\n" : "]}\n]}\n", out);
	if (any_est)
		fputs("\n~: estimated from sampled allocations\n", out);
	free(v);
	return 0;
}

int peak_write(sqlite3 *db, FILE *out, enum mem_format fmt, int64_t pid)
{
	struct peak pk = { 0 };
	int err;

	pk.peaks.item_size = sizeof(struct peak_item);
	pk.at_sites.item_size = sizeof(struct site_item);
	pk.at_folds.item_size = sizeof(struct site_item);
	err = sites_open(&pk.s, db, pid);
	if (!err)
		err = sweep(&pk);
	if (!err)
		err = store_each_row(db, live_sql, live_row, &pk);
	if (!err)
		err = write_report(&pk, out, fmt);
	for (size_t i = 0; i < pk.peaks.n; i++) {
		struct peak_item *p = map_item(&pk.peaks, i);

		if (p->span) {
			free(p->span->b);
			free(p->span->ev);
			free(p->span);
		}
	}
	map_free(&pk.peaks);
	map_free(&pk.at_sites);
	map_free(&pk.at_folds);
	sites_close(&pk.s);
	return err;
}

/* ---- the command ------------------------------------------------------------------ */

static int peak_main(int argc, char **argv);

const struct command peak_command = {
	.name = "peak",
	.brief = "peak live memory per process and device, and the call sites holding it",
	.usage =
		"usage: shimmer peak DB [--format table|csv|json|folded] [--pid PID]\n"
		"\n"
		"Per process and memory (host heap, cuda:N, pinned, managed:N): the\n"
		"highest live bytes, when it was reached (after the process started),\n"
		"and the call sites of the blocks live at that instant, with their count\n"
		"and bytes.  Host bytes in sample mode are estimates, marked ~.\n"
		"See docs/usage.md for the columns.\n"
		"\n"
		"  --format table|csv|json   output (default table)\n"
		"  --format folded           'outer;...;inner BYTES' lines of the bytes\n"
		"                            live at each peak, for flame graph tools\n"
		"  --pid PID                 only the processes with this pid\n"
		"\n"
		"exit codes: 0 ok, 1 error (missing or unreadable store, no stacks), 2 usage\n",
	.main = peak_main,
};

static const char *const peak_formats[] = {
	[MEM_TABLE] = "table", [MEM_CSV] = "csv", [MEM_JSON] = "json", [MEM_FOLDED] = "folded",
	NULL,
};

static int peak_main(int argc, char **argv)
{
	int fmt = MEM_TABLE;
	const char *path = NULL;
	int64_t pid = -1;
	sqlite3 *db;
	int r, rc;

	for (int i = 1; i < argc; i++) {
		if (cli_is_help(argv[i]))
			return cli_help(&peak_command);
		if ((r = cli_format_opt(&peak_command, argc, argv, &i, peak_formats, &fmt)) != 0) {
			if (r < 0)
				return CLI_EXIT_USAGE;
		} else if ((r = cli_int_opt(&peak_command, argc, argv, &i, "--pid", &pid)) != 0) {
			if (r < 0)
				return CLI_EXIT_USAGE;
		} else if ((rc = cli_store_arg(&peak_command, argv[i], &path)) != 0) {
			return rc;
		}
	}
	if (!path)
		return cli_usage_error(&peak_command, "no store given");
	if (store_open(path, &db) < 0)
		return CLI_EXIT_ERROR;
	rc = sites_result(peak_write(db, stdout, fmt, pid));
	sqlite3_close(db);
	return rc;
}
