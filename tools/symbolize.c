/*
 * Symbolization with libdwfl; see symbolize.h.
 *
 * Per process, on first use: read its modules (ordered by load time).
 * Per file, on the first address in any module of it: check it exists,
 * report it alone to a Dwfl of its own at bias 0 (file addresses, so that
 * processes that mapped it at other biases share it), read its build-id;
 * each module compares that with the one it recorded.  Our own sorted
 * module table, not libdwfl, decides which module holds a pc, so that a
 * module we refused (gone, other build-id) stays refused.  When an address
 * range was reused (dlclose, then dlopen of something else), the module
 * still loaded at the end, else the latest loaded, wins.
 *
 * Inlined frames: the chain of scopes holding the address, from the unit
 * down (the first child whose ranges hold it at each level, as
 * dwarf_getscopes finds it), ends at the innermost function scope; each
 * DW_TAG_inlined_subroutine on it is a frame whose caller is at its
 * DW_AT_call_file:DW_AT_call_line, up to the DW_TAG_subprogram.  The
 * innermost frame's line comes from the line table.  Without DWARF frames
 * the symbol table names the function (symtab.h, at the module's bias).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

#include "map.h"
#include "store.h"
#include "symbolize.h"
#include "symtab.h"

/* From the C++ runtime (libstdc++), declared here to keep this file C. */
char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

/* One ELF file, whichever processes mapped it and wherever. */
struct sym_file {
	char *path;
	Dwfl *dwfl;              /* the file alone, at bias 0: file addresses */
	Dwfl_Module *dm;         /* NULL unless status is SYM_OK */
	char *build_id;          /* hex, NULL when the file has none */
	enum sym_status status;  /* SYM_OK, SYM_FILE_GONE or SYM_UNREADABLE */
	struct symtab *symtab;   /* built on the first address without DWARF */
	int symtab_done;
};

struct sym_module {
	uint64_t lo, hi, bias;
	char *path;
	char *build_id;  /* recorded; NULL if none */
	int64_t order;   /* load order; later wins on overlap */
	int live;        /* never unloaded */
	int has_path;
	int checked;     /* status and file known */
	size_t file;     /* index into files, once checked and not gone */
	enum sym_status status;
};

struct sym_proc {
	int64_t proc_id;
	struct sym_module *mods;
	size_t nmods;
};

struct cache_item {
	struct map_key key;
	size_t first; /* index into frames */
	size_t n;
};

/*
 * What a file says at a file address, whichever process asks: the DWARF
 * frames (in s->frames), or none and the line table's line, for the
 * symbol table to name at the asking module's bias.
 */
struct file_item {
	struct map_key key;
	size_t first, n;       /* the frames; n is 0 without DWARF frames */
	const char *src;       /* the line table's file (libdw's), or NULL */
	int line;
	int no_module;         /* the address lies outside the file's segments */
};

/* The address ranges of a unit's top-level DIEs, sorted, for chain_walk. */
struct unit_range {
	Dwarf_Addr lo, hi;
	size_t child;       /* index into kids */
};

struct unit_top {
	Dwarf_Die *kids;    /* the unit's children, in order */
	size_t nkids;
	struct unit_range *r;
	Dwarf_Addr *maxend; /* maxend[i]: the largest hi in r[0..i] */
	size_t nr;
	size_t first_bad;   /* the first child libdw's walk stops at (an imported
			     * unit, an error); SIZE_MAX if none */
};

struct unit_item {
	struct map_key key;
	size_t top;
};

struct symbolizer {
	sqlite3 *db;
	struct sym_proc *procs;
	size_t nprocs, procs_cap;
	struct sym_file *files;
	size_t nfiles, files_cap;
	struct map cache;         /* (proc, pc, is_return) */
	struct map file_cache;    /* (file, file address, is_return) -> file_item */
	struct map units;         /* (DIE address of a unit) -> index into tops */
	struct unit_top **tops;
	size_t ntops, tops_cap;
	struct sym_frame *frames; /* owns function and file */
	size_t nframes, frames_cap;
	struct sym_frame *out;    /* handed out: a copy safe from frames' growth */
	size_t out_cap;
};

static char *debuginfo_path;

static const Dwfl_Callbacks offline_callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &debuginfo_path,
};

