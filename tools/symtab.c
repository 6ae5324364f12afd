/*
 * The sorted symbol table; see symtab.h.
 *
 * libdwfl's search (dwfl_module_addrsym.c, __libdwfl_addrsym) walks the
 * table in index order, globals first ([first_global, n), or [1, n) when
 * first_global is 0), then the locals [1, first_global) only when no sized
 * global covered the address and no sizeless global in its section sat
 * exactly on it.  Each pass keeps its entries here sorted by address, with
 * the running maximum of their ends, so that the entries covering an
 * address are a short range found by binary search.  Among them the
 * winner is chosen by replaying libdwfl's comparison in table order
 * (fold_sized).  Without a sized winner, libdwfl's running lower bound on
 * sizeless symbols (min_label) ends at the largest end of any entry below
 * the address, M, and the label it keeps is the last in table order that
 * starts exactly at M in the address's section (sizeless_at).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "map.h"
#include "symtab.h"

struct sym_rec {
	GElf_Addr value;  /* as libdwfl's search sees it (biased) */
	GElf_Xword size;
	const char *name;
	uint32_t order;   /* position in libdwfl's search: globals, then locals */
	GElf_Word shndx;  /* section, (GElf_Word)-1 when not allocated */
	int bind;         /* higher is preferred: global 3, weak 2, local 1 */
};

struct pass {
	struct sym_rec *v;  /* sorted by value, then order */
	GElf_Addr *maxend;  /* maxend[i]: the largest value + size in v[0..i] */
	size_t n, cap;
};

struct symtab {
	Dwfl_Module *dm;
	struct pass pass[2]; /* 0: the globals (everything when not split), 1: locals */
	struct pass fixed[2];/* the same for the few values libdwfl never biases */
	int split;           /* first_global > 1: the locals are a second pass */
};

static int binding_value(unsigned char info)
{
	switch (GELF_ST_BIND(info)) {
	case STB_GLOBAL: return 3;
	case STB_WEAK: return 2;
	case STB_LOCAL: return 1;
	}
	return 0;
}

/*
 * Sort v by value, then order: a stable radix sort by value, since the
 * entries of a pass arrive in table order, which is their order.  A
 * framework's library has hundreds of thousands of symbols, and qsort()'s
 * comparisons were most of a reader's time on a PyTorch store.  Passes
 * over a byte every value shares (the high ones) are skipped.  Returns 0
 * or -ENOMEM.
 */
static int sort_recs(struct sym_rec *v, size_t n)
{
	struct sym_rec *tmp, *src = v, *dst;

	if (n < 2)
		return 0;
	tmp = malloc(n * sizeof(*tmp));
	if (!tmp)
		return -ENOMEM;
	dst = tmp;
	for (unsigned shift = 0; shift < 64; shift += 8) {
		size_t count[256] = { 0 }, pos = 0;

		for (size_t i = 0; i < n; i++)
			count[(src[i].value >> shift) & 0xff]++;
		if (count[(src[0].value >> shift) & 0xff] == n)
			continue;
		for (int b = 0; b < 256; b++) {
			size_t c = count[b];

			count[b] = pos;
			pos += c;
		}
		for (size_t i = 0; i < n; i++)
			dst[count[(src[i].value >> shift) & 0xff]++] = src[i];
		dst = src;
		src = src == v ? tmp : v;
	}
	if (src != v)
		memcpy(v, src, n * sizeof(*v));
	free(tmp);
	return 0;
}

void symtab_free(struct symtab *t)
{
	if (!t)
		return;
	for (int p = 0; p < 2; p++) {
		free(t->pass[p].v);
		free(t->pass[p].maxend);
		free(t->fixed[p].v);
	}
	free(t);
}

