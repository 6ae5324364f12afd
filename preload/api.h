/*
 * Ranges, markers and counters: the records behind NVTX (nvtx.c) and the
 * public shimmer.h API (api.c exports shimmer_range_push and friends).
 *
 * Push/pop nesting is kept per thread and per domain, whether or not the
 * calls are recorded, so the levels returned match NVTX's even across a
 * pause.  Everything here is thread-safe, lock-free and malloc-free.
 */
#ifndef SHIMMER_API_H
#define SHIMMER_API_H

#include <stdint.h>

#include "shim.h"

/* The level (0 outermost) of the range a push on domain key `domain`
 * opens; watched: it counts for a trigger (control.h). */
int api_push_level(uintptr_t domain, int watched);

/* The level of the range a pop on `domain` closes; -1 when none is open.
 * *watched: it was pushed watched. */
int api_pop_level(uintptr_t domain, int *watched);

/* A process-unique id for a START/END range (never 0). */
uint64_t api_range_id(void);

/* t, or NULL when its range or mark is not to be recorded: a signal
 * handler's call inside the shim's own work, whose record is counted as
 * dropped (thread_reentered()).  For the NVTX and shimmer_* entry points. */
struct shim_thread *api_thread(struct shim_thread *t);

/* Write one record on t's ring (t from shim_thread_traced()).  Ids are
 * interned strings; 0 for none (domain 0: NVTX's default domain). */
void api_range(struct shim_thread *t, uint32_t op, uint64_t id, uint32_t name_id,
	       uint32_t domain_id, uint32_t color, uint32_t category);
void api_mark(struct shim_thread *t, uint32_t name_id, uint32_t domain_id);
void api_mark_at(struct shim_thread *t, uint32_t name_id, uint32_t domain_id, uint64_t ts);

/* Pauses (1) or resumes (0) recording, with its marker, from any thread
 * (shimmer_pause/resume, range triggers: control.h), after applying a
 * control command that came before.  No-op while tracing is off or
 * already in that state. */
void api_set_paused(int pause);

/* The pause lock, for control.c: a try (a hook never waits), and its
 * release. */
int api_trylock(void);
void api_unlock(void);

/* Under the pause lock: api_set_paused()'s work, the marker stamped ts
 * (0: now; never later than now nor before the previous marker).
 * with_cupti 0 (a malloc hook) leaves CUPTI to api_cupti_catch_up(). */
void api_flip(int pause, uint64_t ts, int with_cupti);

/* Nonzero when CUPTI has not been told of the last pause or resume; a
 * CUDA hook then calls api_cupti_catch_up() before its real call. */
extern int api_cupti_behind;
void api_cupti_catch_up(void);

/* Interns the markers' names, so that writing them later sends nothing. */
void api_intern_markers(void);

/* Writes the region's recording bit from shim.paused (a new region). */
void api_publish_state(void);

/* Fork child: releases the pause/resume lock another parent thread may
 * have held.  The forking thread's nesting carries over with its TLS. */
void api_fork_child(void);

/* Exported for include/shimmer.h and ctypes; see that header. */
int shimmer_range_push(const char *name);
int shimmer_range_pop(void);
void shimmer_mark(const char *name);
void shimmer_counter(const char *name, double value);
void shimmer_pause(void);
void shimmer_resume(void);

#endif /* SHIMMER_API_H */
