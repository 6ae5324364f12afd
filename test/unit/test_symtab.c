/*
 * symtab: the sorted symbol table must name every address as libdwfl's
 * own dwfl_module_addrinfo does, the independent truth here.  Every
 * address of this program's text is asked (its table has locals and
 * globals, a global alias and a weak one at one function, assembly labels
 * without a size, global and local), then a sample of the addresses of
 * each shared library this process has loaded (libc, libdw, libelf,
 * libsqlite3, ...: tables of .dynsym only), around each symbol's start
 * and end and in the gaps between symbols.  The table is built once at
 * bias 0 and asked for the file loaded at bias 0 and at a shared
 * library's usual bias, where absolute symbols (this program's
 * symtab_abs, libc's version names) fall elsewhere than the code.
 */
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
#include <elfutils/libdwfl.h>

#include "tools/symtab.h"

/* ---- symbols of every kind, in this program -------------------------------- */

__attribute__((noinline)) int symtab_real(int x);
__attribute__((noinline)) int symtab_real(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x * 3 + 1;
}
int symtab_alias(int x) __attribute__((alias("symtab_real")));
int symtab_weak(int x) __attribute__((weak, alias("symtab_real")));

__attribute__((noinline)) static int symtab_local(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x * 5 + 2;
}

/* Labels without .size, one global and one local, after a sized function. */
__asm__(".text\n"
	".globl symtab_sized_asm\n"
	".type symtab_sized_asm, @function\n"
	"symtab_sized_asm:\n"
	"\tnop\n\tnop\n\tret\n"
	".size symtab_sized_asm, 3\n"
	"\tnop\n\tnop\n"
	".globl symtab_label_global\n"
	"symtab_label_global:\n"
	"\tnop\n\tnop\n\tnop\n\tret\n"
	"symtab_label_local:\n"
	"\tnop\n\tnop\n\tret\n");

/* An absolute symbol whose value is an address of the text at bias 0. */
__asm__(".globl symtab_abs\n"
	".set symtab_abs, 0x1800\n");

/* ---- the comparison --------------------------------------------------------- */

static char *debuginfo_path;
static const Dwfl_Callbacks callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &debuginfo_path,
};

struct lib {
	char path[512];
};

static int libs_cb(struct dl_phdr_info *info, size_t size, void *ctx)
{
	struct lib *v = ctx;
	int i = 0;

	(void)size;
	if (!info->dlpi_name[0] || strstr(info->dlpi_name, "linux-vdso"))
		return 0;
	while (i < 15 && v[i].path[0])
		i++;
	if (i < 15)
		snprintf(v[i].path, sizeof(v[i].path), "%s", info->dlpi_name);
	return 0;
}

/* A library's load bias as it often is, far above the values of its symbols. */
#define BIAS 0x7f0d9fc00000ull

static Dwfl *open_file(const char *path, GElf_Addr bias, Dwfl_Module **dm)
{
	Dwfl *d = dwfl_begin(&callbacks);

	assert_non_null(d);
	dwfl_report_begin(d);
	*dm = dwfl_report_elf(d, path, path, -1, bias, false);
	dwfl_report_end(d, NULL, NULL);
	return d;
}

static long mismatches, bias_matters;

/* File address a of dm (at bias 0) and of dmb (at BIAS) against t. */
static void check(Dwfl_Module *dm, Dwfl_Module *dmb, const struct symtab *t, GElf_Addr a,
		  const char *path)
{
	const char *at0 = NULL;

	for (int b = 0; b < 2; b++) {
		GElf_Addr bias = b ? BIAS : 0;
		GElf_Off off;
		GElf_Sym sym;
		const char *want = dwfl_module_addrinfo(b ? dmb : dm, a + bias, &off, &sym, NULL,
							NULL, NULL);
		const char *got = symtab_lookup(t, a, bias);

		if (!b)
			at0 = want;
		else if ((at0 == NULL) != (want == NULL) || (at0 && strcmp(at0, want) != 0))
			bias_matters++;
		if ((want == NULL) != (got == NULL) || (want && strcmp(want, got) != 0)) {
			if (mismatches++ < 10)
				print_message("%s: 0x%llx at bias 0x%llx: libdwfl %s, symtab %s\n",
					      path, (unsigned long long)a, (unsigned long long)bias,
					      want ? want : "(none)", got ? got : "(none)");
		}
	}
}

