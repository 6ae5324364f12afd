/*
 * Process lifecycle: the constructor reads the settings (settings.h),
 * connects, builds the region and sends HELLO; fork handlers give a child
 * its own region and connection; the destructor, or _exit, says BYE.  This file only
 * starts and stops: what tracing needs lives in the modules it calls.
 *
 * When tracing starts, CUDA_INJECTION64_PATH and NVTX_INJECTION64_PATH are
 * pointed at the shim unless already set, so CUDA and NVTX call us when
 * they start (cupti.c, nvtx.c), in this process and in its children.
 *
 * Any failure leaves tracing off and every hook a pass-through; only an
 * unreachable collector, or an address-space limit with too little room
 * for the shim's (room_for_us()), is reported, with one line on stderr.
 */
#include <errno.h>
#include <time.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "api.h"
#include "clock.h"
#include "conn.h"
#include "control.h"
#include "cupti.h"
#include "fatal.h"
#include "heap.h"
#include "intern.h"
#include "log.h"
#include "modules.h"
#include "nvtx.h"
#include "pyarena.h"
#include "real.h"
#include "settings.h"
#include "shim.h"
#include "stack.h"

#define REVIVE_PERIOD_NS 1000000000ull    /* no collector listens: try again after 1 s */
#define REVIVE_REFUSED_NS 30000000000ull  /* one took HELLO, and is gone again: 30 s */

static int clock_kind;
static void (*real_exit)(int), (*real_Exit)(int);
/* The fixed part of the HELLO that started tracing: a reconnect says it
 * again (the collector finds the process's row by it). */
static struct shm_msg_hello first_hello;
static uint64_t revive_at;   /* CLOCK_MONOTONIC_COARSE ns: the next attempt, at the earliest */
static int reviving;         /* an attempt is under way (its thread holds hello_buf) */
static uint64_t revived;     /* reconnects made */
/* The region's heartbeat when the collector we are connected to took our
 * HELLO (refused_hello()). */
static uint64_t hello_beat;

static void disable(void)
{
	__atomic_store_n(&shim_live.on, 0, __ATOMIC_RELAXED);
	shim_heap_store(SHM_MALLOC_OFF, __ATOMIC_RELAXED);
	/* no collector writes the control block any more */
	__atomic_store_n(&shim.ctl_word, &shim.ctl_seen, __ATOMIC_RELAXED);
}

/* The program closed or replaced our socket (conn.c said so): records
 * written so far are drained by the collector, which sees it close. */
static void lost(void)
{
	disable();
}

/* Connects, builds the region and sends HELLO.  0 or -errno. */
static int start(uint32_t ppid)
{
	const char *path = settings.socket;
	uint32_t nslots = shim.region.nslots, ring_bytes = shim.region.ring_bytes;
	struct shm_msg_hello h = { 0 };
	uint64_t t0, t1;
	int err;

	shim.pid = (uint32_t)getpid();
	err = conn_open(path, lost);
	if (err < 0) {
		log_warn("collector not reached at %s (%s); not tracing", path,
			 strerrordesc_np(-err));
		return err;
	}
	err = region_create(&shim.region, nslots, ring_bytes);
	if (err < 0) {
		log_warn("cannot create the event region (%s); not tracing", strerrordesc_np(-err));
		goto fail;
	}
	control_plan(shim.region.hdr);
	h.pid = shim.pid;
	h.ppid = ppid;
	/* the effective uid: what the collector reads from the socket (SO_PEERCRED) */
	h.uid = (uint32_t)geteuid();
	h.flags = (settings.lossless ? SHM_HELLO_LOSSLESS : 0) |
		  (settings.offcpu ? SHM_HELLO_OFFCPU : 0) | settings.heap_rows;
	h.rank = settings.rank;
	h.local_rank = settings.local_rank;
	h.malloc_mode = (uint32_t)shim.mode;
	h.clock = (uint32_t)clock_kind;
	h.sample_bytes = settings.sample_bytes;
	h.start_wall_ns = clock_ns(CLOCK_REALTIME);
	t0 = clock_now();
	h.start_mono_ns = clock_ns(CLOCK_MONOTONIC);
	t1 = clock_now();
	h.start_ts = t0 + (t1 - t0) / 2;
	h.region_bytes = shim.region.bytes;
	h.nslots = nslots;
	h.ring_bytes = ring_bytes;
	h.job_kind = (uint32_t)settings.job_kind;
	err = conn_hello(&h, shim.region.fd, settings.job, settings.job_len);
	if (err < 0) {
		log_warn("cannot send HELLO to the collector (%s); not tracing",
			 strerrordesc_np(-err));
		goto fail;
	}
	/* The memfd is kept (high, away from the numbers programs reuse), to
	 * be handed to the next collector if this one dies (shim_revive()). */
	shim.region.fd = conn_move_high(shim.region.fd);
	first_hello = h;
	revive_at = 0;
	reviving = 0;
	hello_beat = 0; /* a new region: no collector has passed over it */
	err = intern_init(conn_sendmsg);
	if (err < 0)
		log_debug("intern table: %s; names will be missing", strerrordesc_np(-err));
	intern_withhold(settings.withhold);
	log_debug("tracing pid %u: %u slots of %u bytes, malloc mode %d, clock %d", shim.pid,
		 nslots, ring_bytes, shim.mode, clock_kind);
	return 0;
fail:
	region_destroy(&shim.region);
	conn_close();
	return err;
}

