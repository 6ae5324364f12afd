/*
 * Open addressing with linear probing, doubling at half load; nothing is
 * ever removed (a process's nodes live as long as its ingest).
 */
#include "stacktree.h"

#include <errno.h>
#include <stdlib.h>

#define FIRST_SLOTS 256u

static size_t home(const struct stacktree *t, uint32_t parent, uint64_t pc)
{
	uint64_t h = (pc ^ ((uint64_t)parent << 32 | parent)) * 0x9e3779b97f4a7c15ull;

	return (size_t)(h ^ (h >> 29)) & t->mask;
}

/* The slot of (parent, pc), or the empty slot where it would go. */
static struct stacktree_slot *probe(const struct stacktree *t, uint32_t parent, uint64_t pc)
{
	size_t i = home(t, parent, pc);

	while (t->slots[i].node && (t->slots[i].parent != parent || t->slots[i].pc != pc))
		i = (i + 1) & t->mask;
	return &t->slots[i];
}

uint32_t stacktree_find(const struct stacktree *t, uint32_t parent, uint64_t pc)
{
	return t->slots ? probe(t, parent, pc)->node : 0;
}

static int resize(struct stacktree *t, size_t n)
{
	struct stacktree_slot *old = t->slots;
	size_t old_n = old ? t->mask + 1 : 0;

	t->slots = calloc(n, sizeof(*t->slots));
	if (!t->slots) {
		t->slots = old;
		return -ENOMEM;
	}
	t->mask = n - 1;
	for (size_t i = 0; i < old_n; i++)
		if (old[i].node)
			*probe(t, old[i].parent, old[i].pc) = old[i];
	free(old);
	return 0;
}

int stacktree_remember(struct stacktree *t, uint32_t parent, uint64_t pc, uint32_t node)
{
	struct stacktree_slot *s;

	if (t->count >= STACKTREE_MAX_NODES)
		return 0;
	if (!t->slots || (t->count + 1) * 2 > t->mask + 1) {
		int err = resize(t, t->slots ? (t->mask + 1) * 2 : FIRST_SLOTS);

		if (err)
			return err;
	}
	s = probe(t, parent, pc);
	if (!s->node)
		t->count++;
	*s = (struct stacktree_slot){ .pc = pc, .parent = parent, .node = node };
	return 0;
}

void stacktree_free(struct stacktree *t)
{
	free(t->slots);
	*t = (struct stacktree){ 0 };
}