const char *sym_status_name(enum sym_status st)
{
	switch (st) {
	case SYM_OK: return "ok";
	case SYM_NO_MODULE: return "no module";
	case SYM_FILE_GONE: return "file gone";
	case SYM_BUILD_ID: return "build-id differs";
	case SYM_UNREADABLE: return "unreadable";
	case SYM_UNNAMED: return "name not recorded";
	}
	return "?";
}

struct symbolizer *symbolizer_new(sqlite3 *db)
{
	struct symbolizer *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->db = db;
	s->cache.item_size = sizeof(struct cache_item);
	s->file_cache.item_size = sizeof(struct file_item);
	s->units.item_size = sizeof(struct unit_item);
	return s;
}

void symbolizer_free(struct symbolizer *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nprocs; i++) {
		struct sym_proc *p = &s->procs[i];

		for (size_t j = 0; j < p->nmods; j++) {
			free(p->mods[j].path);
			free(p->mods[j].build_id);
		}
		free(p->mods);
	}
	for (size_t i = 0; i < s->nfiles; i++) {
		struct sym_file *f = &s->files[i];

		symtab_free(f->symtab);
		if (f->dwfl)
			dwfl_end(f->dwfl);
		free(f->path);
		free(f->build_id);
	}
	for (size_t i = 0; i < s->nframes; i++) {
		free((char *)s->frames[i].function);
		free((char *)s->frames[i].file);
	}
	for (size_t i = 0; i < s->ntops; i++) {
		free(s->tops[i]->kids);
		free(s->tops[i]->r);
		free(s->tops[i]->maxend);
		free(s->tops[i]);
	}
	free(s->tops);
	map_free(&s->units);
	free(s->procs);
	free(s->files);
	free(s->frames);
	free(s->out);
	map_free(&s->cache);
	map_free(&s->file_cache);
	free(s);
}

static char *hex_dup(const unsigned char *bits, int len)
{
	char *buf = malloc((size_t)len * 2 + 1);

	if (!buf)
		return NULL;
	for (int i = 0; i < len; i++)
		sprintf(buf + 2 * i, "%02x", bits[i]);
	buf[2 * len] = 0;
	return buf;
}

/* Load f->path alone into its own Dwfl and read its build-id. */
static int file_open(struct sym_file *f)
{
	const unsigned char *bits;
	GElf_Addr vaddr, bias;
	int len;

	if (access(f->path, R_OK) < 0) {
		f->status = SYM_FILE_GONE;
		return 0;
	}
	f->status = SYM_UNREADABLE;
	f->dwfl = dwfl_begin(&offline_callbacks);
	if (!f->dwfl)
		return -ENOMEM;
	dwfl_report_begin(f->dwfl);
	/* Fails for a file that is not ELF. */
	f->dm = dwfl_report_elf(f->dwfl, f->path, f->path, -1, 0, false);
	dwfl_report_end(f->dwfl, NULL, NULL);
	if (!f->dm || !dwfl_module_getelf(f->dm, &bias)) {
		f->dm = NULL;
		return 0;
	}
	f->status = SYM_OK;
	len = dwfl_module_build_id(f->dm, &bits, &vaddr);
	if (len > 0 && !(f->build_id = hex_dup(bits, len)))
		return -ENOMEM;
	return 0;
}

/* The file at path, opened on first use; *out indexes s->files. */
static int file_get(struct symbolizer *s, const char *path, size_t *out)
{
	struct sym_file *f;
	int err;

	for (size_t i = 0; i < s->nfiles; i++)
		if (strcmp(s->files[i].path, path) == 0) {
			*out = i;
			return 0;
		}
	err = array_grow(&s->files, &s->files_cap, s->nfiles, sizeof(*s->files));
	if (err)
		return err;
	f = &s->files[s->nfiles];
	*f = (struct sym_file){ .path = strdup(path) };
	if (!f->path)
		return -ENOMEM;
	*out = s->nfiles++;
	return file_open(f);
}

/*
 * A module's state, on the first address in it: its file gone, unreadable,
 * of another build than the one recorded, or fit to read.
 */
static int module_check(struct symbolizer *s, struct sym_module *m)
{
	const struct sym_file *f;
	int err;

	if (m->checked)
		return 0;
	if (!m->has_path) {
		m->status = SYM_UNNAMED;
		m->checked = 1;
		return 0;
	}
	err = file_get(s, m->path, &m->file);
	if (err)
		return err;
	f = &s->files[m->file];
	m->status = f->status;
	if (f->status == SYM_OK && m->build_id)
		/* A recorded build-id the file lacks or differs from. */
		m->status = f->build_id && strcasecmp(f->build_id, m->build_id) == 0 ?
			    SYM_OK : SYM_BUILD_ID;
	m->checked = 1;
	return 0;
}

