/*
 * wl_nopie: a non-PIE program that takes malloc's and free's addresses,
 * as Debian's and Ubuntu's python3 does.  The linker then gives the
 * executable a canonical PLT slot for each (an undefined dynamic symbol
 * with an address, so that every object sees one address for the
 * function), and a lookup of "malloc" in the global scope finds that slot
 * in the executable first.  It is no definition: the slot jumps to the
 * shim's malloc, which must trace the program (t_exact.sh).
 *
 * Usage: wl_nopie N SIZE: N blocks of SIZE bytes allocated through the
 * pointers; the even ones freed, the odd ones leaked.
 *
 * Built with -DOWN_MALLOC (wl_ownmalloc), the executable defines the
 * malloc family itself, as a program linking an allocator statically
 * does: its definitions come first in every lookup, the shim's hooks see
 * none of the program's calls, and the shim must say so.
 */
#include <stdlib.h>

#ifdef OWN_MALLOC
void *__libc_malloc(size_t n);
void __libc_free(void *p);
void *__libc_calloc(size_t n, size_t m);
void *__libc_realloc(void *p, size_t n);

void *malloc(size_t n)
{
	return __libc_malloc(n);
}

void free(void *p)
{
	__libc_free(p);
}

void *calloc(size_t n, size_t m)
{
	return __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
	return __libc_realloc(p, n);
}
#endif

void *(*volatile alloc_fn)(size_t);
void (*volatile free_fn)(void *);

int main(int argc, char **argv)
{
	unsigned n = argc > 2 ? (unsigned)strtoul(argv[1], NULL, 10) : 0;
	size_t size = argc > 2 ? strtoul(argv[2], NULL, 10) : 0;

	/* taken in code (an absolute address in non-PIC code): what makes
	 * the linker's canonical PLT slots */
	alloc_fn = malloc;
	free_fn = free;
	for (unsigned i = 0; i < n; i++) {
		void *p = alloc_fn(size);

		if (!p)
			return 1;
		if (i % 2 == 0)
			free_fn(p);
	}
	return argc > 2 ? 0 : 2;
}
