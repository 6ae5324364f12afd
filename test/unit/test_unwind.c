/*
 * The stack walk (preload/unwind.c) against libunwind's unw_backtrace, the
 * full unwind it must reproduce: random call trees of functions with and
 * without frame pointers, alloca, big and realigned frames, called in
 * random orders so that consecutive walks share some frames, none or all;
 * random limits; signal handlers (on the thread's stack and on an
 * alternate one) that walk from inside; longjmp out of a deep tree; four
 * threads at once; a generation change.  Every walk that is not refused
 * must give unw_backtrace's pcs; walks that share frames with the one before
 * must happen, and be told apart (same) only when the pcs are equal.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <alloca.h>

#include <cmocka.h>

#include "preload/unwind.h"

#define THREADS 4
#define PROBES 4000

#ifdef __clang__
#define NO_FP
#else
#define NO_FP __attribute__((optimize("omit-frame-pointer")))
#endif

/* One tree's walker: its PRNG, its cache, what it saw. */
struct run {
	uint64_t x;
	struct unwind_cache *cache;
	uint64_t last[UNWIND_MAX];
	int last_n;
	unsigned probes, refused, same, odd_refused, plain_refused;
	unsigned mismatches, false_same, budget;
	int odd;      /* a realigned frame or a signal frame is on the stack */
	jmp_buf *out; /* longjmp target, when armed */
};

static int (*unw_bt)(void **, int);

#ifdef __SANITIZE_THREAD__
/*
 * Under ThreadSanitizer the reference is libunwind's cursor walk (the loop
 * unw_backtrace itself falls back to, same frames): unw_backtrace's
 * per-thread cache is freed by a key destructor that runs after TSan has
 * let the thread go, and crashes it.  And the handlers that walk call
 * libunwind, which may allocate: that is the point of the test, not a
 * finding.
 */
#define UNW_LOCAL_ONLY
#include <libunwind.h>

static int (*c_getcontext)(unw_context_t *);
static int (*c_init)(unw_cursor_t *, unw_context_t *);
static int (*c_step)(unw_cursor_t *);
static int (*c_reg)(unw_cursor_t *, int, unw_word_t *);

const char *__tsan_default_options(void);
const char *__tsan_default_options(void)
{
	return "report_signal_unsafe=0";
}

static __attribute__((noinline)) int cursor_bt(void **buf, int size)
{
	unw_context_t uc;
	unw_cursor_t cur;
	unw_word_t ip;
	int n = 0;

	if (c_getcontext(&uc) < 0 || c_init(&cur, &uc) < 0)
		return 0;
	while (n < size && c_step(&cur) > 0) {
		if (c_reg(&cur, UNW_REG_IP, &ip) < 0)
			break;
		buf[n++] = (void *)(uintptr_t)ip;
	}
	return n;
}
#endif
static __thread volatile uintptr_t sink;

static uint32_t rnd(struct run *r, uint32_t n)
{
	r->x ^= r->x << 13;
	r->x ^= r->x >> 7;
	r->x ^= r->x << 17;
	return (uint32_t)(r->x % n);
}

/* The walk from probe's caller, against unw_backtrace from the same
 * place.  Built with frame pointers (the test's default flags). */
static __attribute__((noinline)) void probe(struct run *r)
{
	void *ref[UNWIND_MAX + 1];
	const uint64_t *fp = __builtin_frame_address(0);
	uint32_t max = rnd(r, 4) == 0 ? 1 + rnd(r, UNWIND_MAX) : 32;
	int n, m, same;

	n = unwind_walk(r->cache, fp[1], (uint64_t)(uintptr_t)(fp + 2), fp[0], max, &same);
	m = unw_bt(ref, (int)max + 1) - 1; /* ref[0] is probe itself */
	if (m < 0)
		m = 0;
	r->probes++;
	if (n < 0) {
		r->refused++;
		if (r->odd)
			r->odd_refused++;
		else
			r->plain_refused++;
		return;
	}
	if (n != m || memcmp(r->cache->pc, ref + 1, (size_t)n * sizeof(uint64_t))) {
		if (r->mismatches++ < 3) {
			fprintf(stderr, "walk %u: %d frames, unw_backtrace %d; max %u\n", r->probes, n,
				m, max);
			for (int i = 0; i < n || i < m; i++)
				fprintf(stderr, "  %2d %016llx %016llx\n", i,
					i < n ? (unsigned long long)r->cache->pc[i] : 0ull,
					i < m ? (unsigned long long)(uintptr_t)ref[i + 1] : 0ull);
		}
	}
	if (same) {
		r->same++;
		if (n != r->last_n || memcmp(r->last, r->cache->pc, (size_t)n * sizeof(uint64_t)))
			r->false_same++;
	}
	memcpy(r->last, r->cache->pc, (size_t)n * sizeof(uint64_t));
	r->last_n = n;
}

