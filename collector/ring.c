/*
 * Reading a region follows the ring protocol of common/wire.h.  The
 * producer can write its region at any moment, so nothing is used where it
 * lies: head is read once per pass (acquire) and checked against our own
 * copy of tail, and each record is copied out before its header is checked
 * and used.  A pass over a slot consumes at most the bytes published when
 * it started, so no loop is driven by the producer.  A malformed record
 * stops its slot for good (it is never read again); the rest of the region
 * is still drained.
 *
 * Blocks move between threads: one thread's free often ends a block that
 * another allocated, and the two records sit in different rings.  So a
 * pass merges the slots in rec_key() order with a binary min-heap of
 * cursors (one per slot with records), up to a limit read before any head:
 * a record stamped before the limit was published before any record whose
 * call began after it, so every block a merged free refers to has its
 * allocation in this pass or an earlier one.
 *
 * Exact counters: per slot we keep the count[]/bytes[]/dropped values
 * already handed on and hand on only the difference.  When a retired slot
 * has been drained and its totals handed on, we zero its counters before
 * setting it FREE, so the next owner's counts start from zero whether or
 * not the producer also zeroes them on claim; a new generation also
 * restarts our baseline.
 */
#include "ring.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <linux/futex.h>
#include <linux/magic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "drops.h"

struct slot_state {
	uint64_t tail;
	uint64_t consumed; /* records handed to the sink, over the slot's life */
	uint64_t generation;
	uint64_t dropped;
	uint64_t count[SHM_FN_COUNT];
	uint64_t bytes[SHM_FN_COUNT];
	int bad;
};

/* Where a pass stands in one slot: the next record, copied out. */
struct cursor {
	uint32_t slot;
	uint32_t tid;
	uint32_t state;
	uint64_t head, tail;
	uint64_t key; /* when the next record's event took effect (rec_key()) */
	union rec rec;
};

/* The collector's line of the control block (wire.h). */
struct ctl_line {
	uint32_t seq, id, cmd, user;
	uint64_t ts, start_at, stop_at, duration;
};

struct ring {
	void *map;
	size_t map_bytes;
	struct shm_region *region;
	uint32_t nslots, ring_bytes;
	struct slot_state *slots;
	struct cursor *cursors;           /* nslots of them, for ring_drain() */
	struct cursor **frontier, **heap; /* the pass's open cursors; the merge's heap */
	uint64_t no_slot_stored;
	uint64_t cupti_stored;
	uint64_t stack_full_stored, pystack_full_stored;
	uint64_t heartbeat;
	int busy; /* the last pass found a slot at least RING_BUSY_FILL full */
	struct ctl_line ctl; /* the region's control line as we last wrote it (ours, not its) */
	uint64_t began_seen; /* ctl_began as last seen */
	char why[256]; /* the first reason data was invalid */
};

/* A slot this full (a share of its ring) when a pass begins makes the ring
 * busy: its producer fills it faster than a timer's passes would drain it. */
#define RING_BUSY_SHIFT 2 /* a quarter */

/* Keeps the first reason and returns -EBADMSG. */
__attribute__((format(printf, 2, 3)))
static int invalid(struct ring *r, const char *fmt, ...)
{
	va_list ap;

	if (!r->why[0]) {
		va_start(ap, fmt);
		vsnprintf(r->why, sizeof(r->why), fmt, ap);
		va_end(ap);
	}
	return -EBADMSG;
}

int ring_busy(const struct ring *r)
{
	return r->busy;
}

const char *ring_why(const struct ring *r)
{
	return r->why;
}

static struct shm_slot *slot_at(const struct ring *r, uint32_t i)
{
	return (struct shm_slot *)((char *)r->map + SHM_REGION_HDR_BYTES +
				   i * SHM_SLOT_STRIDE(r->ring_bytes));
}

/* ---- mapping ---- */

__attribute__((format(printf, 3, 4)))
static struct ring *refuse(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	errno = EBADMSG;
	return NULL;
}

