/*
 * Call sites of allocations, shared by `leaks`, `peak` and `temporary`.
 *
 * The call site of an allocation is the innermost logical frame of its
 * stack outside the allocator: frames in the malloc family of the C
 * library, the C++ runtime's operator new, the CUDA runtime and driver
 * and shimmer itself are skipped.  It reads `function (file:line)` with
 * debug information, `function (module)` with only a symbol, and
 * `module+0xOFFSET` with neither (plus why, when the module's file is gone
 * or another build).  CUDA allocations (every space but the host heap)
 * that carry Python frames take the innermost Python frame instead,
 * `function (file.py:line)`: that is the user's code.
 *
 * Each distinct (process, stack, Python stack, python-or-not) is resolved
 * once and cached, so a scan of millions of allocations costs a hash
 * lookup per row.  Sites and folded stacks are interned strings, numbered
 * densely from 0.  Also here: the processes' identities and the memory
 * labels (`host`, `cuda:N`, `pinned`, `managed:N`).  Not thread-safe.
 */
#ifndef SHIMMER_TOOLS_SITES_H
#define SHIMMER_TOOLS_SITES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <sqlite3.h>

#include "map.h"

/* Output formats of the memory commands. */
enum mem_format {
	MEM_TABLE,
	MEM_CSV,
	MEM_JSON,
	MEM_FOLDED,
};

struct site_proc {
	int64_t proc_id;
	int64_t pid;
	int64_t start_ns;
	int64_t end_ns; /* last known instant: processes.end_ns, else the last event */
	int sampled;    /* malloc_mode 'sample': host rows are estimates */
	char *exe;
};

struct sites {
	sqlite3 *db;
	struct symbolizer *sym;
	struct map stacks;      /* (proc, stack_id, pystack_id * 2 + python) -> stack_item */
	struct strtab names;    /* call sites */
	struct strtab folded;   /* "outer;...;inner" stacks */
	struct strtab labels;   /* host, cuda:N, ... */
	struct site_proc *procs; /* sorted by proc_id */
	size_t nprocs, procs_cap;
	sqlite3_stmt *frames_st, *py_st;
};

/*
 * Set up s for db and read its processes (only pid's when pid >= 0).
 * Returns 0, -EIO (one error line printed), -ENOMEM, or -EINVAL when the
 * store predates schema 3 (no stacks; an error line printed).
 */
int sites_open(struct sites *s, sqlite3 *db, int64_t pid);

void sites_close(struct sites *s);

/* The process proc_id, or NULL when it is not among those read. */
const struct site_proc *sites_proc(const struct sites *s, int64_t proc_id);

/*
 * The call site and folded stack of an allocation of process proc_id in
 * space (allocations.space), with native stack stack_id and Python stack
 * pystack_id (each -1 for NULL).  Sets *site and *folded to indexes into
 * s->names and s->folded.  Returns 0, -ENOMEM or -EIO.
 */
int sites_of(struct sites *s, int64_t proc_id, const char *space, int64_t stack_id,
	     int64_t pystack_id, int64_t *site, int64_t *folded);

/*
 * sites_label and sites_of for the row st, whose columns from col on are
 * proc_id, space, device, stack_id, pystack_id: sets k to (proc_id, label,
 * site) and *folded.  Returns 0, -ENOMEM or -EIO.
 */
int sites_row(struct sites *s, sqlite3_stmt *st, int col, struct map_key *k, int64_t *folded);

/* Order of (proc, label, ...) keys for reports: by proc_id, then label name. */
int sites_cmp_key(const struct sites *s, const struct map_key *a, const struct map_key *b);

/* The label index (into s->labels) of space on device. */
int sites_label(struct sites *s, const char *space, int64_t device, int64_t *label);

/* True when rows of label in p are weighted samples, i.e. estimates. */
int sites_estimated(const struct sites *s, const struct site_proc *p, int64_t label);

/* Allocations a row of weight w and size bytes stands for: 1 when exact. */
double sites_count(double w, int64_t size);

/* The exit code for a writer's result; prints the out-of-memory error. */
int sites_result(int err);

/* Bytes as an integer for folded lines and CSV (weights may be fractional). */
long long sites_round(double bytes);

/* Write "pid P (proc N) exe" as a table heading. */
void sites_heading(FILE *out, const struct site_proc *p);

#endif /* SHIMMER_TOOLS_SITES_H */
