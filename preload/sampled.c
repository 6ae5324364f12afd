/*
 * Sampled-address set.  Cells hold an address, EMPTY (0) or TOMB (1);
 * malloc never returns 1, and the shim never inserts NULL.
 *
 * Lookups walk from the home cell until EMPTY or `probes` cells, stepping
 * over tombstones.  Inserts take the first EMPTY or TOMB cell in the same
 * window, so a lookup always finds a present key.  An address is live at
 * most once, so reusing a tombstone cannot create a duplicate.  The filter
 * counter is raised before the key becomes visible and lowered after it is
 * gone, so the filter never says "absent" for a present key.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "sampled.h"

#define EMPTY 0u
#define TOMB 1u
#define PROBES 64u

static void filter_inc(uint8_t *c)
{
	uint8_t v = __atomic_load_n(c, __ATOMIC_RELAXED);

	while (v != 255 && !__atomic_compare_exchange_n(c, &v, v + 1, 1, __ATOMIC_RELAXED,
							 __ATOMIC_RELAXED))
		;
}

/* A saturated counter stays saturated: it no longer knows its count. */
static void filter_dec(uint8_t *c)
{
	uint8_t v = __atomic_load_n(c, __ATOMIC_RELAXED);

	while (v != 255 && v != 0 &&
	       !__atomic_compare_exchange_n(c, &v, v - 1, 1, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED))
		;
}

int sampled_init(struct sampled *s, uint64_t filter_bytes, uint64_t capacity)
{
	void *f, *k;

	if (filter_bytes < 64 || (filter_bytes & (filter_bytes - 1)) || capacity < 64 ||
	    (capacity & (capacity - 1)))
		return -EINVAL;
	f = mmap(0, filter_bytes, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (f == MAP_FAILED)
		return -errno;
	k = mmap(0, capacity * sizeof(uint64_t), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (k == MAP_FAILED) {
		munmap(f, filter_bytes);
		return -errno;
	}
	*s = (struct sampled){
		.filter = f,
		.keys = k,
		.filter_mask = filter_bytes - 1,
		.key_mask = capacity - 1,
		.probes = capacity < PROBES ? (uint32_t)capacity : PROBES,
	};
	return 0;
}

void sampled_fini(struct sampled *s)
{
	if (s->filter)
		munmap(s->filter, s->filter_mask + 1);
	if (s->keys)
		munmap(s->keys, (s->key_mask + 1) * sizeof(uint64_t));
	memset(s, 0, sizeof(*s));
}

void sampled_clear(struct sampled *s)
{
	/* Private anonymous pages read back as zero after MADV_DONTNEED. */
	madvise(s->filter, s->filter_mask + 1, MADV_DONTNEED);
	madvise(s->keys, (s->key_mask + 1) * sizeof(uint64_t), MADV_DONTNEED);
	__atomic_store_n(&s->full, 0, __ATOMIC_RELAXED);
}

int sampled_insert(struct sampled *s, const void *p)
{
	uint64_t key = (uint64_t)(uintptr_t)p;
	uint64_t h = sampled_hash(key);
	uint32_t i;

	filter_inc(sampled_filter(s, key));
	for (i = 0; i < s->probes; i++) {
		uint64_t *cell = &s->keys[(h + i) & s->key_mask];
		uint64_t v = __atomic_load_n(cell, __ATOMIC_RELAXED);

		while (v == EMPTY || v == TOMB) {
			if (__atomic_compare_exchange_n(cell, &v, key, 0, __ATOMIC_RELEASE,
							__ATOMIC_RELAXED))
				return 0;
		}
	}
	filter_dec(sampled_filter(s, key));
	__atomic_fetch_add(&s->full, 1, __ATOMIC_RELAXED);
	return -ENOSPC;
}

static uint64_t *find(const struct sampled *s, uint64_t key, uint64_t h)
{
	uint32_t i;

	for (i = 0; i < s->probes; i++) {
		uint64_t *cell = &s->keys[(h + i) & s->key_mask];
		uint64_t v = __atomic_load_n(cell, __ATOMIC_ACQUIRE);

		if (v == key)
			return cell;
		if (v == EMPTY)
			break;
	}
	return 0;
}

int sampled_remove(struct sampled *s, const void *p)
{
	uint64_t key = (uint64_t)(uintptr_t)p;
	uint64_t h = sampled_hash(key);
	uint64_t *cell = find(s, key, h);
	uint64_t v = key;

	if (!cell || !__atomic_compare_exchange_n(cell, &v, TOMB, 0, __ATOMIC_RELAXED,
						  __ATOMIC_RELAXED))
		return 0;
	filter_dec(sampled_filter(s, key));
	return 1;
}

int sampled_contains(const struct sampled *s, const void *p)
{
	uint64_t key = (uint64_t)(uintptr_t)p;

	return find(s, key, sampled_hash(key)) != 0;
}
