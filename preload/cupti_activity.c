/*
 * CUPTI's activity records: kinds, buffers, conversion, our threads; see
 * cupti_activity.h.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "cupti_activity.h"
#include "cupti_lib.h"
#include "intern.h"
#include "log.h"
#include "shim.h"

#define BUF_BYTES (4u << 20)
#define POOL 8
#define FLUSH_MS 100u

uint32_t cupti_session;
uint32_t cupti_seen_corr;
int cupti_bufs_out;

static int stop_flusher;

/* ---- activity kinds ---- */

static const CUpti_ActivityKind kinds[] = {
	CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
	CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))
#define NKINDS_REQUIRED 3
#define KIND_SYNC 3

static uint32_t enabled_kinds; /* bit i: kinds[i] is on */

/* The last graph launch entered (correlation as recorded; 0: none) and
 * when, and the launches cut short by the kinds going off.  The records of
 * a launch cut short may come many windows later (on an H200, after more
 * than 8 windows of 200 ms), so the cuts are kept in a ring of CUTS, in
 * the order made, which is the correlations' order (one session's ids
 * grow, and cupti_corr_of() puts the session above them): the converter
 * finds a kernel's launch by a binary search, and looks at the newest few
 * one by one (two threads' launches may be cut out of order). */
#define CUTS 1024u
#define CUTS_NEW 8u /* the newest, looked at one by one; the oldest as many may be overwritten */
static uint64_t last_graph, last_graph_at;
static int graph_driver;  /* a graph was launched through the driver alone */
static struct {
	uint64_t corr; /* written last, with release; 0 while written */
	uint64_t at;   /* the record clock as the kinds went off */
	int lost;      /* a pause of a whole recording, not a window's end */
} cuts[CUTS];
static unsigned int ncuts, ncuts_done;

void cupti_graph_entered(uint32_t correlation, int runtime)
{
	uint64_t corr = cupti_corr_of(correlation);

	/* A runtime launch enters the driver's under its correlation id: that
	 * inner ENTER keeps it a runtime launch. */
	if (!runtime && __atomic_load_n(&last_graph, __ATOMIC_RELAXED) != corr &&
	    !__atomic_load_n(&graph_driver, __ATOMIC_RELAXED))
		__atomic_store_n(&graph_driver, 1, __ATOMIC_RELAXED);
	/* the instant first: a cut that reads the new correlation reads it */
	__atomic_store_n(&last_graph_at, clock_now(), __ATOMIC_RELAXED);
	__atomic_store_n(&last_graph, corr, __ATOMIC_RELEASE);
}

static void cut_add(uint64_t corr, uint64_t at, int lost)
{
	unsigned int i = __atomic_fetch_add(&ncuts, 1, __ATOMIC_RELAXED) % CUTS;

	__atomic_store_n(&cuts[i].corr, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&cuts[i].at, at, __ATOMIC_RELAXED);
	__atomic_store_n(&cuts[i].lost, lost, __ATOMIC_RELAXED);
	__atomic_store_n(&cuts[i].corr, corr, __ATOMIC_RELEASE);
	__atomic_fetch_add(&ncuts_done, 1, __ATOMIC_RELEASE);
}

int cupti_graph_driver(void)
{
	return __atomic_load_n(&graph_driver, __ATOMIC_RELAXED);
}

/* Cut j (0 <= j < ncuts_done) against a kernel: as graph_cut_hit(). */
static int cut_hit(unsigned int j, uint64_t corr, uint64_t end)
{
	if (__atomic_load_n(&cuts[j % CUTS].corr, __ATOMIC_ACQUIRE) != corr)
		return 0;
	if (!__atomic_load_n(&cuts[j % CUTS].lost, __ATOMIC_RELAXED))
		return 2;
	return end > __atomic_load_n(&cuts[j % CUTS].at, __ATOMIC_RELAXED);
}

/* A kernel of a launch cut short: 1 when it is to be counted lost (it ends
 * after a pause's cut), 2 when it is left out unseen (any kernel of the
 * launch a window's end cut: the window ends where that launch began), 0
 * when it is kept.  The converter thread. */
