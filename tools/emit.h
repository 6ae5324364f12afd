/*
 * The one writer of every command's output: an aligned table for people,
 * CSV (RFC 4180) or JSON for programs, from one description of each table.
 *
 * A command describes a table once, as an array of columns (struct
 * emit_col: its CSV and JSON name, its table heading and width, the type
 * of its values), and hands the emitter one row of values at a time.  The
 * emitter renders the row in the chosen format: durations and bytes in
 * human units in tables and as plain integers (ns, bytes) in CSV and JSON,
 * shares as percentages or fractions, missing values as "-", an empty CSV
 * field or null.  A column may appear in some formats only (a pid column
 * in every CSV row, a heading-only column in the table).
 *
 * Around the tables, JSON structure (objects, arrays, members) is written
 * only in JSON, free text (headings, notes) only in tables; CSV is rows
 * alone, one header per distinct set of columns.  So a command writes its
 * whole output once, in one order, and each format keeps what it needs.
 *
 * Tables and text are for people, and strings from the store are written
 * by the traced programs' users: a table's cells, headings and free text
 * are escaped (fmt.h: no control character reaches the terminal, a cell
 * holds no newline), and columns are padded by the escaped text's
 * characters.  CSV and JSON keep every value (RFC 4180; JSON escapes per
 * fmt.h).
 *
 * Not thread-safe; one struct emit per output stream.  Write errors are
 * sticky: emit_finish() reports them.
 */
#ifndef SHIMMER_TOOLS_EMIT_H
#define SHIMMER_TOOLS_EMIT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum emit_format {
	EMIT_TABLE,
	EMIT_CSV,
	EMIT_JSON,
};

/* The names of the formats, indexed by enum emit_format; NULL-terminated
 * (the --format values every command accepts). */
extern const char *const emit_format_names[];

enum emit_type {
	EMIT_STR,   /* text */
	EMIT_INT,   /* integer (a real value is rounded) */
	EMIT_REAL,  /* real: `prec` decimals in tables, every digit elsewhere */
	EMIT_NS,    /* duration: human units in tables, whole ns elsewhere
		     * (with their fraction when prec > 0) */
	EMIT_BYTES, /* bytes: binary units in tables, whole bytes elsewhere
		     * (with their fraction when prec > 0) */
	EMIT_SHARE, /* fraction: "12.3%" in tables, 0.123000 elsewhere */
	EMIT_BOOL,  /* yes/no, 1/0, true/false */
	EMIT_RAW,   /* JSON text written as it is in JSON, a string elsewhere */
};

/* Where a column appears (struct emit_col.in); 0 means everywhere. */
#define EMIT_IN_TABLE 0x1u
#define EMIT_IN_CSV 0x2u
#define EMIT_IN_JSON 0x4u
#define EMIT_IN_DATA (EMIT_IN_CSV | EMIT_IN_JSON)
/* In no format: a column of a row layout that tables share, which one of
 * them leaves out. */
#define EMIT_IN_NONE 0x8u

struct emit_col {
	const char *key;  /* CSV header and JSON member name */
	const char *head; /* table heading (key when NULL) */
	enum emit_type type;
	int width;        /* table: at least this wide; negative: left-aligned */
	unsigned in;      /* EMIT_IN_*; 0: every format */
	int prec;         /* EMIT_REAL: decimals in tables (0: %g); EMIT_NS and
			   * EMIT_BYTES: > 0 keeps fractions in CSV and JSON */
	int gap;          /* table: spaces before the column (1 when 0) */
};

struct emit_table {
	const char *key;            /* JSON: the member holding the rows; NULL in an array */
	const struct emit_col *cols;
	size_t ncols;
	int indent;                 /* table: spaces before each line */
	int no_heading;             /* table: no heading line */
};

enum emit_kind { EV_NONE = 0, EV_INT, EV_REAL, EV_STR };

/* One value of a row; EV_NONE is "-" in a table, empty in CSV, null in JSON. */
struct emit_val {
	enum emit_kind kind;
	int approx; /* an estimate: "~" before it in a table */
	int64_t i;
	double d;
	const char *s;
};

static inline struct emit_val ev_none(void)
{
	return (struct emit_val){ .kind = EV_NONE };
}

static inline struct emit_val ev_int(int64_t v)
{
	return (struct emit_val){ .kind = EV_INT, .i = v };
}

static inline struct emit_val ev_real(double v)
{
	return (struct emit_val){ .kind = EV_REAL, .d = v };
}

/* NULL gives ev_none(). */
static inline struct emit_val ev_str(const char *s)
{
	return (struct emit_val){ .kind = s ? EV_STR : EV_NONE, .s = s };
}

/* v marked as an estimate when approx is true. */
static inline struct emit_val ev_approx(struct emit_val v, int approx)
{
	v.approx = approx != 0;
	return v;
}

struct emit_frame {
	int array; /* 1: array, 0: object */
	int count; /* members or elements written */
};

#define EMIT_DEPTH 16

struct emit {
	FILE *out;
	enum emit_format fmt;
	struct emit_frame stack[EMIT_DEPTH];
	int depth;
	const struct emit_table *table; /* the table being written */
	char csv_head[1024];            /* the last CSV header written */
	int wrote;                      /* anything written */
	int err;                        /* -EOVERFLOW on misuse, sticky */
};

/* Start writing fmt to out: JSON opens the top-level object. */
void emit_init(struct emit *e, FILE *out, enum emit_format fmt);

/* End the output (JSON closes what is open and ends the line) and flush.
 * Returns 0, or -EIO with errno's message printed as one error line. */
int emit_finish(struct emit *e);

/* ---- JSON structure: written in JSON only ---- */

/* key names the member in an object; NULL inside an array. */
void emit_object_begin(struct emit *e, const char *key);
void emit_object_end(struct emit *e);
void emit_array_begin(struct emit *e, const char *key);
void emit_array_end(struct emit *e);

/* A member (or an array element when key is NULL) of type t. */
void emit_kv(struct emit *e, const char *key, enum emit_type t, struct emit_val v);

/* ---- text: written in tables only ---- */

/* Its newlines are its lines; every other control character in it is
 * escaped (fmt.h).  A string from the store goes through fmt_esc() as its
 * "%s" argument, so that a newline of its own is escaped too. */
void emit_text(struct emit *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- tables: every format ---- */

/* Table: the heading line; CSV: the header when its columns differ from
 * the last header's; JSON: opens t->key's array.  A table with no column
 * in the format is skipped, rows and all.  t must outlive the table. */
void emit_table_begin(struct emit *e, const struct emit_table *t);

/* One row: v holds one value per column of the table, in order. */
void emit_row(struct emit *e, const struct emit_val *v);

void emit_table_end(struct emit *e);

/* The table rendering of v in column c, as emit_row writes it (without
 * padding), into buf; returns buf. */
char *emit_cell(const struct emit_col *c, struct emit_val v, char *buf, size_t len);

#endif /* SHIMMER_TOOLS_EMIT_H */
