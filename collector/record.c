/*
 * Checking one record copied out of untrusted memory, and its place in the
 * merge.  Every field a sink later uses as an index or an enum is checked
 * here, so a sink can trust what it is given: fn is below SHM_FN_COUNT and
 * of the record's family, a stack's depth matches its size, API domains,
 * range ops and module build-id lengths are in range.
 */
#include "record.h"

#include <errno.h>
#include <stddef.h>

/* The size of each record type that carries no function (hdr.fn is
 * SHM_FN_NONE); 0 for the others. */
static const uint16_t plain_size[] = {
	[SHM_REC_KERNEL] = sizeof(struct shm_rec_kernel),
	[SHM_REC_MEMCPY] = sizeof(struct shm_rec_memcpy),
	[SHM_REC_MEMSET] = sizeof(struct shm_rec_memset),
	[SHM_REC_GPU_SYNC] = sizeof(struct shm_rec_gpu_sync),
	[SHM_REC_API] = sizeof(struct shm_rec_api),
	[SHM_REC_RANGE] = sizeof(struct shm_rec_range),
	[SHM_REC_MARK] = sizeof(struct shm_rec_mark),
	[SHM_REC_COUNTER] = sizeof(struct shm_rec_counter),
	[SHM_REC_MODULE] = sizeof(struct shm_rec_module),
	[SHM_REC_GPU_WINDOW] = sizeof(struct shm_rec_gpu_window),
	[SHM_REC_OFFCPU] = sizeof(struct shm_rec_offcpu),
};

/* Whether a record of a type in plain_size[] is well formed. */
static int plain_ok(const union rec *r)
{
	if (r->h.type >= sizeof(plain_size) / sizeof(plain_size[0]) ||
	    !plain_size[r->h.type] || r->h.size != plain_size[r->h.type] ||
	    r->h.fn != SHM_FN_NONE)
		return 0;
	if (r->h.type == SHM_REC_API)
		return r->api.domain == SHM_API_RUNTIME || r->api.domain == SHM_API_DRIVER;
	if (r->h.type == SHM_REC_RANGE)
		return r->range.op >= SHM_RANGE_PUSH && r->range.op <= SHM_RANGE_END;
	if (r->h.type == SHM_REC_MODULE)
		return r->module.build_id_len <= sizeof(r->module.build_id) &&
		       r->module.unload <= 1 && r->module.lo <= r->module.hi;
	if (r->h.type == SHM_REC_GPU_WINDOW)
		return r->window.since <= r->window.start && r->window.start <= r->window.end;
	if (r->h.type == SHM_REC_OFFCPU)
		return r->offcpu.start <= r->offcpu.end && r->offcpu.state >= SHM_OFFCPU_PREEMPTED &&
		       r->offcpu.state <= SHM_OFFCPU_OTHER;
	return 1;
}

/* Whether a stack record (STACK or PYSTACK) is well formed: a non-zero id
 * and exactly the size its depth needs.  The header and the fixed part
 * share one layout in both types. */
static int stack_ok(const union rec *r)
{
	size_t fixed = sizeof(struct shm_rec_stack);
	size_t frame = r->h.type == SHM_REC_STACK ? sizeof(r->stack.pc[0])
						  : sizeof(r->pystack.frame[0]);

	_Static_assert(sizeof(struct shm_rec_stack) == sizeof(struct shm_rec_pystack) &&
		       offsetof(struct shm_rec_stack, stack_id) ==
		       offsetof(struct shm_rec_pystack, stack_id) &&
		       offsetof(struct shm_rec_stack, depth) ==
		       offsetof(struct shm_rec_pystack, depth), "stack headers");
	return r->h.fn == SHM_FN_NONE && r->h.size >= fixed && r->stack.h.stack_id &&
	       r->stack.h.depth <= SHM_STACK_MAX &&
	       r->h.size == fixed + frame * r->stack.h.depth;
}

int rec_check(const union rec *r)
{
	const struct shm_fn_info *fi;

	if (r->h.size < sizeof(r->h) || r->h.size % 8 || r->h.size > sizeof(*r))
		return -EBADMSG;
	fi = r->h.fn < SHM_FN_COUNT ? &shm_fn_info[r->h.fn] : &shm_fn_info[0];
	switch (r->h.type) {
	case SHM_REC_HEAP:
		return r->h.size == sizeof(r->heap) && fi->family == SHM_FAMILY_HEAP ? 0 : -EBADMSG;
	case SHM_REC_CUDA:
		return r->h.size == sizeof(r->cuda) && fi->family == SHM_FAMILY_CUDA ? 0 : -EBADMSG;
	case SHM_REC_STACK:
	case SHM_REC_PYSTACK:
		return stack_ok(r) ? 0 : -EBADMSG;
	default:
		return plain_ok(r) ? 0 : -EBADMSG;
	}
}

/*
 * The instant that orders a record against other threads' records: when a
 * block became live for an allocation, when the call, the GPU work or the
 * GPU sampling window began otherwise, the instant itself for ranges,
 * marks, counters and modules (a free acts from the start of its call).  GPU records come late (CUPTI delivers them
 * in batches; a window is sent when it closes) but stamped early: below
 * the limit, so they never wait.  Stacks have no time: they take prev, the
 * key of the record before them in their stream in this pass (0 first in a
 * pass), so they keep their place in the stream's order and never wait
 * (prev was merged, so it is within the limit); their ids stay unresolved
 * in the store, so nothing depends on where they land.
 */
uint64_t rec_key(const union rec *r, uint64_t prev)
{
	unsigned fnf = shm_fn_info[r->h.fn < SHM_FN_COUNT ? r->h.fn : 0].flags;

	switch (r->h.type) {
	case SHM_REC_HEAP:
		return (fnf & SHM_FNF_FREE) ? r->heap.t_begin
					    : rec_live_ts(&r->h, r->heap.t_begin, r->heap.t_end);
	case SHM_REC_CUDA:
		return (fnf & SHM_FNF_ALLOC) ? rec_live_ts(&r->h, r->cuda.t_begin, r->cuda.t_end)
					     : r->cuda.t_begin;
	case SHM_REC_KERNEL:
		return r->kernel.start;
	case SHM_REC_MEMCPY:
		return r->memcpy.start;
	case SHM_REC_MEMSET:
		return r->memset.start;
	case SHM_REC_GPU_SYNC:
		return r->sync.start;
	case SHM_REC_API:
		return r->api.start;
	case SHM_REC_RANGE:
		return r->range.ts;
	case SHM_REC_MARK:
		return r->mark.ts;
	case SHM_REC_MODULE:
		return r->module.ts;
	case SHM_REC_GPU_WINDOW:
		return r->window.start;
	case SHM_REC_OFFCPU:
		return r->offcpu.start;
	case SHM_REC_STACK:
	case SHM_REC_PYSTACK:
		return prev;
	default:
		return r->counter.ts;
	}
}
