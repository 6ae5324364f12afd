/*
 * A stand-in for libcupti.so.13, built from test sources, so the shim's
 * CUPTI tracing can be tested on machines without a GPU.  It is installed
 * next to the fake runtime (build/test/fake_cudart/), where the shim looks
 * for CUPTI, and exports the real names with the real signatures (the CUPTI
 * headers are included, so the compiler checks every definition).
 *
 * What the work is, the fake runtime says (fake_cupti.h): it calls
 * api_enter/api_exit around each entry point and record() for the work the
 * "GPU" did.  This file behaves like CUPTI where a client can tell:
 *  - one subscriber at a time: a second cuptiSubscribe fails with
 *    CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, and so does the first
 *    when FAKE_CUPTI_BUSY=1 (another profiler owns CUPTI);
 *  - callbacks run only for the (domain, cbid) pairs enabled, on the
 *    calling thread, with a fresh correlation id per call that the call's
 *    activity records carry too; cuptiGetCallbackName knows the names of
 *    the calls the fakes make and fails for other ids;
 *  - work is recorded when its activity kind is enabled as it begins, on
 *    the clock of then, even if the kind goes off before it ends (work
 *    that began with CUPTI detached, or ends after a detach, is not: the
 *    latter counted dropped);
 *  - activity records are written, laid out as the header's structs for
 *    each kind (CUpti_ActivityKernel10, Memcpy6, Memset4,
 *    Synchronization2), into buffers obtained from the client's
 *    bufferRequested callback, and handed back through bufferCompleted when
 *    a buffer fills (from the CUPTI worker thread), on cuptiActivityFlushAll
 *    (on the caller's thread) and every flush period (worker thread);
 *  - timestamps come from the registered timestamp callback, otherwise from
 *    CLOCK_REALTIME (CUPTI's own clock is not the host's monotonic clock);
 *  - records that found no buffer are counted as dropped, and so is every
 *    N-th record (counting every kind, in the order written) when
 *    FAKE_CUPTI_DROP_EVERY=N (N > 0): CUPTI losing records at will, for
 *    tests of how a client counts them;
 *  - with FAKE_CUPTI_INCOMPLETE_EVERY=N (N > 0) every N-th record
 *    (counted as above) is written without its end, as CUPTI hands over
 *    records of work still running on a forced flush;
 *  - cuptiFinalize ends the session (subscriber, callbacks, kinds,
 *    registrations; with FAKE_CUPTI_RESET_IDS=1 the correlation ids, which
 *    start from 1 again); any later call attaches CUPTI again; with
 *    FAKE_CUPTI_STATS=FILE the attaches, the finalizes and those made
 *    outside an API's EXIT callback are appended to FILE at exit;
 *  - with FAKE_CUPTI_COMPLETE_NS=D a record's work ends D ns after it is
 *    written: a default flush keeps a buffer until its records are all
 *    complete, a forced one hands it over with the others' ends zeroed;
 *    with FAKE_CUPTI_HOLD_BUFFER=1 it always holds a buffer, as CUPTI may
 *    (a default flush keeps an empty one);
 *  - with FAKE_CUPTI_GRAPH_LATE_END=D, turning the kernel kind off gives
 *    the kernels of the graph launched last (while they are still in the
 *    current buffer) an end D ns after that moment, as CUPTI 13 does on an
 *    H100 (test/gpu/graphs.sh); with FAKE_CUPTI_GRAPH_LATE_AFTER=N too,
 *    those records are taken out of the buffer (a hole the client skips)
 *    and written again N turn-offs later, as on an H200 where they came
 *    more than 8 windows after (test/gpu/graphcost.sh);
 *  - a buffer is cleared before use, unless the client set
 *    CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER: then a buffer that is
 *    not all zero breaks that promise, and the fake aborts the process
 *    (real CUPTI would leave stale bytes in its records).
 * Differences: records are complete when written (the fake GPU is
 * synchronous); only launches carry functionParams; no resource-domain
 * callbacks; after fork the child starts with no pending records (the
 * parent delivers them).
 *
 * Never uses malloc (its calls would show up in heap traces).  Thread-safe:
 * one mutex guards the buffers and the subscriber; client callbacks run
 * without it, except bufferRequested.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cupti.h>

#include "clock_ns.h"
#include "fake_cupti.h"

#define API __attribute__((visibility("default")))
#define MAX_FULL 256 /* completed buffers waiting for delivery */

struct buf {
	uint8_t *p;
	size_t size, used, nrec, max;
};

