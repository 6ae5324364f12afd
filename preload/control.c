/*
 * Recording control (control.h): the triggers of SHIMMER_START, SHIMMER_STOP
 * and SHIMMER_DURATION, the collector's commands, and the thread that
 * waits for both.
 *
 * Deadlines are CLOCK_MONOTONIC nanoseconds, 0 when none: start_at (the
 * start trigger after:DURATION) and stop_at (the stop trigger, the end of
 * SHIMMER_DURATION or of a ctl window, whichever is set last).  Any thread
 * may set them (a range trigger that starts recording sets stop_at for the
 * duration); it then bumps the region's ctl_wake, so the control thread
 * wakes and sleeps again until the new deadline.  The thread samples
 * ctl_wake before it looks at anything, so no change is missed.
 */
#include "control.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "clock.h"
#include "intern.h"
#include "log.h"
#include "settings.h"
#include "shim.h"

#define STACK_BYTES (64u * 1024u)
#define WATCHED_IDS 32 /* START/END instances of a watched name open at once */

int control_watching;

static const struct intern_entry *watched_name;
static uint64_t instances;   /* watched instances ended, over all threads */
static int start_armed;      /* SHIMMER_START=after-range: not fired yet */
static int stop_armed;       /* SHIMMER_STOP=after-range: not fired yet */
static uint64_t start_at;    /* SHIMMER_START=after: */
static uint64_t stop_at;
static uint64_t open_ids[WATCHED_IDS];
static uint32_t seen_id;     /* the last collector command applied */

static uint64_t mono_now(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

static long futex(uint32_t *addr, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, addr, op, val, ts, NULL, FUTEX_BITSET_MATCH_ANY);
}

/* The control thread looks again (a deadline changed). */
static void kick(void)
{
	struct shm_region *r = shim.region.hdr;

	if (!r)
		return;
	__atomic_add_fetch(&r->ctl_wake, 1, __ATOMIC_SEQ_CST);
	futex(&r->ctl_wake, FUTEX_WAKE, INT_MAX, NULL);
}

static void set_deadline(uint64_t *at, uint64_t when)
{
	__atomic_store_n(at, when, __ATOMIC_RELAXED);
	kick();
}

/* Recording begins by a trigger: SHIMMER_DURATION counts from now. */
static void begin_recording(void)
{
	api_set_paused(0);
	if (settings.duration_ns)
		set_deadline(&stop_at, mono_now() + settings.duration_ns);
}

static void update_watching(void)
{
	__atomic_store_n(&control_watching,
			 __atomic_load_n(&start_armed, __ATOMIC_RELAXED) ||
				 __atomic_load_n(&stop_armed, __ATOMIC_RELAXED),
			 __ATOMIC_RELAXED);
}

/* A ctl command: the triggers not yet fired are the user's no longer. */
static void cancel_triggers(void)
{
	__atomic_store_n(&start_armed, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&stop_armed, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&start_at, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&stop_at, 0, __ATOMIC_RELAXED);
	update_watching();
}

void control_setup(void)
{
	const struct trigger *st = &settings.start, *sp = &settings.stop;
	uint64_t now = mono_now();
	const char *name = NULL;

	if (st->kind != TRIGGER_NONE)
		shim.paused = 1;
	if (st->kind == TRIGGER_AFTER)
		start_at = now + st->ns;
	if (st->kind == TRIGGER_RANGE) {
		start_armed = 1;
		name = st->range;
	}
	if (sp->kind == TRIGGER_AFTER)
		stop_at = now + sp->ns;
	if (sp->kind == TRIGGER_RANGE) {
		stop_armed = 1;
		name = sp->range;
	}
	if (st->kind == TRIGGER_RANGE && sp->kind == TRIGGER_RANGE &&
	    strcmp(st->range, sp->range))
		log_warn("SHIMMER_START and SHIMMER_STOP count different ranges (%s, %s); "
			 "counting %s for both", st->range, sp->range, sp->range);
	if (st->kind == TRIGGER_NONE && settings.duration_ns &&
	    (!stop_at || now + settings.duration_ns < stop_at))
		stop_at = now + settings.duration_ns;
	if (name) {
		shim_tls.in_shim++;
		watched_name = intern_lookup(name, strlen(name));
		shim_tls.in_shim--;
		if (!watched_name) {
			log_warn("cannot watch range %s (string table full); SHIMMER_START and "
				 "SHIMMER_STOP by range are ignored", name);
			start_armed = stop_armed = 0;
			shim.paused = st->kind == TRIGGER_PAUSED || st->kind == TRIGGER_AFTER;
		}
	}
	update_watching();
}

int control_is_watched(const struct intern_entry *name)
{
	return name && name == watched_name;
}

void control_started(uint64_t id)
{
	static int once;

	for (int i = 0; i < WATCHED_IDS; i++) {
		uint64_t free_id = 0;

		if (__atomic_compare_exchange_n(&open_ids[i], &free_id, id, 0, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED))
			return;
	}
	/* More watched START ranges open at once than we keep: this one will
	 * not be counted.  Said once. */
	log_warn_once(&once, "more than %d watched ranges open at once; some are not counted",
		      WATCHED_IDS);
}

