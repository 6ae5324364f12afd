/*
 * esc.h - one escaping of text for people, for the tools (tables, notes,
 * warnings: tools/fmt.h) and the collector (its log lines), which print
 * strings a traced program chose (argv, paths, thread, range and kernel
 * names, a job key): whatever they hold, what reaches a terminal or a
 * journal holds nothing it obeys and no line of its own.
 *
 *   LF, CR, TAB                          \n \r \t
 *   other bytes below 0x20, and DEL      \xNN (two lowercase hex digits)
 *   a byte that is not UTF-8             \xNN
 *   C1 controls U+0080-U+009F, line and paragraph separators
 *   U+2028-U+2029, bidirectional formatting U+061C, U+200E, U+200F,
 *   U+202A-U+202E, U+2066-U+2069        \uNNNN
 *
 * Everything else, other UTF-8 included, is written as it is.  Header
 * only, pure, async-signal-safe.
 */
#ifndef SHIMMER_ESC_H
#define SHIMMER_ESC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "utf8.h"

/* The longest escape of one character. */
#define ESC_CHAR_MAX 6

/* The code point of the valid UTF-8 sequence of n bytes at s. */
static inline uint32_t esc_code_point(const unsigned char *s, size_t n)
{
	static const unsigned char lead_bits[5] = { 0, 0x7f, 0x1f, 0x0f, 0x07 };
	uint32_t c = s[0] & lead_bits[n];

	for (size_t i = 1; i < n; i++)
		c = (c << 6) | (s[i] & 0x3f);
	return c;
}

/* Characters beyond ASCII that change how a terminal shows the text
 * around them instead of showing themselves: C1 controls, the line and
 * paragraph separators, bidirectional formatting. */
static inline int esc_layout_control(uint32_t c)
{
	return (c >= 0x80 && c <= 0x9f) || c == 0x061c || c == 0x200e || c == 0x200f ||
	       (c >= 0x2028 && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069);
}

/* "\uXXXX" of c (below 0x10000) into buf; its length, 6. */
static inline size_t esc_put_u4(char *buf, uint32_t c)
{
	static const char hex[] = "0123456789abcdef";

	buf[0] = '\\';
	buf[1] = 'u';
	buf[2] = hex[(c >> 12) & 15];
	buf[3] = hex[(c >> 8) & 15];
	buf[4] = hex[(c >> 4) & 15];
	buf[5] = hex[c & 15];
	return 6;
}

/* The length of the character beyond ASCII at s (n >= 1 bytes left) when
 * it is shown as it is (valid UTF-8, not a layout control), else 0.  The
 * JSON writer's rule too (tools/fmt.c). */
static inline size_t esc_shown_utf8(const unsigned char *s, size_t n)
{
	size_t k = utf8_len(s, n);

	return k && !esc_layout_control(esc_code_point(s, k)) ? k : 0;
}

/* How many leading bytes of s[0..n) are written as they are (keep_lf:
 * LF is one of them). */
static inline size_t esc_plain(const char *s, size_t n, int keep_lf)
{
	size_t i = 0;

	while (i < n) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x80) {
			if ((c < 0x20 && !(keep_lf && c == '\n')) || c == 0x7f)
				return i;
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

/* The escape of the character at s (n >= 1 bytes left) into buf (at least
 * ESC_CHAR_MAX bytes), *len its length; returns the bytes of s it took. */
static inline size_t esc_char(const char *s, size_t n, char *buf, size_t *len)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;
	size_t k = utf8_len(p, n);

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
	if (k == 1 && (*p == '\n' || *p == '\r' || *p == '\t')) {
		buf[0] = '\\';
		buf[1] = *p == '\n' ? 'n' : *p == '\r' ? 'r' : 't';
		*len = 2;
	} else if (k == 0 || *p < 0x20 || *p == 0x7f) {
		buf[0] = '\\';
		buf[1] = 'x';
		buf[2] = hex[*p >> 4];
		buf[3] = hex[*p & 15];
		*len = 4;
	} else {
		buf[0] = (char)*p;
		*len = 1;
	}
	return 1;
}

/* s[0..n) escaped into out (room for len >= 1 bytes), terminated; what
 * does not fit is left out, never half an escape or a UTF-8 sequence.
 * Returns the bytes written, the terminator not counted. */
static inline size_t esc_copy(char *out, size_t len, const char *s, size_t n)
{
	size_t i = 0, o = 0;

	while (i < n) {
		size_t take = esc_plain(s + i, n - i, 0), put;
		char buf[ESC_CHAR_MAX];

		if (take > len - 1 - o) {
			take = len - 1 - o;
			while (take && ((unsigned char)s[i + take] & 0xc0) == 0x80)
				take--;
			memcpy(out + o, s + i, take);
			o += take;
			break;
		}
		if (take) {
			memcpy(out + o, s + i, take);
			o += take;
			i += take;
			continue;
		}
		take = esc_char(s + i, n - i, buf, &put);
		if (put > len - 1 - o)
			break;
		memcpy(out + o, buf, put);
		o += put;
		i += take;
	}
	out[o] = 0;
	return o;
}

#endif
