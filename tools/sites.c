/*
 * Call sites, folded stacks, processes and labels; see sites.h.
 *
 * Sites, folded stacks and labels are interned (struct strtab), so that
 * rows can be grouped by small integers.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fmt.h"
#include "sites.h"
#include "store.h"
#include "symbolize.h"

struct stack_item {
	struct map_key key;
	int64_t site;
	int64_t folded;
};

/* A strings row as the Python frames use it: key (proc_id, id, 0); text
 * an index into sites.pytext, -1 when the store has no such row. */
struct pystr_item {
	struct map_key key;
	int64_t text;
};

/* A string of a store that may be a Python file's path: store 0 is the
 * sites' own, 1 the one sites_add_paths() added. */
struct path {
	char *text;
	const char *base;
	int store;
};

/* A shown name: key (pytext index, 0, 0), name an index into pynames. */
struct pyname_item {
	struct map_key key;
	int64_t name;
};

/* A stack_nodes row: key (proc_id, node_id, 0). */
struct node_item {
	struct map_key key;
	int64_t parent;
	int64_t pc;
};

/* ---- interned strings --------------------------------------------------- */

/* A growing string for building names and stacks. */
struct buf {
	char *s;
	size_t n, cap;
	int oom;
};

static void buf_add(struct buf *b, const char *s, size_t len)
{
	if (b->oom)
		return;
	if (b->n + len + 1 > b->cap) {
		size_t cap = (b->n + len + 1) * 2;
		char *p = realloc(b->s, cap);

		if (!p) {
			b->oom = 1;
			return;
		}
		b->s = p;
		b->cap = cap;
	}
	memcpy(b->s + b->n, s, len);
	b->n += len;
	b->s[b->n] = 0;
}

static void buf_puts(struct buf *b, const char *s)
{
	buf_add(b, s, strlen(s));
}

/* " (FILE:LINE)", a frame's place: as buf_printf(" (%s:%d)") writes it,
 * without vfprintf, which was a third of the Python frames' cost. */
static void buf_place(struct buf *b, const char *file, int line)
{
	char num[16], *p = num + sizeof(num);
	unsigned v = line < 0 ? 0u - (unsigned)line : (unsigned)line;

	*--p = ')';
	do
		*--p = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	if (line < 0)
		*--p = '-';
	*--p = ':';
	buf_add(b, " (", 2);
	buf_puts(b, file);
	buf_add(b, p, (size_t)(num + sizeof(num) - p));
}

