/*
 * The walk (unwind.h).  Costs, per captured stack: a frame already in the
 * thread's previous walk costs two independent loads and compares; a new
 * frame costs a rule lookup (a multiply, one or two probes) and the step's
 * loads.  The previous walk is updated in place: when the new walk joins it
 * at the same depth (a loop allocating from one place, the common case)
 * nothing is copied, and when every frame matched the caller is told the
 * pcs are the same, so that it can skip interning them too.
 *
 * Rule words: the CFA offset in bits 0-31, rbp's place from the CFA in
 * bits 32-47 (RULE_BP_SAME: not restored), the CFA's register in bit 48
 * (1: rbp), the kind in bits 49-50, the generation in bits 51-63.  A
 * table entry is its key (the return address, set once by CAS) and its
 * rule word (stored whole, so a reader sees an old rule, a new rule or
 * none); two threads that learn the same rule store the same word.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "unwind.h"

#define RULE_BITS 16u
#define RULE_CAP (1u << RULE_BITS)
#define RULE_PROBES 32u

#define KIND_STEP 1ull
#define KIND_LAST 2ull
#define KIND_OTHER 3ull
#define RULE_BP_SAME 0x8000u /* as the 16-bit field */
#define RULE_KIND(r) (((r) >> 49) & 3u)
#define RULE_GEN(r) ((uint32_t)((r) >> 51))
#define RULE_CFA_BP(r) (((r) >> 48) & 1u)
#define RULE_OFF(r) ((int64_t)(int32_t)(uint32_t)(r))
#define GEN_MASK 0x1fffu

/* A walk's frame flags. */
#define F_CFA_BP 1u   /* the step computes the CFA from rbp */
#define F_NEEDS_BP 2u /* this or a later step reads this frame's rbp */
#define BP_SAME INT32_MIN

/* Below this a pc is not code: the stack ends (as libunwind's trace). */

struct rule_ent {
	uint64_t pc;
	uint64_t rule;
};

struct unw {
	int (*init_local2)(unw_cursor_t *, unw_context_t *, int);
	int (*step)(unw_cursor_t *);
	int (*get_reg)(unw_cursor_t *, int, unw_word_t *);
	int (*get_save_loc)(unw_cursor_t *, int, unw_save_loc_t *);
	int (*get_proc_info)(unw_cursor_t *, unw_proc_info_t *);
	int (*is_signal_frame)(unw_cursor_t *);
};

/* One step by libunwind: where the CFA and the next pc and rbp came from. */
struct seen {
	uint64_t cfa;
	int32_t bp_at; /* BP_SAME when rbp is not restored */
};

static struct unw unw;
static struct rule_ent *rules;
uint32_t unwind_gen = 1; /* unwind.h */
static uint64_t n_rules, n_refused, n_full;

