/*
 * GPU sampling and detaching; see cupti_window.h.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "cupti_activity.h"
#include "cupti_api.h"
#include "cupti_lib.h"
#include "cupti_window.h"
#include "region.h"
#include "settings.h"
#include "log.h"
#include "shim.h"

#define GRACE_MS 5     /* callbacks come before a window's kinds and outlive them by this */
#define NAP_MAX_MS 50u /* the sampler looks at `exited` at least this often */

int cupti_sampling = 1;
int cupti_attach = AT_ON;
static uint64_t window_ns, period_ns; /* settings.h */
static int detaching;          /* sampling detaches between windows */
static int keep_attached;      /* SHIMMER_GPU_DETACH=0 */
static int graphs;             /* a CUDA graph was launched: attached for good */
static int win_held;           /* the open window is held open (graphs) */
static int flushing;           /* a periodic flush runs (sampler, start) */
static uint32_t win_want_corr; /* the last call recorded before its kinds went off */

/* The window's state, under win_lock; win_gen (cupti_api_new_window)
 * tells a thread that an ENTER it saw belongs to an earlier window. */
static pthread_mutex_t win_lock = PTHREAD_MUTEX_INITIALIZER;
static int win_open;
static uint64_t win_start;      /* record clock */
static uint64_t win_start_mono; /* CLOCK_MONOTONIC, for the schedule */
static uint64_t win_since;      /* record clock: when sampling began */
static uint64_t win_calls;      /* work_calls() as the window opened */
static uint64_t win_rand;
/* The GPU-work calls every thread's runtime hooks have counted so far. */
static uint64_t work_calls(void)
{
	struct shm_region *r = shim.region.hdr;
	uint64_t n = 0;
	uint32_t hwm;

	if (!r)
		return 0;
	hwm = __atomic_load_n(&r->slots_hwm, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < hwm && i < r->nslots; i++) {
		struct shm_slot *sl = region_slot(&shim.region, i);

		for (unsigned int f = 1; f < SHM_FN_COUNT; f++)
			if (SHM_FN_STARTS_GPU_WORK(f))
				n += __atomic_load_n(&sl->count[f], __ATOMIC_RELAXED);
	}
	return n;
}

static void window_emit(uint64_t start, uint64_t end, uint64_t calls, int whole)
{
	struct shim_thread *t = &shim_tls;
	struct shm_rec_gpu_window r = {
		.hdr = { .type = SHM_REC_GPU_WINDOW, .size = sizeof(r),
			 .flags = whole ? SHM_F_WHOLE : 0 },
		.start = start, .end = end, .since = win_since, .calls = calls,
	};

	if (__atomic_load_n(&shim_live.on, __ATOMIC_RELAXED) &&
	    (t->state == TS_READY || thread_prepare(t) == 0))
		thread_emit_wait(t, &r, sizeof(r));
}

/* When recording turned on or off: somewhere inside the CUPTI call (about
 * 0.1 ms on an H200, longer if this thread was descheduled in it); the
 * middle keeps the traced time, and so the estimates, unbiased. */
static uint64_t mid(uint64_t before, uint64_t after)
{
	return before + (after - before) / 2;
}

static void grace(void)
{
	struct timespec ms = { 0, GRACE_MS * 1000000L };

	nanosleep(&ms, 0);
}

static int nap_ms(void)
{
	struct timespec ms = { 0, 1000000 };

	return nanosleep(&ms, 0);
}

/* With win_lock held, the kinds off: awaits the window's records; 0 once
 * every one is converted.  -ETIMEDOUT when they have not all come within
 * CUPTI_DRAIN_MS (a GPU running that far behind its CPU): a forced flush would
 * hand them over without their ends, so they are left to come later. */
