/*
 * procmaps: this process read from outside (/proc/self/maps and the files)
 * against what it knows of itself from inside (dl_iterate_phdr, dlsym):
 * the same objects and load biases the shim's module records carry, the
 * build-ids readelf finds, and function offsets that land where the loader
 * put the code.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "collector/procmaps.h"

struct inside {
	const struct pm_objects *objs;
	int checked, with_id;
};

/* The build-id of a file as binutils' readelf reads it (an independent
 * reader of the same notes), in out; its length, 0 when it has none. */
static size_t readelf_build_id(const char *path, uint8_t *out)
{
	char cmd[4200], line[512];
	size_t n = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "readelf -n '%s' 2>/dev/null", path);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		char *hex = strstr(line, "Build ID: ");
		unsigned b;

		if (!hex || n)
			continue;
		for (hex += 10; n < 20 && sscanf(hex, "%2x", &b) == 1; hex += 2)
			out[n++] = (uint8_t)b;
	}
	pclose(p);
	return n;
}

static int compare(struct dl_phdr_info *info, size_t size, void *data)
{
	struct inside *in = data;
	const struct pm_object *o = NULL;
	uint8_t id[20];
	size_t n;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			o = procmaps_find(in->objs, info->dlpi_addr + ph->p_vaddr);
			break;
		}
	}
	/* The vdso has no file: not an object of procmaps'. */
	if (info->dlpi_name && strstr(info->dlpi_name, "vdso"))
		return 0;
	assert_non_null(o);
	/* maps names the file itself, the loader the name it searched */
	if (info->dlpi_name && info->dlpi_name[0]) {
		char *a = realpath(info->dlpi_name, NULL), *b = realpath(o->path, NULL);

		assert_non_null(a);
		assert_non_null(b);
		assert_string_equal(a, b);
		free(a);
		free(b);
	}
	assert_int_equal(o->bias, info->dlpi_addr);
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type != PT_LOAD)
			continue;
		/* every segment's file-backed pages lie in the span */
		assert_true(info->dlpi_addr + ph->p_vaddr >= o->lo);
		assert_true(info->dlpi_addr + ph->p_vaddr + ph->p_filesz <= o->hi + 4096);
	}
	n = readelf_build_id(o->path, id);
	assert_int_equal(o->build_id_len, n);
	assert_memory_equal(o->build_id, id, n);
	in->checked++;
	in->with_id += n > 0;
	return 0;
}

static void test_procmaps_matches_loader(void **state)
{
	struct pm_objects objs = { 0 };
	struct inside in = { &objs, 0, 0 };

	(void)state;
	assert_int_equal(procmaps_read(getpid(), &objs), 0);
	assert_true(objs.n >= 3); /* the test, libc, ld.so at least */
	for (size_t i = 1; i < objs.n; i++)
		assert_true(objs.v[i - 1].hi <= objs.v[i].lo);
	dl_iterate_phdr(compare, &in);
	assert_int_equal(in.checked, (int)objs.n);
	assert_true(in.with_id >= 2);
	/* a second read keeps the facts (taken from the first, not re-read) */
	assert_int_equal(procmaps_read(getpid(), &objs), 0);
	in.checked = in.with_id = 0;
	dl_iterate_phdr(compare, &in);
	assert_int_equal(in.checked, (int)objs.n);
	procmaps_free(&objs);
	assert_int_equal(objs.n, 0);
}

/* The symbol's file offset, mapped back through the object's segments,
 * is where dlsym finds the function. */
static void test_procmaps_symbols(void **state)
{
	static const char *const names[] = { "malloc", "free", "shimmer_no_such_fn", "memcpy" };
	struct pm_objects objs = { 0 };
	const struct pm_object *libc;
	uint64_t off[4];
	/* libc's own malloc: a sanitizer's would be found first by name */
	void *libc_handle = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	uintptr_t at = (uintptr_t)dlsym(libc_handle, "malloc");
	char path[4096];
	FILE *f;
	int found;

	(void)state;
	assert_non_null(libc_handle);
	assert_int_equal(procmaps_read(getpid(), &objs), 0);
	libc = procmaps_find(&objs, at);
	assert_non_null(libc);
	assert_int_equal(procmaps_open_path(getpid(), libc->path, path, sizeof(path)), 0);
	found = procmaps_symbols(path, names, 4, off);
	assert_int_equal(found, 2 + (off[3] != 0));
	assert_int_not_equal(off[0], 0);
	assert_int_not_equal(off[1], 0);
	assert_int_equal(off[2], 0);
	/* memcpy is an IFUNC in glibc: its symbol is the resolver, never a probe */
	assert_int_equal(off[3], 0);
	/* the mapping of libc that holds malloc's file offset holds malloc */
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)getpid());
	f = fopen(path, "r");
	assert_non_null(f);
	found = 0;
	while (fgets(path, sizeof(path), f)) {
		unsigned long long lo, hi, mo;

		if (sscanf(path, "%llx-%llx %*s %llx", &lo, &hi, &mo) == 3 &&
		    strstr(path, libc->path) && off[0] >= mo && off[0] < mo + (hi - lo)) {
			assert_int_equal(lo + (off[0] - mo), at);
			found = 1;
		}
	}
	fclose(f);
	assert_true(found);
	procmaps_free(&objs);
	dlclose(libc_handle);
}

static void test_procmaps_errors(void **state)
{
	static const char *const names[] = { "malloc" };
	struct pm_objects objs = { 0 };
	uint64_t off[1];
	char path[64];
	FILE *f;

	(void)state;
	assert_int_equal(procmaps_symbols("/nonexistent/libx.so", names, 1, off), -ENOENT);
	snprintf(path, sizeof(path), "/tmp/shimmer-procmaps-%d", (int)getpid());
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("not an ELF file\n", f);
	fclose(f);
	assert_int_equal(procmaps_symbols(path, names, 1, off), -ENOEXEC);
	unlink(path);
	/* a pid that does not exist */
	assert_int_equal(procmaps_read(0x3fffffff, &objs), -ENOENT);
	assert_null(procmaps_find(&objs, 0x1000));
	assert_int_equal(procmaps_open_path(1, "/x", path, 8), -ENAMETOOLONG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_procmaps_matches_loader),
		cmocka_unit_test(test_procmaps_symbols),
		cmocka_unit_test(test_procmaps_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