static int graph_cut_hit(uint64_t corr, uint64_t end)
{
	unsigned int n = __atomic_load_n(&ncuts_done, __ATOMIC_ACQUIRE);
	unsigned int lo = n > CUTS - CUTS_NEW ? n - (CUTS - CUTS_NEW) : 0;
	unsigned int mid_, hi = n > lo + CUTS_NEW ? n - CUTS_NEW : lo, j;
	int hit;

	for (j = hi; j < n; j++)
		if ((hit = cut_hit(j, corr, end)))
			return hit;
	/* the first of [lo, hi) not below corr, then its equals */
	while (lo < hi) {
		mid_ = lo + (hi - lo) / 2;
		if (__atomic_load_n(&cuts[mid_ % CUTS].corr, __ATOMIC_ACQUIRE) < corr)
			lo = mid_ + 1;
		else
			hi = mid_;
	}
	for (j = lo; j < n && __atomic_load_n(&cuts[j % CUTS].corr, __ATOMIC_ACQUIRE) == corr; j++)
		if ((hit = cut_hit(j, corr, end)))
			return hit;
	return 0;
}

uint64_t cupti_kinds_off(int lost)
{
	uint64_t at = clock_now(), corr = __atomic_load_n(&last_graph, __ATOMIC_ACQUIRE), now;

	/* The cut is known before the kinds go off: turning them off may hand
	 * that launch's records over at once, with their false ends. */
	if (corr)
		cut_add(corr, at, lost);
	for (unsigned int i = 0; i < NKINDS; i++)
		if (enabled_kinds & (1u << i))
			cupti_fn.cuptiActivityDisable(kinds[i]);
	/* a graph launched meanwhile is the last one (the one before it stays
	 * cut too: at most one launch more left out) */
	now = __atomic_load_n(&last_graph, __ATOMIC_ACQUIRE);
	if (now != corr)
		cut_add(now, at, lost);
	return now ? __atomic_load_n(&last_graph_at, __ATOMIC_RELAXED) : 0;
}

void cupti_kinds_set(int on)
{
	if (!on) {
		cupti_kinds_off(1);
		return;
	}
	for (unsigned int i = 0; i < NKINDS; i++)
		if (enabled_kinds & (1u << i))
			cupti_fn.cuptiActivityEnable(kinds[i]);
}

CUptiResult cupti_kinds_enable(int sync)
{
	CUptiResult res;
	unsigned int i;

	for (i = 0; i < NKINDS; i++) {
		if (i == KIND_SYNC && !sync)
			continue;
		res = cupti_fn.cuptiActivityEnable(kinds[i]);
		if (res == CUPTI_SUCCESS) {
			enabled_kinds |= 1u << i;
		} else if (i < NKINDS_REQUIRED) {
			cupti_kinds_set(0);
			enabled_kinds = 0;
			return res;
		}
	}
	return CUPTI_SUCCESS;
}

void cupti_count_dropped(size_t n, const char *why)
{
	if (!n)
		return;
	log_debug("CUPTI: %zu records lost (%s)", n, why);
	if (shim.region.hdr)
		__atomic_fetch_add(&shim.region.hdr->dropped_cupti, n, __ATOMIC_RELAXED);
}

void cupti_corr_max(uint32_t *at, uint32_t id)
{
	uint32_t cur = __atomic_load_n(at, __ATOMIC_RELAXED);

	while (id > cur && !__atomic_compare_exchange_n(at, &cur, id, 1, __ATOMIC_RELEASE,
							 __ATOMIC_RELAXED))
		;
}

/* ---- buffers ---- */

/*
 * CUPTI clears each buffer it is given before filling it, on the thread
 * that needs it - a launching thread - unless told that buffers come
 * zeroed (CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER).  With a buffer
 * per thread and a flush every FLUSH_MS that is a clear of BUF_BYTES, and
 * its page faults, on every launching thread at every flush.  So we say
 * they come zeroed and keep that true: the pool is stocked by the
 * converter thread with pages faulted in (buf_stock), a used buffer is
 * cleared there after conversion (buf_release), and only an empty pool
 * falls back to a fresh mapping (zero pages) in the caller.
 */
static uint8_t *pool[POOL];

