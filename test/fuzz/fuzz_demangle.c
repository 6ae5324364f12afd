/*
 * Strings a client names things with: the bounded demangler must finish
 * fast on any input (libFuzzer's -timeout catches a slow one) and write
 * within its buffer.
 */
#include <errno.h>

#include "collector/demangle.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char out[DEMANGLE_OUT_MAX];
	long n = demangle((const char *)data, size, out, sizeof(out));

	if (n >= 0 && (size_t)n != strlen(out))
		abort();
	if (n < 0 && n != -EINVAL && n != -E2BIG)
		abort();
	return 0;
}
