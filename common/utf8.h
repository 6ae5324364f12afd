/*
 * utf8.h - one UTF-8 validator for the collector (argv into JSON) and the
 * tools (strings into JSON): both replace what is not UTF-8 with U+FFFD,
 * and must agree on what that is.  And one encoder, for the shim's names
 * that come as code points (NVTX's wide strings, Python's str).  Header
 * only.
 */
#ifndef SHIMMER_UTF8_H
#define SHIMMER_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Length of the valid UTF-8 sequence at s (n >= 1 bytes left), 0 if it is
 * not one: overlong forms, surrogates and code points above U+10FFFF are
 * not. */
static inline size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	unsigned lo = 0x80, hi = 0xbf;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4;
	else
		return 0;
	/* Overlong forms, surrogates and code points above U+10FFFF. */
	if (s[0] == 0xe0)
		lo = 0xa0;
	else if (s[0] == 0xed)
		hi = 0x9f;
	else if (s[0] == 0xf0)
		lo = 0x90;
	else if (s[0] == 0xf4)
		hi = 0x8f;
	if (len > n || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

/* Appends code point c to buf[*n..cap) as UTF-8, U+FFFD for a surrogate
 * or a value above U+10FFFF (which utf8_len() would refuse); 0, and
 * nothing written, when it does not fit. */
static inline int utf8_put(char *buf, size_t *n, size_t cap, uint32_t c)
{
	unsigned char t[4];
	size_t k;

	if (c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		c = 0xfffd;
	if (c < 0x80) {
		t[0] = (unsigned char)c;
		k = 1;
	} else if (c < 0x800) {
		t[0] = (unsigned char)(0xc0 | (c >> 6));
		t[1] = (unsigned char)(0x80 | (c & 0x3f));
		k = 2;
	} else if (c < 0x10000) {
		t[0] = (unsigned char)(0xe0 | (c >> 12));
		t[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
		t[2] = (unsigned char)(0x80 | (c & 0x3f));
		k = 3;
	} else {
		t[0] = (unsigned char)(0xf0 | (c >> 18));
		t[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3f));
		t[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3f));
		t[3] = (unsigned char)(0x80 | (c & 0x3f));
		k = 4;
	}
	if (*n + k > cap)
		return 0;
	for (size_t i = 0; i < k; i++)
		buf[(*n)++] = (char)t[i];
	return 1;
}

#endif /* SHIMMER_UTF8_H */