/*
 * The collector closed our connection (the caller saw it hung up) without
 * one pass over our region since it took the HELLO, and without marking
 * the process's end: it refused the HELLO before mapping the region, as a
 * collector of another wire version does (it reads no further than the
 * message header, so it can write nothing into a region whose layout it
 * does not know), or it died before reading.  Nothing of the process would
 * be stored, and reconnecting to it again would only be refused again (a
 * lossless wait did so every 100 ms, for ever, and the program never
 * ended): tracing stops, said in one line.  1 when so.
 */
static int refused_hello(void)
{
	const struct shm_region *r = shim.region.hdr;

	if (__atomic_load_n(&r->heartbeat, __ATOMIC_ACQUIRE) != hello_beat ||
	    __atomic_load_n(&r->collector_ended, __ATOMIC_ACQUIRE))
		return 0;
	disable();
	log_warn("the collector at %s closed the connection without reading any of this "
		 "process's events (another shimmer version? its log says why); not tracing",
		 settings.socket);
	return 1;
}

/*
 * The collector died (crashed, killed): its end of the socket closed.  The
 * process keeps its region, and what its rings hold waits there; this
 * says HELLO again, flagged SHM_HELLO_RECONNECT, to whatever collector
 * listens on the socket now, and that one reads on from where the dead one
 * stopped and counts what was lost.  Never waits: one non-blocking attempt,
 * at most one a second (once a collector took the HELLO and went away
 * again, perhaps refusing it, one in 30 s), from the paths that already
 * drop (a full ring; thread.c), a lossless wait and the exit; never in a
 * vfork child (it shares our memory, not our pid).  Async-signal-safe.
 * 1 when reconnected.
 *
 * It does not set in_shim: nothing here calls a traced function (only
 * system calls and log.h's lines), so in_shim would hide nothing of ours,
 * only a signal handler's calls.  A handler that ran in its system calls
 * (where a pending signal is delivered: on their return) had its mallocs
 * and frees passed through uncounted, and the exact counters fell short of
 * the program's calls (t_signal's sample run, 1 run in 7: 2 to 11 calls).
 * The hook that drops holds its busy bit (BUSY_HEAP, BUSY_RING), so such a
 * call is counted and its record dropped; `reviving` keeps a handler's own
 * drop out of this function.
 */
