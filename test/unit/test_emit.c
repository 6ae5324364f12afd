/*
 * emit: one table description written as a table, CSV and JSON.  The JSON
 * is read back through SQLite's JSON functions (an independent parser),
 * the CSV through SQLite's CSV import rules as the e2e tests use them
 * (here: field by field), and the table by its exact text.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "tools/emit.h"

static const struct emit_col cols[] = {
	{ "pid", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 },
	{ "name", "Name", EMIT_STR, -8, 0, 0, 0 },
	{ "total_ns", "Total", EMIT_NS, 10, 0, 0, 0 },
	{ "bytes", "Bytes", EMIT_BYTES, 10, 0, 0, 0 },
	{ "share", "Share", EMIT_SHARE, 7, 0, 0, 0 },
	{ "mean_ns", NULL, EMIT_NS, 0, EMIT_IN_DATA, 1, 0 },
	{ "estimated", NULL, EMIT_BOOL, 0, EMIT_IN_JSON, 0, 0 },
	{ "note", "Note", EMIT_STR, -1, EMIT_IN_TABLE, 0, 2 },
};

#define NCOLS (sizeof(cols) / sizeof(cols[0]))

static const struct emit_table table = { "rows", cols, NCOLS, 2, 0 };

/* Only in CSV: skipped elsewhere. */
static const struct emit_col csv_only[] = { { "x", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 } };
static const struct emit_table csv_table = { "xs", csv_only, 1, 0, 0 };

static char *render(enum emit_format fmt)
{
	struct emit e;
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	struct emit_val r1[NCOLS] = {
		ev_int(7), ev_str("a,\"b\""), ev_real(1500000.0), ev_real(2048.5), ev_real(0.25),
		ev_real(12.75), ev_int(1), ev_str("first"),
	};
	struct emit_val r2[NCOLS] = {
		ev_int(8), ev_str("c"), ev_approx(ev_real(2e9), 1), ev_none(), ev_none(),
		ev_none(), ev_int(0), ev_str(NULL),
	};
	struct emit_val x[1] = { ev_int(42) };

	assert_non_null(out);
	emit_init(&e, out, fmt);
	emit_kv(&e, "title", EMIT_STR, ev_str("t\n"));
	emit_text(&e, "heading\n");
	emit_table_begin(&e, &table);
	emit_row(&e, r1);
	emit_row(&e, r2);
	emit_table_end(&e);
	emit_table_begin(&e, &csv_table);
	emit_row(&e, x);
	emit_table_end(&e);
	emit_object_begin(&e, "sub");
	emit_kv(&e, "n", EMIT_INT, ev_real(2.5));
	emit_kv(&e, "missing", EMIT_NS, ev_none());
	emit_object_end(&e);
	assert_int_equal(emit_finish(&e), 0);
	assert_int_equal(fclose(out), 0);
	return buf;
}

static void test_emit_table(void **state)
{
	char *t = render(EMIT_TABLE);

	(void)state;
	assert_string_equal(t, "heading\n"
			       "  Name          Total      Bytes   Share  Note\n"
			       "  a,\"b\"       1.50 ms   2.00 KiB   25.0%  first\n"
			       "  c          ~2.000 s          -       -  -\n");
	free(t);
}

static void test_emit_csv(void **state)
{
	char *c = render(EMIT_CSV);

	(void)state;
	/* Quoted text, whole ns and bytes (half away from zero), fractions
	 * where the column keeps them, empty for none; a second table of
	 * other columns gets its own header after a blank line. */
	assert_string_equal(c, "pid,name,total_ns,bytes,share,mean_ns\n"
			       "7,\"a,\"\"b\"\"\",1500000,2049,0.250000,12.75\n"
			       "8,c,2000000000,,,\n"
			       "\n"
			       "x\n"
			       "42\n");
	free(c);
}

/* One table of nrows rows of t's columns in fmt, as a string to free. */
static char *render_rows(enum emit_format fmt, const struct emit_table *t,
			 struct emit_val *const rows[], size_t nrows)
{
	struct emit e;
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	assert_non_null(out);
	emit_init(&e, out, fmt);
	emit_table_begin(&e, t);
	for (size_t i = 0; i < nrows; i++)
		emit_row(&e, rows[i]);
	emit_table_end(&e);
	assert_int_equal(emit_finish(&e), 0);
	assert_int_equal(fclose(out), 0);
	return buf;
}

/* Text that a spreadsheet would run gets a ' (fmt_csv_guarded()); numbers,
 * negative ones too, are written as numbers. */
static void test_emit_csv_formulas(void **state)
{
	static const struct emit_col fc[] = {
		{ "name", NULL, EMIT_STR, 0, 0, 0, 0 },
		{ "diff", NULL, EMIT_REAL, 0, 0, 0, 0 },
		{ "n", NULL, EMIT_INT, 0, 0, 0, 0 },
		{ "ns", NULL, EMIT_NS, 0, 0, 0, 0 },
		{ "raw", NULL, EMIT_RAW, 0, 0, 0, 0 },
	};
	static const struct emit_table ft = { "rows", fc, 5, 0, 0 };
	struct emit_val r[5] = { ev_str("-1+cmd|' /C calc'!A0"), ev_real(-2.5), ev_int(-3),
				 ev_real(-1500.4), ev_str("@x") };
	struct emit_val *const rows[] = { r };
	char *buf = render_rows(EMIT_CSV, &ft, rows, 1);

	(void)state;
	assert_string_equal(buf, "name,diff,n,ns,raw\n"
				 "\"'-1+cmd|' /C calc'!A0\",-2.5,-3,-1500,\"'@x\"\n");
	free(buf);
}

