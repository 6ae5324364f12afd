/*
 * Records to rows.  The source has checked every record (record.h), so
 * fn, enums and depths are trusted here; values (pointers, sizes, ids,
 * times) are stored as they came.
 *
 * Blocks move between threads: one thread's free often ends a block that
 * another allocated, and the two records sit in different streams.  The
 * source merges them in time order (rec_key()), and every block keeps when
 * it became live: for the heap its place in the process's heap order (seq,
 * wire.h), for CUDA the instant.  A record published late can still arrive
 * after a newer block took the same address; blockmap.h pairs the release
 * with the block it ended all the same (the aggregated heap, heapagg.c,
 * pairs by the same map and the same orders).  Only the heap order is sure
 * of that: an untimed call's instant is when it began, and a malloc that
 * began before another thread's free of the address it then returned would
 * look older.
 */
#include "ingest.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "blockmap.h"
#include "heapagg.h"
#include "ptrmap.h"

#define RANGE_DEPTH_MAX 4096u  /* push ranges remembered per stream */

struct open_range {
	int64_t id; /* ranges rowid */
	uint32_t domain_id;
};

/* A stream's open push ranges, innermost last (at most RANGE_DEPTH_MAX),
 * and how many more are open beyond those; a new owner starts with none. */
struct stream_state {
	struct open_range *ranges;
	uint32_t nranges, ranges_cap, ranges_lost;
	int64_t heap_ns; /* the instant of its last heap record (0: none yet) */
};

struct ingest {
	struct rec_sink sink;
	struct store *store;
	int64_t proc_id;
	uint32_t clock;
	const struct clock *tsc;
	uint32_t malloc_mode;
	double sample_bytes;
	uint32_t nstreams;
	struct stream_state *streams;
	struct blockmap heap;             /* host blocks in heap order */
	struct blockmap cuda;             /* CUDA blocks by instant */
	struct ptrmap startend;           /* open START/END ranges: range id -> rowid */
	int gpu_sampled;                  /* processes.gpu_sampled_since_ns is stored */
	int heap_rows;                    /* a row per heap event */
	struct heapagg *agg;              /* the aggregated host heap, or NULL */
	struct stacktree stacks;          /* the process's stack nodes */
};

int64_t ingest_ns(const struct ingest *in, uint64_t ts)
{
	if (in->clock == SHM_CLOCK_TSC)
		return ingest_bound_ns(clock_to_ns(in->tsc, ts));
	return ts > (uint64_t)INGEST_TIME_LIMIT ? INGEST_TIME_LIMIT : (int64_t)ts;
}

/* ---- heap and CUDA blocks ---- */

static int heap_event(struct ingest *in, uint32_t tid, const struct shm_rec_heap *r, int64_t ns,
		      int64_t end_ns)
{
	unsigned fnf = shm_fn_info[r->hdr.fn].flags;
	int err = 0;

	if (r->hdr.flags & SHM_F_FAILED)
		return 0;
	if (fnf & SHM_FNF_FREE) {
		/* realloc: the old block goes unless the call failed
		 * (NULL for a non-zero size); realloc(p, 0) frees p. */
		uint64_t old = fnf & SHM_FNF_ALLOC ? r->aux : r->ptr;
		int gone = !(fnf & SHM_FNF_ALLOC) || r->ptr || r->size == 0;
		int64_t id = old && gone ? blockmap_take(&in->heap, old, rec_heap_release(r)) : 0;

		if (id < 0)
			return (int)id;
		if (id)
			err = store_alloc_free(in->store, id, r->hdr.fn, tid, ns, end_ns);
	}
	/* In sample mode an unsampled record only releases a sampled block
	 * (a realloc whose new block was not chosen). */
	if (!err && (fnf & SHM_FNF_ALLOC) && r->ptr &&
	    (in->malloc_mode != SHM_MALLOC_SAMPLE || (r->hdr.flags & SHM_F_SAMPLED))) {
		int sampled = !!(r->hdr.flags & SHM_F_SAMPLED);
		double size = (double)r->size;
		struct store_alloc a = {
			.proc_id = in->proc_id, .space = "host", .device = -1,
			.ptr = r->ptr, .size = r->size, .sampled = sampled,
			.weight = size, .fn = r->hdr.fn, .tid = tid,
			.ns = ns, .end_ns = end_ns,
			.stack_id = r->stack_id, .pystack_id = r->pystack_id,
		};
		int64_t id;

		/* P(sampled) = 1 - exp(-size / mean bytes between samples). */
		if (sampled && r->size && in->sample_bytes > 0)
			a.weight = size / -expm1(-size / in->sample_bytes);
		err = store_alloc_add(in->store, &a, &id);
		if (!err)
			err = blockmap_put(&in->heap, r->ptr, id, rec_heap_birth(r));
	}
	return err;
}

