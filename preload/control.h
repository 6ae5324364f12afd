/*
 * Recording control: when the process records (docs/service.md).
 *
 * Pauses and resumes come from three places, and the latest one wins:
 *  - SHIMMER_START, SHIMMER_STOP and SHIMMER_DURATION (settings.h): the
 *    process starts paused until its start trigger fires, and pauses when
 *    its stop trigger fires or the duration has passed since recording
 *    began;
 *  - `shimmer ctl pause|resume|window` through the collector, which writes
 *    the region's control block (wire.h).  A command cancels the triggers
 *    of SHIMMER_START/STOP/DURATION that have not fired: the user took
 *    over;
 *  - shimmer_pause() and shimmer_resume() from the program (api.c).
 *
 * Timers and commands are the control thread's ("shimmer-ctl"): it sleeps
 * on the region's ctl_wake futex until a command comes or its next
 * deadline passes; it blocks every signal, so the program's signals never
 * land on it, and nothing it does is traced.  A range trigger acts on the
 * thread that ends the range's instance, inside that NVTX or shimmer.h
 * call, so after-range:step:20 records exactly from the end of the 20th
 * step on.  Instances are counted per process, over all threads; an
 * instance ends at its pop (push/pop ranges) or its end (start/end).
 *
 * A fork child keeps its parent's state and deadlines (they are absolute
 * times) and gets a control thread of its own.
 */
#ifndef SHIMMER_CONTROL_H
#define SHIMMER_CONTROL_H

#include <stdint.h>

struct intern_entry;

/* Constructor, once the region and intern table exist and before tracing
 * is switched on: the initial state from SHIMMER_START (shim.paused) and
 * the triggers armed. */
void control_setup(void);

/* Starts the control thread (constructor, fork child), unless
 * SHIMMER_CONTROL=0.  0 or -errno. */
int control_start(void);

/* Fork child: the parent's control thread did not come along. */
void control_fork_child(void);

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
