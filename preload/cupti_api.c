/*
 * CUPTI's API callbacks and our subscription; see cupti_api.h.
 */
#include <errno.h>
#include <string.h>

#include "clock.h"
#include "cupti_activity.h"
#include "cupti_api.h"
#include "cupti_lib.h"
#include "cupti_window.h"
#include "intern.h"
#include "log.h"
#include "shim.h"
#include "stack.h"

#define CBID_CAP 4096u /* callback ids we look at, per domain */
#define CBID_SLACK 64u /* unnamed ids past the header's last before we stop */
#define CB_MAX 512     /* API callbacks we enable, at most */

/* Prefixes of the API calls that start GPU work. */
static const char *const runtime_prefix[] = { "cudaLaunch", "__cudaLaunch", "cudaGraphLaunch",
					      "cudaMemcpy", "cudaMemset", 0 };
static const char *const driver_prefix[] = { "cuLaunch", "cuGraphLaunch", "cuMemcpy",
					     "cuMemset", 0 };

/* API calls in progress on this thread; only the outermost is recorded.
 * gen: the sampling window they were entered in. */
struct api_stack {
	unsigned int depth;
	unsigned int gen;
	uint64_t start;
};

uint32_t cupti_last_corr;
static unsigned int win_gen; /* bumped as each window opens */
static uint32_t win_api;     /* API calls recorded (for SHIMMER_DEBUG) */
static CUpti_SubscriberHandle sub;
static struct { uint16_t domain, cbid; } cbs[CB_MAX]; /* the callbacks enabled */
static unsigned int ncbs;
int cupti_cbs_on;
__thread struct cupti_site cupti_site;
static const struct intern_entry *api_names[2][CBID_CAP];
static __thread struct api_stack api_tls;

static uint32_t api_name(unsigned int dom, CUpti_CallbackId cbid, const char *name)
{
	const struct intern_entry *e = __atomic_load_n(&api_names[dom][cbid], __ATOMIC_ACQUIRE);

	if (unlikely(!e) && name) {
		e = intern_lookup(name, strlen(name));
		__atomic_store_n(&api_names[dom][cbid], e, __ATOMIC_RELEASE);
	}
	return intern_id(e);
}

static void CUPTIAPI on_api(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
			    const void *data)
{
	const CUpti_CallbackData *cb = data;
	struct api_stack *a = &api_tls;
	struct shim_thread *t;
	struct shm_rec_api r;
	unsigned int gen;
	uint32_t sess;
	int saved, b;

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
		if (domain == CUPTI_CB_DOMAIN_DRIVER_API ?
			    cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch ||
			    cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz :
			    cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000 ||
			    cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000) {
			/* a driver-API graph launch (JAX, XLA) has no runtime hook */
			cupti_window_graph();
			cupti_graph_entered(cb->correlationId,
					    domain != CUPTI_CB_DOMAIN_DRIVER_API);
		}
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
	sess = __atomic_load_n(&cupti_session, __ATOMIC_ACQUIRE);
	if (unlikely(__atomic_load_n(&cupti_attach, __ATOMIC_ACQUIRE) != AT_ON)) {
		/* detached as an application's call returns (runtime, or driver
		 * for a process that never calls the runtime), never inside one */
		cupti_finalize_here();
		return;
	}
	/* Not inside the shim's own work a signal handler interrupted (its
	 * CUDA call is counted by the hook, its record dropped).  Ours makes
	 * no traced call (names are interned in mapped memory, the stacks
	 * guard their own libunwind calls): BUSY_SHIM, so that a handler's
	 * calls in it are counted, not in_shim, which would pass them by. */
	if (!(t = shim_thread_traced()) || shim_reentered(t))
		return;
	saved = errno;
	b = shim_busy(t);
	r = (struct shm_rec_api){
		.hdr = { .type = SHM_REC_API, .size = sizeof(r) },
		.start = a->start, .end = clock_now(),
		.correlation = (uint64_t)sess << 32 | cb->correlationId,
		.domain = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? SHM_API_RUNTIME : SHM_API_DRIVER,
		.cbid = cbid,
	};
	r.name_id = api_name(domain == CUPTI_CB_DOMAIN_RUNTIME_API, cbid, cb->functionName);
	if (cupti_site.armed) {
		r.stack_id = cupti_site.stack_id;
		r.pystack_id = cupti_site.pystack_id;
	} else if (t->ring.slot && !thread_would_drop(t, sizeof(r))) {
		/* no stack unwound for a record the full ring drops */
		r.stack_id = stack_native(t);
		r.pystack_id = stack_python(t);
	}
	if (likely(__atomic_load_n(&cupti_session, __ATOMIC_ACQUIRE) == sess)) {
		thread_emit(t, &r, sizeof(r));
		cupti_corr_max(&cupti_last_corr, cb->correlationId);
		if (unlikely(log_debugging()))
			__atomic_add_fetch(&win_api, 1, __ATOMIC_RELAXED);
	}
	shim_unbusy(t, b);
	errno = saved;
}

