/*
 * A stand-in for libcudart.so.13, built from test sources, so the shim's
 * CUDA interposition can be tested on machines without a GPU.
 *
 * It exports the real names with the real signatures: this file defines
 * the plain names, fake_ptsz.c the _ptsz/_ptds variants; each includes the
 * CUDA header in the mode that declares its names, so the compiler checks
 * every definition against the header.
 *
 * Behaviour, kept close to the real runtime where tests can observe it:
 *  - "device" memory of every kind is anonymous mmap, never malloc, so the
 *    runtime's own memory never shows up as heap calls in a trace;
 *  - memcpy and memset really copy and set bytes;
 *  - the current device is per thread (FAKE_CUDA_DEVICES devices, default 4);
 *  - an allocation larger than the fake device (64 GiB) fails with
 *    cudaErrorMemoryAllocation and sets the result to NULL;
 *  - launches only validate their arguments;
 *  - FAKE_CUDA_DELAY_NS=N makes every call take at least N nanoseconds, so a
 *    test can check that recorded durations are at least N;
 *  - FAKE_CUDA_DEVICE_BYTES=N: the device holds N bytes (device and managed
 *    blocks of the process, together): an allocation past that fails with
 *    cudaErrorMemoryAllocation, as a full GPU's does;
 *  - FAKE_GPU_KERNEL_NS=N makes the "GPU" asynchronous (below), every kernel
 *    running N ns unless fake_cuda_kernel_ns() gave its own;
 *  - like the driver at cuInit, the first call loads the library named by
 *    CUDA_INJECTION64_PATH and calls its InitializeInjection();
 *  - when the fake CUPTI (test/fake_cupti) is loaded, every call reaches it
 *    as CUPTI callbacks of the entry point's real callback id, and launches,
 *    copies, memsets and synchronizations as activity records spanning the
 *    call's delay (the "GPU" runs the work synchronously, a stream's one
 *    operation at a time: a call whose stream runs another thread's
 *    operation waits for it to end before its own starts).  Kernel names
 *    come from fake_cuda_register_kernel(); fake_cu_launch_kernel() is a
 *    driver-API launch (fake_gpu.h);
 *  - copies and memsets name the memory they touch as CUPTI does: host
 *    memory from cudaMallocHost/cudaHostAlloc is pinned, cudaMallocManaged's
 *    managed, any other host memory pageable.
 *
 * The asynchronous GPU (FAKE_GPU_KERNEL_NS set): each (device, stream) is a
 * queue.  A launch returns after its delay and its kernel runs on the
 * stream once the stream's earlier work is done; copies take 1 us plus
 * 0.1 ns a byte (10 GB/s), memsets the same.  What blocks the CPU blocks as
 * CUDA documents (its "API synchronization behavior" page): cudaMemcpy
 * waits for the device's earlier work and its own copy; cudaMemcpyAsync
 * with pageable host memory waits for its stream and its copy; a memset
 * of pinned or managed memory waits for its stream and runs at once;
 * cudaStreamSynchronize waits for its stream, cudaDeviceSynchronize for
 * every stream of the device.  Streams are independent (no legacy
 * default-stream barrier).  Activity records carry the times the work ran,
 * on CUPTI's clock (the subscriber's timestamp callback, whose rate the
 * fake measures against CLOCK_MONOTONIC).
 *
 * Exported functions never call each other (each one would be seen by the
 * shim as an extra call); they share static helpers instead.  Thread-safe.
 */
#include "fake_cudart.h"
#include "fake_gpu.h"

#include <cupti_activity.h>
#include <generated_cuda_runtime_api_meta.h>

#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "clock_ns.h"

#define TLS __thread __attribute__((tls_model("initial-exec")))

#define FAKE_DEVICE_BYTES ((size_t)64 << 30)
#define FAKE_PITCH_ALIGN 512u
#define FAKE_TABLE_SIZE 65536u /* live allocations, open addressing */

static long delay_ns;
static long gpu_kernel_ns = -1; /* FAKE_GPU_KERNEL_NS; -1: the synchronous GPU */
static uint64_t device_bytes;   /* FAKE_CUDA_DEVICE_BYTES; 0: FAKE_DEVICE_BYTES */
static uint64_t device_live;    /* bytes of live device and managed blocks */
static int ndevices = 4;
static TLS int cur_device;
static TLS cudaError_t last_error;

enum mem_kind { MEM_DEVICE, MEM_PINNED, MEM_MANAGED };

/* Live blocks: pointer -> mapped length and kind, so frees can be validated. */
static struct {
	uintptr_t ptr; /* 0 = empty, 1 = deleted */
	size_t len;
	enum mem_kind kind;
} table[FAKE_TABLE_SIZE];

/* Live pinned and managed blocks, for telling what memory a copy touches
 * (a pointer may point inside one). */
#define FAKE_HOST_BLOCKS 1024
static struct {
	uintptr_t lo, hi;
	enum mem_kind kind;
} host_blocks[FAKE_HOST_BLOCKS];
static unsigned nhost_blocks;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

__attribute__((constructor)) static void fake_init(void)
{
	const char *s = getenv("FAKE_CUDA_DELAY_NS");

	if (s)
		delay_ns = strtol(s, NULL, 10);
	s = getenv("FAKE_CUDA_DEVICES");
	if (s && atoi(s) > 0)
		ndevices = atoi(s);
	s = getenv("FAKE_GPU_KERNEL_NS");
	if (s && *s)
		gpu_kernel_ns = strtol(s, NULL, 10) > 0 ? strtol(s, NULL, 10) : 0;
	s = getenv("FAKE_CUDA_DEVICE_BYTES");
	if (s && *s)
		device_bytes = strtoull(s, NULL, 10);
}

