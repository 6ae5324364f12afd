/*
 * Ring producer.  head and tail count bytes ever written and consumed, so
 * used = head - tail and a record's position is head & (bytes - 1).  A
 * record never straddles the end: when the rest of the ring is shorter
 * than the record, a PAD record covers the rest and the record starts at 0;
 * both become visible with one release store of head.  tail is re-read
 * (acquire) only when the cached value says the ring is full, so the
 * common write touches no cache line the consumer writes.  The checks and
 * the reservation every record takes are inline, in ring.h.
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
