/*
 * Module reports.  A walk of dl_iterate_phdr compares the loaded objects
 * with those reported (a table of (bias, lo, hi), mapped once, no malloc):
 * new ones are reported, known ones marked present, and known ones not
 * seen in the walk reported as unloaded.
 *
 * The build-id is read from the object's mapped PT_NOTE segments; the
 * main program's empty name is replaced by /proc/self/exe's target.
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "clock.h"
#include "intern.h"
#include "log.h"
#include "modules.h"
#include "pyarena.h"
#include "pyframes.h"
#include "real.h"
#include "shim.h"
#include "stack.h"

#define MAX_MODS 8192u
#define STALE_WALKS 64 /* walks made after a bare-name dlopen before giving up on it */

struct mod {
	uint64_t bias;
	uint64_t lo;
	uint64_t hi;
	uint32_t path_id;
	uint32_t seen; /* in the current walk */
};

struct walk {
	struct shim_thread *t;
	unsigned long long adds;
	int added;
};

int modules_stale;

static struct mod *mods;
static uint32_t nmods;
static int busy;
static unsigned long long last_adds;
static void *(*real_dlopen)(const char *, int);
static int (*real_dlclose)(void *);

static void span(const struct dl_phdr_info *info, uint64_t *lo, uint64_t *hi)
{
	uint64_t a, b;
	int i;

	*lo = UINT64_MAX;
	*hi = 0;
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type != PT_LOAD)
			continue;
		a = info->dlpi_addr + ph->p_vaddr;
		b = a + ph->p_memsz;
		if (a < *lo)
			*lo = a;
		if (b > *hi)
			*hi = b;
	}
	if (*lo > *hi)
		*lo = *hi = 0;
}

/* Copies the GNU build-id of the object into r; leaves it empty if none. */
static void build_id(const struct dl_phdr_info *info, struct shm_rec_module *r)
{
	int i;

	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		const uint8_t *p, *end;

		if (ph->p_type != PT_NOTE)
			continue;
		p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
		end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *nh = (const void *)p;
			const uint8_t *name = p + sizeof(*nh);
			const uint8_t *desc = name + ((nh->n_namesz + 3u) & ~3u);

			p = desc + ((nh->n_descsz + 3u) & ~3u);
			if (p > end || desc + nh->n_descsz > end)
				break;
			if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
			    !memcmp(name, "GNU", 4)) {
				r->build_id_len = (uint8_t)(nh->n_descsz < sizeof(r->build_id)
							    ? nh->n_descsz : sizeof(r->build_id));
				memcpy(r->build_id, desc, r->build_id_len);
				return;
			}
		}
	}
}

static void emit(struct shim_thread *t, const struct mod *m, const struct dl_phdr_info *info,
		 int unload)
{
	struct shm_rec_module r = {
		.hdr = { .type = SHM_REC_MODULE, .size = sizeof(r) },
		.ts = clock_now(),
		.bias = m->bias,
		.lo = m->lo,
		.hi = m->hi,
		.path_id = m->path_id,
		.unload = (uint8_t)unload,
	};

	if (info)
		build_id(info, &r);
	thread_emit_wait(t, &r, sizeof(r));
}

static uint32_t path_id(const char *name)
{
	char exe[PATH_MAX];
	ssize_t n;

	if (name && name[0])
		return intern_str(name);
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	return n > 0 ? intern_mem(exe, (size_t)n) : 0;
}

/* Under the loader's lock: the ring write and intern_str's send are
 * bounded, and neither needs the lock, so it cannot deadlock. */
static int visit(struct dl_phdr_info *info, size_t size, void *data)
{
	struct walk *w = data;
	struct mod *m;
	uint64_t lo, hi;
	uint32_t i;

	(void)size;
	w->adds = info->dlpi_adds;
	span(info, &lo, &hi);
	if (lo == hi)
		return 0;
	for (i = 0; i < nmods; i++) {
		m = &mods[i];
		if (m->bias == info->dlpi_addr && m->lo == lo && m->hi == hi) {
			m->seen = 1;
			return 0;
		}
	}
	if (nmods >= MAX_MODS)
		return 0;
	m = &mods[nmods++];
	*m = (struct mod){ .bias = info->dlpi_addr, .lo = lo, .hi = hi, .seen = 1,
			   .path_id = path_id(info->dlpi_name) };
	pyarena_learn(info, (uintptr_t)lo, (uintptr_t)hi);
	emit(w->t, m, info, 0);
	w->added = 1;
	return 0;
}

void modules_report(void)
{
	struct shim_thread *t = thread_self();
	struct walk w = { .t = t };
	uint32_t i, j;
	int saved = errno, stale, b;

	if (!t || !mods)
		return;
	if (__atomic_exchange_n(&busy, 1, __ATOMIC_ACQUIRE))
		return;
	/* The walk makes no traced call (glibc's dl_iterate_phdr does not
	 * allocate; names are interned in mapped memory): a signal handler's
	 * calls in it are counted, their records dropped. */
	b = shim_busy(t);
	stale = __atomic_load_n(&modules_stale, __ATOMIC_RELAXED);
	for (i = 0; i < nmods; i++)
		mods[i].seen = 0;
	dl_iterate_phdr(visit, &w);
	for (i = 0, j = 0; i < nmods; i++) {
		if (!mods[i].seen) {
			pyarena_unloaded((uintptr_t)mods[i].lo, (uintptr_t)mods[i].hi);
			emit(t, &mods[i], 0, 1);
			stack_forget();
			continue;
		}
		mods[j++] = mods[i];
	}
	nmods = j;
	if (w.added)
		py_recheck();
	/* A bare-name dlopen still in progress shows up in a later walk. */
	if (stale && w.adds == last_adds)
		__atomic_store_n(&modules_stale, stale - 1, __ATOMIC_RELAXED);
	else
		__atomic_store_n(&modules_stale, 0, __ATOMIC_RELAXED);
	last_adds = w.adds;
	shim_unbusy(t, b);
	__atomic_store_n(&busy, 0, __ATOMIC_RELEASE);
	errno = saved;
}

