/*
 * fakepy.c: libfakepy.so, a stand-in for a Python runtime as the shim
 * recognizes one (preload/pyarena.h): it defines PyObject_Malloc,
 * PyObject_GetArenaAllocator and Py_NewRef (a runtime of 3.10 or later: 1
 * MiB arenas), and maps "arenas" of CPython's very shape.  Its
 * constructor runs before the shim's (it is the program's own
 * dependency): FAKEPY_EARLY_MAPS arenas mapped then and FAKEPY_EARLY_UNMAPS
 * of them given back must be recorded as later ones are (t_pyarena.sh).
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "fakepy.h"

#define ARENA (1ul << 20)

void *PyObject_Malloc(size_t n)
{
	return malloc(n);
}

void PyObject_GetArenaAllocator(void *allocator)
{
	(void)allocator;
}

void *Py_NewRef(void *o)
{
	return o;
}

/* errno stays as it was across a map that succeeds, recorded or not */
static void *arena_map(size_t len)
{
	void *p;

	errno = 777;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED || errno != 777)
		abort();
	((volatile char *)p)[0] = 1;
	return p;
}

int fake_arenas(int maps, int unmaps, int small)
{
	void *v[64];
	int i;

	if (maps > 64 || unmaps > maps)
		return -1;
	for (i = 0; i < maps; i++)
		v[i] = arena_map(ARENA);
	for (i = 0; i < unmaps; i++)
		if (munmap(v[i], ARENA) != 0)
			return -1;
	/* not this runtime's arena size: no arena */
	for (i = 0; i < small; i++)
		if (munmap(arena_map(256ul << 10), 256ul << 10) != 0)
			return -1;
	return 0;
}

__attribute__((constructor)) static void early(void)
{
	void *v[FAKEPY_EARLY_MAPS];
	int i;

	for (i = 0; i < FAKEPY_EARLY_MAPS; i++)
		v[i] = arena_map(ARENA);
	for (i = 0; i < FAKEPY_EARLY_UNMAPS; i++)
		munmap(v[i], ARENA);
}
