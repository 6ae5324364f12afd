/*
 * Units and escaping; see fmt.h.  Units are binary for bytes (KiB = 1024)
 * and decimal for time, as users read them in nvidia-smi and perf.
 */
#include <errno.h>
#include <locale.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "esc.h"
#include "fmt.h"
#include "utf8.h"

char *fmt_duration(char *buf, size_t len, double ns)
{
	double a = ns < 0 ? -ns : ns;

	if (a < 1e3)
		snprintf(buf, len, "%.0f ns", ns);
	else if (a < 1e6)
		snprintf(buf, len, "%.2f us", ns / 1e3);
	else if (a < 1e9)
		snprintf(buf, len, "%.2f ms", ns / 1e6);
	else
		snprintf(buf, len, "%.3f s", ns / 1e9);
	return buf;
}

char *fmt_bytes(char *buf, size_t len, double bytes)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB" };
	double v = bytes;
	int u = -1;

	if (bytes < 1024 && bytes > -1024) {
		/* a fitted slope of -0.3 B a second is "0 B", not "-0 B" */
		snprintf(buf, len, "%.0f B", bytes > -0.5 && bytes < 0.5 ? 0.0 : bytes);
		return buf;
	}
	while (u < 3 && (v >= 1024 || v <= -1024)) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, "%.2f %s", v, units[u]);
	return buf;
}

/* ---- CSV and JSON -------------------------------------------------------------- */

int fmt_csv_guarded(const char *s)
{
	if (!s)
		return 0;
	s += strspn(s, "'");
	return *s && strchr("=+-@\t\r", *s);
}

int fmt_csv_quoted(const char *s)
{
	return fmt_csv_guarded(s) || (s && s[strcspn(s, ",\"\r\n")]);
}

void fmt_csv(FILE *out, const char *s)
{
	const unsigned char *p = (const unsigned char *)s, *end;
	int quote;

	if (!s)
		return;
	end = p + strlen(s);
	quote = fmt_csv_quoted(s);
	if (quote)
		fputc('"', out);
	if (fmt_csv_guarded(s))
		fputc('\'', out);
	while (p < end) {
		size_t n = utf8_len(p, (size_t)(end - p));

		if (n == 0) {
			fputs("\xef\xbf\xbd", out); /* U+FFFD, as JSON writes it */
			p++;
			continue;
		}
		if (*p == '"')
			fputc('"', out);
		fwrite(p, 1, n, out);
		p += n;
	}
	if (quote)
		fputc('"', out);
}

size_t fmt_json_plain(const char *s, size_t n, int html)
{
	size_t i = 0;

	while (i < n) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c == 0x7f || c == '"' || c == '\\' ||
		    (html && (c == '<' || c == '>' || c == '&')))
			return i;
		if (c < 0x80) {
			i++;
		} else {
			size_t k = esc_shown_utf8((const unsigned char *)s + i, n - i);

			if (k == 0)
				return i;
			i += k;
		}
	}
	return i;
}

size_t fmt_json_char(const char *s, size_t n, int html, char *buf, size_t *len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t k = utf8_len(p, n);

	if (k == 0) {
		*len = esc_put_u4(buf, 0xfffd);
		return 1;
	}
	if (k > 1) {
		uint32_t c = esc_code_point(p, k);

		if (esc_layout_control(c)) {
			*len = esc_put_u4(buf, c);
		} else {
			memcpy(buf, s, k);
			*len = k;
		}
		return k;
	}
	if (*p == '"' || *p == '\\') {
		buf[0] = '\\';
		buf[1] = (char)*p;
		*len = 2;
	} else if (*p == '\n' || *p == '\t') {
		buf[0] = '\\';
		buf[1] = *p == '\n' ? 'n' : 't';
		*len = 2;
	} else if (*p < 0x20 || *p == 0x7f || (html && (*p == '<' || *p == '>' || *p == '&'))) {
		*len = esc_put_u4(buf, *p);
	} else {
		buf[0] = (char)*p;
		*len = 1;
	}
	return 1;
}

