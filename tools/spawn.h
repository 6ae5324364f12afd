/*
 * A private collector for one command (shimmer run, shimmer attach): the
 * shimmerd next to the shimmer binary, started in the foreground on a
 * store of its own, with a --parent-fd pipe so that it stops when we close
 * it or die, and waited for until it says it is ready (its --ready-fd).
 *
 * Functions return 0 or a negative errno; on failure they write why into
 * `why` (one line).  Not thread-safe.
 */
#ifndef SHIMMER_TOOLS_SPAWN_H
#define SHIMMER_TOOLS_SPAWN_H

#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

struct spawn {
	char dir[PATH_MAX];      /* the directory of the shimmer binary */
	char shimmerd[PATH_MAX];
	const char *db_opt;      /* --db, or NULL for the default name */
	char db[PATH_MAX];
	int db_is_ours;          /* we made the file: nobody else wrote it */
	pid_t pid;               /* the collector; 0 when none runs */
	int stop;                /* it stops at this pipe's EOF; -1 when none */
	char ready[512];         /* its ready line, without the newline */
};

/* An idle spawn for the store db_opt (NULL: the default name). */
void spawn_init(struct spawn *s, const char *db_opt);

/* Finds the shimmer binary's directory and the shimmerd in it. */
int spawn_find(struct spawn *s, char *why, size_t len);

/*
 * Names the store and makes it, private (0600) and exclusively: the store
 * holds the command line and every allocation.  The default name is
 * ./shimmer-HOST-PID-YYYYmmdd-HHMMSS.db (pid: the traced process's); a file
 * already there is refused, never reused: the name is predictable, and
 * another user could have made it to read the recording.  A --db that
 * exists is the user's own choice (the collector refuses it when it is no
 * shimmer store).
 */
int spawn_name_store(struct spawn *s, long pid, char *why, size_t len);

/*
 * Starts `shimmerd --foreground --quiet --db DB --ready-fd N --parent-fd M
 * ARGS...` (args: NULL-terminated) in a process group of its own (a ^C on
 * the terminal then reaches us, not it) with the signal mask mask, stdout
 * sent to stderr, and waits up to timeout_ms for its ready line.  When it
 * exits before it is ready, -ECHILD (it said why on stderr); it is never
 * left running on failure.
 */
int spawn_start(struct spawn *s, const char *const *args, const sigset_t *mask,
		int timeout_ms, char *why, size_t len);

/* Tells the collector to stop (closes the pipe), reaps it and warns when
 * it failed.  Returns its wait status, -1 when none ran. */
int spawn_stop(struct spawn *s);

/* Removes the store when we made it (it holds nothing worth keeping), with
 * SQLite's side files. */
void spawn_remove_store(struct spawn *s);

/* waitpid() that retries on EINTR; the wait status, or -1. */
int spawn_reap(pid_t pid);

#endif
