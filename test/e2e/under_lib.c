/*
 * libunder.so, for wl_hard under (t_signal): an allocator placed behind the
 * shim, as liborder.so is.  Preloaded after it (LD_PRELOAD="libshimmer.so
 * libunder.so"), its malloc family is the one the shim finds with
 * RTLD_NEXT, so every heap call that reaches glibc passes here: the
 * program's, and the shim's own (dlsym's, libunwind's,
 * pthread_setspecific's), which the shim makes `in_shim`.
 *
 * On a thread that armed it (under_arm()), each call first sends the
 * thread SIGUSR1 (tgkill): unless the thread blocks it, its handler runs
 * right there, inside the real call, so inside whatever the shim was doing
 * when it made it.  The handler quiets the library (under_quiet()) around
 * its own calls, which do not signal.
 *
 * Its constructor takes UNDER_KEYS pthread keys: it runs before the
 * shim's (a preloaded object's constructor runs after those of the objects
 * preloaded behind it), so the shim's key, and libunwind's, taken later,
 * are past glibc's first 32, and a thread's first pthread_setspecific of
 * them allocates, as in a program that uses many keys.
 *
 * Every block comes from glibc (__libc_malloc and friends); no stdio.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#define UNDER_KEYS 40

void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t m);
void *__libc_realloc(void *p, size_t n);
void *__libc_memalign(size_t align, size_t n);
void __libc_free(void *p);

void *malloc(size_t n);
void free(void *p);
void *calloc(size_t n, size_t m);
void *realloc(void *p, size_t n);
void *memalign(size_t align, size_t n);
void *aligned_alloc(size_t align, size_t n);
int posix_memalign(void **out, size_t align, size_t n);

void under_arm(int on);
void under_quiet(int on);
uint64_t under_signals(void);

static __thread int armed, quiet;
static __thread uint64_t signals;

__attribute__((constructor)) static void take_keys(void)
{
	pthread_key_t k;

	for (int i = 0; i < UNDER_KEYS; i++)
		if (pthread_key_create(&k, 0) != 0)
			break;
}

/* The signal, on an armed thread, before the real call: errno as it was. */
static inline void ring(void)
{
	int saved;

	if (!armed || quiet)
		return;
	saved = errno;
	signals++;
	syscall(SYS_tgkill, getpid(), gettid(), SIGUSR1);
	errno = saved;
}

void *malloc(size_t n)
{
	ring();
	return __libc_malloc(n);
}

void free(void *p)
{
	ring();
	__libc_free(p);
}

void *calloc(size_t n, size_t m)
{
	ring();
	return __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
	ring();
	return __libc_realloc(p, n);
}

void *memalign(size_t align, size_t n)
{
	ring();
	return __libc_memalign(align, n);
}

void *aligned_alloc(size_t align, size_t n)
{
	ring();
	return __libc_memalign(align, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
	void *p;

	if (align < sizeof(void *) || (align & (align - 1)))
		return EINVAL;
	ring();
	p = __libc_memalign(align, n);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

/* The calling thread's calls signal it from now on (on) or no longer. */
void under_arm(int on)
{
	armed = on;
}

/* Nests: a handler's own calls signal nothing. */
void under_quiet(int on)
{
	quiet += on ? 1 : -1;
}

/* The signals sent to the calling thread so far. */
uint64_t under_signals(void)
{
	return signals;
}