static int check_geometry(const struct ring_geometry *g, char *why, size_t len)
{
	if (g->nslots == 0 || g->nslots > SHM_SLOTS_MAX)
		return refuse(why, len, "HELLO nslots %u outside [1, %u]", g->nslots,
			      SHM_SLOTS_MAX), -EBADMSG;
	if (g->ring_bytes < SHM_RING_MIN_BYTES || g->ring_bytes > SHM_RING_MAX_BYTES ||
	    (g->ring_bytes & (g->ring_bytes - 1)))
		return refuse(why, len, "HELLO ring_bytes %u is not a power of two in [%u, %u]",
			      g->ring_bytes, SHM_RING_MIN_BYTES, SHM_RING_MAX_BYTES), -EBADMSG;
	if (g->region_bytes != SHM_REGION_BYTES(g->nslots, g->ring_bytes))
		return refuse(why, len, "HELLO region_bytes %llu does not match %u slots of %u bytes",
			      (unsigned long long)g->region_bytes, g->nslots, g->ring_bytes),
		       -EBADMSG;
	return 0;
}

struct ring *ring_new(int memfd, const struct ring_geometry *g, char *why, size_t why_len)
{
	struct shm_region hdr;
	struct ring *r;
	struct statfs fs;
	struct stat sb;
	int seals;
	void *map;