void modules_fork_child(void)
{
	nmods = 0;
	busy = 0;
	modules_stale = 0;
}

struct span_q {
	uintptr_t addr, lo, hi;
};

static int find_span(struct dl_phdr_info *info, size_t size, void *data)
{
	struct span_q *q = data;
	uint64_t lo, hi;

	(void)size;
	span(info, &lo, &hi);
	if (q->addr < lo || q->addr >= hi)
		return 0;
	q->lo = lo;
	q->hi = hi;
	return 1;
}

int modules_span_of(const void *addr, uintptr_t *lo, uintptr_t *hi)
{
	struct span_q q = { .addr = (uintptr_t)addr };

	if (!dl_iterate_phdr(find_span, &q))
		return -ENOENT;
	*lo = q.lo;
	*hi = q.hi;
	return 0;
}

static void resolve(void)
{
	sigset_t mask;

	shim_own_enter(&shim_tls, &mask);
	if (!__atomic_load_n(&real_dlopen, __ATOMIC_ACQUIRE))
		__atomic_store_n(&real_dlopen, real_next("dlopen"), __ATOMIC_RELEASE);
	if (!__atomic_load_n(&real_dlclose, __ATOMIC_ACQUIRE))
		__atomic_store_n(&real_dlclose, real_next("dlclose"), __ATOMIC_RELEASE);
	shim_own_leave(&shim_tls, &mask);
}

int modules_init(void)
{
	void *p;

	resolve();
	if (mods)
		return 0;
	p = mmap(0, MAX_MODS * sizeof(*mods), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	mods = p;
	return 0;
}

void modules_mark_stale(void)
{
	__atomic_store_n(&modules_stale, STALE_WALKS, __ATOMIC_RELAXED);
}

static int traced_now(void)
{
	return mods && !shim_tls.in_shim && __atomic_load_n(&shim_live.on, __ATOMIC_RELAXED);
}

/*
 * RTLD_DEEPBIND binds the library's references to its own dependencies
 * first: its malloc and free would go straight to libc, past the shim,
 * and every block it allocates and frees would be missed (or its frees of
 * blocks the program allocated would leave them looking live).  While the
 * heap is traced the flag is cleared, as heaptrack does, and said once.
 */
static int deepbind_said;
static const char *injection; /* modules_injected() */

static int clear_deepbind(const char *name)
{
	if (!__atomic_load_n(&shim_live.on, __ATOMIC_RELAXED) || shim.mode == SHM_MALLOC_OFF)
		return 0;
	log_warn_once(&deepbind_said, "dlopen(%s, RTLD_DEEPBIND): the flag is cleared, so that the "
		      "library's heap calls are traced (it now binds to the global scope first)",
		      name ? name : "NULL");
	return 1;
}

void modules_injected(const char *self)
{
	__atomic_store_n(&injection, self, __ATOMIC_RELEASE);
}

SHIM_EXPORT void *dlopen(const char *name, int flags)
{
	const char *inj;
	sigset_t mask;
	void *h;

	if (unlikely(!__atomic_load_n(&real_dlopen, __ATOMIC_ACQUIRE)))
		resolve();
	if (unlikely(!real_dlopen)) {
		errno = ENOSYS;
		return 0;
	}
	if (unlikely(flags & RTLD_DEEPBIND) && clear_deepbind(name))
		flags &= ~RTLD_DEEPBIND;
	if (name && !strchr(name, '/')) {
		/* A tail call: glibc must see our caller as the caller. */
		if (traced_now())
			__atomic_store_n(&modules_stale, STALE_WALKS, __ATOMIC_RELAXED);
		return real_dlopen(name, flags);
	}
	inj = __atomic_load_n(&injection, __ATOMIC_ACQUIRE);
	if (unlikely(inj && name && strcmp(name, inj) == 0)) {
		/* The CUDA driver or NVTX loading the shim as the injection
		 * library we named: the link map and names this allocates
		 * are there because of the shim, and would stay live in the
		 * program's heap to the end (131 bytes in two blocks in the
		 * fake runtime's test program). */
		shim_own_enter(&shim_tls, &mask);
		h = real_dlopen(name, flags);
		shim_own_leave(&shim_tls, &mask);
		return h;
	}
	h = real_dlopen(name, flags);
	if (h && traced_now())
		modules_report();
	return h;
}

SHIM_EXPORT int dlclose(void *h)
{
	int rc;

	if (unlikely(!__atomic_load_n(&real_dlclose, __ATOMIC_ACQUIRE)))
		resolve();
	if (unlikely(!real_dlclose))
		return -1;
	rc = real_dlclose(h);
	if (rc == 0 && traced_now())
		modules_report();
	return rc;
}