static const char *cuda_space(uint16_t fn)
{
	switch (fn) {
	case SHM_FN_CUDA_MALLOC_HOST:
	case SHM_FN_CUDA_HOST_ALLOC:
		return "pinned";
	case SHM_FN_CUDA_MALLOC_MANAGED:
		return "managed";
	default:
		return "device";
	}
}

static int cuda_event(struct ingest *in, uint32_t tid, const struct shm_rec_cuda *r)
{
	unsigned fnf = shm_fn_info[r->hdr.fn].flags;
	int64_t ns = ingest_ns(in, r->t_begin);
	int timed = !!(r->hdr.flags & SHM_F_TIMED);
	int64_t end_ns = timed ? ingest_ns(in, r->t_end) : ns;
	int err = store_cuda_add(in->store, in->proc_id, tid, r, ns, end_ns);

	if (err || r->ret != 0 || (r->hdr.flags & SHM_F_FAILED) || !r->ptr)
		return err;
	if (fnf & SHM_FNF_ALLOC) {
		struct store_alloc a = {
			.proc_id = in->proc_id, .space = cuda_space(r->hdr.fn),
			.device = r->device, .ptr = r->ptr, .size = r->bytes,
			.weight = (double)r->bytes, .fn = r->hdr.fn, .tid = tid,
			.ns = ns, .end_ns = timed ? end_ns : -1,
			.stack_id = r->stack_id, .pystack_id = r->pystack_id,
		};
		int64_t id;

		err = store_alloc_add(in->store, &a, &id);
		if (!err)
			err = blockmap_put(&in->cuda, r->ptr, id,
					   rec_live_ts(&r->hdr, r->t_begin, r->t_end));
		/* the checkpoints count every memory's allocations */
		if (!err && in->agg)
			err = heapagg_count(in->agg, ns);
	} else if (fnf & SHM_FNF_FREE) {
		int64_t id = blockmap_take(&in->cuda, r->ptr, r->t_begin);

		if (id < 0)
			return (int)id;
		if (id)
			err = store_alloc_free(in->store, id, r->hdr.fn, tid, ns,
					       timed ? end_ns : -1);
	}
	return err;
}

/* ---- ranges ---- */

/*
 * Push ranges nest per thread, and a thread's records all sit in its own
 * stream, so the stream keeps the stack (restarted for each new owner).
 * depth and parent count every open push range of the thread; a POP closes
 * the innermost one of its own domain, as NVTX keeps one stack per domain
 * (so NCCL's ranges interleaved with an application's still pair right).
 * A POP with nothing open in its domain is the application's (NVTX allows
 * it) and changes nothing.  An application that pushes without popping
 * would grow the stack without bound: past RANGE_DEPTH_MAX the rows are
 * still stored, with their depth, but their ends are not tracked.
 */
