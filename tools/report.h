/*
 * shimmer report: one self-contained HTML file of a store (docs/usage.md):
 * headline figures, step times, the kernel time breakdown (by kernel and by
 * launching line), GPU busy over time, memory over time with the leak
 * regression's fits and the peaks, the allocations' sizes, flame graphs of memory at the peak and
 * of leaked memory, the findings (findings.h), a per-rank table, and with
 * --baseline the comparison with another store.
 *
 * Every figure is computed here, in C, and reduced to what a page draws
 * (at most a few thousand points a chart, flame graph boxes of a pixel or
 * more), so that the file stays small for stores of millions of events.
 * The page draws its charts with Chart.js (npm, pinned; inlined from
 * PREFIX/share/shimmer, see tools/report/) and its flame graphs as SVG
 * written here; nothing is fetched when it opens.
 *
 * This header is shared by report.c (the command and the page),
 * report_data.c (the charts' data) and report_flame.c (flame graphs).
 */
#ifndef SHIMMER_TOOLS_REPORT_H
#define SHIMMER_TOOLS_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "findings.h"
#include "model.h"

/* At most this many points a series, series a chart. */
#define REPORT_POINTS 1000
#define REPORT_SERIES 8
#define REPORT_BARS 15

struct report {
	struct model *m;
	struct findings *f;
	FILE *out;
	int64_t origin_ns; /* x = 0 of the time charts: the first selected process's start */
	int err;           /* sticky */
	/* what the page has, for its sections */
	int has_steps, has_kernels, has_sites, has_gpu, has_memory, has_sizes;
};

/* Text with <, >, &, " escaped for HTML, and the control characters of
 * text for people escaped as there (fmt.h). */
void report_html(FILE *out, const char *s);

/* The charts' data as one JSON object (the page's <script id="shimmer-data">),
 * with '<' escaped so that no text can end the script.  Sets r->has_*. */
int report_data(struct report *r);

enum report_flame_kind {
	REPORT_FLAME_LEAKED,    /* the bytes never freed (shimmer leaks) */
	REPORT_FLAME_PEAK,      /* live at each memory's peak (shimmer peak) */
	REPORT_FLAME_ALLOCATED, /* every allocation's bytes (shimmer allocations) */
};

/* The flame graph (SVG in a div) of kind, or a note when it is empty. */
int report_flame(struct report *r, enum report_flame_kind kind);

#endif /* SHIMMER_TOOLS_REPORT_H */
