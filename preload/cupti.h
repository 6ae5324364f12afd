/*
 * GPU activity through CUPTI: kernels, copies, memsets (and, on request,
 * synchronisations) as the GPU ran them (asynchronous activity buffers),
 * and the runtime and driver calls that started them (callbacks), all on
 * the host's record clock; by default only inside sampling windows, each
 * reported with SHM_REC_GPU_WINDOW when it closes.
 *
 * CUPTI starts once per process, when CUDA does: the driver calls our
 * InitializeInjection() at cuInit because cupti_setup() pointed
 * CUDA_INJECTION64_PATH at the shim; when that variable names another
 * library, the first intercepted CUDA runtime call starts it instead
 * (cupti_check()).  libcupti is dlopen'd then, never linked: a process
 * that never uses CUDA never loads it.  Whatever happens is reported once
 * with SHM_MSG_GPU_STATUS; a failure also with one line on stderr.
 *
 * One file per job, each with its contract in its header:
 *   cupti_lib.h       finding libcupti and binding its functions
 *   cupti_activity.h  activity kinds, buffers, the converter and flush threads
 *   cupti_api.h       our subscription and the API callbacks
 *   cupti_window.h    the sampling windows and the detach state machine
 *   cupti.c           start, exit and fork (this header)
 */
#ifndef SHIMMER_CUPTI_H
#define SHIMMER_CUPTI_H

#include "shim.h"

/* Nonzero while a start is still owed to this process. */
extern int cupti_pending;

/* Constructor, tracing on: reads SHIMMER_CUPTI, SHIMMER_GPU_SYNC,
 * SHIMMER_GPU and its window and period, and sets
 * CUDA_INJECTION64_PATH to self (the shim's absolute path) when unset. */
void cupti_setup(const char *self);

/* Starts CUPTI now if the driver did not; for the CUDA runtime hooks,
 * after the real call (so cuInit, and any other tool's injection, ran). */
void cupti_late(void);

static inline void cupti_check(void)
{
	if (unlikely(__atomic_load_n(&cupti_pending, __ATOMIC_RELAXED)))
		cupti_late();
}

/* shimmer_pause/resume.  Recording every kernel (SHIMMER_GPU=all): disable
 * or re-enable the activity kinds.  Sampling: a pause closes the open
 * window and the sampler skips those that fall in it; after a resume the
 * next window opens as scheduled, which may be in the same period. */
void cupti_pause(int pause);

/* At exit, before BYE: flush every buffer CUPTI holds.  Idempotent. */
void cupti_exit(void);

/* Fork child: the parent's CUPTI session is not ours; start again if the
 * child uses CUDA. */
void cupti_fork_child(void);

/* The driver's entry point (CUDA_INJECTION64_PATH).  Returns 1. */
int InitializeInjection(void);

#endif /* SHIMMER_CUPTI_H */
