/*
 * liborder.so, for wl_hard order (t_exact): an allocator placed behind the
 * shim.  Preloaded after it (LD_PRELOAD="libshimmer.so liborder.so"), its
 * malloc and free are the ones the shim finds with RTLD_NEXT: the shim's
 * "real" calls.  That lets the workload hold a call open inside the real
 * allocator, at the two places where the heap order (common/wire.h) must
 * already be, or not yet be, taken:
 *
 *  - a free of the pool's block hands the block back first, then, when
 *    order_hold_free() asked for it, waits until order_let_free(): another
 *    thread allocates the same address in between, and the free's own
 *    number must have been taken before it came here;
 *  - a malloc of ORDER_SIZE while the block is out waits here for its free
 *    (order_wait_waiter() returns once one waits): the free that lets it
 *    go happens after this malloc began, and the malloc's number must be
 *    taken after it returns from here.
 *
 * Blocks of ORDER_SIZE bytes come from a pool of one, so the address
 * freed is always the next one handed out, whichever thread asks (no
 * thread cache or arena decides it).  Every other size and block goes to
 * glibc (__libc_malloc, __libc_free).  No wait lasts longer than
 * ORDER_WAIT_S: a workload that went wrong ends with a line and status 3
 * rather than hang the test.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "order_lib.h"

#define ORDER_WAIT_S 20

void *__libc_malloc(size_t n);
void __libc_free(void *p);

void *malloc(size_t n);
void free(void *p);

static _Alignas(64) unsigned char pool[ORDER_SIZE];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int out;       /* the block is handed out */
static int hold_next; /* the next free of the block waits for order_let_free() */
static int held;      /* a free waits there now */
static int waiters;   /* mallocs waiting for the block */

static void give_up(const char *why)
{
	static const char pre[] = "liborder: waited too long for ";

	if (write(2, pre, sizeof(pre) - 1) < 0 || write(2, why, strlen(why)) < 0 ||
	    write(2, "\n", 1) < 0)
		_exit(3);
	_exit(3);
}

/* Waits on changed (lock held) until *flag == want. */
static void wait_for(const int *flag, int want, const char *what)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ORDER_WAIT_S;
	while ((*flag != 0) != want)
		if (pthread_cond_timedwait(&changed, &lock, &until) == ETIMEDOUT)
			give_up(what);
}

void *malloc(size_t n)
{
	if (n != ORDER_SIZE)
		return __libc_malloc(n);
	pthread_mutex_lock(&lock);
	if (out) {
		waiters++;
		pthread_cond_broadcast(&changed);
		wait_for(&out, 0, "the pool's block to be freed");
		waiters--;
	}
	out = 1;
	pthread_mutex_unlock(&lock);
	return pool;
}

void free(void *p)
{
	if (p != (void *)pool) {
		__libc_free(p);
		return;
	}
	pthread_mutex_lock(&lock);
	out = 0;
	pthread_cond_broadcast(&changed);
	if (hold_next) {
		hold_next = 0;
		held = 1;
		pthread_cond_broadcast(&changed);
		wait_for(&held, 0, "order_let_free()");
	}
	pthread_mutex_unlock(&lock);
}

void order_hold_free(void)
{
	pthread_mutex_lock(&lock);
	hold_next = 1;
	pthread_mutex_unlock(&lock);
}

void order_wait_held(void)
{
	pthread_mutex_lock(&lock);
	wait_for(&held, 1, "a held free");
	pthread_mutex_unlock(&lock);
}

void order_let_free(void)
{
	pthread_mutex_lock(&lock);
	held = 0;
	pthread_cond_broadcast(&changed);
	pthread_mutex_unlock(&lock);
}

void order_wait_waiter(void)
{
	pthread_mutex_lock(&lock);
	wait_for(&waiters, 1, "a malloc to wait");
	pthread_mutex_unlock(&lock);
}
