/*
 * GPU sampling and detaching (one job of the CUPTI modules; cupti.h names
 * the others): the state machine that turns CUPTI's recording on inside
 * windows and off between them, and detaches CUPTI (cuptiFinalize) while
 * off.
 *
 * Under SHIMMER_GPU=sample (the default) CUPTI records only inside
 * windows: window_ns at a random point of every period_ns from CUPTI's
 * start, so that launches outside them pay neither the activity kinds
 * (about 0.5 us a kernel on an H200) nor the API callbacks.  A window
 * turns the callbacks on GRACE_MS before the kinds and off GRACE_MS after
 * them, so a recorded kernel's launching call is recorded too unless that
 * call outlasts the grace.  Each window closes with one SHM_REC_GPU_WINDOW
 * with the GPU-work calls the runtime hooks counted meanwhile; the
 * estimates depend on it, so it is written even when the ring is full.
 *
 * Detaching: once CUPTI has recorded anything, every later kernel launch
 * pays for it (765 ns on an H100: bench/cupti_detach.cu) even with every
 * kind and callback off again; only cuptiFinalize ends that.  So CUPTI is
 * detached between windows and attached again for the next: after a
 * window's kinds go off its records are awaited and converted, then the
 * first API call to return on any thread calls cuptiFinalize in its EXIT
 * callback (cupti_finalize_here), where CUPTI asks for it.
 *
 * Except with CUDA graphs: once a process has launched one, CUPTI stays
 * attached for good (on an H100, driver 580, CUPTI 13, test/gpu/graphs.sh:
 * a process that replays a graph while CUPTI is detached and attached
 * again every window dies of SIGSEGV inside cuGraphLaunch after tens of
 * windows).  Its windows then close by turning the kinds off, which gives
 * the kernels of the graph launched last end times hundreds of
 * milliseconds late: that launch is left out whole (cupti_kinds_off()),
 * the window ends as it began and its call is not one of the window's.
 * A process that launches graphs through the driver alone (JAX) has no
 * call the hooks count, so its estimates scale by time, which windows
 * slowed by their own recording would undercount (a JAX loop: -89%): for
 * it the window open then (or the next one) is held open, every kernel
 * recorded, until a pause closes it (the next window is then held open in
 * turn) or the process exits.
 *
 * The sampler thread and the calls below serialize on one lock; only
 * cupti_attach, cupti_finalize_here() and cupti_window_graph() are for the
 * API callback and the hooks.
 */
#ifndef SHIMMER_CUPTI_WINDOW_H
#define SHIMMER_CUPTI_WINDOW_H

/* CUPTI attached or not, under sampling.  The API callbacks record only
 * in AT_ON; in any other state they stay on for the detach alone. */
enum { AT_ON, AT_DRAINING, AT_DETACHING, AT_FINALIZING, AT_OFF };
extern int cupti_attach;

/* SHIMMER_GPU=sample (1, the default) or all (0); read-only once CUPTI
 * has started, except that sampling ends (0) when no sampler thread can
 * be started. */
extern int cupti_sampling;

/* Constructor: SHIMMER_GPU, SHIMMER_GPU_DETACH, SHIMMER_GPU_WINDOW_MS,
 * SHIMMER_GPU_PERIOD_MS. */
void cupti_window_setup(void);

/* The start, before anything can record: sampling begins now. */
void cupti_window_since_now(void);

/* The start, kinds and callbacks on: the periodic flush (unless CUPTI is
 * to be detached between windows) and, under sampling, the sampler
 * thread, with the kinds and callbacks off until its first window. */
void cupti_window_start(void);

/* In an API call's EXIT callback, any thread: detaches CUPTI if a detach
 * is due. */
void cupti_finalize_here(void);

/* A CUDA graph launch is about to start (its hook or its API ENTER
 * callback, any thread): CUPTI is detached no more.  Lock-free. */
void cupti_window_graph(void);

/* shimmer_pause under sampling: closes the open window. */
void cupti_window_pause(void);

/* At exit: closes the open window, calls off a pending detach; 1 when
 * CUPTI is still attached (its buffers are then to be flushed). */
int cupti_window_exit(void);

/* Fork child, single-threaded. */
void cupti_window_fork_child(void);

#endif /* SHIMMER_CUPTI_WINDOW_H */
