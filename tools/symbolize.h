/*
 * Offline symbolization of the return addresses the shim recorded, from
 * the store's `modules` rows, also after the process is gone: each module
 * file is reported to libdwfl at its recorded load bias, and debug
 * information is found the way libdwfl's standard callbacks find it (next
 * to the file, /usr/lib/debug, by build-id).  A module whose file is gone
 * or whose build-id differs from the recorded one is never read: its
 * addresses come back module-relative with the reason, not as somebody
 * else's function.
 *
 * One address may stand for several logical frames: a call inlined into
 * another is its own frame, innermost first, each with the line it was at
 * (the call's line for the callers of an inlined function).  Results are
 * cached per (process, pc), and per (file, file address) for every process
 * that loaded the file, wherever: a library shared by the ranks of a job
 * is read once.  A file is opened on the first address in it.  The names
 * are those libdwfl gives with the module at its recorded bias (its symbol
 * table searched through symtab.h, its DWARF scopes found in one descent
 * of the unit, with libdw's own walks where that descent does not model
 * the unit).  Not thread-safe.
 */
#ifndef SHIMMER_TOOLS_SYMBOLIZE_H
#define SHIMMER_TOOLS_SYMBOLIZE_H

#include <stdint.h>

#include <sqlite3.h>

/* Why a frame has no function: the module's state. */
enum sym_status {
	SYM_OK = 0,        /* symbolized as far as the files allow */
	SYM_NO_MODULE,     /* the pc lies in no recorded module */
	SYM_FILE_GONE,     /* the module's file no longer exists */
	SYM_BUILD_ID,      /* the file's build-id differs from the recorded one */
	SYM_UNREADABLE,    /* libdwfl could not load the file */
	SYM_UNNAMED,       /* the module's path never reached the store (the shim could
			    * not announce it): which file it was is not known */
};

struct sym_frame {
	const char *function; /* demangled; NULL when no symbol covers the pc */
	const char *file;     /* source path as the debug information names it, or NULL */
	int line;             /* 0 when unknown */
	const char *module;   /* the module's path, NULL with SYM_NO_MODULE */
	uint64_t offset;      /* the pc as a file address of the module (pc - bias) */
	enum sym_status status;
};

struct symbolizer;

/* A symbolizer reading modules from db (schema 3); NULL with errno set. */
struct symbolizer *symbolizer_new(sqlite3 *db);

/* Release everything, frames and strings handed out included. */
void symbolizer_free(struct symbolizer *s);

/*
 * The logical frames at pc in process proc_id, innermost first: *frames
 * points at n >= 1 of them, valid until the next call or symbolizer_free.
 * is_return: pc is a return address, so pc - 1 is looked up and the line
 * reported is the call's.  Returns n, -ENOMEM, or -EIO (the store failed;
 * one "shimmer: error:" line printed).
 */
int symbolize_pc(struct symbolizer *s, int64_t proc_id, uint64_t pc, int is_return,
		 const struct sym_frame **frames);

/* A short word for status: "ok", "no module", "file gone", ... */
const char *sym_status_name(enum sym_status st);

#endif /* SHIMMER_TOOLS_SYMBOLIZE_H */
