/*
 * CUPTI, loaded at run time.
 *
 * Which libcupti: the one matching the process's CUDA runtime - (1) one
 * already loaded, (2) beside the loaded libcudart (pip wheels: the same
 * directory for CUDA 13, ../../cuda_cupti/lib for CUDA 12), (3) under
 * $CUDA_HOME and /usr/local/cuda.  Only the functions in FNS are used.
 *
 * Start order matters: the timestamp callback (clock_now) is registered
 * before any activity kind is enabled, so every GPU record is on the host's
 * record clock; without it nothing is enabled at all.
 *
 * Hot paths (under sampling, only inside a window; see "sampling"):
 *  - the API callback, enabled only for the runtime and driver calls that
 *    start GPU work (chosen by name at start, so new ids are covered): a
 *    clock read at the outermost ENTER (a runtime launch nests a driver
 *    launch under the same correlation id), one shm_rec_api at its EXIT.
 *    Function names are interned once per callback id.
 *  - buffer completion, on whatever thread CUPTI chooses: it counts what
 *    CUPTI lost and queues the buffer for our converter thread, which
 *    writes one record per activity (the completing thread converts only
 *    when the queue is full, there is no converter, or at exit).
 *    Buffers are mmap'd (never the interposed malloc) and recycled through
 *    a small pool.
 * Records reach us by CUPTI's flush period (or our flush thread) and, at
 * exit, a forced flush from an atexit handler: it runs before the CUDA
 * libraries' destructors, which a DSO destructor (ours) would not.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cupti.h>

#include "clock.h"
#include "conn.h"
#include "cupti.h"
#include "intern.h"
#include "log.h"
#include "real.h"
#include "region.h"
#include "settings.h"

#define BUF_BYTES (4u << 20)
#define POOL 8
#define FLUSH_MS 100u
#define CBID_CAP 4096u /* callback ids we look at, per domain */
#define CBID_SLACK 64u /* unnamed ids past the header's last before we stop */
#define TEXT_MAX 768
#define CB_MAX 512     /* API callbacks we enable, at most */
#define GRACE_MS 5     /* callbacks come before a window's kinds and outlive them by this */
#define NAP_MAX_MS 50u /* the sampler looks at `exited` at least this often */
#define DRAIN_MS 200u  /* a closed window's records are awaited this long, at most */

/* X(name, required) */
#define FNS(X)                                                              \
	X(cuptiSubscribe, 1) X(cuptiSubscribe_v2, 0) X(cuptiUnsubscribe, 1) \
	X(cuptiEnableCallback, 1) X(cuptiGetCallbackName, 1)                \
	X(cuptiActivityEnable, 1) X(cuptiActivityDisable, 1)                \
	X(cuptiActivityRegisterCallbacks, 1)                                \
	X(cuptiActivityRegisterTimestampCallback, 1)                        \
	X(cuptiActivitySetAttribute, 0)                                     \
	X(cuptiActivityFlushAll, 1) X(cuptiActivityFlushPeriod, 0)          \
	X(cuptiActivityGetNextRecord, 1)                                    \
	X(cuptiActivityGetNumDroppedRecords, 1) X(cuptiGetResultString, 1) \
	X(cuptiFinalize, 0)

#define FN_PTR(name, req) __typeof__(&name) name;
static struct { FNS(FN_PTR) } fn;
#undef FN_PTR

enum { CS_IDLE, CS_STARTING, CS_ACTIVE, CS_OFF };

/* Synchronisation records are opt-in (SHIMMER_GPU_SYNC=1): on an H200 the
 * kind cost every later kernel launch about 1.5 us more, even once
 * disabled again, against about 0.5 us for the kernel records themselves.
 * The CPU time blocked in syncs comes from the runtime hooks either way. */
static const CUpti_ActivityKind kinds[] = {
	CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
	CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))
#define NKINDS_REQUIRED 3
#define KIND_SYNC 3

/* Prefixes of the API calls that start GPU work. */
static const char *const runtime_prefix[] = { "cudaLaunch", "__cudaLaunch", "cudaGraphLaunch",
					      "cudaMemcpy", "cudaMemset", 0 };
static const char *const driver_prefix[] = { "cuLaunch", "cuGraphLaunch", "cuMemcpy",
					     "cuMemset", 0 };

/* API calls in progress on this thread; only the outermost is recorded.
 * gen: the sampling window they were entered in (see "sampling"). */
struct api_stack {
	unsigned int depth;
	unsigned int gen;
	uint64_t start;
};

int cupti_pending;
static int state;
static int disabled;
static int sync_records; /* SHIMMER_GPU_SYNC=1 */
static int exited;
/* Sampling (SHIMMER_GPU=sample, the default); see "sampling" below. */
static int sampling = 1;     /* SHIMMER_GPU=sample */
static uint64_t window_ns, period_ns;
static unsigned int win_gen; /* bumped as each window opens */
/* CUPTI attached or not, under sampling (see "detaching"). */
enum { AT_ON, AT_DRAINING, AT_DETACHING, AT_FINALIZING, AT_OFF };
static int attach = AT_ON;
static int detaching;        /* sampling detaches between windows */
static int keep_attached;    /* SHIMMER_GPU_DETACH=0 */
static int bufs_out;         /* buffers CUPTI holds */
static uint32_t win_last_corr; /* the last call recorded in a window */
static uint32_t win_want_corr; /* the last one recorded before its kinds went off */
static uint32_t win_api;       /* API calls recorded (for SHIMMER_DEBUG) */
static uint32_t seen_corr;     /* the last correlation id converted */
static uint32_t session;       /* CUPTI sessions begun since the first */
static int stop_flusher;
static int flushing;           /* a periodic flush runs (sampler, begin) */
static uint32_t enabled_kinds; /* bit i: kinds[i] is on */
static CUpti_SubscriberHandle sub;
static struct { uint16_t domain, cbid; } cbs[CB_MAX]; /* the callbacks enabled */
static unsigned int ncbs;
static uint8_t *pool[POOL];
static const struct intern_entry *api_names[2][CBID_CAP];
static __thread struct api_stack api_tls;
static char lib_path[PATH_MAX];
static char cand[PATH_MAX];
static char text[TEXT_MAX];

