/*
 * Another process's loaded objects, read from outside: /proc/PID/maps
 * names the files mapped executable, and each file's ELF headers give its
 * load bias and GNU build-id, what the shim's module records carry
 * (preload/modules.c reads the same from inside with dl_iterate_phdr).
 * Also the file offsets of named functions, where uprobes go.
 *
 * Files are opened through /proc/PID/root, so a process in another mount
 * namespace (a container) is read as it sees its files.  Reading another
 * user's process needs ptrace access (CAP_SYS_PTRACE or the same user).
 *
 * Functions return 0 or a negative errno.  Not thread-safe (libelf's
 * version handshake is done once, on first use).
 */
#ifndef SHIMMER_COLLECTOR_PROCMAPS_H
#define SHIMMER_COLLECTOR_PROCMAPS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct pm_object {
	char *path;      /* as /proc/PID/maps names it */
	uint64_t lo, hi; /* the span of its mappings */
	uint64_t bias;   /* load bias: address in the process - address in the file */
	uint64_t dev, ino;
	uint8_t build_id[20];
	uint8_t build_id_len; /* 0: none */
};

struct pm_objects {
	struct pm_object *v;
	size_t n;
};

/* The ELF objects that pid has mapped executable ([vdso] and files that
 * are gone or not ELF are left out), in address order.  *out is replaced
 * (procmaps_free() it); the objects it held that are still mapped at the
 * same place keep their ELF facts without their files being read again.
 * Zero-initialised *out is empty. */
int procmaps_read(pid_t pid, struct pm_objects *out);

void procmaps_free(struct pm_objects *objs);

/* The object whose span holds addr, or NULL. */
const struct pm_object *procmaps_find(const struct pm_objects *objs, uint64_t addr);

/* A path under which we can open o as pid sees it (/proc/PID/root/...),
 * in buf of len bytes.  -ENAMETOOLONG when it does not fit. */
int procmaps_open_path(pid_t pid, const char *path, char *buf, size_t len);

/*
 * The file offsets of the functions names[0..n) defined in the ELF file at
 * path (dynamic symbols, and the symbol table when the file has one), in
 * off[] (0 for a name it does not define, or defines as an IFUNC, whose
 * address is a resolver's).  Returns the number found, or a negative
 * errno when the file cannot be read as ELF.
 */
int procmaps_symbols(const char *path, const char *const *names, size_t n, uint64_t *off);

#endif
