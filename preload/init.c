/*
 * Process lifecycle: the constructor reads the SHIMMER_* environment,
 * connects, builds the region and sends HELLO; fork handlers give a child
 * its own region and connection; the destructor says BYE.
 *
 * Environment (read with getenv; nothing here goes through stdio):
 *   SHIMMER_DISABLE=1        pure pass-through
 *   SHIMMER_SOCKET           collector socket (/run/shimmer/shimmer.sock)
 *   SHIMMER_MALLOC           sample (default) | all | off
 *   SHIMMER_SAMPLE_BYTES     mean bytes between heap samples (524288)
 *   SHIMMER_RING_KB          ring per thread, KiB, power of two (256)
 *   SHIMMER_MAX_THREADS      slots (256)
 *   SHIMMER_LOSSLESS=1       wait for room instead of dropping
 *   SHIMMER_OFFCPU=1         ask the collector for off-CPU time (eBPF)
 *   SHIMMER_DEBUG=1          debug lines on stderr
 *   SHIMMER_CUPTI=0          no GPU activity (CUPTI); API-level hooks stay
 *   SHIMMER_GPU              sample (default) | all: GPU activity only inside
 *                            sampling windows, or all of it
 *   SHIMMER_GPU_WINDOW_MS    sampling window (20)
 *   SHIMMER_GPU_PERIOD_MS    one window in every period (2000)
 *   SHIMMER_GPU_SYNC=1       GPU synchronisation records too
 *   SHIMMER_NVTX=0           no NVTX ranges
 *   SHIMMER_STACKS           on (default) | off: call stacks of CUDA
 *                            allocations and of shipped heap allocations
 *   SHIMMER_STACK_DEPTH      frames per stack (32, at most SHM_STACK_MAX)
 *
 * When tracing starts, CUDA_INJECTION64_PATH and NVTX_INJECTION64_PATH are
 * pointed at the shim unless already set, so CUDA and NVTX call us when
 * they start (cupti.c, nvtx.c), in this process and in its children.
 *
 * Any failure leaves tracing off and every hook a pass-through; only an
 * unreachable collector is reported, with one line on stderr.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api.h"
#include "clock.h"
#include "conn.h"
#include "cupti.h"
#include "heap.h"
#include "intern.h"
#include "modules.h"
#include "nvtx.h"
#include "real.h"
#include "shim.h"
#include "stack.h"

#define DEFAULT_SOCKET "/run/shimmer/shimmer.sock"
#define DEFAULT_SAMPLE_BYTES 524288u
#define MAX_SAMPLE_BYTES (1ull << 40)
#define DEFAULT_RING_KB 256u
#define DEFAULT_SLOTS 256u
#define DEFAULT_STACK_DEPTH 32u

struct shim shim = { .sock = -1 };

static int clock_kind;

/* One line on stderr: prefix, the formatted text, a newline.  A stack
 * buffer and one write(2): no stdio, no malloc inside the host. */
static void say(const char *prefix, const char *fmt, va_list ap)
{
	char buf[1024];
	int n, saved = errno;

	n = snprintf(buf, sizeof(buf), "%s: ", prefix);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	if (write(STDERR_FILENO, buf, (size_t)n) < 0)
		n = 0; /* nowhere to report it */
	errno = saved;
}

void shim_log(const char *fmt, ...)
{
	char prefix[32];
	va_list ap;

	if (!shim.debug)
		return;
	snprintf(prefix, sizeof(prefix), "shimmer[%d]", (int)getpid());
	va_start(ap, fmt);
	say(prefix, fmt, ap);
	va_end(ap);
}

void shim_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say("shimmer", fmt, ap);
	va_end(ap);
}

int shim_env_flag(const char *name)
{
	const char *v = getenv(name);

	return v && v[0] && strcmp(v, "0");
}

uint64_t shim_env_u64(const char *name, uint64_t def)
{
	const char *v = getenv(name);
	uint64_t x = 0;

	if (!v || !*v)
		return def;
	for (; *v; v++) {
		if (*v < '0' || *v > '9' || x > (UINT64_MAX - 9) / 10)
			return def;
		x = x * 10 + (uint64_t)(*v - '0');
	}
	return x;
}

