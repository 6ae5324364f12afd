/*
 * Symbolization with libdwfl; see symbolize.h.
 *
 * Per process, on first use: read its modules (ordered by load time),
 * check each file exists, report it with dwfl_report_elf at its bias and
 * compare the build-id libdwfl reads from it with the recorded one.  Our
 * own sorted module table, not libdwfl, decides which module holds a pc,
 * so that a module we refused (gone, other build-id) stays refused.  When
 * an address range was reused (dlclose, then dlopen of something else),
 * the module still loaded at the end, else the latest loaded, wins.
 *
 * Inlined frames: dwarf_getscopes finds the innermost function scope at
 * the address, and dwarf_getscopes_die the chain of scopes around that
 * concrete DIE, innermost first; each DW_TAG_inlined_subroutine in it is a
 * frame whose caller is at its DW_AT_call_file:DW_AT_call_line, up to the
 * DW_TAG_subprogram.
 * The innermost frame's line comes from the line table.
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

/* From the C++ runtime (libstdc++), declared here to keep this file C. */
char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

struct sym_module {
	uint64_t lo, hi, bias;
	char *path;
	int64_t order;   /* load order; later wins on overlap */
	int live;        /* never unloaded */
	enum sym_status status;
};

struct sym_proc {
	int64_t proc_id;
	Dwfl *dwfl;
	struct sym_module *mods;
	size_t nmods;
};

struct cache_item {
	struct map_key key;
	size_t first; /* index into frames */
	size_t n;
};

struct symbolizer {
	sqlite3 *db;
	struct sym_proc *procs;
	size_t nprocs, procs_cap;
	struct map cache;
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
	return s;
}

void symbolizer_free(struct symbolizer *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nprocs; i++) {
		struct sym_proc *p = &s->procs[i];

		if (p->dwfl)
			dwfl_end(p->dwfl);
		for (size_t j = 0; j < p->nmods; j++)
			free(p->mods[j].path);
		free(p->mods);
	}
	for (size_t i = 0; i < s->nframes; i++) {
		free((char *)s->frames[i].function);
		free((char *)s->frames[i].file);
	}
	free(s->procs);
	free(s->frames);
	free(s->out);
	map_free(&s->cache);
	free(s);
}

static int hex_of(const unsigned char *bits, int len, char *buf, size_t cap)
{
	if ((size_t)len * 2 + 1 > cap)
		return -1;
	for (int i = 0; i < len; i++)
		sprintf(buf + 2 * i, "%02x", bits[i]);
	buf[2 * len] = 0;
	return 0;
}

/* Check the file libdwfl loaded for m against the recorded build-id. */
static enum sym_status check_build_id(Dwfl_Module *dm, const char *want)
{
	const unsigned char *bits;
	GElf_Addr vaddr, bias;
	char hex[256];
	int len;

