/*
 * The stack table.  The entry protocol is the intern table's (intern.c),
 * with the record written into the caller's ring instead of a STRING
 * message:
 *
 *     EMPTY            free
 *     BUSY | epoch     being filled or emitted by a thread of this epoch
 *     epoch            emitted in this process: the id is usable
 *     other            filled, not emitted here (UNSENT after a failed
 *                      emit, an older epoch after fork): the first thread
 *                      to CAS it to BUSY emits, then stores the epoch
 *     DEAD             abandoned (fork mid-fill, arena full): skipped
 *
 * The epoch is stored with release only after the record is in the ring,
 * so no thread can ship a record naming an id whose stack was not written
 * first.  Entries are never removed, so a probe ends at the first EMPTY
 * entry; filling stops at 3/4 of the table so that probes stay short.
 * Expected load: a training job has a few thousand allocation sites.
 */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>

#include "stacktab.h"

#define ST_EMPTY 0u
#define ST_UNSENT 1u
#define ST_BUSY 0x40000000u
#define ST_DEAD 0x80000000u
#define EPOCH_FIRST 2u
#define SPIN_LIMIT 20000u

struct stacktab_entry {
	uint32_t state;
	uint32_t id;
	uint32_t n;
	uint32_t pad;
	uint64_t hash;
	const uint64_t *words; /* in the arena; set last when filling */
};

