/*
 * shimmer temporary; see temporary.h.
 *
 * Lifetime is free_ns - alloc_ns, both taken when the calls started.  The
 * median is over the stored rows (in sample mode, the sampled ones: an
 * estimate, like the counts and bytes there); with an even number of rows
 * it is the mean of the two middle ones.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fmt.h"
#include "map.h"
#include "store.h"
#include "temporary.h"

struct temp_item {
	struct map_key key; /* proc, label, site */
	double count, bytes;
	int64_t *life;
	size_t n, cap;
	double median;
};

struct temporary {
	struct sites s;
	struct map items;
};

static const char temp_sql[] =
	"SELECT proc_id, space, device, stack_id, pystack_id, weight, free_ns - alloc_ns, size"
	" FROM allocations WHERE free_ns IS NOT NULL AND free_ns - alloc_ns <= ?";

static int temp_row(struct temporary *t, sqlite3_stmt *st)
{
	struct map_key k;
	double w = sqlite3_column_double(st, 5);
	struct temp_item *it;
	int64_t folded;
	int err;

	if (!sites_proc(&t->s, sqlite3_column_int64(st, 0)))
		return 0;
	err = sites_row(&t->s, st, 0, &k, &folded);
	if (err)
		return err;
	it = map_get(&t->items, &k);
	if (!it)
		return -ENOMEM;
	err = array_grow(&it->life, &it->cap, it->n, sizeof(*it->life));
	if (err)
		return err;
	it->life[it->n++] = sqlite3_column_int64(st, 6);
	it->count += sites_count(w, sqlite3_column_int64(st, 7));
	it->bytes += w;
	return 0;
}

static int cmp_i64(const void *x, const void *y)
{
	int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;

	return a < b ? -1 : a > b;
}

static double median(int64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_i64);
	return n % 2 ? (double)v[n / 2] : ((double)v[n / 2 - 1] + (double)v[n / 2]) / 2;
}

static const struct temporary *sort_ctx;

static int cmp_item(const void *x, const void *y)
{
	const struct temp_item *a = *(struct temp_item *const *)x, *b = *(struct temp_item *const *)y;
	int c;

	c = sites_cmp_key(&sort_ctx->s, &a->key, &b->key);
	if (c)
		return c;
	if (a->count != b->count)
		return a->count > b->count ? -1 : 1;
	return strcmp(sort_ctx->s.names.v[a->key.b], sort_ctx->s.names.v[b->key.b]);
}

static int write_report(struct temporary *t, FILE *out, enum mem_format fmt, int64_t max_ns)
{
	struct temp_item **v = calloc(t->items.n + 1, sizeof(*v));
	char b[FMT_UNIT_MAX], d[FMT_UNIT_MAX];
	int any_est = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < t->items.n; i++) {
		v[i] = map_item(&t->items, i);
		v[i]->median = median(v[i]->life, v[i]->n);
	}
	sort_ctx = t;
	qsort(v, t->items.n, sizeof(*v), cmp_item);
	if (fmt == MEM_CSV)
		fputs("pid,proc_id,device,count,bytes,estimated,median_lifetime_ns,frame\n", out);
	else if (fmt == MEM_JSON)
		fprintf(out, "{\"max_lifetime_ns\": %lld, \"sites\": [", (long long)max_ns);
	else
		fprintf(out, "allocations freed within %s of being made\n",
			fmt_duration(d, sizeof(d), (double)max_ns));
	for (size_t i = 0; i < t->items.n; i++) {
		const struct temp_item *it = v[i];
		const struct site_proc *p = sites_proc(&t->s, it->key.proc_id);
		const char *label = t->s.labels.v[it->key.a];
		int est = sites_estimated(&t->s, p, it->key.a);

		if (fmt == MEM_CSV) {
			fprintf(out, "%lld,%lld,", (long long)p->pid, (long long)p->proc_id);
			fmt_csv(out, label);
			fprintf(out, ",%lld,%lld,%d,%.17g,", sites_round(it->count),
				sites_round(it->bytes), est, it->median);
			fmt_csv(out, t->s.names.v[it->key.b]);
			fputc('\n', out);
		} else if (fmt == MEM_JSON) {
			fprintf(out, "%s\n  {\"proc_id\": %lld, \"pid\": %lld, \"device\": ", i ? "," : "",
				(long long)p->proc_id, (long long)p->pid);
			fmt_json(out, label);
			fprintf(out, ", \"count\": %lld, \"bytes\": %lld, \"estimated\": %s,"
				" \"median_lifetime_ns\": %.17g, \"frame\": ",
				sites_round(it->count), sites_round(it->bytes), est ? "true" : "false",
				it->median);
			fmt_json(out, t->s.names.v[it->key.b]);
			fputc('}', out);
		} else {
			if (i == 0 || v[i - 1]->key.proc_id != it->key.proc_id) {
				fputc('\n', out);
				sites_heading(out, p);
				fprintf(out, "  %-10s %10s  %-11s %-11s %s\n", "MEMORY", "COUNT", "BYTES",
					"MEDIAN LIFE", "CALL SITE");
			}
			any_est |= est;
			fmt_bytes(b, sizeof(b), it->bytes);
			fmt_duration(d, sizeof(d), it->median);
			fprintf(out, "  %-10s %s%9lld %s%-11s %-11s %s\n", label, est ? "~" : " ",
				sites_round(it->count), est ? "~" : " ", b, d, t->s.names.v[it->key.b]);
		}
	}
	if (fmt == MEM_JSON)
		fputs("\n]}\n", out);
	if (any_est)
		fputs("\n~: estimated from sampled allocations\n", out);
	free(v);
	return 0;
}