static const char *result_str(CUptiResult r)
{
	const char *s = 0;

	if (!fn.cuptiGetResultString || fn.cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s)
		return "unknown CUPTI error";
	return s;
}

/* GPU_STATUS, and for a failure the one stderr line. */
static void report(uint32_t status, const char *why)
{
	conn_gpu_status(shim.sock, status, why);
	log_debug("GPU status %u: %s", status, why);
	if (status != SHM_GPU_ACTIVE && status != SHM_GPU_DISABLED)
		log_warn("GPU activity not traced: %s; API calls still are", why);
}

/* ---- finding and loading libcupti ---- */

/* dlopens cand if it exists; on success its path becomes lib_path. */
static void *try_open(void)
{
	void *h;

	if (access(cand, R_OK) < 0)
		return 0;
	h = dlopen(cand, RTLD_NOW | RTLD_LOCAL);
	if (h) {
		memcpy(lib_path, cand, sizeof(lib_path));
		log_debug("CUPTI: %s", lib_path);
	} else {
		log_debug("CUPTI: %s: %s", cand, dlerror());
	}
	return h;
}

/* Tries dir/sub/libcupti.so.<major>, then dir/sub/libcupti.so. */
static void *try_dir(const char *dir, int dlen, const char *sub_dir, const char *major)
{
	void *h;

	if (major[0]) {
		if (snprintf(cand, sizeof(cand), "%.*s%s/libcupti.so.%s", dlen, dir, sub_dir, major) <
			    (int)sizeof(cand) &&
		    (h = try_open()))
			return h;
	}
	if (snprintf(cand, sizeof(cand), "%.*s%s/libcupti.so", dlen, dir, sub_dir) < (int)sizeof(cand))
		return try_open();
	return 0;
}

static void *load(void)
{
	static char cudart[PATH_MAX];
	static const char *const subs[] = { "/extras/CUPTI/lib64", "/lib64",
					    "/targets/x86_64-linux/lib" };
	char major[16] = { 0 };
	const char *homes[2] = { getenv("CUDA_HOME"), "/usr/local/cuda" }, *slash, *v;
	void *h;
	unsigned int i, j;
	int dlen;

	if (real_loaded("libcupti.so", cand) == 0 && (h = try_open()))
		return h;
	if (real_loaded("libcudart.so", cudart) < 0)
		cudart[0] = '\0';
	/* libcudart.so.13 -> libcupti.so.13: the runtime's own major. */
	snprintf(major, sizeof(major), "%d", CUDART_VERSION / 1000);
	if (cudart[0]) {
		slash = strrchr(cudart, '/');
		v = strstr(slash ? slash : cudart, ".so.");
		if (v) {
			for (i = 0; i + 1 < sizeof(major) && v[4 + i] >= '0' && v[4 + i] <= '9'; i++)
				major[i] = v[4 + i];
			major[i] = '\0';
		}
		dlen = slash ? (int)(slash - cudart) : 1;
		if ((h = try_dir(slash ? cudart : ".", dlen, "", major)) ||
		    (h = try_dir(slash ? cudart : ".", dlen, "/../../cuda_cupti/lib", major)))
			return h;
	}
	for (i = 0; i < 2; i++) {
		if (!homes[i] || !homes[i][0] || (i == 1 && homes[0] && !strcmp(homes[0], homes[1])))
			continue;
		for (j = 0; j < sizeof(subs) / sizeof(subs[0]); j++)
			if ((h = try_dir(homes[i], (int)strlen(homes[i]), subs[j], major)))
				return h;
	}
	snprintf(text, sizeof(text), "no libcupti found (looked beside %.300s and under %.300s%s/usr/local/cuda)",
		 cudart[0] ? cudart : "libcudart", homes[0] ? homes[0] : "",
		 homes[0] ? " and " : "");
	return 0;
}

/* ---- activity records ---- */

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

static void buf_release(uint8_t *b, size_t used);
static int buf_pool(uint8_t *b);

/* Detached: every buffer CUPTI held is ours again. */
static void lent_reclaim(void)
{
	for (int i = 0; i < LENT; i++) {
		uint8_t *b = __atomic_exchange_n(&lent[i], (uint8_t *)0, __ATOMIC_ACQ_REL);

		if (b)
			buf_release(b, BUF_BYTES);
	}
	__atomic_store_n(&bufs_out, 0, __ATOMIC_RELEASE);
}

static void CUPTIAPI buf_request(uint8_t **buffer, size_t *size, size_t *max_records)
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
		__atomic_add_fetch(&bufs_out, 1, __ATOMIC_RELAXED);
	*buffer = b;
	*size = b ? BUF_BYTES : 0;
	*max_records = 0;
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

/* A correlation id as recorded: CUPTI's, with the session above bit 32,
 * since a session begun after cuptiFinalize may number calls anew.  A
 * session's records are all converted before it ends. */