/*
 * Every entry point runs between call_begin() and call_end(): the first
 * call of the process loads the profiler named by CUDA_INJECTION64_PATH
 * (as the driver does at cuInit), then the fake CUPTI, when one attached
 * itself, sees the call's API_ENTER and API_EXIT callbacks and, for work
 * the GPU would do (op), an activity record that spans the call's delay.
 */
enum gpu_mode {
	GPU_NONE,      /* no work for the asynchronous GPU */
	GPU_QUEUE,     /* runs after the stream's work; the call does not wait */
	GPU_BLOCK,     /* the same, and the call waits for it */
	GPU_BLOCK_DEV, /* runs after the device's work; the call waits for it */
	GPU_WAIT,      /* no work: the call waits for the stream */
	GPU_WAIT_DEV,  /* no work: the call waits for the device */
};

struct graph;

struct call {
	uint64_t t0;
	const struct fake_cupti_ops *cupti;
	struct fake_cupti_call api;
	enum gpu_mode gpu;  /* asynchronous GPU only */
	uint64_t gpu_ns;    /* the work's duration */
	const struct graph *graph; /* a graph launch: its kernels, op the first */
};

static const struct fake_cupti_ops *cupti_ops;
static int inject_state; /* 0 not yet, 1 running, 2 done */
static TLS int injecting;

API void fake_cudart_attach_cupti(const struct fake_cupti_ops *ops)
{
	__atomic_store_n(&cupti_ops, ops, __ATOMIC_RELEASE);
}