static void buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void buf_printf(struct buf *b, const char *fmt, ...)
{
	char tmp[64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	buf_puts(b, tmp);
}

/* ---- opening ------------------------------------------------------------ */

static const char *base_name(const char *path)
{
	const char *p = path ? strrchr(path, '/') : NULL;

	return p ? p + 1 : path ? path : "?";
}

int sites_open(struct sites *s, sqlite3 *db)
{
	int err, v;

	memset(s, 0, sizeof(*s));
	s->db = db;
	s->stacks.item_size = sizeof(struct stack_item);
	v = store_schema_version(db);
	if (v < 3) {
		cli_error("the store has no call stacks (schema version %d; 3 or later needed)", v);
		return -EINVAL;
	}
	s->sym = symbolizer_new(db);
	if (!s->sym)
		return -ENOMEM;
	/* From schema 10 on, stacks are a tree (stack_nodes), walked here
	 * from each stack's innermost node with the nodes remembered: stacks
	 * share their outer nodes, which are read once. */
	s->tree = v >= 10;
	s->nodes.item_size = sizeof(struct node_item);
	err = store_prepare(db, s->tree ? "SELECT node_id FROM stacks WHERE proc_id = ?1"
					  " AND stack_id = ?2"
					: "SELECT pc FROM stack_frames WHERE proc_id = ?1"
					  " AND stack_id = ?2 ORDER BY level", &s->frames_st);
	if (!err && s->tree)
		err = store_prepare(db, "SELECT parent_id, pc FROM stack_nodes WHERE proc_id = ?1"
				    " AND node_id = ?2", &s->node_st);
	/* A framework's Python stacks are dozens of frames over a few
	 * hundred distinct file and function names: the names are read
	 * once each (pystr), not joined into every frame's row. */
	s->pystr.item_size = sizeof(struct pystr_item);
	s->pyname.item_size = sizeof(struct pyname_item);
	if (!err)
		err = store_prepare(db, "SELECT file_id, func_id, line FROM python_frames"
				    " WHERE proc_id = ? AND pystack_id = ? ORDER BY level",
				    &s->py_st);
	if (!err)
		err = store_prepare(db, "SELECT text FROM strings WHERE proc_id = ? AND id = ?",
				    &s->str_st);
	return err;
}

void sites_close(struct sites *s)
{
	for (size_t i = 0; i < s->npaths; i++)
		free(s->paths[i].text);
	free(s->paths);
	map_free(&s->pyname);
	strtab_free(&s->pynames);
	symbolizer_free(s->sym);
	map_free(&s->stacks);
	map_free(&s->nodes);
	map_free(&s->pystr);
	strtab_free(&s->pytext);
	strtab_free(&s->names);
	strtab_free(&s->folded);
	sqlite3_finalize(s->frames_st);
	sqlite3_finalize(s->node_st);
	sqlite3_finalize(s->py_st);
	sqlite3_finalize(s->str_st);
	memset(s, 0, sizeof(*s));
}

/* ---- Python file names --------------------------------------------------- */

static int path_cmp(const void *a, const void *b)
{
	const struct path *x = a, *y = b;
	int c = strcmp(x->base, y->base);

	return c ? c : x->store != y->store ? x->store - y->store : strcmp(x->text, y->text);
}

/* Every string of db (store): the files of Python frames are among them; a
 * string that is no file only makes a name longer. */
static int paths_read(struct sites *s, sqlite3 *db, int store)
{
	sqlite3_stmt *st;
	size_t cap = s->npaths;
	int r = 0, err = store_prepare(db, "SELECT DISTINCT text FROM strings", &st);

	while (!err && (r = store_step(db, st)) > 0) {
		const char *t = (const char *)sqlite3_column_text(st, 0);
		struct path *p;

		if (!t)
			continue;
		err = array_grow(&s->paths, &cap, s->npaths, sizeof(*s->paths));
		if (err)
			break;
		p = &s->paths[s->npaths];
		p->text = strdup(t);
		if (!p->text) {
			err = -ENOMEM;
			break;
		}
		p->base = base_name(p->text);
		p->store = store;
		s->npaths++;
	}
	if (!err && r < 0)
		err = r;
	sqlite3_finalize(st);
	return err;
}

int sites_add_paths(struct sites *s, sqlite3 *db)
{
	return paths_read(s, db, 1);
}

/* The last n components of path (the whole path when it has no more). */
static const char *path_tail(const char *path, int n)
{
	const char *p = path + strlen(path);

	while (p > path && n > 0)
		if (*--p == '/' && --n == 0)
			return p + 1;
	return path;
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Whether the last n components of paths [lo, hi) tell them apart. */
static int tails_distinct(const struct path *v, size_t lo, size_t hi, int n, const char **tmp)
{
	for (size_t i = lo; i < hi; i++)
		tmp[i - lo] = path_tail(v[i].text, n);
	array_sort(tmp, hi - lo, sizeof(*tmp), str_cmp);
	for (size_t i = 1; i < hi - lo; i++)
		if (strcmp(tmp[i - 1], tmp[i]) == 0)
			return 0;
	return 1;
}

/* How many trailing components name the files of base name base: the
 * fewest that tell apart the files of each store that have it. */
static int base_depth(struct sites *s, const char *base, int *depth)
{
	size_t lo = 0, hi = s->npaths, end;
	const char **tmp;
	int d = 1;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(s->paths[mid].base, base) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (end = lo; end < s->npaths && strcmp(s->paths[end].base, base) == 0; end++)
		;
	tmp = malloc((end - lo + 1) * sizeof(*tmp));
	if (!tmp)
		return -ENOMEM;
	for (size_t i = lo, j; i < end; i = j) {
		for (j = i; j < end && s->paths[j].store == s->paths[i].store; j++)
			;
		/* Distinct strings differ in some tail: the loop ends. */
		while (!tails_distinct(s->paths, i, j, d, tmp))
			d++;
	}
	free(tmp);
	*depth = d;
	return 0;
}

/*
 * The name file is shown by: its base name, or, where a store holds other
 * files of that base name, as many of its last components as tell them
 * apart (pa/util.py, pb/util.py), that many for each of them.  Two stores
 * take the larger count, so that `compare` pairs a file's lines although
 * one run had no other file of its name, or ran from another directory.
 */
static int py_file_name(struct sites *s, const char *file, const char **name)
{
	struct map_key k = { 0, 0, 0 };
	struct pyname_item *it;
	int64_t idx;
	int err, depth;

	err = strtab_index(&s->pytext, file, &k.a);
	if (err)
		return err;
	it = map_find(&s->pyname, &k);
	if (it) {
		*name = s->pynames.v[it->name];
		return 0;
	}
	if (!s->paths_loaded) {
		err = paths_read(s, s->db, 0);
		if (err)
			return err;
		array_sort(s->paths, s->npaths, sizeof(*s->paths), path_cmp);
		s->paths_loaded = 1;
	}
	err = base_depth(s, base_name(file), &depth);
	if (!err)
		err = strtab_index(&s->pynames, path_tail(file, depth), &idx);
	if (err)
		return err;
	it = map_get(&s->pyname, &k);
	if (!it)
		return -ENOMEM;
	it->name = idx;
	*name = s->pynames.v[idx];
	return 0;
}

/* ---- call sites ---------------------------------------------------------- */

static const char *const alloc_fns[] = {
	"malloc", "calloc", "realloc", "reallocarray", "free", "posix_memalign",
	"aligned_alloc", "memalign", "valloc", "pvalloc", "__libc_malloc", "__libc_calloc",
	"__libc_realloc", "__libc_memalign", "_int_malloc", "_int_realloc", "_int_memalign",
	"tcache_init", "malloc_hook_ini", "__libc_valloc", "__libc_pvalloc",
};

/*
 * CPython's allocator (Objects/obmalloc.c): PyObject_Malloc, PyMem_Malloc,
 * PyMem_RawMalloc and what they call, down to the map of a pymalloc arena.
 * Its frames are the allocator's, as malloc's are: the site of a block or
 * an arena it made for the interpreter is the code that asked for memory
 * (list_resize, PyUnicode_New, ...).  Found by the source file where the
 * debug information names it, else by these names (the exported ones are
 * named whatever the build keeps).
 */
static const char *const py_alloc_fns[] = {
	"PyObject_Malloc", "PyObject_Calloc", "PyObject_Realloc", "PyMem_Malloc",
	"PyMem_Calloc", "PyMem_Realloc", "PyMem_RawMalloc", "PyMem_RawCalloc",
	"PyMem_RawRealloc", "_PyObject_Malloc", "_PyObject_Calloc", "_PyObject_Realloc",
	"_PyMem_RawMalloc", "_PyMem_RawCalloc", "_PyMem_RawRealloc", "_PyObject_ArenaMmap",
	"_PyMem_ArenaAlloc", "_PyObject_VirtualAlloc", "new_arena", "allocate_from_new_pool",
	"pymalloc_alloc", "pymalloc_realloc", "arena_map_get",
};

static int str_in(const char *s, const char *const *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(s, v[i]) == 0)
			return 1;
	return 0;
}

/* A frame of the allocator (CPython's too), the CUDA libraries or
 * shimmer itself. */
static int allocator_frame(const struct sym_frame *f)
{
	const char *mod = f->module ? base_name(f->module) : "";

	if (strncmp(mod, "libshimmer", 10) == 0 || strncmp(mod, "libcudart", 9) == 0 ||
	    strncmp(mod, "libcuda.", 8) == 0 || strncmp(mod, "libcuda-", 8) == 0 ||
	    strncmp(mod, "libcupti", 8) == 0)
		return 1;
	if (f->file && strcmp(base_name(f->file), "obmalloc.c") == 0)
		return 1;
	if (!f->function)
		return 0;
	if (strncmp(f->function, "operator new", 12) == 0)
		return 1;
	return str_in(f->function, alloc_fns, sizeof(alloc_fns) / sizeof(alloc_fns[0])) ||
	       str_in(f->function, py_alloc_fns, sizeof(py_alloc_fns) / sizeof(py_alloc_fns[0]));
}

static void render_native(struct buf *b, const struct sym_frame *f)
{
	if (f->function) {
		buf_puts(b, f->function);
		if (f->file && f->line > 0)
			buf_printf(b, " (%s:%d)", base_name(f->file), f->line);
		else if (f->file)
			buf_printf(b, " (%s)", base_name(f->file));
		else
			buf_printf(b, " (%s)", base_name(f->module));
	} else if (f->module) {
		buf_puts(b, base_name(f->module));
		buf_printf(b, "+0x%llx", (unsigned long long)f->offset);
		if (f->status != SYM_OK)
			buf_printf(b, " [%s]", sym_status_name(f->status));
	} else {
		buf_printf(b, "0x%llx", (unsigned long long)f->offset);
	}
}

/* Frames, innermost first, as rendered strings in one buffer separated by NULs. */
struct frame_list {
	struct buf text;
	size_t *start;
	size_t n, cap;
	size_t site; /* the frame that is the call site (innermost of the user's code) */
	int has_site;
};

/*
 * Python code that is not the user's: the standard library and installed
 * packages (PyTorch's own nn.Module code, for one).  The call site of a
 * Python stack is its innermost frame outside them, so a leak in a training
 * script points at the script's line, not at torch/nn/modules/linear.py.
 */
static int python_library_file(const char *file)
{
	return !file || strstr(file, "/site-packages/") || strstr(file, "/dist-packages/") ||
	       strstr(file, "/lib/python3") || strncmp(file, "<frozen ", 8) == 0;
}

static int frame_push(struct frame_list *l)
{
	int err = array_grow(&l->start, &l->cap, l->n, sizeof(*l->start));

	if (err)
		return err;
	if (l->n)
		buf_add(&l->text, "", 1); /* the NUL ending the previous frame */
	l->start[l->n++] = l->text.n;
	return l->text.oom ? -ENOMEM : 0;
}

/* The frames of return address pc, after the allocator's (skipping: none
 * of the user's code seen yet). */
static int native_pc(struct sites *s, int64_t proc_id, uint64_t pc, int *skipping,
		     struct frame_list *l)
{
	const struct sym_frame *f;
	int n = symbolize_pc(s->sym, proc_id, pc, 1, &f), err;

	if (n < 0)
		return n;
	for (int i = 0; i < n; i++) {
		/* Only the allocator's frames below the caller go. */
		if (*skipping && allocator_frame(&f[i]))
			continue;
		*skipping = 0;
		err = frame_push(l);
		if (err)
			return err;
		render_native(&l->text, &f[i]);
	}
	return 0;
}

/* Node node of the process: its caller's node and its pc, read once. */
static int tree_node(struct sites *s, int64_t proc_id, int64_t node, int64_t *parent, int64_t *pc)
{
	struct map_key k = { proc_id, node, 0 };
	struct node_item *it = map_find(&s->nodes, &k);
	sqlite3_stmt *st = s->node_st;
	int r;

	if (!it) {
		sqlite3_reset(st);
		sqlite3_bind_int64(st, 1, proc_id);
		sqlite3_bind_int64(st, 2, node);
		r = store_step(s->db, st);
		if (r <= 0) /* a node that is not there ends the stack */
			return r < 0 ? r : 1;
		it = map_get(&s->nodes, &k);
		if (!it)
			return -ENOMEM;
		it->parent = sqlite3_column_int64(st, 0);
		it->pc = sqlite3_column_int64(st, 1);
	}
	*parent = it->parent;
	*pc = it->pc;
	return 0;
}

/* The native frames of the stack, innermost first, into l: all of them,
 * or (max > 0) the first max frames. */
static int native_frames(struct sites *s, int64_t proc_id, int64_t stack_id,
			 struct frame_list *l, size_t max)
{
	sqlite3_stmt *st = s->frames_st;
	int skipping = 1, r, err = 0;
	int64_t node = 0, pc;

	sqlite3_reset(st);
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int64(st, 2, stack_id);
	if (s->tree) {
		r = store_step(s->db, st);
		if (r > 0)
			node = sqlite3_column_int64(st, 0);
		/* Up to the root (0); the bound holds against a cycle in a
		 * store written by hand. */
		for (int level = 0; r >= 0 && !err && node > 0 && level < 1024 &&
				    !(max && l->n >= max); level++) {
			r = tree_node(s, proc_id, node, &node, &pc);
			if (r == 0)
				err = native_pc(s, proc_id, (uint64_t)pc, &skipping, l);
		}
		return r < 0 ? r : err ? err : l->text.oom ? -ENOMEM : 0;
	}
	while (!err && !(max && l->n >= max) && (r = store_step(s->db, st)) > 0)
		err = native_pc(s, proc_id, (uint64_t)sqlite3_column_int64(st, 0), &skipping, l);
	return err ? err : r < 0 ? r : l->text.oom ? -ENOMEM : 0;
}

/* String id of process proc_id, read once: NULL when the store has none. */
static int py_string(struct sites *s, int64_t proc_id, int64_t id, const char **text)
{
	struct map_key k = { proc_id, id, 0 };
	struct pystr_item *it = map_find(&s->pystr, &k);
	int64_t idx = -1;
	int r;

	if (!it) {
		sqlite3_reset(s->str_st);
		sqlite3_bind_int64(s->str_st, 1, proc_id);
		sqlite3_bind_int64(s->str_st, 2, id);
		r = store_step(s->db, s->str_st);
		if (r < 0)
			return r;
		if (r > 0) {
			const char *t = (const char *)sqlite3_column_text(s->str_st, 0);
			int err = strtab_index(&s->pytext, t ? t : "", &idx);

			if (err)
				return err;
		}
		it = map_get(&s->pystr, &k);
		if (!it)
			return -ENOMEM;
		it->text = idx;
	}
	*text = it->text >= 0 ? s->pytext.v[it->text] : NULL;
	return 0;
}

/* The Python frames of the stack, innermost first, into l: all of them,
 * or (site_only) up to the site and the s->callers frames that called it,
 * all a site's name takes. */
static int python_frames(struct sites *s, int64_t proc_id, int64_t pystack_id,
			 struct frame_list *l, int site_only)
{
	sqlite3_stmt *st = s->py_st;
	size_t callers = (size_t)(s->callers > 0 ? s->callers : 0);
	int r = 0, err;

	sqlite3_reset(st);
	sqlite3_bind_int64(st, 1, proc_id);
	sqlite3_bind_int64(st, 2, pystack_id);
	while (!(site_only && l->has_site && l->n > l->site + callers) &&
	       (r = store_step(s->db, st)) > 0) {
		int64_t file_id = sqlite3_column_int64(st, 0);
		int64_t func_id = sqlite3_column_int64(st, 1);
		int line = sqlite3_column_int(st, 2);
		const char *file, *fn;

		err = frame_push(l);
		if (err)
			return err;
		/* The shim's gap between a deep stack's innermost and
		 * outermost frames (preload/pyframes.h): never the site. */
		if (file_id == 0 && func_id == 0 && line == 0) {
			buf_puts(&l->text, "...");
			continue;
		}
		err = py_string(s, proc_id, file_id, &file);
		if (!err)
			err = py_string(s, proc_id, func_id, &fn);
		if (err)
			return err;
		if (!l->has_site && !python_library_file(file)) {
			l->site = l->n - 1;
			l->has_site = 1;
		}
		if (file) {
			err = py_file_name(s, file, &file);
			if (err)
				return err;
		}
		buf_puts(&l->text, fn ? fn : "?");
		buf_place(&l->text, file ? file : "?", line);
	}
	if (site_only && l->has_site && l->n > l->site + callers)
		r = 0;
	return r < 0 ? r : l->text.oom ? -ENOMEM : 0;
}

/* The site's frame, then s->callers of the frames that called it (fewer
 * where the stack ends), joined by " <- ". */
static int site_name(struct sites *s, const struct frame_list *l, int64_t *site)
{
	size_t first = l->has_site ? l->site : 0;
	struct buf name = { 0 };
	int err;

	if (s->callers <= 0)
		return strtab_index(&s->names, l->text.s + l->start[first], site);
	for (size_t i = first; i < l->n && i - first <= (size_t)s->callers; i++) {
		if (i > first)
			buf_puts(&name, " <- ");
		buf_puts(&name, l->text.s + l->start[i]);
	}
	err = name.oom ? -ENOMEM : strtab_index(&s->names, name.s, site);
	free(name.s);
	return err;
}

static int resolve_stack(struct sites *s, struct stack_item *it, int64_t proc_id,
			 int64_t stack_id, int64_t pystack_id, int python)
{
	struct frame_list l = { 0 };
	struct buf fold = { 0 };
	int err;

	if (python)
		err = python_frames(s, proc_id, pystack_id, &l, 0);
	else
		err = stack_id >= 0 ? native_frames(s, proc_id, stack_id, &l, 0) : 0;
	if (err)
		goto out;
	if (l.n == 0) {
		err = strtab_index(&s->names, "(no stack)", &it->site);
		if (!err)
			err = strtab_index(&s->folded, "(no stack)", &it->folded);
		goto out;
	}
	err = site_name(s, &l, &it->site);
	if (err)
		goto out;
	for (size_t i = l.n; i-- > 0 && !err;) {
		/* The folded format's own rules for a frame (fmt.h). */
		const char *frame = l.text.s + l.start[i];
		char *f;

		if (fmt_folded_plain(frame)) {
			buf_puts(&fold, frame);
		} else if ((f = fmt_folded_frame(frame)) != NULL) {
			buf_puts(&fold, f);
			free(f);
		} else {
			err = -ENOMEM;
			break;
		}
		if (i)
			buf_puts(&fold, ";");
	}
	if (err)
		goto out;
	err = fold.oom ? -ENOMEM : strtab_index(&s->folded, fold.s, &it->folded);
out:
	free(l.text.s);
	free(l.start);
	free(fold.s);
	return err;
}

int sites_of(struct sites *s, int64_t proc_id, int64_t stack_id, int64_t pystack_id,
	     int64_t *site, int64_t *folded)
{
	int python = pystack_id >= 0;
	/* A native site depends on the native stack alone, a Python one on
	 * the Python stack alone. */
	struct map_key k = { proc_id, python ? -1 : stack_id, python ? pystack_id * 2 + 1 : -1 };
	struct stack_item *it = map_find(&s->stacks, &k);
	int err;

	if (!it) {
		struct stack_item tmp = { .key = k };

		err = resolve_stack(s, &tmp, proc_id, stack_id, pystack_id, python);
		if (err)
			return err;
		it = map_get(&s->stacks, &k);
		if (!it)
			return -ENOMEM;
		it->site = tmp.site;
		it->folded = tmp.folded;
	}
	*site = it->site;
	*folded = it->folded;
	return 0;
}

/* The site alone of native stack id (python: Python stack id), from the
 * frames its name takes; cached under its own keys, (proc, stack, -2) and
 * (proc, pystack, -3), since it has no folded stack. */
static int site_alone(struct sites *s, int64_t proc_id, int64_t id, int python, int64_t *site)
{
	struct map_key k = { proc_id, id, python ? -3 : -2 };
	struct stack_item *it = map_find(&s->stacks, &k);
	struct frame_list l = { 0 };
	int err = 0;

	if (!it) {
		size_t want = (size_t)(s->callers > 0 ? s->callers : 0) + 1;

		if (python)
			err = python_frames(s, proc_id, id, &l, 1);
		else if (id >= 0)
			err = native_frames(s, proc_id, id, &l, want);
		if (!err)
			err = l.n ? site_name(s, &l, site)
				  : strtab_index(&s->names, "(no stack)", site);
		free(l.text.s);
		free(l.start);
		if (err)
			return err;
		it = map_get(&s->stacks, &k);
		if (!it)
			return -ENOMEM;
		it->site = *site;
		it->folded = -1;
	}
	*site = it->site;
	return 0;
}

int sites_native_site(struct sites *s, int64_t proc_id, int64_t stack_id, int64_t *site)
{
	return site_alone(s, proc_id, stack_id, 0, site);
}

int sites_python_site(struct sites *s, int64_t proc_id, int64_t pystack_id, int64_t *site)
{
	return site_alone(s, proc_id, pystack_id, 1, site);
}
