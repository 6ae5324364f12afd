/*
 * wl_early: a C program whose library (early_lib.c) allocated before the
 * shim's constructor ran: malloc(5555), malloc(7777) kept, free(5555),
 * calloc(3, 1111), realloc to 2222, free.  main frees the kept block and
 * allocates once more (malloc(6666), freed).  free(NULL) once in the
 * library's constructor, in main, in an atexit handler and in a destructor
 * (which runs before the shim's): function_counts counts none of them, in
 * either mode (docs/schema.md).
 */
#include <stdlib.h>

extern void *early_kept;
static void *volatile null;

static void at_exit(void)
{
	free(null);
}

__attribute__((destructor)) static void fini(void)
{
	free(null);
}

int main(void)
{
	void *volatile p = malloc(6666);

	free(early_kept);
	free(p);
	free(null);
	atexit(at_exit);
	return 0;
}