static int drain(void)
{
	uint64_t t0 = clock_ns(CLOCK_MONOTONIC);
	size_t dropped = 0;

	if (cupti_await_records(__atomic_load_n(&win_want_corr, __ATOMIC_ACQUIRE), 0) < 0) {
		log_debug("CUPTI: window not drained in %u ms (buffers held %d, correlation %u of %u); "
			 "attached until the next window",
			 CUPTI_DRAIN_MS, __atomic_load_n(&cupti_bufs_out, __ATOMIC_RELAXED),
			 __atomic_load_n(&cupti_seen_corr, __ATOMIC_RELAXED),
			 __atomic_load_n(&win_want_corr, __ATOMIC_RELAXED));
		return -ETIMEDOUT;
	}
	cupti_fn.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	if (cupti_fn.cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped) == CUPTI_SUCCESS)
		cupti_count_dropped(dropped, "CUPTI's count, at a drain");
	log_debug("CUPTI: window drained in %llu us (buffers held %d, correlation %u of %u)",
		 (unsigned long long)((clock_ns(CLOCK_MONOTONIC) - t0) / 1000),
		 __atomic_load_n(&cupti_bufs_out, __ATOMIC_RELAXED),
		 __atomic_load_n(&cupti_seen_corr, __ATOMIC_RELAXED),
		 __atomic_load_n(&win_want_corr, __ATOMIC_RELAXED));
	for (unsigned int i = 0; i < CUPTI_DRAIN_MS; i++) {
		if (cupti_converted())
			return 0;
		nap_ms();
	}
	return -EBUSY;
}

/* With win_lock held: records awaited, then the next API EXIT detaches.
 * Without them CUPTI stays attached, its callbacks off, and the next
 * window's close tries again. */
static void detach(void)
{
	int at = __atomic_load_n(&cupti_attach, __ATOMIC_ACQUIRE);

	if (at != AT_ON && at != AT_DRAINING)
		return;
	__atomic_store_n(&cupti_attach, AT_DRAINING, __ATOMIC_RELEASE);
	if (!cupti_callbacks_on())
		cupti_callbacks_set(1);
	if (drain() < 0) {
		cupti_callbacks_set(0);
		__atomic_store_n(&cupti_attach, AT_ON, __ATOMIC_RELEASE);
		return;
	}
	__atomic_store_n(&cupti_attach, AT_DETACHING, __ATOMIC_RELEASE);
}

void cupti_window_graph(void)
{
	if (!__atomic_load_n(&graphs, __ATOMIC_RELAXED))
		__atomic_store_n(&graphs, 1, __ATOMIC_RELEASE);
}

/* In an API call's EXIT callback, any thread. */
void cupti_finalize_here(void)
{
	int expect = AT_DETACHING;
	CUptiResult res;
	sigset_t mask;
	uint64_t t0;

	/* A graph launched since the detach was decided: CUPTI stays, in
	 * AT_DETACHING, which the next window's reattach() takes back to
	 * AT_ON without a new session. */
	if (__atomic_load_n(&graphs, __ATOMIC_ACQUIRE))
		return;
	if (!__atomic_compare_exchange_n(&cupti_attach, &expect, AT_FINALIZING, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED))
		return;
	t0 = clock_ns(CLOCK_MONOTONIC);
	/* CUPTI's calls allocate: ours (once a window) */
	shim_own_enter(&shim_tls, &mask);
	/* The drain had the records of every call that returned by the
	 * window's close, not those of work launched in the window by a call
	 * still running then (a long copy, a thread descheduled between its
	 * launch and its return): recorded since, they sit in a buffer that
	 * cuptiFinalize keeps, and lent buffers are cleared when CUPTI is
	 * attached again.  Handed over now, to the converter's queue (work
	 * still running goes without its end: counted lost, not lost unseen). */
	cupti_fn.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	res = cupti_fn.cuptiFinalize();
	log_debug("CUPTI: detached in %llu us",
		 (unsigned long long)((clock_ns(CLOCK_MONOTONIC) - t0) / 1000));
	if (res != CUPTI_SUCCESS) {
		/* attached for good; the callbacks go off at the next close */
		log_debug("CUPTI: cuptiFinalize failed (%s); staying attached", cupti_result_str(res));
		__atomic_store_n(&detaching, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&cupti_attach, AT_ON, __ATOMIC_RELEASE);
	} else {
		/* The callbacks went with the session.  Said before AT_OFF, which
		 * reattach() waits for, so its cupti_callbacks_set() comes after:
		 * otherwise every launch hook would go on capturing stacks for
		 * API records nothing makes (cupti_want_site()), which cost a
		 * launch-bound PyTorch loop 13-17%. */
		__atomic_store_n(&cupti_cbs_on, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&cupti_attach, AT_OFF, __ATOMIC_RELEASE);
	}
	shim_own_leave(&shim_tls, &mask);
}