static int cmp_module(const void *x, const void *y)
{
	const struct sym_module *a = x, *b = y;

	if (a->lo != b->lo)
		return a->lo < b->lo ? -1 : 1;
	return a->order < b->order ? -1 : a->order > b->order;
}

static const char modules_sql[] =
	"SELECT s.text, m.bias, m.lo, m.hi, m.build_id, m.unloaded_ns IS NULL"
	" FROM modules m LEFT JOIN strings s ON s.proc_id = m.proc_id AND s.id = m.path_id"
	" WHERE m.proc_id = ? ORDER BY m.loaded_ns, m.id";

/* A process's modules, sorted by address; no file is opened yet. */
static int load_proc(struct symbolizer *s, struct sym_proc *p)
{
	sqlite3_stmt *st = NULL;
	size_t cap = 0;
	int err, r;

	err = store_prepare(s->db, modules_sql, &st);
	if (err)
		return err;
	sqlite3_bind_int64(st, 1, p->proc_id);
	while ((r = store_step(s->db, st)) > 0) {
		const char *path = (const char *)sqlite3_column_text(st, 0);
		const char *bid = (const char *)sqlite3_column_text(st, 4);
		struct sym_module *m;

		err = array_grow(&p->mods, &cap, p->nmods, sizeof(*p->mods));
		if (err)
			goto out;
		m = &p->mods[p->nmods++];
		*m = (struct sym_module){
			.bias = (uint64_t)sqlite3_column_int64(st, 1),
			.lo = (uint64_t)sqlite3_column_int64(st, 2),
			.hi = (uint64_t)sqlite3_column_int64(st, 3),
			.order = (int64_t)p->nmods,
			.live = sqlite3_column_int(st, 5),
			.has_path = path != NULL,
			.path = strdup(path ? path : "?"),
			.build_id = bid ? strdup(bid) : NULL,
		};
		if (!m->path || (bid && !m->build_id)) {
			err = -ENOMEM;
			goto out;
		}
	}
	err = r;
	if (p->nmods)
		qsort(p->mods, p->nmods, sizeof(*p->mods), cmp_module);
out:
	sqlite3_finalize(st);
	return err;
}

static int get_proc(struct symbolizer *s, int64_t proc_id, struct sym_proc **out)
{
	struct sym_proc *p;
	int err;

	for (size_t i = 0; i < s->nprocs; i++)
		if (s->procs[i].proc_id == proc_id) {
			*out = &s->procs[i];
			return 0;
		}
	err = array_grow(&s->procs, &s->procs_cap, s->nprocs, sizeof(*s->procs));
	if (err)
		return err;
	p = &s->procs[s->nprocs++];
	*p = (struct sym_proc){ .proc_id = proc_id };
	*out = p;
	return load_proc(s, p);
}

/* The module holding pc: a live one over an unloaded one, then the latest. */
static struct sym_module *find_module(const struct sym_proc *p, uint64_t pc)
{
	struct sym_module *best = NULL;

	for (size_t i = 0; i < p->nmods && p->mods[i].lo <= pc; i++) {
		struct sym_module *m = &p->mods[i];

		if (pc >= m->hi)
			continue;
		if (!best || (m->live && !best->live) ||
		    (m->live == best->live && m->order > best->order))
			best = m;
	}
	return best;
}

static char *demangle_dup(const char *name)
{
	char *d;
	int st;

	if (!name)
		return NULL;
	if (name[0] == '_' && name[1] == 'Z') {
		d = __cxa_demangle(name, NULL, NULL, &st);
		if (d && st == 0)
			return d;
		free(d);
	}
	return strdup(name);
}

static const char *die_name(Dwarf_Die *die)
{
	Dwarf_Attribute a;

	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &a) ||
	    dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a))
		return dwarf_formstring(&a);
	if (dwarf_attr_integrate(die, DW_AT_name, &a))
		return dwarf_formstring(&a);
	return NULL;
}