static uint64_t CUPTIAPI timestamp(void)
{
	return clock_now();
}

CUptiResult cupti_session_start(const char **step, char *other, size_t other_size)
{
	CUpti_SubscriberParams params = {
		.structSize = CUpti_SubscriberParams_STRUCT_SIZE,
		.subscriberName = "shimmer",
		.oldSubscriberName = other,
		.oldSubscriberSize = other_size - 1,
	};
	CUptiResult res;

	*step = "cuptiSubscribe";
	res = cupti_fn.cuptiSubscribe_v2 ? cupti_fn.cuptiSubscribe_v2(&sub, on_api, 0, &params)
					 : cupti_fn.cuptiSubscribe(&sub, on_api, 0);
	if (res != CUPTI_SUCCESS)
		return res;
	*step = "cuptiActivityRegisterTimestampCallback";
	res = cupti_fn.cuptiActivityRegisterTimestampCallback(timestamp);
	if (res != CUPTI_SUCCESS)
		goto unsubscribe;
	if (cupti_fn.cuptiActivitySetAttribute) {
		uint8_t zeroed = 1;
		size_t len = sizeof(zeroed);

		/* Not fatal: an older CUPTI clears the buffers itself. */
		if (cupti_fn.cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER,
						       &len, &zeroed) != CUPTI_SUCCESS)
			log_debug("CUPTI: buffers will be cleared by CUPTI");
	}
	*step = "cuptiActivityRegisterCallbacks";
	res = cupti_fn.cuptiActivityRegisterCallbacks(cupti_buf_request, cupti_buf_complete);
	if (res == CUPTI_SUCCESS)
		return res;
unsubscribe:
	cupti_fn.cuptiUnsubscribe(sub);
	return res;
}

void cupti_unsubscribe(void)
{
	cupti_fn.cuptiUnsubscribe(sub);
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
		if (cupti_fn.cuptiGetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS || !name) {
			if (cbid >= known && ++misses >= CBID_SLACK)
				break;
			continue;
		}
		misses = 0;
		if (ncbs < CB_MAX && prefixed(name, prefix) &&
		    cupti_fn.cuptiEnableCallback(1, sub, domain, cbid) == CUPTI_SUCCESS) {
			cbs[ncbs].domain = (uint16_t)domain;
			cbs[ncbs++].cbid = (uint16_t)cbid;
			n++;
		}
	}
	return n;
}

unsigned int cupti_callbacks_enable(void)
{
	unsigned int n = enable_domain(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE,
				       runtime_prefix);

	n += enable_domain(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE,
			   driver_prefix);
	__atomic_store_n(&cupti_cbs_on, n > 0, __ATOMIC_RELAXED);
	return n;
}

void cupti_callbacks_set(int on)
{
	__atomic_store_n(&cupti_cbs_on, on, __ATOMIC_RELAXED);
	for (unsigned int i = 0; i < ncbs; i++)
		cupti_fn.cuptiEnableCallback((uint32_t)on, sub, (CUpti_CallbackDomain)cbs[i].domain,
					     cbs[i].cbid);
}

int cupti_callbacks_on(void)
{
	return __atomic_load_n(&cupti_cbs_on, __ATOMIC_RELAXED);
}

void cupti_api_new_window(void)
{
	__atomic_add_fetch(&win_gen, 1, __ATOMIC_RELAXED);
}

uint32_t cupti_api_recorded(void)
{
	return __atomic_exchange_n(&win_api, 0, __ATOMIC_RELAXED);
}

void cupti_api_fork_child(void)
{
	ncbs = 0;
	cupti_cbs_on = 0;
	cupti_last_corr = 0;
	cupti_site.armed = 0;
	api_tls.depth = 0;
}