static void json_string(FILE *out, const char *s, int html)
{
	size_t n = strlen(s), i = 0;

	fputc('"', out);
	while (i < n) {
		size_t plain = fmt_json_plain(s + i, n - i, html), len;
		char buf[FMT_JSON_CHAR_MAX];

		fwrite(s + i, 1, plain, out);
		i += plain;
		if (i < n) {
			i += fmt_json_char(s + i, n - i, html, buf, &len);
			fwrite(buf, 1, len, out);
		}
	}
	fputc('"', out);
}

void fmt_json(FILE *out, const char *s)
{
	if (s)
		json_string(out, s, 0);
	else
		fputs("null", out);
}

void fmt_json_script(FILE *out, const char *s)
{
	if (s)
		json_string(out, s, 1);
	else
		fputs("null", out);
}

/* ---- text for people ----------------------------------------------------------- */

/*
 * Widths are wcwidth()'s in a UTF-8 locale, whatever the process's own
 * (shimmer never calls setlocale(): its numbers are C's): an object of
 * LC_CTYPE "C.UTF-8" made once, made the calling thread's for the length
 * of one computation only (uselocale()), so that nothing else it formats
 * sees it.  NULL when no UTF-8 locale can be had (a C library without
 * C.UTF-8 nor en_US.UTF-8): each character is then one column.
 */
static locale_t utf8_ctype(void)
{
	static const char *const names[] = { "C.UTF-8", "C.utf8", "en_US.UTF-8" };
	static locale_t loc;
	static int none;
	locale_t l = __atomic_load_n(&loc, __ATOMIC_ACQUIRE), seen = (locale_t)0;

	if (l || __atomic_load_n(&none, __ATOMIC_RELAXED))
		return l;
	for (size_t i = 0; !l && i < sizeof(names) / sizeof(names[0]); i++)
		l = newlocale(LC_CTYPE_MASK, names[i], (locale_t)0);
	if (!l) {
		__atomic_store_n(&none, 1, __ATOMIC_RELAXED);
		return (locale_t)0;
	}
	/* another thread's made first: that one stays */
	if (!__atomic_compare_exchange_n(&loc, &seen, l, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		freelocale(l);
		l = seen;
	}
	return l;
}

/* The columns of the character at s (n >= 1 bytes left) and its length
 * in *len: ASCII one, other valid UTF-8 wcwidth()'s (wide East Asian
 * characters and emoji two, combining marks and other zero-width ones
 * none, a code point wcwidth() knows no width for one), a byte that is
 * not UTF-8 one.  *utf8: utf8_ctype(), made the thread's at the first
 * character beyond ASCII; *old: the thread's locale before it, for
 * width_end(). */
static int char_width(const char *s, size_t n, size_t *len, locale_t *utf8, locale_t *old)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t k;
	int w;

	*len = 1;
	if (*p < 0x80 || !(k = utf8_len(p, n)))
		return 1;
	*len = k;
	if (!*utf8) {
		if (!(*utf8 = utf8_ctype()))
			return 1;
		*old = uselocale(*utf8);
	}
	w = wcwidth((wchar_t)esc_code_point(p, k));
	return w < 0 ? 1 : w;
}

static void width_end(locale_t utf8, locale_t old)
{
	if (utf8)
		uselocale(old);
}

size_t fmt_text_width(const char *s, size_t n)
{
	locale_t utf8 = (locale_t)0, old = (locale_t)0;
	size_t cols = 0, len;

	for (size_t i = 0; i < n; i += len)
		cols += (size_t)char_width(s + i, n - i, &len, &utf8, &old);
	width_end(utf8, old);
	return cols;
}