int shim_revive(int now)
{
	uint64_t t = clock_ns(CLOCK_MONOTONIC_COARSE), period = REVIVE_PERIOD_NS, beat;
	struct shm_msg_hello h;
	int idle = 0, ok = 0, saved = errno, err;

	if (!__atomic_load_n(&shim_live.on, __ATOMIC_ACQUIRE) ||
	    (!now && t < __atomic_load_n(&revive_at, __ATOMIC_RELAXED)) ||
	    !__atomic_compare_exchange_n(&reviving, &idle, 1, 0, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED))
		return 0;
	if ((uint32_t)getpid() == shim.pid && region_fd(&shim.region) >= 0 && conn_hung_up() &&
	    !__atomic_load_n(&shim.region.hdr->collector_ended, __ATOMIC_ACQUIRE) &&
	    !refused_hello()) {
		/* read before: a pass of the new collector moves it after */
		beat = __atomic_load_n(&shim.region.hdr->heartbeat, __ATOMIC_ACQUIRE);
		h = first_hello;
		h.flags |= SHM_HELLO_RECONNECT;
		h.ppid = (uint32_t)getppid();
		err = conn_reconnect(settings.socket, &h, shim.region.fd, settings.job,
				     settings.job_len);
		if (err == 0) {
			hello_beat = beat;
			/* strings sent to the dead collector may never have
			 * been stored: each is sent again at its next use */
			intern_reconnect();
			thread_reconnected();
			__atomic_fetch_add(&revived, 1, __ATOMIC_RELAXED);
			period = REVIVE_REFUSED_NS;
			ok = 1;
			log_debug("reconnected to the collector at %s", settings.socket);
		}
	}
	__atomic_store_n(&revive_at, t + period, __ATOMIC_RELAXED);
	__atomic_store_n(&reviving, 0, __ATOMIC_RELEASE);
	errno = saved;
	return ok;
}

/* Exit with no collector since the last one died: what the rings still
 * hold, and what was dropped or read but not committed since that
 * collector's last commit (wire.h's committed marks), is not stored.
 * One line says so. */
static void lost_at_exit(int refused)
{
	const struct shm_region *r = shim.region.hdr;
	uint32_t hwm = __atomic_load_n(&r->slots_hwm, __ATOMIC_ACQUIRE);
	uint64_t events = 0, unread = 0;

	for (uint32_t i = 0; i < hwm && i < shim.region.nslots; i++) {
		const struct shm_slot *sl = region_slot(&shim.region, i);
		uint64_t head = __atomic_load_n(&sl->head, __ATOMIC_ACQUIRE),
			 tail = __atomic_load_n(&sl->tail, __ATOMIC_ACQUIRE),
			 consumed = __atomic_load_n(&sl->consumed, __ATOMIC_RELAXED),
			 committed = __atomic_load_n(&sl->committed, __ATOMIC_RELAXED),
			 dropped = __atomic_load_n(&sl->dropped, __ATOMIC_RELAXED),
			 mark = sl->committed_gen == sl->generation ? sl->committed_dropped : 0;

		if (sl->state == SHM_SLOT_FREE)
			continue;
		events += (consumed > committed ? consumed - committed : 0) +
			  (dropped > mark ? dropped - mark : 0);
		unread += head > tail ? head - tail : 0;
	}
	if (r->dropped_no_slot > r->committed_no_slot)
		events += r->dropped_no_slot - r->committed_no_slot;
	log_warn("%s: this process's recording ends at its last commit (%llu events lost "
		 "after it, %llu KiB of records never read)",
		 refused ? "the collector was lost and the one that came back did not go on "
			   "with this process (its recording is elsewhere or was ended)"
			 : "the collector was lost and no other came back before exit",
		 (unsigned long long)events, (unsigned long long)((unread + 1023) / 1024));
}

/*
 * Whether the address space RLIMIT_AS leaves (ulimit -v, a batch system's
 * memory limit) has room for the shim's: the region (nslots rings,
 * shared), the stack tables (reserved, mostly never touched) and a few
 * MiB of tables and libraries, which all count against the limit.  At
 * most an eighth of it: a program near its limit bare would otherwise
 * fail under the shim (Python's MemoryError under `ulimit -v 600000`,
 * where the shim took 250 MiB in sample mode, 450 MiB in all mode).
 * Better untraced, said in one line, than a program that behaves
 * otherwise.  A limit the program sets itself later cannot be foreseen.
 */
#define RESERVE_SLACK (16ull << 20)
#define AS_SHARE 8u