static void inject(void)
{
	int expect = 0;
	const char *path;

	if (__atomic_load_n(&inject_state, __ATOMIC_ACQUIRE) == 2 || injecting)
		return;
	if (!__atomic_compare_exchange_n(&inject_state, &expect, 1, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		while (__atomic_load_n(&inject_state, __ATOMIC_ACQUIRE) != 2)
			sched_yield();
		return;
	}
	path = getenv("CUDA_INJECTION64_PATH");
	if (path && *path) {
		void *h = dlopen(path, RTLD_NOW);
		int (*init)(void) = h ? (int (*)(void))dlsym(h, "InitializeInjection") : NULL;

		if (init) {
			injecting = 1;
			init();
			injecting = 0;
		}
	}
	__atomic_store_n(&inject_state, 2, __ATOMIC_RELEASE);
}

static void call_begin(struct call *c, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
		       const char *symbol, const void *params)
{
	inject();
	c->t0 = delay_ns > 0 || gpu_kernel_ns >= 0 ? clock_ns(CLOCK_MONOTONIC) : 0;
	c->gpu = GPU_NONE;
	c->gpu_ns = 0;
	c->graph = NULL;
	c->cupti = __atomic_load_n(&cupti_ops, __ATOMIC_ACQUIRE);
	c->api = (struct fake_cupti_call){ .domain = domain, .cbid = cbid, .symbol = symbol,
					   .params = params };
	if (c->cupti)
		c->cupti->api_enter(&c->api);
}

/* ---- the asynchronous GPU ----------------------------------------------- */

#define GPU_STREAMS 64
static struct {
	uint32_t device, stream;
	uint64_t free_at; /* CLOCK_MONOTONIC ns its queued work ends */
	/* synchronous GPU: held while the stream runs an operation */
	pthread_mutex_t running;
} gpu_streams[GPU_STREAMS];
static unsigned ngpu_streams;
static pthread_mutex_t gpu_lock = PTHREAD_MUTEX_INITIALIZER;

/* CUPTI's clock against CLOCK_MONOTONIC: its rate, from an anchor. */
static uint64_t anchor_mono, anchor_ts;
static double ts_rate;

static void sleep_until(uint64_t t)
{
	uint64_t now;

	while ((now = clock_ns(CLOCK_MONOTONIC)) < t) {
		struct timespec ts = { (time_t)((t - now) / 1000000000u),
				       (long)((t - now) % 1000000000u) };

		nanosleep(&ts, NULL);
	}
}

/* With gpu_lock held: the slot of (device, stream), made on first use
 * (the last slot is shared when they run out). */
static unsigned stream_slot(uint32_t device, uint32_t stream)
{
	unsigned i;

	for (i = 0; i < ngpu_streams; i++)
		if (gpu_streams[i].device == device && gpu_streams[i].stream == stream)
			return i;
	if (ngpu_streams == GPU_STREAMS)
		return GPU_STREAMS - 1;
	gpu_streams[ngpu_streams] = (__typeof__(gpu_streams[0])){
		device, stream, 0, PTHREAD_MUTEX_INITIALIZER };
	return ngpu_streams++;
}

/* With gpu_lock held: the queue of (device, stream). */
static uint64_t *stream_free_at(uint32_t device, uint32_t stream)
{
	return &gpu_streams[stream_slot(device, stream)].free_at;
}

/* The synchronous GPU runs a stream's operations one at a time, as a real
 * stream does: an operation's call waits for the one running on its
 * stream (another thread's) before its own starts, so two threads' work on
 * one stream never overlaps in CUPTI's records.  Returns the stream's
 * lock, held, or NULL for work that is no stream operation. */
static pthread_mutex_t *stream_run(const struct fake_gpu_op *op, uint32_t device)
{
	pthread_mutex_t *m;

	if (op->kind == FAKE_OP_SYNC)
		return NULL;
	pthread_mutex_lock(&gpu_lock);
	m = &gpu_streams[stream_slot(device, op->stream)].running;
	pthread_mutex_unlock(&gpu_lock);
	pthread_mutex_lock(m);
	return m;
}

/* With gpu_lock held: when the device's queued work ends. */
static uint64_t device_free_at(uint32_t device)
{
	uint64_t t = 0;

	for (unsigned i = 0; i < ngpu_streams; i++)
		if (gpu_streams[i].device == device && gpu_streams[i].free_at > t)
			t = gpu_streams[i].free_at;
	return t;
}

/* Runs the call's GPU work (c->gpu) on the device's queues: sets op's
 * start and end (CLOCK_MONOTONIC ns) and waits when the call blocks. */
static void gpu_run(struct call *c, struct fake_gpu_op *op, uint32_t device)
{
	uint64_t now = clock_ns(CLOCK_MONOTONIC), start, end, *q;

	pthread_mutex_lock(&gpu_lock);
	q = c->gpu == GPU_WAIT_DEV ? NULL : stream_free_at(device, op ? op->stream : 7);
	switch (c->gpu) {
	case GPU_WAIT:
	case GPU_WAIT_DEV:
		end = q ? *q : device_free_at(device);
		pthread_mutex_unlock(&gpu_lock);
		sleep_until(end);
		if (op) {
			op->start = c->t0;
			op->end = clock_ns(CLOCK_MONOTONIC);
		}
		return;
	case GPU_BLOCK_DEV:
		start = device_free_at(device);
		break;
	default:
		start = *q;
		break;
	}
	if (start < now)
		start = now;
	end = start + c->gpu_ns;
	if (q)
		*q = end;
	pthread_mutex_unlock(&gpu_lock);
	if (op) {
		op->start = start;
		op->end = end;
	}
	if (c->gpu != GPU_QUEUE)
		sleep_until(end);
}

/* Two CLOCK_MONOTONIC instants on CUPTI's clock.  The rate is measured once
 * over 0.5 ms (the first record's call takes that much longer), then from
 * the anchor as time passes; activity kinds are on only while the
 * subscriber's clock is registered, so it is one clock. */
static void to_cupti(const struct fake_cupti_ops *cupti, uint64_t *t0, uint64_t *t1)
{
	uint64_t m, ts;
	double rate;

	pthread_mutex_lock(&gpu_lock);
	m = clock_ns(CLOCK_MONOTONIC);
	ts = cupti->timestamp();
	if (!anchor_mono) {
		uint64_t m2, ts2;

		sleep_until(m + 500000);
		m2 = clock_ns(CLOCK_MONOTONIC);
		ts2 = cupti->timestamp();
		anchor_mono = m;
		anchor_ts = ts;
		ts_rate = (double)(ts2 - ts) / (double)(m2 - m);
		m = m2;
		ts = ts2;
	} else if (m - anchor_mono > 50000000u && ts > anchor_ts) {
		ts_rate = (double)(ts - anchor_ts) / (double)(m - anchor_mono);
	}
	rate = ts_rate;
	pthread_mutex_unlock(&gpu_lock);
	/* one reading for both: the order of start and end is kept */
	*t0 = (uint64_t)((double)ts + ((double)*t0 - (double)m) * rate);
	*t1 = (uint64_t)((double)ts + ((double)*t1 - (double)m) * rate);
}

static void graph_record(const struct call *c, struct fake_gpu_op *op);

/* Ends the call: waits out the delay (the GPU work, when op is given, runs
 * during it; on the asynchronous GPU it runs on its queue after the
 * delay), records op if the call succeeded, returns err. */
static int call_end(struct call *c, int err, struct fake_gpu_op *op)
{
	int async = gpu_kernel_ns >= 0;
	pthread_mutex_t *running = op && c->cupti && !async && err == 0
					   ? stream_run(op, (uint32_t)cur_device) : NULL;
	uint64_t start = op && c->cupti && !async ? c->cupti->timestamp() : 0;

	if (op && c->cupti)
		c->cupti->work_begins(op);

	if (async && delay_ns > 0) {
		sleep_until(c->t0 + (uint64_t)delay_ns);
	} else if (delay_ns > 0) {
		/* GPU work lasts the whole delay, however long the callbacks took. */
		uint64_t until = (op ? clock_ns(CLOCK_MONOTONIC) : c->t0) + (uint64_t)delay_ns;
		uint64_t t;

		while ((t = clock_ns(CLOCK_MONOTONIC)) < until) {
			struct timespec ts = { 0, (long)(until - t) };

			nanosleep(&ts, NULL);
		}
	}
	if (async && c->gpu != GPU_NONE && err == 0)
		gpu_run(c, op, (uint32_t)cur_device);
	if (op && c->cupti && err == 0) {
		if (async && c->gpu != GPU_NONE) {
			to_cupti(c->cupti, &op->start, &op->end);
		} else {
			op->start = start;
			op->end = c->cupti->timestamp();
		}
		if (running)
			pthread_mutex_unlock(running);
		op->correlation = c->api.correlation;
		op->device = (uint32_t)cur_device;
		op->context = (uint32_t)cur_device + 1;
		if (c->graph)
			graph_record(c, op);
		else
			c->cupti->record(op);
	}
	if (c->cupti) {
		c->api.ret = err;
		c->cupti->api_exit(&c->api);
	}
	if (err != 0)
		last_error = (cudaError_t)err;
	return err;
}

#define BEGIN(cbid) struct call c_; call_begin(&c_, CUPTI_CB_DOMAIN_RUNTIME_API, (cbid), NULL, NULL)
#define DONE(err) ((cudaError_t)call_end(&c_, (err), NULL))
#define DONE_OP(err, op) ((cudaError_t)call_end(&c_, (err), (op)))

/* CUPTI's stream id for a stream: the fake's handles are small integers;
 * the default stream is 7, as on a real device. */
static uint32_t stream_id(cudaStream_t s)
{
	return s ? (uint32_t)(uintptr_t)s : 7;
}

static size_t slot_of(uintptr_t p)
{
	return (size_t)((p >> 12) * 0x9e3779b97f4a7c15ull) & (FAKE_TABLE_SIZE - 1);
}

/* With table_lock held. */
static void host_block_add(uintptr_t p, size_t len, enum mem_kind kind)
{
	if (kind != MEM_DEVICE && nhost_blocks < FAKE_HOST_BLOCKS)
		host_blocks[nhost_blocks++] = (__typeof__(host_blocks[0])){ p, p + len, kind };
}

static void host_block_remove(uintptr_t p)
{
	for (unsigned i = 0; i < nhost_blocks; i++)
		if (host_blocks[i].lo == p) {
			host_blocks[i] = host_blocks[--nhost_blocks];
			return;
		}
}

/* Whether p (host memory) lies in a pinned or managed block: its kind,
 * else -1 (pageable). */
static int host_kind(const void *p)
{
	uintptr_t a = (uintptr_t)p;
	int kind = -1;

	pthread_mutex_lock(&table_lock);
	for (unsigned i = 0; i < nhost_blocks; i++)
		if (a >= host_blocks[i].lo && a < host_blocks[i].hi) {
			kind = (int)host_blocks[i].kind;
			break;
		}
	pthread_mutex_unlock(&table_lock);
	return kind;
}

static int table_put(uintptr_t p, size_t len, enum mem_kind kind)
{
	size_t i = slot_of(p);

	pthread_mutex_lock(&table_lock);
	for (size_t n = 0; n < FAKE_TABLE_SIZE; n++, i = (i + 1) & (FAKE_TABLE_SIZE - 1)) {
		if (table[i].ptr <= 1) {
			table[i].ptr = p;
			table[i].len = len;
			table[i].kind = kind;
			host_block_add(p, len, kind);
			pthread_mutex_unlock(&table_lock);
			return 0;
		}
	}
	pthread_mutex_unlock(&table_lock);
	return -ENOMEM;
}

/* Removes p; returns its length (and *kind), 0 when p is not a live block. */
static size_t table_take(uintptr_t p, enum mem_kind *kind)
{
	size_t i = slot_of(p), len = 0;

	pthread_mutex_lock(&table_lock);
	for (size_t n = 0; n < FAKE_TABLE_SIZE && table[i].ptr != 0;
	     n++, i = (i + 1) & (FAKE_TABLE_SIZE - 1)) {
		if (table[i].ptr == p) {
			len = table[i].len;
			*kind = table[i].kind;
			table[i].ptr = 1;
			if (*kind != MEM_DEVICE)
				host_block_remove(p);
			break;
		}
	}
	pthread_mutex_unlock(&table_lock);
	return len;
}

/* Device and managed blocks count against the device's bytes. */
static int reserve(size_t size, enum mem_kind kind)
{
	uint64_t cap = device_bytes ? device_bytes : FAKE_DEVICE_BYTES;
	uint64_t cur = __atomic_load_n(&device_live, __ATOMIC_RELAXED);

	if (kind == MEM_PINNED)
		return 0;
	do {
		if (size > cap || cur > cap - size)
			return -ENOMEM;
	} while (!__atomic_compare_exchange_n(&device_live, &cur, cur + size, 0, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	return 0;
}

static void unreserve(size_t size, enum mem_kind kind)
{
	if (kind != MEM_PINNED)
		__atomic_sub_fetch(&device_live, size, __ATOMIC_RELAXED);
}

static cudaError_t fake_alloc_kind(void **out, size_t size, enum mem_kind kind)
{
	void *p;

	if (!out)
		return cudaErrorInvalidValue;
	*out = NULL;
	if (size == 0)
		return cudaSuccess;
	if (size > FAKE_DEVICE_BYTES || reserve(size, kind) < 0)
		return cudaErrorMemoryAllocation;
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		unreserve(size, kind);
		return cudaErrorMemoryAllocation;
	}
	if (table_put((uintptr_t)p, size, kind) < 0) {
		munmap(p, size);
		unreserve(size, kind);
		return cudaErrorMemoryAllocation;
	}
	*out = p;
	return cudaSuccess;
}

static cudaError_t fake_alloc(void **out, size_t size)
{
	return fake_alloc_kind(out, size, MEM_DEVICE);
}

static cudaError_t fake_free(void *p, cudaError_t invalid)
{
	enum mem_kind kind = MEM_DEVICE;
	size_t len;

	if (!p)
		return cudaSuccess;
	len = table_take((uintptr_t)p, &kind);
	if (!len)
		return invalid;
	munmap(p, len);
	unreserve(len, kind);
	return cudaSuccess;
}

static cudaError_t fake_copy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	if ((unsigned)kind > cudaMemcpyDefault)
		return cudaErrorInvalidMemcpyDirection;
	if (count && (!dst || !src))
		return cudaErrorInvalidValue;
	if (count)
		memmove(dst, src, count);
	return cudaSuccess;
}

static cudaError_t fake_set(void *p, int value, size_t count)
{
	if (count && !p)
		return cudaErrorInvalidValue;
	if (count)
		memset(p, value, count);
	return cudaSuccess;
}

static cudaError_t check_launch(const void *func, dim3 grid, dim3 block)
{
	if (!func)
		return cudaErrorInvalidDeviceFunction;
	if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z ||
	    (uint64_t)block.x * block.y * block.z > 1024 || block.z > 64)
		return cudaErrorInvalidConfiguration;
	return cudaSuccess;
}

