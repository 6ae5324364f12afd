/*
 * The intern table.  Design:
 *
 *  - TABLE_CAP entries of 32 bytes, linear probing from the text's 64-bit
 *    hash.  Entries are never removed, so a probe ends at the first EMPTY
 *    entry.  The table and the arena are MAP_NORESERVE: only the pages a
 *    process touches cost memory (a training job interns a few thousand
 *    kernel and API names).
 *
 *  - An entry's state word is the protocol:
 *        EMPTY              free
 *        BUSY | epoch       being filled, or being announced, by a thread
 *                           of this epoch: wait for it
 *        epoch              announced in this process: the id is usable
 *        any other value    filled, not (yet) announced in this process
 *                           (UNSENT after a failed send, an older epoch
 *                           after fork): the first thread to CAS it to
 *                           BUSY sends STRING, then stores the epoch
 *        DEAD               abandoned mid-fill by a fork: skipped
 *    Publishing the epoch with release after the send is what guarantees
 *    that the collector learns an id before any record can carry it.
 *
 *  - Ids come from one counter and are never reused, also across fork, so
 *    an entry keeps its id for the life of the process tree.
 */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>

#include "intern.h"
#include "wire.h"

#define TABLE_CAP (1u << 16) /* power of two */
#define ARENA_BYTES (32u << 20)
#define ST_EMPTY 0u
#define ST_UNSENT 1u
#define ST_BUSY 0x40000000u
#define ST_DEAD 0x80000000u
#define EPOCH_FIRST 2u
#define SPIN_LIMIT 20000u   /* ~1 ms of waiting for another thread */
#define SEND_TRIES 20       /* a full socket: ~1 ms, then give up this time */
#define SEND_NAP_NS 50000

struct intern_entry {
	uint32_t state;
	uint32_t id;
	uint32_t len;
	uint32_t pad;
	uint64_t hash;
	const char *text; /* NUL-terminated copy in the arena */
};

static struct intern_entry *table;
static char *arena;
static uint64_t arena_used;
static uint32_t next_id = 1;
static uint32_t epoch = EPOCH_FIRST;
static intern_send_fn *sender;
static const char *withhold; /* intern_withhold()'s text (settings' copy) */
static size_t withhold_len;

static uint64_t hash(const char *s, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
	return h ^ (h >> 29);
}

