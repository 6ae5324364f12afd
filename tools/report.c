/*
 * shimmer report: the command and the page; see report.h.
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "compare.h"
#include "emit.h"
#include "findings.h"
#include "fmt.h"
#include "present.h"
#include "report.h"

extern const char report_js[];
extern const char report_css[];

#define CHART_LIB "chart.umd.min.js"

/* What lost events and a cut recording do to the page's figures. */
#define REPORT_LOST "the figures, charts and flame graphs of this process below miss" \
	" them (counts and times are lower bounds; memory over time, its peak and what was" \
	" live may be wrong either way)"
#define REPORT_CUT "the figures, charts and flame graphs of this process below stop there"

static void html_plain(FILE *out, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		switch (s[i]) {
		case '<': fputs("&lt;", out); break;
		case '>': fputs("&gt;", out); break;
		case '&': fputs("&amp;", out); break;
		case '"': fputs("&quot;", out); break;
		default: fputc(s[i], out);
		}
	}
}

void report_html(FILE *out, const char *s)
{
	size_t n = s ? strlen(s) : 0, i = 0;

	/* Names from the store escaped as in every text for people (fmt.h). */
	while (i < n) {
		size_t plain = esc_plain(s + i, n - i, 0), len;
		char e[ESC_CHAR_MAX];

		html_plain(out, s + i, plain);
		i += plain;
		if (i < n) {
			i += esc_char(s + i, n - i, e, &len);
			html_plain(out, e, len);
		}
	}
}

/* ---- the assets ---------------------------------------------------------------- */

/* PREFIX/share/shimmer of this shimmer: bin/'s sibling (the build tree's
 * build/share/shimmer, an installed PREFIX/share/shimmer). */
static int share_dir(char *buf, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0)
		return -errno;
	exe[n] = 0;
	snprintf(buf, len, "%s/../share/shimmer", dirname(exe));
	return 0;
}

