/*
 * symbolize: this test binary (built with -g) is the program symbolized.
 * Its own load bias, mapped range and build-id, found with
 * dl_iterate_phdr, go into a real store as a `modules` row; return
 * addresses taken with __builtin_return_address at lines this file marks
 * with __LINE__ must come back as the calling function, this file and that
 * line, inlined levels included.  A wrong build-id, a missing file and an
 * address outside every module must each say so instead of naming a
 * function.  The same file loaded by another process at another bias
 * names the same frames (they are shared per file), and a copy of this
 * program without DWARF (objcopy --strip-debug, binutils) names the
 * functions from its symbol table alone.
 */
#include <errno.h>
#include <limits.h>
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
#include <sqlite3.h>

#include "sqlexec.h"

#include "tools/symbolize.h"

/* ---- the code symbolized ------------------------------------------------- */

__attribute__((noinline)) static void *probe(void)
{
	void *ra = __builtin_return_address(0);

	__asm__ volatile("" : : "r"(ra) : "memory");
	return ra;
}

__attribute__((noinline)) static void *symbolize_target(int *line)
{
	void *ra = probe(); *line = __LINE__;

	__asm__ volatile("" : : : "memory");
	return ra;
}

static inline __attribute__((always_inline)) void *inlined_callee(int *line)
{
	void *ra = probe(); *line = __LINE__;

	return ra;
}

__attribute__((noinline)) static void *symbolize_outer(int *inner_line, int *outer_line)
{
	void *ra = inlined_callee(inner_line); *outer_line = __LINE__;

	__asm__ volatile("" : : : "memory");
	return ra;
}

/* ---- this program as a module ------------------------------------------- */

struct self {
	uint64_t bias, lo, hi;
	char build_id[128];
	char path[PATH_MAX];
};

static int phdr_cb(struct dl_phdr_info *info, size_t size, void *ctx)
{
	struct self *s = ctx;

	(void)size;
	s->bias = info->dlpi_addr;
	s->lo = UINT64_MAX;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD) {
			if (info->dlpi_addr + ph->p_vaddr < s->lo)
				s->lo = info->dlpi_addr + ph->p_vaddr;
			if (info->dlpi_addr + ph->p_vaddr + ph->p_memsz > s->hi)
				s->hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
		}
		if (ph->p_type == PT_NOTE) {
			const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr);
			const char *end = p + ph->p_memsz;

			while (p + sizeof(ElfW(Nhdr)) <= end) {
				const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
				const unsigned char *desc =
					(const unsigned char *)p + sizeof(*n) + ((n->n_namesz + 3) & ~3u);

				if (n->n_type == NT_GNU_BUILD_ID && n->n_descsz * 2 < sizeof(s->build_id))
					for (unsigned j = 0; j < n->n_descsz; j++)
						sprintf(s->build_id + 2 * j, "%02x", desc[j]);
				p = (const char *)desc + ((n->n_descsz + 3) & ~3u);
			}
		}
	}
	return 1; /* the first object is the program itself */
}

struct fixture {
	char path[64];
	char nodebug[80];
	sqlite3 *db;
	struct self self;
	struct symbolizer *sym;
};

/* Another process's load bias of this program: SHIFT above ours. */
#define SHIFT 0x10000000000ull

/* Process 1: this program as it is; 2: with another build-id; 3: its file
 * gone; 4: as 1, SHIFT higher; 5: its copy without DWARF; 6: the copy
 * loaded and unloaded, then this program at the same range. */
