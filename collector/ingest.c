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
 * after a newer block took the same address; the displaced block then waits
 * in *_old, and a release that came before the live block ends the
 * displaced one instead.  Only the heap order is sure of that: an untimed
 * call's instant is when it began, and a malloc that began before another
 * thread's free of the address it then returned would look older.
 */
#include "ingest.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
};

/*
 * Heap blocks displaced before their release came: heap_old maps an
 * address to a chain of them (val: the first entry's index + 1) in one
 * pool with a free list.  More than one is pending at an address when the
 * thread that freed it stalls between the real free and its record while
 * the address is allocated, freed and allocated again; a chain holds at
 * most CHAIN_MAX (a longer one keeps the newest: the oldest are blocks
 * whose release a lossy ring dropped).
 */
#define CHAIN_MAX 16u

struct pending_entry {
	int64_t id;
	uint64_t seq;
	uint32_t next; /* index + 1, 0 ends */
};

struct pending {
	struct pending_entry *e;
	uint32_t n, cap;
	uint32_t free; /* free list: index + 1, 0 when empty */
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
	struct ptrmap heap, cuda;         /* live blocks */
	struct ptrmap heap_old, cuda_old; /* blocks displaced by a late free */
	struct pending pending;           /* heap_old's chains */
	struct ptrmap startend;           /* open START/END ranges: range id -> rowid */
	int gpu_sampled;                  /* processes.gpu_sampled_since_ns is stored */
	int heap_rows;                    /* a row per heap event */
	struct heapagg *agg;              /* the aggregated host heap, or NULL */
};

int64_t ingest_ns(const struct ingest *in, uint64_t ts)
{
	if (in->clock == SHM_CLOCK_TSC)
		return clock_to_ns(in->tsc, ts);
	return ts > INT64_MAX ? INT64_MAX : (int64_t)ts;
}

/* ---- heap and CUDA blocks ---- */

/* The block at ptr that a release at free_ts (an instant, or for the heap
 * its seq_free) ends: the live one if it came before, else the displaced
 * one if that did; 0 when none. */
static int64_t block_take(struct ptrmap *live, struct ptrmap *old, uint64_t ptr,
			  uint64_t free_ts)
{
	uint64_t t, t_old;
	int64_t id = ptrmap_take(live, ptr, &t);
	int64_t id_old;

	if (id && free_ts >= t)
		return id;
	id_old = ptrmap_take(old, ptr, &t_old);
	if (id && ptrmap_put(live, ptr, id, t, NULL))
		return -ENOMEM;
	return id_old && free_ts >= t_old ? id_old : 0;
}

static int block_put(struct ptrmap *live, struct ptrmap *old, uint64_t ptr,
		     int64_t id, uint64_t live_ts)
{
	struct ptrmap_entry prev;
	int err = ptrmap_put(live, ptr, id, live_ts, &prev);

	if (!err && prev.key)
		err = ptrmap_put(old, ptr, prev.val, prev.t, NULL);
	return err;
}

static uint32_t pending_new(struct pending *p, int64_t id, uint64_t seq, uint32_t next)
{
	uint32_t i;

	if (p->free) {
		i = p->free - 1;
		p->free = p->e[i].next;
	} else {
		if (p->n == p->cap) {
			uint32_t cap = p->cap ? 2 * p->cap : 64;
			struct pending_entry *e = realloc(p->e, cap * sizeof(*e));

			if (!e)
				return 0;
			p->e = e;
			p->cap = cap;
		}
		i = p->n++;
	}
	p->e[i] = (struct pending_entry){ .id = id, .seq = seq, .next = next };
	return i + 1;
}

static void pending_release(struct pending *p, uint32_t i)
{
	p->e[i].next = p->free;
	p->free = i + 1;
}

/* Adds block (id, seq) to the chain at ptr, dropping the oldest of a chain
 * that grows past CHAIN_MAX.  0 or -ENOMEM. */
static int chain_add(struct ingest *in, uint64_t ptr, int64_t id, uint64_t seq)
{
	struct pending *p = &in->pending;
	uint64_t head = (uint64_t)ptrmap_take(&in->heap_old, ptr, NULL);
	uint32_t h = pending_new(p, id, seq, (uint32_t)head), n = 0, *link, *oldest = NULL;

	if (!h) {
		if (head && ptrmap_put(&in->heap_old, ptr, (int64_t)head, 0, NULL))
			return -ENOMEM;
		return -ENOMEM;
	}
	for (link = &h; *link; link = &p->e[*link - 1].next, n++)
		if (!oldest || p->e[*link - 1].seq < p->e[*oldest - 1].seq)
			oldest = link;
	if (n > CHAIN_MAX) {
		uint32_t i = *oldest - 1;

		*oldest = p->e[i].next;
		pending_release(p, i);
	}
	return ptrmap_put(&in->heap_old, ptr, h, 0, NULL);
}

/*
 * The heap block at ptr that a release numbered seq_free ends: of the live
 * one and those displaced there, the latest allocated before it (between
 * an allocation and its release no other allocation can take the address;
 * at an equal number, which only instants give, it pairs).  0 when none.
 */