static void node(struct run *r, int depth);

static void on_signal(int sig)
{
	(void)sig;
}

static __thread struct run *sig_run;

static void walk_in_handler(int sig)
{
	struct run *r = sig_run;
	int odd = r->odd;

	(void)sig;
	r->odd = 1;
	probe(r);
	node(r, 3);
	r->odd = odd;
}

/* The shapes.  Each does a little work of its own so that it keeps its
 * frame, then goes on down the tree. */
static __attribute__((noinline)) void f_fp(struct run *r, int depth)
{
	volatile char pad[24];

	pad[0] = (char)depth;
	node(r, depth - 1);
	sink += (uintptr_t)pad[0];
}

static __attribute__((noinline)) NO_FP void f_nofp(struct run *r, int depth)
{
	volatile uint64_t a[5];

	a[0] = (uint64_t)depth;
	node(r, depth - 1);
	sink += a[0];
}

static __attribute__((noinline)) NO_FP void f_alloca(struct run *r, int depth)
{
	volatile char *p = alloca(16 + rnd(r, 300));

	p[0] = (char)depth;
	node(r, depth - 1);
	sink += (uintptr_t)p[0];
}

static __attribute__((noinline)) NO_FP void f_big(struct run *r, int depth)
{
	volatile char big[9000];

	big[0] = (char)depth;
	big[8999] = 1;
	node(r, depth - 1);
	sink += (uintptr_t)big[0] + big[8999];
}

static __attribute__((noinline)) void f_realign(struct run *r, int depth)
{
	_Alignas(64) volatile char line[64];
	int odd = r->odd;

	line[0] = (char)depth;
	r->odd = 1;
	node(r, depth - 1);
	r->odd = odd;
	sink += (uintptr_t)line[0];
}

/* Calls a shape twice through the same site, so the second walk differs
 * from the first only below it. */
static __attribute__((noinline)) NO_FP void f_twice(struct run *r, int depth)
{
	node(r, depth - 1);
	node(r, depth - 1);
}

static __attribute__((noinline)) void f_signal(struct run *r, int depth)
{
	sig_run = r;
	raise(SIGUSR1);
	node(r, depth - 1);
}

static __attribute__((noinline)) void f_jump(struct run *r, int depth)
{
	if (r->out && rnd(r, 4) == 0)
		longjmp(*r->out, 1);
	node(r, depth - 1);
}

static void node(struct run *r, int depth)
{
	unsigned i, k;

	if (!r->budget)
		return;
	r->budget--;
	if (depth <= 0 || rnd(r, 8) == 0) {
		/* a leaf: walk once or a few times from here */
		for (i = 0, k = 1 + rnd(r, 3); i < k; i++)
			probe(r);
		return;
	}
	switch (rnd(r, 20)) {
	case 0 ... 4:
		f_fp(r, depth);
		break;
	case 5 ... 9:
		f_nofp(r, depth);
		break;
	case 10 ... 11:
		f_alloca(r, depth);
		break;
	case 12:
		f_big(r, depth);
		break;
	case 13:
		f_realign(r, depth);
		break;
	case 14 ... 16:
		f_twice(r, depth);
		break;
	case 17:
		f_signal(r, depth);
		break;
	case 18:
		f_jump(r, depth);
		break;
	default:
		probe(r);
		node(r, depth - 1);
	}
}

static void *trees(void *arg)
{
	struct run *r = arg;
	jmp_buf out;

	while (r->probes < PROBES) {
		r->budget = 400;
		r->out = &out;
		if (setjmp(out) == 0)
			node(r, 2 + (int)rnd(r, 60));
		r->out = 0;
		r->odd = 0;
	}
	return 0;
}

static void setup_walk(void)
{
	void *lib = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);

	assert_non_null(lib);
	unw_bt = (int (*)(void **, int))dlsym(lib, "unw_backtrace");
	assert_non_null(unw_bt);
#ifdef __SANITIZE_THREAD__
	c_getcontext = (int (*)(unw_context_t *))dlsym(lib, "_Ux86_64_getcontext");
	c_init = (int (*)(unw_cursor_t *, unw_context_t *))dlsym(lib, "_ULx86_64_init_local");
	c_step = (int (*)(unw_cursor_t *))dlsym(lib, "_ULx86_64_step");
	c_reg = (int (*)(unw_cursor_t *, int, unw_word_t *))dlsym(lib, "_ULx86_64_get_reg");
	assert_true(c_getcontext && c_init && c_step && c_reg);
	unw_bt = cursor_bt;
