/*
 * Live blocks of one process: pointer -> rowid of its allocations row, so
 * that a free costs one UPDATE by rowid instead of a search of the table.
 * Open addressing with linear probing and backward-shift deletion (no
 * tombstones, so a long run of malloc/free keeps probes short).  Pointer 0
 * is never a key and rowid 0 is never a value.  Not thread-safe.
 */
#ifndef SHIMMER_COLLECTOR_PTRMAP_H
#define SHIMMER_COLLECTOR_PTRMAP_H

#include <stddef.h>
#include <stdint.h>

struct ptrmap_entry {
	uint64_t key;
	int64_t val;
};

/* Zero-initialised is empty and valid. */
struct ptrmap {
	struct ptrmap_entry *slots;
	size_t mask;
	unsigned shift;
	size_t count;
};

/* Maps key (non-zero) to val (non-zero), replacing an older value.
 * Returns 0 or -ENOMEM (the map is unchanged). */
int ptrmap_put(struct ptrmap *m, uint64_t key, int64_t val);

/* Removes key and returns its value, or 0 when absent. */
int64_t ptrmap_take(struct ptrmap *m, uint64_t key);

/* Releases the table; the map is empty and reusable afterwards. */
void ptrmap_free(struct ptrmap *m);

#endif
