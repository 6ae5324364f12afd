/*
 * A table of rows written as an aligned table, CSV or JSON, for the
 * commands that list what the daemon says (ls, ctl status, ctl pause):
 * each cell has a human form (the table) and a raw form (CSV and JSON:
 * numbers unscaled, times in ns).  To give way to tools/emit.h (issue 11)
 * when it lands.
 */
#ifndef SHIMMER_TOOLS_ROWS_H
#define SHIMMER_TOOLS_ROWS_H

#include <stddef.h>
#include <stdio.h>

enum rows_format { ROWS_TABLE, ROWS_CSV, ROWS_JSON };

/* For cli_format_opt(). */
extern const char *const rows_formats[];

struct rows_col {
	const char *name;
	int number;     /* right-aligned; a JSON number (raw "" is null) */
	int raw_number; /* left-aligned, but a JSON number */
};

struct rows {
	const struct rows_col *cols;
	int ncols;
	char **human, **raw; /* n * ncols each */
	size_t n, cap;
};

/* A row: ncols human cells and ncols raw cells (NULL raw: the human
 * one).  0 or -ENOMEM. */
int rows_add(struct rows *t, const char *const *human, const char *const *raw);

void rows_print(const struct rows *t, enum rows_format f, FILE *out);

void rows_free(struct rows *t);

#endif