int intern_init(intern_send_fn *fn)
{
	void *p;

	if (!table) {
		p = mmap(0, (size_t)TABLE_CAP * sizeof(*table), PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p == MAP_FAILED)
			return -errno;
		arena = mmap(0, ARENA_BYTES, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (arena == MAP_FAILED) {
			arena = 0;
			munmap(p, (size_t)TABLE_CAP * sizeof(*table));
			return -errno;
		}
		__atomic_store_n(&table, p, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&sender, fn, __ATOMIC_RELEASE);
	return 0;
}

void intern_withhold(const char *text)
{
	withhold = text;
	withhold_len = text ? strlen(text) : 0;
}

void intern_fork_child(intern_send_fn *fn)
{
	uint32_t i, st;

	if (!table)
		return;
	/* Only this thread survived the fork: nobody will finish these. */
	for (i = 0; i < TABLE_CAP; i++) {
		st = table[i].state;
		if (st & ST_BUSY)
			table[i].state = table[i].text ? ST_UNSENT : ST_DEAD;
	}
	epoch++;
	if (epoch >= ST_BUSY)
		epoch = EPOCH_FIRST;
	sender = fn;
}

void intern_reconnect(void)
{
	uint32_t e = __atomic_load_n(&epoch, __ATOMIC_RELAXED) + 1;

	if (e >= ST_BUSY)
		e = EPOCH_FIRST;
	__atomic_store_n(&epoch, e, __ATOMIC_RELEASE);
}

uint32_t intern_epoch(void)
{
	return __atomic_load_n(&epoch, __ATOMIC_RELAXED);
}

/* Sends STRING (id, text); retries a full socket briefly.  0 or -errno. */
static int announce(uint32_t id, const char *s, uint32_t len)
{
	struct shm_msg_string m = {
		.hdr = { .magic = SHM_MAGIC, .version = SHM_WIRE_VERSION, .type = SHM_MSG_STRING,
			 .len = (uint32_t)sizeof(m) + len },
		.id = id,
		.len = len,
	};
	struct iovec iov[2] = { { &m, sizeof(m) }, { (void *)s, len } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
	struct timespec nap = { 0, SEND_NAP_NS };
	intern_send_fn *fn = __atomic_load_n(&sender, __ATOMIC_ACQUIRE);
	int tries, saved = errno, err = -ENOTCONN;

	for (tries = 0; fn && tries < SEND_TRIES; tries++) {
		/* (a withheld name meets a full socket every time) */
		err = withhold_len && memmem(s, len, withhold, withhold_len) ? -EAGAIN : fn(&mh);
		if (err != -EAGAIN && err != -EINTR && err != -ENOBUFS)
			goto out;
		nanosleep(&nap, 0);
	}
out:
	errno = saved;
	return err;
}

/* Waits while another thread of this process holds e BUSY; returns the
 * state seen last (still BUSY if it took too long). */
static uint32_t wait_busy(const struct intern_entry *e)
{
	uint32_t st, n;

	for (n = 0;; n++) {
		st = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
		if (!(st & ST_BUSY) || st == ST_DEAD || n >= SPIN_LIMIT)
			return st;
		if (n < 64)
			__builtin_ia32_pause();
		else
			sched_yield();
	}
}

uint32_t intern_id(const struct intern_entry *e)
{
	struct intern_entry *w = (struct intern_entry *)e;
	uint32_t st, cur = __atomic_load_n(&epoch, __ATOMIC_RELAXED);

	if (!e)
		return 0;
	for (;;) {
		st = __atomic_load_n(&w->state, __ATOMIC_ACQUIRE);
		if (st == cur)
			return w->id;
		if (st == ST_DEAD || st == ST_EMPTY)
			return 0;
		if (st & ST_BUSY) {
			st = wait_busy(w);
			if (st & ST_BUSY)
				return 0;
			continue;
		}
		if (__atomic_compare_exchange_n(&w->state, &st, ST_BUSY | cur, 0, __ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED)) {
			int ok = announce(w->id, w->text, w->len) == 0;

			__atomic_store_n(&w->state, ok ? cur : ST_UNSENT, __ATOMIC_RELEASE);
			return ok ? w->id : 0;
		}
	}
}

/* Copies s into the arena, NUL-terminated; NULL when it is full. */
static const char *arena_copy(const char *s, size_t len)
{
	uint64_t off = __atomic_fetch_add(&arena_used, len + 1, __ATOMIC_RELAXED);

	if (off + len + 1 > ARENA_BYTES)
		return 0;
	memcpy(arena + off, s, len);
	arena[off + len] = '\0';
	return arena + off;
}

const struct intern_entry *intern_lookup(const char *s, size_t len)
{
	struct intern_entry *tab = __atomic_load_n(&table, __ATOMIC_ACQUIRE), *e;
	const char *text;
	uint64_t h;
	uint32_t i, n, st;

	if (!tab || !s)
		return 0;
	if (len > INTERN_MAX_LEN)
		len = INTERN_MAX_LEN;
	h = hash(s, len);
	for (n = 0, i = (uint32_t)h & (TABLE_CAP - 1); n < TABLE_CAP;
	     n++, i = (i + 1) & (TABLE_CAP - 1)) {
		e = &tab[i];
		st = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
		if (st == ST_EMPTY) {
			if (!__atomic_compare_exchange_n(&e->state, &st,
							 ST_BUSY | __atomic_load_n(&epoch, __ATOMIC_RELAXED),
							 0, __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE))
				goto taken;
			text = arena_copy(s, len);
			if (!text) {
				__atomic_store_n(&e->state, ST_DEAD, __ATOMIC_RELEASE);
				return 0;
			}
			e->hash = h;
			e->len = (uint32_t)len;
			e->id = __atomic_fetch_add(&next_id, 1, __ATOMIC_RELAXED);
			/* Last: intern_fork_child() takes a set text for a whole entry. */
			__atomic_store_n(&e->text, text, __ATOMIC_RELEASE);
			__atomic_store_n(&e->state, ST_UNSENT, __ATOMIC_RELEASE);
			return e;
		}
taken:
		if ((st & ST_BUSY) && st != ST_DEAD)
			st = wait_busy(e);
		if (st == ST_DEAD)
			continue;
		if (st & ST_BUSY)
			return 0; /* its filler stalled: better no id than a wait */
		if (e->hash == h && e->len == len && !memcmp(e->text, s, len))
			return e;
	}
	return 0;
}

uint32_t intern_mem(const char *s, size_t len)
{
	const struct intern_entry *e;
	uint32_t id;

	if (!__atomic_load_n(&table, __ATOMIC_ACQUIRE) || !s)
		return 0;
	e = intern_lookup(s, len);
	if (e)
		return intern_id(e);
	/* Full: a fresh id every time is still correct, only less compact. */
	if (len > INTERN_MAX_LEN)
		len = INTERN_MAX_LEN;
	id = __atomic_fetch_add(&next_id, 1, __ATOMIC_RELAXED);
	return announce(id, s, (uint32_t)len) == 0 ? id : 0;
}

uint32_t intern_str(const char *s)
{
	return s ? intern_mem(s, strnlen(s, INTERN_MAX_LEN)) : 0;
}
