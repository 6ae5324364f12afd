/*
 * The mmap, mmap64 and munmap hooks, and finding the Python runtime whose
 * arena allocator calls them (pyarena.h).
 *
 * Cost: a call that is not an arena's shape (every map of the loader's,
 * of a file, of a thread's stack, the shim's own) pays the compares of its
 * arguments, at most five, before its system call.  One of that shape
 * (rare but for the arenas themselves, and the maps of allocators that
 * ask for exactly 256 KiB or 1 MiB of private anonymous memory) looks its
 * caller up among the runtimes known (a few compares), else asks the
 * loader which object holds it (_dl_find_object(): lock-free, async-
 * signal-safe, glibc 2.35 and later) and reads two or three names from
 * that object's hash table.
 *
 * The runtimes known fill a small table (RUNTIMES of them; more are looked
 * up on each call, as a caller that is none is: no table of the objects
 * that are not a runtime, which an unload would make stale), from both
 * ends: the module reports (modules.c: at the constructor, every dlopen
 * and dlclose, under the loader's lock but off the mmap path) learn each
 * new object, and the lookup above learns the one a call came from.  With
 * a glibc older than 2.35 the reports alone fill it: an arena mapped
 * before the report that finds its runtime (a libpython loaded with dlopen
 * by a bare name, until the next report; one whose constructor maps
 * before the shim's) is then not recorded.  An object unloaded is
 * forgotten (its entry's arena size set to 0; a slot is never reused).
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <string.h>

#include "heap.h"
#include "pyarena.h"
#include "shim.h"

#define ARENA_FLAGS (MAP_PRIVATE | MAP_ANONYMOUS)
#define ARENA_PROT (PROT_READ | PROT_WRITE)
#define ARENA_LARGE (1ul << 20) /* CPython 3.10 and later, 64-bit */
#define ARENA_SMALL (256ul << 10)
#define RUNTIMES 4u
#define DYN_MAX 1024u      /* dynamic entries read at most */
#define CHAIN_MAX (1u << 20) /* hash chain steps at most */

/* glibc 2.35's lock-free lookup, where the headers declare it.  Found in
 * libc's symbol table at its first use (find_object()), not linked: a
 * shim built here loads on an older glibc, which has none. */
#ifdef DLFO_EH_SEGMENT_TYPE
#define HAVE_DL_FIND_OBJECT 1
#define OBJECTS_MAX 64u /* of the loader's list, looked through for libc */
typedef int (*find_object_fn)(void *, struct dl_find_object *);
#else
#define HAVE_DL_FIND_OBJECT 0
#endif

/* A runtime's object, [lo, hi), and its arena size (0 once it was
 * unloaded: forgotten, the slot not reused). */
struct runtime {
	uintptr_t lo, hi;
	size_t arena;
};

static struct runtime runtimes[RUNTIMES];
static unsigned nruntimes; /* entries filled (release) */
static int filling;        /* a thread writes the next entry */

/* ---- an object's dynamic symbols, read in place ---- */

struct dynsyms {
	const ElfW(Sym) *sym;
	const char *str;
	const uint32_t *gnu;  /* DT_GNU_HASH, or NULL */
	const uint32_t *sysv; /* DT_HASH, or NULL */
};

/* The loader relocates the dynamic section's addresses in place, except
 * where it is read-only (the vDSO); an address below the load bias is an
 * offset still. */
static const void *dyn_addr(ElfW(Addr) bias, ElfW(Addr) v)
{
	return (const void *)(v < bias ? v + bias : v);
}

static int dynsyms_of(const ElfW(Dyn) *d, ElfW(Addr) bias, struct dynsyms *s)
{
	unsigned i;

	memset(s, 0, sizeof(*s));
	for (i = 0; d && i < DYN_MAX && d[i].d_tag != DT_NULL; i++) {
		switch (d[i].d_tag) {
		case DT_SYMTAB:
			s->sym = dyn_addr(bias, d[i].d_un.d_ptr);
			break;
		case DT_STRTAB:
			s->str = dyn_addr(bias, d[i].d_un.d_ptr);
			break;
		case DT_GNU_HASH:
			s->gnu = dyn_addr(bias, d[i].d_un.d_ptr);
			break;
		case DT_HASH:
			s->sysv = dyn_addr(bias, d[i].d_un.d_ptr);
			break;
		}
	}
	return s->sym && s->str && (s->gnu || s->sysv) ? 0 : -1;
}