size_t fmt_text_cut(const char *s, size_t cols)
{
	locale_t utf8 = (locale_t)0, old = (locale_t)0;
	size_t n = strlen(s), i = 0, used = 0, len;

	while (i < n) {
		size_t w = (size_t)char_width(s + i, n - i, &len, &utf8, &old);

		if (used + w > cols)
			break;
		used += w;
		i += len;
	}
	width_end(utf8, old);
	return i;
}

/* Walks s as fmt_esc_write() writes it, to out when not NULL; returns the
 * columns, and the escaped length in *bytes when not NULL. */
static size_t esc_walk(FILE *out, const char *s, int keep_lf, size_t *bytes)
{
	size_t n = strlen(s), i = 0, cols = 0, b = 0;

	while (i < n) {
		size_t plain = esc_plain(s + i, n - i, keep_lf), len;
		char buf[ESC_CHAR_MAX];

		if (out)
			fwrite(s + i, 1, plain, out);
		cols += fmt_text_width(s + i, plain);
		b += plain;
		i += plain;
		if (i < n) {
			i += esc_char(s + i, n - i, buf, &len);
			if (out)
				fwrite(buf, 1, len, out);
			cols += fmt_text_width(buf, len);
			b += len;
		}
	}
	if (bytes)
		*bytes = b;
	return cols;
}

size_t fmt_esc_write(FILE *out, const char *s, int keep_lf)
{
	return s ? esc_walk(out, s, keep_lf, NULL) : 0;
}

size_t fmt_esc_width(const char *s)
{
	return s ? esc_walk(NULL, s, 0, NULL) : 0;
}

/* s escaped into a new string (keep_lf as fmt_esc_write's); NULL: ENOMEM. */
static char *esc_dup(const char *s, int keep_lf)
{
	size_t n = strlen(s), len, i = 0, o = 0, put;
	char *t;

	/* Most names need nothing: one scan and a copy (the folded and flame
	 * graph frames of a large store are millions of them). */
	if (esc_plain(s, n, keep_lf) == n)
		return strdup(s);
	esc_walk(NULL, s, keep_lf, &len);
	if (!(t = malloc(len + 1)))
		return NULL;
	while (i < n) {
		size_t plain = esc_plain(s + i, n - i, keep_lf);

		memcpy(t + o, s + i, plain);
		o += plain;
		i += plain;
		if (i < n) {
			/* esc_walk() counted these very escapes: they fit */
			i += esc_char(s + i, n - i, t + o, &put);
			o += put;
		}
	}
	t[o] = 0;
	return t;
}

const char *fmt_esc(const char *s)
{
	static char *ring[FMT_ESC_RING];
	static unsigned next;
	size_t n;
	char *t;

	if (!s)
		return "(null)";
	n = strlen(s);
	if (esc_plain(s, n, 0) == n)
		return s;
	if (!(t = esc_dup(s, 0)))
		return "?";
	/* The oldest copy goes: its caller's printf has long returned. */
	free(ring[next]);
	ring[next] = t;
	next = (next + 1) % FMT_ESC_RING;
	return t;
}

/* Whether s[0..n) ends in a number flamegraph.pl would read as a count:
 * digits, or digits, a '.' and digits; *start is where it begins. */
static int ends_in_count(const char *s, size_t n, size_t *start)
{
	size_t i = n;

	while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9')
		i--;
	if (i > 0 && s[i - 1] == '.') {
		i--;
		while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9')
			i--;
	}
	if (i == n || !(s[i] >= '0' && s[i] <= '9'))
		return 0;
	*start = i;
	return 1;
}

int fmt_folded_plain(const char *frame)
{
	size_t n = strlen(frame), at;

	return esc_plain(frame, n, 0) == n && !memchr(frame, ';', n) &&
	       !(ends_in_count(frame, n, &at) && at > 0 && frame[at - 1] == ' ');
}

char *fmt_folded_frame(const char *frame)
{
	char *t = esc_dup(frame ? frame : "", 0);
	size_t n, at;

	if (!t)
		return NULL;
	for (char *c = t; *c; c++)
		if (*c == ';')
			*c = ':';
	n = strlen(t);
	if (ends_in_count(t, n, &at) && at > 0 && t[at - 1] == ' ')
		t[at - 1] = '_';
	return t;
}