static void *map(size_t bytes)
{
	void *p = mmap(0, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	return p == MAP_FAILED ? 0 : p;
}

uint64_t stacktab_bytes(uint32_t cap, uint64_t arena_words)
{
	return (uint64_t)cap * sizeof(((struct stacktab *)0)->tab[0]) + arena_words * sizeof(uint64_t);
}

int stacktab_init(struct stacktab *st, uint32_t cap, uint64_t arena_words)
{
	int err;

	if (cap < 16 || (cap & (cap - 1)) || !arena_words)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	st->tab = map((size_t)cap * sizeof(*st->tab));
	if (!st->tab)
		return -errno;
	st->arena = map(arena_words * sizeof(uint64_t));
	if (!st->arena) {
		err = -errno;
		munmap(st->tab, (size_t)cap * sizeof(*st->tab));
		st->tab = 0;
		return err;
	}
	st->arena_words = arena_words;
	st->cap = cap;
	st->limit = cap / 4 * 3;
	st->next_id = 1;
	st->epoch = EPOCH_FIRST;
	st->full = &st->own_full;
	return 0;
}

void stacktab_count_at(struct stacktab *st, uint64_t *word)
{
	st->own_full = 0;
	st->full = word ? word : &st->own_full;
}

void stacktab_fini(struct stacktab *st)
{
	if (st->tab)
		munmap(st->tab, (size_t)st->cap * sizeof(*st->tab));
	if (st->arena)
		munmap(st->arena, st->arena_words * sizeof(uint64_t));
	memset(st, 0, sizeof(*st));
}

void stacktab_fork_child(struct stacktab *st)
{
	struct stacktab_entry *e;
	uint32_t i;

	if (!st->tab)
		return;
	/* Only this thread survived: nobody will finish the busy entries.
	 * A table never used (a program that runs no Python has an empty
	 * Python table) is not scanned: reading its untouched pages would
	 * fault each one in, a page fault per 128 entries on every fork. */
	if (st->used)
		for (i = 0; i < st->cap; i++) {
			e = &st->tab[i];
			if (e->state & ST_BUSY)
				e->state = e->words ? ST_UNSENT : ST_DEAD;
		}
	st->epoch++;
	if (st->epoch >= ST_BUSY)
		st->epoch = EPOCH_FIRST;
}

static inline uint64_t rotl(uint64_t x, unsigned r)
{
	return (x << r) | (x >> (64 - r));
}

static inline uint64_t lane(uint64_t h, uint64_t w)
{
	return rotl(h, 23) ^ (w * 0xff51afd7ed558ccdull);
}

/* Each word's multiply is independent of the running hash, and the words
 * go round four lanes, so each lane's dependency chain is a rotate and a
 * xor per four words: a 32-frame stack hashes in about the time of its 32
 * multiplies (10 ns here, against 15 ns for one lane).  One final mix. */
static uint64_t hash(const uint64_t *w, uint32_t n)
{
	uint64_t a = 0x9e3779b97f4a7c15ull ^ n, b = 0, c = 0, d = 0, h;
	uint32_t i;

	for (i = 0; i + 4 <= n; i += 4) {
		a = lane(a, w[i]);
		b = lane(b, w[i + 1]);
		c = lane(c, w[i + 2]);
		d = lane(d, w[i + 3]);
	}
	for (; i < n; i++)
		a = lane(a, w[i]);
	h = a ^ rotl(b, 17) ^ rotl(c, 31) ^ rotl(d, 47);
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	return h ^ (h >> 29);
}

static uint32_t wait_busy(const struct stacktab_entry *e)
{
	uint32_t st, n;

	for (n = 0;; n++) {
		st = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
		if (!(st & ST_BUSY) || n >= SPIN_LIMIT)
			return st;
		if (n < 64)
			__builtin_ia32_pause();
		else
			sched_yield();
	}
}

/* e is ours (BUSY): emit it and publish.  The id, or 0 if emit failed. */
static uint32_t publish(struct stacktab_entry *e, uint32_t cur, stacktab_emit_fn emit,
			void *ctx)
{
	int ok = emit(ctx, e->id, e->words, e->n) == 0;

	__atomic_store_n(&e->state, ok ? cur : ST_UNSENT, __ATOMIC_RELEASE);
	return ok ? e->id : 0;
}

static void refuse(struct stacktab *st)
{
	__atomic_fetch_add(st->full, 1, __ATOMIC_RELAXED);
}

/* Fills the EMPTY entry e, claimed BUSY, with w[0..n). */
static uint32_t fill(struct stacktab *st, struct stacktab_entry *e, uint64_t h,
		     const uint64_t *w, uint32_t n, uint32_t cur, stacktab_emit_fn emit,
		     void *ctx)
{
	uint64_t off = __atomic_load_n(&st->arena_used, __ATOMIC_RELAXED);

	/* A CAS, not an add: a refused stack must not use up the room that
	 * a shorter one could still take. */
	do {
		if (off + n > st->arena_words) {
			__atomic_store_n(&e->state, ST_DEAD, __ATOMIC_RELEASE);
			refuse(st);
			return 0;
		}
	} while (!__atomic_compare_exchange_n(&st->arena_used, &off, off + n, 1, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	memcpy(st->arena + off, w, (size_t)n * sizeof(*w));
	e->hash = h;
	e->n = n;
	e->id = __atomic_fetch_add(&st->next_id, 1, __ATOMIC_RELAXED);
	/* Last: stacktab_fork_child() takes set words for a whole entry. */
	__atomic_store_n(&e->words, st->arena + off, __ATOMIC_RELEASE);
	return publish(e, cur, emit, ctx);
}

uint32_t stacktab_id(struct stacktab *st, const uint64_t *w, uint32_t n,
		     stacktab_emit_fn emit, void *ctx)
{
	struct stacktab_entry *tab = st->tab, *e;
	uint32_t i, probes, s, cur = __atomic_load_n(&st->epoch, __ATOMIC_RELAXED);
	uint32_t mask = st->cap - 1;
	uint64_t h;

	if (!tab || !n)
		return 0;
	h = hash(w, n);
	for (probes = 0, i = (uint32_t)h & mask; probes < st->cap; probes++, i = (i + 1) & mask) {
		e = &tab[i];
		s = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
		if (s == ST_EMPTY) {
			if (__atomic_load_n(&st->used, __ATOMIC_RELAXED) >= st->limit) {
				refuse(st);
				return 0;
			}
			if (__atomic_compare_exchange_n(&e->state, &s, ST_BUSY | cur, 0,
							__ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE)) {
				__atomic_fetch_add(&st->used, 1, __ATOMIC_RELAXED);
				return fill(st, e, h, w, n, cur, emit, ctx);
			}
		}
again:
		if (s & ST_BUSY)
			s = wait_busy(e);
		if (s == ST_DEAD)
			continue;
		if (s & ST_BUSY)
			return 0; /* its publisher stalled: better no id than a wait */
		if (e->hash != h || e->n != n || memcmp(e->words, w, (size_t)n * sizeof(*w)))
			continue;
		if (s == cur)
			return e->id;
		/* Ours to emit in this process, unless another thread is first. */
		if (__atomic_compare_exchange_n(&e->state, &s, ST_BUSY | cur, 0, __ATOMIC_ACQUIRE,
						__ATOMIC_ACQUIRE))
			return publish(e, cur, emit, ctx);
		goto again;
	}
	refuse(st);
	return 0;
}