static uint8_t *buf_map(int populate)
{
	void *m = mmap(0, BUF_BYTES, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | (populate ? MAP_POPULATE : 0), -1, 0);

	return m == MAP_FAILED ? 0 : m;
}

/* The buffers CUPTI holds, so that those it still held when it was
 * detached (cuptiFinalize hands none back) are not lost. */
#define LENT 64
static uint8_t *lent[LENT];

static int lent_put(uint8_t *b)
{
	for (int i = 0; i < LENT; i++) {
		uint8_t *none = 0;

		if (__atomic_compare_exchange_n(&lent[i], &none, b, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED))
			return 0;
	}
	return -ENOSPC;
}

static int lent_take(uint8_t *b)
{
	for (int i = 0; i < LENT; i++) {
		uint8_t *was = b;

		if (__atomic_compare_exchange_n(&lent[i], &was, (uint8_t *)0, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED))
			return 0;
	}
	return -ENOENT;
}

/* Into the pool if there is room, else unmapped; 0 if pooled. */
static int buf_pool(uint8_t *b)
{
	uint8_t *none;
	int i;

	for (i = 0; i < POOL; i++) {
		none = 0;
		if (__atomic_compare_exchange_n(&pool[i], &none, b, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED))
			return 0;
	}
	munmap(b, BUF_BYTES);
	return -1;
}

/* CUPTI writes records from the buffer's start: `used` bytes of it. */
static void buf_release(uint8_t *b, size_t used)
{
	memset(b, 0, used < BUF_BYTES ? used : BUF_BYTES);
	buf_pool(b);
}

void cupti_lent_reclaim(void)
{
	for (int i = 0; i < LENT; i++) {
		uint8_t *b = __atomic_exchange_n(&lent[i], (uint8_t *)0, __ATOMIC_ACQ_REL);

		if (b)
			buf_release(b, BUF_BYTES);
	}
	__atomic_store_n(&cupti_bufs_out, 0, __ATOMIC_RELEASE);
}

void CUPTIAPI cupti_buf_request(uint8_t **buffer, size_t *size, size_t *max_records)
{
	uint8_t *b = 0;
	int i;

	for (i = 0; i < POOL && !b; i++)
		b = __atomic_exchange_n(&pool[i], (uint8_t *)0, __ATOMIC_ACQ_REL);
	if (!b)
		b = buf_map(0);
	/* a buffer we could not track is not lent: CUPTI counts its records lost */
	if (b && lent_put(b) < 0) {
		buf_pool(b);
		b = 0;
	}
	if (b)
		__atomic_add_fetch(&cupti_bufs_out, 1, __ATOMIC_RELAXED);
	*buffer = b;
	*size = b ? BUF_BYTES : 0;
	*max_records = 0;
}

/* Tops the pool up to half full with faulted-in buffers (converter
 * thread); the other half is room for the buffers it recycles. */
static void buf_stock(void)
{
	uint8_t *b;
	int i, have = 0;

	for (i = 0; i < POOL; i++)
		have += __atomic_load_n(&pool[i], __ATOMIC_ACQUIRE) != 0;
	for (; have < POOL / 2; have++)
		if (!(b = buf_map(1)) || buf_pool(b))
			break;
}

/* ---- conversion ---- */

/* The fields read below sit at the same offsets in every CONCURRENT_KERNEL
 * record version from Kernel5 (CUDA 11.0) to Kernel10 (CUDA 13). */
static void emit_kernel(struct shim_thread *t, const CUpti_ActivityKernel10 *k)
{
	struct shm_rec_kernel r = {
		.hdr = { .type = SHM_REC_KERNEL, .size = sizeof(r) },
		.start = k->start, .end = k->end, .correlation = cupti_corr_of(k->correlationId),
		.name_id = intern_str(k->name), .device = (int32_t)k->deviceId,
		.context = k->contextId, .stream = k->streamId,
		.registers = k->registersPerThread,
		.static_smem = (uint32_t)k->staticSharedMemory,
		.dynamic_smem = (uint32_t)k->dynamicSharedMemory,
		.grid = { (uint32_t)k->gridX, (uint32_t)k->gridY, (uint32_t)k->gridZ },
		.block = { (uint32_t)k->blockX, (uint32_t)k->blockY, (uint32_t)k->blockZ },
		.graph_id = k->graphId,
	};

	thread_emit_wait(t, &r, sizeof(r));
}

