/*
 * What records mean: the sink that turns one process's checked records
 * (record.h) into store rows.  Heap and CUDA allocations become
 * allocations rows, their frees complete them (blocks tracked by address,
 * see ingest.c); CUDA calls, GPU activity, API calls, marks, counters,
 * stacks and modules become one row each; push ranges nest per stream and
 * START/END ranges pair by id; GPU sampling windows set the process's
 * sampled span.  Exact counters and drops are added to their tables.
 *
 * In SHIMMER_MALLOC=all mode the host heap's records go to heapagg.h
 * instead (answers computed as they arrive, a row only for the blocks that
 * need one), unless the process asked for a row per event
 * (SHIMMER_HEAP_ROWS=all), or for both (SHIMMER_HEAP_ROWS=both: every row
 * and the aggregated tables, from the same events).
 *
 * Timestamps arrive in the process's record clock and are converted here.
 * Errors are the store's (already logged, fatal) or -ENOMEM.  Not
 * thread-safe: one thread owns an ingest.
 */
#ifndef SHIMMER_COLLECTOR_INGEST_H
#define SHIMMER_COLLECTOR_INGEST_H

#include <stdint.h>

#include "clock.h"
#include "record.h"
#include "store.h"

struct ingest;

struct ingest_conf {
	struct store *store;
	int64_t proc_id;          /* the processes row the rows belong to */
	uint32_t clock;           /* enum shm_clock of the records */
	const struct clock *tsc;  /* the collector's TSC calibration (outlives us) */
	uint32_t malloc_mode;     /* enum shm_malloc_mode, validated */
	uint64_t sample_bytes;    /* the sampler's mean bytes between samples */
	uint32_t nstreams;        /* streams the source numbers from 0 */
	uint32_t heap_rows;       /* SHM_HELLO_HEAP_* of the HELLO: rows, aggregates or both */
	int64_t start_ns;         /* the process's start (CLOCK_MONOTONIC) */
};

/* NULL with errno ENOMEM. */
struct ingest *ingest_new(const struct ingest_conf *conf);

/* The sink that feeds this ingest (valid while it lives). */
const struct rec_sink *ingest_sink(struct ingest *in);

/*
 * Every time ingest hands on (a record's, the process's start) is held
 * within +-INGEST_TIME_LIMIT ns, 36 years either side of the clock's zero
 * (a real CLOCK_MONOTONIC time is days): a time is the client's word, and
 * bounded ones leave differences, lifetimes and durations, and the heap
 * aggregate's bucket arithmetic far from int64_t's ends whatever a client
 * sends (fuzz_ring found the overflow when they were not).
 */
#define INGEST_TIME_LIMIT ((int64_t)1 << 60)

static inline int64_t ingest_bound_ns(int64_t t)
{
	return t > INGEST_TIME_LIMIT ? INGEST_TIME_LIMIT : t < -INGEST_TIME_LIMIT ? -INGEST_TIME_LIMIT : t;
}

/* A time in the record clock as CLOCK_MONOTONIC ns, bounded as above. */
int64_t ingest_ns(const struct ingest *in, uint64_t ts);

/* The process ended and its last records were handed on: completes
 * what was held (the aggregated heap's tables and rows). */
int ingest_end(struct ingest *in);

/* NULL is a no-op. */
void ingest_free(struct ingest *in);

#endif