static int room_for_us(void)
{
	uint64_t need = SHM_REGION_BYTES((uint64_t)settings.nslots, (uint64_t)settings.ring_bytes) +
			stack_reserve_bytes() + RESERVE_SLACK;
	struct rlimit rl;

	if (getrlimit(RLIMIT_AS, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ||
	    need <= (uint64_t)rl.rlim_cur / AS_SHARE)
		return 1;
	log_warn("RLIMIT_AS (ulimit -v) allows %llu MiB of address space and tracing would take "
		 "%llu MiB, more than an eighth of it; not tracing (SHIMMER_MAX_THREADS, "
		 "SHIMMER_RING_KB or SHIMMER_STACKS=0 take less)",
		 (unsigned long long)(rl.rlim_cur >> 20), (unsigned long long)(need >> 20));
	return 0;
}

static void enable(void)
{
	/* A child forked while paused stays paused. */
	shim_heap_store(shim.paused ? SHM_MALLOC_OFF : shim.mode, __ATOMIC_RELAXED);
	__atomic_store_n(&shim_live.on, 1, __ATOMIC_RELEASE);
}

/*
 * The child must never write into the parent's rings: the pages are
 * shared.  It unmaps them, drops the parent's connection and starts over as
 * a process of its own whose parent is the one that forked.
 */
static void fork_child(void)
{
	uint32_t parent = shim.pid;
	sigset_t mask;

	shim_own_enter(&shim_tls, &mask);
	control_fork_child();
	disable();
	region_destroy(&shim.region);
	conn_close();
	intern_fork_child(conn_sendmsg);
	heap_fork_child();
	thread_fork_child();
	api_fork_child();
	cupti_fork_child();
	modules_fork_child();
	pyarena_fork_child();
	stack_fork_child();
	fatal_fork_child();
	if (start(parent) == 0) {
		stack_count_in(shim.region.hdr);
		control_setup(0);
		api_publish_state();
		enable();
		modules_report();
	}
	shim_own_leave(&shim_tls, &mask);
}

__attribute__((constructor)) static void shim_init(void)
{
	const char *self, *who;
	int saved = errno, err;
	sigset_t mask;

	shim_own_enter(&shim_tls, &mask);
	heap_boot();
	settings_read();
	err = shim_live_guard();
	if (err < 0)
		log_debug("MADV_WIPEONFORK: %s; a child made by a raw clone(2) would write into "
			  "our rings", strerrordesc_np(-err));
	if (settings.disable)
		goto out;
	shim.mode = settings.malloc_mode;
	shim.region.ring_bytes = settings.ring_bytes;
	shim.region.nslots = settings.nslots;
	clock_kind = clock_init();
	if (shim.mode != SHM_MALLOC_OFF && (who = heap_preempted())) {
		/* recorded, the heap would be stored as traced and wrong */
		log_warn("the program's malloc is %s's, ahead of libshimmer.so: the heap is not "
			 "traced (put libshimmer.so first in LD_PRELOAD)", who);
		shim.mode = SHM_MALLOC_OFF;
	}
	err = heap_setup(shim.mode);
	if (err < 0) {
		log_debug("sampled set: %s; heap not traced", strerrordesc_np(-err));
		shim.mode = SHM_MALLOC_OFF;
	}
	err = thread_init();
	if (err < 0) {
		log_debug("thread key: %s", strerrordesc_np(-err));
		goto out;
	}
	control_init();
	if (!room_for_us() || start((uint32_t)getppid()) < 0)
		goto out;
	control_setup(1);
	api_publish_state();
	err = -pthread_atfork(thread_fork_prepare, thread_fork_parent, fork_child);
	if (err < 0) {
		log_debug("pthread_atfork: %s; not tracing", strerrordesc_np(-err));
		goto out;
	}
	self = real_self_path();
	cupti_setup(self);
	nvtx_setup(self);
	err = modules_init();
	if (err < 0)
		log_debug("module table: %s; no module reports", strerrordesc_np(-err));
	stack_setup();
	fatal_setup();
	real_exit = (void (*)(int))real_next("_exit");
	real_Exit = (void (*)(int))real_next("_Exit");
	enable();
	modules_report();
out:
	heap_early_end(__atomic_load_n(&shim_live.on, __ATOMIC_RELAXED));
	shim_own_leave(&shim_tls, &mask);
	errno = saved;
}

/*
 * A reconnect said at exit: a collector that refuses it (its store holds
 * no row of this process: a daemon restarted since finished the
 * recording) closes the connection at once, having marked the region.
 * Waiting at most 100 ms for that verdict, only here (after a collector
 * died), lets the loss be said rather than kept silent.
 */
static void refused_at_exit(void)
{
	for (int i = 0; i < 20; i++) {
		if (__atomic_load_n(&shim.region.hdr->collector_ended, __ATOMIC_ACQUIRE) ==
		    SHM_ENDED_REFUSED) {
			lost_at_exit(1);
			return;
		}
		nanosleep(&(struct timespec){ .tv_nsec = 5000000 }, NULL);
	}
}

/* A struct timeval in ns, for exit_cpu() */
#define TV_NS(tv) ((uint64_t)(tv).tv_sec * 1000000000u + (uint64_t)(tv).tv_usec * 1000u)

/*
 * The process's CPU time into BYE, as late as the shim can read it: the
 * collector's readings of /proc come every 100 ms and stop when the
 * process is gone, which its parent may reap before the collector gets to
 * its end; and a thread that ended took its last 100 ms with it.  Two
 * system calls, async-signal-safe (clock_gettime is POSIX's; glibc's
 * getrusage is the bare system call): _exit from a handler ends here.
 */
static void exit_cpu(struct shm_msg_bye *m)
{
	struct timespec t;
	struct rusage ru;

	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t) != 0 || getrusage(RUSAGE_SELF, &ru) != 0)
		return;
	m->cpu_ns = (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
	m->user_ns = TV_NS(ru.ru_utime);
	m->sys_ns = TV_NS(ru.ru_stime);
	m->flags |= SHM_BYE_CPU;
}

