/*
 * The set of live sampled heap blocks, so that free() ships an event only
 * for blocks whose allocation was shipped.
 *
 * A counting filter (8-bit counters, saturating and then sticky) sits in
 * front of a lock-free open-addressing hash set of addresses: the common
 * free of an unsampled block costs one load from the filter, of a line
 * that the frees of neighbouring blocks share (sampled_filter()).  Inserts claim
 * an empty or tombstone cell with CAS within a bounded probe window;
 * removals CAS the address to a tombstone.  When the window is full the
 * insert fails and the caller must not ship the block as sampled.
 *
 * All functions are thread-safe and lock-free, never allocate and make no
 * system call except sampled_init(), sampled_fini() and sampled_clear().
 */
#ifndef SHIMMER_SAMPLED_H
#define SHIMMER_SAMPLED_H

#include <stdint.h>

struct sampled {
	uint8_t *filter;
	uint64_t *keys;
	uint64_t filter_mask;
	uint64_t key_mask;
	uint32_t probes; /* cells tried per operation */
	uint64_t full;   /* inserts refused, atomic */
};

/* Maps filter_bytes counters and capacity cells (both powers of two, at
 * least 64).  Returns 0 or -errno. */
int sampled_init(struct sampled *s, uint64_t filter_bytes, uint64_t capacity);

void sampled_fini(struct sampled *s);

/* Empties the set (fork child: the parent's samples are not ours).  Not
 * safe against concurrent use. */
void sampled_clear(struct sampled *s);

static inline uint64_t sampled_hash(uint64_t p)
{
	p ^= p >> 33;
	p *= 0xff51afd7ed558ccdull;
	p ^= p >> 33;
	return p;
}

/*
 * The filter counter that stands for address p: one 64-byte line of
 * counters per 4 KiB page of addresses (a hash of the page picks the
 * line), one counter per 64-byte granule of the page.  A program frees in
 * runs on a few hot pages (the allocator hands out again what was freed
 * last), so the frees' checks read a few lines that stay cached, where a
 * hash of the whole address read a line of its own for each block, which
 * the program's own work between two calls evicts (bench/cold-cost: with
 * a data sweep between calls, recorded minus paused 2.76 ns a pair against
 * 1.60 indexed so, on the 2-core test VM).  Up to four 16-byte blocks share
 * a granule: a sampled one makes its neighbours "maybe", which costs them a
 * set lookup, never a wrong answer.
 */
static inline uint8_t *sampled_filter(const struct sampled *s, uint64_t p)
{
	uint64_t line = sampled_hash(p >> 12) >> 40;

	return &s->filter[(line << 6 | (p >> 6 & 63)) & s->filter_mask];
}

/* 0 when p is certainly not in the set; 1 when it may be. */
static inline int sampled_maybe(const struct sampled *s, const void *p)
{
	return __atomic_load_n(sampled_filter(s, (uint64_t)(uintptr_t)p), __ATOMIC_RELAXED) != 0;
}

/* Adds p (not 0, not 1, not already present).  Returns 0 or -ENOSPC. */
int sampled_insert(struct sampled *s, const void *p);

/* Removes p; returns 1 when it was present, else 0. */
int sampled_remove(struct sampled *s, const void *p);

/* Returns 1 when p is present. */
int sampled_contains(const struct sampled *s, const void *p);

#endif /* SHIMMER_SAMPLED_H */
