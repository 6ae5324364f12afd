/*
 * libhard.so, for wl_hard deepbind: opened with RTLD_DEEPBIND, its malloc
 * and free bind to libc's own unless the shim clears the flag.
 */
#include <stdlib.h>

#define KEPT 3u

static void *kept[KEPT];

unsigned hard_lib_allocs(unsigned n);

/* n blocks of 4321 bytes; all but the last KEPT freed at once. */
unsigned hard_lib_allocs(unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		void *volatile p = malloc(4321);

		if (i + KEPT >= n)
			kept[i + KEPT - n] = p;
		else
			free(p);
	}
	return n < KEPT ? n : KEPT;
}