#ifndef SHIMMER_DATADIR
#define SHIMMER_DATADIR "/usr/local/share/shimmer"
#endif

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = malloc((size_t)n + 1)) && fread(buf, 1, (size_t)n, f) == (size_t)n) {
		buf[n] = 0;
		*len = (size_t)n;
	} else {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

struct assets {
	char dir[PATH_MAX];
	char *lib, *lic_chart, *lic_color;
	size_t lib_len, len1, len2;
};

static int assets_load(struct assets *a)
{
	char path[PATH_MAX + 64];
	char first[PATH_MAX + 64];
	int err = share_dir(a->dir, sizeof(a->dir));

	if (err)
		return err;
	snprintf(path, sizeof(path), "%s/" CHART_LIB, a->dir);
	a->lib = slurp(path, &a->lib_len);
	if (!a->lib) {
		/* then where make install put it (DATADIR, when not bin/'s sibling) */
		snprintf(first, sizeof(first), "%s", path);
		snprintf(a->dir, sizeof(a->dir), "%s", SHIMMER_DATADIR);
		snprintf(path, sizeof(path), "%s/" CHART_LIB, a->dir);
		a->lib = slurp(path, &a->lib_len);
	}
	if (!a->lib) {
		cli_error("the charting library is missing: %s, and %s (Chart.js from npm: run"
			  " .ci/install-deps, then make; make install copies it)", first, path);
		return -ENOENT;
	}
	snprintf(path, sizeof(path), "%s/chart.js.LICENSE.md", a->dir);
	a->lic_chart = slurp(path, &a->len1);
	snprintf(path, sizeof(path), "%s/kurkle-color.LICENSE.md", a->dir);
	a->lic_color = slurp(path, &a->len2);
	return 0;
}

static void assets_free(struct assets *a)
{
	free(a->lib);
	free(a->lic_chart);
	free(a->lic_color);
}

/* Text that goes inside a <script>: "</" is split so nothing can end it. */
static void script_text(FILE *out, const char *s)
{
	const char *p;

	while ((p = strstr(s, "</")) != NULL) {
		fwrite(s, 1, (size_t)(p - s), out);
		fputs("<\\/", out);
		s = p + 2;
	}
	fputs(s, out);
}

/* ---- sections ------------------------------------------------------------------ */

static void card(FILE *out, const char *label, const char *value, const char *note)
{
	fputs("<div class=\"card\"><div class=\"v\">", out);
	report_html(out, value);
	fputs("</div><div class=\"l\">", out);
	report_html(out, label);
	if (note) {
		fputs("<br>", out);
		report_html(out, note);
	}
	fputs("</div></div>", out);
}

static int headline(struct report *r)
{
	struct model_mem *const *mems;
	size_t nmems, nproc = 0, ngpu = 0, c[4];
	double wall = 0, busy = 0, span = 0, kernels = 0, dev_peak = 0, host_peak = 0;
	int64_t dropped = 0, cut = 0;
	int sampled = 0, host_est = 0, err;
	const struct model_steps *best = NULL;
	char b[3][FMT_UNIT_MAX], text[128], note[128];

	err = model_memories(r->m, &mems, &nmems);
	for (size_t i = 0; i < model_nprocs(r->m) && !err; i++) {
		const struct model_proc *p = model_proc(r->m, i);
		const struct model_steps *s;

		if (!p->selected)
			continue;
		nproc++;
		dropped += p->dropped;
		cut += p->cut;
		if (model_proc_wall(p) > wall)
			wall = model_proc_wall(p);
		if ((err = model_steps(r->m, p, NULL, &s)))
			break;
		if (s->n && (!best || s->n > best->n))
			best = s;
	}
	if (err)
		return err;
	for (size_t i = 0; i < r->f->nprocs; i++) {
		kernels += r->f->procs[i].kernel_count;
		busy += (double)r->f->procs[i].busy_ns;
		span += (double)r->f->procs[i].span_ns;
		sampled |= r->f->procs[i].sampled;
		ngpu++;
	}
	for (size_t i = 0; i < nmems; i++) {
		if (mems[i]->space == MODEL_HOST) {
			if (mems[i]->peak > host_peak) {
				host_peak = mems[i]->peak;
				host_est = mems[i]->estimated;
			}
		} else if (mems[i]->space == MODEL_DEVICE && mems[i]->peak > dev_peak) {
			dev_peak = mems[i]->peak;
		}
	}
	findings_count(r->f, c);
	fputs("<section id=\"headline\"><h2>The run</h2><div class=\"cards\">", r->out);
	snprintf(text, sizeof(text), "%zu", nproc);
	snprintf(note, sizeof(note), "%zu with GPU work", ngpu);
	card(r->out, "processes", text, ngpu ? note : "no GPU work recorded");
	card(r->out, "wall time (longest process)", fmt_duration(b[0], sizeof(b[0]), wall), NULL);
	if (span > 0) {
		snprintf(text, sizeof(text), "%.0f%%", 100 * busy / span);
		card(r->out, "GPU busy", text, sampled ? "inside the sampling windows" :
			     "of the time the steps used it");
	}
	snprintf(text, sizeof(text), "%s%.0f", sampled ? "~" : "", kernels);
	card(r->out, "kernels", text, sampled ? "estimated from sampling windows" : NULL);
	if (best) {
		snprintf(text, sizeof(text), "%s", fmt_duration(b[1], sizeof(b[1]), best->median_ns));
		snprintf(note, sizeof(note), "median of %zu '%.60s'", best->n, best->name);
		card(r->out, "step time", text, note);
	}
	if (dev_peak > 0)
		card(r->out, "peak device memory", fmt_bytes(b[2], sizeof(b[2]), dev_peak), NULL);
	if (host_peak > 0) {
		snprintf(text, sizeof(text), "%s%s", host_est ? "~" : "",
			 fmt_bytes(b[2], sizeof(b[2]), host_peak));
		card(r->out, "peak host memory", text, host_est ? "estimated from samples" : NULL);
	}
	snprintf(text, sizeof(text), "%zu / %zu / %zu", c[SEV_HIGH], c[SEV_MEDIUM], c[SEV_LOW]);
	card(r->out, "findings", text, "HIGH / MEDIUM / LOW");
	if (dropped) {
		snprintf(text, sizeof(text), "%lld", (long long)dropped);
		card(r->out, "events lost", text, "see the warnings below");
	}
	if (cut) {
		snprintf(text, sizeof(text), "%lld", (long long)cut);
		card(r->out, "recordings cut short", text, "the collector was lost: see below");
	}
	fputs("</div>", r->out);
	/* Above every figure, chart and flame graph below: one line per
	 * process and loss, as every command says it. */
	for (size_t i = 0; i < model_nprocs(r->m); i++) {
		const struct model_proc *p = model_proc(r->m, i);
		char line[PRESENT_LOST_LINE], who[256];

		if (!p->selected)
			continue;
		findings_proc_label(p, who, sizeof(who));
		if (p->cut) {
			fputs("<p class=\"note incomplete\">", r->out);
			report_html(r->out, who);
			fputs(": WARNING: ", r->out);
			report_html(r->out, PRESENT_CUT ": " REPORT_CUT);
			fputs("</p>", r->out);
		}
		if (present_lost_line(line, sizeof(line), p, 1, REPORT_LOST)) {
			fputs("<p class=\"note incomplete\">", r->out);
			report_html(r->out, who);
			fputs(": WARNING: ", r->out);
			report_html(r->out, line);
			fputs("</p>", r->out);
		}
		if (p->host_unseen) {
			fputs("<p class=\"note incomplete\">", r->out);
			report_html(r->out, who);
			fputs(": WARNING: ", r->out);
			report_html(r->out, p->host_unseen);
			fputs("</p>", r->out);
		}
	}
	/* Under every call site below (memory, launches, findings): one line
	 * per process whose stack table was full. */
	for (size_t i = 0; i < model_nprocs(r->m); i++) {
		const struct model_proc *p = model_proc(r->m, i);
		char line[PRESENT_STACKS_LINE], who[256];

		if (!p->selected || !present_stacks_line(line, sizeof(line), p))
			continue;
		fputs("<p class=\"note stacks-refused\">", r->out);
		report_html(r->out, findings_proc_label(p, who, sizeof(who)));
		fputs(": WARNING: ", r->out);
		report_html(r->out, line);
		fputs("</p>", r->out);
	}
	/* and whose names (frames, loaded objects) never reached the store */
	for (size_t i = 0; i < model_nprocs(r->m); i++) {
		const struct model_proc *p = model_proc(r->m, i);
		char line[PRESENT_UNNAMED_LINE], who[256];

		if (!p->selected || !present_unnamed_line(line, sizeof(line), p))
			continue;
		fputs("<p class=\"note unnamed\">", r->out);
		report_html(r->out, findings_proc_label(p, who, sizeof(who)));
		fputs(": WARNING: ", r->out);
		report_html(r->out, line);
		fputs("</p>", r->out);
	}
	fputs("</section>", r->out);
	return 0;
}

static void findings_html(struct report *r)
{
	const struct findings *f = r->f;
	char who[256];

	fputs("<section id=\"findings\"><h2>Findings</h2>", r->out);
	if (!f->n)
		fputs("<p>No rule fired on what was recorded.</p>", r->out);
	for (size_t i = 0; i < f->n; i++) {
		const struct finding *x = f->v[i];

		fprintf(r->out, "<div class=\"finding\" data-kind=\"%s\" data-severity=\"%s\">"
			"<div class=\"title\"><span class=\"sev %s\">%s</span><span class=\"kind\">%s</span>",
			x->kind, findings_severity_name(x->severity),
			findings_severity_name(x->severity), findings_severity_name(x->severity), x->kind);
		report_html(r->out, findings_proc_label(x->proc, who, sizeof(who)));
		fputs(": ", r->out);
		report_html(r->out, x->title);
		fputs("</div><dl><dt>evidence</dt><dd>", r->out);
		report_html(r->out, x->detail);
		if (x->items && x->nrows) {
			fputs("<table><tr>", r->out);
			for (size_t c = 0; c < x->items->ncols; c++) {
				const struct emit_col *col = &x->items->cols[c];

				if (col->in && !(col->in & EMIT_IN_TABLE))
					continue;
				fprintf(r->out, "<th%s>", col->type == EMIT_STR ? " class=\"t\"" : "");
				report_html(r->out, col->head ? col->head : col->key);
				fputs("</th>", r->out);
			}
			fputs("</tr>", r->out);
			for (size_t row = 0; row < x->nrows; row++) {
				fputs("<tr>", r->out);
				for (size_t c = 0; c < x->items->ncols; c++) {
					const struct emit_col *col = &x->items->cols[c];
					char cell[1024];

					if (col->in && !(col->in & EMIT_IN_TABLE))
						continue;
					fprintf(r->out, "<td%s>", col->type == EMIT_STR ? " class=\"t\"" : "");
					report_html(r->out, emit_cell(col, x->rows[row * x->items->ncols + c],
								      cell, sizeof(cell)));
					fputs("</td>", r->out);
				}
				fputs("</tr>", r->out);
			}
			fputs("</table>", r->out);
		}
		fputs("</dd><dt>coverage</dt><dd>", r->out);
		report_html(r->out, x->coverage);
		fputs("</dd><dt>advice</dt><dd>", r->out);
		report_html(r->out, x->advice);
		fputs("</dd></dl></div>", r->out);
	}
	if (f->nw) {
		fputs("<h3>Not judged</h3><ul>", r->out);
		for (size_t i = 0; i < f->nw; i++) {
			fputs("<li><code>", r->out);
			report_html(r->out, f->w[i].kind);
			fputs("</code> ", r->out);
			report_html(r->out, findings_proc_label(f->w[i].proc, who, sizeof(who)));
			fputs(": ", r->out);
			report_html(r->out, f->w[i].reason);
			fputs("</li>", r->out);
		}
		fputs("</ul>", r->out);
	}
	fputs("</section>", r->out);
}

static void chart(struct report *r, const char *id, const char *title, int has, const char *empty,
		  const char *note)
{
	fprintf(r->out, "<section id=\"%s\"><h2>%s</h2>", id, title);
	if (has)
		fprintf(r->out, "<div class=\"chart\"><canvas id=\"chart-%s\" data-chart=\"%s\">"
			"</canvas></div>", id, id);
	else
		fprintf(r->out, "<p class=\"note\">%s</p>", empty);
	if (note && has)
		fprintf(r->out, "<p class=\"note\">%s</p>", note);
	fputs("</section>", r->out);
}

static int ranks(struct report *r)
{
	struct model_mem *const *mems;
	size_t nmems, nrank = 0;
	int64_t last = INT64_MIN;
	int err = model_memories(r->m, &mems, &nmems);

	fputs("<section id=\"ranks\"><h2>Ranks</h2>", r->out);
	for (size_t i = 0; i < model_nprocs(r->m); i++) {
		const struct model_proc *p = model_proc(r->m, i);

		if (p->selected && p->rank >= 0 && p->rank != last) {
			nrank++;
			last = p->rank;
		}
	}
	if (err || nrank < 2) {
		fputs("<p class=\"note\">One rank or none: no per-rank table (ranks come from RANK,"
		      " as torchrun sets it).</p></section>", r->out);
		return err;
	}
	fputs("<table><tr><th>rank</th><th>pid</th><th class=\"t\">program</th><th>wall</th>"
	      "<th>steps</th><th>median step</th><th>GPU busy</th><th>compute</th>"
	      "<th>communication</th><th>copies</th><th>overlap</th><th>CPU blocked</th>"
	      "<th>peak device memory</th></tr>", r->out);
	for (size_t i = 0; i < model_nprocs(r->m) && !err; i++) {
		const struct model_proc *p = model_proc(r->m, i);
		const struct findings_proc *fp = NULL;
		const struct model_steps *s;
		char b[4][FMT_UNIT_MAX];
		double peak = 0, span;

		if (!p->selected || p->rank < 0 || (err = model_steps(r->m, p, NULL, &s)))
			continue;
		for (size_t k = 0; k < r->f->nprocs; k++)
			if (r->f->procs[k].p == p)
				fp = &r->f->procs[k];
		for (size_t k = 0; k < nmems; k++)
			if (mems[k]->proc == p && mems[k]->space == MODEL_DEVICE && mems[k]->peak > peak)
				peak = mems[k]->peak;
		span = fp && fp->span_ns ? (double)fp->span_ns : NAN;
		fprintf(r->out, "<tr><td>%lld</td><td>%lld</td><td class=\"t\">", (long long)p->rank,
			(long long)p->pid);
		report_html(r->out, p->exe_base);
		fprintf(r->out, "</td><td>%s</td><td>%zu</td><td>%s</td>",
			fmt_duration(b[0], sizeof(b[0]), model_proc_wall(p)), s->n,
			s->n ? fmt_duration(b[1], sizeof(b[1]), s->median_ns) : "-");
		if (fp && span > 0)
			fprintf(r->out, "<td>%.0f%%</td><td>%.0f%%</td><td>%.0f%%</td><td>%.0f%%</td>"
				"<td>%s</td><td>%s</td>", 100 * (double)fp->busy_ns / span,
				100 * (double)fp->compute_ns / span, 100 * (double)fp->comm_ns / span,
				100 * (double)fp->mem_ns / span,
				fp->comm_ns ? (snprintf(b[2], sizeof(b[2]), "%.0f%%",
							100.0 * (double)fp->overlap_ns /
								(double)fp->comm_ns), b[2]) : "-",
				fmt_duration(b[3], sizeof(b[3]), (double)fp->blocked_ns));
		else
			fputs("<td>-</td><td>-</td><td>-</td><td>-</td><td>-</td><td>-</td>", r->out);
		fprintf(r->out, "<td>%s</td></tr>", peak > 0 ? fmt_bytes(b[0], sizeof(b[0]), peak) : "-");
	}
	fputs("</table><p class=\"note\">GPU shares are of each process's span analysed (the"
	      " steps after the first and the work they launched; inside sampling windows when"
	      " sampled); overlap: the share of communication that compute kernels ran"
	      " under.</p></section>", r->out);
	return err;
}

static void footer(struct report *r, const struct assets *a)
{
	fputs("<footer><p>Made by shimmer (MIT License).  Charts drawn by Chart.js 4.6.1 (MIT"
	      " License, \xc2\xa9 Chart.js Contributors), which includes @kurkle/color (MIT License,"
	      " \xc2\xa9 Jukka Kurkela); both are inlined in this file.</p>", r->out);
	if (a->lic_chart || a->lic_color) {
		fputs("<details><summary>Licences</summary>", r->out);
		if (a->lic_chart) {
			/* shimmer's own files: their lines kept */
			fputs("<h3>Chart.js</h3><pre>", r->out);
			html_plain(r->out, a->lic_chart, strlen(a->lic_chart));
			fputs("</pre>", r->out);
		}
		if (a->lic_color) {
			fputs("<h3>@kurkle/color</h3><pre>", r->out);
			html_plain(r->out, a->lic_color, strlen(a->lic_color));
			fputs("</pre>", r->out);
		}
		fputs("</details>", r->out);
	}
	fputs("</footer>", r->out);
}

/* ---- the comparison (--baseline) ------------------------------------------------ */

/* The next CSV field of *p (RFC 4180, as emit writes it) into buf; *p
 * moves past its comma.  Returns 1 at the end of the line.  The ' that
 * fmt_csv() adds before a formula (fmt_csv_guarded()) is dropped. */
static int csv_field(const char **p, char *buf, size_t len)
{
	const char *s = *p;
	size_t n = 0;

	if (*s == '"') {
		for (s++; *s && !(*s == '"' && s[1] != '"'); s++) {
			if (*s == '"')
				s++;
			if (n + 1 < len)
				buf[n++] = *s;
		}
		if (*s == '"')
			s++;
		buf[n] = 0;
		if (buf[0] == '\'' && fmt_csv_guarded(buf))
			memmove(buf, buf + 1, n--);
	} else {
		for (; *s && *s != ',' && *s != '\n'; s++)
			if (n + 1 < len)
				buf[n++] = *s;
	}
	buf[n] = 0;
	if (*s == ',') {
		*p = s + 1;
		return 0;
	}
	*p = *s ? s + 1 : s;
	return 1;
}

static void compare_value(FILE *out, const char *unit, const char *v)
{
	char b[FMT_UNIT_MAX];
	double x;

	if (!*v) {
		fputs("-", out);
		return;
	}
	x = strtod(v, NULL);
	if (!strcmp(unit, "ns"))
		fputs(fmt_duration(b, sizeof(b), x), out);
	else if (!strcmp(unit, "bytes"))
		fputs(fmt_bytes(b, sizeof(b), x), out);
	else if (!strcmp(unit, "share"))
		fprintf(out, "%.1f%%", 100 * x);
	else
		fprintf(out, "%.0f", x);
}

/* `shimmer compare BASELINE DB`'s rows (its CSV) as a table: the figures
 * of each pair of processes that changed, and the process, steps, GPU and
 * memory figures whether they did or not.  Call sites are left out: in an
 * exact-mode run hundreds of them differ by a few blocks, and the
 * command's own table ranks them. */
static void compare_html(struct report *r, const char *base, const char *csv)
{
	const char *p = csv, *line;
	size_t shown = 0, hidden = 0, sites = 0;
	char head[16][256];
	int nh = 0;

	fputs("<section id=\"compare\"><h2>Compared with a baseline</h2><p class=\"note\">A: the"
	      " baseline, ", r->out);
	report_html(r->out, base);
	fputs("; B: this run (shimmer compare A B).  Rows that differ by more than a run differs"
	      " by itself are marked changed.</p><table><tr><th class=\"t\">pids</th>"
	      "<th class=\"t\">section</th><th class=\"t\">figure</th><th>A</th><th>B</th>"
	      "<th>ratio</th><th class=\"t\"></th></tr>", r->out);
	/* the header names the columns */
	while (nh < 16 && !csv_field(&p, head[nh], sizeof(head[nh])))
		nh++;
	nh++;
	while (*p) {
		char f[16][512];
		const char *unit = "", *a = "", *b = "", *ratio = "", *chg = "0", *sec = "", *name = "";
		const char *only = "", *pa = "", *pb = "";
		int n = 0;

		line = p;
		while (n < 16 && !csv_field(&p, f[n], sizeof(f[n])))
			n++;
		n++;
		if (p == line)
			break;
		for (int i = 0; i < n && i < nh; i++) {
			if (!strcmp(head[i], "unit"))
				unit = f[i];
			else if (!strcmp(head[i], "a"))
				a = f[i];
			else if (!strcmp(head[i], "b"))
				b = f[i];
			else if (!strcmp(head[i], "ratio"))
				ratio = f[i];
			else if (!strcmp(head[i], "changed"))
				chg = f[i];
			else if (!strcmp(head[i], "section"))
				sec = f[i];
			else if (!strcmp(head[i], "name"))
				name = f[i];
			else if (!strcmp(head[i], "only"))
				only = f[i];
			else if (!strcmp(head[i], "a_pid"))
				pa = f[i];
			else if (!strcmp(head[i], "b_pid"))
				pb = f[i];
		}
		if (!strcmp(sec, "sites")) {
			sites++;
			continue;
		}
		if (strcmp(chg, "1") && strcmp(sec, "process") && strcmp(sec, "steps") &&
		    strcmp(sec, "gpu") && strcmp(sec, "memory")) {
			hidden++;
			continue;
		}
		if (shown++ >= 300) {
			hidden++;
			continue;
		}
		fprintf(r->out, "<tr%s><td class=\"t\">", !strcmp(chg, "1") ? " class=\"changed\"" : "");
		report_html(r->out, pa);
		fputs("/", r->out);
		report_html(r->out, pb);
		fputs("</td><td class=\"t\">", r->out);
		report_html(r->out, sec);
		fputs("</td><td class=\"t\">", r->out);
		report_html(r->out, name);
		fputs("</td><td>", r->out);
		compare_value(r->out, unit, a);
		fputs("</td><td>", r->out);
		compare_value(r->out, unit, b);
		fputs("</td><td>", r->out);
		if (*ratio)
			fprintf(r->out, "%.2f", strtod(ratio, NULL));
		else
			fputs("-", r->out);
		fputs("</td><td class=\"t\">", r->out);
		if (*only)
			fprintf(r->out, "only in %s", only);
		else if (!strcmp(chg, "1"))
			fputs("changed", r->out);
		fputs("</td></tr>", r->out);
	}
	fprintf(r->out, "</table><p class=\"note\">%zu rows shown; %zu unchanged rows of other"
		" sections left out (shimmer compare lists them all)", shown, hidden);
	if (sites)
		fprintf(r->out, "; the call sites' %zu rows too (shimmer compare shows the ones"
			" that changed most)", sites);
	fputs(".</p></section>", r->out);
}

/* The comparison's CSV, from models of its own (compare reads the heap its
 * own way). */
static int compare_csv(const char *base, const char *path, const struct model_filter *flt,
		       char **csv)
{
	struct model *ma = NULL, *mb = NULL;
	size_t len = 0;
	FILE *mem;
	int err;

	if (model_open(base, flt, &ma) < 0 || model_open(path, flt, &mb) < 0) {
		model_close(ma);
		return -EIO;
	}
	mem = open_memstream(csv, &len);
	err = mem ? compare_write(ma, mb, base, path, mem, EMIT_CSV) : -ENOMEM;
	if (mem && fclose(mem) && !err)
		err = -ENOMEM;
	model_close(ma);
	model_close(mb);
	return err;
}

/* ---- the page ------------------------------------------------------------------ */

static int page(struct report *r, const char *path, const struct assets *a, const char *data,
		const char *base, const char *cmp)
{
	time_t now = time(NULL);
	char when[64];
	int err;

	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S %Z", localtime(&now));
	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
	      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
	      /* nothing may be fetched: the file stands alone */
	      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none';"
	      " script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">"
	      "<title>shimmer report: ", r->out);
	report_html(r->out, path);
	fputs("</title><style>", r->out);
	fputs(report_css, r->out);
	fputs("</style></head><body><header><h1>shimmer report</h1><p>", r->out);
	report_html(r->out, path);
	fprintf(r->out, " &middot; made %s</p><nav><a href=\"#headline\">run</a>"
		"<a href=\"#findings\">findings</a><a href=\"#steps\">steps</a>"
		"<a href=\"#kernels\">kernels</a><a href=\"#gpu\">GPU</a><a href=\"#memory\">memory</a>"
		"<a href=\"#sizes\">sizes</a>"
		"<a href=\"#flame-peak\">at the peak</a><a href=\"#flame-leaked\">leaked</a>"
		"<a href=\"#flame-allocated\">allocated</a>"
		"<a href=\"#ranks\">ranks</a><a href=\"#compare\">compare</a></nav></header><main>",
		when);
	err = headline(r);
	if (err)
		return err;
	findings_html(r);
	chart(r, "steps", "Step time", r->has_steps,
	      "No steps: mark each training step with a range (torch.cuda.nvtx.range_push/pop or"
	      " shimmer_range_push/pop).", "Each step's duration (the most frequent top-level range)"
	      " by its index; where there are many, each bucket's shortest and longest.");
	fputs("<section id=\"kernels\"><h2>Kernel time</h2>", r->out);
	if (r->has_kernels)
		fputs("<h3>By kernel</h3><div class=\"chart tall\"><canvas id=\"chart-kernels\""
		      " data-chart=\"kernels\"></canvas></div>", r->out);
	else
		fputs("<p class=\"note\">No kernel was recorded.</p>", r->out);
	if (r->has_sites)
		fputs("<h3>By the line that launched them</h3><div class=\"chart tall\"><canvas"
		      " id=\"chart-sites\" data-chart=\"sites\"></canvas></div><p class=\"note\">The"
		      " Python line where the launch had Python frames, else the native call site;"
		      " launch stacks are recorded inside GPU sampling windows (every launch with"
		      " SHIMMER_GPU=all); sampled processes' times are estimates.</p>", r->out);
	fputs("</section>", r->out);
	chart(r, "gpu", "GPU busy over time", r->has_gpu, "No GPU operation was recorded.",
	      "The share of each bin in which the device ran a kernel, copy or memset; gaps are"
	      " times outside GPU sampling windows (not recorded, not idle).");
	chart(r, "memory", "Memory over time", r->has_memory, "No allocation was recorded.",
	      "Live bytes of each memory (the largest peaks; within each bucket its lowest and"
	      " highest); triangles mark the peaks, dashed lines the fits of call sites whose memory"
	      " grows steadily (shimmer leaks).");
	chart(r, "sizes", "Allocation sizes", r->has_sizes, "No allocation was recorded.",
	      "The share of each memory's allocations in each power-of-two size bucket (the"
	      " memories with the most allocations; shimmer allocations --histogram size);"
	      " sampled host heaps are estimates, marked ~.");
	fputs("<section id=\"flame-peak\"><h2>Memory at the peak</h2><p class=\"note\">The call"
	      " stacks holding each memory's bytes at its peak (shimmer peak).</p>", r->out);
	err = report_flame(r, REPORT_FLAME_PEAK);
	fputs("</section><section id=\"flame-leaked\"><h2>Leaked memory</h2><p class=\"note\">The"
	      " call stacks of the bytes never freed (shimmer leaks).</p>", r->out);
	if (!err)
		err = report_flame(r, REPORT_FLAME_LEAKED);
	fputs("</section><section id=\"flame-allocated\"><h2>Allocated memory</h2><p"
	      " class=\"note\">The call stacks of every allocation's bytes, freed or not (shimmer"
	      " allocations).</p>", r->out);
	if (!err)
		err = report_flame(r, REPORT_FLAME_ALLOCATED);
	fputs("</section>", r->out);
	if (!err)
		err = ranks(r);
	if (err)
		return err;
	if (cmp)
		compare_html(r, base, cmp);
	else
		fputs("<section id=\"compare\"><h2>Compared with a baseline</h2><p class=\"note\">"
		      "Run with --baseline OTHER.db to compare this run with another.</p></section>",
		      r->out);
	fputs("</main>", r->out);
	footer(r, a);
	fputs("<script type=\"application/json\" id=\"shimmer-data\">", r->out);
	fputs(data, r->out);
	fputs("</script><script>", r->out);
	script_text(r->out, a->lib);
	fputs("</script><script>", r->out);
	script_text(r->out, report_js);
	fputs("</script></body></html>\n", r->out);
	return 0;
}