static uint64_t corr_of(uint32_t id)
{
	return (uint64_t)__atomic_load_n(&session, __ATOMIC_RELAXED) << 32 | id;
}

/* The fields read below sit at the same offsets in every CONCURRENT_KERNEL
 * record version from Kernel5 (CUDA 11.0) to Kernel10 (CUDA 13). */
static void emit_kernel(struct shim_thread *t, const CUpti_ActivityKernel10 *k)
{
	struct shm_rec_kernel r = {
		.hdr = { .type = SHM_REC_KERNEL, .size = sizeof(r) },
		.start = k->start, .end = k->end, .correlation = corr_of(k->correlationId),
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
		.correlation = corr_of(m->correlationId), .device = (int32_t)m->deviceId,
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
		.correlation = corr_of(m->correlationId), .device = (int32_t)m->deviceId,
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
		.start = s->start, .end = s->end, .correlation = corr_of(s->correlationId),
		.type = (uint32_t)s->type, .context = s->contextId, .stream = s->streamId,
		.event = s->cudaEventId,
	};

	thread_emit_wait(t, &r, sizeof(r));
}

/* Records CUPTI reported lost: the collector stores them as drops of
 * reason 'cupti' (they are no thread's and no ring's). */
static void count_cupti_dropped(size_t n)
{
	if (n && shim.region.hdr)
		__atomic_fetch_add(&shim.region.hdr->dropped_cupti, n, __ATOMIC_RELAXED);
}

static void corr_max(uint32_t *at, uint32_t id)
{
	uint32_t cur = __atomic_load_n(at, __ATOMIC_RELAXED);

	while (id > cur && !__atomic_compare_exchange_n(at, &cur, id, 1, __ATOMIC_RELEASE,
							 __ATOMIC_RELAXED))
		;
}

/* A forced flush (at exit) hands over records of work still running,
 * without an end: counted as lost, not stored with times that never were. */
static int complete(uint64_t start, uint64_t end)
{
	if (end && end >= start)
		return 1;
	count_cupti_dropped(1);
	return 0;
}

/* Turns one completed buffer into records in this thread's ring, waiting
 * for room, then recycles the buffer. */
