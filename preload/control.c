/*
 * Recording control (control.h): the triggers of SHIMMER_START, SHIMMER_STOP
 * and SHIMMER_DURATION, and the region's control block, applied by the
 * hooks themselves.
 *
 * The block is read under its sequence lock (wire.h) and applied under
 * api.c's pause lock, taken with a try: a thread that finds another one
 * applying goes on with the state it saw, as a call in flight on another
 * CPU would have anyway.  shim.ctl_seen moves (release) only once the new
 * state is in place, so a hook that finds the sequence equal to it also
 * finds that state.
 */
#include "control.h"

#include <errno.h>
#include <string.h>

#include "api.h"
#include "clock.h"
#include "intern.h"
#include "log.h"
#include "settings.h"
#include "shim.h"

#define WATCHED_IDS 32 /* START/END instances of a watched name open at once */
#define READ_TRIES 8   /* the collector writes the block in a few stores */

int control_watching;

static const struct intern_entry *watched_name;
static uint64_t instances;   /* watched instances ended, over all threads */
static int start_armed;      /* SHIMMER_START=after-range: not fired yet */
static int stop_armed;       /* SHIMMER_STOP=after-range: not fired yet */
static uint64_t open_ids[WATCHED_IDS];
static uint32_t seen_id;     /* the last command applied */
static uint32_t seen_user;   /* ctl_user as last seen */
/* The plan the next region gets (CLOCK_MONOTONIC ns, 0: none). */
static uint64_t plan_start_at, plan_stop_at, plan_duration;

/* The collector's line of the block, read whole. */
struct block {
	uint32_t seq, id, cmd, user;
	uint64_t ts, start_at, stop_at, duration;
};