int temporary_write(sqlite3 *db, FILE *out, enum mem_format fmt, int64_t pid,
		    int64_t max_lifetime_ns)
{
	struct temporary t = { 0 };
	sqlite3_stmt *st = NULL;
	int err, r;

	t.items.item_size = sizeof(struct temp_item);
	err = sites_open(&t.s, db, pid);
	if (!err)
		err = store_prepare(db, temp_sql, &st);
	if (err)
		goto out;
	sqlite3_bind_int64(st, 1, max_lifetime_ns);
	while ((r = store_step(db, st)) > 0) {
		err = temp_row(&t, st);
		if (err)
			goto out;
	}
	err = r < 0 ? r : write_report(&t, out, fmt, max_lifetime_ns);
out:
	sqlite3_finalize(st);
	for (size_t i = 0; i < t.items.n; i++)
		free(((struct temp_item *)map_item(&t.items, i))->life);
	map_free(&t.items);
	sites_close(&t.s);
	return err;
}

/* ---- the command ------------------------------------------------------------------ */

static int temporary_main(int argc, char **argv);

const struct command temporary_command = {
	.name = "temporary",
	.brief = "allocations freed soon after they were made, by call site",
	.usage =
		"usage: shimmer temporary DB [--max-lifetime-ms N] [--format table|csv|json]\n"
		"                            [--pid PID]\n"
		"\n"
		"Per process, memory (host heap, cuda:N, pinned, managed:N) and call\n"
		"site: the allocations freed at most N ms after they were made (default\n"
		"1 ms), with their count, bytes and median lifetime.  Host figures in\n"
		"sample mode are estimates, marked ~.  See docs/usage.md for the columns.\n"
		"\n"
		"  --max-lifetime-ms N       the longest lifetime counted (default 1)\n"
		"  --format table|csv|json   output (default table)\n"
		"  --pid PID                 only the processes with this pid\n"
		"\n"
		"exit codes: 0 ok, 1 error (missing or unreadable store, no stacks), 2 usage\n",
	.main = temporary_main,
};

static const char *const temporary_formats[] = {
	[MEM_TABLE] = "table", [MEM_CSV] = "csv", [MEM_JSON] = "json", NULL,
};

static int temporary_main(int argc, char **argv)
{
	int fmt = MEM_TABLE;
	double ms = TEMPORARY_MAX_LIFETIME_MS, v;
	const char *path = NULL;
	int64_t pid = -1;
	sqlite3 *db;
	int r, rc;

	for (int i = 1; i < argc; i++) {
		if (cli_is_help(argv[i]))
			return cli_help(&temporary_command);
		if ((r = cli_format_opt(&temporary_command, argc, argv, &i, temporary_formats, &fmt)) != 0) {
			if (r < 0)
				return CLI_EXIT_USAGE;
		} else if ((r = cli_int_opt(&temporary_command, argc, argv, &i, "--pid", &pid)) != 0) {
			if (r < 0)
				return CLI_EXIT_USAGE;
		} else if ((r = cli_number_opt(&temporary_command, argc, argv, &i,
						 "--max-lifetime-ms", &v)) != 0) {
			if (r < 0)
				return CLI_EXIT_USAGE;
			ms = v;
		} else if ((rc = cli_store_arg(&temporary_command, argv[i], &path)) != 0) {
			return rc;
		}
	}
	if (!path)
		return cli_usage_error(&temporary_command, "no store given");
	if (ms > 9e12)
		return cli_usage_error(&temporary_command, "--max-lifetime-ms is too large");
	if (store_open(path, &db) < 0)
		return CLI_EXIT_ERROR;
	rc = sites_result(temporary_write(db, stdout, fmt, pid, (int64_t)(ms * 1e6)));
	sqlite3_close(db);
	return rc;
}
