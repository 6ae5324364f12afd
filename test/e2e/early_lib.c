/*
 * libearly.so, linked into wl_early: its constructor allocates before the
 * shim's own constructor has run (the dynamic loader runs a program's
 * libraries' constructors first), as libstdc++'s does with its 72,704-byte
 * emergency pool.  Sizes that nothing else asks for.  And a free(NULL),
 * which the shim does not count before its constructor (docs/schema.md).
 */
#include <stdlib.h>

void *early_kept;

__attribute__((constructor)) static void early(void)
{
	void *volatile p = malloc(5555);
	void *volatile null = 0;

	early_kept = malloc(7777);
	free(p);
	p = calloc(3, 1111);
	p = realloc(p, 2222);
	free(p);
	free(null);
}
