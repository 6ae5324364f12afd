/*
 * The heap answers of one process, computed as its heap records arrive
 * (SHIMMER_MALLOC=all): the meaning ingest.h gives heap records instead of
 * a row per event.  Per call site (native stack, Python stack): blocks and
 * bytes allocated and freed, live at the end and live at the peak,
 * heaptrack's temporary allocations, those freed within short_ns, and
 * histograms of sizes and of lifetimes up to row_ns.  Per process: the same
 * totals, the exact peak, memory over time at a bounded resolution, and
 * the timed calls' durations; each site's live bytes at every checkpoint
 * (the instants of every point_allocs-th allocation of the process, any
 * memory, and the ends of top-level push ranges: what `leaks` fits over).  An allocations row is kept only for a block that
 * outlives row_ns or is never freed.
 * docs/schema.md describes the tables.
 *
 * Order: the answers that depend on it (the peak, the sites at the peak,
 * memory over time) take events in time order, as a row store read later
 * would: records are applied once the newest record seen is `window` ns
 * past them, so one published late by a preempted thread still takes its
 * place.  One later than that is applied when it comes and counted
 * (heap_totals.late_events).  Instants, as the rows' readers take them
 * (tools/model.h): a block is live from the start of the call that
 * returned it (alloc_ns) to the start of the call that released it
 * (free_ns); the peak is read after every event of an instant, and so are
 * the checkpoints.  Which block a release ends is decided by the heap
 * order, as on the row path (blockmap.h), not by instants: an untimed
 * malloc is stamped when it begins, possibly before another thread's free
 * of the address it then returns.
 *
 * Errors are the store's (logged, fatal) or -ENOMEM.  Not thread-safe: one
 * thread owns an aggregation.
 */
#ifndef SHIMMER_COLLECTOR_HEAPAGG_H
#define SHIMMER_COLLECTOR_HEAPAGG_H

#include <stdint.h>

#include "store.h"
#include "wire.h"

/* Defaults, documented in docs/schema.md. */
#define HEAPAGG_SHORT_NS 1000000ll     /* 1 ms: short-lived (temporary's default) */
#define HEAPAGG_ROW_NS 1000000000ll    /* 1 s: longer-lived blocks keep a row */
#define HEAPAGG_WINDOW_NS 20000000ll   /* 20 ms of reordering */
#define HEAPAGG_POINTS 256u            /* at most this many allocation points */
#define HEAPAGG_TIMELINE_NS 1000000ll  /* the timeline's finest bucket */
#define HEAPAGG_TIMELINE 512u          /* at most this many timeline buckets */
#define HEAPAGG_SNAPSHOT_NS 10000000000ll /* tables rewritten every 10 s of a run */

struct heapagg;

struct heapagg_conf {
	struct store *store;
	int64_t proc_id;
	int64_t start_ns;  /* the process's start: origin of the grid and timeline */
	int rows;          /* write the kept rows (0: SHIMMER_HEAP_ROWS=both,
			    * where the row path writes every row) */
	int64_t short_ns, row_ns, window_ns, timeline_ns; /* 0: the defaults */
};

/* For a process whose records come in nstreams streams (ring slots).
 * NULL with errno ENOMEM.  Every time given here and below (start_ns
 * too) is within +-INGEST_TIME_LIMIT (ingest.h), as ingest hands them on:
 * the arithmetic on them relies on it. */
struct heapagg *heapagg_new(const struct heapagg_conf *conf, uint32_t nstreams);

/* A checked heap record of thread tid from stream (its ring slot), with
 * its times in ns: t_begin, and t_end (-1 when untimed). */
int heapagg_heap(struct heapagg *h, uint32_t stream, uint32_t tid, const struct shm_rec_heap *r,
		 int64_t begin_ns, int64_t end_ns);

/* A top-level push range (ranges row range_id) ended at ns: a checkpoint
 * of the step fits. */
int heapagg_step_end(struct heapagg *h, int64_t ns, int64_t range_id);

/* An allocation of another memory (CUDA) at ns: allocations of every
 * memory are counted for the checkpoints. */
int heapagg_count(struct heapagg *h, int64_t ns);

/* stream has a new owner. */
void heapagg_stream_new(struct heapagg *h, uint32_t stream);

/* Applies every event held, writes a row for each block never freed and
 * the final tables.  Call once, at the process's end. */
int heapagg_end(struct heapagg *h);

/* NULL is a no-op. */
void heapagg_free(struct heapagg *h);

#endif