/* ---- short names ------------------------------------------------------------ */

static int opens(char c)
{
	return c == '<' || c == '(' || c == '[' || c == '{';
}

static int closes(char c)
{
	return c == '>' || c == ')' || c == ']' || c == '}';
}

/* Where "operator" ends when name[i..] starts an operator's name whose
 * symbol is a bracket or an arrow ("operator()", "operator<<", ...), so
 * that its brackets are not taken for nesting; i otherwise. */
static size_t skip_operator(const char *name, size_t i, size_t n)
{
	static const char *const ops[] = { "()", "[]", "<<=", ">>=", "<<", ">>", "<=>", "<=",
					   ">=", "<", ">", "->*", "->" };

	if (n - i < 8 || strncmp(name + i, "operator", 8) != 0)
		return i;
	i += 8;
	while (i < n && name[i] == ' ')
		i++;
	for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); k++)
		if (strncmp(name + i, ops[k], strlen(ops[k])) == 0)
			return i + strlen(ops[k]);
	return i;
}

static char *short_form(char *buf, size_t len, const char *name, int keep_args);

char *fmt_short_name(char *buf, size_t len, const char *name)
{
	return short_form(buf, len, name, 0);
}

/* fmt_short_name(), or with keep_args the last component with its template
 * arguments (the form that tells "Kernel2<sgemm_128x128_nn>" from
 * "Kernel2<sgemm_64x64_tn>"). */
static char *short_form(char *buf, size_t len, const char *name, int keep_args)
{
	size_t n, end, start = 0, comp = 0, i, out = 0;
	int depth = 0;

	if (!name) {
		snprintf(buf, len, "?");
		return buf;
	}
	n = strlen(name);
	end = n;
	/* Trailing qualifiers of a member function ("... const"). */
	while (end > 0 && name[end - 1] == ' ')
		end--;
	if (end >= 6 && strncmp(name + end - 6, " const", 6) == 0)
		end -= 6;
	/* The parameter list: the last bracket group, when it is (...). */
	if (end > 0 && name[end - 1] == ')') {
		for (i = end; i-- > 0;) {
			if (closes(name[i]))
				depth++;
			else if (opens(name[i]) && --depth == 0)
				break;
		}
		if (depth != 0 || i == (size_t)-1)
			goto as_is;
		/* "operator()(int)": the first () is the name's. */
		end = i;
	}
	/* The return type: up to the last space outside brackets; the last
	 * scope: after the last "::" outside brackets. */
	depth = 0;
	for (i = 0; i < end; i++) {
		size_t j = depth == 0 ? skip_operator(name, i, end) : i;

		if (j != i) {
			i = j - 1;
			continue;
		}
		if (opens(name[i])) {
			depth++;
		} else if (closes(name[i])) {
			if (--depth < 0)
				goto as_is;
		} else if (depth == 0 && name[i] == ' ') {
			start = comp = i + 1;
		} else if (depth == 0 && name[i] == ':' && i + 1 < end && name[i + 1] == ':') {
			comp = i + 2;
			i++;
		}
	}
	if (depth != 0)
		goto as_is;
	(void)start;
	/* The component, less its template arguments (outside brackets only). */
	depth = 0;
	for (i = comp; i < end && out + 1 < len; i++) {
		size_t j = depth == 0 ? skip_operator(name, i, end) : i;

		if (j != i) {
			for (; i < j && out + 1 < len; i++)
				buf[out++] = name[i];
			i--;
			continue;
		}
		if (keep_args)
			buf[out++] = name[i];
		else if (name[i] == '<')
			depth++;
		else if (name[i] == '>')
			depth--;
		else if (depth == 0)
			buf[out++] = name[i];
	}
	if (len)
		buf[out] = 0;
	if (out > 0)
		return buf;
as_is:
	snprintf(buf, len, "%s", name);
	return buf;
}