void control_end(uint64_t id)
{
	for (int i = 0; i < WATCHED_IDS; i++) {
		uint64_t want = id;

		if (id && __atomic_compare_exchange_n(&open_ids[i], &want, 0, 0, __ATOMIC_RELAXED,
						      __ATOMIC_RELAXED)) {
			control_instance_done();
			return;
		}
	}
}

void control_instance_done(void)
{
	uint64_t n = __atomic_add_fetch(&instances, 1, __ATOMIC_RELAXED);
	int armed = 1;

	if (n >= settings.start.count &&
	    __atomic_compare_exchange_n(&start_armed, &armed, 0, 0, __ATOMIC_RELAXED,
					__ATOMIC_RELAXED))
		begin_recording();
	armed = 1;
	if (n >= settings.stop.count &&
	    __atomic_compare_exchange_n(&stop_armed, &armed, 0, 0, __ATOMIC_RELAXED,
					__ATOMIC_RELAXED))
		api_set_paused(1);
	update_watching();
}

/* A new command of the collector's, if one came: applied, then said done. */
static void poll_command(struct shm_region *r)
{
	uint32_t id, again, cmd;
	uint64_t arg;

	do {
		id = __atomic_load_n(&r->ctl_id, __ATOMIC_ACQUIRE);
		cmd = __atomic_load_n(&r->ctl_cmd, __ATOMIC_RELAXED);
		arg = __atomic_load_n(&r->ctl_arg, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		again = __atomic_load_n(&r->ctl_id, __ATOMIC_RELAXED);
	} while (id != again);
	if (id == seen_id)
		return;
	seen_id = id;
	cancel_triggers();
	switch (cmd) {
	case SHM_CTL_PAUSE:
		api_set_paused(1);
		break;
	case SHM_CTL_RESUME:
		api_set_paused(0);
		break;
	case SHM_CTL_WINDOW:
		api_set_paused(0);
		__atomic_store_n(&stop_at, mono_now() + arg, __ATOMIC_RELAXED);
		break;
	default:
		log_debug("control: unknown command %u", cmd);
	}
	__atomic_store_n(&r->ctl_done_ts, clock_now(), __ATOMIC_RELAXED);
	__atomic_store_n(&r->ctl_done, id, __ATOMIC_RELEASE);
	log_debug("control: command %u (%u) applied", id, cmd);
}

/* Fires what is due; returns the next deadline (0: none). */
static uint64_t timers(void)
{
	uint64_t now = mono_now(), s = __atomic_load_n(&start_at, __ATOMIC_RELAXED);
	uint64_t e;

	if (s && s <= now && __atomic_compare_exchange_n(&start_at, &s, 0, 0, __ATOMIC_RELAXED,
							 __ATOMIC_RELAXED)) {
		begin_recording();
		s = 0;
	}
	e = __atomic_load_n(&stop_at, __ATOMIC_RELAXED);
	if (e && e <= now && __atomic_compare_exchange_n(&stop_at, &e, 0, 0, __ATOMIC_RELAXED,
							 __ATOMIC_RELAXED)) {
		api_set_paused(1);
		e = 0;
	}
	s = __atomic_load_n(&start_at, __ATOMIC_RELAXED);
	e = __atomic_load_n(&stop_at, __ATOMIC_RELAXED);
	return !s ? e : !e ? s : s < e ? s : e;
}

static void *control_main(void *arg)
{
	struct shm_region *r = arg;
	struct timespec ts;
	uint64_t next;
	uint32_t wake;

	/* Nothing this thread does is traced; it makes no calls of the
	 * program's, and markers go out through api_set_paused(). */
	shim_tls.in_shim++;
	prctl(PR_SET_NAME, "shimmer-ctl");
	__atomic_or_fetch(&r->ctl_state, SHM_STATE_CONTROL, __ATOMIC_RELEASE);
	for (;;) {
		wake = __atomic_load_n(&r->ctl_wake, __ATOMIC_SEQ_CST);
		poll_command(r);
		next = timers();
		if (next) {
			ts.tv_sec = (time_t)(next / 1000000000ull);
			ts.tv_nsec = (long)(next % 1000000000ull);
		}
		futex(&r->ctl_wake, FUTEX_WAIT_BITSET, wake, next ? &ts : NULL);
	}
	return NULL;
}

int control_start(void)
{
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t tid;
	int err;

	/* seen_id is 0: a command the collector wrote into this new region
	 * before the thread ran (ids start at 1) is applied at once. */
	if (!settings.control || !shim.region.hdr)
		return 0;
	err = pthread_attr_init(&attr);
	if (err)
		return -err;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, STACK_BYTES);
	/* The new thread inherits the mask: it never takes a signal of the
	 * program's. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&tid, &attr, control_main, shim.region.hdr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (err) {
		log_debug("control thread: %s; `shimmer ctl` cannot reach this process",
			  strerrordesc_np(err));
		return -err;
	}
	return 0;
}

void control_fork_child(void)
{
	/* The parent's command numbers mean nothing to the child's region. */
	seen_id = 0;
}
