/*
 * Blocks by address in birth order (blockmap.h).  The live map holds the
 * newest block of an address, so the common case (no release pending when
 * the address is reused) costs one pointer-map operation a call; the
 * chains of displaced blocks live in one pool with a free list.
 */
#include "blockmap.h"

#include <errno.h>
#include <stdlib.h>

/* BLOCKMAP_CHAINED on a live entry's order: its address has a chain (a
 * chain never outlives its address's live entry: taking the live block
 * moves one of the chain into its place). */
#define CHAINED BLOCKMAP_CHAINED

static uint32_t entry_new(struct blockmap *m, int64_t val, uint64_t order, uint32_t next)
{
	uint32_t i;

	if (m->free) {
		i = m->free - 1;
		m->free = m->e[i].next;
	} else {
		if (m->n == m->cap) {
			uint32_t cap = m->cap ? 2 * m->cap : 64;
			struct blockmap_entry *e = realloc(m->e, cap * sizeof(*e));

			if (!e)
				return 0;
			m->e = e;
			m->cap = cap;
		}
		i = m->n++;
	}
	m->e[i] = (struct blockmap_entry){ .val = val, .order = order, .next = next };
	m->chained++;
	return i + 1;
}

static void entry_release(struct blockmap *m, uint32_t i)
{
	m->e[i].next = m->free;
	m->free = i + 1;
	m->chained--;
}

/* Adds block (val, order) to the chain at ptr, dropping the oldest of a
 * chain that grows past BLOCKMAP_CHAIN_MAX. */
static int chain_add(struct blockmap *m, uint64_t ptr, int64_t val, uint64_t order)
{
	uint64_t head = (uint64_t)ptrmap_take(&m->old, ptr, NULL);
	uint32_t h = entry_new(m, val, order, (uint32_t)head), n = 0, *link, *oldest = NULL;

	if (!h) {
		/* the chain stays as it was */
		if (head)
			ptrmap_put(&m->old, ptr, (int64_t)head, 0, NULL);
		return -ENOMEM;
	}
	for (link = &h; *link; link = &m->e[*link - 1].next, n++)
		if (!oldest || m->e[*link - 1].order < m->e[*oldest - 1].order)
			oldest = link;
	if (n > BLOCKMAP_CHAIN_MAX) {
		uint32_t i = *oldest - 1;

		*oldest = m->e[i].next;
		entry_release(m, i);
	}
	return ptrmap_put(&m->old, ptr, h, 0, NULL);
}

int blockmap_put_displaced(struct blockmap *m, uint64_t ptr, int64_t val, uint64_t order,
			   const struct ptrmap_entry *prev)
{
	int err = chain_add(m, ptr, prev->val, prev->t & ~CHAINED);

	/* the live entry says that its address has a chain (replacing it
	 * cannot grow the map) */
	if (!err)
		err = ptrmap_put(&m->live, ptr, val, order | CHAINED, NULL);
	return err;
}

/* blockmap_take() where blocks are displaced at ptr: live (its order
 * live_order, marked) was taken from the live map. */
int64_t blockmap_take_chained(struct blockmap *m, uint64_t ptr, uint64_t order, int64_t live,
			      uint64_t live_order)
{
	uint64_t best_order = 0, head;
	int64_t best = 0;
	uint32_t *link, *best_link = NULL;

	live_order &= ~CHAINED;
	if (live_order <= order) {
		best = live;
		best_order = live_order;
	}
	head = (uint64_t)ptrmap_take(&m->old, ptr, NULL);
	if (head) {
		uint32_t h = (uint32_t)head;

		for (link = &h; *link; link = &m->e[*link - 1].next) {
			const struct blockmap_entry *e = &m->e[*link - 1];

			if (e->order <= order && (!best || e->order > best_order)) {
				best = e->val;
				best_order = e->order;
				best_link = link;
			}
		}
		if (best_link) {
			uint32_t i = *best_link - 1;

			*best_link = m->e[i].next;
			entry_release(m, i);
		}
		head = h;
	}
	/* what is left: the live block back in place, or a displaced one
	 * taking it; marked while a chain is left */
	if (best != live) {
		live_order |= head ? CHAINED : 0;
		if (ptrmap_put(&m->live, ptr, live, live_order, NULL))
			return -ENOMEM;
	} else if (head) {
		uint32_t i = (uint32_t)head - 1;

		head = m->e[i].next;
		if (ptrmap_put(&m->live, ptr, m->e[i].val, m->e[i].order | (head ? CHAINED : 0),
			       NULL))
			return -ENOMEM;
		entry_release(m, i);
	}
	if (head && ptrmap_put(&m->old, ptr, (int64_t)head, 0, NULL))
		return -ENOMEM;
	return best;
}

uint64_t blockmap_count(const struct blockmap *m)
{
	return m->live.count + m->chained;
}

void blockmap_free(struct blockmap *m)
{
	ptrmap_free(&m->live);
	ptrmap_free(&m->old);
	free(m->e);
	*m = (struct blockmap){ 0 };
}