static int add_frame(struct symbolizer *s, const struct sym_module *m, uint64_t offset,
		     const char *fn_raw, const char *file, int line)
{
	struct sym_frame *f;
	int err = array_grow(&s->frames, &s->frames_cap, s->nframes, sizeof(*s->frames));

	if (err)
		return err;
	f = &s->frames[s->nframes];
	*f = (struct sym_frame){
		.line = line,
		.module = m ? m->path : NULL,
		.offset = offset,
		.status = m ? m->status : SYM_NO_MODULE,
	};
	f->function = fn_raw ? demangle_dup(fn_raw) : NULL;
	f->file = file ? strdup(file) : NULL;
	if ((fn_raw && !f->function) || (file && !f->file)) {
		free((char *)f->function);
		free((char *)f->file);
		return -ENOMEM;
	}
	s->nframes++;
	return 0;
}

/*
 * The chain of scopes from the innermost function at a to its compile
 * unit, innermost first, as libdw's own calls give it: dwarf_getscopes
 * finds the scopes at a, and dwarf_getscopes_die the chain of the
 * innermost function-like one among them (its concrete DIE), through the
 * functions it was inlined into.  Each walks the unit's tree from its root,
 * the second one up to the DIE: a large unit (an interpreter's main loop,
 * inlined into itself) costs milliseconds per address.  *chain is set
 * (to be freed) when the count returned is positive.
 */
static int chain_libdw(Dwarf_Die *cu, Dwarf_Addr a, Dwarf_Die **chain)
{
	Dwarf_Die *scopes = NULL;
	int n = dwarf_getscopes(cu, a, &scopes);

	for (int i = 0; i < n; i++) {
		int tag = dwarf_tag(&scopes[i]);

		if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) {
			Dwarf_Die fn = scopes[i];

			free(scopes);
			scopes = NULL;
			n = dwarf_getscopes_die(&fn, &scopes);
			break;
		}
	}
	if (n > 0)
		*chain = scopes;
	else
		free(scopes);
	return n;
}

/* The DIEs libdw's scope walks descend into (libdw_visit_scopes.c). */
static int may_have_scopes(Dwarf_Die *die)
{
	switch (dwarf_tag(die)) {
	case DW_TAG_compile_unit: case DW_TAG_module: case DW_TAG_lexical_block:
	case DW_TAG_with_stmt: case DW_TAG_catch_block: case DW_TAG_try_block:
	case DW_TAG_entry_point: case DW_TAG_inlined_subroutine: case DW_TAG_subprogram:
	case DW_TAG_namespace: case DW_TAG_class_type: case DW_TAG_structure_type:
		return 1;
	}
	return 0;
}

#define WALK_FALLBACK (-2) /* a case left to libdw's own calls */

/*
 * Whether libdw's walk of the unit cu (dwarf_getscopes looking for the
 * abstract origin of an inlined call) reaches target, a DIE of the same
 * unit: down from the root, into the child whose span of offsets holds
 * target's, as long as the walk descends there.  1 yes, 0 no.
 */
static int reaches(Dwarf_Die *cu, Dwarf_Die *target)
{
	Dwarf_Off want = dwarf_dieoffset(target);
	Dwarf_Die die = *cu, child, next;
	int root = 1;

	for (;;) {
		if ((!root && !may_have_scopes(&die)) || dwarf_child(&die, &child) != 0)
			return 0;
		root = 0;
		for (;;) {
			int r;

			if (dwarf_tag(&child) == DW_TAG_imported_unit)
				return WALK_FALLBACK;
			if (dwarf_dieoffset(&child) == want)
				return 1;
			r = dwarf_siblingof(&child, &next);
			if (r < 0)
				return WALK_FALLBACK;
			if (r > 0 || dwarf_dieoffset(&next) > want)
				break; /* target lies in child's subtree, if anywhere */
			child = next;
		}
		if (dwarf_dieoffset(&child) > want)
			return 0;
		die = child;
	}
}

static int cmp_range(const void *x, const void *y)
{
	const struct unit_range *a = x, *b = y;

	if (a->lo != b->lo)
		return a->lo < b->lo ? -1 : 1;
	return a->child < b->child ? -1 : a->child > b->child;
}