int symtab_new(Dwfl_Module *dm, struct symtab **out)
{
	int n = dwfl_module_getsymtab(dm);
	int fg = n < 0 ? -1 : dwfl_module_getsymtab_first_global(dm);
	struct symtab *t;

	*out = NULL;
	if (n < 0 || fg < 0)
		return 0; /* dwfl_module_addrinfo finds nothing either */
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->dm = dm;
	t->split = fg > 1;
	for (int i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr value;
		GElf_Word shndx;
		const char *name = dwfl_module_getsym_info(dm, i, &sym, &value, &shndx, NULL, NULL);
		int type = GELF_ST_TYPE(sym.st_info);
		/* Absolute and common symbols and those of sections not loaded
		 * keep their st_value at any load bias (__libdwfl_getsym). */
		int fixed = sym.st_shndx == SHN_ABS || sym.st_shndx == SHN_COMMON ||
			    shndx == (GElf_Word)-1;
		struct pass *p = fixed ? &t->fixed[i >= fg ? 0 : 1] : &t->pass[i >= fg ? 0 : 1];

		/* The entries libdwfl's search ever considers. */
		if (!name || !name[0] || sym.st_shndx == SHN_UNDEF || type == STT_SECTION ||
		    type == STT_FILE || type == STT_TLS)
			continue;
		if (array_grow(&p->v, &p->cap, p->n, sizeof(*p->v)) < 0) {
			symtab_free(t);
			return -ENOMEM;
		}
		p->v[p->n++] = (struct sym_rec){
			.value = value,
			.size = sym.st_size,
			.name = name,
			.order = (uint32_t)(i >= fg ? i : n + i),
			.shndx = shndx,
			.bind = binding_value(sym.st_info),
		};
	}
	for (int k = 0; k < 2; k++) {
		struct pass *p = &t->pass[k];

		if (!p->n)
			continue;
		p->maxend = malloc(p->n * sizeof(*p->maxend));
		if (!p->maxend || sort_recs(p->v, p->n) < 0) {
			symtab_free(t);
			return -ENOMEM;
		}
		for (size_t i = 0; i < p->n; i++) {
			GElf_Addr end = p->v[i].value + p->v[i].size;

			p->maxend[i] = i && p->maxend[i - 1] > end ? p->maxend[i - 1] : end;
		}
	}
	*out = t;
	return 0;
}

/* The number of entries of p at or below addr. */
static size_t upper(const struct pass *p, GElf_Addr addr)
{
	size_t l = 0, u = p->n;

	while (l < u) {
		size_t m = l + (u - l) / 2;

		if (p->v[m].value <= addr)
			l = m + 1;
		else
			u = m;
	}
	return l;
}

/* The first entry whose running end passes addr: none before it covers addr. */
static size_t first_covering(const struct pass *p, GElf_Addr addr, size_t ub)
{
	size_t l = 0, u = ub;

	while (l < u) {
		size_t m = l + (u - l) / 2;

		if (p->maxend[m] > addr)
			u = m;
		else
			l = m + 1;
	}
	return l;
}

/*
 * libdwfl's choice among the sized entries of pass k covering the
 * address, offered to it in table order (try_sym_value): a later start
 * wins, or a stronger binding; at the same start, a shorter one at no
 * weaker binding, or one no longer at a stronger binding.  Values compare
 * at the module's bias: addr is a file address, a = addr + bias the one
 * libdwfl sees; the fixed entries are at their own value.  The candidates
 * are few; each step takes the next in table order.
 */
static const struct sym_rec *fold_sized(const struct symtab *t, int k, GElf_Addr addr,
					GElf_Addr bias)
{
	const struct pass *p = &t->pass[k], *f = &t->fixed[k];
	GElf_Addr a = addr + bias, bestv = 0;
	size_t ub = upper(p, addr), lo = first_covering(p, addr, ub);
	const struct sym_rec *best = NULL;
	uint32_t prev = 0;
	int started = 0;

	for (;;) {
		const struct sym_rec *next = NULL;
		GElf_Addr nextv = 0;

		for (size_t j = lo; j < ub; j++) {
			const struct sym_rec *r = &p->v[j];

			if (r->size && addr - r->value < r->size && (!started || r->order > prev) &&
			    (!next || r->order < next->order)) {
				next = r;
				nextv = r->value + bias;
			}
		}
		for (size_t j = 0; j < f->n; j++) {
			const struct sym_rec *r = &f->v[j];

			if (r->size && r->value <= a && a - r->value < r->size &&
			    (!started || r->order > prev) && (!next || r->order < next->order)) {
				next = r;
				nextv = r->value;
			}
		}
		if (!next)
			return best;
		prev = next->order;
		started = 1;
		if (!best || bestv < nextv || best->bind < next->bind ||
		    (bestv == nextv &&
		     ((best->size > next->size && best->bind <= next->bind) ||
		      (best->size >= next->size && best->bind < next->bind)))) {
			best = next;
			bestv = nextv;
		}
	}
}

