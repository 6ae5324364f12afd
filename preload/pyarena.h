/*
 * pymalloc's arenas: CPython serves objects of 512 bytes or less (most of a
 * Python program's objects) from arenas it maps itself, with mmap, and
 * gives back with munmap (Objects/obmalloc.c, _PyObject_ArenaMmap and
 * _PyObject_ArenaMunmap; 1 MiB each from 3.10 on, 256 KiB before), never
 * through the malloc family.  The shim exports mmap, mmap64 and munmap so
 * that those calls are recorded as heap calls of their own
 * (pymalloc_arena_mmap, pymalloc_arena_munmap: common/wire.h), through the
 * malloc hooks' pipeline (heap.h: counters, sampler, stacks, Python frames).
 *
 * A call is the arena allocator's when it has an arena's shape, exactly as
 * CPython makes it (no address, PROT_READ | PROT_WRITE, MAP_PRIVATE |
 * MAP_ANONYMOUS and nothing else, fd -1, offset 0, the runtime's arena
 * size; munmap: the arena size) and its caller (the return address) lies
 * in the object that defines the runtime's PyObject_Malloc and
 * PyObject_GetArenaAllocator (the python executable, or libpython3.X.so
 * however loaded: linked, dlopen'd by name or path, RTLD_LOCAL).  Every
 * other call, the shim's own among them, goes straight to the kernel after
 * those compares.  The interpreter's other maps (3.11+: its frame stacks,
 * 16 KiB chunks from the same allocator) and an extension's (the mmap
 * module) are not recorded.
 *
 * The runtime is found where its first arena is mapped, without a lock:
 * _dl_find_object() (glibc 2.35) names the caller's object and its
 * dynamic symbol table is read in place (GNU or SysV hash), so an arena
 * mapped before the constructor, or by a libpython that a program loaded
 * with dlopen, is recognized as any other; the answer is kept for the
 * next calls.  The module reports learn the runtimes too (pyarena_learn()),
 * which is all an older glibc has (pyarena.c says what it then misses).
 *
 * The hooks make the system call themselves (no dlsym: they may run before
 * anything is resolved), with glibc's argument check and errno: the same
 * results, the same errno, for every call.  They never allocate, never
 * lock and are async-signal-safe up to the recording, which is the malloc
 * hooks' (heap.c).
 */
#ifndef SHIMMER_PYARENA_H
#define SHIMMER_PYARENA_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>

/* The kernel's mmap and munmap as glibc's x86-64 wrappers make them: an
 * offset that is not a multiple of 4 KiB is EINVAL before the call; a
 * result in [-4095, -1] is an error number, stored in errno, and the
 * call returns MAP_FAILED (mmap) or -1 (munmap).  Async-signal-safe. */
static inline long pyarena_syscall(long nr, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

static inline void *pyarena_sys_mmap(void *addr, size_t len, int prot, int flags, int fd,
				      long off)
{
	long r;

	if (off & 0xfff) {
		errno = EINVAL;
		return MAP_FAILED;
	}
	r = pyarena_syscall(SYS_mmap, (long)addr, (long)len, prot, flags, fd, off);
	if ((unsigned long)r > -4096ul) {
		errno = (int)-r;
		return MAP_FAILED;
	}
	return (void *)r;
}

static inline int pyarena_sys_munmap(void *addr, size_t len)
{
	long r = pyarena_syscall(SYS_munmap, (long)addr, (long)len, 0, 0, 0, 0);

	if ((unsigned long)r > -4096ul) {
		errno = (int)-r;
		return -1;
	}
	return 0;
}

/* The map an arena of len bytes is: what the hooks record. */
static inline void *pyarena_map(size_t len)
{
	return pyarena_sys_mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
				0);
}

/* The module reports' part (modules.c): an object newly seen, spanning
 * [lo, hi), is kept if it is a Python runtime; one that went away is
 * forgotten, so that another object mapped at its addresses is not taken
 * for it.  Thread-safe, lock-free (the caller may hold the loader's lock:
 * dl_iterate_phdr). */
struct dl_phdr_info;
void pyarena_learn(const struct dl_phdr_info *info, uintptr_t lo, uintptr_t hi);
void pyarena_unloaded(uintptr_t lo, uintptr_t hi);

/* Fork child: a thread of the parent's that was filling the table of
 * runtimes does not exist here (the table keeps what it had). */
void pyarena_fork_child(void);

#endif /* SHIMMER_PYARENA_H */
