/*
 * Formatting shared by the readers of the store: human units for tables,
 * and escaping for CSV (RFC 4180) and JSON.  All functions are pure and
 * thread-safe; the buffer variants always terminate what they write.
 */
#ifndef SHIMMER_TOOLS_FMT_H
#define SHIMMER_TOOLS_FMT_H

#include <stddef.h>
#include <stdio.h>

/* Large enough for any fmt_duration or fmt_bytes result. */
#define FMT_UNIT_MAX 32

/* ns as "512 ns", "12.34 us", "1.23 ms", "4.567 s"; returns buf. */
char *fmt_duration(char *buf, size_t len, double ns);

/* bytes as "512 B", "1.50 KiB", ... "2.00 TiB"; returns buf. */
char *fmt_bytes(char *buf, size_t len, double bytes);

/* Write s as one CSV field, quoted only when it must be; NULL is empty. */
void fmt_csv(FILE *out, const char *s);

/* Write s as a JSON string literal, quotes included; NULL is null. */
void fmt_json(FILE *out, const char *s);

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
