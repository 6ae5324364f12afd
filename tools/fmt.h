/*
 * Formatting shared by the readers of the store: human units for tables,
 * escaping for CSV (RFC 4180) and JSON, and for text people read in a
 * terminal.  All functions but fmt_esc() are pure and thread-safe; the
 * buffer variants always terminate what they write.
 */
#ifndef SHIMMER_TOOLS_FMT_H
#define SHIMMER_TOOLS_FMT_H

#include <stddef.h>
#include <stdio.h>

#include "esc.h"

/* Large enough for any fmt_duration or fmt_bytes result. */
#define FMT_UNIT_MAX 32

/* ns as "512 ns", "12.34 us", "1.23 ms", "4.567 s"; returns buf. */
char *fmt_duration(char *buf, size_t len, double ns);

/* bytes as "512 B", "1.50 KiB", ... "2.00 TiB"; returns buf. */
char *fmt_bytes(char *buf, size_t len, double bytes);

/*
 * Whether the text s, as a CSV field, starts with a character that a
 * spreadsheet takes for the start of a formula (=, +, -, @, TAB or CR:
 * OWASP's "CSV injection"), after any 's: a name a traced program chose
 * ("=HYPERLINK(...)") would run when the file is opened.  Such a field is
 * written quoted with one ' more in front: a spreadsheet shows it as text,
 * and a program gets s back by dropping the first ' of a quoted field
 * whose first character other than ' is one of those (the writer adds one
 * to every such field, so the rule reads every name back, one that starts
 * "'=" too).  Names starting with ' otherwise ("'train' mean") are written
 * as they are.  Numbers are written as numbers, never through these: a
 * negative one stays a number.
 */
int fmt_csv_guarded(const char *s);

/* Whether s, as a CSV field, is quoted: fmt_csv_guarded(), or it holds a
 * comma, quote, CR or LF (RFC 4180). */
int fmt_csv_quoted(const char *s);

/* Write the text s as one CSV field (RFC 4180), quoted only when it must
 * be (fmt_csv_quoted()), guarded as fmt_csv_guarded() says; NULL is empty.
 * Bytes that are not UTF-8 become U+FFFD, as in JSON. */
void fmt_csv(FILE *out, const char *s);

/* Write s as a JSON string literal, quotes included; NULL is null. */
void fmt_json(FILE *out, const char *s);

/* fmt_json() for text inside an HTML <script>: '<', '>' and '&' escaped
 * too (fmt_json_char()'s html). */
void fmt_json_script(FILE *out, const char *s);

/* ---- JSON, one character at a time (the writers of their own buffers:
 * export's, the report's) ---- */

/* The longest rendering of one character by fmt_json_char(). */
#define FMT_JSON_CHAR_MAX 6

/* How many leading bytes of s[0..n) are written as they are in a JSON
 * string (html: '<', '>' and '&' are not, for text inside <script>). */
size_t fmt_json_plain(const char *s, size_t n, int html);

/*
 * The character at s (n >= 1 bytes left) as a JSON string holds it:
 * '"' and a backslash as \" and \\, LF and TAB as \n and \t, every other
 * byte below 0x20 and DEL as \u00XX, a byte that is not UTF-8 as \ufffd
 * (common/utf8.h), the characters fmt_esc() writes as \uXXXX likewise (the
 * same string to a parser, and no terminal control to a pager); html:
 * '<', '>' and '&' as \u003c, \u003e and \u0026.  Writes it to buf (at
 * least FMT_JSON_CHAR_MAX bytes), *len its length, and returns the bytes
 * of s it took.
 */
size_t fmt_json_char(const char *s, size_t n, int html, char *buf, size_t *len);