static void buf_convert(uint8_t *buffer, size_t valid)
{
	struct shim_thread *t = &shim_tls;
	CUpti_Activity *rec = 0;

	/* Records of work done before a pause still belong to the trace. */
	if (__atomic_load_n(&shim.on, __ATOMIC_RELAXED) &&
	    (t->state == TS_READY || thread_prepare(t) == 0)) {
		while (fn.cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
			const CUpti_ActivityKernel10 *k = (const void *)rec;
			const CUpti_ActivityMemcpy6 *c = (const void *)rec;
			const CUpti_ActivityMemset4 *m = (const void *)rec;
			const CUpti_ActivitySynchronization2 *y = (const void *)rec;

			switch (rec->kind) {
			case CUPTI_ACTIVITY_KIND_KERNEL:
			case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
				corr_max(&seen_corr, k->correlationId);
				if (complete(k->start, k->end))
					emit_kernel(t, k);
				break;
			case CUPTI_ACTIVITY_KIND_MEMCPY:
				corr_max(&seen_corr, c->correlationId);
				if (complete(c->start, c->end))
					emit_memcpy(t, c);
				break;
			case CUPTI_ACTIVITY_KIND_MEMSET:
				corr_max(&seen_corr, m->correlationId);
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
 * Completed buffers wait here for the converter thread.  Converting in
 * CUPTI's own callback would hold CUPTI up whenever our ring is full (we
 * wait for the collector there), and CUPTI may hold locks the launching
 * threads need.  A slot is claimed with QUEUE_BUSY, filled, then published.
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

/* Converts every queued buffer; returns how many. */
static int queue_drain(void)
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

static void CUPTIAPI buf_complete(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
				  size_t valid)
{
	struct shim_thread *t = &shim_tls;
	size_t dropped = 0;
	int saved = errno;

	(void)size;
	t->in_shim++;
	if (fn.cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS)
		count_cupti_dropped(dropped);
	/* Not lent (any more): reclaimed after a detach, and maybe lent
	 * again; never ours to read or release twice. */
	if (buffer && lent_take(buffer) == 0) {
		if (!valid)
			buf_release(buffer, 0);
		else if (!__atomic_load_n(&converter_up, __ATOMIC_ACQUIRE) ||
			 __atomic_load_n(&exited, __ATOMIC_ACQUIRE) || queue_put(buffer, valid) < 0)
			buf_convert(buffer, valid);
		/* only now: a drain must not find the buffer neither held nor queued */
		__atomic_sub_fetch(&bufs_out, 1, __ATOMIC_RELEASE);
	}
	t->in_shim--;
	errno = saved;
}

static uint64_t CUPTIAPI timestamp(void)
{
	return clock_now();
}

/* ---- API callbacks ---- */

static uint32_t api_name(unsigned int dom, CUpti_CallbackId cbid, const char *name)
{
	const struct intern_entry *e = __atomic_load_n(&api_names[dom][cbid], __ATOMIC_ACQUIRE);

	if (unlikely(!e) && name) {
		e = intern_lookup(name, strlen(name));
		__atomic_store_n(&api_names[dom][cbid], e, __ATOMIC_RELEASE);
	}
	return intern_id(e);
}

static void finalize_here(void);

static void CUPTIAPI on_api(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
			    const void *data)
{
	const CUpti_CallbackData *cb = data;
	struct api_stack *a = &api_tls;
	struct shim_thread *t;
	struct shm_rec_api r;
	unsigned int gen;
	uint32_t sess;
	int saved;

	(void)userdata;
	if ((domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) ||
	    !cb || cbid >= CBID_CAP)
		return;
	gen = __atomic_load_n(&win_gen, __ATOMIC_RELAXED);
	if (unlikely(a->gen != gen)) {
		/* an ENTER of an earlier window whose EXIT was never seen */
		a->gen = gen;
		a->depth = 0;
	}
	if (cb->callbackSite == CUPTI_API_ENTER) {
		if (a->depth++ == 0)
			a->start = clock_now();
		return;
	}
	if (!a->depth)
		return; /* entered before the callback was enabled */
	/* A runtime launch calls the driver's, under the same correlation id:
	 * only the outermost call is the one the application made. */
	if (--a->depth)
		return;
	/* The session, read before the state and again before the record
	 * goes: a call that straddles a detach and the next attach is not
	 * recorded, rather than under the wrong session. */
	sess = __atomic_load_n(&session, __ATOMIC_ACQUIRE);
	if (unlikely(__atomic_load_n(&attach, __ATOMIC_ACQUIRE) != AT_ON)) {
		/* detached as an application's call returns (runtime, or driver
		 * for a process that never calls the runtime), never inside one */
		finalize_here();
		return;
	}
	if (!(t = shim_thread_traced()))
		return;
	saved = errno;
	t->in_shim++;
	r = (struct shm_rec_api){
		.hdr = { .type = SHM_REC_API, .size = sizeof(r) },
		.start = a->start, .end = clock_now(),
		.correlation = (uint64_t)sess << 32 | cb->correlationId,
		.domain = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? SHM_API_RUNTIME : SHM_API_DRIVER,
		.cbid = cbid,
	};
	r.name_id = api_name(domain == CUPTI_CB_DOMAIN_RUNTIME_API, cbid, cb->functionName);
	if (likely(__atomic_load_n(&session, __ATOMIC_ACQUIRE) == sess)) {
		thread_emit(t, &r, sizeof(r));
		corr_max(&win_last_corr, cb->correlationId);
		if (unlikely(log_debugging()))
			__atomic_add_fetch(&win_api, 1, __ATOMIC_RELAXED);
	}
	t->in_shim--;
	errno = saved;
}

static int prefixed(const char *name, const char *const *prefix)
{
	for (; *prefix; prefix++)
		if (!strncmp(name, *prefix, strlen(*prefix)))
			return 1;
	return 0;
}

/* Enables the callbacks of domain's work-starting calls; returns how many. */
static unsigned int enable_domain(CUpti_CallbackDomain domain, uint32_t known,
				  const char *const *prefix)
{
	const char *name;
	unsigned int n = 0;
	uint32_t cbid, misses = 0;

	for (cbid = 1; cbid < CBID_CAP; cbid++) {
		name = 0;
		if (fn.cuptiGetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS || !name) {
			if (cbid >= known && ++misses >= CBID_SLACK)
				break;
			continue;
		}
		misses = 0;
		if (ncbs < CB_MAX && prefixed(name, prefix) &&
		    fn.cuptiEnableCallback(1, sub, domain, cbid) == CUPTI_SUCCESS) {
			cbs[ncbs].domain = (uint16_t)domain;
			cbs[ncbs++].cbid = (uint16_t)cbid;
			n++;
		}
	}
	return n;
}

/* ---- flushing ---- */

static void *flusher(void *arg)
{
	struct timespec nap = { FLUSH_MS / 1000, (FLUSH_MS % 1000) * 1000000L };

	(void)arg;
	shim_tls.in_shim++; /* this thread is ours: never traced */
	while (!__atomic_load_n(&stop_flusher, __ATOMIC_ACQUIRE)) {
		nanosleep(&nap, 0);
		if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) == CS_ACTIVE &&
		    !__atomic_load_n(&stop_flusher, __ATOMIC_ACQUIRE))
			fn.cuptiActivityFlushAll(0);
	}
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

		__atomic_store_n(&converter_busy, 1, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&exited, __ATOMIC_SEQ_CST)) {
			__atomic_store_n(&converter_busy, 0, __ATOMIC_RELEASE);
			break;
		}
		n = queue_drain();
		__atomic_store_n(&converter_busy, 0, __ATOMIC_RELEASE);
		buf_stock();
		/* returns at once if a buffer was queued since seq was read */
		if (!n)
			syscall(SYS_futex, &queue_seq, FUTEX_WAIT_PRIVATE, seq, &nap, 0, 0);
	}
	return 0;
}

static int start_thread(void *(*fn_)(void *), const char *name)
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

static int start_flusher(void)
{
	if (fn.cuptiActivityFlushPeriod && fn.cuptiActivityFlushPeriod(FLUSH_MS) == CUPTI_SUCCESS)
		return 0;
	return start_thread(flusher, "shimmer-flush");
}

static void at_exit(void)
{
	cupti_exit();
}

/* ---- start ---- */

static void kinds_set(int on)
{
	unsigned int i;

	for (i = 0; i < NKINDS; i++)
		if (enabled_kinds & (1u << i))
			(on ? fn.cuptiActivityEnable : fn.cuptiActivityDisable)(kinds[i]);
}

/* ---- sampling ---- */

