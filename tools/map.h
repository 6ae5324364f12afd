/*
 * The readers' aggregation containers.  A map is an open-addressing hash
 * table from a key of three integers (a process and two ids) to an item
 * the caller lays out, starting with its struct map_key; the summaries
 * stream millions of rows through one and keep only an item per group, so
 * memory stays proportional to the groups, not the rows.  Not thread-safe.
 */
#ifndef SHIMMER_TOOLS_MAP_H
#define SHIMMER_TOOLS_MAP_H

#include <stddef.h>
#include <stdlib.h>
#include <stdint.h>

struct map_key {
	int64_t proc_id;
	int64_t a;
	int64_t b;
};

/*
 * Items are dense (0..n-1) and start zeroed but for their key; a pointer
 * to one is valid until the next map_get.  Initialise with
 * { .item_size = sizeof(struct my_item) } and release with map_free().
 */
struct map {
	char *items;
	size_t item_size;
	size_t n;
	size_t cap;
	uint32_t *slots; /* item index + 1; 0 is empty */
	size_t nslots;   /* power of two */
};

/* The item of k, added when missing; NULL when out of memory. */
void *map_get(struct map *m, const struct map_key *k);

/* The item of k, or NULL when there is none; never adds. */
void *map_find(const struct map *m, const struct map_key *k);

/* Item i, 0 <= i < m->n. */
void *map_item(const struct map *m, size_t i);

/* Release the items and slots; m may be reused after re-initialising. */
void map_free(struct map *m);

/*
 * Make room for one more element in the array *pp of n elements of size
 * bytes with capacity *cap, doubling it.  Returns 0 or -ENOMEM (the array
 * is left as it was).
 */
int array_grow(void *pp, size_t *cap, size_t n, size_t size);

/* qsort() of an array that may be empty, and then NULL (which qsort's
 * contract forbids, whatever n). */
static inline void array_sort(void *v, size_t n, size_t size,
			      int (*cmp)(const void *, const void *))
{
	if (n > 1)
		qsort(v, n, size, cmp);
}

/*
 * Interned strings, numbered densely from 0 in order of arrival: v[i] is
 * string i.  Initialise with { 0 } and release with strtab_free().
 */
struct strtab {
	char **v;
	size_t n, cap;
	uint32_t *slots; /* index + 1, 0 empty */
	size_t nslots;
};

/* Index of str in t, added when missing.  Returns 0 or -ENOMEM. */
int strtab_index(struct strtab *t, const char *str, int64_t *idx);

/* Release t's strings; t may be reused. */
void strtab_free(struct strtab *t);

#endif /* SHIMMER_TOOLS_MAP_H */