/*
 * ---- text for people ----
 *
 * A string from the store (a traced program's argv and executable, thread,
 * range, kernel and symbol names, file and library paths, Python frames)
 * is written by a user who may be hostile to the one reading.  In text
 * for people (tables, notes, headings, warnings and errors) it is escaped
 * as common/esc.h says (the collector's log lines the same way), so that
 * it holds nothing a terminal obeys and no line of its own.
 *
 * A backslash is written as it is: `\x1b` in a name reads the same as an
 * escaped ESC.  A table pads by the columns a terminal gives the escaped
 * text (fmt_text_width()).
 */

/*
 * The columns a terminal gives s[0..n), as wcwidth() counts them in a
 * UTF-8 locale whatever the process's (LC_CTYPE C.UTF-8 made the calling
 * thread's for the computation only; numbers are formatted as before): an
 * ASCII character one, a wide East Asian character or emoji two, a
 * combining mark or other zero-width character none, a code point of no
 * known width or a byte that is not UTF-8 one.  Without a UTF-8 locale in
 * the C library, each character is one.  Thread-safe.
 */
size_t fmt_text_width(const char *s, size_t n);

/* The bytes of the longest start of s, cut between characters, that takes
 * at most cols columns (fmt_text_width()); zero-width characters after
 * the last that fits go with it. */
size_t fmt_text_cut(const char *s, size_t cols);

/* One character at a time: esc_plain() and esc_char() (common/esc.h). */

/* Write s escaped to out (keep_lf: LF is written as a newline, for text
 * whose own lines are its structure and whose parts from the store were
 * escaped); returns the columns written.  NULL writes nothing. */
size_t fmt_esc_write(FILE *out, const char *s, int keep_lf);

/* The columns fmt_esc_write(out, s, 0) writes. */
size_t fmt_esc_width(const char *s);

/*
 * s escaped, for a "%s" of a printf-like writer of text for people
 * (emit_text()): s itself when nothing in it needs escaping, else a copy
 * that stays valid for the next FMT_ESC_RING calls; "?" when memory runs
 * out, "(null)" for NULL.  Not thread-safe: for the thread that writes
 * the output.
 */
#define FMT_ESC_RING 8
const char *fmt_esc(const char *s);

/*
 * One frame of a folded stack ("outer;...;inner COUNT", the input of
 * flamegraph.pl, inferno and speedscope): escaped as above, each ';' (the
 * separator of frames) written ':', and a frame that ends in a space and a
 * number (digits, possibly a '.' and more digits: what flamegraph.pl reads
 * as a count, the second of a differential line) has that space written
 * '_'.  Returns a copy to free, or NULL (ENOMEM).
 */
char *fmt_folded_frame(const char *frame);

/* Whether fmt_folded_frame(frame) is frame itself: nothing to escape, no
 * ';', no count at its end (most frames: they are then written without
 * a copy). */
int fmt_folded_plain(const char *frame);

/*
 * The short form of a function's (demangled) name, as tables show kernels:
 * its return type, parameter list, template arguments and enclosing
 * scopes elided ("void at::native::elementwise_kernel<128, 2, ...>(int,
 * ...)" reads "elementwise_kernel").  A name that does not parse (an
 * unbalanced bracket) is written as it is.  Returns buf.
 */
char *fmt_short_name(char *buf, size_t len, const char *name);

/* The longest name fmt_short_names() makes of one with its arguments. */
#define FMT_DISTINCT_MAX 96

/*
 * Display names for a set of names shown together (a table's kernels, a
 * process's findings): each one's short form, except where different names
 * would read alike: those keep their last component's template arguments
 * (cut at FMT_DISTINCT_MAX bytes, ending "..."), and any still alike get
 * " [1]", " [2]"... in the set's order.  Equal names read equal; a NULL
 * name gets NULL.  *out: n strings, freed by fmt_short_names_free().
 * Returns 0 or -ENOMEM.
 */
int fmt_short_names(const char *const *names, size_t n, char ***out);
void fmt_short_names_free(char **v, size_t n);

#endif /* SHIMMER_TOOLS_FMT_H */