/* Waits (bounded) for a cuptiFinalize in progress; the state it left. */
static int attach_settled(void)
{
	int at;

	for (unsigned int i = 0; i < 1000; i++) {
		at = __atomic_load_n(&cupti_attach, __ATOMIC_ACQUIRE);
		if (at != AT_FINALIZING)
			return at;
		nap_ms();
	}
	return AT_FINALIZING;
}

/* With win_lock held: CUPTI attached.  1 when that began a new session,
 * 0 when it was still attached; negative when it cannot be (sampling then
 * ends). */
static int reattach(void)
{
	char other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = { 0 };
	int at = attach_settled(), expect = AT_DETACHING;
	uint64_t t0;
	const char *step;
	CUptiResult res;

	if (at == AT_DETACHING &&
	    __atomic_compare_exchange_n(&cupti_attach, &expect, AT_ON, 0, __ATOMIC_ACQ_REL,
					__ATOMIC_RELAXED))
		return 0; /* no API call returned since: still attached */
	at = __atomic_load_n(&cupti_attach, __ATOMIC_ACQUIRE);
	if (at == AT_ON)
		return 0;
	if (at != AT_OFF)
		return -EBUSY;
	cupti_lent_reclaim();
	t0 = clock_ns(CLOCK_MONOTONIC);
	res = cupti_session_start(&step, other, sizeof(other));
	log_debug("CUPTI: attached again in %llu us",
		 (unsigned long long)((clock_ns(CLOCK_MONOTONIC) - t0) / 1000));
	if (res != CUPTI_SUCCESS) {
		if (res == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
			log_debug("CUPTI: %s took CUPTI over; GPU sampling ends",
				 other[0] ? other : "another subscriber");
		else
			log_debug("CUPTI: %s failed again (%s); GPU sampling ends", step,
				 cupti_result_str(res));
		return -EIO;
	}
	/* every record of the last session was converted before it ended;
	 * the new one may number its calls from the start again */
	__atomic_store_n(&cupti_seen_corr, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&cupti_last_corr, 0, __ATOMIC_RELAXED);
	__atomic_add_fetch(&cupti_session, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&cupti_attach, AT_ON, __ATOMIC_RELEASE);
	return 1;
}

/* With win_lock held.  The grace lets calls that began with the callbacks
 * off end before anything they launch can be recorded.  Negative when
 * CUPTI could not be attached. */
static int window_open(void)
{
	/* Still attached (a drain that timed out), the marks go on: the next
	 * drain awaits the records of this window and of the last. */
	int err = reattach();

	if (err < 0)
		return err;
	cupti_api_new_window();
	cupti_callbacks_set(1);
	grace();
	win_start_mono = clock_ns(CLOCK_MONOTONIC);
	win_start = clock_now();
	win_calls = work_calls();
	cupti_kinds_set(1);
	win_start = mid(win_start, clock_now());
	__atomic_store_n(&win_open, 1, __ATOMIC_RELEASE);
	return 0;
}

/* How a window closes: the sampler's schedule (the calls in flight may
 * reach their EXIT, then CUPTI detaches), a pause, the exit. */
enum { CLOSE_SCHEDULE, CLOSE_PAUSE, CLOSE_EXIT };

/* Closes the open window, if any; takes win_lock. */
static void window_close(int how)
{
	int with_grace = how == CLOSE_SCHEDULE;
	uint64_t end, calls, graph_at;
	int detach_next;

	pthread_mutex_lock(&win_lock);
	if (__atomic_load_n(&graphs, __ATOMIC_ACQUIRE) && __atomic_load_n(&detaching, __ATOMIC_RELAXED)) {
		/* the sampler starts the periodic flush once this returns */
		__atomic_store_n(&detaching, 0, __ATOMIC_RELAXED);
		log_debug("CUPTI: a CUDA graph was launched; attached for good");
	}
	detach_next = with_grace && __atomic_load_n(&detaching, __ATOMIC_RELAXED) &&
		      !__atomic_load_n(&cupti_exited, __ATOMIC_ACQUIRE);
	if (!win_open)
		goto out;
	end = clock_now();
	/* At the exit the work has mostly ended (programs wait for their GPU
	 * before they exit): only the last graph's kernels that end after it
	 * are left out, and counted lost, rather than the whole launch. */
	graph_at = cupti_kinds_off(how == CLOSE_EXIT);
	end = mid(end, clock_now());
	/* calls that returned later (in the grace) launched nothing recorded */
	__atomic_store_n(&win_want_corr, __atomic_load_n(&cupti_last_corr, __ATOMIC_ACQUIRE),
			 __ATOMIC_RELEASE);
	/* a slot taken over by a new thread counts from zero again */
	calls = work_calls();
	calls = calls > win_calls ? calls - win_calls : 0;
	/* The CUDA graph launched last in the window is left out whole (its
	 * kernels' ends are false, cupti_kinds_off()): the window ends as it
	 * began, and its call, a cudaGraphLaunch the hooks counted unless the
	 * process launches graphs through the driver, is not one of the
	 * window's. */
	if (how != CLOSE_EXIT && graph_at >= win_start && graph_at < end) {
		end = graph_at;
		if (!cupti_graph_driver() && calls)
			calls--;
	}
	__atomic_store_n(&win_open, 0, __ATOMIC_RELEASE);
	if (with_grace)
		grace();
	/* detaching needs the callbacks on: they stop recording instead */
	if (detach_next)
		__atomic_store_n(&cupti_attach, AT_DRAINING, __ATOMIC_RELEASE);
	else
		cupti_callbacks_set(0);
	window_emit(win_start, end, calls, __atomic_load_n(&win_held, __ATOMIC_RELAXED));
	__atomic_store_n(&win_held, 0, __ATOMIC_RELAXED);
	log_debug("CUPTI: window closed after %llu us: %llu GPU-work calls, %u recorded with their API call",
		 (unsigned long long)((clock_ns(CLOCK_MONOTONIC) - win_start_mono) / 1000),
		 (unsigned long long)calls,
		 cupti_api_recorded());
out:
	if (detach_next)
		detach();
	pthread_mutex_unlock(&win_lock);
}

/* Sleeps until CLOCK_MONOTONIC reaches `when`; nonzero once exiting. */
static int sleep_until(uint64_t when)
{
	for (;;) {
		uint64_t now = clock_ns(CLOCK_MONOTONIC), nap;
		struct timespec ts;

		if (__atomic_load_n(&cupti_exited, __ATOMIC_ACQUIRE))
			return 1;
		if (now >= when)
			return 0;
		nap = when - now;
		if (nap > NAP_MAX_MS * 1000000ull)
			nap = NAP_MAX_MS * 1000000ull;
		ts.tv_sec = (time_t)(nap / 1000000000ull);
		ts.tv_nsec = (long)(nap % 1000000000ull);
		nanosleep(&ts, 0);
	}
}

/* xorshift64: our own, so the application's rand() sequence is untouched. */
static uint64_t next_rand(void)
{
	win_rand ^= win_rand << 13;
	win_rand ^= win_rand >> 7;
	win_rand ^= win_rand << 17;
	return win_rand;
}

/*
 * One window at a uniformly random point of each period from `since` on,
 * free to run into the next period: then every instant is recorded with
 * the same probability, window_ns / period_ns, which keeps the estimates
 * unbiased whatever the process does when (a window kept inside its
 * period would see the periods' edges less often).  When the next window
 * would start before this one ends, this one is stretched to its end
 * instead.  The point is where the window opens, i.e. its grace begins.
 */
static uint64_t next_open(uint64_t *period)
{
	uint64_t at = *period + next_rand() % period_ns;

	*period += period_ns;
	return at;
}

static void *sampler(void *arg)
{
	uint64_t grace_ns = GRACE_MS * 1000000ull;
	uint64_t period = win_start_mono, at, end, now;
	int opened, hold;

	(void)arg;
	shim_tls.in_shim++; /* this thread is ours: never traced */
	window_close(CLOSE_SCHEDULE); /* none open: detaches until the first */
	at = next_open(&period);
	for (;;) {
		int err = 0;

		if (sleep_until(at))
			break;
		pthread_mutex_lock(&win_lock);
		opened = !__atomic_load_n(&cupti_exited, __ATOMIC_ACQUIRE) &&
			 !__atomic_load_n(&shim.paused, __ATOMIC_ACQUIRE);
		if (opened)
			opened = (err = window_open()) == 0;
		end = win_start_mono + window_ns;
		pthread_mutex_unlock(&win_lock);
		if (err == -EIO)
			break;
		at = next_open(&period);
		while (opened && at + grace_ns < end) {
			end = at + grace_ns + window_ns;
			at = next_open(&period);
		}
		if (opened && sleep_until(end))
			break;
		/* A CUDA graph was launched through the driver alone: the
		 * window stays open until a pause closes it or the process exits
		 * (see the header), its records flushed as when recording all. */
		pthread_mutex_lock(&win_lock);
		hold = __atomic_load_n(&graphs, __ATOMIC_ACQUIRE) && win_open && cupti_graph_driver();
		if (hold) {
			__atomic_store_n(&win_held, 1, __ATOMIC_RELAXED);
			__atomic_store_n(&detaching, 0, __ATOMIC_RELAXED);
		}
		pthread_mutex_unlock(&win_lock);
		if (hold && !flushing)
			flushing = cupti_flusher_start() == 0;
		while (hold && __atomic_load_n(&win_open, __ATOMIC_ACQUIRE))
			if (sleep_until(clock_ns(CLOCK_MONOTONIC) + NAP_MAX_MS * 1000000ull))
				goto out;
		window_close(CLOSE_SCHEDULE);
		/* cuptiFinalize failed: attached for good, flushed as when
		 * never detaching */
		if (!flushing && !__atomic_load_n(&detaching, __ATOMIC_RELAXED))
			flushing = cupti_flusher_start() == 0;
		/* periods slept through (a suspended process) are skipped */
		now = clock_ns(CLOCK_MONOTONIC);
		while (period <= now)
			at = next_open(&period);
	}
out:
	return 0;
}

/* begin() turned the kinds and callbacks on (and so knows they work): off
 * again until the first window, at a random point of the first period like
 * every other, so that the moment CUDA starts is sampled no more than any
 * other.  Without the sampler thread the trace stays whole. */
static void sampling_start(void)
{
	win_rand = win_since ^ ((uint64_t)getpid() << 32) ^ 0x9e3779b97f4a7c15ull;
	pthread_mutex_lock(&win_lock); /* the sampler opens no window before this is done */
	if (cupti_start_thread(sampler, "shimmer-gpuwin") < 0) {
		cupti_sampling = 0;
		log_debug("CUPTI: no sampler thread; recording every kernel");
	} else {
		cupti_kinds_set(0);
		cupti_callbacks_set(0);
		window_emit(win_since, win_since, 0, 0);
	}
	pthread_mutex_unlock(&win_lock);
}

void cupti_window_setup(void)
{
	cupti_sampling = settings.gpu_sample;
	keep_attached = !settings.gpu_detach;
	window_ns = settings.gpu_window_ns;
	period_ns = settings.gpu_period_ns;
}

void cupti_window_since_now(void)
{
	win_since = clock_now();
	win_start_mono = clock_ns(CLOCK_MONOTONIC);
}

void cupti_window_start(void)
{
	detaching = cupti_sampling && cupti_fn.cuptiFinalize && !keep_attached;
	/* Detached, CUPTI must hear from nobody: the sampler flushes. */
	if (!detaching)
		flushing = cupti_flusher_start() == 0;
	if (!detaching && !flushing)
		log_debug("CUPTI: no periodic flush; records come when buffers fill");
	if (cupti_sampling)
		sampling_start();
}

void cupti_window_pause(void)
{
	window_close(CLOSE_PAUSE);
}

int cupti_window_exit(void)
{
	int expect = AT_DETACHING, attached;

	if (cupti_sampling)
		window_close(CLOSE_EXIT);
	/* Detached, everything was delivered; a pending detach is called off
	 * (the exit flushes instead), and the callbacks it kept on go off, so
	 * that no call made now is awaited below. */
	pthread_mutex_lock(&win_lock);
	if (__atomic_compare_exchange_n(&cupti_attach, &expect, AT_ON, 0, __ATOMIC_ACQ_REL,
					__ATOMIC_RELAXED))
		cupti_callbacks_set(0);
	attached = attach_settled() == AT_ON;
	pthread_mutex_unlock(&win_lock);
	return attached;
}

void cupti_window_fork_child(void)
{
	flushing = 0;
	win_open = 0;
	cupti_attach = AT_ON;
	win_want_corr = 0;
	pthread_mutex_init(&win_lock, 0); /* the parent's sampler may have held it */
}