static cudaError_t check_config(const cudaLaunchConfig_t *config, const void *func)
{
	if (!config)
		return cudaErrorInvalidValue;
	return check_launch(func, config->gridDim, config->blockDim);
}

/* ---- memory ---------------------------------------------------------- */

API cudaError_t cudaMalloc(void **devPtr, size_t size)
{
	BEGIN(RT(cudaMalloc_v3020));
	return DONE(fake_alloc(devPtr, size));
}

API cudaError_t cudaFree(void *devPtr)
{
	BEGIN(RT(cudaFree_v3020));
	return DONE(fake_free(devPtr, cudaErrorInvalidDevicePointer));
}

API cudaError_t cudaMallocHost(void **ptr, size_t size)
{
	BEGIN(RT(cudaMallocHost_v3020));
	return DONE(fake_alloc_kind(ptr, size, MEM_PINNED));
}

API cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
	BEGIN(RT(cudaHostAlloc_v3020));
	if (flags & ~0xfu)
		return DONE(cudaErrorInvalidValue);
	return DONE(fake_alloc_kind(pHost, size, MEM_PINNED));
}

API cudaError_t cudaFreeHost(void *ptr)
{
	BEGIN(RT(cudaFreeHost_v3020));
	return DONE(fake_free(ptr, cudaErrorInvalidValue));
}

API cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
	BEGIN(RT(cudaMallocManaged_v6000));
	if (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost)
		return DONE(cudaErrorInvalidValue);
	return DONE(fake_alloc_kind(devPtr, size, MEM_MANAGED));
}

API cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
	size_t p;
	cudaError_t err;

	BEGIN(RT(cudaMallocPitch_v3020));
	if (!pitch)
		return DONE(cudaErrorInvalidValue);
	p = (width + FAKE_PITCH_ALIGN - 1) / FAKE_PITCH_ALIGN * FAKE_PITCH_ALIGN;
	if (height && p > FAKE_DEVICE_BYTES / height)
		err = fake_alloc(devPtr, FAKE_DEVICE_BYTES + 1);
	else
		err = fake_alloc(devPtr, p * height);
	*pitch = err == cudaSuccess ? p : 0;
	return DONE(err);
}

cudaError_t fake_malloc_async(CUpti_CallbackId cbid, void **devPtr, size_t size)
{
	BEGIN(cbid);
	return DONE(fake_alloc(devPtr, size));
}

cudaError_t fake_free_async(CUpti_CallbackId cbid, void *devPtr)
{
	BEGIN(cbid);
	return DONE(fake_free(devPtr, cudaErrorInvalidValue));
}

cudaError_t fake_malloc_from_pool(CUpti_CallbackId cbid, void **ptr, size_t size,
				  cudaMemPool_t pool)
{
	BEGIN(cbid);
	if (!pool)
		return DONE(cudaErrorInvalidValue);
	return DONE(fake_alloc(ptr, size));
}

API cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t s)
{
	(void)s;
	return fake_malloc_async(RT(cudaMallocAsync_v11020), devPtr, size);
}

API cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t s)
{
	(void)s;
	return fake_free_async(RT(cudaFreeAsync_v11020), devPtr);
}

API cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t pool, cudaStream_t s)
{
	(void)s;
	return fake_malloc_from_pool(RT(cudaMallocFromPoolAsync_v11020), ptr, size, pool);
}

/* ---- copies and sets ------------------------------------------------- */

/* CUPTI's memory kind of host memory at p. */
static uint8_t host_mem_kind(const void *p)
{
	int k = host_kind(p);

	return k == MEM_PINNED ? CUPTI_ACTIVITY_MEMORY_KIND_PINNED :
	       k == MEM_MANAGED ? CUPTI_ACTIVITY_MEMORY_KIND_MANAGED :
				  CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
}

/* The asynchronous GPU's time for n bytes: 1 us + 0.1 ns a byte. */
static uint64_t copy_ns(size_t n)
{
	return 1000u + (uint64_t)n / 10u;
}

/* The activity record of a copy: CUPTI's kind and memory kinds. */
static void copy_op(struct fake_gpu_op *op, const void *dst, const void *src,
		    enum cudaMemcpyKind kind, size_t count, cudaStream_t s, int async)
{
	static const uint8_t ck[] = {
		[cudaMemcpyHostToHost] = CUPTI_ACTIVITY_MEMCPY_KIND_HTOH,
		[cudaMemcpyHostToDevice] = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD,
		[cudaMemcpyDeviceToHost] = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH,
		[cudaMemcpyDeviceToDevice] = CUPTI_ACTIVITY_MEMCPY_KIND_DTOD,
		[cudaMemcpyDefault] = CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN,
	};
	int src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
	int dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;

	*op = (struct fake_gpu_op){
		.kind = FAKE_OP_MEMCPY, .stream = stream_id(s), .bytes = count, .async = (uint8_t)async,
		.copy_kind = (unsigned)kind <= cudaMemcpyDefault ? ck[kind] : 0,
		.src_kind = src_dev ? CUPTI_ACTIVITY_MEMORY_KIND_DEVICE : host_mem_kind(src),
		.dst_kind = dst_dev ? CUPTI_ACTIVITY_MEMORY_KIND_DEVICE : host_mem_kind(dst),
	};
}

/* How the asynchronous GPU runs a copy (see the top of the file). */
static void copy_gpu(struct call *c, const struct fake_gpu_op *op, size_t count, int async)
{
	int pageable = op->src_kind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE ||
		       op->dst_kind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;

	c->gpu_ns = copy_ns(count);
	c->gpu = !async ? GPU_BLOCK_DEV : pageable ? GPU_BLOCK : GPU_QUEUE;
}

cudaError_t fake_memcpy_any(CUpti_CallbackId cbid, void *dst, const void *src, size_t count,
			    enum cudaMemcpyKind kind, cudaStream_t s, int async)
{
	struct fake_gpu_op op;

	BEGIN(cbid);
	copy_op(&op, dst, src, kind, count, s, async);
	copy_gpu(&c_, &op, count, async);
	return DONE_OP(fake_copy(dst, src, count, kind), &op);
}

API cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	return fake_memcpy_any(RT(cudaMemcpy_v3020), dst, src, count, kind, NULL, 0);
}

API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
				cudaStream_t s)
{
	return fake_memcpy_any(RT(cudaMemcpyAsync_v3020), dst, src, count, kind, s, 1);
}

API cudaError_t cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice,
				    size_t count, cudaStream_t s)
{
	struct fake_gpu_op op;

	BEGIN(RT(cudaMemcpyPeerAsync_v4000));
	copy_op(&op, dst, src, cudaMemcpyDeviceToDevice, count, s, 1);
	op.copy_kind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
	copy_gpu(&c_, &op, count, 1);
	if (dstDevice < 0 || dstDevice >= ndevices || srcDevice < 0 || srcDevice >= ndevices)
		return DONE(cudaErrorInvalidDevice);
	return DONE_OP(fake_copy(dst, src, count, cudaMemcpyDeviceToDevice), &op);
}

cudaError_t fake_memset_any(CUpti_CallbackId cbid, void *p, int value, size_t count,
			    cudaStream_t s, int async)
{
	int hk = host_kind(p);
	struct fake_gpu_op op = {
		.kind = FAKE_OP_MEMSET, .stream = stream_id(s), .bytes = count,
		.value = (uint32_t)value,
		.mem_kind = hk == MEM_PINNED ? CUPTI_ACTIVITY_MEMORY_KIND_PINNED :
			    hk == MEM_MANAGED ? CUPTI_ACTIVITY_MEMORY_KIND_MANAGED :
						CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
		.async = (uint8_t)async,
	};

	BEGIN(cbid);
	/* A memset of pinned or managed memory is synchronous. */
	c_.gpu = hk >= 0 ? GPU_BLOCK : GPU_QUEUE;
	c_.gpu_ns = copy_ns(count);
	return DONE_OP(fake_set(p, value, count), &op);
}

API cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
	return fake_memset_any(RT(cudaMemset_v3020), devPtr, value, count, NULL, 0);
}

API cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t s)
{
	return fake_memset_any(RT(cudaMemsetAsync_v3020), devPtr, value, count, s, 1);
}

/* ---- launches -------------------------------------------------------- */

/* Kernel names the workload registered for its fake kernel functions. */
#define MAX_KERNELS 64
static struct {
	const void *func;
	const char *name;
	uint64_t ns; /* the asynchronous GPU's time; 0: FAKE_GPU_KERNEL_NS */
} kernels[MAX_KERNELS];
static unsigned nkernels;
static pthread_mutex_t kernels_lock = PTHREAD_MUTEX_INITIALIZER;