/* The first of names that holds a non-negative integer, else SHM_NO_RANK. */
static int32_t env_rank(const char *const *names)
{
	for (; *names; names++) {
		uint64_t v = shim_env_u64(*names, UINT64_MAX);

		if (v <= INT32_MAX)
			return (int32_t)v;
	}
	return SHM_NO_RANK;
}

static void read_config(void)
{
	const char *m = getenv("SHIMMER_MALLOC"), *st = getenv("SHIMMER_STACKS");
	uint64_t depth = shim_env_u64("SHIMMER_STACK_DEPTH", DEFAULT_STACK_DEPTH);
	uint64_t ring = shim_env_u64("SHIMMER_RING_KB", DEFAULT_RING_KB) * 1024;
	uint64_t slots = shim_env_u64("SHIMMER_MAX_THREADS", DEFAULT_SLOTS);
	uint32_t r = SHM_RING_MIN_BYTES;

	shim.debug = shim_env_flag("SHIMMER_DEBUG");
	shim.lossless = shim_env_flag("SHIMMER_LOSSLESS");
	shim.offcpu = shim_env_flag("SHIMMER_OFFCPU");
	shim.mode = SHM_MALLOC_SAMPLE;
	if (m && !strcmp(m, "all"))
		shim.mode = SHM_MALLOC_ALL;
	else if (m && !strcmp(m, "off"))
		shim.mode = SHM_MALLOC_OFF;
	else if (m && *m && strcmp(m, "sample"))
		shim_log("SHIMMER_MALLOC=%s unknown; using sample", m);
	shim.stacks = !st || !*st || !strcmp(st, "on") || !strcmp(st, "1");
	if (st && *st && strcmp(st, "on") && strcmp(st, "1") && strcmp(st, "off") &&
	    strcmp(st, "0"))
		shim_log("SHIMMER_STACKS=%s unknown; stacks off", st);
	shim.stack_depth = (uint32_t)(depth < 1 ? 1 : depth > SHM_STACK_MAX ? SHM_STACK_MAX : depth);
	shim.sample_bytes = shim_env_u64("SHIMMER_SAMPLE_BYTES", DEFAULT_SAMPLE_BYTES);
	if (!shim.sample_bytes || shim.sample_bytes > MAX_SAMPLE_BYTES)
		shim.sample_bytes = DEFAULT_SAMPLE_BYTES;
	while (r < ring && r < SHM_RING_MAX_BYTES)
		r <<= 1;
	shim.region.ring_bytes = r;
	shim.region.nslots = (uint32_t)(slots < 1 ? 1 : slots > SHM_SLOTS_MAX ? SHM_SLOTS_MAX : slots);
}

/* Connects, builds the region and sends HELLO.  0 or -errno. */
static int start(uint32_t ppid)
{
	static const char *const rank_vars[] = { SHM_RANK_VARS, 0 };
	static const char *const local_vars[] = { SHM_LOCAL_RANK_VARS, 0 };
	const char *path = getenv("SHIMMER_SOCKET");
	uint32_t nslots = shim.region.nslots, ring_bytes = shim.region.ring_bytes;
	struct shm_msg_hello h = { 0 };
	uint64_t t0, t1;
	int err;

	if (!path || !*path)
		path = DEFAULT_SOCKET;
	shim.pid = (uint32_t)getpid();
	shim.sock = conn_open(path);
	if (shim.sock < 0) {
		shim_warn("collector not reached at %s (%s); not tracing", path,
			  strerrordesc_np(-shim.sock));
		err = shim.sock;
		shim.sock = -1;
		return err;
	}
	err = region_create(&shim.region, nslots, ring_bytes);
	if (err < 0) {
		shim_log("region: %s", strerrordesc_np(-err));
		goto fail;
	}
	h.pid = shim.pid;
	h.ppid = ppid;
	/* the effective uid: what the collector reads from the socket (SO_PEERCRED) */
	h.uid = (uint32_t)geteuid();
	h.flags = (shim.lossless ? SHM_HELLO_LOSSLESS : 0) | (shim.offcpu ? SHM_HELLO_OFFCPU : 0);
	h.rank = env_rank(rank_vars);
	h.local_rank = env_rank(local_vars);
	h.malloc_mode = (uint32_t)shim.mode;
	h.clock = (uint32_t)clock_kind;
	h.sample_bytes = shim.sample_bytes;
	h.start_wall_ns = clock_ns(CLOCK_REALTIME);
	t0 = clock_now();
	h.start_mono_ns = clock_ns(CLOCK_MONOTONIC);
	t1 = clock_now();
	h.start_ts = t0 + (t1 - t0) / 2;
	h.region_bytes = shim.region.bytes;
	h.nslots = nslots;
	h.ring_bytes = ring_bytes;
	err = conn_hello(shim.sock, &h, shim.region.fd);
	if (err < 0) {
		shim_log("hello: %s", strerrordesc_np(-err));
		goto fail;
	}
	/* The collector holds its own descriptor now; the mapping is ours. */
	close(shim.region.fd);
	shim.region.fd = -1;
	err = intern_init(shim.sock);
	if (err < 0)
		shim_log("intern table: %s; names will be missing", strerrordesc_np(-err));
	shim_log("tracing pid %u: %u slots of %u bytes, malloc mode %d, clock %d", shim.pid,
		 nslots, ring_bytes, shim.mode, clock_kind);
	return 0;
fail:
	region_destroy(&shim.region);
	close(shim.sock);
	shim.sock = -1;
	return err;
}