/* A wide character takes two columns, a combining mark none: the columns
 * after a name that holds them stay in line. */
static void test_emit_table_wide(void **state)
{
	static const struct emit_col wc[] = {
		{ "name", "Name", EMIT_STR, -8, 0, 0, 0 },
		{ "n", "N", EMIT_INT, 3, 0, 0, 0 },
	};
	static const struct emit_table wt = { "rows", wc, 2, 0, 0 };
	struct emit_val r1[2] = { ev_str("\xe8\xae\xad\xe7\xbb\x83"), ev_int(1) }; /* 训练 */
	struct emit_val r2[2] = { ev_str("k\xf0\x9f\x98\x80" "e"), ev_int(2) };  /* k😀e */
	struct emit_val r3[2] = { ev_str("cafe\xcc\x81"), ev_int(3) };             /* café */
	struct emit_val *const rows[] = { r1, r2, r3 };
	char *buf = render_rows(EMIT_TABLE, &wt, rows, 3);

	(void)state;
	assert_string_equal(buf, "Name       N\n"
				 "\xe8\xae\xad\xe7\xbb\x83       1\n"
				 "k\xf0\x9f\x98\x80" "e       2\n"
				 "cafe\xcc\x81       3\n");
	free(buf);
}

static void test_emit_json(void **state)
{
	char *j = render(EMIT_JSON);
	sqlite3 *db;
	sqlite3_stmt *st;

	(void)state;
	assert_int_equal(sqlite3_open(":memory:", &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db,
		"SELECT json_valid(?1), json_extract(?1, '$.title'),"
		" json_extract(?1, '$.rows[0].name'), json_extract(?1, '$.rows[0].mean_ns'),"
		" json_extract(?1, '$.rows[0].estimated'), json_type(?1, '$.rows[1].bytes'),"
		" json_extract(?1, '$.rows[1].total_ns'), json_array_length(?1, '$.rows'),"
		" json_type(?1, '$.xs'), json_extract(?1, '$.sub.n'),"
		" json_type(?1, '$.sub.missing'), json_type(?1, '$.rows[0].note')",
		-1, &st, NULL), SQLITE_OK);
	sqlite3_bind_text(st, 1, j, -1, SQLITE_STATIC);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int(st, 0), 1);
	assert_string_equal((const char *)sqlite3_column_text(st, 1), "t\n");
	assert_string_equal((const char *)sqlite3_column_text(st, 2), "a,\"b\"");
	assert_float_equal(sqlite3_column_double(st, 3), 12.75, 0);
	assert_int_equal(sqlite3_column_int(st, 4), 1);
	assert_string_equal((const char *)sqlite3_column_text(st, 5), "null");
	assert_int_equal(sqlite3_column_int64(st, 6), 2000000000);
	assert_int_equal(sqlite3_column_int(st, 7), 2);
	/* A table with no JSON column is no member at all. */
	assert_int_equal(sqlite3_column_type(st, 8), SQLITE_NULL);
	assert_int_equal(sqlite3_column_int(st, 9), 3);
	assert_string_equal((const char *)sqlite3_column_text(st, 10), "null");
	assert_int_equal(sqlite3_column_type(st, 11), SQLITE_NULL);
	sqlite3_finalize(st);
	sqlite3_close(db);
	free(j);
}

/* Names with control characters: escaped in every cell and in free text
 * (its own newlines kept), columns padded by the characters shown, so that
 * the escaped name and a non-ASCII one line up with the plain one. */
static void test_emit_table_escapes(void **state)
{
	static const struct emit_col esc_cols[] = {
		{ "name", "Name", EMIT_STR, -12, 0, 0, 0 },
		{ "n", "N", EMIT_INT, 3, 0, 0, 0 },
		{ "right", "Right", EMIT_STR, 8, 0, 0, 0 },
		{ "last", "Last", EMIT_STR, -1, 0, 0, 0 },
	};
	static const struct emit_table esc_table = { "rows", esc_cols, 4, 0, 0 };
	struct emit_val rows[3][4] = {
		{ ev_str("plain"), ev_int(1), ev_str("r"), ev_str("end") },
		{ ev_str("\x1b]0;x\x07"), ev_int(2), ev_str("caf\xc3\xa9"), ev_str("a\nb") },
		{ ev_str("caf\xc3\xa9\xc2\x9b"), ev_int(3), ev_str("\r"), ev_str("\xff") },
	};
	struct emit e;
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	(void)state;
	assert_non_null(out);
	emit_init(&e, out, EMIT_TABLE);
	emit_text(&e, "raw \x1b[2J%s\n", "x\ny");
	emit_table_begin(&e, &esc_table);
	for (int i = 0; i < 3; i++)
		emit_row(&e, rows[i]);
	emit_table_end(&e);
	assert_int_equal(emit_finish(&e), 0);
	assert_int_equal(fclose(out), 0);
	/* (an unescaped argument's newline is the one thing emit_text cannot
	 * tell from its own: fmt_esc() is for that) */
	assert_string_equal(buf, "raw \\x1b[2Jx\ny\n"
				 "Name           N    Right Last\n"
				 "plain          1        r end\n"
				 "\\x1b]0;x\\x07   2     caf\xc3\xa9 a\\nb\n"
				 "caf\xc3\xa9\\u009b     3       \\r \\xff\n");
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_emit_table),
		cmocka_unit_test(test_emit_table_escapes),
		cmocka_unit_test(test_emit_csv),
		cmocka_unit_test(test_emit_csv_formulas),
		cmocka_unit_test(test_emit_table_wide),
		cmocka_unit_test(test_emit_json),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