API int fake_cuda_register_kernel(const void *func, const char *name)
{
	int err = 0;

	pthread_mutex_lock(&kernels_lock);
	if (nkernels == MAX_KERNELS) {
		err = -ENOSPC;
	} else {
		kernels[nkernels].func = func;
		kernels[nkernels].name = name;
		__atomic_store_n(&nkernels, nkernels + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&kernels_lock);
	return err;
}

API int fake_cuda_kernel_ns(const void *func, uint64_t ns)
{
	unsigned n = __atomic_load_n(&nkernels, __ATOMIC_ACQUIRE);

	for (unsigned i = n; i-- > 0;)
		if (kernels[i].func == func) {
			__atomic_store_n(&kernels[i].ns, ns, __ATOMIC_RELAXED);
			return 0;
		}
	return -ENOENT;
}

/* The asynchronous GPU's time for a kernel of func. */
static uint64_t kernel_ns(const void *func)
{
	unsigned n = __atomic_load_n(&nkernels, __ATOMIC_ACQUIRE);

	for (unsigned i = n; i-- > 0;)
		if (kernels[i].func == func && __atomic_load_n(&kernels[i].ns, __ATOMIC_RELAXED))
			return __atomic_load_n(&kernels[i].ns, __ATOMIC_RELAXED);
	return gpu_kernel_ns > 0 ? (uint64_t)gpu_kernel_ns : 0;
}

static const char *kernel_name(const void *func)
{
	unsigned n = __atomic_load_n(&nkernels, __ATOMIC_ACQUIRE);

	for (unsigned i = n; i-- > 0;)
		if (kernels[i].func == func)
			return kernels[i].name;
	return "fake_kernel";
}

static void kernel_op(struct fake_gpu_op *op, const void *func, dim3 grid, dim3 block,
		      size_t smem, cudaStream_t s)
{
	*op = (struct fake_gpu_op){
		.kind = FAKE_OP_KERNEL, .stream = stream_id(s), .name = kernel_name(func),
		.grid = { (int32_t)grid.x, (int32_t)grid.y, (int32_t)grid.z },
		.block = { (int32_t)block.x, (int32_t)block.y, (int32_t)block.z },
		.dynamic_smem = (int32_t)smem, .registers = 32,
	};
}

cudaError_t fake_launch_any(CUpti_CallbackId cbid, const void *func, dim3 grid, dim3 block,
			    void **args, size_t smem, cudaStream_t s)
{
	/* The layout CUPTI passes for every <<<>>>-style launch. */
	cudaLaunchKernel_v7000_params params = { func, grid, block, args, smem, s };
	struct fake_gpu_op op;
	struct call c_;

	call_begin(&c_, CUPTI_CB_DOMAIN_RUNTIME_API, cbid, kernel_name(func), &params);
	kernel_op(&op, func, grid, block, smem, s);
	c_.gpu = GPU_QUEUE;
	c_.gpu_ns = kernel_ns(func);
	return DONE_OP(check_launch(func, grid, block), &op);
}

cudaError_t fake_launch_config(CUpti_CallbackId cbid, const cudaLaunchConfig_t *config,
			       const void *func, void **args)
{
	cudaLaunchKernelExC_v11060_params params = { config, func, args };
	struct fake_gpu_op op;
	struct call c_;

	call_begin(&c_, CUPTI_CB_DOMAIN_RUNTIME_API, cbid, kernel_name(func), &params);
	if (!config)
		return DONE(check_config(config, func));
	kernel_op(&op, func, config->gridDim, config->blockDim, config->dynamicSmemBytes,
		  config->stream);
	c_.gpu = GPU_QUEUE;
	c_.gpu_ns = kernel_ns(func);
	return DONE_OP(check_config(config, func), &op);
}

/*
 * CUDA graphs.  A graph exec the workload defined with fake_cuda_graph()
 * runs its kernels, one after another on the launch's stream, as one unit
 * of work of the cudaGraphLaunch call: CUPTI gives every kernel of a graph
 * launch that call's correlation id, the graph's id and the node's id
 * (CUpti_ActivityKernel's graphId, graphNodeId).  An exec never defined
 * runs nothing (as before graphs were modelled).
 */
#define MAX_GRAPHS 16
#define MAX_GRAPH_NODES 512
struct graph {
	cudaGraphExec_t exec;
	uint32_t id;
	unsigned n;
	const void *funcs[MAX_GRAPH_NODES];
};
static struct graph graphs[MAX_GRAPHS];
static unsigned ngraphs;

API int fake_cuda_graph(cudaGraphExec_t exec, const void *const *funcs, unsigned n)
{
	int err = 0;

	if (!exec || !n || n > MAX_GRAPH_NODES)
		return -EINVAL;
	pthread_mutex_lock(&kernels_lock);
	if (ngraphs == MAX_GRAPHS) {
		err = -ENOSPC;
	} else {
		struct graph *g = &graphs[ngraphs];

		g->exec = exec;
		g->id = 100 + ngraphs;
		g->n = n;
		memcpy(g->funcs, funcs, n * sizeof(*funcs));
		__atomic_store_n(&ngraphs, ngraphs + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&kernels_lock);
	return err;
}

static const struct graph *graph_of(cudaGraphExec_t exec)
{
	unsigned n = __atomic_load_n(&ngraphs, __ATOMIC_ACQUIRE);

	for (unsigned i = n; i-- > 0;)
		if (graphs[i].exec == exec)
			return &graphs[i];
	return NULL;
}

/* The graph's kernels as records: op spans the whole launch's work, which
 * is shared out by each kernel's time (evenly where none is set). */
static void graph_record(const struct call *c, struct fake_gpu_op *op)
{
	const struct graph *g = c->graph;
	uint64_t total = 0, at = op->start, span = op->end - op->start, done = 0;

	for (unsigned i = 0; i < g->n; i++)
		total += kernel_ns(g->funcs[i]) ? kernel_ns(g->funcs[i]) : 1;
	for (unsigned i = 0; i < g->n; i++) {
		uint64_t ns = kernel_ns(g->funcs[i]) ? kernel_ns(g->funcs[i]) : 1;
		struct fake_gpu_op k = *op;

		done += ns;
		k.name = kernel_name(g->funcs[i]);
		k.start = at;
		k.end = op->start + (uint64_t)((double)span * (double)done / (double)total);
		k.graph_id = g->id;
		k.graph_node = ((uint64_t)g->id << 32) | (i + 1);
		at = k.end;
		c->cupti->record(&k);
	}
}

/* A graph launch through the runtime or the driver: 0 or 1 (invalid). */
static int graph_launch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, cudaGraphExec_t exec,
			cudaStream_t s)
{
	const struct graph *g = exec ? graph_of(exec) : NULL;
	struct fake_gpu_op op;
	struct call c_;

	call_begin(&c_, domain, cbid, NULL, NULL);
	if (!g)
		return call_end(&c_, exec ? 0 : 1, NULL);
	/* a grid no plain launch of the tests uses: their grid_x numbers them */
	kernel_op(&op, g->funcs[0], (dim3){ 1u << 20, 1, 1 }, (dim3){ 32, 1, 1 }, 0, s);
	c_.graph = g;
	c_.gpu = GPU_QUEUE;
	for (unsigned i = 0; i < g->n; i++)
		c_.gpu_ns += kernel_ns(g->funcs[i]);
	return call_end(&c_, 0, &op);
}

cudaError_t fake_graph_launch(CUpti_CallbackId cbid, cudaGraphExec_t exec, cudaStream_t s)
{
	return graph_launch(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, exec, s) ? cudaErrorInvalidValue
									 : cudaSuccess;
}

/* cuGraphLaunch, as JAX and XLA call it (the driver API, no runtime call). */
API CUresult fake_cu_graph_launch(CUgraphExec exec, CUstream s)
{
	return graph_launch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
			    (cudaGraphExec_t)exec, (cudaStream_t)s) ? CUDA_ERROR_INVALID_VALUE
								: CUDA_SUCCESS;
}

API cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
				 size_t sharedMem, cudaStream_t s)
{
	return fake_launch_any(RT(cudaLaunchKernel_v7000), func, gridDim, blockDim, args,
			       sharedMem, s);
}

API cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
				   void **args, size_t sharedMem, cudaStream_t s)
{
	return fake_launch_any(RT(__cudaLaunchKernel_v13000), kernel, gridDim, blockDim, args,
			       sharedMem, s);
}

API cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
					void **args, size_t sharedMem, cudaStream_t s)
{
	return fake_launch_any(RT(__cudaLaunchKernel_ptsz_v13000), kernel, gridDim, blockDim,
			       args, sharedMem, s);
}

API cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args)
{
	return fake_launch_config(RT(cudaLaunchKernelExC_v11060), config, func, args);
}

