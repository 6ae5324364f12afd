/*
 * Stack interning: an array of 64-bit words (a native stack's pcs, or a
 * Python stack's frames) -> a per-process id, with the stack's one record
 * written by whichever thread first needs the id, before the id is handed
 * out.  A hot call site therefore costs a hash and a compare, not a message.
 *
 * Lock-free and malloc-free: an open-addressing table and a word arena,
 * both mmap'd once (MAP_NORESERVE: only touched pages cost memory).  When
 * the table or the arena is full, lookups of new stacks yield id 0 and are
 * counted; nothing ever blocks for long (a thread that finds a stack being
 * published by another spins about a millisecond at most, then takes id 0).
 * Entries survive fork, but a child re-emits an entry on its first use there
 * (stacktab_fork_child), since the collector knows ids per process.
 *
 * All functions but stacktab_init and stacktab_fork_child are thread-safe;
 * none is async-signal-safe.
 */
#ifndef SHIMMER_STACKTAB_H
#define SHIMMER_STACKTAB_H

#include <stdint.h>

struct stacktab_entry;

struct stacktab {
	struct stacktab_entry *tab;
	uint64_t *arena;
	uint64_t arena_words;
	uint64_t arena_used; /* atomic */
	uint32_t cap;        /* entries, power of two */
	uint32_t limit;      /* most entries filled (keeps probes short) */
	uint32_t used;       /* atomic */
	uint32_t next_id;    /* atomic */
	uint32_t epoch;
	uint32_t pad;
	uint64_t *full;      /* lookups refused for want of room, atomic: own_full
			      * or the word of stacktab_count_at() */
	uint64_t own_full;
};

/*
 * Writes the record that defines id as w[0..n); 0 when it was written,
 * else negative (the entry stays unsent and the next user retries).
 */
typedef int (*stacktab_emit_fn)(void *ctx, uint32_t id, const uint64_t *w, uint32_t n);

/* Maps cap entries (a power of two, at least 16) and arena_words words.
 * 0 or -errno.  Not thread-safe. */
int stacktab_init(struct stacktab *st, uint32_t cap, uint64_t arena_words);
/* The address space stacktab_init(cap, arena_words) maps. */
uint64_t stacktab_bytes(uint32_t cap, uint64_t arena_words);

/* Unmaps; the table may be initialized again.  Not thread-safe. */
void stacktab_fini(struct stacktab *st);

/*
 * The id of w[0..n) (n >= 1), interning it and calling emit(ctx, ...) first
 * if this process has not emitted it yet.  0 when the table is full, the
 * emit failed, or another thread stalled mid-publication.
 */
uint32_t stacktab_id(struct stacktab *st, const uint64_t *w, uint32_t n,
		     stacktab_emit_fn emit, void *ctx);

/* Fork child, while it is single-threaded: every entry is emitted again on
 * its first use; entries the parent's other threads were filling are
 * abandoned. */
void stacktab_fork_child(struct stacktab *st);

/*
 * From now on, lookups refused for want of room are counted at *word (one
 * that stays mapped while the table is used: the event region's, which the
 * collector reads even after the process is killed), from the value it
 * holds; NULL: in the table again, from 0.  Not thread-safe (setup, fork
 * child).
 */
void stacktab_count_at(struct stacktab *st, uint64_t *word);

/* Lookups that yielded 0 for want of room, as counted where
 * stacktab_count_at() said (since init, by default). */
static inline uint64_t stacktab_full(const struct stacktab *st)
{
	return st->full ? __atomic_load_n(st->full, __ATOMIC_RELAXED) : 0;
}

#endif /* SHIMMER_STACKTAB_H */