static void enable(void)
{
	/* A child forked while paused stays paused. */
	__atomic_store_n(&shim.heap, shim.paused ? SHM_MALLOC_OFF : shim.mode, __ATOMIC_RELAXED);
	__atomic_store_n(&shim.on, 1, __ATOMIC_RELEASE);
}

static void disable(void)
{
	__atomic_store_n(&shim.on, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&shim.heap, SHM_MALLOC_OFF, __ATOMIC_RELAXED);
}

/*
 * The child must never write into the parent's rings: the pages are
 * shared.  It unmaps them, drops the parent's connection and starts over as
 * a process of its own whose parent is the one that forked.
 */
static void fork_child(void)
{
	uint32_t parent = shim.pid;

	shim_tls.in_shim++;
	disable();
	region_destroy(&shim.region);
	close(shim.sock);
	shim.sock = -1;
	intern_fork_child(-1);
	heap_fork_child();
	thread_fork_child();
	api_fork_child();
	cupti_fork_child();
	modules_fork_child();
	stack_fork_child();
	if (start(parent) == 0) {
		enable();
		modules_report();
	}
	shim_tls.in_shim--;
}

__attribute__((constructor)) static void shim_init(void)
{
	const char *self;
	int saved = errno, err;

	shim_tls.in_shim++;
	heap_boot();
	if (shim_env_flag("SHIMMER_DISABLE"))
		goto out;
	read_config();
	clock_kind = clock_init();
	err = heap_setup(shim.mode);
	if (err < 0) {
		shim_log("sampled set: %s; heap not traced", strerrordesc_np(-err));
		shim.mode = SHM_MALLOC_OFF;
	}
	err = thread_init();
	if (err < 0) {
		shim_log("thread key: %s", strerrordesc_np(-err));
		goto out;
	}
	if (start((uint32_t)getppid()) < 0)
		goto out;
	err = -pthread_atfork(thread_fork_prepare, thread_fork_parent, fork_child);
	if (err < 0) {
		shim_log("pthread_atfork: %s; not tracing", strerrordesc_np(-err));
		goto out;
	}
	self = real_self_path();
	cupti_setup(self);
	nvtx_setup(self);
	err = modules_init();
	if (err < 0)
		shim_log("module table: %s; no module reports", strerrordesc_np(-err));
	stack_setup();
	enable();
	modules_report();
out:
	shim_tls.in_shim--;
	errno = saved;
}

/* Events written after this still reach the collector: it drains the
 * shared rings once the socket closes. */
__attribute__((destructor)) static void shim_fini(void)
{
	uint64_t ts;
	int saved = errno;

	if (!__atomic_load_n(&shim.on, __ATOMIC_ACQUIRE))
		return;
	/* Normally done already by CUPTI's atexit handler: a no-op then. */
	cupti_exit();
	shim_tls.in_shim++;
	ts = clock_now();
	__atomic_store_n(&shim.region.hdr->exit_ts, ts, __ATOMIC_RELEASE);
	conn_bye(shim.sock, ts);
	shim_tls.in_shim--;
	errno = saved;
}
