/*
 * The shared-memory record source: one traced process's event region (a
 * sealed memfd holding one single-producer ring per thread, see
 * common/wire.h), mapped, read pass by pass, and handed to a rec_sink as
 * checked records merged across threads in rec_key() order.  It also hands
 * on the region's exact counters and drop counts.
 *
 * The region is untrusted and the producer writes it at any moment: see
 * ring.c for how nothing is used where it lies.  Malformed data stops the
 * slot it is in for good (the rest is still drained): ring_drain() then
 * returns -EBADMSG and ring_why() says why.
 *
 * Return codes: 0; -EBADMSG for invalid data (the first reason is kept for
 * ring_why()); -ENOMEM; any other negative errno is the sink's, returned as
 * it came.  Not thread-safe: one thread owns a ring.
 */
#ifndef SHIMMER_COLLECTOR_RING_H
#define SHIMMER_COLLECTOR_RING_H

#include <stddef.h>
#include <stdint.h>

#include "record.h"

struct ring;

/* The region's shape as the producer announced it (HELLO). */
struct ring_geometry {
	uint32_t nslots;
	uint32_t ring_bytes;
	uint64_t region_bytes;
};

/* Checks g and the memfd (size, seals, header) and maps the region.  The
 * memfd is not kept (the mapping outlives it).  NULL with errno EBADMSG
 * (why filled in, one line) when the producer's region or geometry is
 * invalid, else another errno. */
struct ring *ring_new(int memfd, const struct ring_geometry *g, char *why, size_t why_len);

/* One pass: every slot's records published before the pass began, merged
 * by rec_key(), up to limit (records stamped later wait for a later pass),
 * handed to sink; tails handed back (as the pass goes, an eighth of a ring at
 * a time, and at its end); retired slots freed once drained (their
 * totals handed on first); the heartbeat bumped. */
int ring_drain(struct ring *r, uint64_t limit, const struct rec_sink *sink);

/* Hands on the counters and drop counts that grew since the last call:
 * per live slot, and the region's no_slot and cupti drops and its refused
 * stack captures (stack_full, pystack_full: drops.h, not losses). */
int ring_flush(struct ring *r, const struct rec_sink *sink);

/*
 * The store now holds everything handed to the sink so far: writes the
 * committed marks into the region (wire.h), so that what a collector that
 * dies after this leaves behind says exactly what it had stored: the
 * records after `committed` and the drops after `committed_dropped` (and
 * the region's committed_no_slot and committed_cupti) were read or
 * counted, never stored.  Call it right after each commit of the store
 * the sink writes to; an early call would claim what was not stored.
 */
void ring_committed(struct ring *r);

/* The process's row is ended (not by a collector's death): the shim is
 * not to reconnect (wire.h, collector_ended: SHM_ENDED_ROW, or
 * SHM_ENDED_REFUSED for a refused reconnect). */
void ring_ended(struct ring *r, uint32_t how);

/*
 * A region that a dead collector was reading (SHM_HELLO_RECONNECT), just
 * mapped by ring_new() (which starts at the tails it handed back): the
 * counters are handed on from its committed marks, not from zero (what its
 * store holds is not counted twice), and the control line goes on from
 * its sequence.  slot(ctx, tid, lost) runs for each slot in use, with the
 * events of its thread that the dead collector read but never committed
 * plus those dropped since its last commit (no one read the rings), which
 * no later pass hands on (its thread may also have started while no
 * collector listened: it may need a row); *lost receives the same for the
 * region's no_slot and cupti drops (its refused stack captures, which
 * lose no event, go on from the committed marks).  Before the first pass;
 * ring_control_start() is not needed.  0, or the first error slot()
 * returned.
 */
int ring_resume(struct ring *r, uint64_t *lost,
		int (*slot)(void *ctx, uint32_t tid, uint64_t lost), void *ctx);

/* Whether the last pass found a slot a quarter full or more when it began:
 * a producer fills its ring faster than passes on a timer would drain it,
 * so the next pass should come at once (a lossless producer waits for
 * room, and would otherwise take turns with the collector instead of
 * running beside it). */
int ring_busy(const struct ring *r);

/* The first reason data was found invalid, or "" . */
const char *ring_why(const struct ring *r);

/*
 * Control (wire.h, the region's control block), which the process's hooks
 * read on every call: what we write is in force at once.
 *
 * ring_control_start() takes the plan the process wrote before HELLO (its
 * time triggers).  ring_control() writes a `shimmer ctl` command (op:
 * SHM_REQ_PAUSE, SHM_REQ_RESUME or SHM_REQ_WINDOW of arg ns), which
 * cancels the plan (a window plans its own end); ring_control_tick()
 * fires the deadlines due and plans SHIMMER_DURATION's stop after a range
 * trigger began recording, and returns the next deadline (0: none), by
 * which it must be called again: a deadline is met when it is called, and
 * the process pauses or resumes from then on.  now: CLOCK_MONOTONIC ns;
 * ts: the same instant in the process's record clock (the markers' time).
 * ring_control() returns the command's number.
 */
void ring_control_start(struct ring *r);
uint32_t ring_control(struct ring *r, uint32_t op, uint64_t arg, uint64_t now, uint64_t ts);
uint64_t ring_control_tick(struct ring *r, uint64_t now, uint64_t ts);

/* SHM_STATE_*: the state in force (a command not applied yet counts), and
 * whether the process takes commands, as it said. */
uint32_t ring_control_state(const struct ring *r);

/* Unmaps and frees.  NULL is a no-op. */
void ring_free(struct ring *r);

#endif