	if (!dwfl_module_getelf(dm, &bias))
		return SYM_UNREADABLE;
	if (!want)
		return SYM_OK; /* nothing recorded to compare with */
	len = dwfl_module_build_id(dm, &bits, &vaddr);
	if (len <= 0 || hex_of(bits, len, hex, sizeof(hex)) < 0)
		return SYM_BUILD_ID; /* recorded one, the file has none */
	return strcasecmp(hex, want) == 0 ? SYM_OK : SYM_BUILD_ID;
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

static int load_proc(struct symbolizer *s, struct sym_proc *p)
{
	sqlite3_stmt *st = NULL;
	Dwfl_Module **dms = NULL;
	char **want = NULL;
	size_t cap = 0, dcap = 0, wcap = 0;
	int err, r;

	p->dwfl = dwfl_begin(&offline_callbacks);
	if (!p->dwfl)
		return -ENOMEM;
	dwfl_report_begin(p->dwfl);
	err = store_prepare(s->db, modules_sql, &st);
	if (err)
		goto out;
	sqlite3_bind_int64(st, 1, p->proc_id);
	while ((r = store_step(s->db, st)) > 0) {
		const char *path = (const char *)sqlite3_column_text(st, 0);
		const char *bid = (const char *)sqlite3_column_text(st, 4);
		struct sym_module *m;

		err = array_grow(&p->mods, &cap, p->nmods, sizeof(*p->mods));
		if (!err)
			err = array_grow(&dms, &dcap, p->nmods, sizeof(*dms));
		if (!err)
			err = array_grow(&want, &wcap, p->nmods, sizeof(*want));
		if (err)
			goto out;
		m = &p->mods[p->nmods];
		*m = (struct sym_module){
			.bias = (uint64_t)sqlite3_column_int64(st, 1),
			.lo = (uint64_t)sqlite3_column_int64(st, 2),
			.hi = (uint64_t)sqlite3_column_int64(st, 3),
			.order = (int64_t)p->nmods,
			.live = sqlite3_column_int(st, 5),
			.path = strdup(path ? path : "?"),
		};
		want[p->nmods] = bid ? strdup(bid) : NULL;
		dms[p->nmods] = NULL;
		p->nmods++;
		if (!m->path || (bid && !want[p->nmods - 1])) {
			err = -ENOMEM;
			goto out;
		}
		if (!path || access(path, R_OK) < 0) {
			m->status = SYM_FILE_GONE;
			continue;
		}
		/* Fails for a file that is not ELF or overlaps one reported before. */
		dms[p->nmods - 1] = dwfl_report_elf(p->dwfl, path, path, -1, m->bias, false);
		m->status = dms[p->nmods - 1] ? SYM_OK : SYM_UNREADABLE;
	}
	err = r;
	dwfl_report_end(p->dwfl, NULL, NULL);
	for (size_t i = 0; i < p->nmods; i++)
		if (dms[i])
			p->mods[i].status = check_build_id(dms[i], want[i]);
	if (p->nmods)
		qsort(p->mods, p->nmods, sizeof(*p->mods), cmp_module);
out:
	for (size_t i = 0; want && i < p->nmods; i++)
		free(want[i]);
	free(want);
	free(dms);
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
static const struct sym_module *find_module(const struct sym_proc *p, uint64_t pc)
{
	const struct sym_module *best = NULL;

	for (size_t i = 0; i < p->nmods && p->mods[i].lo <= pc; i++) {
		const struct sym_module *m = &p->mods[i];

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

/* The DWARF frames at addr, inline levels first; adds none without DWARF. */
static int dwarf_frames(struct symbolizer *s, const struct sym_module *m, Dwfl_Module *dm,
			Dwarf_Addr addr, uint64_t offset, const char *file, int line)
{
	Dwarf_Die *scopes = NULL, *cu;
	Dwarf_Files *files = NULL;
	Dwarf_Addr cubias;
	int n, err = 0;

	cu = dwfl_module_addrdie(dm, addr, &cubias);
	if (!cu)
		return 0;
	/* The scopes at addr end at the innermost function; the chain of its
	 * concrete DIE continues through the functions it was inlined into. */
	n = dwarf_getscopes(cu, addr - cubias, &scopes);
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
	free(scopes);
	return err;
}

static int resolve(struct symbolizer *s, const struct sym_proc *p, uint64_t pc, int is_return)
{
	uint64_t addr = is_return && pc > 0 ? pc - 1 : pc;
	const struct sym_module *m = find_module(p, addr);
	const char *file = NULL, *sym;
	Dwfl_Module *dm;
	Dwfl_Line *ln;
	size_t before = s->nframes;
	GElf_Off off;
	GElf_Sym esym;
	int line = 0, err;

	if (!m)
		return add_frame(s, NULL, pc, NULL, NULL, 0);
	if (m->status != SYM_OK || !(dm = dwfl_addrmodule(p->dwfl, addr)))
		return add_frame(s, m, pc - m->bias, NULL, NULL, 0);
	ln = dwfl_module_getsrc(dm, addr);
	if (ln)
		file = dwfl_lineinfo(ln, NULL, &line, NULL, NULL, NULL);
	err = dwarf_frames(s, m, dm, addr, pc - m->bias, file, file ? line : 0);
	if (err || s->nframes > before)
		return err;
	/* No DWARF for it: the symbol table may still name the function. */
	sym = dwfl_module_addrinfo(dm, addr, &off, &esym, NULL, NULL, NULL);
	return add_frame(s, m, pc - m->bias, sym, file, file ? line : 0);
}

int symbolize_pc(struct symbolizer *s, int64_t proc_id, uint64_t pc, int is_return,
		 const struct sym_frame **frames)
{
	struct map_key k = { proc_id, (int64_t)pc, is_return ? 1 : 0 };
	struct cache_item *c = map_find(&s->cache, &k);
	struct sym_proc *p;
	size_t first;
	int err;

	if (!c) {
		err = get_proc(s, proc_id, &p);
		if (err)
			return err;
		first = s->nframes;
		err = resolve(s, p, pc, is_return);
		if (err)
			return err;
		c = map_get(&s->cache, &k);
		if (!c)
			return -ENOMEM;
		c->first = first;
		c->n = s->nframes - first;
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