/*
 * Under SHIMMER_GPU=sample CUPTI records only inside windows: window_ns at a
 * random point of every period_ns from CUPTI's start, so that launches
 * outside them pay neither the activity kinds (about 0.5 us a kernel on an
 * H200) nor the API callbacks.  The random point keeps a loop
 * whose step divides the period from being sampled at one phase only.  A
 * window turns callbacks on GRACE_MS before the kinds and off GRACE_MS
 * after them, so a recorded kernel's launching call is recorded too unless
 * that call outlasts the grace; win_gen tells a thread that an ENTER it saw
 * belongs to an earlier window (a blocking copy may span a close).  Each
 * window closes with one SHM_REC_GPU_WINDOW, with the GPU-work calls the
 * runtime hooks counted meanwhile; the estimates depend on it, so it is
 * written even when the ring is full (thread_emit_wait).
 */
static pthread_mutex_t win_lock = PTHREAD_MUTEX_INITIALIZER;
static int win_open;
static uint64_t win_start;      /* record clock */
static uint64_t win_start_mono; /* CLOCK_MONOTONIC, for the schedule */
static uint64_t win_since;      /* record clock: when sampling began */
static uint64_t win_calls;      /* work_calls() as the window opened */
static uint64_t win_rand;

static int cbs_on;

static void callbacks_set(int on)
{
	cbs_on = on;
	for (unsigned int i = 0; i < ncbs; i++)
		fn.cuptiEnableCallback((uint32_t)on, sub, (CUpti_CallbackDomain)cbs[i].domain,
				       cbs[i].cbid);
}

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