/* ---- the command ------------------------------------------------------------------ */

static int report_main(int argc, char **argv);

const struct command report_command = {
	.name = "report",
	.brief = "one self-contained HTML report: figures, charts, flame graphs, findings",
	.usage =
		"usage: shimmer report DB [-o FILE] [--baseline OTHER.db] [--pid PID] [--rank R]\n"
		"\n"
		"Writes one HTML file that opens offline in any browser: the run's\n"
		"headline figures, the findings of `shimmer bottlenecks` with their\n"
		"evidence, step time over the run, kernel time by kernel and by the line\n"
		"that launched it, GPU busy over time, memory over time per device and\n"
		"for the host heap (peaks marked, growing call sites' fits), the\n"
		"allocations' sizes, flame graphs of memory at the peak and of leaked\n"
		"memory, a per-rank table, and with --baseline the comparison of\n"
		"`shimmer compare OTHER.db DB`.  The charts are drawn by Chart.js,\n"
		"inlined from PREFIX/share/shimmer; the figures are reduced in shimmer,\n"
		"so the file stays small for large stores.  The file is made readable\n"
		"by its owner only.\n"
		"\n"
		"  -o FILE      the file to write (default report.html; never a store; '-':\n"
		"               standard output)\n"
		"  --baseline OTHER.db  compare this run with OTHER.db's (A: OTHER, B: DB)\n"
		"  --pid PID    only the processes with this pid\n"
		"  --rank R     only the processes of rank R\n"
		"\n"
		"exit codes: 0 ok, 1 error (store, charting library missing), 2 usage\n",
	.main = report_main,
};

