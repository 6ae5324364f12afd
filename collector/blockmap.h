/*
 * Blocks by address, in the order they were born and released: the pairing
 * of a release with the block it ended, shared by the row path (ingest.c,
 * values are allocations rowids) and the aggregated heap (heapagg.c,
 * values are block slots + 1).
 *
 * Every block carries an order: for the host heap its place in the
 * process's heap order (wire.h's seq, or the time fallback of a source
 * that numbers none, see rec_heap_birth()), for CUDA memory an instant.
 * A release ends, of the live block at its address and the blocks
 * displaced there, the latest born at or before its own order: between an
 * allocation and its release no other allocation can take the address, so
 * whatever order the records arrive in, that is the block it ended.
 * Blocks are displaced when a release comes after a newer block took the
 * address (a thread stalled between its real free and its record, or an
 * untimed malloc stamped before the free of the address it returned);
 * they wait in a chain per address, at most BLOCKMAP_CHAIN_MAX of them (a
 * longer chain drops its oldest: blocks whose release a lossy ring lost).
 *
 * Pointer 0 is never a key, value 0 never a value, orders are below 2^63
 * (a count of calls, a time in ns or TSC ticks).  Errors: -ENOMEM.
 * Not thread-safe.
 */
#ifndef SHIMMER_COLLECTOR_BLOCKMAP_H
#define SHIMMER_COLLECTOR_BLOCKMAP_H

#include <errno.h>
#include <stdint.h>

#include "ptrmap.h"

#define BLOCKMAP_CHAIN_MAX 16u

struct blockmap_entry {
	int64_t val;
	uint64_t order;
	uint32_t next; /* index + 1, 0 ends */
};

/* Zero-initialised is empty and valid. */
struct blockmap {
	struct ptrmap live; /* address -> (the newest block, its order) */
	struct ptrmap old;  /* address -> its chain's first entry's index + 1 */
	struct blockmap_entry *e; /* the chains' pool */
	uint32_t n, cap;
	uint32_t free; /* the pool's free list: index + 1, 0 when empty */
	uint32_t chained; /* entries in chains */
};

/* A live entry's order has this bit when blocks are displaced at its
 * address (blockmap.c): a release where none was costs one lookup. */
#define BLOCKMAP_CHAINED (1ull << 63)

/* The out-of-line halves of the two below (blockmap.c). */
int blockmap_put_displaced(struct blockmap *m, uint64_t ptr, int64_t val, uint64_t order,
			   const struct ptrmap_entry *prev);
int64_t blockmap_take_chained(struct blockmap *m, uint64_t ptr, uint64_t order, int64_t live,
			      uint64_t live_order);

/* Block val (non-zero), born at order, at ptr (non-zero); a block still
 * live there is displaced.  0 or -ENOMEM.  (Inline, as the two maps'
 * callers did before: a call per heap event is measurable.) */
static inline int blockmap_put(struct blockmap *m, uint64_t ptr, int64_t val, uint64_t order)
{
	struct ptrmap_entry prev;
	int err = ptrmap_put(&m->live, ptr, val, order, &prev);

	return err || !prev.key ? err : blockmap_put_displaced(m, ptr, val, order, &prev);
}

/* Removes and returns the block at ptr that a release at order ends (an
 * equal order pairs), 0 when there is none, or -ENOMEM. */
static inline int64_t blockmap_take(struct blockmap *m, uint64_t ptr, uint64_t order)
{
	uint64_t live_order = 0;
	int64_t live = ptrmap_take(&m->live, ptr, &live_order);

	if (live_order & BLOCKMAP_CHAINED)
		return blockmap_take_chained(m, ptr, order, live, live_order);
	if (!live || live_order <= order)
		return live;
	return ptrmap_put(&m->live, ptr, live, live_order, NULL) ? -ENOMEM : 0;
}

/* Blocks held: live and displaced. */
uint64_t blockmap_count(const struct blockmap *m);

/* Releases everything; the map is empty and reusable afterwards. */
void blockmap_free(struct blockmap *m);

#endif