struct CUpti_Subscriber_st {
	CUpti_CallbackFunc fn;
	void *userdata;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static struct CUpti_Subscriber_st sub;
static int subscribed;
static uint8_t rt_on[CUPTI_RUNTIME_TRACE_CBID_SIZE];
static uint8_t drv_on[CUPTI_DRIVER_TRACE_CBID_SIZE];
static uint8_t kind_on[CUPTI_ACTIVITY_KIND_COUNT];
static uint32_t next_corr;

static CUpti_BuffersCallbackRequestFunc buf_req;
static CUpti_BuffersCallbackCompleteFunc buf_done;
static CUpti_TimestampCallbackFunc ts_fn;
static struct buf cur;
static struct buf full[MAX_FULL];
static unsigned nfull;
static uint64_t dropped;
static uint64_t drop_every, seen; /* FAKE_CUPTI_DROP_EVERY; records emitted */
static uint64_t incomplete_every, written; /* FAKE_CUPTI_INCOMPLETE_EVERY */
/* FAKE_CUPTI_COMPLETE_NS: a record's work ends this long after it is
 * written; until then a default flush keeps its buffer.  Tracked for the
 * current buffer only. */
#define MAX_PENDING 4096
struct pending {
	size_t off;
	uint64_t at;
};
static uint64_t complete_ns;
static struct pending pend[MAX_PENDING];
static unsigned npend;
static int hold_buffer; /* FAKE_CUPTI_HOLD_BUFFER=1: always holds a buffer */
static int reset_ids;   /* FAKE_CUPTI_RESET_IDS=1: a new session numbers calls from 1 */
/* FAKE_CUPTI_GRAPH_LATE_END: the last graph launch's kernel records, in
 * late_buf (the current buffer when they were written). */
static uint64_t late_end_ns;
static uint32_t late_corr;
static const uint8_t *late_buf;
static size_t late_off[512];
static unsigned nlate;
/* FAKE_CUPTI_GRAPH_LATE_AFTER: records taken out, and in how many more
 * turn-offs of the kernel kind each is written again. */
#define HOLE_KIND CUPTI_ACTIVITY_KIND_MARKER /* a record taken out: skipped */
#define MAX_HELD 2048
static unsigned late_after;
static CUpti_ActivityKernel10 held[MAX_HELD];
static unsigned held_in[MAX_HELD], nheld;
static int take_buffer(void);
static int append(const void *rec, size_t sz);
static uint32_t period_ms;
static int worker_started;
/* Attachment: any call attaches CUPTI (lazily, as the real one does after
 * cuptiFinalize); counted for FAKE_CUPTI_STATS. */
static int attached;
static uint64_t attaches, finalizes, finalizes_outside_exit;
/* initial-exec: a lazily allocated TLS block would be a malloc the tests see */
static __thread int in_exit_callback __attribute__((tls_model("initial-exec")));

static void touch(void)
{
	int no = 0;

	if (__atomic_compare_exchange_n(&attached, &no, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		__atomic_add_fetch(&attaches, 1, __ATOMIC_RELAXED);
}

/* ---- names ----------------------------------------------------------- */

struct cb_name {
	CUpti_CallbackId cbid;
	const char *name;
};

/* Runtime names carry no _vNNNN suffix, as CUPTI reports them. */
#define RT(fn, v) { CUPTI_RUNTIME_TRACE_CBID_##fn##_##v, #fn }
static const struct cb_name rt_names[] = {
	RT(cudaMalloc, v3020), RT(cudaFree, v3020), RT(cudaMallocHost, v3020),
	RT(cudaHostAlloc, v3020), RT(cudaFreeHost, v3020), RT(cudaMallocManaged, v6000),
	RT(cudaMallocPitch, v3020), RT(cudaMallocAsync, v11020), RT(cudaMallocAsync_ptsz, v11020),
	RT(cudaFreeAsync, v11020), RT(cudaFreeAsync_ptsz, v11020),
	RT(cudaMallocFromPoolAsync, v11020), RT(cudaMallocFromPoolAsync_ptsz, v11020),
	RT(cudaMemcpy, v3020), RT(cudaMemcpy_ptds, v7000), RT(cudaMemcpyAsync, v3020),
	RT(cudaMemcpyAsync_ptsz, v7000), RT(cudaMemcpyPeerAsync, v4000),
	RT(cudaMemset, v3020), RT(cudaMemset_ptds, v7000), RT(cudaMemsetAsync, v3020),
	RT(cudaMemsetAsync_ptsz, v7000),
	RT(cudaLaunchKernel, v7000), RT(cudaLaunchKernel_ptsz, v7000),
	RT(__cudaLaunchKernel, v13000), RT(__cudaLaunchKernel_ptsz, v13000),
	RT(cudaLaunchKernelExC, v11060), RT(cudaLaunchKernelExC_ptsz, v11060),
	RT(cudaLaunchCooperativeKernel, v9000), RT(cudaLaunchCooperativeKernel_ptsz, v9000),
	RT(cudaGraphLaunch, v10000), RT(cudaGraphLaunch_ptsz, v10000),
	RT(cudaStreamSynchronize, v3020), RT(cudaStreamSynchronize_ptsz, v7000),
	RT(cudaDeviceSynchronize, v3020), RT(cudaEventSynchronize, v3020),
	RT(cudaStreamWaitEvent, v3020), RT(cudaStreamWaitEvent_ptsz, v7000),
	RT(cudaGetDevice, v3020), RT(cudaSetDevice, v3020),
};

#define DRV(fn) { CUPTI_DRIVER_TRACE_CBID_##fn, #fn }
static const struct cb_name drv_names[] = {
	DRV(cuLaunchKernel), DRV(cuLaunchKernel_ptsz), DRV(cuLaunchKernelEx),
	DRV(cuMemcpyHtoDAsync_v2), DRV(cuMemcpyDtoHAsync_v2), DRV(cuMemsetD8Async),
	DRV(cuGraphLaunch), DRV(cuGraphLaunch_ptsz),
};

static const char *find_name(const struct cb_name *t, size_t n, CUpti_CallbackId cbid)
{
	for (size_t i = 0; i < n; i++)
		if (t[i].cbid == cbid)
			return t[i].name;
	return NULL;
}

static const char *cb_name(CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
	if (domain == CUPTI_CB_DOMAIN_RUNTIME_API)
		return find_name(rt_names, sizeof(rt_names) / sizeof(rt_names[0]), cbid);
	if (domain == CUPTI_CB_DOMAIN_DRIVER_API)
		return find_name(drv_names, sizeof(drv_names) / sizeof(drv_names[0]), cbid);
	return NULL;
}

API CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char **name)
{
	touch();
	const char *s = cb_name(domain, cbid);

	if (!name || !s)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*name = s;
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiGetResultString(CUptiResult result, const char **str)
{
	touch();
	const char *s;

	switch (result) {
	case CUPTI_SUCCESS: s = "CUPTI_SUCCESS"; break;
	case CUPTI_ERROR_INVALID_PARAMETER: s = "CUPTI_ERROR_INVALID_PARAMETER"; break;
	case CUPTI_ERROR_INVALID_OPERATION: s = "CUPTI_ERROR_INVALID_OPERATION"; break;
	case CUPTI_ERROR_MAX_LIMIT_REACHED: s = "CUPTI_ERROR_MAX_LIMIT_REACHED"; break;
	case CUPTI_ERROR_NOT_INITIALIZED: s = "CUPTI_ERROR_NOT_INITIALIZED"; break;
	case CUPTI_ERROR_INVALID_KIND: s = "CUPTI_ERROR_INVALID_KIND"; break;
	case CUPTI_ERROR_NOT_SUPPORTED: s = "CUPTI_ERROR_NOT_SUPPORTED"; break;
	case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
		s = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
		break;
	case CUPTI_ERROR_UNKNOWN: s = "CUPTI_ERROR_UNKNOWN"; break;
	default: s = NULL; break;
	}
	if (!str || !s)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*str = s;
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiGetErrorMessage(CUptiResult result, const char **str)
{
	touch();
	return cuptiGetResultString(result, str);
}

API CUptiResult cuptiGetVersion(uint32_t *version)
{
	touch();
	if (!version)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*version = CUPTI_API_VERSION;
	return CUPTI_SUCCESS;
}

/* ---- subscriber and callbacks ---------------------------------------- */

static CUptiResult subscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
			     void *userdata, char *old, size_t oldsize)
{
	const char *busy = getenv("FAKE_CUPTI_BUSY");
	CUptiResult r = CUPTI_SUCCESS;

	if (!subscriber)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&lock);
	if (subscribed || (busy && !strcmp(busy, "1"))) {
		if (old && oldsize)
			snprintf(old, oldsize, "%s", "CUPTI for fake-profiler");
		r = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	} else {
		sub.fn = callback;
		sub.userdata = userdata;
		subscribed = 1;
		*subscriber = &sub;
	}
	pthread_mutex_unlock(&lock);
	return r;
}

API CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
			       void *userdata)
{
	touch();
	return subscribe(subscriber, callback, userdata, NULL, 0);
}

API CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
				  void *userdata, CUpti_SubscriberParams *params)
{
	touch();
	if (params && params->structSize >= CUpti_SubscriberParams_STRUCT_SIZE)
		return subscribe(subscriber, callback, userdata, params->oldSubscriberName,
				 params->oldSubscriberSize);
	return subscribe(subscriber, callback, userdata, NULL, 0);
}

API CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle subscriber)
{
	touch();
	CUptiResult r = CUPTI_SUCCESS;

	pthread_mutex_lock(&lock);
	if (subscriber != &sub || !subscribed) {
		r = CUPTI_ERROR_INVALID_PARAMETER;
	} else {
		subscribed = 0;
		memset(rt_on, 0, sizeof(rt_on));
		memset(drv_on, 0, sizeof(drv_on));
	}
	pthread_mutex_unlock(&lock);
	return r;
}

static uint8_t *enable_slot(CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
	if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid > 0 && cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE)
		return &rt_on[cbid];
	if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid > 0 && cbid < CUPTI_DRIVER_TRACE_CBID_SIZE)
		return &drv_on[cbid];
	return NULL;
}

API CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
				    CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
	touch();
	uint8_t *on;

	if (subscriber != &sub || !subscribed)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if (domain > CUPTI_CB_DOMAIN_INVALID && domain < CUPTI_CB_DOMAIN_SIZE &&
	    domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API)
		return CUPTI_SUCCESS; /* accepted; the fake never issues them */
	on = enable_slot(domain, cbid);
	if (!on)
		return CUPTI_ERROR_INVALID_PARAMETER;
	__atomic_store_n(on, enable ? 1 : 0, __ATOMIC_RELAXED);
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiGetCallbackState(uint32_t *enable, CUpti_SubscriberHandle subscriber,
				      CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
	touch();
	uint8_t *on = enable_slot(domain, cbid);

	if (!enable || subscriber != &sub || !subscribed || !on)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*enable = __atomic_load_n(on, __ATOMIC_RELAXED);
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber,
				  CUpti_CallbackDomain domain)
{
	touch();
	if (subscriber != &sub || !subscribed || domain <= CUPTI_CB_DOMAIN_INVALID ||
	    domain >= CUPTI_CB_DOMAIN_SIZE)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if (domain == CUPTI_CB_DOMAIN_RUNTIME_API)
		memset(rt_on, enable ? 1 : 0, sizeof(rt_on));
	else if (domain == CUPTI_CB_DOMAIN_DRIVER_API)
		memset(drv_on, enable ? 1 : 0, sizeof(drv_on));
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiEnableAllDomains(uint32_t enable, CUpti_SubscriberHandle subscriber)
{
	touch();
	CUptiResult r = cuptiEnableDomain(enable, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);

	return r != CUPTI_SUCCESS ? r : cuptiEnableDomain(enable, subscriber, CUPTI_CB_DOMAIN_DRIVER_API);
}

/* ---- clock ------------------------------------------------------------ */

static uint64_t timestamp(void)
{
	CUpti_TimestampCallbackFunc f = __atomic_load_n(&ts_fn, __ATOMIC_ACQUIRE);

	return f ? f() : clock_ns(CLOCK_REALTIME);
}

API CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc funcTimestamp)
{
	touch();
	if (!funcTimestamp)
		return CUPTI_ERROR_INVALID_PARAMETER;
	__atomic_store_n(&ts_fn, funcTimestamp, __ATOMIC_RELEASE);
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiGetTimestamp(uint64_t *ts)
{
	touch();
	if (!ts)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*ts = timestamp();
	return CUPTI_SUCCESS;
}

/* ---- activity buffers ------------------------------------------------- */

static int zeroed_out; /* the client hands over zeroed buffers */

API CUptiResult cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t *valueSize,
					  void *value)
{
	touch();
	if (!valueSize || !value)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if (attr != CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER)
		return CUPTI_ERROR_NOT_SUPPORTED;
	if (*valueSize != sizeof(uint8_t))
		return CUPTI_ERROR_INVALID_PARAMETER;
	__atomic_store_n(&zeroed_out, *(uint8_t *)value != 0, __ATOMIC_RELEASE);
	return CUPTI_SUCCESS;
}