static int defined(const struct dynsyms *s, uint32_t i, const char *name)
{
	const ElfW(Sym) *y = &s->sym[i];

	return y->st_shndx != SHN_UNDEF && y->st_value && strcmp(s->str + y->st_name, name) == 0;
}

/* The symbol's index in the GNU hash table, 0 when not defined there. */
static uint32_t gnu_find(const struct dynsyms *s, const char *name)
{
	const uint32_t *g = s->gnu;
	uint32_t nbuckets = g[0], symoffset = g[1], bloom_size = g[2], shift = g[3], h = 5381, i, n;
	const ElfW(Addr) *bloom = (const ElfW(Addr) *)(g + 4);
	const uint32_t *buckets = (const uint32_t *)(bloom + bloom_size), *chain = buckets + nbuckets;
	const unsigned bits = 8 * sizeof(ElfW(Addr));
	ElfW(Addr) word, mask;
	const unsigned char *c;

	for (c = (const unsigned char *)name; *c; c++)
		h = h * 33 + *c;
	if (!nbuckets || !bloom_size)
		return 0;
	word = bloom[(h / bits) % bloom_size];
	mask = ((ElfW(Addr))1 << (h % bits)) | ((ElfW(Addr))1 << ((h >> shift) % bits));
	if ((word & mask) != mask)
		return 0;
	i = buckets[h % nbuckets];
	if (i < symoffset)
		return 0;
	for (n = 0; n < CHAIN_MAX; n++, i++) {
		uint32_t h2 = chain[i - symoffset];

		if ((h | 1) == (h2 | 1) && defined(s, i, name))
			return i;
		if (h2 & 1)
			return 0;
	}
	return 0;
}

static uint32_t sysv_find(const struct dynsyms *s, const char *name)
{
	const uint32_t *t = s->sysv;
	uint32_t nbucket = t[0], nchain = t[1], h = 0, g, i, n;
	const uint32_t *bucket = t + 2, *chain = bucket + nbucket;
	const unsigned char *c;

	for (c = (const unsigned char *)name; *c; c++) {
		h = (h << 4) + *c;
		g = h & 0xf0000000u;
		if (g)
			h ^= g >> 24;
		h &= ~g;
	}
	if (!nbucket)
		return 0;
	for (i = bucket[h % nbucket], n = 0; i && i < nchain && n < CHAIN_MAX; i = chain[i], n++)
		if (defined(s, i, name))
			return i;
	return 0;
}

/* The index of the object's definition of name, 0 when it has none. */
static uint32_t find(const struct dynsyms *s, const char *name)
{
	return s->gnu ? gnu_find(s, name) : sysv_find(s, name);
}

static int defines(const struct dynsyms *s, const char *name)
{
	return find(s, name) != 0;
}

/* The arena size of the CPython runtime whose dynamic section is d (load
 * bias `bias`), 0 when it is none: it defines PyObject_Malloc and
 * PyObject_GetArenaAllocator (a CPython since 3.4; an object that only
 * imports them, an extension, defines neither).  3.10 made arenas 1 MiB on
 * 64-bit machines, and added Py_NewRef. */
static size_t runtime_arena(const ElfW(Dyn) *d, ElfW(Addr) bias)
{
	struct dynsyms s;

	if (dynsyms_of(d, bias, &s) < 0 || !defines(&s, "PyObject_Malloc") ||
	    !defines(&s, "PyObject_GetArenaAllocator"))
		return 0;
	return defines(&s, "Py_NewRef") ? ARENA_LARGE : ARENA_SMALL;
}

/* ---- the runtimes known ---- */

/* Keeps the runtime [lo, hi), unless it is kept (the loader's span of an
 * object and its segments' may differ by a page: any overlap is the same
 * object) or the table is full or being filled by another thread (which
 * costs that thread's next calls a lookup, nothing more). */
