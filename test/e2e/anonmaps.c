/*
 * anonmaps.c: private anonymous maps of a pymalloc arena's very shape
 * (1 MiB and 256 KiB, read-write, no address, fd -1) made by a C program,
 * which are no arena, then arenas made by the stand-in runtime it links
 * (libfakepy.so, fakepy.c), which are; and mmap and munmap's failures,
 * whose results and errno it prints: under the shim they must be what
 * glibc's give (t_pyarena.sh runs it bare and traced).
 *
 *   anonmaps OWN MAPS UNMAPS SMALL
 *
 * OWN: the program's own maps of each size, mapped, touched and given
 * back; MAPS, UNMAPS, SMALL: fake_arenas()'s.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fakepy.h"

#define RW (PROT_READ | PROT_WRITE)
#define ANON (MAP_PRIVATE | MAP_ANONYMOUS)

static void own(size_t len)
{
	void *p = mmap(NULL, len, RW, ANON, -1, 0);

	if (p == MAP_FAILED) {
		perror("anonmaps: mmap");
		exit(1);
	}
	memset(p, 1, len);
	if (munmap(p, len) != 0) {
		perror("anonmaps: munmap");
		exit(1);
	}
}

static void said(const char *what, int failed)
{
	printf("%s: %s %s\n", what, failed ? "failed" : "ok", failed ? strerror(errno) : "");
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10, i;
	void *p;

	for (i = 0; i < n; i++) {
		own(1ul << 20);
		own(256ul << 10);
	}
	/* the same failures, bare and traced */
	errno = 0;
	p = mmap(NULL, 4096, RW, ANON, -1, 1);
	said("mmap offset 1", p == MAP_FAILED);
	p = mmap(NULL, 0, RW, ANON, -1, 0);
	said("mmap length 0", p == MAP_FAILED);
	p = mmap(NULL, 1ul << 62, RW, ANON, -1, 0);
	said("mmap 4 EiB", p == MAP_FAILED);
	p = mmap(NULL, 4096, RW, MAP_PRIVATE, 9999, 0);
	said("mmap bad fd", p == MAP_FAILED);
	said("munmap unaligned", munmap((char *)&n + 1, 4096) != 0);
	said("munmap length 0", munmap(&n, 0) != 0);
	errno = 12345;
	p = mmap(NULL, 1ul << 20, RW, ANON, -1, 0);
	printf("mmap ok keeps errno: %d\n", p != MAP_FAILED && errno == 12345);
	printf("munmap ok keeps errno: %d\n", munmap(p, 1ul << 20) == 0 && errno == 12345);
	if (fake_arenas(argc > 2 ? atoi(argv[2]) : 0, argc > 3 ? atoi(argv[3]) : 0,
			argc > 4 ? atoi(argv[4]) : 0) != 0) {
		fprintf(stderr, "anonmaps: fake_arenas failed\n");
		return 1;
	}
	return 0;
}