/*
 * The orderly end: BYE, once, and the exit time in the region.  From the
 * destructor (exit(), a return from main) or from _exit/_Exit, which skip
 * the destructors (a forked child's usual end).  Not in a vfork child: it
 * shares our memory and socket, and its _exit is not our process's.
 */
static void goodbye(void)
{
	static int said;
	struct shim_thread *t = &shim_tls;
	struct shm_msg_bye bye = { 0 };
	uint64_t ts;
	uint32_t ended;
	int saved = errno, b;

	if (!__atomic_load_n(&shim_live.on, __ATOMIC_ACQUIRE) || (uint32_t)getpid() != shim.pid ||
	    __atomic_exchange_n(&said, 1, __ATOMIC_ACQ_REL))
		return;
	/* Normally done already by CUPTI's atexit handler: a no-op then. */
	cupti_exit();
	/* Nothing below makes a traced call (system calls and log.h's
	 * lines): a signal handler's calls in it are counted, their records
	 * dropped. */
	b = shim_busy(t);
	ts = clock_now();
	__atomic_store_n(&shim.region.hdr->exit_ts, ts, __ATOMIC_RELEASE);
	/* A collector that died: the next one, if there is one now, reads
	 * what the rings hold after the BYE. */
	ended = __atomic_load_n(&shim.region.hdr->collector_ended, __ATOMIC_ACQUIRE);
	if (conn_hung_up() && ended != SHM_ENDED_ROW) {
		if (shim_revive(1))
			refused_at_exit();
		/* (off: refused_hello() said its line, nothing to wait for) */
		else if (__atomic_load_n(&shim_live.on, __ATOMIC_ACQUIRE))
			lost_at_exit(ended == SHM_ENDED_REFUSED);
	}
	bye.ts = ts;
	exit_cpu(&bye);
	conn_bye(&bye);
	shim_unbusy(t, b);
	errno = saved;
}

/* Events written after this still reach the collector: it drains the
 * shared rings once the socket closes. */
__attribute__((destructor)) static void shim_fini(void)
{
	goodbye();
}

SHIM_EXPORT void _exit(int status)
{
	goodbye();
	if (real_exit)
		real_exit(status);
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}

SHIM_EXPORT void _Exit(int status)
{
	goodbye();
	if (real_Exit)
		real_Exit(status);
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}