	if (check_geometry(g, why, why_len))
		return NULL;
	/* Seals first, then the size: once F_SEAL_SHRINK is on, the size
	 * can only grow, so a size checked after it holds for as long as
	 * the mapping lives.  (The other order lets the producer shrink the
	 * file between the two checks and seal it, and the first read past
	 * its end would kill the daemon with SIGBUS.)  Only a tmpfs file (a
	 * memfd): a hugetlbfs one may fail to fault its pages in. */
	seals = fcntl(memfd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK))
		return refuse(why, why_len, "region memfd is not sealed against shrinking");
	if (fstatfs(memfd, &fs) < 0 || fs.f_type != TMPFS_MAGIC)
		return refuse(why, why_len, "region is not a memfd");
	if (fstat(memfd, &sb) < 0 || (uint64_t)sb.st_size != g->region_bytes)
		return refuse(why, why_len, "region memfd is not %llu bytes long",
			      (unsigned long long)g->region_bytes);
	map = mmap(NULL, g->region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (map == MAP_FAILED)
		return refuse(why, why_len, "cannot map the region: %s", strerror(errno));
	memcpy(&hdr, map, sizeof(hdr));
	if (hdr.magic != SHM_MAGIC || hdr.version != SHM_WIRE_VERSION ||
	    hdr.nslots != g->nslots || hdr.ring_bytes != g->ring_bytes) {
		munmap(map, g->region_bytes);
		return refuse(why, why_len, "region header does not match HELLO");
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		goto nomem;
	r->map = map;
	r->map_bytes = g->region_bytes;
	r->region = map;
	/* Counting on from a dead collector's beats (a reconnect), never back
	 * to a value the shim saw before: it takes an unchanged heartbeat
	 * for a collector that has not read (thread.c, init.c). */
	r->heartbeat = __atomic_load_n(&r->region->heartbeat, __ATOMIC_ACQUIRE);
	r->nslots = g->nslots;
	r->ring_bytes = g->ring_bytes;
	r->slots = calloc(g->nslots, sizeof(*r->slots));
	r->cursors = calloc(g->nslots, sizeof(*r->cursors));
	r->frontier = calloc(g->nslots, sizeof(*r->frontier));
	r->heap = calloc(g->nslots, sizeof(*r->heap));
	if (!r->slots || !r->cursors || !r->frontier || !r->heap) {
		ring_free(r);
		errno = ENOMEM;
		return NULL;
	}
	for (uint32_t i = 0; i < r->nslots; i++) {
		r->slots[i].tail = __atomic_load_n(&slot_at(r, i)->tail, __ATOMIC_RELAXED);
		r->slots[i].consumed = __atomic_load_n(&slot_at(r, i)->consumed, __ATOMIC_RELAXED);
	}
	return r;
nomem:
	munmap(map, g->region_bytes);
	errno = ENOMEM;
	return NULL;
}

/*
 * Writes our copy of the control line into the region under its sequence
 * lock: the sequence made odd by a read-modify-write (acquire: the field
 * stores stay after it), the fields, the sequence even again (release).
 * We are the line's only writer from HELLO on; a process that scribbles on
 * it only confuses its own control.
 */
static void ctl_publish(struct ring *r)
{
	struct shm_region *g = r->region;
	struct ctl_line *l = &r->ctl;

	__atomic_exchange_n(&g->ctl_seq, l->seq + 1, __ATOMIC_ACQ_REL);
	__atomic_store_n(&g->ctl_id, l->id, __ATOMIC_RELAXED);
	__atomic_store_n(&g->ctl_cmd, l->cmd, __ATOMIC_RELAXED);
	__atomic_store_n(&g->ctl_user, l->user, __ATOMIC_RELAXED);
	__atomic_store_n(&g->ctl_ts, l->ts, __ATOMIC_RELAXED);
	__atomic_store_n(&g->ctl_start_at, l->start_at, __ATOMIC_RELAXED);
	__atomic_store_n(&g->ctl_stop_at, l->stop_at, __ATOMIC_RELAXED);
	__atomic_store_n(&g->ctl_duration_ns, l->duration, __ATOMIC_RELAXED);
	l->seq += 2;
	__atomic_store_n(&g->ctl_seq, l->seq, __ATOMIC_RELEASE);
}

/* A new command, in force from now (ts, the process's record clock). */
static uint32_t ctl_post(struct ring *r, uint32_t cmd, uint64_t ts)
{
	if (!++r->ctl.id)
		r->ctl.id = 1; /* 0 means none */
	r->ctl.cmd = cmd;
	r->ctl.ts = ts;
	ctl_publish(r);
	return r->ctl.id;
}

static uint64_t ns_after(uint64_t t, uint64_t d)
{
	return t + d < t ? UINT64_MAX : t + d;
}

void ring_control_start(struct ring *r)
{
	struct shm_region *g = r->region;

	/* The process's plan, written before HELLO: only times, acted on in
	 * its own region. */
	r->ctl.start_at = __atomic_load_n(&g->ctl_start_at, __ATOMIC_RELAXED);
	r->ctl.stop_at = __atomic_load_n(&g->ctl_stop_at, __ATOMIC_RELAXED);
	r->ctl.duration = __atomic_load_n(&g->ctl_duration_ns, __ATOMIC_RELAXED);
	r->began_seen = __atomic_load_n(&g->ctl_began, __ATOMIC_RELAXED);
}

uint32_t ring_control(struct ring *r, uint32_t op, uint64_t arg, uint64_t now, uint64_t ts)
{
	/* The user took over: what was planned is off. */
	r->ctl.start_at = r->ctl.stop_at = r->ctl.duration = 0;
	r->ctl.user++;
	if (op == SHM_REQ_WINDOW)
		r->ctl.stop_at = ns_after(now, arg);
	return ctl_post(r, op == SHM_REQ_PAUSE ? SHM_CTL_PAUSE : SHM_CTL_RESUME, ts);
}

uint64_t ring_control_tick(struct ring *r, uint64_t now, uint64_t ts)
{
	uint64_t began = __atomic_load_n(&r->region->ctl_began, __ATOMIC_ACQUIRE);
	struct ctl_line *l = &r->ctl;

	if (began != r->began_seen) {
		r->began_seen = began;
		/* A range trigger began recording: SHIMMER_DURATION's stop. */
		if (began && l->duration) {
			l->stop_at = ns_after(began, l->duration);
			l->duration = 0;
			ctl_publish(r);
		}
	}
	if (l->start_at && now >= l->start_at) {
		l->start_at = 0;
		if (l->duration) {
			l->stop_at = ns_after(now, l->duration);
			l->duration = 0;
		}
		ctl_post(r, SHM_CTL_RESUME, ts);
	}
	if (l->stop_at && now >= l->stop_at) {
		l->stop_at = 0;
		ctl_post(r, SHM_CTL_PAUSE, ts);
	}
	if (!l->start_at || (l->stop_at && l->stop_at < l->start_at))
		return l->stop_at;
	return l->start_at;
}

uint32_t ring_control_state(const struct ring *r)
{
	uint32_t st = __atomic_load_n(&r->region->ctl_state, __ATOMIC_RELAXED) &
		      (SHM_STATE_RECORDING | SHM_STATE_CONTROL);

	/* A command the process has not applied yet (it made no traced
	 * call since) is the state in force all the same. */
	if (r->ctl.id && __atomic_load_n(&r->region->ctl_done, __ATOMIC_ACQUIRE) != r->ctl.id)
		st = (st & ~SHM_STATE_RECORDING) |
		     (r->ctl.cmd == SHM_CTL_RESUME ? SHM_STATE_RECORDING : 0);
	return st;
}

void ring_free(struct ring *r)
{
	if (!r)
		return;
	if (r->map)
		munmap(r->map, r->map_bytes);
	free(r->slots);
	free(r->cursors);
	free(r->frontier);
	free(r->heap);
	free(r);
}

/* ---- counters ---- */

/* A new owner (generation) restarts the baseline of the counters and the
 * sink's state for the slot. */
static void sync_owner(struct ring *r, uint32_t i, const struct rec_sink *sink)
{
	struct slot_state *ss = &r->slots[i];
	uint64_t gen = __atomic_load_n(&slot_at(r, i)->generation, __ATOMIC_ACQUIRE);

	if (gen == ss->generation)
		return;
	ss->generation = gen;
	ss->dropped = 0;
	memset(ss->count, 0, sizeof(ss->count));
	memset(ss->bytes, 0, sizeof(ss->bytes));
	sink->stream_new(sink->ctx, i);
}

/* Difference since the last hand-on; a counter that went backwards was
 * restarted by its owner, so all of it is new. */
static uint64_t delta(uint64_t *stored, uint64_t now)
{
	uint64_t d = now >= *stored ? now - *stored : now;

	*stored = now;
	return d;
}

static int flush_slot(struct ring *r, uint32_t i, const struct rec_sink *sink)
{
	struct shm_slot *sl = slot_at(r, i);
	struct slot_state *ss = &r->slots[i];
	uint32_t tid = __atomic_load_n(&sl->tid, __ATOMIC_RELAXED);
	uint64_t d;
	int err = 0;

	sync_owner(r, i, sink);
	for (uint16_t fn = 1; !err && fn < SHM_FN_COUNT; fn++) {
		uint64_t dc = delta(&ss->count[fn], __atomic_load_n(&sl->count[fn], __ATOMIC_RELAXED));
		uint64_t db = delta(&ss->bytes[fn], __atomic_load_n(&sl->bytes[fn], __ATOMIC_RELAXED));

		if (dc || db)
			err = sink->counts(sink->ctx, tid, fn, dc, db);
	}
	d = delta(&ss->dropped, __atomic_load_n(&sl->dropped, __ATOMIC_RELAXED));
	if (!err && d)
		err = sink->drops(sink->ctx, tid, "ring_full", d);
	return err;
}

/* A retired slot is drained: hand on its totals, zero its counters and
 * hand it back to the producer. */
static int free_slot(struct ring *r, uint32_t i, const struct rec_sink *sink)
{
	struct shm_slot *sl = slot_at(r, i);
	struct slot_state *ss = &r->slots[i];
	int err = flush_slot(r, i, sink);

	if (err)
		return err;
	memset(sl->count, 0, sizeof(sl->count));
	memset(sl->bytes, 0, sizeof(sl->bytes));
	sl->dropped = 0;
	sl->committed_dropped = 0;
	memset(sl->committed_count, 0, sizeof(sl->committed_count));
	memset(sl->committed_bytes, 0, sizeof(sl->committed_bytes));
	ss->dropped = 0;
	memset(ss->count, 0, sizeof(ss->count));
	memset(ss->bytes, 0, sizeof(ss->bytes));
	__atomic_store_n(&sl->state, SHM_SLOT_FREE, __ATOMIC_RELEASE);
	return 0;
}

int ring_flush(struct ring *r, const struct rec_sink *sink)
{
	uint32_t hwm = __atomic_load_n(&r->region->slots_hwm, __ATOMIC_ACQUIRE);
	uint64_t d;
	int err = 0;

	for (uint32_t i = 0; !err && i < hwm && i < r->nslots; i++)
		if (__atomic_load_n(&slot_at(r, i)->state, __ATOMIC_ACQUIRE) != SHM_SLOT_FREE)
			err = flush_slot(r, i, sink);
	d = delta(&r->no_slot_stored,
		  __atomic_load_n(&r->region->dropped_no_slot, __ATOMIC_RELAXED));
	if (!err && d)
		err = sink->drops(sink->ctx, 0, "no_slot", d);
	d = delta(&r->cupti_stored,
		  __atomic_load_n(&r->region->dropped_cupti, __ATOMIC_RELAXED));
	if (!err && d)
		err = sink->drops(sink->ctx, 0, "cupti", d);
	/* Stack captures the shim's tables refused: events stored without
	 * that stack, listed with the drops but not lost (drops.h). */
	d = delta(&r->stack_full_stored,
		  __atomic_load_n(&r->region->stack_full, __ATOMIC_RELAXED));
	if (!err && d)
		err = sink->drops(sink->ctx, 0, DROP_STACK_FULL, d);
	d = delta(&r->pystack_full_stored,
		  __atomic_load_n(&r->region->pystack_full, __ATOMIC_RELAXED));
	if (!err && d)
		err = sink->drops(sink->ctx, 0, DROP_PYSTACK_FULL, d);
	return err;
}

void ring_committed(struct ring *r)
{
	uint32_t hwm = __atomic_load_n(&r->region->slots_hwm, __ATOMIC_ACQUIRE);

	for (uint32_t i = 0; i < hwm && i < r->nslots; i++) {
		struct shm_slot *sl = slot_at(r, i);

		struct slot_state *ss = &r->slots[i];

		__atomic_store_n(&sl->committed, ss->consumed, __ATOMIC_RELAXED);
		__atomic_store_n(&sl->committed_gen, ss->generation, __ATOMIC_RELAXED);
		__atomic_store_n(&sl->committed_dropped, ss->dropped, __ATOMIC_RELAXED);
		for (uint16_t fn = 1; fn < SHM_FN_COUNT; fn++) {
			__atomic_store_n(&sl->committed_count[fn], ss->count[fn], __ATOMIC_RELAXED);
			__atomic_store_n(&sl->committed_bytes[fn], ss->bytes[fn], __ATOMIC_RELAXED);
		}
	}
	__atomic_store_n(&r->region->committed_no_slot, r->no_slot_stored, __ATOMIC_RELAXED);
	__atomic_store_n(&r->region->committed_cupti, r->cupti_stored, __ATOMIC_RELAXED);
	__atomic_store_n(&r->region->committed_stack_full, r->stack_full_stored, __ATOMIC_RELAXED);
	__atomic_store_n(&r->region->committed_pystack_full, r->pystack_full_stored,
			 __ATOMIC_RELAXED);
}

void ring_ended(struct ring *r, uint32_t how)
{
	__atomic_store_n(&r->region->collector_ended, how, __ATOMIC_RELEASE);
}

/* What is lost between a committed mark and the value now: a mark above
 * the value (the region is the client's to scribble on) loses nothing. */
static uint64_t since_mark(uint64_t now, uint64_t mark)
{
	return now > mark ? now - mark : 0;
}

int ring_resume(struct ring *r, uint64_t *lost,
		int (*slot)(void *ctx, uint32_t tid, uint64_t lost), void *ctx)
{
	struct shm_region *g = r->region;
	uint32_t hwm = __atomic_load_n(&g->slots_hwm, __ATOMIC_ACQUIRE);
	uint64_t n, v;
	int err = 0;

	for (uint32_t i = 0; i < hwm && i < r->nslots; i++) {
		struct shm_slot *sl = slot_at(r, i);
		struct slot_state *ss = &r->slots[i];
		uint64_t gen = __atomic_load_n(&sl->generation, __ATOMIC_ACQUIRE);

		if (__atomic_load_n(&sl->state, __ATOMIC_ACQUIRE) == SHM_SLOT_FREE)
			continue;
		/* Read but never committed: gone from the ring (its tail moved
		 * past them), never stored. */
		n = since_mark(ss->consumed, __atomic_load_n(&sl->committed, __ATOMIC_RELAXED));
		/* The counters go on from what the store holds of this owner;
		 * for an owner the dead collector never committed, from 0. */
		ss->generation = gen;
		if (__atomic_load_n(&sl->committed_gen, __ATOMIC_RELAXED) == gen) {
			for (uint16_t fn = 1; fn < SHM_FN_COUNT; fn++) {
				ss->count[fn] = __atomic_load_n(&sl->committed_count[fn], __ATOMIC_RELAXED);
				ss->bytes[fn] = __atomic_load_n(&sl->committed_bytes[fn], __ATOMIC_RELAXED);
			}
			ss->dropped = __atomic_load_n(&sl->committed_dropped, __ATOMIC_RELAXED);
		}
		/* Dropped since the last commit (rings nobody read fill up):
		 * lost with the collector, counted here, not as ring_full. */
		v = __atomic_load_n(&sl->dropped, __ATOMIC_RELAXED);
		n += since_mark(v, ss->dropped);
		ss->dropped = v;
		if (!err)
			err = slot(ctx, __atomic_load_n(&sl->tid, __ATOMIC_RELAXED), n);
	}
	v = __atomic_load_n(&g->dropped_no_slot, __ATOMIC_RELAXED);
	n = since_mark(v, __atomic_load_n(&g->committed_no_slot, __ATOMIC_RELAXED));
	r->no_slot_stored = v;
	v = __atomic_load_n(&g->dropped_cupti, __ATOMIC_RELAXED);
	n += since_mark(v, __atomic_load_n(&g->committed_cupti, __ATOMIC_RELAXED));
	r->cupti_stored = v;
	/* Refused stack captures lose no event: those the dead collector
	 * did not commit are handed on by the next flush, from its marks. */
	r->stack_full_stored = __atomic_load_n(&g->committed_stack_full, __ATOMIC_RELAXED);
	r->pystack_full_stored = __atomic_load_n(&g->committed_pystack_full, __ATOMIC_RELAXED);
	/* The control line goes on where the dead collector left it, so that
	 * the shim sees each later command as new (ctl_seq moves on). */
	v = __atomic_load_n(&g->ctl_seq, __ATOMIC_ACQUIRE);
	r->ctl.seq = (uint32_t)(v + 1) & ~1u;
	r->ctl.id = __atomic_load_n(&g->ctl_id, __ATOMIC_RELAXED);
	r->ctl.cmd = __atomic_load_n(&g->ctl_cmd, __ATOMIC_RELAXED);
	r->ctl.user = __atomic_load_n(&g->ctl_user, __ATOMIC_RELAXED);
	r->ctl.ts = __atomic_load_n(&g->ctl_ts, __ATOMIC_RELAXED);
	ring_control_start(r);
	/* It died half way through writing the line: make it whole. */
	if (v & 1)
		ctl_publish(r);
	*lost = n;
	return err;
}

/* ---- cursors ---- */

/* Stops slot i for good after malformed data; a malformed record (counted)
 * is one event lost. */
__attribute__((format(printf, 5, 6)))
static int bad_slot(struct ring *r, uint32_t i, const struct rec_sink *sink, int counted,
		    const char *fmt, ...)
{
	uint32_t tid = __atomic_load_n(&slot_at(r, i)->tid, __ATOMIC_RELAXED);
	char why[200];
	va_list ap;
	int err = 0;

	r->slots[i].bad = 1;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (counted)
		err = sink->drops(sink->ctx, tid, "malformed", 1);
	return err ? err : invalid(r, "slot %u: %s", i, why);
}

/* Copies out and checks the record at cur->tail, skipping PAD.  Returns 1
 * when a record is ready, 0 at head, -EBADMSG for a malformed record.
 * The header is copied and checked first, then only the record's own
 * bytes follow it (most records are far smaller than a stack). */
static int cursor_peek(const struct ring *r, struct cursor *cur)
{
	const unsigned char *ring = (const unsigned char *)slot_at(r, cur->slot) + SHM_SLOT_CTL_BYTES;
	uint64_t prev = cur->key;

	while (cur->tail != cur->head) {
		size_t pos = cur->tail & (r->ring_bytes - 1);
		size_t avail = cur->head - cur->tail, room = r->ring_bytes - pos;
		union rec *rec = &cur->rec;

		if (avail < sizeof(rec->h))
			return -EBADMSG;
		memcpy(&rec->h, ring + pos, sizeof(rec->h));
		if (rec->h.size < 8 || rec->h.size % 8 || rec->h.size > avail || rec->h.size > room)
			return -EBADMSG;
		if (rec->h.type == SHM_REC_PAD) {
			if (pos + rec->h.size != r->ring_bytes)
				return -EBADMSG;
			cur->tail += rec->h.size;
			continue;
		}
		if (rec->h.size > sizeof(*rec))
			return -EBADMSG;
		memcpy((unsigned char *)rec + sizeof(rec->h), ring + pos + sizeof(rec->h),
		       rec->h.size - sizeof(rec->h));
		if (rec_check(rec))
			return -EBADMSG;
		cur->key = rec_key(rec, prev);
		return 1;
	}
	return 0;
}

/* A binary min-heap of cursors by key: the merge's frontier. */
static void heap_sift_up(struct cursor **h, size_t i)
{
	while (i && h[(i - 1) / 2]->key > h[i]->key) {
		struct cursor *t = h[i];

		h[i] = h[(i - 1) / 2];
		h[(i - 1) / 2] = t;
		i = (i - 1) / 2;
	}
}

static void heap_sift_down(struct cursor **h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		struct cursor *t;

		if (l < n && h[l]->key < h[m]->key)
			m = l;
		if (l + 1 < n && h[l + 1]->key < h[m]->key)
			m = l + 1;
		if (m == i)
			return;
		t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

/* Opens slot i for a pass; returns 1 if it has records to merge. */
static int cursor_open(struct ring *r, struct cursor *cur, uint32_t i,
		       const struct rec_sink *sink)
{
	struct shm_slot *sl = slot_at(r, i);

	cur->slot = i;
	cur->state = __atomic_load_n(&sl->state, __ATOMIC_ACQUIRE);
	if (cur->state == SHM_SLOT_FREE)
		return 0;
	if (cur->state != SHM_SLOT_ACTIVE && cur->state != SHM_SLOT_RETIRED)
		return bad_slot(r, i, sink, 0, "state %u", cur->state);
	cur->head = __atomic_load_n(&sl->head, __ATOMIC_ACQUIRE);
	cur->tid = __atomic_load_n(&sl->tid, __ATOMIC_RELAXED);
	cur->tail = r->slots[i].tail;
	cur->key = 0; /* what a stack first in this pass takes (rec_key()) */
	sync_owner(r, i, sink);
	if (cur->head - cur->tail > r->ring_bytes || (cur->head - cur->tail) % 8)
		return bad_slot(r, i, sink, 0, "head %llu is not within a ring of tail %llu",
				(unsigned long long)cur->head, (unsigned long long)cur->tail);
	return 1;
}

static int cursor_fail(struct ring *r, struct cursor *cur, const struct rec_sink *sink)
{
	return bad_slot(r, cur->slot, sink, 1, "bad record (type %u, size %u, fn %u) at byte %llu",
			cur->rec.h.type, cur->rec.h.size, cur->rec.h.fn,
			(unsigned long long)cur->tail);
}

/* Hands the bytes consumed up to tail back to the producer, with the
 * count of the records they held (the committed marks, wire.h). */
static void hand_back(struct ring *r, uint32_t i, uint64_t tail)
{
	struct shm_slot *sl = slot_at(r, i);

	r->slots[i].tail = tail;
	__atomic_store_n(&sl->consumed, r->slots[i].consumed, __ATOMIC_RELAXED);
	__atomic_store_n(&sl->tail, tail, __ATOMIC_RELEASE);
}

/* Hands consumed bytes back to the producer; frees a retired slot once
 * it is empty. */
static int cursor_close(struct ring *r, struct cursor *cur, const struct rec_sink *sink)
{
	hand_back(r, cur->slot, cur->tail);
	if (cur->state == SHM_SLOT_RETIRED && cur->tail == cur->head && !r->slots[cur->slot].bad)
		return free_slot(r, cur->slot, sink);
	return 0;
}

/*
 * Lossless producers sleep on the region's wake futex until a pass made
 * room or freed a slot (wire.h).  Both sides look at waiters with a
 * read-modify-write (ours adds 0): the two are ordered, and whichever
 * comes second sees the other's side, our tail and slot stores before it
 * or their count.  (A fence would do on x86, but ThreadSanitizer knows
 * none.)  A
 * producer can keep waiters non-zero for nothing; that costs it a futex
 * call per pass, no more.
 */
static void wake(struct ring *r)
{
	if (!__atomic_fetch_add(&r->region->waiters, 0, __ATOMIC_SEQ_CST))
		return;
	__atomic_fetch_add(&r->region->wake, 1, __ATOMIC_SEQ_CST);
	syscall(SYS_futex, &r->region->wake, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

int ring_drain(struct ring *r, uint64_t limit, const struct rec_sink *sink)
{
	uint32_t hwm, n = 0, nheap = 0;
	int bad = 0, err = 0;

	r->busy = 0;
	hwm = __atomic_load_n(&r->region->slots_hwm, __ATOMIC_ACQUIRE);
	if (hwm > r->nslots) {
		bad = invalid(r, "slots_hwm %u exceeds nslots %u", hwm, r->nslots);
		hwm = r->nslots;
	}
	for (uint32_t i = 0; i < hwm; i++) {
		struct cursor *cur = &r->cursors[n];
		int o = r->slots[i].bad ? 0 : cursor_open(r, cur, i, sink);

		if (o == -EBADMSG)
			bad = o;
		else if (o < 0)
			return o;
		else if (o) {
			r->frontier[n++] = cur;
			if (cur->head - cur->tail >= r->ring_bytes >> RING_BUSY_SHIFT)
				r->busy = 1;
		}
	}
	for (uint32_t k = 0; k < n; k++) {
		struct cursor *cur = r->frontier[k];
		int p = cursor_peek(r, cur);

		if (p < 0)
			bad = cursor_fail(r, cur, sink);
		else if (p && cur->key <= limit)
			r->heap[nheap++] = cur, heap_sift_up(r->heap, nheap - 1);
	}
	while (nheap && !err) {
		struct cursor *cur = r->heap[0];
		int p;

		err = sink->record(sink->ctx, cur->slot, cur->tid, &cur->rec);
		if (err)
			break;
		r->slots[cur->slot].consumed++;
		cur->tail += cur->rec.h.size;
		/* Room handed back as the pass goes, an eighth of the ring at
		 * a time, not only when it ends: a pass over a full ring takes
		 * as long as the producer took to fill it, and a lossless
		 * producer waiting for room would wait all that time.  (What
		 * lies before cur->tail was copied out already.) */
		if (cur->tail - r->slots[cur->slot].tail >= r->ring_bytes >> 3)
			hand_back(r, cur->slot, cur->tail);
		p = cursor_peek(r, cur);
		if (p < 0)
			bad = cursor_fail(r, cur, sink);
		if (p == 1 && cur->key <= limit) {
			heap_sift_down(r->heap, nheap, 0);
		} else {
			r->heap[0] = r->heap[--nheap];
			heap_sift_down(r->heap, nheap, 0);
		}
	}
	for (uint32_t k = 0; k < n && !err; k++)
		err = cursor_close(r, r->frontier[k], sink);
	if (err)
		return err;
	__atomic_store_n(&r->region->heartbeat, ++r->heartbeat, __ATOMIC_RELEASE);
	wake(r);
	return bad;
}