API cudaError_t cudaLaunchCooperativeKernel(const void *func, dim3 gridDim, dim3 blockDim,
					    void **args, size_t sharedMem, cudaStream_t s)
{
	return fake_launch_any(RT(cudaLaunchCooperativeKernel_v9000), func, gridDim, blockDim,
			       args, sharedMem, s);
}

API cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t s)
{
	return fake_graph_launch(RT(cudaGraphLaunch_v10000), graphExec, s);
}

/*
 * A launch through the driver API, as cuBLAS, cuDNN and Triton make them:
 * cuLaunchKernel's signature and CUPTI callback (driver domain), under a
 * fake-only name (the fake has no libcuda; the shim does not interpose
 * the driver).  f is a function registered with fake_cuda_register_kernel.
 */
API CUresult fake_cu_launch_kernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
				   unsigned int gridDimZ, unsigned int blockDimX,
				   unsigned int blockDimY, unsigned int blockDimZ,
				   unsigned int sharedMemBytes, CUstream hStream,
				   void **kernelParams, void **extra)
{
	/* cuLaunchKernel_params of generated_cuda_meta.h (which does not build
	 * outside NVIDIA's tree): the arguments in order. */
	struct {
		CUfunction f;
		unsigned int gx, gy, gz, bx, by, bz, smem;
		CUstream stream;
		void **params, **extra;
	} params = { f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
					 blockDimZ, sharedMemBytes, hStream, kernelParams, extra };
	dim3 grid = { gridDimX, gridDimY, gridDimZ }, block = { blockDimX, blockDimY, blockDimZ };
	struct fake_gpu_op op;
	struct call c;

	call_begin(&c, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
		   kernel_name(f), &params);
	kernel_op(&op, f, grid, block, sharedMemBytes, (cudaStream_t)hStream);
	c.gpu = GPU_QUEUE;
	c.gpu_ns = kernel_ns(f);
	return check_launch(f, grid, block) == cudaSuccess ?
		       (CUresult)call_end(&c, CUDA_SUCCESS, &op) :
		       (CUresult)call_end(&c, CUDA_ERROR_INVALID_VALUE, NULL);
}

/* ---- synchronization ------------------------------------------------- */

static struct fake_gpu_op sync_op(CUpti_ActivitySynchronizationType type, uint32_t stream,
				  uint32_t event)
{
	return (struct fake_gpu_op){ .kind = FAKE_OP_SYNC, .sync_type = type, .stream = stream,
				     .event = event };
}

cudaError_t fake_stream_sync(CUpti_CallbackId cbid, cudaStream_t s)
{
	struct fake_gpu_op op = sync_op(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE,
					stream_id(s), CUPTI_SYNCHRONIZATION_INVALID_VALUE);

	BEGIN(cbid);
	c_.gpu = GPU_WAIT;
	return DONE_OP(cudaSuccess, &op);
}

cudaError_t fake_wait_event(CUpti_CallbackId cbid, cudaStream_t s, cudaEvent_t event,
			    unsigned int flags)
{
	struct fake_gpu_op op = sync_op(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT,
					stream_id(s), (uint32_t)(uintptr_t)event);

	BEGIN(cbid);
	return DONE_OP(!event || (flags & ~0x1u) ? cudaErrorInvalidResourceHandle : cudaSuccess,
		       &op);
}

API cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
	return fake_stream_sync(RT(cudaStreamSynchronize_v3020), s);
}

API cudaError_t cudaDeviceSynchronize(void)
{
	struct fake_gpu_op op = sync_op(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE,
					CUPTI_SYNCHRONIZATION_INVALID_VALUE,
					CUPTI_SYNCHRONIZATION_INVALID_VALUE);

	BEGIN(RT(cudaDeviceSynchronize_v3020));
	c_.gpu = GPU_WAIT_DEV;
	return DONE_OP(cudaSuccess, &op);
}

API cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
	struct fake_gpu_op op = sync_op(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE,
					CUPTI_SYNCHRONIZATION_INVALID_VALUE,
					(uint32_t)(uintptr_t)event);

	BEGIN(RT(cudaEventSynchronize_v3020));
	return DONE_OP(event ? cudaSuccess : cudaErrorInvalidResourceHandle, &op);
}

API cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t event, unsigned int flags)
{
	return fake_wait_event(RT(cudaStreamWaitEvent_v3020), s, event, flags);
}

/* ---- device and errors ----------------------------------------------- */

API cudaError_t cudaGetDevice(int *device)
{
	BEGIN(RT(cudaGetDevice_v3020));
	if (!device)
		return DONE(cudaErrorInvalidValue);
	*device = cur_device;
	return DONE(cudaSuccess);
}

API cudaError_t cudaSetDevice(int device)
{
	BEGIN(RT(cudaSetDevice_v3020));
	if (device < 0 || device >= ndevices)
		return DONE(cudaErrorInvalidDevice);
	cur_device = device;
	return DONE(cudaSuccess);
}

API cudaError_t cudaGetLastError(void)
{
	cudaError_t err = last_error;

	last_error = cudaSuccess;
	return err;
}

API const char *cudaGetErrorString(cudaError_t error)
{
	switch (error) {
	case cudaSuccess: return "no error";
	case cudaErrorInvalidValue: return "invalid argument";
	case cudaErrorMemoryAllocation: return "out of memory";
	case cudaErrorInvalidConfiguration: return "invalid configuration argument";
	case cudaErrorInvalidDevicePointer: return "invalid device pointer";
	case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
	case cudaErrorInvalidDeviceFunction: return "invalid device function";
	case cudaErrorInvalidDevice: return "invalid device ordinal";
	case cudaErrorInvalidResourceHandle: return "invalid resource handle";
	default: return "unrecognized error code";
	}
}