int unwind_setup(void *lib)
{
	struct unw u = {
		.init_local2 = (int (*)(unw_cursor_t *, unw_context_t *, int))dlsym(
			lib, "_ULx86_64_init_local2"),
		.step = (int (*)(unw_cursor_t *))dlsym(lib, "_ULx86_64_step"),
		.get_reg = (int (*)(unw_cursor_t *, int, unw_word_t *))dlsym(lib, "_ULx86_64_get_reg"),
		.get_save_loc = (int (*)(unw_cursor_t *, int, unw_save_loc_t *))dlsym(
			lib, "_ULx86_64_get_save_loc"),
		.get_proc_info = (int (*)(unw_cursor_t *, unw_proc_info_t *))dlsym(
			lib, "_ULx86_64_get_proc_info"),
		.is_signal_frame = (int (*)(unw_cursor_t *))dlsym(lib, "_ULx86_64_is_signal_frame"),
	};
	void *p;

	if (!u.init_local2 || !u.step || !u.get_reg || !u.get_save_loc || !u.get_proc_info ||
	    !u.is_signal_frame)
		return -ENOENT;
	p = mmap(0, RULE_CAP * sizeof(*rules), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	unw = u;
	rules = p;
	return 0;
}

void unwind_fini(void)
{
	if (rules)
		munmap(rules, RULE_CAP * sizeof(*rules));
	rules = 0;
}

void unwind_forget(void)
{
	uint32_t g = __atomic_load_n(&unwind_gen, __ATOMIC_RELAXED), ng;

	do {
		ng = (g + 1) & GEN_MASK;
		if (!ng)
			ng = 1; /* 0 marks an empty cache */
	} while (!__atomic_compare_exchange_n(&unwind_gen, &g, ng, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}

void unwind_counts(uint64_t *r, uint64_t *refused, uint64_t *full)
{
	*r = __atomic_load_n(&n_rules, __ATOMIC_RELAXED);
	*refused = __atomic_load_n(&n_refused, __ATOMIC_RELAXED);
	*full = __atomic_load_n(&n_full, __ATOMIC_RELAXED);
}

/*
 * One unw_step from the state (pc, sp, bp), pc a return address.  The
 * other registers hold sp: a rule through one of them (which no standard
 * frame has) then reads the stack, not page 0, and shows as a CFA that
 * follows neither rsp nor rbp.  Returns the kind.
 */
static unsigned step_from(uint64_t pc, uint64_t sp, uint64_t bp, struct seen *s)
{
	static const int gp[] = { REG_R8,  REG_R9,  REG_R10, REG_R11, REG_R12, REG_R13,
				  REG_R14, REG_R15, REG_RDI, REG_RSI, REG_RBX, REG_RDX,
				  REG_RAX, REG_RCX };
	unw_context_t uc;
	unw_cursor_t cur;
	unw_proc_info_t pi;
	unw_save_loc_t loc;
	unw_word_t cfa, ra;
	unsigned i;
	int ret;

	memset(&uc, 0, sizeof(uc));
	for (i = 0; i < sizeof(gp) / sizeof(gp[0]); i++)
		uc.uc_mcontext.gregs[gp[i]] = (greg_t)sp;
	uc.uc_mcontext.gregs[REG_RIP] = (greg_t)pc;
	uc.uc_mcontext.gregs[REG_RSP] = (greg_t)sp;
	uc.uc_mcontext.gregs[REG_RBP] = (greg_t)bp;
	/* flag 0: pc is a return address (its call is at pc - 1) */
	if (unw.init_local2(&cur, &uc, 0) < 0)
		return KIND_OTHER;
	/* Signal frames, and frames without unwind info (libunwind guesses
	 * a frame-pointer chain there, checking each address first). */
	if (unw.is_signal_frame(&cur) > 0 || unw.get_proc_info(&cur, &pi) < 0)
		return KIND_OTHER;
	ret = unw.step(&cur);
	if (ret == 0)
		return KIND_LAST;
	if (ret < 0 || unw.get_reg(&cur, UNW_REG_SP, &cfa) < 0)
		return KIND_OTHER;
	s->cfa = cfa;
	/* the return address at CFA-8 */
	if (unw.get_save_loc(&cur, UNW_X86_64_RIP, &loc) < 0 || loc.type != UNW_SLT_MEMORY ||
	    loc.u.addr != cfa - 8 || unw.get_reg(&cur, UNW_REG_IP, &ra) < 0)
		return KIND_OTHER;
	/* rbp unchanged (its place is still the context's) or read from a
	 * place near the CFA */
	if (unw.get_save_loc(&cur, UNW_X86_64_RBP, &loc) < 0 || loc.type != UNW_SLT_MEMORY)
		return KIND_OTHER;
	if (loc.u.addr == (unw_word_t)&uc.uc_mcontext.gregs[REG_RBP]) {
		s->bp_at = BP_SAME;
	} else {
		int64_t at = (int64_t)(loc.u.addr - cfa);

		if (at <= -(1 << 14) || at >= (1 << 14))
			return KIND_OTHER;
		s->bp_at = (int32_t)at;
	}
	return KIND_STEP;
}

/* Learns the rule of pc from libunwind, in the state (pc, sp, bp) a walk
 * reached: one step there, then one with rsp moved and, unless the CFA
 * moved with it, one with rbp moved.  The moved states are 16 bytes lower:
 * inside the frame, which lies above the caller's own frames. */
static uint64_t learn(uint64_t pc, uint64_t sp, uint64_t bp)
{
	struct seen a, b, d;
	unsigned k = step_from(pc, sp, bp, &a);
	uint64_t base, cfa_bp;
	int64_t off;

	if (k != KIND_STEP)
		return (uint64_t)k << 49;
	if (step_from(pc, sp - 16, bp, &b) != KIND_STEP || b.bp_at != a.bp_at)
		return KIND_OTHER << 49;
	if (b.cfa == a.cfa - 16) {
		/* follows rsp; and not rbp too */
		if (step_from(pc, sp, bp - 16, &d) != KIND_STEP || d.cfa != a.cfa ||
		    d.bp_at != a.bp_at)
			return KIND_OTHER << 49;
		base = sp;
		cfa_bp = 0;
	} else if (b.cfa == a.cfa) {
		if (step_from(pc, sp, bp - 16, &d) != KIND_STEP || d.cfa != a.cfa - 16 ||
		    d.bp_at != a.bp_at)
			return KIND_OTHER << 49;
		base = bp;
		cfa_bp = 1;
	} else {
		return KIND_OTHER << 49;
	}
	off = (int64_t)(a.cfa - base);
	if (off <= -(1ll << 28) || off >= (1ll << 28))
		return KIND_OTHER << 49;
	return (uint64_t)(uint32_t)(int32_t)off |
	       (uint64_t)(a.bp_at == BP_SAME ? RULE_BP_SAME : (uint16_t)(int16_t)a.bp_at) << 32 |
	       cfa_bp << 48 | KIND_STEP << 49;
}

static int (*guard_enter)(sigset_t *);
static void (*guard_leave)(const sigset_t *);

void unwind_set_guard(int (*enter)(sigset_t *), void (*leave)(const sigset_t *))
{
	guard_enter = enter;
	guard_leave = leave;
}

/* learn() inside the caller's guard: libunwind's calls may allocate.  0
 * (no rule, and none kept) when the guard refuses the call. */
static uint64_t learn_guarded(uint64_t pc, uint64_t sp, uint64_t bp)
{
	sigset_t s;
	uint64_t r;

	if (!guard_enter)
		return learn(pc, sp, bp);
	if (guard_enter(&s) < 0)
		return 0;
	r = learn(pc, sp, bp);
	guard_leave(&s);
	return r;
}

/* The rule of pc in generation g (learnt now if new); 0 when the table
 * has no room for it. */
static uint64_t rule_of(uint64_t pc, uint64_t sp, uint64_t bp, uint32_t g)
{
	uint32_t i = (uint32_t)((pc * 0x9e3779b97f4a7c15ull) >> (64 - RULE_BITS)), p;
	struct rule_ent *e;
	uint64_t k, r;

	for (p = 0; p < RULE_PROBES; p++, i = (i + 1) & (RULE_CAP - 1)) {
		e = &rules[i];
		k = __atomic_load_n(&e->pc, __ATOMIC_ACQUIRE);
		if (k == 0 &&
		    !__atomic_compare_exchange_n(&e->pc, &k, pc, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE) &&
		    k != pc)
			continue;
		if (k && k != pc)
			continue;
		r = __atomic_load_n(&e->rule, __ATOMIC_ACQUIRE);
		if (r && RULE_GEN(r) == g)
			return r;
		r = learn_guarded(pc, sp, bp);
		if (!r)
			return 0; /* not now: learnt at a later walk */
		r |= (uint64_t)g << 51;
		__atomic_store_n(&e->rule, r, __ATOMIC_RELEASE);
		__atomic_fetch_add(&n_rules, 1, __ATOMIC_RELAXED);
		if (RULE_KIND(r) == KIND_OTHER)
			__atomic_fetch_add(&n_refused, 1, __ATOMIC_RELAXED);
		return r;
	}
	__atomic_fetch_add(&n_full, 1, __ATOMIC_RELAXED);
	return 0;
}

/* A word of the stack.  Plain loads: the compiler may not move one above
 * the test that guards it (it could fault), the processor may, and does. */
static inline uint64_t load(uint64_t addr)
{
	return *(const uint64_t *)(uintptr_t)addr;
}

/* The new walk's frames before it joins the previous one. */
struct frames {
	uint64_t *pc, *sp, *bp;
	int32_t *bp_at;
	uint8_t *flags;
};

static void put(const struct frames *f, uint32_t k, uint64_t pc, uint64_t sp, uint64_t bp)
{
	f->pc[k] = pc;
	f->sp[k] = sp;
	f->bp[k] = bp;
	f->bp_at[k] = BP_SAME;
	f->flags[k] = 0;
}

/* Copies frames [from, from + n) of c to [to, to + n) of f, but their
 * rbp: the previous walk's is stale where no step read it, and the
 * check pass wrote the current one to f. */
static void take(const struct frames *f, uint32_t to, const struct unwind_cache *c, uint32_t from,
		 uint32_t n)
{
	memcpy(f->pc + to, c->pc + from, n * sizeof(*f->pc));
	memcpy(f->sp + to, c->sp + from, n * sizeof(*f->sp));
	memcpy(f->bp_at + to, c->bp_at + from, n * sizeof(*f->bp_at));
	memcpy(f->flags + to, c->flags + from, n * sizeof(*f->flags));
}

/* Moves frames [from, from + n) of c to [to, to + n). */
static void shift(struct unwind_cache *c, uint32_t to, uint32_t from, uint32_t n)
{
	memmove(c->pc + to, c->pc + from, n * sizeof(*c->pc));
	memmove(c->sp + to, c->sp + from, n * sizeof(*c->sp));
	memmove(c->bp + to, c->bp + from, n * sizeof(*c->bp));
	memmove(c->bp_at + to, c->bp_at + from, n * sizeof(*c->bp_at));
	memmove(c->flags + to, c->flags + from, n * sizeof(*c->flags));
}

/* Copies frames [0, n) of f to c. */
static void give(struct unwind_cache *c, const struct frames *f, uint32_t n)
{
	memcpy(c->pc, f->pc, n * sizeof(*c->pc));
	memcpy(c->sp, f->sp, n * sizeof(*c->sp));
	memcpy(c->bp, f->bp, n * sizeof(*c->bp));
	memcpy(c->bp_at, f->bp_at, n * sizeof(*c->bp_at));
	memcpy(c->flags, f->flags, n * sizeof(*c->flags));
}

/* Which states' rbp a later step reads, from the last state down: a
 * step whose CFA is rbp's, or that leaves rbp as it is for a later one;
 * and a resumable last state. */
static void mark_bp(struct unwind_cache *c)
{
	uint32_t m = c->n + c->has_next;
	int needs = c->has_next && !c->ended;

	while (m-- > 0) {
		uint8_t fl = c->flags[m] & F_CFA_BP;

		if (m < c->n && (c->has_next || m + 1 < c->n))
			/* frame m was stepped */
			needs = fl || (c->bp_at[m] == BP_SAME && needs);
		c->flags[m] = (uint8_t)(fl | (needs ? F_NEEDS_BP : 0));
	}
}

#define PAGE_OF(a) ((a) >> 12)

/* The batches of the first n checks (unwind.h): a new batch where a check
 * leaves the page of its batch's first; in a batch, a check and the next
 * that read adjacent words make a pair (a frame-pointer frame's return
 * address at CFA-8 and saved rbp at CFA-16), the rest are single words. */
static void build_batches(struct unwind_cache *c, uint32_t n)
{
	uint32_t i = 0, np = 0, no = 0, nb = 0;
	uint64_t page, a, b;

	while (i < n) {
		page = PAGE_OF(c->chk_addr[i]);
		while (i < n && PAGE_OF(c->chk_addr[i]) == page) {
			a = c->chk_addr[i];
			b = i + 1 < n ? c->chk_addr[i + 1] : 0;
			if (i + 1 < n && PAGE_OF(b) == page && (b == a + 8 || b + 8 == a)) {
				int lo = b < a;

				c->pair_addr[np] = lo ? b : a;
				c->pair_val[np][0] = c->chk_val[i + lo];
				c->pair_val[np][1] = c->chk_val[i + !lo];
				np++;
				i += 2;
			} else {
				c->one_addr[no] = a;
				c->one_val[no++] = c->chk_val[i++];
			}
		}
		/* Padded with the batch's last pair (a multiple of 4) and
		 * last word (a multiple of 2): read again, they hold as the
		 * first reading does, and the test needs no loop for the
		 * remainders. */
		while (np % 4 && np > (nb ? c->bat_pair[nb - 1] : 0u)) {
			c->pair_addr[np] = c->pair_addr[np - 1];
			c->pair_val[np][0] = c->pair_val[np - 1][0];
			c->pair_val[np][1] = c->pair_val[np - 1][1];
			np++;
		}
		if (no % 2 && no > (nb ? c->bat_one[nb - 1] : 0u)) {
			c->one_addr[no] = c->one_addr[no - 1];
			c->one_val[no] = c->one_val[no - 1];
			no++;
		}
		c->bat_pair[nb] = (uint16_t)np;
		c->bat_one[nb++] = (uint16_t)no;
	}
	c->nbat = (uint16_t)nb;
}

/* The checks of each step: its return address, and the rbp it read when
 * a later step uses it (an rbp it leaves as it was needs no check: the
 * state it came from was checked). */
static void build_checks(struct unwind_cache *c)
{
	uint32_t steps = c->has_next ? c->n : c->n - 1, m, i = 0;

	for (m = 0; m < steps; m++) {
		c->chk_at[m] = (uint16_t)i;
		c->chk_addr[i] = c->sp[m + 1] - 8;
		c->chk_val[i++] = c->pc[m + 1];
		if (c->bp_at[m] != BP_SAME && (c->flags[m + 1] & F_NEEDS_BP)) {
			c->chk_addr[i] = c->sp[m + 1] + (int64_t)c->bp_at[m];
			c->chk_val[i++] = c->bp[m + 1];
		}
	}
	c->chk_at[m] = (uint16_t)i;
	build_batches(c, i);
}

/* Whether the words steps [from, to) of c read still hold their values.
 * In order, stopping at the first that does not: each check's address is
 * one the current walk reads once the checks before it held. */
static inline int checks_hold(const struct unwind_cache *c, uint32_t from, uint32_t to)
{
	uint32_t i = c->chk_at[from], e = c->chk_at[to];

	for (; i < e; i++)
		if (load(c->chk_addr[i]) != c->chk_val[i])
			return 0;
	return 1;
}

/* The walk when it is not the previous one: new frames go to arrays on
 * the stack first, joined to the previous walk's at the end. */
static __attribute__((noinline)) int walk(struct unwind_cache *c, uint64_t pc, uint64_t sp,
					   uint64_t bp, uint32_t max, int *same)
{
	uint64_t f_pc[max + 1], f_sp[max + 1], f_bp[max + 1];
	int32_t f_at[max + 1];
	uint8_t f_fl[max + 1];
	const struct frames f = { f_pc, f_sp, f_bp, f_at, f_fl };
	uint32_t g = __atomic_load_n(&unwind_gen, __ATOMIC_RELAXED);
	uint32_t pn = c->gen == g ? c->n : 0, psteps, k = 0, j = 0, m, stop = 0;
	int joined = 0, has_next = 0, ended = 0, final;
	uint64_t r, v = 0, nb = 0, cfa;

	/* steps the previous walk made: one from each frame but an ending one */
	psteps = pn ? (c->has_next ? pn : pn - 1) : 0;
	for (;;) {
		if (pc < UNWIND_PC_MIN) {
			/* the stack's end, as libunwind's trace stops (k > 0) */
			put(&f, k, pc, sp, bp);
			has_next = ended = 1;
			break;
		}
		if (k == max) {
			put(&f, k, pc, sp, bp);
			has_next = 1;
			break;
		}
		while (j < pn && c->sp[j] < sp)
			j++;
		if (j < pn && c->sp[j] == sp && c->pc[j] == pc &&
		    (!(c->flags[j] & F_NEEDS_BP) || c->bp[j] == bp)) {
			/* The previous walk's steps from j on, up to the state
			 * the new walk's limit needs: when their words hold,
			 * the rest of the walk is the previous one's. */
			stop = j + (max - k) < psteps ? j + (max - k) : psteps;
			final = stop == j + (max - k) || c->ended;
			if (final && checks_hold(c, j, stop)) {
				m = stop;
			} else {
				/* Find the step that differs, following rbp. */
				for (m = j; m < stop; m++) {
					f.bp[k + m - j] = bp; /* for take() */
					v = load(c->sp[m + 1] - 8);
					nb = c->bp_at[m] == BP_SAME
						     ? bp
						     : load(c->sp[m + 1] + (int64_t)c->bp_at[m]);
					if (v != c->pc[m + 1] ||
					    (nb != c->bp[m + 1] && (c->flags[m + 1] & F_NEEDS_BP)))
						break;
					bp = nb;
				}
			}
			if (m == stop && final) {
				/* joined: frames j..stop of the previous walk
				 * (stop as a state when the walk has one) */
				if (stop == j + (max - k)) {
					has_next = 1;
					ended = stop == pn && c->ended;
				} else {
					has_next = c->has_next;
					ended = 1;
				}
				joined = 1;
				break;
			}
			/* Frames j..m-1 are the new walk's too.  Then either a
			 * difference in step m, or the previous walk stopped at
			 * its limit (m == stop == pn): go on from state m + 1,
			 * or from state pn, with the current stack's values. */
			take(&f, k, c, j, m - j + (m < stop));
			k += m - j + (m < stop);
			if (m < stop) {
				pc = v;
				sp = c->sp[m + 1];
				bp = nb;
				j = m + 1;
			} else {
				pc = c->pc[m];
				sp = c->sp[m];
				j = m;
			}
			continue;
		}
		r = rule_of(pc, sp, bp, g);
		if (!r || RULE_KIND(r) == KIND_OTHER)
			return -1;
		put(&f, k, pc, sp, bp);
		if (RULE_KIND(r) == KIND_LAST) {
			k++;
			ended = 1;
			break;
		}
		cfa = (RULE_CFA_BP(r) ? bp : sp) + (uint64_t)RULE_OFF(r);
		pc = load(cfa - 8);
		if ((uint16_t)(r >> 32) != RULE_BP_SAME) {
			f.bp_at[k] = (int16_t)(uint16_t)(r >> 32);
			bp = load(cfa + (int64_t)f.bp_at[k]);
		}
		f.flags[k] = (uint8_t)RULE_CFA_BP(r);
		sp = cfa;
		k++;
	}
	if (joined) {
		/* new frames 0..k-1, then the previous walk's j..stop */
		uint32_t n_new = k + (stop - j) + (has_next ? 0 : 1);

		if (k == 0 && j == 0 && n_new == c->n && has_next == c->has_next &&
		    ended == c->ended) {
			*same = 1;
			return (int)n_new;
		}
		if (k != j)
			shift(c, k, j, stop - j + 1);
		give(c, &f, k);
		c->n = n_new;
	} else {
		give(c, &f, k + (uint32_t)has_next);
		c->n = k;
	}
	c->has_next = (uint8_t)has_next;
	c->ended = (uint8_t)ended;
	c->gen = g;
	mark_bp(c);
	c->need_bp0 = c->n && (c->flags[0] & F_NEEDS_BP);
	if (c->n + c->has_next > 0)
		build_checks(c);
	return (int)c->n;
}

int unwind_walk(struct unwind_cache *c, uint64_t pc, uint64_t sp, uint64_t bp, uint32_t max,
		int *same)
{
	*same = 0;
	if (!rules || max < 1 || max > UNWIND_MAX)
		return -1;
	/* The common case first, without the arrays (walk() finds the same,
	 * and anything else). */
	if (unwind_same(c, pc, sp, bp, max)) {
		*same = 1;
		return (int)c->n;
	}
	return walk(c, pc, sp, bp, max, same);
}
