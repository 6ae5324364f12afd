/*
 * CUPTI's activity records (one job of the CUPTI modules; cupti.h names
 * the others): the kinds recorded, the buffers CUPTI fills, their
 * conversion into ring records by our converter thread, and the periodic
 * flush.  Also the threads of ours that every CUPTI module starts.
 *
 * Buffer completion runs on whatever thread CUPTI chooses: it counts what
 * CUPTI lost and queues the buffer for the converter thread, which writes
 * one record per activity (the completing thread converts only when the
 * queue is full, there is no converter, or at exit).  Buffers are mmap'd
 * (never the interposed malloc) and recycled through a small pool.
 * Converting in CUPTI's own callback would hold CUPTI up whenever our ring
 * is full (we wait for the collector there), and CUPTI may hold locks the
 * launching threads need.
 *
 * Every function is thread-safe unless it says otherwise; none allocates
 * with the interposed malloc.
 */
#ifndef SHIMMER_CUPTI_ACTIVITY_H
#define SHIMMER_CUPTI_ACTIVITY_H

#include <stddef.h>
#include <stdint.h>

#include <cupti.h>

/* The CUPTI lifecycle.  Written only by cupti.c (start, exit, fork); the
 * other modules read it. */
enum { CS_IDLE, CS_STARTING, CS_ACTIVE, CS_OFF };
extern int cupti_state;  /* CS_* */
extern int cupti_exited; /* set once, by cupti_exit() */

/* CUPTI sessions begun since the first: each attach after a cuptiFinalize
 * (the window module) bumps it, once the last session's records are all
 * converted.  Correlation ids carry it above bit 32, since a new session
 * may number its calls from 1 again. */
extern uint32_t cupti_session;

/* The last correlation id converted (this session); the window module
 * resets it as a session begins. */
extern uint32_t cupti_seen_corr;

/* Buffers CUPTI holds now. */
extern int cupti_bufs_out;

/* A correlation id as recorded: cupti_session above bit 32. */
static inline uint64_t cupti_corr_of(uint32_t id)
{
	return (uint64_t)__atomic_load_n(&cupti_session, __ATOMIC_RELAXED) << 32 | id;
}

/* Raises *at to id if id is larger (atomic). */
void cupti_corr_max(uint32_t *at, uint32_t id);

/* Records CUPTI reported lost, or we could not use: the collector stores
 * them as drops of reason 'cupti' (they are no thread's and no ring's);
 * why is said under SHIMMER_DEBUG. */
void cupti_count_dropped(size_t n, const char *why);

/* ---- activity kinds ---- */

/* Enables the kinds recorded (synchronisations only with sync: on an
 * H200 that kind cost every later launch about 1.5 us, even disabled
 * again).  0, or the failure of a required kind (kernels, copies,
 * memsets), with every kind left off.  The one start. */
CUptiResult cupti_kinds_enable(int sync);

/* Turns the kinds enabled by cupti_kinds_enable() on or off; off is
 * cupti_kinds_off(1). */
void cupti_kinds_set(int on);

/* Turns the kinds off and cuts the CUDA graph launched last (below): with
 * `lost` (a pause while every kernel is recorded) its kernels that end
 * after now are counted lost; without (a sampling window's end) all its
 * kernels are left out, as if the window had ended as it began.  Returns
 * the record clock when that launch entered, 0 when none has. */
uint64_t cupti_kinds_off(int lost);

/* A CUDA graph launch (cudaGraphLaunch, cuGraphLaunch) entered, with
 * CUPTI's correlation id (its API ENTER callback, any thread); runtime:
 * in the runtime's domain.
 *
 * When the kinds go off, CUPTI gives the kernels of the graph launched
 * last before (and of no other) end times taken much later, when their
 * records are flushed: on an H100, of 15 pauses of a replay loop, the 15
 * launches last before a pause and no other had kernels of 8 us "running"
 * 400-820 ms (test/gpu/graphs.sh).  So cupti_kinds_off() remembers that
 * launch and the instant, and its kernels are not converted (those that
 * end after that instant counted lost at a pause, drops of reason 'cupti';
 * all of them at a window's end, which then ends as that launch began):
 * never stored with times that never were.  Lock-free. */
void cupti_graph_entered(uint32_t correlation, int runtime);

/* 1 once a graph has been launched through the driver alone (cuGraphLaunch
 * not under cudaGraphLaunch: JAX, XLA), a launch no runtime hook counts. */
int cupti_graph_driver(void);

/* ---- buffers ---- */

/* CUPTI's buffer callbacks (cuptiActivityRegisterCallbacks). */
void CUPTIAPI cupti_buf_request(uint8_t **buffer, size_t *size, size_t *max_records);
void CUPTIAPI cupti_buf_complete(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
				 size_t valid);

/* Detached: every buffer CUPTI held is ours again (cuptiFinalize hands
 * none back).  Only with CUPTI detached. */
void cupti_lent_reclaim(void);

/* Converts every queued buffer on the calling thread; returns how many. */
int cupti_queue_drain(void);

/* Nothing queued for the converter, nothing in its hands. */
int cupti_converted(void);

/*
 * Flushes (default: only buffers whose records are all complete) until
 * the records of call `want` have been converted (calls on one stream
 * complete in order) or CUPTI holds no buffer; CUPTI_DRAIN_MS at most,
 * then -ETIMEDOUT.  here: convert on this thread (at exit the converter
 * may be gone) rather than wait for the converter.
 */
#define CUPTI_DRAIN_MS 200u
int cupti_await_records(uint32_t want, int here);

/* ---- our threads ---- */

/* Starts a detached thread of ours named name, every signal blocked.
 * 0 or -errno. */
int cupti_start_thread(void *(*fn)(void *), const char *name);

/* Starts the converter thread; without it buffers are converted where
 * CUPTI completes them.  0 or -errno. */
int cupti_converter_start(void);

/* At exit: lets the converter finish the buffer in hand (bounded), then
 * converts what is left on this thread. */
void cupti_converter_finish(void);

/* A periodic flush (CUPTI's own period, else a thread of ours): 0 once
 * one runs.  cupti_flusher_stop() ends ours (at exit). */
int cupti_flusher_start(void);
void cupti_flusher_stop(void);

/* Fork child, single-threaded: the parent's queue, converter and lent
 * buffers are not ours. */
void cupti_activity_fork_child(void);

#endif /* SHIMMER_CUPTI_ACTIVITY_H */