/* Memcpy5/6 and Memset3/4 share the fields read here. */
static void emit_memcpy(struct shim_thread *t, const CUpti_ActivityMemcpy6 *m)
{
	struct shm_rec_memcpy r = {
		.hdr = { .type = SHM_REC_MEMCPY, .size = sizeof(r) },
		.start = m->start, .end = m->end, .bytes = m->bytes,
		.correlation = cupti_corr_of(m->correlationId), .device = (int32_t)m->deviceId,
		.context = m->contextId, .stream = m->streamId, .copy_kind = m->copyKind,
		.src_kind = m->srcKind, .dst_kind = m->dstKind,
		.async = (m->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) ? 1 : 0,
	};

	thread_emit_wait(t, &r, sizeof(r));
}

static void emit_memset(struct shim_thread *t, const CUpti_ActivityMemset4 *m)
{
	struct shm_rec_memset r = {
		.hdr = { .type = SHM_REC_MEMSET, .size = sizeof(r) },
		.start = m->start, .end = m->end, .bytes = m->bytes,
		.correlation = cupti_corr_of(m->correlationId), .device = (int32_t)m->deviceId,
		.context = m->contextId, .stream = m->streamId, .value = m->value,
		.mem_kind = m->memoryKind,
		.async = (m->flags & CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC) ? 1 : 0,
	};

	thread_emit_wait(t, &r, sizeof(r));
}

static void emit_sync(struct shim_thread *t, const CUpti_ActivitySynchronization2 *s)
{
	struct shm_rec_gpu_sync r = {
		.hdr = { .type = SHM_REC_GPU_SYNC, .size = sizeof(r) },
		.start = s->start, .end = s->end, .correlation = cupti_corr_of(s->correlationId),
		.type = (uint32_t)s->type, .context = s->contextId, .stream = s->streamId,
		.event = s->cudaEventId,
	};

	thread_emit_wait(t, &r, sizeof(r));
}

/* A forced flush (at exit) hands over records of work still running,
 * without an end: counted as lost, not stored with times that never were. */
static int complete(uint64_t start, uint64_t end)
{
	if (end && end >= start)
		return 1;
	cupti_count_dropped(1, "handed over without its end");
	return 0;
}

/* Turns one completed buffer into records in this thread's ring, waiting
 * for room, then recycles the buffer. */
static void buf_convert(uint8_t *buffer, size_t valid)
{
	struct shim_thread *t = &shim_tls;
	CUpti_Activity *rec = 0;
	int cut;

	/* Records of work done before a pause still belong to the trace. */
	if (__atomic_load_n(&shim_live.on, __ATOMIC_RELAXED) &&
	    (t->state == TS_READY || thread_prepare(t) == 0)) {
		while (cupti_fn.cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
			const CUpti_ActivityKernel10 *k = (const void *)rec;
			const CUpti_ActivityMemcpy6 *c = (const void *)rec;
			const CUpti_ActivityMemset4 *m = (const void *)rec;
			const CUpti_ActivitySynchronization2 *y = (const void *)rec;

			switch (rec->kind) {
			case CUPTI_ACTIVITY_KIND_KERNEL:
			case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
				cupti_corr_max(&cupti_seen_corr, k->correlationId);
				if (k->graphId &&
				    (cut = graph_cut_hit(cupti_corr_of(k->correlationId), k->end))) {
					if (cut == 1)
						cupti_count_dropped(1, "a graph's kernel with the end CUPTI"
								    " gave after its kind went off");
				} else if (complete(k->start, k->end))
					emit_kernel(t, k);
				break;
			case CUPTI_ACTIVITY_KIND_MEMCPY:
				cupti_corr_max(&cupti_seen_corr, c->correlationId);
				if (complete(c->start, c->end))
					emit_memcpy(t, c);
				break;
			case CUPTI_ACTIVITY_KIND_MEMSET:
				cupti_corr_max(&cupti_seen_corr, m->correlationId);
				if (complete(m->start, m->end))
					emit_memset(t, m);
				break;
			case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
				if (complete(y->start, y->end))
					emit_sync(t, y);
				break;
			default:
				break;
			}
		}
	}
	buf_release(buffer, valid);
}