static uint64_t mono_now(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

/* The block under its sequence lock: every field loaded with acquire, so
 * that the second look at the sequence comes after them.  0, or -EAGAIN
 * when the collector was writing it each time we looked. */
static int read_block(const struct shm_region *r, struct block *b)
{
	for (int i = 0; i < READ_TRIES; i++) {
		uint32_t s = __atomic_load_n(&r->ctl_seq, __ATOMIC_ACQUIRE);

		if (s & 1) {
			__builtin_ia32_pause();
			continue;
		}
		b->id = __atomic_load_n(&r->ctl_id, __ATOMIC_ACQUIRE);
		b->cmd = __atomic_load_n(&r->ctl_cmd, __ATOMIC_ACQUIRE);
		b->user = __atomic_load_n(&r->ctl_user, __ATOMIC_ACQUIRE);
		b->ts = __atomic_load_n(&r->ctl_ts, __ATOMIC_ACQUIRE);
		b->start_at = __atomic_load_n(&r->ctl_start_at, __ATOMIC_ACQUIRE);
		b->stop_at = __atomic_load_n(&r->ctl_stop_at, __ATOMIC_ACQUIRE);
		b->duration = __atomic_load_n(&r->ctl_duration_ns, __ATOMIC_ACQUIRE);
		if (__atomic_load_n(&r->ctl_seq, __ATOMIC_RELAXED) == s) {
			b->seq = s;
			return 0;
		}
	}
	return -EAGAIN;
}

static void update_watching(void)
{
	__atomic_store_n(&control_watching,
			 __atomic_load_n(&start_armed, __ATOMIC_RELAXED) ||
				 __atomic_load_n(&stop_armed, __ATOMIC_RELAXED),
			 __ATOMIC_RELAXED);
}

/* A ctl command: the range triggers not yet fired are the user's no
 * longer (the collector dropped the time ones). */
static void cancel_triggers(void)
{
	__atomic_store_n(&start_armed, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&stop_armed, 0, __ATOMIC_RELAXED);
	update_watching();
}

void control_init(void)
{
	const struct trigger *st = &settings.start, *sp = &settings.stop;
	uint64_t now = mono_now();

	shim.paused = st->kind != TRIGGER_NONE;
	plan_start_at = st->kind == TRIGGER_AFTER ? now + st->ns : 0;
	plan_stop_at = sp->kind == TRIGGER_AFTER ? now + sp->ns : 0;
	/* SHIMMER_DURATION counts from when a start trigger fires; with no
	 * start trigger, from now. */
	plan_duration = st->kind == TRIGGER_AFTER || st->kind == TRIGGER_RANGE ?
			settings.duration_ns : 0;
	if (st->kind == TRIGGER_NONE && settings.duration_ns &&
	    (!plan_stop_at || now + settings.duration_ns < plan_stop_at))
		plan_stop_at = now + settings.duration_ns;
	start_armed = st->kind == TRIGGER_RANGE;
	stop_armed = sp->kind == TRIGGER_RANGE;
}

void control_plan(struct shm_region *r)
{
	r->ctl_start_at = plan_start_at;
	r->ctl_stop_at = plan_stop_at;
	r->ctl_duration_ns = plan_duration;
	r->ctl_state = settings.control ? SHM_STATE_CONTROL : 0;
}

void control_setup(int first)
{
	const struct trigger *st = &settings.start, *sp = &settings.stop;
	const char *name = sp->kind == TRIGGER_RANGE ? sp->range :
			   st->kind == TRIGGER_RANGE ? st->range : NULL;

	/* only from the constructor and the fork child, inside their own
	 * section (shim_own_enter()) */
	if (first && st->kind == TRIGGER_RANGE && sp->kind == TRIGGER_RANGE &&
	    strcmp(st->range, sp->range))
		log_warn("SHIMMER_START and SHIMMER_STOP count different ranges (%s, %s); "
			 "counting %s for both", st->range, sp->range, sp->range);
	if (first && name) {
		watched_name = intern_lookup(name, strlen(name));
		if (!watched_name) {
			log_warn("cannot watch range %s (string table full); SHIMMER_START and "
				 "SHIMMER_STOP by range are ignored", name);
			start_armed = stop_armed = 0;
			shim.paused = st->kind == TRIGGER_PAUSED || st->kind == TRIGGER_AFTER;
		}
	}
	update_watching();
	/* Applying a command inside a hook then sends nothing. */
	api_intern_markers();
	seen_id = seen_user = 0;
	__atomic_store_n(&shim.ctl_seen, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&shim.ctl_word, &shim.region.hdr->ctl_seq, __ATOMIC_RELEASE);
}

void control_fork_child(void)
{
	struct shm_region *r = shim.region.hdr;
	struct block b;

	/* Hooks stop reading the parent's block, which goes away. */
	__atomic_store_n(&shim.ctl_word, &shim.ctl_seen, __ATOMIC_RELAXED);
	if (r && read_block(r, &b) == 0) {
		/* What the parent had not applied yet was in force for it
		 * when it forked; no markers: the child records from its
		 * start in this state. */
		if (b.user != seen_user)
			cancel_triggers();
		if (b.id != seen_id && (b.cmd == SHM_CTL_PAUSE || b.cmd == SHM_CTL_RESUME))
			shim.paused = b.cmd == SHM_CTL_PAUSE;
		plan_start_at = b.start_at;
		plan_stop_at = b.stop_at;
		plan_duration = b.duration;
		/* A range trigger that began recording before the collector
		 * planned its stop: the child plans it. */
		if (__atomic_load_n(&r->ctl_began, __ATOMIC_ACQUIRE) && plan_duration) {
			plan_stop_at = r->ctl_began + plan_duration;
			plan_duration = 0;
		}
	} else {
		plan_start_at = plan_stop_at = plan_duration = 0;
	}
	seen_id = seen_user = 0;
}

/* Applies block b (the pause lock held). */
static void apply(struct shm_region *r, const struct block *b, int from_heap)
{
	uint64_t ts;

	if (b->user != seen_user) {
		seen_user = b->user;
		cancel_triggers();
	}
	if (b->id == seen_id)
		return;
	seen_id = b->id;
	if (b->cmd == SHM_CTL_PAUSE || b->cmd == SHM_CTL_RESUME) {
		ts = b->ts;
		/* every record this thread wrote lies before its pause marker */
		if (b->cmd == SHM_CTL_PAUSE && shim_tls.last_ts > ts)
			ts = shim_tls.last_ts;
		api_flip(b->cmd == SHM_CTL_PAUSE, ts, !from_heap);
	} else {
		log_debug("control: unknown command %u", b->cmd);
	}
	__atomic_store_n(&r->ctl_done, b->id, __ATOMIC_RELEASE);
}

void control_poll(int from_heap)
{
	struct shim_thread *t = &shim_tls;
	struct shm_region *r = shim.region.hdr;
	struct block b;
	int saved, busy;

	if (t->in_shim || t->busy || !r || !__atomic_load_n(&shim_live.on, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&shim.ctl_word, __ATOMIC_RELAXED) == &shim.ctl_seen)
		return;
	if (!api_trylock())
		return;
	saved = errno;
	/* Applying makes no traced call but CUPTI's (api.c's tell_cupti(),
	 * in_shim): a signal handler's calls in it are counted, their
	 * records dropped. */
	busy = shim_busy(t);
	if (read_block(r, &b) == 0 && b.seq != __atomic_load_n(&shim.ctl_seen, __ATOMIC_RELAXED)) {
		apply(r, &b, from_heap);
		__atomic_store_n(&shim.ctl_seen, b.seq, __ATOMIC_RELEASE);
	}
	shim_unbusy(t, busy);
	api_unlock();
	errno = saved;
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

/* Recording begins by a range trigger: SHIMMER_DURATION counts from now,
 * and the collector, which keeps the deadlines, is told. */
static void begin_recording(void)
{
	struct shm_region *r = shim.region.hdr;

	api_set_paused(0);
	if (r && settings.duration_ns)
		__atomic_store_n(&r->ctl_began, mono_now(), __ATOMIC_RELEASE);
}

void control_instance_done(void)
{
	uint64_t n = __atomic_add_fetch(&instances, 1, __ATOMIC_RELAXED);
	int armed = 1;

	/* A command that came before this instance ended comes first. */
	control_poll(0);
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