struct named {
	char *shown;
	const char *full;
	size_t i;
};

static int by_shown(const void *a, const void *b)
{
	const struct named *x = a, *y = b;
	int c = strcmp(x->shown, y->shown);

	if (c)
		return c;
	c = strcmp(x->full, y->full);
	return c ? c : (x->i > y->i) - (x->i < y->i);
}

static int by_index(const void *a, const void *b)
{
	const struct named *x = a, *y = b;

	return (x->i > y->i) - (x->i < y->i);
}

/* Within v[0..n) sorted by shown name: where different full names share
 * one, call make() on each of the group (NULL: number them instead). */
static int split_alike(struct named *v, size_t n,
		       int (*make)(struct named *w))
{
	for (size_t g = 0, e; g < n; g = e) {
		int alike = 0;

		for (e = g + 1; e < n && strcmp(v[e].shown, v[g].shown) == 0; e++)
			alike |= strcmp(v[e].full, v[g].full) != 0;
		if (!alike)
			continue;
		if (make) {
			for (size_t k = g; k < e; k++) {
				int err = make(&v[k]);

				if (err)
					return err;
			}
			continue;
		}
		/* Still alike with their arguments: " [1]", " [2]"... by the
		 * set's order, each full name numbered once. */
		qsort(v + g, e - g, sizeof(*v), by_index);
		for (size_t k = g, num = 0; k < e; k++) {
			size_t first = g, len;
			char *t;

			while (first < k && strcmp(v[first].full, v[k].full) != 0)
				first++;
			if (first == k)
				num++;
			len = strlen(v[k].shown) + 24;
			if (!(t = malloc(len)))
				return -ENOMEM;
			if (first == k)
				snprintf(t, len, "%s [%zu]", v[k].shown, num);
			else /* the same name again: the same number */
				snprintf(t, len, "%s", v[first].shown);
			free(v[k].shown);
			v[k].shown = t;
		}
	}
	return 0;
}

static int with_args(struct named *w)
{
	char buf[FMT_DISTINCT_MAX + 4];
	char *t;

	short_form(buf, FMT_DISTINCT_MAX + 1, w->full, 1);
	if (strlen(buf) == FMT_DISTINCT_MAX)
		memcpy(buf + FMT_DISTINCT_MAX - 3, "...", 4);
	if (!(t = strdup(buf)))
		return -ENOMEM;
	free(w->shown);
	w->shown = t;
	return 0;
}

int fmt_short_names(const char *const *names, size_t n, char ***out)
{
	struct named *v = NULL;
	char **r = NULL, buf[256];
	size_t m = 0;
	int err = -ENOMEM;

	*out = NULL;
	if (!(r = calloc(n ? n : 1, sizeof(*r))) || (n && !(v = calloc(n, sizeof(*v)))))
		goto out;
	for (size_t i = 0; i < n; i++) {
		if (!names[i])
			continue;
		v[m].full = names[i];
		v[m].i = i;
		if (!(v[m++].shown = strdup(fmt_short_name(buf, sizeof(buf), names[i]))))
			goto out;
	}
	if (m > 1) { /* (qsort of no array: undefined) */
		qsort(v, m, sizeof(*v), by_shown);
		if ((err = split_alike(v, m, with_args)))
			goto out;
		qsort(v, m, sizeof(*v), by_shown);
		if ((err = split_alike(v, m, NULL)))
			goto out;
	}
	for (size_t k = 0; k < m; k++) {
		r[v[k].i] = v[k].shown;
		v[k].shown = NULL;
	}
	*out = r;
	r = NULL;
	err = 0;
out:
	for (size_t k = 0; k < m; k++)
		free(v[k].shown);
	free(v);
	fmt_short_names_free(r, n);
	return err;
}

void fmt_short_names_free(char **v, size_t n)
{
	if (!v)
		return;
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}
