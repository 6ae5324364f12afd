/*
 * The native stack walk behind stack.h: libunwind's answer, usually
 * without libunwind's cost.
 *
 * A walk steps frame by frame with a rule per return address: the CFA is
 * rsp or rbp plus an offset, the return address is at CFA-8, rbp is
 * restored from CFA plus an offset or left as it is - the frames
 * libunwind's own fast trace (unw_backtrace) handles.  Rules live in one
 * process-wide, lock-free table, learnt once per address from libunwind
 * itself: unw_step from a made-up context, then again with rsp and with rbp
 * moved, so that which register the CFA follows is measured, not guessed.
 * An address whose frame is anything else (a signal frame, no unwind info,
 * a CFA computed by an expression) is remembered as such, and a walk that
 * meets one is refused: the caller then asks unw_backtrace.
 *
 * The thread's previous walk is kept (struct unwind_cache): each frame's
 * state (pc, sp, rbp), and where each step read the next frame's pc and
 * rbp.  When a frame of the new walk has the state a frame of the previous
 * walk had, the rest of the walk is the previous one's as long as the
 * words the previous steps read still hold the same values; one pass of
 * independent loads checks that (a walk chains them: each step's address
 * comes from the load before).  The pass goes frame by frame and stops at
 * the first difference, so it only reads what a walk of the current stack
 * would read (a stack switched since by longjmp, a coroutine or a signal
 * handler cannot make it fault), and from a difference on the walk goes on
 * with the current stack's values.  The result is therefore exactly the
 * walk's, which is exactly libunwind's for these frames; test_unwind checks
 * it against unw_backtrace on random call trees.
 *
 * Rules are keyed by address: a module unloaded and another mapped at the
 * same place would inherit them, so an unload starts a new generation
 * (unwind_forget) and entries and caches of older ones are ignored, as far
 * as the module reports see the unload (libunwind's own per-address cache
 * is never flushed).
 *
 * No malloc, lock or system call once an address's rule is known; the
 * first walk through an address calls libunwind, which may take its own
 * locks.  Not async-signal-safe; the caller keeps one cache per thread and
 * must not re-enter it (the shim's BUSY_STACK guard).
 */
#ifndef SHIMMER_UNWIND_H
#define SHIMMER_UNWIND_H

#include <emmintrin.h>
#include <signal.h>
#include <stdint.h>

/* A pc below this ends a walk (no code is mapped there). */
#define UNWIND_PC_MIN 0x4000u

/* The most frames a walk returns. */
#define UNWIND_MAX 128u

/* The most checks a walk holds: a return address and an rbp per step. */
#define UNWIND_CHECKS (2u * UNWIND_MAX + 2u)

/* The most entries of the batches' pairs and words: each batch's pairs
 * padded to a multiple of 4, its words to a multiple of 2 (a batch holds
 * at least one check, a pair two). */
#define UNWIND_BATCH_SLOTS (2u * UNWIND_CHECKS)

/*
 * A walk: frames 0..n-1, and frame n's state when has_next; and the words
 * its steps read, as a list of checks (chk_*): for step m (from frame m to
 * m+1), checks chk_at[m] .. chk_at[m+1]-1 hold each word's address and the
 * value read there: the return address, and rbp where a later step uses it.
 *
 * The same checks of all the walk's steps again, for the test that the
 * whole walk still holds (the common case), in batches (bat_*) of
 * consecutive checks that lie in one page: batch k is the pairs
 * [bat_pair[k-1], bat_pair[k]) (two adjacent words, compared 16 bytes at a
 * time: a frame's return address and saved rbp; a multiple of 4, the last
 * pair repeated) and the words [bat_one[k-1], bat_one[k]) (from 0 for
 * k = 0; a multiple of 2, the same way).  A batch is read only when
 * the batches before it held, so its first word is one the current walk
 * reads, and the others share its page: in any order, with one branch per
 * batch, the test reads nothing a walk could not.
 * About 17 KiB: give each thread one, not on its stack.
 */
struct unwind_cache {
	uint32_t n;
	uint8_t has_next; /* the walk stopped at its limit (it resumes from
			   * state n), or its last step read a pc below
			   * 0x4000 (the end; pc[n] is that value) */
	uint8_t ended;    /* the stack ends: at frame n-1's rule, or that pc */
	uint16_t pad;
	uint32_t gen;     /* rule generation; 0: nothing held */
	uint8_t need_bp0; /* the walk depends on frame 0's rbp (F_NEEDS_BP) */
	uint8_t pad2[3];
	uint64_t pc[UNWIND_MAX + 1];
	uint64_t sp[UNWIND_MAX + 1];
	uint64_t bp[UNWIND_MAX + 1];
	int32_t bp_at[UNWIND_MAX + 1]; /* step k read bp[k+1] at sp[k+1] + this */
	uint8_t flags[UNWIND_MAX + 1];
	uint16_t chk_at[UNWIND_MAX + 2];
	uint64_t chk_addr[UNWIND_CHECKS];
	uint64_t chk_val[UNWIND_CHECKS];
	uint16_t nbat;
	uint16_t bat_pair[UNWIND_CHECKS];
	uint16_t bat_one[UNWIND_CHECKS];
	uint64_t pair_addr[UNWIND_BATCH_SLOTS];
	_Alignas(16) uint64_t pair_val[UNWIND_BATCH_SLOTS][2];
	uint64_t one_addr[UNWIND_BATCH_SLOTS];
	uint64_t one_val[UNWIND_BATCH_SLOTS];
};

