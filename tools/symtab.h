/*
 * A module's symbol table, sorted once, answering what
 * dwfl_module_addrinfo answers.
 *
 * libdwfl finds the symbol at an address by reading every entry of the
 * table (elfutils 0.188: two gelf calls per symbol), so a library with a
 * quarter of a million symbols (libtorch_cpu, libtorch_cuda) costs
 * milliseconds per address, and a store's few thousand addresses tens of
 * seconds.  This reads the table once through dwfl_module_getsym_info, the
 * same values libdwfl's own search sees, sorts it by address, and picks
 * among the symbols that can matter at an address by libdwfl's own rules:
 * globals first and locals only when no global fits, a sized symbol
 * covering the address, the closest start, then the stronger binding, then
 * the shorter size at the same binding, else the first in table order; and
 * without one, a sizeless symbol (an assembly label) at or past the end of
 * every symbol below the address, in the address's section.  The answers
 * are those of dwfl_module_addrinfo for x86-64 ELF files (no function
 * descriptors to resolve); test_symtab checks it against libdwfl on every
 * address of several system libraries.
 *
 * Names point into libdwfl's data: valid while the module's Dwfl lives.
 */
#ifndef SHIMMER_TOOLS_SYMTAB_H
#define SHIMMER_TOOLS_SYMTAB_H

#include <elfutils/libdwfl.h>

struct symtab;

/*
 * Index the symbol table of dm.  *out is NULL (and 0 returned) when the
 * module has none; -ENOMEM otherwise failed.
 */
int symtab_new(Dwfl_Module *dm, struct symtab **out);

void symtab_free(struct symtab *t);

/*
 * The name dwfl_module_addrinfo returns for file address addr of the
 * module loaded at bias (the module reported at that bias, the address
 * addr + bias), or NULL.  t is built once at bias 0: only absolute and
 * common symbols, and those of sections not loaded, keep their value at
 * every bias, and they are compared as libdwfl compares them.
 */
const char *symtab_lookup(const struct symtab *t, GElf_Addr addr, GElf_Addr bias);

#endif /* SHIMMER_TOOLS_SYMTAB_H */
