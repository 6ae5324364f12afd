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

/* The PAD a record of len bytes needs before it: the rest of the ring when
 * the record does not fit there, else 0. */
static inline uint32_t ring_pad_for(const struct ring_prod *p, uint32_t len)
{
	uint32_t room = p->bytes - ((uint32_t)p->head & (p->bytes - 1));

	return room < len ? room : 0;
}

/* Whether a record of len bytes would be reserved now, with spare bytes
 * still free after it.  The consumer only frees room, so a yes holds until
 * this producer writes again.  (Inline, as ring_reserve(): every record
 * takes both.) */
static inline int ring_fits_spare(struct ring_prod *p, uint32_t len, uint32_t spare)
{
	uint64_t need = (uint64_t)ring_pad_for(p, len) + len + spare;

	/* A consumer bug may put tail past head: the difference then looks
	 * huge and we report full rather than overwrite. */
	if (p->head + need - p->tail > p->bytes) {
		p->tail = __atomic_load_n(&p->slot->tail, __ATOMIC_ACQUIRE);
		if (p->head + need - p->tail > p->bytes)
			return 0;
	}
	return 1;
}

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
static inline void *ring_reserve(struct ring_prod *p, uint32_t len)
{
	uint32_t pos = (uint32_t)p->head & (p->bytes - 1);
	uint32_t pad = ring_pad_for(p, len);
	struct shm_rec_hdr *h;

	if (!ring_fits(p, len))
		return 0;
	if (pad) {
		h = (struct shm_rec_hdr *)(p->data + pos);
		*h = (struct shm_rec_hdr){ .type = SHM_REC_PAD, .size = (uint16_t)pad };
		p->head += pad;
		pos = 0;
	}
	return p->data + pos;
}

/* Publishes the record reserved last. */
static inline void ring_commit(struct ring_prod *p, uint32_t len)
{
	p->head += len;
	__atomic_store_n(&p->slot->head, p->head, __ATOMIC_RELEASE);
}

#endif /* SHIMMER_RING_H */
