/*
 * The service configuration file, /etc/shimmer/shimmerd.conf: one reader
 * for the three programs that use it.  shimmerd takes its own keys from it
 * (each is also a command-line flag of the same name); the shim takes the
 * socket and the defaults of the SHIMMER_* settings (a process's own
 * environment wins); shimmer takes the socket.
 *
 * Syntax: one "key = value" per line; '#' at the start of a line (after
 * blanks) makes it a comment; blank lines are skipped; blanks around key
 * and value are dropped; a value may be written in double quotes (kept as
 * written between them, no escapes).
 *
 * Nothing here allocates or uses stdio, so the shim calls it from its
 * constructor.  Thread-safe (no state).
 */
#ifndef SHIMMER_CONF_H
#define SHIMMER_CONF_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Where shimmerd, the shim and shimmer look unless told otherwise. */
#ifndef SHIMMER_CONF_PATH
#define SHIMMER_CONF_PATH "/etc/shimmer/shimmerd.conf"
#endif
#define SHIMMER_SOCKET_PATH "/run/shimmer/shimmer.sock"

/* Largest configuration file read. */
#define CONF_MAX_BYTES 65536u

struct conf_line {
	const char *key, *val; /* not NUL-terminated: key_len, val_len bytes */
	size_t key_len, val_len;
	unsigned lineno;       /* from 1 */
};

/*
 * Calls fn for each key = value line of text[0..len), in order; a line
 * that is neither blank, nor a comment, nor key = value (no '=', an empty
 * key, an unterminated quote) reaches fn with key NULL and val the whole
 * line.  Stops at the first non-zero return of fn and returns it, else 0.
 */
int conf_parse(const char *text, size_t len,
	       int (*fn)(void *ctx, const struct conf_line *l), void *ctx);

/* Reads path into buf (at most cap - 1 bytes) and NUL-terminates it.
 * Returns the length, or -errno (-EFBIG when the file does not fit). */
ssize_t conf_read(const char *path, char *buf, size_t cap);

/* Whether line l's key is name. */
int conf_is(const struct conf_line *l, const char *name);

/*
 * A duration, s[0..len): a decimal number (a fraction allowed) and a unit,
 * ns, us, ms, s, m, h or d; a bare number is seconds.  0 or -1 (not one,
 * or past ~292 years).
 */
int conf_duration(const char *s, size_t len, uint64_t *ns);

/*
 * A count: decimal digits only, s[0..len) (no sign, blank, "0x" or
 * exponent), at most max.  0 or -1 (not one, or above max: never wrapped).
 * The rule for every count and pid on shimmer's and shimmerd's command
 * lines (docs/usage.md, "Numbers, sizes and durations").
 */
int conf_count(const char *s, size_t len, uint64_t max, uint64_t *n);

/*
 * Process ids.  The kernel hands out pids from 1 to pid_max - 1, and no
 * kernel lets pid_max above CONF_PID_MAX_LIMIT (its PID_MAX_LIMIT on 64-bit
 * machines, 2^22).  A pid of a live process here is checked against this
 * kernel's pid_max; one recorded in a store, perhaps on another machine,
 * against the limit.
 */
#define CONF_PID_MAX_LIMIT 4194304u

/* This kernel's pid_max (/proc/sys/kernel/pid_max): every pid is below it.
 * CONF_PID_MAX_LIMIT when the file cannot be read or holds no count in
 * [2, CONF_PID_MAX_LIMIT]. */
uint64_t conf_pid_max(void);

/* A size: a whole number of bytes, or with K, M, G or T (KiB, MiB, GiB,
 * TiB; "KiB" and "KB" are read alike).  0 or -1. */
int conf_size(const char *s, size_t len, uint64_t *bytes);

#endif /* SHIMMER_CONF_H */
