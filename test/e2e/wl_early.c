/*
 * wl_early: a C program whose library (early_lib.c) allocated before the
 * shim's constructor ran: malloc(5555), malloc(7777) kept, free(5555),
 * calloc(3, 1111), realloc to 2222, free.  main frees the kept block and
 * allocates once more (malloc(6666), freed).
 */
#include <stdlib.h>

extern void *early_kept;

int main(void)
{
	void *volatile p = malloc(6666);

	free(early_kept);
	free(p);
	return 0;
}
