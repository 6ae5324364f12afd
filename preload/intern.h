/*
 * String interning: text -> a per-process id, announced to the collector
 * with one STRING message before any record can carry the id.
 *
 * Lock-free lookups, no malloc: an open-addressing table and a text arena,
 * both mmap'd once.  An entry is claimed with a CAS on its state, filled,
 * then announced by whichever thread first needs its id; threads that find
 * an entry mid-publication spin briefly.  Entries (and their ids) survive
 * fork: the child starts a new epoch and re-announces an entry on its
 * first use in that epoch, so a handle kept across fork (an NVTX domain)
 * stays valid.
 *
 * All functions are thread-safe and never block for long (a full socket is
 * retried for about a millisecond).  None is async-signal-safe.
 */
#ifndef SHIMMER_INTERN_H
#define SHIMMER_INTERN_H

#include <stddef.h>
#include <stdint.h>

/* Longer strings are interned by their first INTERN_MAX_LEN bytes. */
#define INTERN_MAX_LEN 8192u

struct intern_entry;

/* How STRING messages go out: 0, or -errno (-EAGAIN for a full socket,
 * retried briefly).  struct msghdr is <sys/socket.h>'s. */
struct msghdr;
typedef int intern_send_fn(const struct msghdr *mh);

/*
 * Maps the table on the first call and sends STRING messages with fn
 * from now on.  Not thread-safe (constructor).  0 or -errno; until it
 * succeeds every lookup yields id 0.
 */
int intern_init(intern_send_fn *fn);

/* For tests (SHIMMER_TEST_WITHHOLD): every string that contains text is
 * announced as if the collector's socket stayed full, so it never is and
 * its id is 0, as under load; NULL or "": none.  text is kept, not
 * copied (settings.withhold lives as long as the process).  Not
 * thread-safe (constructor). */
void intern_withhold(const char *text);

/* Fork child, before any other thread exists: every string is announced
 * again (with fn) when next used.  An entry the parent was filling when
 * it forked is abandoned. */
void intern_fork_child(intern_send_fn *fn);

/* A new collector took over (a reconnect): every string is announced
 * again at its next use, ids kept (the dead collector may not have
 * stored it).  Async-signal-safe, any thread. */
void intern_reconnect(void);

/* Changes when every string must be announced again (fork, reconnect):
 * a cache of ids filled in another epoch must not be used without
 * intern_id().  Any thread. */
uint32_t intern_epoch(void);

/* The entry for s[0..len), created if new; NULL when the table or arena
 * is full, or before intern_init.  The pointer is stable for the process's
 * life and its children's. */
const struct intern_entry *intern_lookup(const char *s, size_t len);

/* The entry's id, announcing it first if this process has not; 0 when
 * e is NULL or the announcement could not be sent (retried next time). */
uint32_t intern_id(const struct intern_entry *e);

/* The id of s (NUL-terminated) or s[0..len); 0 when it could not be
 * announced.  With the table full a fresh id is announced on every call. */
uint32_t intern_str(const char *s);
uint32_t intern_mem(const char *s, size_t len);

#endif /* SHIMMER_INTERN_H */