static void window_emit(uint64_t start, uint64_t end, uint64_t calls)
{
	struct shim_thread *t = &shim_tls;
	struct shm_rec_gpu_window r = {
		.hdr = { .type = SHM_REC_GPU_WINDOW, .size = sizeof(r) },
		.start = start, .end = end, .since = win_since, .calls = calls,
	};

	if (__atomic_load_n(&shim.on, __ATOMIC_RELAXED) &&
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

/*
 * Detaching.  Once CUPTI has recorded anything, every later kernel launch
 * pays for it (765 ns on an H100: bench/cupti_detach.cu) even with every
 * kind and callback off again; only cuptiFinalize ends that.  So under
 * sampling CUPTI is detached between windows and attached again for the
 * next: after a window's kinds go off, its records are awaited (default
 * flushes return only buffers whose records are all complete; DRAIN_MS at
 * most, then a forced flush), the converter finishes with them (it reads
 * them through CUPTI, and any CUPTI call attaches CUPTI again), and then
 * the first API call to return on any thread calls cuptiFinalize in its
 * EXIT callback, where CUPTI asks for it.  The callbacks stay on for that;
 * in any state but AT_ON they record nothing.
 */
static int nap_ms(void)
{
	struct timespec ms = { 0, 1000000 };

	return nanosleep(&ms, 0);
}

static int queue_empty(void)
{
	for (int i = 0; i < QUEUE; i++)
		if (__atomic_load_n(&queue_buf[i], __ATOMIC_ACQUIRE))
			return 0;
	return 1;
}

/* Nothing queued for the converter, nothing in its hands. */
static int converted(void)
{
	return queue_empty() && !__atomic_load_n(&converter_busy, __ATOMIC_SEQ_CST);
}

/* Flushes (default: only buffers whose records are all complete) until
 * the records of call `want` have been converted (calls on one stream
 * complete in order) or CUPTI holds no buffer; DRAIN_MS at most, then
 * -ETIMEDOUT.  here: convert on this thread (at exit the converter may be
 * gone) rather than wait for the converter.  Work still running on another
 * stream or device when that call's records came is cut short by the
 * forced flush that follows: counted as lost. */
static int await_records(uint32_t want, int here)
{
	uint64_t until = clock_ns(CLOCK_MONOTONIC) + DRAIN_MS * 1000000ull;

	for (;;) {
		fn.cuptiActivityFlushAll(0);
		if (here)
			queue_drain();
		if (!__atomic_load_n(&bufs_out, __ATOMIC_ACQUIRE) ||
		    ((here || converted()) && __atomic_load_n(&seen_corr, __ATOMIC_ACQUIRE) >= want))
			return 0;
		if (clock_ns(CLOCK_MONOTONIC) >= until)
			return -ETIMEDOUT;
		nap_ms();
	}
}

/* With win_lock held, the kinds off: awaits the window's records; 0 once
 * every one is converted.  -ETIMEDOUT when they have not all come within
 * DRAIN_MS (a GPU running that far behind its CPU): a forced flush would
 * hand them over without their ends, so they are left to come later. */
static int drain(void)
{
	uint64_t t0 = clock_ns(CLOCK_MONOTONIC);
	size_t dropped = 0;

	if (await_records(__atomic_load_n(&win_want_corr, __ATOMIC_ACQUIRE), 0) < 0) {
		log_debug("CUPTI: window not drained in %u ms (buffers held %d, correlation %u of %u); "
			 "attached until the next window",
			 DRAIN_MS, __atomic_load_n(&bufs_out, __ATOMIC_RELAXED),
			 __atomic_load_n(&seen_corr, __ATOMIC_RELAXED),
			 __atomic_load_n(&win_want_corr, __ATOMIC_RELAXED));
		return -ETIMEDOUT;
	}
	fn.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	if (fn.cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped) == CUPTI_SUCCESS)
		count_cupti_dropped(dropped);
	log_debug("CUPTI: window drained in %llu us (buffers held %d, correlation %u of %u)",
		 (unsigned long long)((clock_ns(CLOCK_MONOTONIC) - t0) / 1000),
		 __atomic_load_n(&bufs_out, __ATOMIC_RELAXED),
		 __atomic_load_n(&seen_corr, __ATOMIC_RELAXED),
		 __atomic_load_n(&win_want_corr, __ATOMIC_RELAXED));
	for (unsigned int i = 0; i < DRAIN_MS; i++) {
		if (converted())
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
	int at = __atomic_load_n(&attach, __ATOMIC_ACQUIRE);

	if (at != AT_ON && at != AT_DRAINING)
		return;
	__atomic_store_n(&attach, AT_DRAINING, __ATOMIC_RELEASE);
	if (!cbs_on)
		callbacks_set(1);
	if (drain() < 0) {
		callbacks_set(0);
		__atomic_store_n(&attach, AT_ON, __ATOMIC_RELEASE);
		return;
	}
	__atomic_store_n(&attach, AT_DETACHING, __ATOMIC_RELEASE);
}

/* In an API call's EXIT callback, any thread. */
static void finalize_here(void)
{
	int expect = AT_DETACHING;
	CUptiResult res;
	uint64_t t0;

	if (!__atomic_compare_exchange_n(&attach, &expect, AT_FINALIZING, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED))
		return;
	t0 = clock_ns(CLOCK_MONOTONIC);
	shim_tls.in_shim++;
	res = fn.cuptiFinalize();
	log_debug("CUPTI: detached in %llu us",
		 (unsigned long long)((clock_ns(CLOCK_MONOTONIC) - t0) / 1000));
	if (res != CUPTI_SUCCESS) {
		/* attached for good; the callbacks go off at the next close */
		log_debug("CUPTI: cuptiFinalize failed (%s); staying attached", result_str(res));
		__atomic_store_n(&detaching, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&attach, AT_ON, __ATOMIC_RELEASE);
	} else {
		__atomic_store_n(&attach, AT_OFF, __ATOMIC_RELEASE);
	}
	shim_tls.in_shim--;
}

/* Waits (bounded) for a cuptiFinalize in progress; the state it left. */
static int attach_settled(void)
{
	int at;

	for (unsigned int i = 0; i < 1000; i++) {
		at = __atomic_load_n(&attach, __ATOMIC_ACQUIRE);
		if (at != AT_FINALIZING)
			return at;
		nap_ms();
	}
	return AT_FINALIZING;
}

static CUptiResult session_start(const char **step, char *other, size_t other_size);

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
	    __atomic_compare_exchange_n(&attach, &expect, AT_ON, 0, __ATOMIC_ACQ_REL,
					__ATOMIC_RELAXED))
		return 0; /* no API call returned since: still attached */
	at = __atomic_load_n(&attach, __ATOMIC_ACQUIRE);
	if (at == AT_ON)
		return 0;
	if (at != AT_OFF)
		return -EBUSY;
	lent_reclaim();
	t0 = clock_ns(CLOCK_MONOTONIC);
	res = session_start(&step, other, sizeof(other));
	log_debug("CUPTI: attached again in %llu us",
		 (unsigned long long)((clock_ns(CLOCK_MONOTONIC) - t0) / 1000));
	if (res != CUPTI_SUCCESS) {
		if (res == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
			log_debug("CUPTI: %s took CUPTI over; GPU sampling ends",
				 other[0] ? other : "another subscriber");
		else
			log_debug("CUPTI: %s failed again (%s); GPU sampling ends", step,
				 result_str(res));
		return -EIO;
	}
	/* every record of the last session was converted before it ended;
	 * the new one may number its calls from the start again */
	__atomic_store_n(&seen_corr, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&win_last_corr, 0, __ATOMIC_RELAXED);
	__atomic_add_fetch(&session, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&attach, AT_ON, __ATOMIC_RELEASE);
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
	__atomic_add_fetch(&win_gen, 1, __ATOMIC_RELAXED);
	callbacks_set(1);
	grace();
	win_start_mono = clock_ns(CLOCK_MONOTONIC);
	win_start = clock_now();
	win_calls = work_calls();
	kinds_set(1);
	win_start = mid(win_start, clock_now());
	win_open = 1;
	return 0;
}

/* Closes the open window, if any; takes win_lock.  with_grace (the
 * sampler): let calls in flight reach their EXIT, then detach. */
static void window_close(int with_grace)
{
	uint64_t end, calls;
	int detach_next;

	pthread_mutex_lock(&win_lock);
	detach_next = with_grace && __atomic_load_n(&detaching, __ATOMIC_RELAXED) &&
		      !__atomic_load_n(&exited, __ATOMIC_ACQUIRE);
	if (!win_open)
		goto out;
	end = clock_now();
	kinds_set(0);
	end = mid(end, clock_now());
	/* calls that returned later (in the grace) launched nothing recorded */
	__atomic_store_n(&win_want_corr, __atomic_load_n(&win_last_corr, __ATOMIC_ACQUIRE),
			 __ATOMIC_RELEASE);
	/* a slot taken over by a new thread counts from zero again */
	calls = work_calls();
	calls = calls > win_calls ? calls - win_calls : 0;
	win_open = 0;
	if (with_grace)
		grace();
	/* detaching needs the callbacks on: they stop recording instead */
	if (detach_next)
		__atomic_store_n(&attach, AT_DRAINING, __ATOMIC_RELEASE);
	else
		callbacks_set(0);
	window_emit(win_start, end, calls);
	log_debug("CUPTI: window closed after %llu us: %llu GPU-work calls, %u recorded with their API call",
		 (unsigned long long)((clock_ns(CLOCK_MONOTONIC) - win_start_mono) / 1000),
		 (unsigned long long)calls,
		 __atomic_exchange_n(&win_api, 0, __ATOMIC_RELAXED));
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

		if (__atomic_load_n(&exited, __ATOMIC_ACQUIRE))
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
	int opened;

	(void)arg;
	shim_tls.in_shim++; /* this thread is ours: never traced */
	window_close(1); /* none open: detaches until the first */
	at = next_open(&period);
	for (;;) {
		int err = 0;

		if (sleep_until(at))
			break;
		pthread_mutex_lock(&win_lock);
		opened = !__atomic_load_n(&exited, __ATOMIC_ACQUIRE) &&
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
		window_close(1);
		/* cuptiFinalize failed: attached for good, flushed as when
		 * never detaching */
		if (!flushing && !__atomic_load_n(&detaching, __ATOMIC_RELAXED))
			flushing = start_flusher() == 0;
		/* periods slept through (a suspended process) are skipped */
		now = clock_ns(CLOCK_MONOTONIC);
		while (period <= now)
			at = next_open(&period);
	}
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
	if (start_thread(sampler, "shimmer-gpuwin") < 0) {
		sampling = 0;
		log_debug("CUPTI: no sampler thread; recording every kernel");
	} else {
		kinds_set(0);
		callbacks_set(0);
		window_emit(win_since, win_since, 0);
	}
	pthread_mutex_unlock(&win_lock);
}

/* The session cuptiFinalize ends: our subscriber, clock and buffers.
 * other: who holds CUPTI when the subscription fails for that. */
static CUptiResult session_start(const char **step, char *other, size_t other_size)
{
	CUpti_SubscriberParams params = {
		.structSize = CUpti_SubscriberParams_STRUCT_SIZE,
		.subscriberName = "shimmer",
		.oldSubscriberName = other,
		.oldSubscriberSize = other_size - 1,
	};
	CUptiResult res;

	*step = "cuptiSubscribe";
	res = fn.cuptiSubscribe_v2 ? fn.cuptiSubscribe_v2(&sub, on_api, 0, &params)
				   : fn.cuptiSubscribe(&sub, on_api, 0);
	if (res != CUPTI_SUCCESS)
		return res;
	*step = "cuptiActivityRegisterTimestampCallback";
	res = fn.cuptiActivityRegisterTimestampCallback(timestamp);
	if (res != CUPTI_SUCCESS)
		goto unsubscribe;
	if (fn.cuptiActivitySetAttribute) {
		uint8_t zeroed = 1;
		size_t len = sizeof(zeroed);

		/* Not fatal: an older CUPTI clears the buffers itself. */
		if (fn.cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &len,
						 &zeroed) != CUPTI_SUCCESS)
			log_debug("CUPTI: buffers will be cleared by CUPTI");
	}
	*step = "cuptiActivityRegisterCallbacks";
	res = fn.cuptiActivityRegisterCallbacks(buf_request, buf_complete);
	if (res == CUPTI_SUCCESS)
		return res;
unsubscribe:
	fn.cuptiUnsubscribe(sub);
	return res;
}