/* The executable range of dm. */
static void text_range(Dwfl_Module *dm, GElf_Addr *lo, GElf_Addr *hi)
{
	GElf_Addr bias;
	Elf *elf = dwfl_module_getelf(dm, &bias);
	size_t n;

	assert_non_null(elf);
	assert_int_equal(elf_getphdrnum(elf, &n), 0);
	*lo = UINT64_MAX;
	*hi = 0;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
			if (ph.p_vaddr + bias < *lo)
				*lo = ph.p_vaddr + bias;
			if (ph.p_vaddr + ph.p_memsz + bias > *hi)
				*hi = ph.p_vaddr + ph.p_memsz + bias;
		}
	}
	assert_true(*lo < *hi);
}

static void test_symtab_names_every_address_of_this_program(void **state)
{
	char path[512];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
	Dwfl_Module *dm, *dmb;
	struct symtab *t;
	GElf_Addr lo, hi;
	Dwfl *d, *db;
	int seen = 0;

	(void)state;
	assert_true(n > 0);
	path[n] = 0;
	d = open_file(path, 0, &dm);
	db = open_file(path, BIAS, &dmb);
	assert_non_null(dm);
	assert_non_null(dmb);
	assert_int_equal(symtab_new(dm, &t), 0);
	assert_non_null(t);
	text_range(dm, &lo, &hi);
	mismatches = 0;
	for (GElf_Addr a = lo; a <= hi; a++) {
		const char *got = symtab_lookup(t, a, 0);

		check(dm, dmb, t, a, path);
		seen |= got && strcmp(got, "symtab_label_global") == 0 ? 1 : 0;
		seen |= got && strcmp(got, "symtab_label_local") == 0 ? 2 : 0;
		seen |= got && strncmp(got, "symtab_local", 12) == 0 ? 4 : 0;
	}
	assert_int_equal(mismatches, 0);
	/* The labels and the local were in the table, so the rules were used. */
	assert_int_equal(seen, 7);
	symtab_free(t);
	dwfl_end(d);
	dwfl_end(db);
	assert_int_equal(symtab_real(1) + symtab_local(1), 11);
}

static void test_symtab_names_the_addresses_of_the_loaded_libraries(void **state)
{
	struct lib libs[16] = { 0 };
	int checked = 0;

	(void)state;
	dl_iterate_phdr(libs_cb, libs);
	mismatches = 0;
	bias_matters = 0;
	for (int i = 0; libs[i].path[0]; i++) {
		Dwfl_Module *dm, *dmb;
		Dwfl *d = open_file(libs[i].path, 0, &dm), *db = open_file(libs[i].path, BIAS, &dmb);
		struct symtab *t;
		int nsym;
		GElf_Addr lo, hi, step;

		if (!dm || !dmb) {
			dwfl_end(d);
			dwfl_end(db);
			continue;
		}
		assert_int_equal(symtab_new(dm, &t), 0);
		nsym = dwfl_module_getsymtab(dm);
		/* Around the start and end of a sample of the symbols. */
		for (int k = 1; k < nsym; k += nsym / 300 + 1) {
			GElf_Sym sym;
			GElf_Addr v;

			if (!dwfl_module_getsym_info(dm, k, &sym, &v, NULL, NULL, NULL))
				continue;
			for (int dlt = -1; dlt <= 1; dlt++) {
				check(dm, dmb, t, v + dlt, libs[i].path);
				check(dm, dmb, t, v + sym.st_size + dlt, libs[i].path);
			}
			check(dm, dmb, t, v + sym.st_size / 2, libs[i].path);
		}
		/* And evenly over the text, gaps included. */
		text_range(dm, &lo, &hi);
		step = (hi - lo) / 500 + 1;
		for (GElf_Addr a = lo; a < hi; a += step)
			check(dm, dmb, t, a, libs[i].path);
		checked++;
		symtab_free(t);
		dwfl_end(d);
		dwfl_end(db);
	}
	assert_int_equal(mismatches, 0);
	assert_true(checked >= 3);
	/* libc's version names are absolute symbols at 0: libdwfl's answer
	 * there depends on the bias, and the table's follows it. */
	assert_true(bias_matters > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_symtab_names_every_address_of_this_program),
		cmocka_unit_test(test_symtab_names_the_addresses_of_the_loaded_libraries),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
