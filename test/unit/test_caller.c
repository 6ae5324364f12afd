/*
 * caller: the return address of a frame stopped where the off-CPU records
 * stop one, found from its CFI: a thread blocked in glibc's read() (which
 * keeps no frame pointer of its own), caught by a signal whose context
 * gives its registers, must name the function that called read(); a
 * function's first instruction has its return address at sp.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#include <cmocka.h>

#include "collector/caller.h"

#define NWORDS 16

static volatile sig_atomic_t caught;

/* A function of libc itself, not of a sanitizer that wraps it. */
static void *libc_sym(const char *name)
{
	void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD), *f;

	assert_non_null(h);
	f = dlsym(h, name);
	assert_non_null(f);
	dlclose(h);
	return f;
}
static uint64_t got_ip, got_sp, got_bp, got_words[NWORDS];

/* The raw words of the interrupted stack, as the kernel copies them (they
 * span the sanitizer's redzones: not instrumented). */
__attribute__((no_sanitize_address)) static void copy_stack(const uint64_t *sp)
{
	for (int i = 0; i < NWORDS; i++)
		got_words[i] = sp[i];
}

static void on_usr1(int sig, siginfo_t *si, void *uc_)
{
	ucontext_t *uc = uc_;

	(void)sig;
	(void)si;
	got_ip = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
	got_sp = (uint64_t)uc->uc_mcontext.gregs[REG_RSP];
	got_bp = (uint64_t)uc->uc_mcontext.gregs[REG_RBP];
	copy_stack((const uint64_t *)got_sp);
	caught = 1;
}

static int pipefd[2];
/* libc's read() itself: a sanitizer's interceptor, found first by name,
 * would be its caller. */
static ssize_t (*libc_read)(int, void *, size_t);

__attribute__((noinline)) static ssize_t blocked_read(void)
{
	char c;
	ssize_t n = libc_read(pipefd[0], &c, 1);

	__asm__ volatile("" ::: "memory"); /* no tail call: we stay the caller */
	return n;
}

static void *reader(void *arg)
{
	(void)arg;
	return (void *)(intptr_t)blocked_read();
}

static void test_caller_blocked_read(void **state)
{
	struct sigaction sa = { .sa_sigaction = on_usr1, .sa_flags = SA_SIGINFO | SA_RESTART };
	struct pm_objects objs = { 0 };
	struct caller_frame f;
	struct caller *c;
	pthread_t t;
	void *ret;

	(void)state;
#if defined(__SANITIZE_THREAD__)
	/* ThreadSanitizer delivers a signal only at its own safe points: never
	 * to a thread blocked in a system call it does not intercept (libc's
	 * own read, which this needs). */
	skip();
#endif
	libc_read = (ssize_t (*)(int, void *, size_t))libc_sym("read");
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGUSR1, &sa, NULL), 0);
	assert_int_equal(pipe(pipefd), 0);
	assert_int_equal(pthread_create(&t, NULL, reader, NULL), 0);
	usleep(100000); /* blocked in read() by now */
	pthread_kill(t, SIGUSR1);
	for (int i = 0; !caught && i < 5000; i++)
		usleep(1000);
	assert_true(caught);
	assert_int_equal(write(pipefd[1], "x", 1), 1);
	assert_int_equal(pthread_join(t, &ret), 0);
	assert_int_equal((intptr_t)ret, 1);

	assert_int_equal(procmaps_read(getpid(), &objs), 0);
	c = caller_new(getpid());
	assert_non_null(c);
	/* stopped inside libc's read(), not in our code */
	assert_false(got_ip >= (uintptr_t)blocked_read && got_ip < (uintptr_t)blocked_read + 256);
	assert_int_equal(caller_of(c, &objs, got_ip, got_sp, got_bp, got_words, NWORDS, &f), 0);
	assert_true(f.ret > (uintptr_t)blocked_read && f.ret < (uintptr_t)blocked_read + 256);
	/* read() leaves rbp alone: the frame-pointer walk from it is right */
	assert_int_equal(f.bp_unchanged, 1);
	/* too few words to hold the return address */
	assert_int_equal(caller_of(c, &objs, got_ip, got_sp, got_bp, got_words, 1, &f), -ENOENT);
	caller_free(c);
	procmaps_free(&objs);
	close(pipefd[0]);
	close(pipefd[1]);
}

/* At any function's first instruction the return address is at sp. */
static void test_caller_entry(void **state)
{
	uint64_t words[4] = { 0x1122334455667788ull, 1, 2, 3 };
	uintptr_t fn = (uintptr_t)libc_sym("getpid");
	struct pm_objects objs = { 0 };
	struct caller_frame f;
	struct caller *c = caller_new(getpid());

	(void)state;
	assert_non_null(c);
	assert_int_equal(procmaps_read(getpid(), &objs), 0);
	assert_int_equal(caller_of(c, &objs, fn, 0x7000, 0x7100, words, 4, &f), 0);
	assert_int_equal(f.ret, words[0]);
	assert_int_equal(f.bp_unchanged, 1);
	/* an address in no object */
	assert_int_equal(caller_of(c, &objs, 0x10, 0x7000, 0, words, 4, &f), -ENOENT);
	caller_free(c);
	procmaps_free(&objs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_caller_blocked_read),
		cmocka_unit_test(test_caller_entry),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
