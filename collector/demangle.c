/*
 * libiberty's callback demangler (the code behind __cxa_demangle and
 * c++filt) prints through a callback in chunks of at most 255 bytes; the
 * callback copies them out and, once the output passes its bound, leaves
 * the demangler with longjmp.  That is safe because the callback interface
 * allocates nothing: its components, substitutions and saved scopes are
 * arrays on the stack, which the jump simply discards.
 */
#include "demangle.h"

#include <errno.h>
#include <libiberty/demangle.h>
#include <setjmp.h>
#include <string.h>

struct sink {
	char *out;
	size_t len, cap;
	jmp_buf over;
};

static void append(const char *s, size_t n, void *opaque)
{
	struct sink *k = opaque;

	if (n >= k->cap - k->len)
		longjmp(k->over, 1);
	memcpy(k->out + k->len, s, n);
	k->len += n;
}

long demangle(const char *name, size_t len, char *out, size_t out_size)
{
	char in[DEMANGLE_IN_MAX + 1];
	struct sink k = { .out = out, .cap = out_size < DEMANGLE_OUT_MAX ? out_size
									  : DEMANGLE_OUT_MAX };

	if (out_size)
		out[0] = 0;
	if (len < 3 || name[0] != '_' || name[1] != 'Z' || memchr(name, 0, len))
		return -EINVAL;
	if (len > DEMANGLE_IN_MAX || k.cap == 0)
		return -E2BIG;
	memcpy(in, name, len);
	in[len] = 0;
	if (setjmp(k.over)) {
		out[0] = 0;
		return -E2BIG;
	}
	if (!cplus_demangle_v3_callback(in, DMGL_PARAMS | DMGL_TYPES, append, &k)) {
		out[0] = 0;
		return -EINVAL;
	}
	out[k.len] = 0;
	return (long)k.len;
}
