/*
 * CUPTI's start, exit and fork (one job of the CUPTI modules; see cupti.h).
 *
 * Start order matters: the timestamp callback (the record clock) is
 * registered before any activity kind is enabled, so every GPU record is
 * on the host's record clock; without it nothing is enabled at all.
 * Records reach us by CUPTI's flush period (or our flush thread) and, at
 * exit, a forced flush from an atexit handler: it runs before the CUDA
 * libraries' destructors, which a DSO destructor (ours) would not.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cupti.h>

#include "conn.h"
#include "cupti.h"
#include "log.h"
#include "cupti_activity.h"
#include "cupti_api.h"
#include "cupti_lib.h"
#include "cupti_window.h"
#include "modules.h"
#include "settings.h"

#define TEXT_MAX 768

int cupti_pending;
int cupti_state;
int cupti_exited;
static int disabled;
static int sync_records; /* SHIMMER_GPU_SYNC=1 */
static char text[TEXT_MAX];

/* GPU_STATUS, and for a failure the one stderr line. */
static void report(uint32_t status, const char *why)
{
	conn_gpu_status(status, why);
	log_debug("GPU status %u: %s", status, why);
	if (status != SHM_GPU_ACTIVE && status != SHM_GPU_DISABLED)
		log_warn("GPU activity not traced: %s; API calls still are", why);
}

static void at_exit(void)
{
	cupti_exit();
}

/*
 * Whether an NVIDIA driver is there to talk to: the kernel module's /proc
 * entry or device (also in a container given GPUs), or WSL's.  Without
 * one CUPTI fails with an error that says nothing of why
 * (CUPTI_ERROR_UNKNOWN from cuptiSubscribe): we say it in words.
 */
static int driver_present(void)
{
	return access("/proc/driver/nvidia", F_OK) == 0 || access("/dev/nvidiactl", F_OK) == 0 ||
	       access("/dev/dxg", F_OK) == 0;
}

/* Everything after loading.  Returns the status; text says why. */
static uint32_t begin(void *h)
{
	char other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = { 0 };
	const char *step;
	unsigned int ncb;
	CUptiResult res;

	if (cupti_lib_bind(h, text, sizeof(text)) < 0)
		return SHM_GPU_ERROR;
	res = cupti_session_start(&step, other, sizeof(other));
	if (res == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		snprintf(text, sizeof(text), "another CUPTI subscriber (%s) is active",
			 other[0] ? other : "torch.profiler? Nsight?");
		return SHM_GPU_BUSY;
	}
	if (res != CUPTI_SUCCESS)
		goto fail;
	/* Sampling (if on) begins before anything can record. */
	cupti_window_since_now();
	ncb = cupti_callbacks_enable();
	log_debug("CUPTI: %u API callbacks enabled", ncb);
	res = cupti_kinds_enable(sync_records);
	if (res != CUPTI_SUCCESS) {
		step = "cuptiActivityEnable";
		cupti_unsubscribe();
		goto fail;
	}
	cupti_window_start();
	cupti_converter_start(); /* without it, buffers convert where they complete */
	if (atexit(at_exit))
		log_debug("CUPTI: atexit failed; flushing from the destructor");
	snprintf(text, sizeof(text), "%.700s", cupti_lib_path);
	return SHM_GPU_ACTIVE;
fail:
	if (!driver_present())
		snprintf(text, sizeof(text), "no GPU or NVIDIA driver found on this machine (no "
			 "/proc/driver/nvidia, /dev/nvidiactl or /dev/dxg); %s said %.200s (%.400s)",
			 step, cupti_result_str(res), cupti_lib_path);
	else
		snprintf(text, sizeof(text), "%s failed: %.200s (%.400s)", step,
			 cupti_result_str(res), cupti_lib_path);
	return SHM_GPU_ERROR;
}