/* Read the children of the unit cu and their ranges, once. */
static int unit_top_build(Dwarf_Die *cu, struct unit_top *t)
{
	Dwarf_Die child;
	size_t kcap = 0, rcap = 0;
	int r;

	t->first_bad = SIZE_MAX;
	r = dwarf_child(cu, &child);
	if (r < 0)
		t->first_bad = 0;
	while (r == 0) {
		Dwarf_Addr base, lo, hi;
		ptrdiff_t off = 0;

		if (array_grow(&t->kids, &kcap, t->nkids, sizeof(*t->kids)) < 0)
			return -ENOMEM;
		t->kids[t->nkids] = child;
		if (dwarf_tag(&child) == DW_TAG_imported_unit)
			off = -1;
		while (off >= 0 && (off = dwarf_ranges(&child, off, &base, &lo, &hi)) > 0) {
			if (array_grow(&t->r, &rcap, t->nr, sizeof(*t->r)) < 0)
				return -ENOMEM;
			t->r[t->nr++] = (struct unit_range){ lo, hi, t->nkids };
		}
		if (off < 0) {
			t->first_bad = t->nkids;
			break;
		}
		t->nkids++;
		r = dwarf_siblingof(&child, &child);
		if (r < 0)
			t->first_bad = t->nkids;
	}
	array_sort(t->r, t->nr, sizeof(*t->r), cmp_range);
	if (t->nr && !(t->maxend = malloc(t->nr * sizeof(*t->maxend))))
		return -ENOMEM;
	for (size_t i = 0; i < t->nr; i++)
		t->maxend[i] = i && t->maxend[i - 1] > t->r[i].hi ? t->maxend[i - 1] : t->r[i].hi;
	return 0;
}

static int unit_top_get(struct symbolizer *s, Dwarf_Die *cu, struct unit_top **out)
{
	struct map_key k = { (int64_t)(uintptr_t)cu->addr, 0, 0 };
	struct unit_item *it = map_find(&s->units, &k);
	struct unit_top *t;
	int err;

	if (it) {
		*out = s->tops[it->top];
		return 0;
	}
	err = array_grow(&s->tops, &s->tops_cap, s->ntops, sizeof(*s->tops));
	if (err)
		return err;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	s->tops[s->ntops++] = t;
	err = unit_top_build(cu, t);
	if (err)
		return err;
	it = map_get(&s->units, &k);
	if (!it)
		return -ENOMEM;
	it->top = s->ntops - 1;
	*out = t;
	return 0;
}

/*
 * The first child of the unit (in order) whose ranges hold a, as
 * dwarf_haspc asked of each in turn finds it: 0 and *child set, 1 none,
 * WALK_FALLBACK when libdw's walk would stop at a child before it.
 */
static int unit_top_find(const struct unit_top *t, Dwarf_Addr a, Dwarf_Die *child)
{
	size_t l = 0, u = t->nr, ub, best = SIZE_MAX;

	while (l < u) { /* ub: the ranges starting at or below a */
		size_t m = l + (u - l) / 2;

		if (t->r[m].lo <= a)
			l = m + 1;
		else
			u = m;
	}
	ub = l;
	l = 0;
	u = ub;
	while (l < u) { /* the first range whose running end passes a */
		size_t m = l + (u - l) / 2;

		if (t->maxend[m] > a)
			u = m;
		else
			l = m + 1;
	}
	for (size_t i = l; i < ub; i++)
		if (a < t->r[i].hi && t->r[i].child < best)
			best = t->r[i].child;
	if (best == SIZE_MAX)
		return t->first_bad == SIZE_MAX ? 1 : WALK_FALLBACK;
	if (best >= t->first_bad)
		return WALK_FALLBACK;
	*child = t->kids[best];
	return 0;
}

/*
 * chain_libdw's answer from one descent: the scopes holding a are, from
 * the unit down, at each level the first child whose ranges hold a, as
 * dwarf_getscopes' walk finds them; that path is the concrete chain
 * dwarf_getscopes_die gives.  dwarf_getscopes answers nothing when the
 * abstract origin of the deepest inlined call on the path is out of its
 * walk's reach, so neither does this.  WALK_FALLBACK for what this does
 * not model: imported (dwz) units, an origin in another unit, errors.
 */
