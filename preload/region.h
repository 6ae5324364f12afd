/*
 * The event region: a sealed memfd holding the region header and one slot
 * (control block + ring) per traced thread; see common/wire.h.  Pages are
 * touched only when a slot is used.
 *
 * region_create() and region_destroy() are for the constructor and the fork
 * child; region_claim() and region_retire() are thread-safe and lock-free.
 */
#ifndef SHIMMER_REGION_H
#define SHIMMER_REGION_H

#include <stdint.h>

#include "wire.h"

struct region {
	struct shm_region *hdr; /* the mapping, NULL when none */
	uint64_t bytes;
	int fd; /* the memfd (kept, high, for a reconnect), -1 once closed */
	uint64_t fd_dev, fd_ino; /* its identity: whether fd is still ours (region_fd()) */
	uint32_t nslots;
	uint32_t ring_bytes;
};

/* Creates, maps, fills and seals a region.  Returns 0 or -errno; r keeps
 * nslots and ring_bytes either way. */
int region_create(struct region *r, uint32_t nslots, uint32_t ring_bytes);

/* The memfd if fd is still it (the program may have closed or reused the
 * number), else -1 (and it is forgotten).  Not thread-safe: one caller at
 * a time (the reconnect, the constructor, the fork child). */
int region_fd(struct region *r);

/* Unmaps and closes what is left; safe on a zeroed or destroyed region.
 * Keeps nslots and ring_bytes, the geometry the next region_create() is
 * given (a start that failed, a fork child). */
void region_destroy(struct region *r);

static inline struct shm_slot *region_slot(const struct region *r, uint32_t idx)
{
	return (struct shm_slot *)((uint8_t *)r->hdr + SHM_REGION_HDR_BYTES +
				   idx * SHM_SLOT_STRIDE(r->ring_bytes));
}

static inline uint8_t *region_ring(const struct region *r, uint32_t idx)
{
	return (uint8_t *)region_slot(r, idx) + SHM_SLOT_CTL_BYTES;
}

/*
 * Claims a FREE slot for thread tid, scanning from hint: zeroes its
 * counters, bumps its generation and raises slots_hwm.  Returns the slot
 * index or -ENOSPC.
 */
int region_claim(struct region *r, uint32_t hint, uint32_t tid);

/* Hands the slot back: the collector drains it and sets it FREE. */
void region_retire(struct shm_slot *slot);

/* Whether some slot is RETIRED: free again after the collector's next
 * pass. */
int region_retired(const struct region *r);

/*
 * Retires the ACTIVE slots of threads of process pid that no longer exist:
 * a thread that first allocates after its key destructors ran (glibc frees
 * per-thread buffers last) claims a slot nobody retires.  Returns how many
 * it retired.
 */
int region_reap(struct region *r, uint32_t pid);

#endif /* SHIMMER_REGION_H */