static int all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

static void broken_promise(void)
{
	static const char msg[] = "fake_cupti: a buffer promised zeroed is not\n";

	if (write(2, msg, sizeof(msg) - 1) < 0)
		abort();
	abort();
}

static size_t record_size(CUpti_ActivityKind kind)
{
	switch (kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
	case HOLE_KIND:
		return sizeof(CUpti_ActivityKernel10);
	case CUPTI_ACTIVITY_KIND_MEMCPY: return sizeof(CUpti_ActivityMemcpy6);
	case CUPTI_ACTIVITY_KIND_MEMSET: return sizeof(CUpti_ActivityMemset4);
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: return sizeof(CUpti_ActivitySynchronization2);
	default: return 0;
	}
}

/* Deliveries between taking buffers and the client's last callback: a
 * flush waits for them (it is a blocking call: what was recorded before it
 * has reached the client when it returns, even a buffer the worker took). */
static unsigned delivering;
static pthread_cond_t delivered = PTHREAD_COND_INITIALIZER;

/* Where a record's end lies in its struct. */
static size_t end_offset(CUpti_ActivityKind kind)
{
	switch (kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
		return offsetof(CUpti_ActivityKernel10, end);
	case CUPTI_ACTIVITY_KIND_MEMCPY: return offsetof(CUpti_ActivityMemcpy6, end);
	case CUPTI_ACTIVITY_KIND_MEMSET: return offsetof(CUpti_ActivityMemset4, end);
	default: return offsetof(CUpti_ActivitySynchronization2, end);
	}
}

/* With the lock held: forgets the records of cur now complete; forced:
 * the others lose their end, as a forced flush hands them over. */
