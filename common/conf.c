/*
 * The configuration file's syntax (conf.h), with no allocation: lines are
 * handed out as pointers into the caller's text.
 */
#include "conf.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static int blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* [*s, *e) without the blanks at either end. */
static void trim(const char **s, const char **e)
{
	while (*s < *e && blank(**s))
		(*s)++;
	while (*e > *s && blank((*e)[-1]))
		(*e)--;
}

static int one_line(const char *s, const char *e, unsigned lineno,
		    int (*fn)(void *ctx, const struct conf_line *l), void *ctx)
{
	struct conf_line l = { .lineno = lineno };
	const char *eq, *k, *ke, *v, *ve;

	trim(&s, &e);
	if (s == e || *s == '#')
		return 0;
	eq = memchr(s, '=', (size_t)(e - s));
	k = s;
	ke = eq ? eq : e;
	trim(&k, &ke);
	v = eq ? eq + 1 : e;
	ve = e;
	trim(&v, &ve);
	if (ve - v >= 1 && *v == '"') {
		if (ve - v < 2 || ve[-1] != '"')
			eq = NULL;
		v++;
		ve--;
	}
	if (!eq || k == ke) {
		l.val = s;
		l.val_len = (size_t)(e - s);
		return fn(ctx, &l);
	}
	l.key = k;
	l.key_len = (size_t)(ke - k);
	l.val = v;
	l.val_len = (size_t)(ve - v);
	return fn(ctx, &l);
}

int conf_parse(const char *text, size_t len,
	       int (*fn)(void *ctx, const struct conf_line *l), void *ctx)
{
	const char *p = text, *end = text + len;
	unsigned lineno = 0;
	int rc;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *e = nl ? nl : end;

		rc = one_line(p, e, ++lineno, fn, ctx);
		if (rc)
			return rc;
		p = nl ? nl + 1 : end;
	}
	return 0;
}

ssize_t conf_read(const char *path, char *buf, size_t cap)
{
	size_t got = 0;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC), err = 0;

	if (fd < 0)
		return -errno;
	while (got < cap - 1) {
		n = read(fd, buf + got, cap - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = -errno;
			break;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	/* One more byte would not have fitted: refuse rather than cut. */
	if (!err && got == cap - 1 && read(fd, &(char){ 0 }, 1) == 1)
		err = -EFBIG;
	close(fd);
	if (err)
		return err;
	buf[got] = 0;
	return (ssize_t)got;
}

int conf_is(const struct conf_line *l, const char *name)
{
	return l->key && l->key_len == strlen(name) && !memcmp(l->key, name, l->key_len);
}

int conf_duration(const char *s, size_t len, uint64_t *ns)
{
	static const struct {
		const char *unit;
		uint64_t ns;
	} units[] = { { "ns", 1 }, { "us", 1000ull }, { "ms", 1000000ull },
		      { "s", 1000000000ull }, { "m", 60000000000ull },
		      { "h", 3600000000000ull }, { "d", 86400000000000ull },
		      { "", 1000000000ull } };
	uint64_t whole = 0, frac = 0, scale = 1;
	size_t i = 0, digits = 0;

	for (; i < len && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
		if (whole > (UINT64_MAX - 9) / 10)
			return -1;
		whole = whole * 10 + (uint64_t)(s[i] - '0');
	}
	if (i < len && s[i] == '.')
		for (i++; i < len && s[i] >= '0' && s[i] <= '9'; i++, digits++)
			if (scale < 1000000000ull) {
				frac = frac * 10 + (uint64_t)(s[i] - '0');
				scale *= 10;
			}
	if (!digits)
		return -1;
	for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
		size_t n = strlen(units[u].unit);

		if (len - i != n || memcmp(s + i, units[u].unit, n))
			continue;
		if (whole > UINT64_MAX / units[u].ns / 2)
			return -1;
		/* frac x unit in two parts: whole, it overflowed 64 bits
		 * (0.333333d); each part stays below 1e18. */
		*ns = whole * units[u].ns + frac * (units[u].ns / scale) +
		      frac * (units[u].ns % scale) / scale;
		return 0;
	}
	return -1;
}

int conf_count(const char *s, size_t len, uint64_t max, uint64_t *n)
{
	uint64_t v = 0;

	if (!len)
		return -1;
	for (size_t i = 0; i < len; i++) {
		uint64_t d = (uint64_t)(s[i] - '0');

		if (s[i] < '0' || s[i] > '9' || v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	if (v > max)
		return -1;
	*n = v;
	return 0;
}

uint64_t conf_pid_max(void)
{
	char buf[32];
	uint64_t v;
	ssize_t n;
	int fd = open("/proc/sys/kernel/pid_max", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return CONF_PID_MAX_LIMIT;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	/* "32768\n" */
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		n--;
	if (n <= 0 || conf_count(buf, (size_t)n, CONF_PID_MAX_LIMIT, &v) < 0 || v < 2)
		return CONF_PID_MAX_LIMIT;
	return v;
}

int conf_size(const char *s, size_t len, uint64_t *bytes)
{
	static const char units[] = "KMGT";
	uint64_t n = 0, mult = 1;
	size_t i = 0;

	for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
		if (n > (UINT64_MAX - 9) / 10)
			return -1;
		n = n * 10 + (uint64_t)(s[i] - '0');
	}
	if (i == 0)
		return -1;
	if (i < len) {
		const char *u = memchr(units, s[i], 4);

		if (!u)
			return -1;
		for (long k = 0; k <= u - units; k++)
			mult *= 1024;
		i++;
		if (i < len && s[i] == 'i')
			i++;
		if (i < len && s[i] == 'B')
			i++;
	}
	if (i != len || n > UINT64_MAX / mult)
		return -1;
	*bytes = n * mult;
	return 0;
}