/* The section holding a module address, as libdwfl's same_section asks. */
static size_t section_of(Dwfl_Module *dm, GElf_Addr a)
{
	Dwarf_Addr bias;
	Elf_Scn *scn = dwfl_module_address_section(dm, &a, &bias);

	return scn ? elf_ndxscn(scn) : SHN_UNDEF;
}

/* The largest end, at the bias, of the entries of pass k at or below the
 * address: libdwfl's min_label once the pass is over. */
static GElf_Addr max_end_below(const struct symtab *t, int k, GElf_Addr addr, GElf_Addr bias)
{
	const struct pass *p = &t->pass[k], *f = &t->fixed[k];
	size_t ub = upper(p, addr);
	GElf_Addr m = ub ? p->maxend[ub - 1] + bias : 0;

	for (size_t j = 0; j < f->n; j++)
		if (f->v[j].value <= addr + bias && f->v[j].value + f->v[j].size > m)
			m = f->v[j].value + f->v[j].size;
	return m;
}

/* The last entry of pass k in table order that is sizeless, starts at m
 * (at the bias) and lies in the address's section; NULL if none. */
static const struct sym_rec *sizeless_at(const struct symtab *t, int k, GElf_Addr m,
					 GElf_Addr addr, GElf_Addr bias, size_t *addr_sec,
					 int *known)
{
	const struct pass *p = &t->pass[k], *f = &t->fixed[k];
	const struct sym_rec *best = NULL;

	for (size_t j = 0; j < f->n; j++) {
		const struct sym_rec *r = &f->v[j];

		/* Their sections are special: only an exact match counts. */
		if (r->size == 0 && r->value == m && m == addr + bias &&
		    (!best || r->order > best->order))
			best = r;
	}
	if (m < bias)
		return best;
	for (size_t i = upper(p, m - bias); i-- > 0 && p->v[i].value == m - bias;) {
		const struct sym_rec *r = &p->v[i];
		int same;

		if (r->size != 0 || (best && best->order > r->order))
			continue;
		if (r->shndx >= SHN_LORESERVE) {
			same = r->value == addr;
		} else {
			if (!*known) {
				*addr_sec = section_of(t->dm, addr);
				*known = 1;
			}
			same = *addr_sec == section_of(t->dm, r->value);
		}
		if (same)
			best = r;
	}
	return best;
}

const char *symtab_lookup(const struct symtab *t, GElf_Addr addr, GElf_Addr bias)
{
	const struct sym_rec *r, *l;
	GElf_Addr m0, m;
	size_t addr_sec = SHN_UNDEF;
	int known = 0;

	if (!t)
		return NULL;
	r = fold_sized(t, 0, addr, bias);
	if (r)
		return r->name;
	m0 = max_end_below(t, 0, addr, bias);
	r = sizeless_at(t, 0, m0, addr, bias, &addr_sec, &known);
	if (!t->split || (r && m0 == addr + bias))
		return r ? r->name : NULL;
	/* The locals' pass: a sized one covering addr, else the last label. */
	l = fold_sized(t, 1, addr, bias);
	if (l)
		return l->name;
	m = max_end_below(t, 1, addr, bias);
	if (m < m0)
		return r ? r->name : NULL;
	l = sizeless_at(t, 1, m, addr, bias, &addr_sec, &known);
	if (m > m0)
		return l ? l->name : NULL;
	return l ? l->name : r ? r->name : NULL;
}
