/* fakepy.h: libfakepy.so's interface (fakepy.c, anonmaps.c). */
#ifndef SHIMMER_TEST_FAKEPY_H
#define SHIMMER_TEST_FAKEPY_H

#include <stddef.h>

/* Arenas its constructor maps, and of those gives back. */
#define FAKEPY_EARLY_MAPS 3
#define FAKEPY_EARLY_UNMAPS 1

void *PyObject_Malloc(size_t n);
void PyObject_GetArenaAllocator(void *allocator);
void *Py_NewRef(void *o);

/* Maps `maps` arenas of 1 MiB and gives `unmaps` of them back, then maps
 * and unmaps `small` regions of 256 KiB of the same shape (not its arena
 * size).  0, or -1 when told more than it holds. */
int fake_arenas(int maps, int unmaps, int small);

#endif
