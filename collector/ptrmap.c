/*
 * Keys are heap or device addresses: aligned and clustered, so they are
 * mixed with a multiplicative hash whose high bits pick the bucket.  The table
 * doubles at 50% load, which keeps a linear probe to a couple of entries.
 */
#include "ptrmap.h"

#include <errno.h>
#include <stdlib.h>

#define MIN_SLOTS 1024u

/* Fibonacci hashing: the top bits of the product spread runs of evenly
 * spaced addresses over the whole table. */
static size_t bucket(const struct ptrmap *m, uint64_t key)
{
	return (size_t)((key * 0x9e3779b97f4a7c15ull) >> m->shift);
}

static void place(struct ptrmap *m, const struct ptrmap_entry *e,
		  struct ptrmap_entry *prev)
{
	size_t i = bucket(m, e->key);

	while (m->slots[i].key && m->slots[i].key != e->key)
		i = (i + 1) & m->mask;
	if (prev)
		*prev = m->slots[i];
	if (!m->slots[i].key)
		m->count++;
	m->slots[i] = *e;
}

static int grow(struct ptrmap *m)
{
	size_t n = m->slots ? (m->mask + 1) * 2 : MIN_SLOTS;
	struct ptrmap old = *m;

	m->slots = calloc(n, sizeof(*m->slots));
	if (!m->slots) {
		*m = old;
		return -ENOMEM;
	}
	m->mask = n - 1;
	m->shift = 64 - (unsigned)__builtin_ctzll(n);
	m->count = 0;
	if (old.slots) {
		for (size_t i = 0; i <= old.mask; i++)
			if (old.slots[i].key)
				place(m, &old.slots[i], NULL);
	}
	free(old.slots);
	return 0;
}

int ptrmap_put(struct ptrmap *m, uint64_t key, int64_t val, uint64_t t,
	       struct ptrmap_entry *prev)
{
	struct ptrmap_entry e = { .key = key, .val = val, .t = t };

	if (!m->slots || (m->count + 1) * 2 > m->mask + 1) {
		int err = grow(m);

		if (err)
			return err;
	}
	place(m, &e, prev);
	return 0;
}

int64_t ptrmap_take(struct ptrmap *m, uint64_t key, uint64_t *t)
{
	size_t i, j;
	int64_t val;

	if (!m->slots || !key)
		return 0;
	for (i = bucket(m, key); m->slots[i].key != key; i = (i + 1) & m->mask)
		if (!m->slots[i].key)
			return 0;
	val = m->slots[i].val;
	if (t)
		*t = m->slots[i].t;
	/* Backward shift: pull later members of the probe run into the hole
	 * unless their home bucket lies cyclically after the hole. */
	for (j = (i + 1) & m->mask; m->slots[j].key; j = (j + 1) & m->mask) {
		size_t home = bucket(m, m->slots[j].key);

		if (((j - home) & m->mask) >= ((j - i) & m->mask)) {
			m->slots[i] = m->slots[j];
			i = j;
		}
	}
	m->slots[i] = (struct ptrmap_entry){ 0 };
	m->count--;
	return val;
}

int64_t ptrmap_get(const struct ptrmap *m, uint64_t key, uint64_t *t)
{
	size_t i;

	if (!m->slots || !key)
		return 0;
	for (i = bucket(m, key); m->slots[i].key != key; i = (i + 1) & m->mask)
		if (!m->slots[i].key)
			return 0;
	if (t)
		*t = m->slots[i].t;
	return m->slots[i].val;
}

void ptrmap_free(struct ptrmap *m)
{
	free(m->slots);
	m->slots = NULL;
	m->mask = 0;
	m->shift = 0;
	m->count = 0;
}
