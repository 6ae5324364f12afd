/*
 * Call sites of allocations, shared by `leaks`, `peak` and `temporary`.
 *
 * The call site of an allocation is the innermost logical frame of its
 * stack outside the allocator: frames in the malloc family of the C
 * library, the C++ runtime's operator new, the CUDA runtime and driver
 * and shimmer itself are skipped.  It reads `function (file:line)` with
 * debug information, `function (module)` with only a symbol, and
 * `module+0xOFFSET` with neither (plus why, when the module's file is gone
 * or another build).  Allocations that carry Python frames (made while
 * the thread ran Python code: CUDA memory, and the host heap since the
 * shim reads the frames there too) take the innermost Python frame of the
 * user's code instead, `function (file.py:line)` (the caller passes the
 * Python stack unless asked for native sites: model_set_native()).  With callers set to N, a site is that
 * frame and the N frames that called it, "site <- caller <- ...", so that
 * a site that every allocation goes through (an allocator wrapper such as
 * SQLite's or a container's) splits by who called it.
 *
 * Each distinct (process, stack, Python stack, python-or-not) is resolved
 * once and cached, so a scan of millions of allocations costs a hash
 * lookup per row.  Sites and folded stacks are interned strings, numbered
 * densely from 0.  The model (model_heap.c) is its one user.  Not
 * thread-safe.
 */
#ifndef SHIMMER_TOOLS_SITES_H
#define SHIMMER_TOOLS_SITES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <sqlite3.h>

#include "map.h"

struct sites {
	sqlite3 *db;
	struct symbolizer *sym;
	struct map stacks;      /* (proc, stack_id, pystack_id * 2 + 1 or -1) -> stack_item */
	struct map nodes;       /* (proc, node_id, 0) -> stack_nodes row (schema 10) */
	struct strtab names;    /* call sites */
	struct strtab folded;   /* "outer;...;inner" stacks */
	struct map pystr;       /* (proc, strings.id, 0) -> pytext index */
	struct strtab pytext;   /* the Python frames' file and function names */
	int tree;               /* stacks are stack_nodes (schema 10 on) */
	int callers;            /* frames named after the site (0: the site
				 * alone); set before the first sites_of() */
	struct path *paths;     /* every string of the stores that could be a
				 * Python file, by base name (py_file_name()) */
	size_t npaths;
	int paths_loaded;
	struct map pyname;      /* (pytext index, 0, 0) -> shown name */
	struct strtab pynames;  /* the Python files' shown names */
	sqlite3_stmt *frames_st, *node_st, *py_st, *str_st;
};

/*
 * Set up s for db.  Returns 0, -EIO (one error line printed), -ENOMEM, or
 * -EINVAL when the store predates schema 3 (no stacks; an error line
 * printed).
 */
int sites_open(struct sites *s, sqlite3 *db);

void sites_close(struct sites *s);

/*
 * A Python frame's file is shown by its base name, or, where the store holds
 * other files of that base name (two packages' util.py), by as many of its
 * last path components as tell them apart (pa/util.py), the same count for
 * each.  With another store added here (before the first sites_of()), the
 * larger count of the two: `compare` names a file alike in both.  Returns
 * 0, -ENOMEM or -EIO.
 */
int sites_add_paths(struct sites *s, sqlite3 *db);

/*
 * The call site and folded stack of allocations of process proc_id with
 * native stack stack_id and Python stack pystack_id (each -1 for none):
 * with a Python stack, its innermost frame of the user's code, else the
 * native one's.  Sets *site and *folded to indexes into s->names and
 * s->folded.  Returns 0, -ENOMEM or -EIO.
 */
int sites_of(struct sites *s, int64_t proc_id, int64_t stack_id, int64_t pystack_id,
	     int64_t *site, int64_t *folded);

/*
 * The call site alone of native stack stack_id of process proc_id: what
 * sites_of() names it with no Python stack, walking only the frames the
 * name takes (the site and s->callers more), not the whole stack into a
 * folded one: a framework's host allocations have stacks of dozens of
 * frames, each symbolized.  Returns 0, -ENOMEM or -EIO.
 */
int sites_native_site(struct sites *s, int64_t proc_id, int64_t stack_id, int64_t *site);

/*
 * The call site alone of Python stack pystack_id of process proc_id: what
 * sites_of() names it, reading its frames only up to the site and
 * s->callers more.  Returns 0, -ENOMEM or -EIO.
 */
int sites_python_site(struct sites *s, int64_t proc_id, int64_t pystack_id, int64_t *site);

#endif /* SHIMMER_TOOLS_SITES_H */