static void start(void)
{
	struct shim_thread *t = &shim_tls;
	int expect = CS_IDLE, saved = errno;
	uint32_t status;
	sigset_t mask;
	void *h;

	if (!__atomic_compare_exchange_n(&cupti_state, &expect, CS_STARTING, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED))
		return;
	__atomic_store_n(&cupti_pending, 0, __ATOMIC_RELAXED);
	/* loading and starting CUPTI allocates: ours (once) */
	shim_own_enter(t, &mask);
	if (!__atomic_load_n(&shim_live.on, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&cupti_state, CS_OFF, __ATOMIC_RELEASE);
		goto out;
	}
	if (disabled) {
		report(SHM_GPU_DISABLED, "SHIMMER_CUPTI=0");
		__atomic_store_n(&cupti_state, CS_OFF, __ATOMIC_RELEASE);
		goto out;
	}
	h = cupti_lib_load(text, sizeof(text));
	status = h ? begin(h) : SHM_GPU_NO_CUPTI;
	__atomic_store_n(&cupti_state, status == SHM_GPU_ACTIVE ? CS_ACTIVE : CS_OFF,
			 __ATOMIC_RELEASE);
	report(status, text);
	/* A pause that came first applies to the session it did not see.
	 * Under sampling no window is open yet and the sampler opens none
	 * while paused: nothing to do, and nothing to wait for (the sampler
	 * may hold win_lock while it flushes, and we may be inside cuInit). */
	if (status == SHM_GPU_ACTIVE && !cupti_sampling &&
	    __atomic_load_n(&shim.paused, __ATOMIC_ACQUIRE))
		cupti_pause(1);
out:
	shim_own_leave(t, &mask);
	errno = saved;
}

SHIM_EXPORT int InitializeInjection(void)
{
	start();
	return 1;
}

void cupti_late(void)
{
	/* not from a handler inside the shim's own work: at the next call */
	if (shim_tls.in_shim || shim_reentered(&shim_tls))
		return;
	start();
}

void cupti_setup(const char *self)
{
	const char *inj = getenv("CUDA_INJECTION64_PATH");

	disabled = !settings.cupti;
	sync_records = settings.gpu_sync;
	cupti_window_setup();
	if (!disabled && self && (!inj || !inj[0]) &&
	    setenv("CUDA_INJECTION64_PATH", self, 1) == 0)
		modules_injected(self);
	__atomic_store_n(&cupti_pending, 1, __ATOMIC_RELEASE);
}

void cupti_pause(int pause)
{
	if (__atomic_load_n(&cupti_state, __ATOMIC_ACQUIRE) != CS_ACTIVE)
		return;
	if (!cupti_sampling) {
		cupti_kinds_set(!pause);
		return;
	}
	/* Sampling: a pause ends the window; the sampler opens none while
	 * paused, and after a resume the next one as scheduled. */
	if (pause)
		cupti_window_pause();
}

void cupti_exit(void)
{
	struct shim_thread *t = &shim_tls;
	int saved = errno;
	sigset_t mask;
	void *h = 0;

	/* seq_cst: pairs with the converter's store of converter_busy and
	 * load of `exited` (each side stores, then loads the other's). */
	if (__atomic_load_n(&cupti_state, __ATOMIC_ACQUIRE) != CS_ACTIVE ||
	    __atomic_exchange_n(&cupti_exited, 1, __ATOMIC_SEQ_CST))
		return;
	cupti_flusher_stop();
	shim_own_enter(t, &mask);
	/* Only a libcupti that is still mapped can be called. */
	if (cupti_window_exit())
		h = dlopen(cupti_lib_path, RTLD_NOW | RTLD_NOLOAD);
	if (h) {
		size_t dropped = 0;

		/* work still running would lose its records to the forced
		 * flush: the last recorded call's are awaited first (buffers
		 * complete on this thread now, `exited`, or wait in the queue) */
		cupti_await_records(__atomic_load_n(&cupti_last_corr, __ATOMIC_ACQUIRE), 1);
		cupti_fn.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
		/* losses that came with no buffer to complete, so far unasked */
		if (cupti_fn.cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped) == CUPTI_SUCCESS)
			cupti_count_dropped(dropped, "CUPTI's count, at exit");
		dlclose(h);
	}
	cupti_converter_finish();
	shim_own_leave(t, &mask);
	errno = saved;
}

void cupti_fork_child(void)
{
	/* The parent's session, queued buffers and threads are not ours. */
	cupti_activity_fork_child();
	cupti_api_fork_child();
	cupti_window_fork_child();
	cupti_state = CS_IDLE;
	cupti_exited = 0;
	cupti_pending = 1;
}