/*
 * Completed buffers wait here for the converter thread.  A slot is claimed
 * with QUEUE_BUSY, filled, then published.
 */
#define QUEUE 64
#define QUEUE_BUSY ((uint8_t *)1)
static uint8_t *queue_buf[QUEUE];
static size_t queue_valid[QUEUE];
static int converter_up;
static int converter_busy; /* converting: exit waits for it to finish */

/* Bumped as each buffer is queued: the converter sleeps on it (a futex)
 * while the queue is empty, so that an idle process is not woken. */
static uint32_t queue_seq;

static int queue_put(uint8_t *buffer, size_t valid)
{
	for (int i = 0; i < QUEUE; i++) {
		uint8_t *none = 0;

		if (__atomic_compare_exchange_n(&queue_buf[i], &none, QUEUE_BUSY, 0,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			queue_valid[i] = valid;
			__atomic_store_n(&queue_buf[i], buffer, __ATOMIC_RELEASE);
			__atomic_add_fetch(&queue_seq, 1, __ATOMIC_RELEASE);
			syscall(SYS_futex, &queue_seq, FUTEX_WAKE_PRIVATE, 1, 0, 0, 0);
			return 0;
		}
	}
	return -1;
}

int cupti_queue_drain(void)
{
	int n = 0;

	for (int i = 0; i < QUEUE; i++) {
		uint8_t *b = __atomic_load_n(&queue_buf[i], __ATOMIC_ACQUIRE);
		size_t valid;

		if (!b || b == QUEUE_BUSY)
			continue;
		valid = queue_valid[i];
		if (!__atomic_compare_exchange_n(&queue_buf[i], &b, (uint8_t *)0, 0,
						 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			continue;
		buf_convert(b, valid);
		n++;
	}
	return n;
}

void CUPTIAPI cupti_buf_complete(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
				 size_t valid)
{
	struct shim_thread *t = &shim_tls;
	size_t dropped = 0;
	int saved = errno;
	sigset_t mask;

	(void)size;
	/* CUPTI's own thread, or one that flushes: CUPTI's calls may
	 * allocate, ours (once a buffer) */
	shim_own_enter(t, &mask);
	if (cupti_fn.cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS)
		cupti_count_dropped(dropped, "CUPTI's count, with a buffer");
	/* Not lent (any more): reclaimed after a detach, and maybe lent
	 * again; never ours to read or release twice. */
	if (buffer && lent_take(buffer) == 0) {
		if (!valid)
			buf_release(buffer, 0);
		else if (!__atomic_load_n(&converter_up, __ATOMIC_ACQUIRE) ||
			 __atomic_load_n(&cupti_exited, __ATOMIC_ACQUIRE) ||
			 queue_put(buffer, valid) < 0)
			buf_convert(buffer, valid);
		/* only now: a drain must not find the buffer neither held nor queued */
		__atomic_sub_fetch(&cupti_bufs_out, 1, __ATOMIC_RELEASE);
	}
	shim_own_leave(t, &mask);
	errno = saved;
}

static int queue_empty(void)
{
	for (int i = 0; i < QUEUE; i++)
		if (__atomic_load_n(&queue_buf[i], __ATOMIC_ACQUIRE))
			return 0;
	return 1;
}

int cupti_converted(void)
{
	return queue_empty() && !__atomic_load_n(&converter_busy, __ATOMIC_SEQ_CST);
}

static int nap_ms(void)
{
	struct timespec ms = { 0, 1000000 };

	return nanosleep(&ms, 0);
}

/* Work still running on another stream or device when that call's records
 * came is cut short by the forced flush that follows: counted as lost. */
int cupti_await_records(uint32_t want, int here)
{
	uint64_t until = clock_ns(CLOCK_MONOTONIC) + CUPTI_DRAIN_MS * 1000000ull;

	for (;;) {
		cupti_fn.cuptiActivityFlushAll(0);
		if (here)
			cupti_queue_drain();
		if (!__atomic_load_n(&cupti_bufs_out, __ATOMIC_ACQUIRE) ||
		    ((here || cupti_converted()) &&
		     __atomic_load_n(&cupti_seen_corr, __ATOMIC_ACQUIRE) >= want))
			return 0;
		if (clock_ns(CLOCK_MONOTONIC) >= until)
			return -ETIMEDOUT;
		nap_ms();
	}
}

/* ---- our threads ---- */

int cupti_start_thread(void *(*fn_)(void *), const char *name)
{
	pthread_attr_t attr;
	pthread_t tid;
	sigset_t all, old;
	int err;

	err = pthread_attr_init(&attr);
	if (err)
		return -err;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* The application's signals are not for this thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&tid, &attr, fn_, 0);
	pthread_sigmask(SIG_SETMASK, &old, 0);
	pthread_attr_destroy(&attr);
	if (err)
		return -err;
	pthread_setname_np(tid, name);
	return 0;
}

/* The converter: our own thread, so waiting for ring room stalls nobody
 * else. */
static void *converter(void *arg)
{
	struct timespec nap = { 0, 100000000 }; /* `exited` is looked at this often */

	(void)arg;
	shim_tls.in_shim++; /* this thread is ours: never traced */
	for (;;) {
		uint32_t seq = __atomic_load_n(&queue_seq, __ATOMIC_ACQUIRE);
		int n;

		/* seq_cst: pairs with cupti_exit's store of `exited` and load
		 * of converter_busy (each side stores, then loads the other's). */
		__atomic_store_n(&converter_busy, 1, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&cupti_exited, __ATOMIC_SEQ_CST)) {
			__atomic_store_n(&converter_busy, 0, __ATOMIC_RELEASE);
			break;
		}
		n = cupti_queue_drain();
		__atomic_store_n(&converter_busy, 0, __ATOMIC_RELEASE);
		buf_stock();
		/* returns at once if a buffer was queued since seq was read */
		if (!n)
			syscall(SYS_futex, &queue_seq, FUTEX_WAIT_PRIVATE, seq, &nap, 0, 0);
	}
	return 0;
}

int cupti_converter_start(void)
{
	int err = cupti_start_thread(converter, "shimmer-cupti");

	if (!err)
		__atomic_store_n(&converter_up, 1, __ATOMIC_RELEASE);
	return err;
}

void cupti_converter_finish(void)
{
	/* The converter stops at `exited`; let it finish the buffer in hand
	 * (bounded: an exit must not hang), then convert what is left. */
	for (int i = 0; i < 2000 && __atomic_load_n(&converter_busy, __ATOMIC_SEQ_CST); i++) {
		struct timespec ms = { 0, 1000000 };

		nanosleep(&ms, 0);
	}
	cupti_queue_drain();
}

static void *flusher(void *arg)
{
	struct timespec nap = { FLUSH_MS / 1000, (FLUSH_MS % 1000) * 1000000L };

	(void)arg;
	shim_tls.in_shim++; /* this thread is ours: never traced */
	while (!__atomic_load_n(&stop_flusher, __ATOMIC_ACQUIRE)) {
		nanosleep(&nap, 0);
		if (__atomic_load_n(&cupti_state, __ATOMIC_ACQUIRE) == CS_ACTIVE &&
		    !__atomic_load_n(&stop_flusher, __ATOMIC_ACQUIRE))
			cupti_fn.cuptiActivityFlushAll(0);
	}
	return 0;
}

int cupti_flusher_start(void)
{
	if (cupti_fn.cuptiActivityFlushPeriod &&
	    cupti_fn.cuptiActivityFlushPeriod(FLUSH_MS) == CUPTI_SUCCESS)
		return 0;
	return cupti_start_thread(flusher, "shimmer-flush");
}

void cupti_flusher_stop(void)
{
	__atomic_store_n(&stop_flusher, 1, __ATOMIC_RELEASE);
}

void cupti_activity_fork_child(void)
{
	memset(queue_buf, 0, sizeof(queue_buf));
	converter_up = 0;
	converter_busy = 0; /* the parent's may have been mid-buffer */
	stop_flusher = 0;
	enabled_kinds = 0;
	cupti_bufs_out = 0;
	memset(lent, 0, sizeof(lent));
	cupti_seen_corr = 0;
	last_graph = 0;
	ncuts = ncuts_done = 0;
}