static int report_main(int argc, char **argv)
{
	struct model_filter flt = model_filter_all();
	struct findings_opts fo;
	struct findings fs = { 0 };
	struct assets a = { 0 };
	struct report r = { 0 };
	const char *path = NULL, *out_path = "report.html", *base = NULL;
	struct cli_args args = CLI_ARGS(&report_command, argc, argv, &path, 1);
	char *data = NULL, *cmp = NULL;
	size_t data_len = 0;
	struct model *m = NULL;
	struct stat sb;
	FILE *mem;
	int k, r_, rc = CLI_EXIT_ERROR, err, to_stdout;

	while ((k = cli_next(&args)) == CLI_ARG_OPTION) {
		if ((r_ = cli_filter_opt(&args, &flt)) != 0 ||
		    (r_ = cli_string_opt(&args, "-o", &out_path)) != 0 ||
		    (r_ = cli_string_opt(&args, "--baseline", &base)) != 0) {
			if (r_ < 0)
				return CLI_EXIT_USAGE;
		} else if ((err = cli_store_arg(&args)) != 0) {
			return err;
		}
	}
	if (k != CLI_ARG_END)
		return k;
	/* "-o -": the page on standard output, for a pipe */
	to_stdout = strcmp(out_path, "-") == 0;
	if (!to_stdout &&
	    cli_output_check(&report_command, out_path, (const char *const[]){ path, base }, 2))
		return CLI_EXIT_USAGE;
	if (assets_load(&a) < 0)
		goto out;
	if (base && (err = compare_csv(base, path, &flt, &cmp)) < 0) {
		if (err == -ENOMEM)
			cli_error("out of memory");
		goto out;
	}
	if (model_open(path, &flt, &m) < 0)
		goto out;
	findings_opts_init(&fo);
	/* the size chart's, read in the heap pass the findings start */
	model_want(m, MODEL_WANT_SIZES);
	err = model_load_unnamed(m);
	if (!err)
		err = findings_run(m, &fo, &fs);
	r = (struct report){ .m = m, .f = &fs };
	for (size_t i = 0; i < model_nprocs(m); i++) {
		const struct model_proc *p = model_proc(m, i);

		if (p->selected && (!r.origin_ns || p->start_ns < r.origin_ns))
			r.origin_ns = p->start_ns;
	}
	/* the data first: the sections say what it holds */
	mem = !err ? open_memstream(&data, &data_len) : NULL;
	if (!err && !mem)
		err = -ENOMEM;
	if (!err) {
		r.out = mem;
		err = report_data(&r);
		if (fclose(mem) && !err)
			err = -ENOMEM;
	}
	if (err) {
		if (err == -ENOMEM)
			cli_error("out of memory");
		goto out;
	}
	if (to_stdout) {
		r.out = stdout;
	} else if (!(r.out = cli_output_open(out_path))) {
		goto out;
	}
	err = page(&r, path, &a, data, base, cmp);
	if ((to_stdout ? fflush(stdout) != 0 || ferror(stdout) : fclose(r.out) != 0) && !err) {
		cli_error("cannot write %s: %s", to_stdout ? "standard output" : out_path,
			  strerror(errno ? errno : EIO));
		goto out;
	}
	if (err) {
		if (err == -ENOMEM)
			cli_error("out of memory");
		goto out;
	}
	if (!to_stdout && stat(out_path, &sb) == 0)
		printf("shimmer report: wrote %s (%.0f KiB): open it in a browser\n",
		       fmt_esc(out_path), (double)sb.st_size / 1024);
	rc = CLI_EXIT_OK;
out:
	free(data);
	free(cmp);
	findings_free(&fs);
	model_close(m);
	assets_free(&a);
	return rc;
}
