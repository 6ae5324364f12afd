/*
 * map and array_grow; see map.h.  Linear probing over a slot array kept at
 * most half full; the slots index the dense item array, so growing the
 * items never moves a slot and iteration is a plain loop over 0..n-1.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "map.h"

static size_t key_hash(const struct map_key *k)
{
	uint64_t h = (uint64_t)k->proc_id;

	h = h * 0x100000001b3u ^ (uint64_t)k->a;
	h = h * 0x100000001b3u ^ (uint64_t)k->b;
	/* splitmix64's finalizer spreads the small integers over all bits. */
	h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9u;
	h = (h ^ (h >> 27)) * 0x94d049bb133111ebu;
	return (size_t)(h ^ (h >> 31));
}

static int key_equal(const struct map_key *a, const struct map_key *b)
{
	return a->proc_id == b->proc_id && a->a == b->a && a->b == b->b;
}

void *map_item(const struct map *m, size_t i)
{
	return m->items + i * m->item_size;
}

static int map_rehash(struct map *m)
{
	size_t nslots = m->nslots ? m->nslots * 2 : 64;
	uint32_t *slots = calloc(nslots, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (size_t j = 0; j < m->n; j++) {
		size_t i = key_hash(map_item(m, j)) & (nslots - 1);

		while (slots[i])
			i = (i + 1) & (nslots - 1);
		slots[i] = (uint32_t)(j + 1);
	}
	free(m->slots);
	m->slots = slots;
	m->nslots = nslots;
	return 0;
}

/* The slot where k is or would go; m->nslots > 0. */
static size_t map_slot(const struct map *m, const struct map_key *k)
{
	size_t mask = m->nslots - 1, i;

	for (i = key_hash(k) & mask; m->slots[i]; i = (i + 1) & mask)
		if (key_equal(map_item(m, m->slots[i] - 1), k))
			break;
	return i;
}

void *map_find(const struct map *m, const struct map_key *k)
{
	size_t i;

	if (m->nslots == 0)
		return NULL;
	i = map_slot(m, k);
	return m->slots[i] ? map_item(m, m->slots[i] - 1) : NULL;
}

void *map_get(struct map *m, const struct map_key *k)
{
	char *item;
	size_t i;

	if ((m->n + 1) * 2 > m->nslots && map_rehash(m) < 0)
		return NULL;
	i = map_slot(m, k);
	if (m->slots[i])
		return map_item(m, m->slots[i] - 1);
	if (array_grow(&m->items, &m->cap, m->n, m->item_size) < 0)
		return NULL;
	item = map_item(m, m->n);
	memset(item, 0, m->item_size);
	memcpy(item, k, sizeof(*k));
	m->slots[i] = (uint32_t)++m->n;
	return item;
}

void map_free(struct map *m)
{
	free(m->items);
	free(m->slots);
	m->items = NULL;
	m->slots = NULL;
	m->n = m->cap = m->nslots = 0;
}

int array_grow(void *pp, size_t *cap, size_t n, size_t size)
{
	void **p = pp;
	void *q;
	size_t c;

	if (n < *cap)
		return 0;
	c = *cap ? *cap * 2 : 16;
	q = realloc(*p, c * size);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = c;
	return 0;
}

int strlist_index(char ***v, size_t *n, const char *name, int64_t *idx)
{
	char **l;
	size_t i;

	for (i = 0; i < *n; i++) {
		if (strcmp((*v)[i], name) == 0) {
			*idx = (int64_t)i;
			return 0;
		}
	}
	l = realloc(*v, (*n + 1) * sizeof(*l));
	if (!l)
		return -ENOMEM;
	*v = l;
	l[i] = strdup(name);
	if (!l[i])
		return -ENOMEM;
	++*n;
	*idx = (int64_t)i;
	return 0;
}
