/*
 * cupti_detach: what CUPTI costs a kernel launch once it has recorded and
 * been switched off again, against the same process with CUPTI detached
 * (cuptiFinalize): the reason GPU sampling detaches between windows.  No
 * shimmer involved; run it bare on the GPU machine.
 *
 * Each cycle, from detached: attach (subscribe, kernel activity and the
 * runtime callbacks on), record a few launches, switch all off and flush
 * ("idle": shimmer's state between windows with SHIMMER_GPU_DETACH=0),
 * time a chunk of launches; detach (cuptiFinalize in a runtime call's EXIT
 * callback, where CUPTI asks for it), time a chunk.  Every other cycle
 * times the detached chunk first.  Only the CPU's time in the launch loop
 * is timed.
 *
 *   cupti_detach [-n LAUNCHES_PER_CHUNK] [-c CYCLES] [-0]
 *
 * -0 never attaches (a control: the difference must be nought).  Prints
 * one JSON line: ns per launch idle and detached, the difference and its
 * 95% interval from the spread of the cycles' differences.
 *
 * Built on the GPU machine by bench/gpu-overhead (CUPTI_AB=CYCLES).
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>
#include <cupti.h>

#include "paired.h"

#define BUF_BYTES (1 << 20)

__global__ void empty_kernel(int *p)
{
	if (p)
		*p = 1;
}

static CUpti_SubscriberHandle sub;
static volatile int finalize_wanted;
static unsigned long long records;

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void CUPTIAPI buf_request(uint8_t **buf, size_t *size, size_t *max_records)
{
	*buf = (uint8_t *)aligned_alloc(8, BUF_BYTES);
	*size = *buf ? BUF_BYTES : 0;
	*max_records = 0;
}

static void CUPTIAPI buf_complete(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
				  size_t valid)
{
	CUpti_Activity *rec = NULL;

	(void)ctx;
	(void)stream;
	(void)size;
	while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS)
		records++;
	free(buf);
}

static void CUPTIAPI on_api(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
			    const void *data)
{
	const CUpti_CallbackData *cb = (const CUpti_CallbackData *)data;

	(void)userdata;
	(void)cbid;
	if (finalize_wanted && domain == CUPTI_CB_DOMAIN_RUNTIME_API &&
	    cb->callbackSite == CUPTI_API_EXIT) {
		finalize_wanted = 0;
		cuptiFinalize();
	}
}

static int launches(int n)
{
	for (int i = 0; i < n; i++) {
		empty_kernel<<<1, 32>>>(NULL);
		if (cudaGetLastError() != cudaSuccess)
			return -1;
	}
	return 0;
}

/* CPU ns per launch of one chunk; -1 on a failed call. */
static double chunk(int n)
{
	double t0 = now_ns(), t;

	if (launches(n) < 0)
		return -1;
	t = now_ns() - t0;
	return cudaDeviceSynchronize() == cudaSuccess ? t / n : -1;
}

/* From detached: attached, a few launches recorded, everything off. */
static int attach_record_idle(void)
{
	if (cuptiSubscribe(&sub, on_api, NULL) != CUPTI_SUCCESS ||
	    cuptiActivityRegisterCallbacks(buf_request, buf_complete) != CUPTI_SUCCESS ||
	    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS ||
	    cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API) != CUPTI_SUCCESS)
		return -1;
	if (launches(50) < 0 || cudaDeviceSynchronize() != cudaSuccess)
		return -1;
	cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	cuptiEnableDomain(0, sub, CUPTI_CB_DOMAIN_RUNTIME_API);
	return 0;
}

/* The callbacks on again so that the next runtime call's EXIT detaches. */
static int detach(void)
{
	int dev;

	if (cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API) != CUPTI_SUCCESS)
		return -1;
	finalize_wanted = 1;
	cudaGetDevice(&dev);
	return finalize_wanted ? -1 : 0;
}

int main(int argc, char **argv)
{
	int n = 400, cycles = 300, control = 0, opt;
	struct paired pr = { 0 };

	while ((opt = getopt(argc, argv, "n:c:0")) != -1) {
		if (opt == 'n')
			n = atoi(optarg);
		else if (opt == 'c')
			cycles = atoi(optarg);
		else if (opt == '0')
			control = 1;
		else
			goto usage;
	}
	if (n <= 0 || cycles < 2)
		goto usage;
	for (int i = 0; i < 20; i++)
		if (chunk(n) < 0)
			goto failed;
	for (int k = 0; k < cycles; k++) {
		double idle, detached = 0;

		if ((k & 1) && (detached = chunk(n)) < 0)
			goto failed;
		if (!control && attach_record_idle() < 0)
			goto failed;
		if ((idle = chunk(n)) < 0)
			goto failed;
		if (!control && detach() < 0)
			goto failed;
		if (!(k & 1) && (detached = chunk(n)) < 0)
			goto failed;
		paired_add(&pr, idle, detached);
	}
	printf("{\"launches_per_chunk\": %d, \"cycles\": %d, \"control\": %d, "
	       "\"records\": %llu, \"idle_ns\": %.1f, \"detached_ns\": %.1f, "
	       "\"added_ns\": %.1f, \"added_ci95_ns\": %.1f}\n",
	       n, cycles, control, records, pr.sum_a / cycles, pr.sum_b / cycles,
	       paired_mean_diff(&pr), paired_ci95(&pr));
	return 0;
failed:
	fprintf(stderr, "cupti_detach: a CUDA or CUPTI call failed: %s\n",
		cudaGetErrorString(cudaGetLastError()));
	return 1;
usage:
	fprintf(stderr, "usage: cupti_detach [-n LAUNCHES_PER_CHUNK] [-c CYCLES] [-0]\n");
	return 2;
}