static void remember(uintptr_t lo, uintptr_t hi, size_t arena)
{
	unsigned n, i;

	if (__atomic_exchange_n(&filling, 1, __ATOMIC_ACQUIRE))
		return;
	n = __atomic_load_n(&nruntimes, __ATOMIC_ACQUIRE);
	for (i = 0; i < n; i++)
		if (runtimes[i].lo < hi && lo < runtimes[i].hi &&
		    __atomic_load_n(&runtimes[i].arena, __ATOMIC_RELAXED))
			break;
	if (i == n && n < RUNTIMES) {
		runtimes[n] = (struct runtime){ .lo = lo, .hi = hi, .arena = arena };
		__atomic_store_n(&nruntimes, n + 1, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&filling, 0, __ATOMIC_RELEASE);
}

#if HAVE_DL_FIND_OBJECT
/*
 * _dl_find_object, NULL when this glibc has none: read from the symbol
 * table of the object that defines it (libc), found in the loader's list
 * of objects, whose head (the objects loaded at start, libc among them,
 * never unloaded) no dlopen changes: no lock, no call into the loader.
 * Threads may race to resolve it; each finds the same.
 */
static find_object_fn find_object(void)
{
	static find_object_fn fn;
	static int known;
	const struct link_map *m;
	struct dynsyms s;
	unsigned n;
	uint32_t i;

	if (__atomic_load_n(&known, __ATOMIC_ACQUIRE))
		return fn;
	for (m = _r_debug.r_map, n = 0; m && n < OBJECTS_MAX; m = m->l_next, n++) {
		if (dynsyms_of(m->l_ld, m->l_addr, &s) < 0 || !(i = find(&s, "_dl_find_object")))
			continue;
		__atomic_store_n(&fn, (find_object_fn)(m->l_addr + s.sym[i].st_value),
				 __ATOMIC_RELAXED);
		break;
	}
	__atomic_store_n(&known, 1, __ATOMIC_RELEASE);
	return fn;
}
#endif

/* The arena size of the runtime holding pc, 0 when pc is in no runtime. */
static size_t arena_of(uintptr_t pc)
{
	unsigned n = __atomic_load_n(&nruntimes, __ATOMIC_ACQUIRE), i;
	size_t arena;

	for (i = 0; i < n; i++) {
		const struct runtime *r = &runtimes[i];

		arena = __atomic_load_n(&r->arena, __ATOMIC_RELAXED);
		if (arena && pc - r->lo < r->hi - r->lo)
			return arena;
	}
#if HAVE_DL_FIND_OBJECT
	{
		find_object_fn fo = find_object();
		struct dl_find_object d;
		const struct link_map *m;

		if (!fo || fo((void *)pc, &d) != 0 || !(m = d.dlfo_link_map))
			return 0;
		arena = runtime_arena(m->l_ld, m->l_addr);
		if (arena)
			remember((uintptr_t)d.dlfo_map_start, (uintptr_t)d.dlfo_map_end, arena);
		return arena;
	}
#else
	return 0;
#endif
}

void pyarena_learn(const struct dl_phdr_info *info, uintptr_t lo, uintptr_t hi)
{
	const ElfW(Dyn) *dyn = NULL;
	size_t arena;
	int i;

	for (i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
	if (dyn && lo < hi && (arena = runtime_arena(dyn, info->dlpi_addr)))
		remember(lo, hi, arena);
}

void pyarena_unloaded(uintptr_t lo, uintptr_t hi)
{
	unsigned n = __atomic_load_n(&nruntimes, __ATOMIC_ACQUIRE), i;

	for (i = 0; i < n; i++)
		if (runtimes[i].lo < hi && lo < runtimes[i].hi)
			__atomic_store_n(&runtimes[i].arena, 0, __ATOMIC_RELAXED);
}

void pyarena_fork_child(void)
{
	__atomic_store_n(&filling, 0, __ATOMIC_RELAXED);
}

/* ---- the hooks ---- */

static inline int arena_sized(size_t len)
{
	return len == ARENA_LARGE || len == ARENA_SMALL;
}

/* Whether the call, made from pc, is the arena allocator's map. */
static inline int arena_map(const void *addr, size_t len, int prot, int flags, int fd, long off,
			    uintptr_t pc)
{
	return unlikely(flags == ARENA_FLAGS) && !addr && prot == ARENA_PROT && fd == -1 && !off &&
	       arena_sized(len) && arena_of(pc) == len;
}

static __attribute__((noinline)) void *recorded_mmap(size_t len)
{
	void *p = heap_arena_mmap(len);

	return p ? p : MAP_FAILED;
}

SHIM_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	if (arena_map(addr, len, prot, flags, fd, off, (uintptr_t)__builtin_return_address(0)))
		return recorded_mmap(len);
	return pyarena_sys_mmap(addr, len, prot, flags, fd, off);
}

SHIM_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
	if (arena_map(addr, len, prot, flags, fd, off, (uintptr_t)__builtin_return_address(0)))
		return recorded_mmap(len);
	return pyarena_sys_mmap(addr, len, prot, flags, fd, off);
}

SHIM_EXPORT int munmap(void *addr, size_t len)
{
	if (unlikely(arena_sized(len)) && arena_of((uintptr_t)__builtin_return_address(0)) == len)
		return heap_arena_munmap(addr, len);
	return pyarena_sys_munmap(addr, len);
}
