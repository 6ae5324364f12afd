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
	uint64_t t; /* when the block became live, in the process's clock */
};

/* Zero-initialised is empty and valid. */
struct ptrmap {
	struct ptrmap_entry *slots;
	size_t mask;
	unsigned shift;
	size_t count;
};

/* Maps key (non-zero) to (val (non-zero), t).  An entry it replaces is
 * copied to *prev when prev is not NULL (prev->key is 0 when there was
 * none).  Returns 0 or -ENOMEM (the map is unchanged). */
int ptrmap_put(struct ptrmap *m, uint64_t key, int64_t val, uint64_t t,
	       struct ptrmap_entry *prev);

/* Removes key and returns its value (and its t in *t if t is not NULL), or
 * 0 when absent. */
int64_t ptrmap_take(struct ptrmap *m, uint64_t key, uint64_t *t);

/* key's value (and its t in *t if t is not NULL), left in place, or 0
 * when absent. */
int64_t ptrmap_get(const struct ptrmap *m, uint64_t key, uint64_t *t);

/* Releases the table; the map is empty and reusable afterwards. */
void ptrmap_free(struct ptrmap *m);

#endif
