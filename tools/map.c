/*
 * map, array_grow and strtab; see map.h.  Linear probing over a slot array
 * kept at most half full; the slots index the dense item array, so growing
 * the items never moves a slot and iteration is a plain loop over 0..n-1.
 * strtab is the same scheme over strings (FNV-1a); equal strings always
 * get one index, which the comparison on every probe guarantees.
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

static uint64_t fnv(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static int strtab_rehash(struct strtab *t)
{
	size_t ns = t->nslots ? t->nslots * 2 : 64;
	uint32_t *slots = calloc(ns, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < t->n; i++) {
		size_t j = fnv(t->v[i]) & (ns - 1);

		while (slots[j])
			j = (j + 1) & (ns - 1);
		slots[j] = (uint32_t)i + 1;
	}
	free(t->slots);
	t->slots = slots;
	t->nslots = ns;
	return 0;
}

int strtab_index(struct strtab *t, const char *str, int64_t *idx)
{
	size_t j;
	int err;

	if ((t->n + 1) * 2 > t->nslots && (err = strtab_rehash(t)))
		return err;
	for (j = fnv(str) & (t->nslots - 1); t->slots[j]; j = (j + 1) & (t->nslots - 1))
		if (strcmp(t->v[t->slots[j] - 1], str) == 0) {
			*idx = t->slots[j] - 1;
			return 0;
		}
	err = array_grow(&t->v, &t->cap, t->n, sizeof(*t->v));
	if (err)
		return err;
	t->v[t->n] = strdup(str);
	if (!t->v[t->n])
		return -ENOMEM;
	t->slots[j] = (uint32_t)++t->n;
	*idx = (int64_t)t->n - 1;
	return 0;
}

void strtab_free(struct strtab *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->v[i]);
	free(t->v);
	free(t->slots);
	memset(t, 0, sizeof(*t));
}
