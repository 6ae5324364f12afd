/*
 * utf8.h - one UTF-8 validator for the collector (argv into JSON) and the
 * tools (strings into JSON): both replace what is not UTF-8 with U+FFFD,
 * and must agree on what that is.  Header only.
 */
#ifndef SHIMMER_UTF8_H
#define SHIMMER_UTF8_H

#include <stddef.h>

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

#endif /* SHIMMER_UTF8_H */