/* The rule generation (unwind_forget() moves it on); a walk of another
 * generation is not reused. */
extern uint32_t unwind_gen;

/* A batch's words are read in any order, also those after one that no
 * longer holds: within a page the current walk reads, so mapped, but
 * perhaps inside a redzone AddressSanitizer put around a local of the
 * current frames (test_unwind runs under it; the shim never does). */
#ifdef __SANITIZE_ADDRESS__
#define UNWIND_ANY_ORDER __attribute__((no_sanitize_address))
#else
#define UNWIND_ANY_ORDER
#endif

/* The 16 bytes at *a on the stack against the values *v they held. */
static inline UNWIND_ANY_ORDER __m128i unwind_pair_diff(const uint64_t *a, const __m128i *v)
{
	return _mm_xor_si128(_mm_loadu_si128((const __m128i *)(uintptr_t)*a), *v);
}

/*
 * Whether the walk from (pc, sp, bp) for at most max frames is the walk c
 * holds, whole: the same first frame, a limit that stops it where it
 * stopped, and every check holding, batch by batch (four pairs a round,
 * or-ed as a tree: a 32-frame walk is 32 pairs).  The common case of a
 * capture, inline; unwind_walk() asks it first.  Reads only what a walk
 * would (above).
 */
static inline UNWIND_ANY_ORDER int unwind_same(const struct unwind_cache *c, uint64_t pc,
					       uint64_t sp, uint64_t bp, uint32_t max)
{
	const uint64_t *a = c->pair_addr, *ae, *o = c->one_addr, *oe;
	const __m128i *v = (const __m128i *)(const void *)c->pair_val;
	const uint64_t *ov = c->one_val;
	uint32_t k, psteps;
	__m128i acc;
	uint64_t d;

	if (c->gen != __atomic_load_n(&unwind_gen, __ATOMIC_RELAXED) || !c->n ||
	    c->sp[0] != sp || c->pc[0] != pc || (c->need_bp0 && c->bp[0] != bp) || pc < UNWIND_PC_MIN)
		return 0;
	/* The limit stops the walk where the held one stopped: at max, or
	 * at the stack's end before it.  Every step it made is then checked:
	 * the batches hold them all. */
	psteps = c->has_next ? c->n : c->n - 1;
	if (max <= psteps ? !(max == c->n && c->has_next && !c->ended) : !c->ended)
		return 0;
	for (k = 0; k < c->nbat; k++) {
		acc = _mm_setzero_si128();
		d = 0;
		for (ae = c->pair_addr + c->bat_pair[k]; a < ae; a += 4, v += 4)
			acc = _mm_or_si128(acc, _mm_or_si128(
				_mm_or_si128(unwind_pair_diff(a, v), unwind_pair_diff(a + 1, v + 1)),
				_mm_or_si128(unwind_pair_diff(a + 2, v + 2),
					     unwind_pair_diff(a + 3, v + 3))));
		for (oe = c->one_addr + c->bat_one[k]; o < oe; o += 2, ov += 2)
			d |= (*(const uint64_t *)(uintptr_t)o[0] ^ ov[0]) |
			     (*(const uint64_t *)(uintptr_t)o[1] ^ ov[1]);
		d |= (uint64_t)_mm_cvtsi128_si64(acc) |
		     (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(acc, acc));
		if (d)
			return 0;
	}
	return 1;
}

/* Resolves what the walk needs from libunwind (lib: its dlopen handle)
 * and maps the rule table.  0 or -errno; until it succeeds every walk is
 * refused.  Not thread-safe (constructor). */
int unwind_setup(void *lib);

/* Brackets each learning of a rule (libunwind's calls, which may allocate:
 * once per return address) with enter(&s) and leave(&s), s the learner's
 * own: the shim blocks signals and marks itself in_shim there
 * (shim_own_enter()).  enter() returns 0 to go ahead, or -1 (having undone
 * what it did; leave() is not called) when libunwind must not be called
 * now (ownfds.h): the rule is not learnt, and the walk is refused, as for
 * a full table.  Unset, nothing.  Set before the first walk. */
void unwind_set_guard(int (*enter)(sigset_t *), void (*leave)(const sigset_t *));

/* Unmaps the rule table (tests).  Not thread-safe. */
void unwind_fini(void);

/* A module went away: the rules learnt so far no longer hold.
 * Thread-safe. */
void unwind_forget(void);

/*
 * Walks the stack from the frame whose state is (pc, sp, bp) - pc a
 * return address, sp the stack pointer its function will have after the
 * return, bp its rbp then - for at most max (1..UNWIND_MAX) frames.
 * Returns how many, the pcs in c->pc[0..n) with c->pc[0] = pc; or -1 when
 * the walk met a frame it cannot step (c is left as it was: ask
 * unw_backtrace).  *same is set when the pcs are those of the walk c held
 * before.  Reads only the current thread's stack as a walk would.
 */
int unwind_walk(struct unwind_cache *c, uint64_t pc, uint64_t sp, uint64_t bp, uint32_t max,
		int *same);

/* Rules learnt, of which for frames a walk refuses; lookups that found
 * the table full.  Thread-safe. */
void unwind_counts(uint64_t *rules, uint64_t *refused, uint64_t *full);

#endif /* SHIMMER_UNWIND_H */