static int64_t heap_take(struct ingest *in, uint64_t ptr, uint64_t seq_free)
{
	struct pending *p = &in->pending;
	uint64_t live_seq = 0, best_seq = 0, head;
	int64_t live = ptrmap_take(&in->heap, ptr, &live_seq), best = 0;
	uint32_t *link, *best_link = NULL;

	if (live && live_seq <= seq_free) {
		best = live;
		best_seq = live_seq;
	}
	head = (uint64_t)ptrmap_take(&in->heap_old, ptr, NULL);
	if (head) {
		uint32_t h = (uint32_t)head;

		for (link = &h; *link; link = &p->e[*link - 1].next) {
			struct pending_entry *e = &p->e[*link - 1];

			if (e->seq <= seq_free && (!best || e->seq > best_seq)) {
				best = e->id;
				best_seq = e->seq;
				best_link = link;
			}
		}
		if (best_link) {
			uint32_t i = *best_link - 1;

			*best_link = p->e[i].next;
			pending_release(p, i);
		}
		head = h;
	}
	/* what is left: the live block back in place, or a displaced one
	 * taking it */
	if (live && best != live) {
		if (ptrmap_put(&in->heap, ptr, live, live_seq, NULL))
			return -ENOMEM;
	} else if (head) {
		uint32_t i = (uint32_t)head - 1;

		if (ptrmap_put(&in->heap, ptr, p->e[i].id, p->e[i].seq, NULL))
			return -ENOMEM;
		head = p->e[i].next;
		pending_release(p, i);
	}
	if (head && ptrmap_put(&in->heap_old, ptr, (int64_t)head, 0, NULL))
		return -ENOMEM;
	return best;
}

/* A heap block born at seq at ptr; a block still live there is displaced
 * (its release has not come yet). */
static int heap_put(struct ingest *in, uint64_t ptr, int64_t id, uint64_t seq)
{
	struct ptrmap_entry prev;
	int err = ptrmap_put(&in->heap, ptr, id, seq, &prev);

	if (!err && prev.key)
		err = chain_add(in, ptr, prev.val, prev.t);
	return err;
}

/* Where a heap record's release and birth fall in the process's heap
 * order (wire.h).  A source that numbers none (shimmer attach's probes)
 * is ordered by its times, as all were before: the instant a block became
 * live, the instant a release began.  (Equal numbers never occur; equal
 * instants pair.) */
static uint64_t release_order(const struct shm_rec_heap *r)
{
	return r->seq_free ? r->seq_free : r->t_begin;
}

static uint64_t birth_order(const struct shm_rec_heap *r)
{
	return r->seq ? r->seq : rec_live_ts(&r->hdr, r->t_begin, r->t_end);
}

static int heap_event(struct ingest *in, uint32_t tid, const struct shm_rec_heap *r)
{
	unsigned fnf = shm_fn_info[r->hdr.fn].flags;
	int64_t ns = ingest_ns(in, r->t_begin);
	int64_t end_ns = r->hdr.flags & SHM_F_TIMED ? ingest_ns(in, r->t_end) : -1;
	int err = 0;

	if (r->hdr.flags & SHM_F_FAILED)
		return 0;
	if (fnf & SHM_FNF_FREE) {
		/* realloc: the old block goes unless the call failed
		 * (NULL for a non-zero size); realloc(p, 0) frees p. */
		uint64_t old = fnf & SHM_FNF_ALLOC ? r->aux : r->ptr;
		int gone = !(fnf & SHM_FNF_ALLOC) || r->ptr || r->size == 0;
		int64_t id = old && gone ? heap_take(in, old, release_order(r)) : 0;

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
			err = heap_put(in, r->ptr, id, birth_order(r));
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
			err = block_put(&in->cuda, &in->cuda_old, r->ptr, id,
					rec_live_ts(&r->hdr, r->t_begin, r->t_end));
		/* the checkpoints count every memory's allocations */
		if (!err && in->agg)
			err = heapagg_count(in->agg, ns);
	} else if (fnf & SHM_FNF_FREE) {
		int64_t id = block_take(&in->cuda, &in->cuda_old, r->ptr, r->t_begin);

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
				       ingest_ns(in, r->end), r->calls);

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
	case SHM_REC_HEAP:
		if (in->agg) {
			int err = heapagg_heap(in->agg, stream, tid, &r->heap,
					       ingest_ns(in, r->heap.t_begin),
					       r->heap.hdr.flags & SHM_F_TIMED
						       ? ingest_ns(in, r->heap.t_end)
						       : -1);

			if (err || !in->heap_rows)
				return err;
		}
		return heap_event(in, tid, &r->heap);
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
		return store_stack_add(st, p, r->stack.h.stack_id, r->stack.pc, r->stack.h.depth);
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
			.store = conf->store, .proc_id = conf->proc_id, .start_ns = conf->start_ns,
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
	ptrmap_free(&in->heap);
	ptrmap_free(&in->cuda);
	ptrmap_free(&in->heap_old);
	ptrmap_free(&in->cuda_old);
	free(in->pending.e);
	ptrmap_free(&in->startend);
	free(in);
}
