/*
 * CUPTI's API callbacks (one job of the CUPTI modules; cupti.h names the
 * others): our subscription, and the callbacks of the runtime and driver
 * calls that start GPU work (chosen by name at start, so new ids are
 * covered).  Each such call made while the callbacks are on costs a clock
 * read at its outermost ENTER (a runtime launch nests a driver launch
 * under the same correlation id) and one shm_rec_api at its EXIT, in the
 * calling thread's ring.  Function names are interned once per callback
 * id.  At an EXIT the detach state machine (cupti_window.h) may detach
 * CUPTI: the one place CUPTI allows it.
 */
#ifndef SHIMMER_CUPTI_API_H
#define SHIMMER_CUPTI_API_H

#include <stddef.h>
#include <stdint.h>

#include <cupti.h>

#include "cupti_window.h"
#include "shim.h"

/*
 * Where GPU work was launched from.  While the callbacks are on, a runtime
 * hook that starts GPU work (cuda.c) captures its caller's stacks here
 * before the real call, and the call's API record carries them: the
 * stack then starts at the application, not inside CUPTI.  A call that
 * comes without such a hook (the driver API, as cuBLAS, cuDNN and Triton
 * launch) has its stacks captured in the callback itself.
 */
struct cupti_site {
	uint32_t stack_id, pystack_id;
	int armed; /* set by the hook, cleared after its real call */
};
extern __thread struct cupti_site cupti_site;

/* Nonzero while the API callbacks are on: written under the window lock,
 * or as cuptiFinalize ends the session (cupti_finalize_here()). */
extern int cupti_cbs_on;

/* A hook's stacks are wanted only where its API record will be made: with
 * the callbacks on and CUPTI attached (AT_ON).  Around a detach the
 * callbacks stay on for cuptiFinalize alone and record nothing. */
static inline int cupti_want_site(void)
{
	return unlikely(__atomic_load_n(&cupti_cbs_on, __ATOMIC_RELAXED)) &&
	       __atomic_load_n(&cupti_attach, __ATOMIC_RELAXED) == AT_ON;
}

/* The last correlation id (this session) recorded with its API call. */
extern uint32_t cupti_last_corr;

/*
 * Subscribes us (the callback below), registers our clock and buffers:
 * the session cuptiFinalize ends.  *step names the call that failed;
 * other (other_size bytes) the subscriber that holds CUPTI when that was
 * why.  Only one thread at a time (the start, or win_lock held).
 */
CUptiResult cupti_session_start(const char **step, char *other, size_t other_size);

/* Unsubscribes (a start that failed after cupti_session_start). */
void cupti_unsubscribe(void);

/* Enables the callbacks of the runtime and driver calls that start GPU
 * work; returns how many.  The one start. */
unsigned int cupti_callbacks_enable(void);

/* Turns the callbacks enabled above on or off; cupti_callbacks_on() says
 * which was asked last.  One thread at a time (the start, or win_lock). */
void cupti_callbacks_set(int on);
int cupti_callbacks_on(void);

/* A window opens: an ENTER seen before now belongs to an earlier one and
 * its EXIT, if it comes, is not matched (a blocking copy may span a
 * close). */
void cupti_api_new_window(void);

/* API calls recorded since the last call (SHIMMER_DEBUG only). */
uint32_t cupti_api_recorded(void);

/* Fork child, single-threaded. */
void cupti_api_fork_child(void);

#endif /* SHIMMER_CUPTI_API_H */