static int chain_walk(struct symbolizer *s, Dwarf_Die *cu, Dwarf_Addr a, Dwarf_Die **chain)
{
	struct unit_top *top = NULL;
	Dwarf_Die *path = NULL, die = *cu, child, origin, cudie;
	Dwarf_Attribute attr;
	size_t n = 0, cap = 0, fn = SIZE_MAX, inl = SIZE_MAX;
	int r = 0;

	for (;;) {
		if (array_grow(&path, &cap, n, sizeof(*path)) < 0) {
			r = -ENOMEM;
			goto out;
		}
		path[n++] = die;
		if ((n > 1 && !may_have_scopes(&die)) || !dwarf_haschildren(&die))
			break;
		if (n == 1) {
			/* A unit has thousands of children: their ranges are
			 * read once per unit. */
			r = unit_top_get(s, cu, &top);
			if (r < 0)
				goto out;
			r = unit_top_find(top, a, &child);
			if (r == WALK_FALLBACK)
				goto out;
			if (r > 0)
				break;
			die = child;
			continue;
		}
		r = dwarf_child(&die, &child);
		while (r == 0) {
			int h;

			if (dwarf_tag(&child) == DW_TAG_imported_unit) {
				r = WALK_FALLBACK;
				goto out;
			}
			h = dwarf_haspc(&child, a);
			if (h < 0) {
				r = WALK_FALLBACK;
				goto out;
			}
			if (h)
				break;
			r = dwarf_siblingof(&child, &child);
		}
		if (r < 0) {
			r = WALK_FALLBACK;
			goto out;
		}
		if (r > 0) {
			r = 0;
			break; /* no child holds a: die is the innermost scope */
		}
		die = child;
	}
	for (size_t i = 0; i < n; i++) {
		int tag = dwarf_tag(&path[i]);

		if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine)
			fn = i;
		if (tag == DW_TAG_inlined_subroutine)
			inl = i;
	}
	if (inl != SIZE_MAX) {
		if (!dwarf_formref_die(dwarf_attr(&path[inl], DW_AT_abstract_origin, &attr), &origin))
			goto out; /* dwarf_getscopes fails */
		if (!dwarf_diecu(&origin, &cudie, NULL, NULL) || cudie.addr != cu->addr) {
			r = WALK_FALLBACK;
			goto out;
		}
		r = reaches(cu, &origin);
		if (r <= 0)
			goto out;
	}
	r = 0;
	if (fn == SIZE_MAX)
		goto out;
	/* Innermost first, as dwarf_getscopes_die gives it. */
	for (size_t i = 0; i < (fn + 1) / 2; i++) {
		Dwarf_Die t = path[i];

		path[i] = path[fn - i];
		path[fn - i] = t;
	}
	*chain = path;
	path = NULL;
	r = (int)fn + 1;
out:
	free(path);
	return r;
}

/* Whether a compilation unit of dm has addr in its ranges. */
static bool unit_holds(Dwfl_Module *dm, Dwarf_Addr addr)
{
	Dwarf_Addr cubias;
	Dwarf_Die *cu = dwfl_module_addrdie(dm, addr, &cubias);

	return cu && dwarf_haspc(cu, addr - cubias) > 0;
}

/* The DWARF frames at addr, inline levels first; adds none without DWARF. */
static int dwarf_frames(struct symbolizer *s, const struct sym_module *m, Dwfl_Module *dm,
			Dwarf_Addr addr, uint64_t offset, const char *file, int line)
{
	Dwarf_Die *scopes = NULL, *cu;
	Dwarf_Files *files = NULL;
	Dwarf_Addr cubias;
	int n, err = 0;

	cu = dwfl_module_addrdie(dm, addr, &cubias);
	if (!cu || dwarf_haspc(cu, addr - cubias) <= 0)
		return 0;
	n = chain_walk(s, cu, addr - cubias, &scopes);
	if (n == WALK_FALLBACK)
		n = chain_libdw(cu, addr - cubias, &scopes);
	if (n == -ENOMEM)
		return n;
	for (int i = 0; i < n; i++) {
		int tag = dwarf_tag(&scopes[i]);
		Dwarf_Attribute a;
		Dwarf_Word w;

		if (tag != DW_TAG_subprogram && tag != DW_TAG_inlined_subroutine)
			continue;
		err = add_frame(s, m, offset, die_name(&scopes[i]), file, line);
		if (err || tag == DW_TAG_subprogram)
			break;
		/* The caller of an inlined call is at the call's line. */
		file = NULL;
		line = 0;
		if (dwarf_attr(&scopes[i], DW_AT_call_file, &a) && dwarf_formudata(&a, &w) == 0 &&
		    (files || dwarf_getsrcfiles(cu, &files, NULL) == 0))
			file = dwarf_filesrc(files, w, NULL, NULL);
		if (dwarf_attr(&scopes[i], DW_AT_call_line, &a) && dwarf_formudata(&a, &w) == 0)
			line = (int)w;
	}
	if (n > 0)
		free(scopes);
	return err;
}