static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char cmd[2 * PATH_MAX + 64];
	ssize_t n;

	assert_non_null(f);
	dl_iterate_phdr(phdr_cb, &f->self);
	assert_true(f->self.build_id[0] != 0);
	n = readlink("/proc/self/exe", f->self.path, sizeof(f->self.path) - 1);
	assert_true(n > 0);
	strcpy(f->path, "/tmp/test_symbolize.XXXXXX");
	f->db = store_create(f->path);
	for (int p = 1; p <= 3; p++) {
		exec(f->db, "INSERT INTO strings VALUES (%d, 1, %Q, NULL)", p,
		     p == 3 ? "/nonexistent/shimmer-test" : f->self.path);
		exec(f->db, "INSERT INTO modules (proc_id, path_id, bias, lo, hi, build_id, loaded_ns)"
			 " VALUES (%d, 1, %lld, %lld, %lld, %Q, 0)", p, (long long)f->self.bias,
		     (long long)f->self.lo, (long long)f->self.hi,
		     p == 2 ? "00112233445566778899aabbccddeeff00112233" : f->self.build_id);
	}
	exec(f->db, "INSERT INTO strings VALUES (4, 7, %Q, NULL)", f->self.path);
	exec(f->db, "INSERT INTO modules (proc_id, path_id, bias, lo, hi, build_id, loaded_ns)"
		 " VALUES (4, 7, %lld, %lld, %lld, %Q, 0)", (long long)(f->self.bias + SHIFT),
	     (long long)(f->self.lo + SHIFT), (long long)(f->self.hi + SHIFT), f->self.build_id);
	snprintf(f->nodebug, sizeof(f->nodebug), "%s.nodebug", f->path);
	snprintf(cmd, sizeof(cmd), "objcopy --strip-debug '%s' '%s'", f->self.path, f->nodebug);
	assert_int_equal(system(cmd), 0);
	exec(f->db, "INSERT INTO strings VALUES (5, 1, %Q, NULL)", f->nodebug);
	exec(f->db, "INSERT INTO modules (proc_id, path_id, bias, lo, hi, build_id, loaded_ns)"
		 " VALUES (5, 1, %lld, %lld, %lld, %Q, 0)", (long long)f->self.bias,
	     (long long)f->self.lo, (long long)f->self.hi, f->self.build_id);
	exec(f->db, "INSERT INTO strings VALUES (6, 1, %Q, NULL)", f->nodebug);
	exec(f->db, "INSERT INTO strings VALUES (6, 2, %Q, NULL)", f->self.path);
	for (int m = 1; m <= 2; m++)
		exec(f->db, "INSERT INTO modules (proc_id, path_id, bias, lo, hi, build_id, loaded_ns,"
			 " unloaded_ns) VALUES (6, %d, %lld, %lld, %lld, %Q, %d, %s)", m,
		     (long long)f->self.bias, (long long)f->self.lo, (long long)f->self.hi,
		     f->self.build_id, m * 10, m == 1 ? "15" : "NULL");
	f->sym = symbolizer_new(f->db);
	assert_non_null(f->sym);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	symbolizer_free(f->sym);
	unlink(f->nodebug);
	store_remove(f->db, f->path);
	free(f);
	return 0;
}

static const char *base(const char *p)
{
	const char *s = p ? strrchr(p, '/') : NULL;

	return s ? s + 1 : p;
}

static void test_symbolize_return_address_names_the_call_line(void **state)
{
	struct fixture *f = *state;
	const struct sym_frame *fr;
	int line = 0, n;
	void *ra = symbolize_target(&line);

	n = symbolize_pc(f->sym, 1, (uint64_t)(uintptr_t)ra, 1, &fr);
	assert_int_equal(n, 1);
	assert_int_equal(fr[0].status, SYM_OK);
	assert_string_equal(fr[0].function, "symbolize_target");
	assert_string_equal(base(fr[0].file), "test_symbolize.c");
	assert_int_equal(fr[0].line, line);
	assert_string_equal(fr[0].module, f->self.path);
	assert_int_equal(fr[0].offset, (uint64_t)(uintptr_t)ra - f->self.bias);
	/* Cached: the same answer again. */
	n = symbolize_pc(f->sym, 1, (uint64_t)(uintptr_t)ra, 1, &fr);
	assert_int_equal(n, 1);
	assert_int_equal(fr[0].line, line);
}

static void test_symbolize_function_address(void **state)
{
	struct fixture *f = *state;
	const struct sym_frame *fr;
	int n = symbolize_pc(f->sym, 1, (uint64_t)(uintptr_t)&symbolize_outer, 0, &fr);

	assert_true(n >= 1);
	assert_string_equal(fr[n - 1].function, "symbolize_outer");
	assert_string_equal(base(fr[n - 1].file), "test_symbolize.c");
}

static void test_symbolize_inlined_frames(void **state)
{
	struct fixture *f = *state;
	const struct sym_frame *fr;
	int inner = 0, outer = 0, n;
	void *ra = symbolize_outer(&inner, &outer);

	n = symbolize_pc(f->sym, 1, (uint64_t)(uintptr_t)ra, 1, &fr);
	assert_int_equal(n, 2);
	assert_string_equal(fr[0].function, "inlined_callee");
	assert_int_equal(fr[0].line, inner);
	assert_string_equal(base(fr[0].file), "test_symbolize.c");
	assert_string_equal(fr[1].function, "symbolize_outer");
	assert_int_equal(fr[1].line, outer);
	assert_string_equal(base(fr[1].file), "test_symbolize.c");
}

static void test_symbolize_refuses_other_builds_and_gone_files(void **state)
{
	struct fixture *f = *state;
	const struct sym_frame *fr;
	int line, n;
	uint64_t ra = (uint64_t)(uintptr_t)symbolize_target(&line);

	n = symbolize_pc(f->sym, 2, ra, 1, &fr);
	assert_int_equal(n, 1);
	assert_int_equal(fr[0].status, SYM_BUILD_ID);
	assert_null(fr[0].function);
	assert_int_equal(fr[0].offset, ra - f->self.bias);
	n = symbolize_pc(f->sym, 3, ra, 1, &fr);
	assert_int_equal(n, 1);
	assert_int_equal(fr[0].status, SYM_FILE_GONE);
	assert_null(fr[0].function);
	assert_string_equal(fr[0].module, "/nonexistent/shimmer-test");
	/* Outside every module. */
	n = symbolize_pc(f->sym, 1, f->self.hi + 4096, 1, &fr);
	assert_int_equal(n, 1);
	assert_int_equal(fr[0].status, SYM_NO_MODULE);
	assert_null(fr[0].module);
	/* A process with no modules at all. */
	n = symbolize_pc(f->sym, 9, ra, 1, &fr);
	assert_int_equal(n, 1);
	assert_int_equal(fr[0].status, SYM_NO_MODULE);
}