static void pending_settle(int forced)
{
	uint64_t now = clock_ns(CLOCK_MONOTONIC);
	unsigned keep = 0;

	for (unsigned i = 0; i < npend; i++) {
		if (pend[i].at <= now)
			continue;
		if (forced) {
			uint8_t *r = cur.p + pend[i].off;
			uint64_t zero = 0;

			memcpy(r + end_offset(((CUpti_Activity *)(void *)r)->kind), &zero, sizeof(zero));
			if (((CUpti_Activity *)(void *)r)->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
				memcpy(r + offsetof(CUpti_ActivityKernel10, completed), &zero,
				       sizeof(zero));
			continue;
		}
		pend[keep++] = pend[i];
	}
	npend = keep;
}

/* Hands the full buffers to the client, and the current one: on a forced
 * flush always, on a default one when its records are all complete (and,
 * under FAKE_CUPTI_HOLD_BUFFER, not empty). */
static void deliver(int all, int forced)
{
	struct buf out[MAX_FULL + 1];
	unsigned n;
	CUpti_BuffersCallbackCompleteFunc done;

	pthread_mutex_lock(&lock);
	delivering++;
	memcpy(out, full, nfull * sizeof(full[0]));
	n = nfull;
	nfull = 0;
	if (cur.p)
		pending_settle(forced);
	if (all && cur.p && (forced || (!npend && (cur.nrec || !hold_buffer)))) {
		out[n++] = cur;
		memset(&cur, 0, sizeof(cur));
		late_buf = NULL; /* its late records went with it (a reused buffer is not theirs) */
		npend = 0;
	}
	done = buf_done;
	pthread_mutex_unlock(&lock);
	for (unsigned i = 0; i < n; i++)
		done(NULL, 0, out[i].p, out[i].size, out[i].used);
	if (hold_buffer) {
		pthread_mutex_lock(&lock);
		take_buffer();
		pthread_mutex_unlock(&lock);
	}
	pthread_mutex_lock(&lock);
	if (!--delivering)
		pthread_cond_broadcast(&delivered);
	pthread_mutex_unlock(&lock);
}

static void *worker(void *arg)
{
	(void)arg;
	for (;;) {
		int all = 0;

		pthread_mutex_lock(&lock);
		if (period_ms) {
			struct timespec until;

			clock_gettime(CLOCK_REALTIME, &until);
			until.tv_sec += period_ms / 1000;
			until.tv_nsec += (long)(period_ms % 1000) * 1000000;
			if (until.tv_nsec >= 1000000000) {
				until.tv_sec++;
				until.tv_nsec -= 1000000000;
			}
			while (!nfull && pthread_cond_timedwait(&wake, &lock, &until) == 0)
				;
			all = !nfull;
		} else {
			while (!nfull && !period_ms)
				pthread_cond_wait(&wake, &lock);
		}
		pthread_mutex_unlock(&lock);
		deliver(all, 0);
	}
	return NULL;
}

static void child_after_fork(void)
{
	pthread_mutex_init(&lock, NULL);
	pthread_cond_init(&wake, NULL);
	pthread_cond_init(&delivered, NULL);
	delivering = 0;
	memset(&cur, 0, sizeof(cur));
	late_buf = NULL; /* its late records went with it (a reused buffer is not theirs) */
	nfull = 0;
	npend = 0;
	worker_started = 0;
}

/* With the lock held. */
static void start_worker(void)
{
	pthread_t t;
	sigset_t all, old;

	if (worker_started)
		return;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (pthread_create(&t, NULL, worker, NULL) == 0) {
		pthread_detach(t);
		worker_started = 1;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

API CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc funcBufferRequested,
					       CUpti_BuffersCallbackCompleteFunc funcBufferCompleted)
{
	touch();
	if (!funcBufferRequested || !funcBufferCompleted)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&lock);
	buf_req = funcBufferRequested;
	buf_done = funcBufferCompleted;
	start_worker();
	pthread_mutex_unlock(&lock);
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind)
{
	touch();
	if (kind <= CUPTI_ACTIVITY_KIND_INVALID || kind >= CUPTI_ACTIVITY_KIND_COUNT)
		return CUPTI_ERROR_INVALID_KIND;
	__atomic_store_n(&kind_on[kind], 1, __ATOMIC_RELEASE);
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind)
{
	touch();
	if (kind <= CUPTI_ACTIVITY_KIND_INVALID || kind >= CUPTI_ACTIVITY_KIND_COUNT)
		return CUPTI_ERROR_INVALID_KIND;
	__atomic_store_n(&kind_on[kind], 0, __ATOMIC_RELEASE);
	if (late_end_ns && kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
		uint64_t end = timestamp() + late_end_ns;

		pthread_mutex_lock(&lock);
		unsigned kept = 0;

		/* the records held back earlier that are due now */
		for (unsigned i = 0; i < nheld; i++) {
			if (--held_in[i] == 0) {
				if (!append(&held[i], sizeof(held[i])))
					dropped++;
			} else {
				held[kept] = held[i];
				held_in[kept++] = held_in[i];
			}
		}
		nheld = kept;
		for (unsigned i = 0; late_buf && late_buf == cur.p && i < nlate; i++) {
			uint8_t *r = cur.p + late_off[i];

			memcpy(r + offsetof(CUpti_ActivityKernel10, end), &end, sizeof(end));
			if (late_after && nheld < MAX_HELD) {
				CUpti_ActivityKind hole = HOLE_KIND;

				memcpy(&held[nheld], r, sizeof(held[nheld]));
				held_in[nheld++] = late_after;
				memcpy(r + offsetof(CUpti_Activity, kind), &hole, sizeof(hole));
			}
		}
		nlate = 0;
		late_buf = NULL;
		pthread_mutex_unlock(&lock);
	}
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
	touch();
	if (!buf_done)
		return CUPTI_SUCCESS;
	deliver(1, (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0);
	pthread_mutex_lock(&lock);
	while (delivering)
		pthread_cond_wait(&delivered, &lock);
	pthread_mutex_unlock(&lock);
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiActivityFlush(CUcontext context, uint32_t streamId, uint32_t flag)
{
	touch();
	(void)context, (void)streamId;
	return cuptiActivityFlushAll(flag);
}

API CUptiResult cuptiActivityFlushPeriod(uint32_t time)
{
	touch();
	pthread_mutex_lock(&lock);
	period_ms = time;
	pthread_cond_broadcast(&wake);
	pthread_mutex_unlock(&lock);
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t streamId,
						  size_t *n)
{
	touch();
	(void)context, (void)streamId;
	if (!n)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&lock);
	*n = dropped;
	dropped = 0;
	pthread_mutex_unlock(&lock);
	return CUPTI_SUCCESS;
}

API CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t validBufferSizeBytes,
					   CUpti_Activity **record)
{
	touch();
	size_t off = 0, sz;

	if (!buffer || !record)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if (*record) {
		sz = record_size((*record)->kind);
		if (!sz)
			return CUPTI_ERROR_INVALID_KIND;
		off = (size_t)((uint8_t *)*record - buffer) + sz;
	}
	if (off + sizeof(CUpti_Activity) > validBufferSizeBytes)
		return CUPTI_ERROR_MAX_LIMIT_REACHED;
	sz = record_size(((CUpti_Activity *)(void *)(buffer + off))->kind);
	if (!sz)
		return CUPTI_ERROR_INVALID_KIND;
	if (off + sz > validBufferSizeBytes)
		return CUPTI_ERROR_MAX_LIMIT_REACHED;
	*record = (CUpti_Activity *)(void *)(buffer + off);
	return CUPTI_SUCCESS;
}

/* With the lock held: a buffer from the client as cur, if none; 0 when
 * there is one. */
static int take_buffer(void)
{
	uint8_t *p = NULL;
	size_t size = 0, max = 0, skip;

	if (cur.p)
		return 0;
	if (!buf_req)
		return -1;
	buf_req(&p, &size, &max);
	if (!p)
		return -1;
	if (!__atomic_load_n(&zeroed_out, __ATOMIC_ACQUIRE))
		memset(p, 0, size);
	else if (!all_zero(p, size))
		broken_promise();
	skip = (8 - (uintptr_t)p % 8) % 8; /* records are 8-aligned */
	if (size < skip + sizeof(CUpti_ActivityKernel10)) {
		if (buf_done) { /* unusable: give it back empty */
			pthread_mutex_unlock(&lock);
			buf_done(NULL, 0, p, size, 0);
			pthread_mutex_lock(&lock);
		}
		return -1;
	}
	cur = (struct buf){ p + skip, size - skip, 0, 0, max };
	return 0;
}

/* Appends one record of sz bytes; with the lock held.  0 when dropped.
 * Under FAKE_CUPTI_COMPLETE_NS its work ends that long after. */
static int append(const void *rec, size_t sz)
{
	if (cur.p && (cur.used + sz > cur.size || (cur.max && cur.nrec >= cur.max))) {
		if (nfull == MAX_FULL)
			return 0;
		full[nfull++] = cur; /* its pending records count as complete */
		memset(&cur, 0, sizeof(cur));
		late_buf = NULL; /* its late records went with it (a reused buffer is not theirs) */
		npend = 0;
		pthread_cond_signal(&wake);
	}
	if (take_buffer() < 0)
		return 0;
	if (complete_ns && npend < MAX_PENDING)
		pend[npend++] = (struct pending){ cur.used, clock_ns(CLOCK_MONOTONIC) + complete_ns };
	memcpy(cur.p + cur.used, rec, sz);
	cur.used += sz;
	cur.nrec++;
	return 1;
}

static void emit(const void *rec, size_t sz)
{
	pthread_mutex_lock(&lock);
	if ((drop_every && ++seen % drop_every == 0) || !append(rec, sz)) {
		dropped++;
	} else if (late_end_ns && ((const CUpti_Activity *)rec)->kind ==
					  CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
		   ((const CUpti_ActivityKernel10 *)rec)->graphId) {
		uint32_t corr = ((const CUpti_ActivityKernel10 *)rec)->correlationId;

		if (corr != late_corr || late_buf != cur.p)
			nlate = 0;
		late_corr = corr;
		late_buf = cur.p;
		if (nlate < sizeof(late_off) / sizeof(late_off[0]))
			late_off[nlate++] = cur.used - sz;
	}
	pthread_mutex_unlock(&lock);
}

/* ---- detaching ------------------------------------------------------- */

/* Ends the session: the subscriber, its callbacks, the activity kinds, the
 * registered callbacks and settings; records not yet delivered are lost
 * (counted).  CUPTI asks for the call in an API's EXIT callback. */
API CUptiResult cuptiFinalize(void)
{
	pthread_mutex_lock(&lock);
	subscribed = 0;
	memset(rt_on, 0, sizeof(rt_on));
	memset(drv_on, 0, sizeof(drv_on));
	for (unsigned k = 0; k < CUPTI_ACTIVITY_KIND_COUNT; k++)
		__atomic_store_n(&kind_on[k], 0, __ATOMIC_RELEASE);
	for (unsigned i = 0; i < nfull; i++)
		dropped += full[i].nrec;
	dropped += cur.nrec;
	nfull = 0;
	memset(&cur, 0, sizeof(cur));
	late_buf = NULL; /* its late records went with it (a reused buffer is not theirs) */
	npend = 0;
	buf_req = NULL;
	buf_done = NULL;
	__atomic_store_n(&ts_fn, NULL, __ATOMIC_RELEASE);
	__atomic_store_n(&zeroed_out, 0, __ATOMIC_RELEASE);
	period_ms = 0;
	if (reset_ids)
		__atomic_store_n(&next_corr, 0, __ATOMIC_RELAXED);
	finalizes++;
	if (!in_exit_callback)
		finalizes_outside_exit++;
	__atomic_store_n(&attached, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&lock);
	return CUPTI_SUCCESS;
}

/* FAKE_CUPTI_STATS=FILE: at exit, one line "attaches N finalizes N
 * outside_exit N" appended, for tests of attaching and detaching. */
__attribute__((destructor)) static void fake_cupti_stats(void)
{
	const char *path = getenv("FAKE_CUPTI_STATS");
	char line[128];
	int fd, n;

	if (!path || !*path)
		return;
	n = snprintf(line, sizeof(line), "attaches %llu finalizes %llu outside_exit %llu\n",
		     (unsigned long long)attaches, (unsigned long long)finalizes,
		     (unsigned long long)finalizes_outside_exit);
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (write(fd, line, (size_t)n) < 0)
		n = 0;
	close(fd);
}

/* ---- what the fake runtime calls (fake_cupti.h) ------------------------ */

static int cb_enabled(CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
	uint8_t *on = enable_slot(domain, cbid);

	return on && __atomic_load_n(&subscribed, __ATOMIC_ACQUIRE) &&
	       __atomic_load_n(on, __ATOMIC_RELAXED);
}

static void callback(struct fake_cupti_call *call, CUpti_ApiCallbackSite site)
{
	CUpti_CallbackData d = {
		.callbackSite = site,
		.functionName = cb_name(call->domain, call->cbid),
		.functionParams = call->params,
		.functionReturnValue = &call->ret,
		.symbolName = call->symbol,
		.context = NULL,
		.contextUid = 1,
		.correlationData = &call->correlation_data,
		.correlationId = call->correlation,
	};

	if (cb_enabled(call->domain, call->cbid) && sub.fn) {
		in_exit_callback = site == CUPTI_API_EXIT;
		sub.fn(sub.userdata, call->domain, call->cbid, &d);
		in_exit_callback = 0;
	}
}

static void op_api_enter(struct fake_cupti_call *call)
{
	call->correlation = __atomic_add_fetch(&next_corr, 1, __ATOMIC_RELAXED);
	call->correlation_data = 0;
	callback(call, CUPTI_API_ENTER);
}

static void op_api_exit(struct fake_cupti_call *call)
{
	callback(call, CUPTI_API_EXIT);
}

static int kind_enabled(CUpti_ActivityKind kind)
{
	return __atomic_load_n(&kind_on[kind], __ATOMIC_ACQUIRE);
}

/* op's end, or 0 for a record written before its work ended. */
static uint64_t end_of(const struct fake_gpu_op *op)
{
	if (incomplete_every &&
	    __atomic_add_fetch(&written, 1, __ATOMIC_RELAXED) % incomplete_every == 0)
		return 0;
	return op->end;
}

/* The fields every GPU record kind shares, from op. */
#define PLACE(r, op)                                                          \
	((r).start = (op)->start, (r).end = end_of(op), (r).deviceId = (op)->device, \
	 (r).contextId = (op)->context, (r).streamId = (op)->stream,           \
	 (r).correlationId = (op)->correlation)

static void op_work_begins(struct fake_gpu_op *op)
{
	static const CUpti_ActivityKind kinds[][2] = {
		[FAKE_OP_KERNEL] = { CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_KERNEL },
		[FAKE_OP_MEMCPY] = { CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY },
		[FAKE_OP_MEMSET] = { CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_MEMSET },
		[FAKE_OP_SYNC] = { CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
				   CUPTI_ACTIVITY_KIND_SYNCHRONIZATION },
	};

	op->rec_kind = 0;
	for (int i = 0; i < 2 && !op->rec_kind; i++)
		if (kind_enabled(kinds[op->kind][i]))
			op->rec_kind = kinds[op->kind][i];
	/* a detached CUPTI records nothing */
	op->rec_attach = __atomic_load_n(&attached, __ATOMIC_ACQUIRE)
			 ? __atomic_load_n(&attaches, __ATOMIC_ACQUIRE) : 0;
	if (!op->rec_attach)
		op->rec_kind = 0;
}

static void op_record(const struct fake_gpu_op *op)
{
	if (!op->rec_kind)
		return;
	/* CUPTI was detached (and maybe attached again) while it ran */
	if (!__atomic_load_n(&attached, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&attaches, __ATOMIC_ACQUIRE) != op->rec_attach) {
		pthread_mutex_lock(&lock);
		dropped++;
		pthread_mutex_unlock(&lock);
		return;
	}
	switch (op->kind) {
	case FAKE_OP_KERNEL: {
		CUpti_ActivityKernel10 k;

		memset(&k, 0, sizeof(k));
		k.kind = (CUpti_ActivityKind)op->rec_kind;
		k.registersPerThread = op->registers;
		PLACE(k, op);
		k.completed = k.end;
		k.queued = op->start;
		k.submitted = op->start;
		k.gridX = op->grid[0], k.gridY = op->grid[1], k.gridZ = op->grid[2];
		k.blockX = op->block[0], k.blockY = op->block[1], k.blockZ = op->block[2];
		k.staticSharedMemory = op->static_smem;
		k.dynamicSharedMemory = op->dynamic_smem;
		k.gridId = (int64_t)op->correlation;
		k.name = op->name; /* CUPTI keeps kernel names alive for the process */
		k.launchType = CUPTI_ACTIVITY_LAUNCH_TYPE_REGULAR;
		k.graphId = op->graph_id;
		k.graphNodeId = op->graph_node;
		emit(&k, sizeof(k));
		break;
	}
	case FAKE_OP_MEMCPY: {
		CUpti_ActivityMemcpy6 m;

		memset(&m, 0, sizeof(m));
		m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
		m.copyKind = op->copy_kind;
		m.srcKind = op->src_kind;
		m.dstKind = op->dst_kind;
		m.flags = op->async ? CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC : 0;
		m.bytes = op->bytes;
		PLACE(m, op);
		m.copyCount = 1;
		emit(&m, sizeof(m));
		break;
	}
	case FAKE_OP_MEMSET: {
		CUpti_ActivityMemset4 m;

		memset(&m, 0, sizeof(m));
		m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
		m.value = op->value;
		m.bytes = op->bytes;
		PLACE(m, op);
		m.flags = op->async ? CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC : 0;
		m.memoryKind = op->mem_kind;
		emit(&m, sizeof(m));
		break;
	}
	case FAKE_OP_SYNC: {
		CUpti_ActivitySynchronization2 s;

		memset(&s, 0, sizeof(s));
		s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
		s.type = (CUpti_ActivitySynchronizationType)op->sync_type;
		s.start = op->start;
		s.end = end_of(op);
		s.correlationId = op->correlation;
		s.contextId = op->context;
		s.streamId = op->stream;
		s.cudaEventId = op->event;
		emit(&s, sizeof(s));
		break;
	}
	}
}

static const struct fake_cupti_ops ops = {
	.api_enter = op_api_enter,
	.api_exit = op_api_exit,
	.timestamp = timestamp,
	.work_begins = op_work_begins,
	.record = op_record,
};

__attribute__((constructor)) static void fake_cupti_init(void)
{
	void (*attach)(const struct fake_cupti_ops *) =
		(void (*)(const struct fake_cupti_ops *))dlsym(RTLD_DEFAULT, "fake_cudart_attach_cupti");
	const char *every = getenv("FAKE_CUPTI_DROP_EVERY");
	const char *incomplete = getenv("FAKE_CUPTI_INCOMPLETE_EVERY");

	if (every)
		drop_every = strtoull(every, NULL, 10);
	if (incomplete)
		incomplete_every = strtoull(incomplete, NULL, 10);
	if (getenv("FAKE_CUPTI_COMPLETE_NS"))
		complete_ns = strtoull(getenv("FAKE_CUPTI_COMPLETE_NS"), NULL, 10);
	hold_buffer = getenv("FAKE_CUPTI_HOLD_BUFFER") && !strcmp(getenv("FAKE_CUPTI_HOLD_BUFFER"), "1");
	reset_ids = getenv("FAKE_CUPTI_RESET_IDS") && !strcmp(getenv("FAKE_CUPTI_RESET_IDS"), "1");
	if (getenv("FAKE_CUPTI_GRAPH_LATE_AFTER"))
		late_after = (unsigned)strtoul(getenv("FAKE_CUPTI_GRAPH_LATE_AFTER"), NULL, 10);
	if (getenv("FAKE_CUPTI_GRAPH_LATE_END"))
		late_end_ns = strtoull(getenv("FAKE_CUPTI_GRAPH_LATE_END"), NULL, 10);
	pthread_atfork(NULL, NULL, child_after_fork);
	if (attach)
		attach(&ops);
}