/* Everything after loading.  Returns the status; text says why. */
static uint32_t begin(void *h)
{
	char other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = { 0 };
	const char *step;
	unsigned int i, ncb;
	CUptiResult res;

#define FN_SYM(name, req)                                                    \
	fn.name = (__typeof__(fn.name))dlsym(h, #name);                       \
	if ((req) && !fn.name) {                                             \
		snprintf(text, sizeof(text), "%.400s lacks %s", lib_path, #name); \
		return SHM_GPU_ERROR;                                        \
	}
	FNS(FN_SYM)
#undef FN_SYM

	res = session_start(&step, other, sizeof(other));
	if (res == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		snprintf(text, sizeof(text), "another CUPTI subscriber (%s) is active",
			 other[0] ? other : "torch.profiler? Nsight?");
		return SHM_GPU_BUSY;
	}
	if (res != CUPTI_SUCCESS)
		goto fail;
	/* Sampling (if on) begins before anything can record. */
	win_since = clock_now();
	win_start_mono = clock_ns(CLOCK_MONOTONIC);
	ncb = enable_domain(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE,
			    runtime_prefix);
	ncb += enable_domain(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE,
			     driver_prefix);
	log_debug("CUPTI: %u API callbacks enabled", ncb);
	for (i = 0; i < NKINDS; i++) {
		if (i == KIND_SYNC && !sync_records)
			continue;
		res = fn.cuptiActivityEnable(kinds[i]);
		if (res == CUPTI_SUCCESS)
			enabled_kinds |= 1u << i;
		else if (i < NKINDS_REQUIRED) {
			step = "cuptiActivityEnable";
			goto disable;
		}
	}
	detaching = sampling && fn.cuptiFinalize && !keep_attached;
	/* Detached, CUPTI must hear from nobody: the sampler flushes. */
	if (!detaching)
		flushing = start_flusher() == 0;
	if (!detaching && !flushing)
		log_debug("CUPTI: no periodic flush; records come when buffers fill");
	if (sampling)
		sampling_start();
	if (start_thread(converter, "shimmer-cupti") == 0)
		__atomic_store_n(&converter_up, 1, __ATOMIC_RELEASE);
	if (atexit(at_exit))
		log_debug("CUPTI: atexit failed; flushing from the destructor");
	snprintf(text, sizeof(text), "%.700s", lib_path);
	return SHM_GPU_ACTIVE;
disable:
	kinds_set(0);
	enabled_kinds = 0;
	fn.cuptiUnsubscribe(sub);
fail:
	snprintf(text, sizeof(text), "%s failed: %.200s (%.400s)", step, result_str(res), lib_path);
	return SHM_GPU_ERROR;
}

static void start(void)
{
	struct shim_thread *t = &shim_tls;
	int expect = CS_IDLE, saved = errno;
	uint32_t status;
	void *h;

	if (!__atomic_compare_exchange_n(&state, &expect, CS_STARTING, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED))
		return;
	__atomic_store_n(&cupti_pending, 0, __ATOMIC_RELAXED);
	t->in_shim++;
	if (!__atomic_load_n(&shim.on, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&state, CS_OFF, __ATOMIC_RELEASE);
		goto out;
	}
	if (disabled) {
		report(SHM_GPU_DISABLED, "SHIMMER_CUPTI=0");
		__atomic_store_n(&state, CS_OFF, __ATOMIC_RELEASE);
		goto out;
	}
	h = load();
	status = h ? begin(h) : SHM_GPU_NO_CUPTI;
	__atomic_store_n(&state, status == SHM_GPU_ACTIVE ? CS_ACTIVE : CS_OFF, __ATOMIC_RELEASE);
	report(status, text);
	/* A pause that came first applies to the session it did not see.
	 * Under sampling no window is open yet and the sampler opens none
	 * while paused: nothing to do, and nothing to wait for (the sampler
	 * may hold win_lock while it flushes, and we may be inside cuInit). */
	if (status == SHM_GPU_ACTIVE && !sampling &&
	    __atomic_load_n(&shim.paused, __ATOMIC_ACQUIRE))
		cupti_pause(1);
out:
	t->in_shim--;
	errno = saved;
}

SHIM_EXPORT int InitializeInjection(void)
{
	start();
	return 1;
}

void cupti_late(void)
{
	if (shim_tls.in_shim)
		return;
	start();
}

void cupti_setup(const char *self)
{
	const char *inj = getenv("CUDA_INJECTION64_PATH");

	disabled = !settings.cupti;
	sync_records = settings.gpu_sync;
	sampling = settings.gpu_sample;
	keep_attached = !settings.gpu_detach;
	window_ns = settings.gpu_window_ns;
	period_ns = settings.gpu_period_ns;
	if (!disabled && self && (!inj || !inj[0]))
		setenv("CUDA_INJECTION64_PATH", self, 1);
	__atomic_store_n(&cupti_pending, 1, __ATOMIC_RELEASE);
}

void cupti_pause(int pause)
{
	if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != CS_ACTIVE)
		return;
	if (!sampling) {
		kinds_set(!pause);
		return;
	}
	/* Sampling: a pause ends the window; the sampler opens none while
	 * paused, and after a resume the next one as scheduled. */
	if (pause)
		window_close(0);
}

void cupti_exit(void)
{
	struct shim_thread *t = &shim_tls;
	int saved = errno, expect = AT_DETACHING, attached;
	void *h = 0;

	/* seq_cst: pairs with the converter's store of converter_busy and
	 * load of `exited` (each side stores, then loads the other's). */
	if (__atomic_load_n(&state, __ATOMIC_ACQUIRE) != CS_ACTIVE ||
	    __atomic_exchange_n(&exited, 1, __ATOMIC_SEQ_CST))
		return;
	__atomic_store_n(&stop_flusher, 1, __ATOMIC_RELEASE);
	t->in_shim++;
	if (sampling)
		window_close(0);
	/* Detached, everything was delivered; a pending detach is called off
	 * (the exit flushes instead), and the callbacks it kept on go off, so
	 * that no call made now is awaited below. */
	pthread_mutex_lock(&win_lock);
	if (__atomic_compare_exchange_n(&attach, &expect, AT_ON, 0, __ATOMIC_ACQ_REL,
					__ATOMIC_RELAXED))
		callbacks_set(0);
	attached = attach_settled() == AT_ON;
	pthread_mutex_unlock(&win_lock);
	/* Only a libcupti that is still mapped can be called. */
	if (attached)
		h = dlopen(lib_path, RTLD_NOW | RTLD_NOLOAD);
	if (h) {
		size_t dropped = 0;

		/* work still running would lose its records to the forced
		 * flush: the last recorded call's are awaited first (buffers
		 * complete on this thread now, `exited`, or wait in the queue) */
		await_records(__atomic_load_n(&win_last_corr, __ATOMIC_ACQUIRE), 1);
		fn.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		/* losses that came with no buffer to complete, so far unasked */
		if (fn.cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped) == CUPTI_SUCCESS)
			count_cupti_dropped(dropped);
		dlclose(h);
	}
	/* The converter stops at `exited`; let it finish the buffer in hand
	 * (bounded: an exit must not hang), then convert what is left. */
	for (int i = 0; i < 2000 && __atomic_load_n(&converter_busy, __ATOMIC_SEQ_CST); i++) {
		struct timespec ms = { 0, 1000000 };

		nanosleep(&ms, 0);
	}
	queue_drain();
	t->in_shim--;
	errno = saved;
}

void cupti_fork_child(void)
{
	/* The parent's queued buffers and converter thread are not ours. */
	memset(queue_buf, 0, sizeof(queue_buf));
	converter_up = 0;
	converter_busy = 0; /* the parent's may have been mid-buffer */
	state = CS_IDLE;
	exited = 0;
	stop_flusher = 0;
	flushing = 0;
	enabled_kinds = 0;
	ncbs = 0;
	win_open = 0;
	attach = AT_ON;
	bufs_out = 0;
	memset(lent, 0, sizeof(lent));
	seen_corr = win_last_corr = win_want_corr = 0;
	cbs_on = 0;
	pthread_mutex_init(&win_lock, 0); /* the parent's sampler may have held it */
	api_tls.depth = 0;
	cupti_pending = 1;
}