#endif
	unwind_fini();
	assert_int_equal(unwind_setup(lib), 0);
}

static void check_run(const struct run *r)
{
	assert_int_equal(r->mismatches, 0);
	assert_int_equal(r->false_same, 0);
	/* a plain stack is always walked */
	assert_int_equal(r->plain_refused, 0);
	/* walks joined the previous one, whole or in part */
	assert_true(r->same > r->probes / 20);
	assert_true(r->probes - r->refused > r->probes / 2);
}

static void test_unwind_random_trees(void **state)
{
	struct unwind_cache cache;
	struct run r = { .x = 0x9e3779b97f4a7c15ull, .cache = &cache };
	struct sigaction sa = { .sa_handler = walk_in_handler };

	(void)state;
	setup_walk();
	memset(&cache, 0, sizeof(cache));
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGUSR1, &sa, 0), 0);
	trees(&r);
	check_run(&r);
	/* signal frames were met, and refused */
	assert_true(r.odd_refused > 0);
	print_message("walks %u, refused %u (odd frames), same %u\n", r.probes, r.refused, r.same);
	sa.sa_handler = on_signal;
	sigaction(SIGUSR1, &sa, 0);
}

/* The handler runs on an alternate stack: the walk goes from there, its
 * previous walk on the thread's own stack. */
static void test_unwind_altstack(void **state)
{
	struct unwind_cache cache;
	struct run r = { .x = 12345, .cache = &cache };
	struct sigaction sa = { .sa_handler = walk_in_handler, .sa_flags = SA_ONSTACK };
	stack_t ss = { .ss_size = 1 << 16 };

	(void)state;
	setup_walk();
	memset(&cache, 0, sizeof(cache));
	ss.ss_sp = malloc(ss.ss_size);
	assert_non_null(ss.ss_sp);
	assert_int_equal(sigaltstack(&ss, 0), 0);
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGUSR1, &sa, 0), 0);
	trees(&r);
	check_run(&r);
	ss.ss_flags = SS_DISABLE;
	sigaltstack(&ss, 0);
	sa.sa_handler = on_signal;
	sa.sa_flags = 0;
	sigaction(SIGUSR1, &sa, 0);
	free(ss.ss_sp);
}

static void *thread_trees(void *arg)
{
	struct run *r = arg;
	struct unwind_cache *cache = calloc(1, sizeof(*cache));

	r->cache = cache;
	trees(r);
	r->cache = 0;
	free(cache);
	return 0;
}

/* Threads learn rules into the one table at once, each with its cache. */
static void test_unwind_threads(void **state)
{
	struct run r[THREADS];
	pthread_t th[THREADS];
	struct sigaction sa = { .sa_handler = walk_in_handler };
	int i;

	(void)state;
	setup_walk();
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGUSR1, &sa, 0), 0);
	for (i = 0; i < THREADS; i++) {
		memset(&r[i], 0, sizeof(r[i]));
		r[i].x = 777u + (uint64_t)i * 1000003u;
		assert_int_equal(pthread_create(&th[i], 0, thread_trees, &r[i]), 0);
	}
	for (i = 0; i < THREADS; i++) {
		pthread_join(th[i], 0);
		check_run(&r[i]);
	}
	sa.sa_handler = on_signal;
	sigaction(SIGUSR1, &sa, 0);
}

/* After unwind_forget a cache of the old generation is not trusted and
 * the rules are learnt again: same answers. */
static void test_unwind_forget(void **state)
{
	struct unwind_cache cache;
	struct run r = { .x = 4242, .cache = &cache };
	uint64_t rules0, rules1, refused, full;
	int n, same;
	const uint64_t *fp;

	(void)state;
	setup_walk();
	memset(&cache, 0, sizeof(cache));
	r.budget = 1000;
	node(&r, 20);
	unwind_counts(&rules0, &refused, &full);
	unwind_forget();
	fp = __builtin_frame_address(0);
	n = unwind_walk(&cache, fp[1], (uint64_t)(uintptr_t)(fp + 2), fp[0], 32, &same);
	assert_true(n > 0);
	assert_false(same);
	r.probes = 0;
	r.budget = 1000;
	node(&r, 20);
	unwind_counts(&rules1, &refused, &full);
	assert_true(rules1 > rules0);
	assert_int_equal(r.mismatches, 0);
	assert_int_equal(r.false_same, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unwind_random_trees),
		cmocka_unit_test(test_unwind_altstack),
		cmocka_unit_test(test_unwind_threads),
		cmocka_unit_test(test_unwind_forget),
	};

	return cmocka_run_group_tests(tests, 0, 0);
}