static void test_symbolize_shares_a_file_between_processes_at_other_biases(void **state)
{
	struct fixture *f = *state;
	const struct sym_frame *fr;
	int line = 0, inner = 0, outer = 0, n;
	uint64_t ra = (uint64_t)(uintptr_t)symbolize_target(&line);
	uint64_t ra2 = (uint64_t)(uintptr_t)symbolize_outer(&inner, &outer);

	/* Process 1 reads the file first ... */
	n = symbolize_pc(f->sym, 1, ra, 1, &fr);
	assert_int_equal(n, 1);
	assert_string_equal(fr[0].function, "symbolize_target");
	n = symbolize_pc(f->sym, 1, ra2, 1, &fr);
	assert_int_equal(n, 2);
	/* ... which leaves process 2's other build refused ... */
	n = symbolize_pc(f->sym, 2, ra, 1, &fr);
	assert_int_equal(n, 1);
	assert_int_equal(fr[0].status, SYM_BUILD_ID);
	assert_null(fr[0].function);
	/* ... and gives process 4, SHIFT higher, the same frames. */
	n = symbolize_pc(f->sym, 4, ra + SHIFT, 1, &fr);
	assert_int_equal(n, 1);
	assert_int_equal(fr[0].status, SYM_OK);
	assert_string_equal(fr[0].function, "symbolize_target");
	assert_string_equal(base(fr[0].file), "test_symbolize.c");
	assert_int_equal(fr[0].line, line);
	assert_string_equal(fr[0].module, f->self.path);
	assert_int_equal(fr[0].offset, ra - f->self.bias);
	n = symbolize_pc(f->sym, 4, ra2 + SHIFT, 1, &fr);
	assert_int_equal(n, 2);
	assert_string_equal(fr[0].function, "inlined_callee");
	assert_int_equal(fr[0].line, inner);
	assert_string_equal(fr[1].function, "symbolize_outer");
	assert_int_equal(fr[1].line, outer);
	assert_int_equal(fr[1].offset, ra2 - f->self.bias);
	/* Process 1's address is in no module of process 4. */
	n = symbolize_pc(f->sym, 4, ra, 1, &fr);
	assert_int_equal(n, 1);
	assert_int_equal(fr[0].status, SYM_NO_MODULE);
}

static void test_symbolize_module_without_debug_info(void **state)
{
	struct fixture *f = *state;
	const struct sym_frame *fr;
	int line = 0, inner = 0, outer = 0, n;
	uint64_t ra = (uint64_t)(uintptr_t)symbolize_target(&line);
	uint64_t ra2 = (uint64_t)(uintptr_t)symbolize_outer(&inner, &outer);

	n = symbolize_pc(f->sym, 5, ra, 1, &fr);
	assert_int_equal(n, 1);
	assert_int_equal(fr[0].status, SYM_OK);
	assert_string_equal(fr[0].module, f->nodebug);
	/* The symbol table names the function; no line without a line table. */
	assert_string_equal(fr[0].function, "symbolize_target");
	assert_null(fr[0].file);
	assert_int_equal(fr[0].line, 0);
	assert_int_equal(fr[0].offset, ra - f->self.bias);
	/* No inlined levels without DWARF: the function the code is in. */
	n = symbolize_pc(f->sym, 5, ra2, 1, &fr);
	assert_int_equal(n, 1);
	assert_string_equal(fr[0].function, "symbolize_outer");
	assert_null(fr[0].file);
	/* The same file with DWARF, asked after, still has its lines. */
	n = symbolize_pc(f->sym, 1, ra, 1, &fr);
	assert_int_equal(n, 1);
	assert_int_equal(fr[0].line, line);
}

static void test_symbolize_reused_range_reads_the_live_module(void **state)
{
	struct fixture *f = *state;
	const struct sym_frame *fr;
	int line = 0, n;
	uint64_t ra = (uint64_t)(uintptr_t)symbolize_target(&line);

	/* The program, not its unloaded copy, and read although the copy
	 * held the same range first. */
	n = symbolize_pc(f->sym, 6, ra, 1, &fr);
	assert_int_equal(n, 1);
	assert_int_equal(fr[0].status, SYM_OK);
	assert_string_equal(fr[0].module, f->self.path);
	assert_string_equal(fr[0].function, "symbolize_target");
	assert_non_null(fr[0].file);
	assert_int_equal(fr[0].line, line);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_symbolize_return_address_names_the_call_line,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_symbolize_function_address, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symbolize_inlined_frames, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symbolize_refuses_other_builds_and_gone_files,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_symbolize_shares_a_file_between_processes_at_other_biases, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_symbolize_module_without_debug_info, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_symbolize_reused_range_reads_the_live_module,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
