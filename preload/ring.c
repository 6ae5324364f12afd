/*
 * Ring producer.  head and tail count bytes ever written and consumed, so
 * used = head - tail and a record's position is head & (bytes - 1).  A
 * record never straddles the end: when the rest of the ring is shorter
 * than the record, a PAD record covers the rest and the record starts at 0;
 * both become visible with one release store of head.  tail is re-read
 * (acquire) only when the cached value says the ring is full, so the
 * common write touches no cache line the consumer writes.
 */
#include "ring.h"

void ring_attach(struct ring_prod *p, struct shm_slot *slot, uint8_t *data,
		 uint32_t bytes)
{
	p->slot = slot;
	p->data = data;
	p->bytes = bytes;
	p->head = __atomic_load_n(&slot->head, __ATOMIC_RELAXED);
	p->tail = __atomic_load_n(&slot->tail, __ATOMIC_ACQUIRE);
}

/* The PAD a record of len bytes needs before it: the rest of the ring when
 * the record does not fit there, else 0. */
static uint32_t pad_for(const struct ring_prod *p, uint32_t len)
{
	uint32_t room = p->bytes - ((uint32_t)p->head & (p->bytes - 1));

	return room < len ? room : 0;
}

int ring_fits_spare(struct ring_prod *p, uint32_t len, uint32_t spare)
{
	uint64_t need = (uint64_t)pad_for(p, len) + len + spare;

	/* A consumer bug may put tail past head: the difference then looks
	 * huge and we report full rather than overwrite. */
	if (p->head + need - p->tail > p->bytes) {
		p->tail = __atomic_load_n(&p->slot->tail, __ATOMIC_ACQUIRE);
		if (p->head + need - p->tail > p->bytes)
			return 0;
	}
	return 1;
}

void *ring_reserve(struct ring_prod *p, uint32_t len)
{
	uint32_t pos = (uint32_t)p->head & (p->bytes - 1);
	uint32_t pad = pad_for(p, len);
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
