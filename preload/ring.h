/*
 * The producer side of one slot's single-producer single-consumer ring
 * (the protocol is in common/wire.h).  Pure functions over a struct
 * shm_slot and its ring bytes, so tests can drive it without the rest of
 * the shim.
 *
 * Only the thread that owns the slot may call these; none of them blocks,
 * allocates or makes a system call.
 */
#ifndef SHIMMER_RING_H
#define SHIMMER_RING_H

#include <stdint.h>

#include "wire.h"

struct ring_prod {
	struct shm_slot *slot;
	uint8_t *data;  /* ring_bytes bytes */
	uint64_t head;  /* our copy: we are the only writer of slot->head */
	uint64_t tail;  /* last tail read from the consumer */
	uint32_t bytes; /* power of two */
};

/* Starts producing into slot, continuing from its current head. */
void ring_attach(struct ring_prod *p, struct shm_slot *slot, uint8_t *data,
		 uint32_t bytes);

/* Whether a record of len bytes would be reserved now, with spare bytes
 * still free after it.  The consumer only frees room, so a yes holds until
 * this producer writes again. */
int ring_fits_spare(struct ring_prod *p, uint32_t len, uint32_t spare);

static inline int ring_fits(struct ring_prod *p, uint32_t len)
{
	return ring_fits_spare(p, len, 0);
}

/*
 * Returns where a record of len bytes (a multiple of 8, at most 65528) may
 * be written, after padding to the ring's end if it would not fit there;
 * NULL when the consumer has not freed enough room.  Nothing is visible to
 * the consumer until ring_commit(p, len).
 */
void *ring_reserve(struct ring_prod *p, uint32_t len);

/* Publishes the record reserved last. */
static inline void ring_commit(struct ring_prod *p, uint32_t len)
{
	p->head += len;
	__atomic_store_n(&p->slot->head, p->head, __ATOMIC_RELEASE);
}

#endif /* SHIMMER_RING_H */