static int range_push(struct ingest *in, struct stream_state *ss, uint32_t tid,
		      const struct shm_rec_range *r)
{
	int64_t parent = ss->nranges ? ss->ranges[ss->nranges - 1].id : 0, id;
	int err;

	if (ss->nranges == ss->ranges_cap && ss->ranges_cap < RANGE_DEPTH_MAX) {
		uint32_t cap = ss->ranges_cap ? ss->ranges_cap * 2 : 16;
		struct open_range *grown = realloc(ss->ranges, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		ss->ranges = grown;
		ss->ranges_cap = cap;
	}
	err = store_range_open(in->store, in->proc_id, tid, "push", r, ingest_ns(in, r->ts),
			       ss->nranges + ss->ranges_lost, parent, &id);
	if (err)
		return err;
	if (ss->nranges < ss->ranges_cap && !ss->ranges_lost)
		ss->ranges[ss->nranges++] = (struct open_range){ id, r->domain_id };
	else
		ss->ranges_lost++;
	return 0;
}

static int range_pop(struct ingest *in, struct stream_state *ss, const struct shm_rec_range *r)
{
	uint32_t i = ss->nranges;
	int64_t id;

	if (ss->ranges_lost) {
		ss->ranges_lost--;
		return 0;
	}
	while (i && ss->ranges[i - 1].domain_id != r->domain_id)
		i--;
	if (!i)
		return 0;
	id = ss->ranges[i - 1].id;
	memmove(&ss->ranges[i - 1], &ss->ranges[i], (ss->nranges - i) * sizeof(*ss->ranges));
	ss->nranges--;
	/* A top-level range's end is a checkpoint of the leak fits. */
	if (in->agg && i == 1) {
		int err = heapagg_step_end(in->agg, ingest_ns(in, r->ts), id);

		if (err)
			return err;
	}
	return store_range_close(in->store, id, ingest_ns(in, r->ts));
}

/* START/END pair by id across threads; the merge orders them by time, so
 * an END meets its START unless the START was never sent.  An unknown or
 * repeated END changes nothing. */
static int range_event(struct ingest *in, uint32_t stream, uint32_t tid,
		       const struct shm_rec_range *r)
{
	struct stream_state *ss = &in->streams[stream];
	int64_t id;
	int err;

	switch (r->op) {
	case SHM_RANGE_PUSH:
		return range_push(in, ss, tid, r);
	case SHM_RANGE_POP:
		return range_pop(in, ss, r);
	case SHM_RANGE_START:
		err = store_range_open(in->store, in->proc_id, tid, "startend", r,
				       ingest_ns(in, r->ts), 0, 0, &id);
		/* id 0 cannot be a key: such a range stays open. */
		if (!err && r->id)
			err = ptrmap_put(&in->startend, r->id, id, r->ts, NULL);
		return err;
	default: /* SHM_RANGE_END: rec_check() let no other op through */
		id = r->id ? ptrmap_take(&in->startend, r->id, NULL) : 0;
		return id ? store_range_close(in->store, id, ingest_ns(in, r->ts)) : 0;
	}
}

/* Every window record repeats since, so the first one to arrive sets it
 * (even if an earlier window was dropped) and the rest need no UPDATE.  An
 * empty one (start == end) only announces sampling: a process can end
 * before its first window. */
static int gpu_window(struct ingest *in, const struct shm_rec_gpu_window *r)
{
	int err = r->start == r->end ? 0 :
		  store_gpu_window_add(in->store, in->proc_id, ingest_ns(in, r->start),
				       ingest_ns(in, r->end), r->calls,
				       (r->hdr.flags & SHM_F_WHOLE) != 0);

	if (!err && !in->gpu_sampled) {
		err = store_process_gpu_sampled(in->store, in->proc_id, ingest_ns(in, r->since));
		in->gpu_sampled = !err;
	}
	return err;
}

/* ---- the sink ---- */

/* One checked record to its rows. */
static int on_record(void *ctx, uint32_t stream, uint32_t tid, const union rec *r)
{
	struct ingest *in = ctx;
	struct store *st = in->store;
	int64_t p = in->proc_id;

	if (stream >= in->nstreams)
		return -EINVAL;
	switch (r->h.type) {
	case SHM_REC_HEAP: {
		/* A thread's heap instants in the order it made its calls: read
		 * on the CPU it ran on, they can go back by the TSCs' offset
		 * when it moves to another (a free 51 ns before its own malloc,
		 * on a VM under load: a negative lifetime, and a pair not
		 * temporary).  Such an instant is raised to the one before. */
		struct stream_state *ss = &in->streams[stream];
		int64_t ns = ingest_ns(in, r->heap.t_begin), end_ns = -1;

		if (ns < ss->heap_ns)
			ns = ss->heap_ns;
		ss->heap_ns = ns;
		if (r->heap.hdr.flags & SHM_F_TIMED) {
			end_ns = ingest_ns(in, r->heap.t_end);
			if (end_ns < ns)
				end_ns = ns;
		}
		if (in->agg) {
			int err = heapagg_heap(in->agg, stream, tid, &r->heap, ns, end_ns);

			if (err || !in->heap_rows)
				return err;
		}
		return heap_event(in, tid, &r->heap, ns, end_ns);
	}
	case SHM_REC_CUDA:
		return cuda_event(in, tid, &r->cuda);
	case SHM_REC_KERNEL:
		return store_kernel_add(st, p, &r->kernel, ingest_ns(in, r->kernel.start),
					ingest_ns(in, r->kernel.end));
	case SHM_REC_MEMCPY:
		return store_memcpy_add(st, p, &r->memcpy, ingest_ns(in, r->memcpy.start),
					ingest_ns(in, r->memcpy.end));
	case SHM_REC_MEMSET:
		return store_memset_add(st, p, &r->memset, ingest_ns(in, r->memset.start),
					ingest_ns(in, r->memset.end));
	case SHM_REC_GPU_SYNC:
		return store_gpu_sync_add(st, p, &r->sync, ingest_ns(in, r->sync.start),
					  ingest_ns(in, r->sync.end));
	case SHM_REC_API:
		return store_api_add(st, p, tid, &r->api, ingest_ns(in, r->api.start),
				     ingest_ns(in, r->api.end));
	case SHM_REC_RANGE:
		return range_event(in, stream, tid, &r->range);
	case SHM_REC_MARK:
		return store_mark_add(st, p, tid, &r->mark, ingest_ns(in, r->mark.ts));
	case SHM_REC_STACK:
		return store_stack_add(st, p, &in->stacks, r->stack.h.stack_id, r->stack.pc,
				       r->stack.h.depth);
	case SHM_REC_PYSTACK:
		return store_pystack_add(st, p, r->pystack.h.stack_id, r->pystack.frame,
					 r->pystack.h.depth);
	case SHM_REC_MODULE:
		return store_module_add(st, p, &r->module, ingest_ns(in, r->module.ts));
	case SHM_REC_GPU_WINDOW:
		return gpu_window(in, &r->window);
	case SHM_REC_OFFCPU:
		return store_offcpu_add(st, p, tid, &r->offcpu, ingest_ns(in, r->offcpu.start),
					ingest_ns(in, r->offcpu.end));
	default: /* SHM_REC_COUNTER: rec_check() let no other type through */
		return store_counter_add(st, p, tid, &r->counter, ingest_ns(in, r->counter.ts));
	}
}

static void on_stream_new(void *ctx, uint32_t stream)
{
	struct ingest *in = ctx;

	if (stream < in->nstreams) {
		in->streams[stream].nranges = 0;
		in->streams[stream].ranges_lost = 0;
		in->streams[stream].heap_ns = 0;
		if (in->agg)
			heapagg_stream_new(in->agg, stream);
	}
}

/* The store's upsert adds, so a tid that shows up twice still gets exact
 * totals. */
static int on_counts(void *ctx, uint32_t tid, uint16_t fn, uint64_t count, uint64_t bytes)
{
	struct ingest *in = ctx;

	return store_count_add(in->store, in->proc_id, tid, fn, count, bytes);
}

static int on_drops(void *ctx, uint32_t tid, const char *reason, uint64_t events)
{
	struct ingest *in = ctx;

	return store_drop_add(in->store, in->proc_id, tid, reason, events);
}

struct ingest *ingest_new(const struct ingest_conf *conf)
{
	struct ingest *in = calloc(1, sizeof(*in));

	if (!in)
		return NULL;
	in->streams = calloc(conf->nstreams ? conf->nstreams : 1, sizeof(*in->streams));
	if (!in->streams) {
		free(in);
		errno = ENOMEM;
		return NULL;
	}
	in->store = conf->store;
	in->proc_id = conf->proc_id;
	in->clock = conf->clock;
	in->tsc = conf->tsc;
	in->malloc_mode = conf->malloc_mode;
	in->sample_bytes = (double)conf->sample_bytes;
	in->nstreams = conf->nstreams;
	in->heap_rows = conf->malloc_mode != SHM_MALLOC_ALL || !(conf->heap_rows & SHM_HELLO_HEAP_AGG) ||
			(conf->heap_rows & SHM_HELLO_HEAP_ROWS);
	if (conf->malloc_mode == SHM_MALLOC_ALL && (conf->heap_rows & SHM_HELLO_HEAP_AGG)) {
		struct heapagg_conf hc = {
			.store = conf->store, .proc_id = conf->proc_id, .start_ns = ingest_bound_ns(conf->start_ns),
			.rows = !in->heap_rows,
		};

		in->agg = heapagg_new(&hc, conf->nstreams);
		if (!in->agg) {
			ingest_free(in);
			errno = ENOMEM;
			return NULL;
		}
	}
	in->sink = (struct rec_sink){
		.record = on_record, .stream_new = on_stream_new,
		.counts = on_counts, .drops = on_drops, .ctx = in,
	};
	return in;
}

const struct rec_sink *ingest_sink(struct ingest *in)
{
	return &in->sink;
}

int ingest_end(struct ingest *in)
{
	return in->agg ? heapagg_end(in->agg) : 0;
}

void ingest_free(struct ingest *in)
{
	if (!in)
		return;
	heapagg_free(in->agg);
	for (uint32_t i = 0; i < in->nstreams; i++)
		free(in->streams[i].ranges);
	free(in->streams);
	blockmap_free(&in->heap);
	blockmap_free(&in->cuda);
	ptrmap_free(&in->startend);
	stacktree_free(&in->stacks);
	free(in);
}
