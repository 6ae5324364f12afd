/*
 * Recording control: when the process records (docs/service.md).
 *
 * Pauses and resumes come from three places, and the latest one wins:
 *  - SHIMMER_START, SHIMMER_STOP and SHIMMER_DURATION (settings.h): the
 *    process starts paused until its start trigger fires, and pauses when
 *    its stop trigger fires or the duration has passed since recording
 *    began;
 *  - `shimmer ctl pause|resume|window` through the collector.  A command
 *    cancels the triggers of SHIMMER_START/STOP/DURATION that have not
 *    fired: the user took over;
 *  - shimmer_pause() and shimmer_resume() from the program (api.c).
 *
 * The shim has no thread of its own for this: a process that was
 * single-threaded stays so.  The collector keeps every deadline (the time
 * triggers, SHIMMER_DURATION, a ctl window's end) and, when one passes or
 * a command comes, writes the region's control block (wire.h).  Every
 * hook compares the block's sequence word with the one last applied
 * (control_current(), shim.h) and, when it moved, applies the block
 * (control_poll()) before it records its own call: so a command is in
 * force from the moment the collector wrote it, and a window holds
 * exactly the calls made inside it.  A process that makes no traced call
 * applies nothing, and records nothing either way.
 *
 * A range trigger acts on the thread that ends the range's instance,
 * inside that NVTX or shimmer.h call, so after-range:step:20 records
 * exactly from the end of the 20th step on.  Instances are counted per
 * process, over all threads; an instance ends at its pop (push/pop
 * ranges) or its end (start/end).  When it begins recording and
 * SHIMMER_DURATION is set, the shim tells the collector when (ctl_began),
 * which then plans the stop.
 *
 * Markers: a resume applied from the block is stamped with the command's
 * time (nothing was recorded between: every call would have applied it
 * first); a pause with the later of the command's time and the applying
 * thread's last record, so that every record of that thread lies before
 * it.
 *
 * CUPTI is not called from a malloc hook (the allocation may come from
 * inside the CUDA runtime or CUPTI, holding their locks): a command a heap
 * hook applies leaves CUPTI to the thread's next CUDA call
 * (api_cupti_catch_up()).
 *
 * A fork child keeps its parent's state and plan: it applies what its
 * parent's block says at the fork and hands the plan to the collector
 * with its own region.
 */
#ifndef SHIMMER_CONTROL_H
#define SHIMMER_CONTROL_H

#include <stdint.h>

struct intern_entry;
struct shm_region;

/* Constructor, before the region is made: the initial state from
 * SHIMMER_START (shim.paused) and the plan of the time triggers. */
void control_init(void);

/* Writes the plan into a new region, before HELLO (start(), init.c). */
void control_plan(struct shm_region *r);

/* Once the region is the collector's (constructor, fork child): hooks
 * start reading its control block.  In the constructor (first) also arms
 * the range triggers. */
void control_setup(int first);

/* Fork child, before the parent's region is unmapped: the parent's block
 * as it stands is applied and its plan kept for the child's region. */
void control_fork_child(void);

/* Applies the region's control block if it changed (the hooks' slow path,
 * shim.h).  from_heap: called from a malloc hook, CUPTI is left for later.
 * Does nothing inside the shim, in a signal handler that interrupted a
 * record, or while another thread applies the same change. */
void control_poll(int from_heap);

/* Nonzero while a range trigger waits: only then do range hooks ask. */
extern int control_watching;

static inline int control_watch(void)
{
	return __atomic_load_n(&control_watching, __ATOMIC_RELAXED);
}

/* Whether a range named by this intern entry counts toward a trigger. */
int control_is_watched(const struct intern_entry *name);

/* A START of a watched name, by id; its END later goes to control_end(). */
void control_started(uint64_t id);

/* An END: counts an instance when id was a watched START. */
void control_end(uint64_t id);

/* A watched instance ended (its pop): counts it, fires what it arms. */
void control_instance_done(void);

#endif /* SHIMMER_CONTROL_H */