/* Fill an item for file address addr of f (pc - bias, less one for a return
 * address), offset being pc - bias, for module m of some process. */
static int file_lookup(struct symbolizer *s, struct sym_file *f, const struct sym_module *m,
		       Dwarf_Addr addr, uint64_t offset, struct file_item *it)
{
	Dwfl_Module *dm = dwfl_addrmodule(f->dwfl, addr);
	Dwfl_Line *ln;
	int line = 0, err;

	it->first = s->nframes;
	if (!dm) {
		it->no_module = 1;
		err = add_frame(s, m, offset, NULL, NULL, 0);
		it->n = s->nframes - it->first;
		return err;
	}
	/* libdw (0.188) takes an address between a unit's ranges for the
	 * unit's, and its line table answers with a row of that unit: wl's
	 * _start (crt1.o, no DWARF), placed after main, was 'wl.c:165'. */
	ln = unit_holds(dm, addr) ? dwfl_module_getsrc(dm, addr) : NULL;
	if (ln)
		it->src = dwfl_lineinfo(ln, NULL, &line, NULL, NULL, NULL);
	it->line = it->src ? line : 0;
	err = dwarf_frames(s, m, dm, addr, offset, it->src, it->line);
	it->n = s->nframes - it->first;
	return err;
}

/* Resolve pc of process p into new frames, or find them under *first, *n
 * when another process's module of the same file asked for them. */
static int resolve(struct symbolizer *s, const struct sym_proc *p, uint64_t pc, int is_return,
		   size_t *first, size_t *n)
{
	uint64_t addr = is_return && pc > 0 ? pc - 1 : pc;
	struct sym_module *m = find_module(p, addr);
	struct file_item tmp = { 0 }, *c;
	struct sym_file *f;
	struct map_key k;
	int err;

	*first = s->nframes;
	if (!m)
		err = add_frame(s, NULL, pc, NULL, NULL, 0);
	else if ((err = module_check(s, m)) == 0 && m->status != SYM_OK)
		err = add_frame(s, m, pc - m->bias, NULL, NULL, 0);
	if (err || !m || m->status != SYM_OK) {
		*n = s->nframes - *first;
		return err;
	}
	/* The DWARF answer depends on the file and the file address only. */
	f = &s->files[m->file];
	k = (struct map_key){ (int64_t)m->file, (int64_t)(pc - m->bias), is_return };
	c = map_find(&s->file_cache, &k);
	if (!c) {
		err = file_lookup(s, f, m, addr - m->bias, pc - m->bias, &tmp);
		if (err)
			return err;
		c = map_get(&s->file_cache, &k);
		if (!c)
			return -ENOMEM;
		tmp.key = k;
		*c = tmp;
	}
	if (c->n) {
		*first = c->first;
		*n = c->n;
		return 0;
	}
	/* No DWARF for it: the symbol table may still name the function. */
	if (!f->symtab_done) {
		err = symtab_new(f->dm, &f->symtab);
		if (err)
			return err;
		f->symtab_done = 1;
	}
	err = add_frame(s, m, pc - m->bias, symtab_lookup(f->symtab, addr - m->bias, m->bias),
			c->src, c->line);
	*n = s->nframes - *first;
	return err;
}

int symbolize_pc(struct symbolizer *s, int64_t proc_id, uint64_t pc, int is_return,
		 const struct sym_frame **frames)
{
	struct map_key k = { proc_id, (int64_t)pc, is_return ? 1 : 0 };
	struct cache_item *c = map_find(&s->cache, &k);
	struct sym_proc *p;
	size_t first, n;
	int err;

	if (!c) {
		err = get_proc(s, proc_id, &p);
		if (err)
			return err;
		err = resolve(s, p, pc, is_return ? 1 : 0, &first, &n);
		if (err)
			return err;
		c = map_get(&s->cache, &k);
		if (!c)
			return -ENOMEM;
		c->first = first;
		c->n = n;
	}
	if (c->n > s->out_cap) {
		struct sym_frame *o = realloc(s->out, c->n * sizeof(*o));

		if (!o)
			return -ENOMEM;
		s->out = o;
		s->out_cap = c->n;
	}
	memcpy(s->out, s->frames + c->first, c->n * sizeof(*s->out));
	*frames = s->out;
	return (int)c->n;
}
