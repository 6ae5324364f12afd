/*
 * The eBPF source (bpfsrc.h).  One skeleton (bpf/probes.bpf.c) per traced
 * process, its rodata set to the process's tgid and the heap sampler's
 * mean before load.  Probes are attached per function with a cookie that
 * names the wire function and the shape of its arguments (bpf/probes.h):
 * the return probe first, so a call in flight when the entry probe arrives
 * has no half-seen entry.  Two names at one address (glibc's aligned_alloc
 * and memalign) get one probe, under the first name in the tables below.
 *
 * The ring buffer is consumed in batches: each record becomes a wire
 * record, is checked like any other source's, and the batch is handed on
 * sorted by rec_key().  The ring holds records in the order their calls
 * returned, so a free can reach the sink after an allocation that reused
 * its address; ingest.h's displaced-block rule covers that case as it does
 * for the shim's rings.
 *
 * Stacks: the stack map holds the frame-pointer walk the kernel made.  A
 * probe at a function's entry also copies the return address at sp (its
 * caller, which kernels before 6.12 leave out); an off-CPU record copies
 * the top of the stack, and the innermost function's CFI (caller.h) finds
 * the return address there, since the function that blocked is often a
 * libc wrapper without a frame of its own.  Each distinct (map stack,
 * repaired frame) pair becomes one STACK record.
 *
 * Without libbpf (or bpftool, clang, the kernel's BTF) at build time only
 * bpfsrc_check() and bpfsrc_new() remain, and they say why.
 */
#include "bpfsrc.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#ifndef SHIMMER_BPF

int bpfsrc_check(char *why, size_t len)
{
	snprintf(why, len, "this shimmerd was built without BPF support (%s)",
		 SHIMMER_NO_BPF_REASON);
	return -ENOTSUP;
}

struct bpfsrc *bpfsrc_new(const struct bpfsrc_conf *conf, char *why, size_t len)
{
	(void)conf;
	errno = -bpfsrc_check(why, len);
	return NULL;
}

int bpfsrc_fd(const struct bpfsrc *s)
{
	(void)s;
	return -1;
}

int bpfsrc_poll(struct bpfsrc *s, const struct rec_sink *sink)
{
	(void)s;
	(void)sink;
	return -ENOTSUP;
}

int bpfsrc_tick(struct bpfsrc *s, const struct rec_sink *sink)
{
	(void)s;
	(void)sink;
	return -ENOTSUP;
}

int bpfsrc_stop(struct bpfsrc *s, const struct rec_sink *sink, uint64_t *end_ns)
{
	(void)s;
	(void)sink;
	(void)end_ns;
	return -ENOTSUP;
}

const char *bpfsrc_describe(const struct bpfsrc *s)
{
	(void)s;
	return "";
}

void bpfsrc_free(struct bpfsrc *s)
{
	(void)s;
}

#else /* SHIMMER_BPF */

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <cuda.h>
#include <cupti_driver_cbid.h>
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/types.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "probes.h"
#include "probes.skel.h"
#include "caller.h"
#include "clock_ns.h"
#include "drops.h"
#include "log.h"
#include "procmaps.h"
#include "ptrmap.h"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

#define TICK_COUNTS_NS 1000000000ull
#define RESCAN_NS 1000000000ull
#define LEARN_DEVICE_NS 1000000000ull
/* Kernel memory per source: a preloaded process with SHIMMER_OFFCPU=1 gets
 * the small sizes (a daemon may hold 64 of them). */
#define STACKS_MAX 16384u      /* stack map buckets with the uprobes (~17 MiB) */
#define STACKS_OFFCPU 2048u    /* off-CPU alone (~2 MiB) */
#define RING_BYTES (16u << 20) /* ring buffer with the uprobes */
#define RING_BYTES_OFFCPU (2u << 20)
#define DESTROY_THREADS 64     /* threads that detach probes at once */

_Static_assert(SHM_FN_COUNT <= AT_MAX_FN, "the BPF thread state counts every wire function");
_Static_assert(sizeof(struct at_launch_config) == offsetof(cudaLaunchConfig_t, attrs) &&
	       offsetof(cudaLaunchConfig_t, dynamicSmemBytes) ==
	       offsetof(struct at_launch_config, dynamic_smem) &&
	       offsetof(cudaLaunchConfig_t, stream) == offsetof(struct at_launch_config, stream),
	       "cudaLaunchConfig_t's head as bpf/probes.h reads it");

/* ---- what is probed ---- */

struct probe_def {
	uint16_t fn;       /* enum shm_fn; driver: index into drivers[] */
	uint8_t shape;     /* enum at_shape */
	uint8_t flags;     /* AT_CF_* */
	const char *name;  /* NULL: shm_fn_info[fn].name */
	const char *suffix;
};

#define RT(fn, shape) { SHM_FN_##fn, AT_SH_##shape, 0, NULL, NULL }
#define RT_PT(fn, shape, sfx)                                               \
	RT(fn, shape), { SHM_FN_##fn, AT_SH_##shape, AT_CF_PTSZ, NULL, sfx }

/* The CUDA runtime calls the shim hooks (preload/cuda.c), by shape. */
static const struct probe_def runtime_probes[] = {
	RT(CUDA_MALLOC, ALLOC),
	RT(CUDA_FREE, FREE),
	RT(CUDA_MALLOC_HOST, ALLOC),
	RT(CUDA_HOST_ALLOC, ALLOC_FLAGS),
	RT(CUDA_FREE_HOST, FREE),
	RT(CUDA_MALLOC_MANAGED, ALLOC_FLAGS),
	RT(CUDA_MALLOC_PITCH, PITCH),
	RT_PT(CUDA_MALLOC_ASYNC, ALLOC_STREAM, "_ptsz"),
	RT_PT(CUDA_FREE_ASYNC, FREE_STREAM, "_ptsz"),
	RT_PT(CUDA_MALLOC_FROM_POOL_ASYNC, ALLOC_POOL, "_ptsz"),
	RT_PT(CUDA_MEMCPY, COPY, "_ptds"),
	RT_PT(CUDA_MEMCPY_ASYNC, COPY_STREAM, "_ptsz"),
	RT(CUDA_MEMCPY_PEER_ASYNC, PEER),
	RT_PT(CUDA_MEMSET, MEMSET, "_ptds"),
	RT_PT(CUDA_MEMSET_ASYNC, MEMSET_STREAM, "_ptsz"),
	RT_PT(CUDA_LAUNCH_KERNEL, LAUNCH, "_ptsz"),
	RT_PT(CUDA_LAUNCH_KERNEL_STUB, LAUNCH, "_ptsz"),
	RT_PT(CUDA_LAUNCH_KERNEL_EXC, LAUNCH_EXC, "_ptsz"),
	RT_PT(CUDA_LAUNCH_COOPERATIVE_KERNEL, LAUNCH, "_ptsz"),
	RT_PT(CUDA_GRAPH_LAUNCH, GRAPH, "_ptsz"),
	RT_PT(CUDA_STREAM_SYNCHRONIZE, STREAM, "_ptsz"),
	RT(CUDA_DEVICE_SYNCHRONIZE, NONE),
	RT(CUDA_EVENT_SYNCHRONIZE, EVENT),
	RT_PT(CUDA_STREAM_WAIT_EVENT, WAIT_EVENT, "_ptsz"),
	{ SHM_FN_NONE, AT_SH_SET_DEVICE, 0, "cudaSetDevice", NULL },
};

/* Attached for the first second only: a thread that asks for its device
 * learns us its device (PyTorch asks all the time). */
static const struct probe_def device_probes[] = {
	{ SHM_FN_NONE, AT_SH_GET_DEVICE, 0, "cudaGetDevice", NULL },
};

/* The malloc family; aligned_alloc before memalign (one function in glibc). */
static const struct probe_def heap_probes[] = {
	RT(MALLOC, MALLOC),
	RT(FREE, HEAP_FREE),
	RT(CALLOC, CALLOC),
	RT(REALLOC, REALLOC),
	RT(REALLOCARRAY, REALLOCARRAY),
	RT(POSIX_MEMALIGN, POSIX_MEMALIGN),
	RT(ALIGNED_ALLOC, ALIGNED),
	RT(MEMALIGN, ALIGNED),
	RT(VALLOC, MALLOC),
	RT(PVALLOC, MALLOC),
};

/* The driver's launch entry points (cuBLAS, cuDNN and Triton launch
 * through them): gpu_api rows of the driver domain, with CUPTI's ids. */
static const struct {
	const char *name;
	uint32_t cbid;
} drivers[] = {
#define DRV(f) { #f, CUPTI_DRIVER_TRACE_CBID_##f }
	DRV(cuLaunchKernel), DRV(cuLaunchKernel_ptsz), DRV(cuLaunchKernelEx),
	DRV(cuLaunchKernelEx_ptsz), DRV(cuLaunchCooperativeKernel),
	DRV(cuLaunchCooperativeKernel_ptsz), DRV(cuGraphLaunch), DRV(cuGraphLaunch_ptsz),
#undef DRV
};

#define NDRIVERS (sizeof(drivers) / sizeof(drivers[0]))

static const char *const drop_reason[AT_DROP_COUNT] = {
	[AT_DROP_RING_FULL] = "ring_full",
	[AT_DROP_NO_THREAD] = "no_slot",
	[AT_DROP_NESTED] = "nested",
	[AT_DROP_STACK] = DROP_STACK_COLLISION,
	[AT_DROP_SAMPLED_FULL] = "sampled_full",
};

/* ---- state ---- */

/*
 * A probe link: a uprobe_multi link (a file descriptor for every probe of
 * one program in one file: kernels from 6.6) or, on older kernels, one
 * libbpf perf-event link per probe.  Removing a perf-event uprobe waits for
 * RCU grace periods under the kernel's event_mutex, tens of ms each and one
 * after another: a hundred of them take seconds, where a multi link's
 * probes all share one wait.
 */
struct plink {
	struct bpf_link *l; /* a perf-event link, or NULL */
	int fd;             /* a multi link, or -1 */
};

struct lib {
	char *path;     /* as the process names it */
	uint64_t dev, ino;
	unsigned kinds; /* LIB_* probed in it */
	unsigned probes;
};

#define LIB_RUNTIME 0x1
#define LIB_DRIVER 0x2
#define LIB_HEAP 0x4

struct known_obj {
	uint64_t lo, dev, ino;
	struct shm_rec_module rec; /* as reported (for the unload) */
	char *path;
	int seen;
	int reported; /* its MODULE record was handed on */
};

/* A record waiting in the batch, with its thread and merge key: only the
 * kinds the ring buffer makes (a union rec would cost 2 KiB each). */
struct batched {
	uint64_t key;
	uint32_t tid;
	union {
		struct shm_rec_hdr h;
		struct shm_rec_heap heap;
		struct shm_rec_cuda cuda;
		struct shm_rec_api api;
		struct shm_rec_offcpu offcpu;
	} r;
};

/* What was last handed on of a thread's counters. */
struct thread_base {
	uint32_t tid;
	uint64_t count[AT_MAX_FN], bytes[AT_MAX_FN], dropped[AT_DROP_COUNT];
};

struct bpfsrc {
	struct bpfsrc_conf conf;
	const struct rec_sink *sink;
	struct probes_bpf *skel;
	struct ring_buffer *rb;
	int stacks_fd, threads_fd, offcpu_fd, lost_fd;
	struct plink *links, *device_links; /* return and entry links, in pairs */
	size_t nlinks, links_cap, ndevice_links, device_cap;
	struct bpf_link *offcpu_link;
	int multi;                /* uprobe_multi links (else one link per probe) */
	struct lib *libs;
	size_t nlibs;
	struct pm_objects objs;
	struct known_obj *known;
	size_t nknown;
	struct caller *caller;
	struct ptrmap stack_ids;  /* (map stack, extra frame) -> wire stack id */
	uint32_t next_stack;
	struct ptrmap threads_seen; /* tid -> 1 + index into bases */
	struct thread_base *bases;
	size_t nbases, bases_cap;
	uint64_t lost_base[AT_DROP_COUNT];
	uint32_t next_string;
	uint32_t driver_name[NDRIVERS]; /* string ids, 0 until used */
	struct batched *batch;
	size_t nbatch, batch_cap;
	struct at_thread tstate; /* flush_counts()'s copy of a thread's entry */
	uint64_t t_attach, t_counts, t_rescan;
	int err;                  /* the first sink error inside a callback */
	int stopped;
	char describe[512];
};

/* ---- libbpf's messages ---- */

static char libbpf_last[256];

/* libbpf explains a failure in its warnings: keep the last one for the
 * one-line error, and the rest only with --verbose. */
static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char line[sizeof(libbpf_last)];
	size_t n;

	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	while (n && line[n - 1] == '\n')
		line[--n] = '\0';
	if (level == LIBBPF_WARN)
		snprintf(libbpf_last, sizeof(libbpf_last), "%s",
			 strncmp(line, "libbpf: ", 8) ? line : line + 8);
	if (level != LIBBPF_DEBUG)
		log_debug("libbpf: %s", line);
	return 0;
}

/* ---- privileges ---- */

int bpfsrc_check(char *why, size_t len)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2] = { 0 };
	int bpf, perfmon, admin;

	if (syscall(SYS_capget, &h, d) < 0) {
		snprintf(why, len, "cannot read this process's capabilities: %s", strerror(errno));
		return -errno;
	}
#define HAS(cap) (!!(d[(cap) / 32].effective & (1u << ((cap) % 32))))
	admin = HAS(CAP_SYS_ADMIN);
	bpf = admin || HAS(CAP_BPF);
	perfmon = admin || HAS(CAP_PERFMON);
#undef HAS
	if (bpf && perfmon)
		return 0;
	snprintf(why, len, "attaching needs root, or CAP_BPF and CAP_PERFMON: %s",
		 !bpf && !perfmon ? "CAP_BPF and CAP_PERFMON are missing"
		 : !bpf ? "CAP_BPF is missing" : "CAP_PERFMON is missing");
	return -EPERM;
}

/* ---- strings, threads, stacks, modules ---- */

/* v, with room for element n (of size bytes; *cap of them allocated),
 * doubling from first; NULL when it cannot grow (v is left as it was). */
static void *grow(void *v, size_t n, size_t *cap, size_t size, size_t first)
{
	size_t c = *cap ? *cap * 2 : first;
	void *g;

	if (n < *cap)
		return v;
	g = realloc(v, c * size);
	if (g)
		*cap = c;
	return g;
}

static uint32_t string_new(struct bpfsrc *s, const char *text, size_t len)
{
	uint32_t id;

	if (!s->conf.host.string)
		return 0;
	id = s->next_string++;
	s->err = s->conf.host.string(s->conf.host.ctx, id, text, len);
	return s->err ? 0 : id;
}

static int hand_on(struct bpfsrc *s, uint32_t tid, const union rec *r)
{
	/* Our own records are checked like any source's: a mistake here must
	 * not reach the store as a malformed row. */
	if (rec_check(r)) {
		log_warn("pid %d: the BPF source made a malformed record (type %u): dropped",
			 (int)s->conf.pid, r->h.type);
		return s->sink->drops(s->sink->ctx, tid, "malformed", 1);
	}
	return s->sink->record(s->sink->ctx, 0, tid, r);
}

/* The thread's row on its first sight, named as /proc says. */
static int thread_seen(struct bpfsrc *s, uint32_t tid, uint64_t ts)
{
	struct thread_base *grown;
	char path[64], name[64] = "";
	uint32_t name_id = 0;
	ssize_t n;
	int fd, err;

	if (!tid || ptrmap_get(&s->threads_seen, tid, NULL))
		return 0;
	grown = grow(s->bases, s->nbases, &s->bases_cap, sizeof(*s->bases), 64);
	if (!grown)
		return -ENOMEM;
	s->bases = grown;
	memset(&s->bases[s->nbases], 0, sizeof(s->bases[0]));
	s->bases[s->nbases].tid = tid;
	err = ptrmap_put(&s->threads_seen, tid, (int64_t)++s->nbases, 0, NULL);
	if (err || !s->conf.host.thread)
		return err;
	snprintf(path, sizeof(path), "/proc/%d/task/%u/comm", (int)s->conf.pid, tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, name, sizeof(name) - 1);
		close(fd);
		while (n > 0 && name[n - 1] == '\n')
			n--;
		if (n > 0)
			name_id = string_new(s, name, (size_t)n);
		if (s->err)
			return s->err;
	}
	return s->conf.host.thread(s->conf.host.ctx, tid, name_id, ts);
}

/* The cache key of (map stack id, extra frame, how it was joined): a map
 * id always names the same frames (entries are never deleted), so the
 * triple names one stack.  splitmix64's finalizer; never 0. */
static uint64_t stack_key(int32_t stackid, uint64_t extra, unsigned how)
{
	uint64_t x = extra ^ ((uint64_t)(uint32_t)stackid << 32 | how) * 0x9e3779b97f4a7c15ull;

	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x ? x : 1;
}

/* Builds and hands on the STACK record of (map stack id, extra frame,
 * how), once; returns its wire id, 0 when there is none. */
static uint32_t stack_of(struct bpfsrc *s, uint32_t tid, int32_t stackid, uint64_t extra,
			 unsigned how, const uint64_t *pcs, uint32_t depth)
{
	uint64_t key = stack_key(stackid, extra, how);
	union rec r;
	int64_t id = ptrmap_get(&s->stack_ids, key, NULL);

	if (id)
		return (uint32_t)id;
	if (depth > SHM_STACK_MAX)
		depth = SHM_STACK_MAX;
	r.stack.h = (struct shm_rec_stack){
		.hdr = { .type = SHM_REC_STACK,
			 .size = (uint16_t)(sizeof(r.stack.h) + depth * sizeof(uint64_t)) },
		.stack_id = s->next_stack,
		.depth = depth,
	};
	memcpy(r.stack.pc, pcs, depth * sizeof(uint64_t));
	s->err = hand_on(s, tid, &r);
	if (!s->err)
		s->err = ptrmap_put(&s->stack_ids, key, s->next_stack, 0, NULL);
	return s->err ? 0 : s->next_stack++;
}

/* The frames of a map stack (innermost first, up to its first zero). */
static uint32_t map_stack(struct bpfsrc *s, int32_t stackid, uint64_t *pcs)
{
	uint32_t n = 0;

	if (stackid < 0 || bpf_map_lookup_elem(s->stacks_fd, &stackid, pcs))
		return 0;
	while (n < AT_STACK_DEPTH && pcs[n])
		n++;
	return n;
}

/* A probe's stack: its caller (ret1) first, then the walk above it.  The
 * walk's first frame is the probed function's own entry; kernels from 6.12
 * put the caller second, older ones skip it. */
static uint32_t probe_stack(struct bpfsrc *s, uint32_t tid, int32_t stackid, uint64_t ret1)
{
	uint64_t pcs[AT_STACK_DEPTH + 1];
	uint32_t n = map_stack(s, stackid, pcs + 1), skip;

	if (!n)
		return 0;
	skip = n > 1 && pcs[2] == ret1 ? 2 : 1;
	if (!ret1)
		return stack_of(s, tid, stackid, 0, 0, pcs + 2, n - 1);
	pcs[skip] = ret1;
	return stack_of(s, tid, stackid, ret1, 0, pcs + skip, n + 1 - skip);
}

/* An off-CPU stack: where it stopped, then its caller found by CFI when
 * the kernel's walk missed it. */
static uint32_t offcpu_stack(struct bpfsrc *s, uint32_t tid, const struct at_off *o)
{
	uint64_t pcs[AT_STACK_DEPTH + 1];
	uint32_t n = map_stack(s, o->stackid, pcs);
	struct caller_frame f;

	if (!n)
		return 0;
	if (!s->caller || caller_of(s->caller, &s->objs, pcs[0], o->sp, o->bp,
				    (const uint64_t *)o->words,
				    AT_SP_WORDS, &f) || !f.ret ||
	    (n > 1 && pcs[1] == f.ret))
		return stack_of(s, tid, o->stackid, 0, 0, pcs, n);
	if (f.bp_unchanged) {
		memmove(pcs + 2, pcs + 1, (n - 1) * sizeof(pcs[0]));
		pcs[1] = f.ret;
		return stack_of(s, tid, o->stackid, f.ret, 1, pcs, n + 1);
	}
	/* The frame pointer was reused: the kernel's walk above is not this
	 * thread's; keep what is known. */
	pcs[1] = f.ret;
	return stack_of(s, tid, o->stackid, f.ret, 2, pcs, 2);
}

static int hand_on_module(struct bpfsrc *s, const struct shm_rec_module *m)
{
	union rec r;

	r.module = *m;
	return hand_on(s, 0, &r);
}

/* The MODULE record of o (its path_id is filled when it is handed on). */
static void module_rec(const struct pm_object *o, uint64_t ts, struct shm_rec_module *r)
{
	*r = (struct shm_rec_module){
		.hdr = { .type = SHM_REC_MODULE, .size = sizeof(*r) },
		.ts = ts, .bias = o->bias, .lo = o->lo, .hi = o->hi,
		.build_id_len = o->build_id_len,
	};
	memcpy(r->build_id, o->build_id, o->build_id_len);
}

/* Hands on the MODULE records of objects found since the last call. */
static int report_modules(struct bpfsrc *s)
{
	int err = 0;

	for (size_t k = 0; k < s->nknown && !err && s->conf.modules; k++) {
		struct known_obj *kn = &s->known[k];

		if (kn->reported)
			continue;
		kn->rec.path_id = string_new(s, kn->path, strlen(kn->path));
		err = s->err;
		if (!err)
			err = hand_on_module(s, &kn->rec);
		kn->reported = !err;
	}
	return err;
}

/* ---- probes ---- */

static const char *base_name(const char *path)
{
	const char *p = strrchr(path, '/');

	return p ? p + 1 : path;
}

/* Which of our probe sets go into this object: the CUDA runtime (a
 * libcudart, PyTorch's libcudart-HASH.so too, or an executable that links
 * it statically), the driver (libcuda.so.N), the allocator (libc, unless a
 * known replacement is loaded: then that). */
static unsigned kinds_of(const struct bpfsrc *s, const struct pm_object *o, int is_exe)
{
	const char *b = base_name(o->path);
	unsigned k = 0;

	if (!strncmp(b, "libcudart.so", 12) || !strncmp(b, "libcudart-", 10) || is_exe)
		k |= LIB_RUNTIME;
	if (!strncmp(b, "libcuda.so", 10))
		k |= LIB_DRIVER;
	if (!strncmp(b, "libjemalloc.so", 14) || !strncmp(b, "libtcmalloc", 11) ||
	    !strncmp(b, "libmimalloc.so", 14))
		k |= LIB_HEAP;
	if (!strncmp(b, "libc.so", 7) || !strncmp(b, "libc-", 5)) {
		int other = 0;

		for (size_t i = 0; i < s->objs.n && !other; i++) {
			const char *ob = base_name(s->objs.v[i].path);

			other = !strncmp(ob, "libjemalloc.so", 14) || !strncmp(ob, "libtcmalloc", 11) ||
				!strncmp(ob, "libmimalloc.so", 14);
		}
		if (!other)
			k |= LIB_HEAP;
	}
	return k;
}

static void destroy_links(struct plink *links, size_t n, unsigned parity);

/* BPF_LINK_CREATE for uprobe_multi, which libbpf 1.1 (Debian 12's) does
 * not know: the kernel's layout of union bpf_attr for it. */
#define AT_TRACE_UPROBE_MULTI 48 /* enum bpf_attach_type */
#define AT_F_UPROBE_MULTI_RETURN 1u

struct uprobe_multi_attr {
	uint32_t prog_fd, target_fd, attach_type, flags;
	uint64_t path, offsets, ref_ctr_offsets, cookies;
	uint32_t cnt, multi_flags, pid, pad;
};

static int multi_link(int prog_fd, const char *path, const uint64_t *off,
		      const uint64_t *cookies, uint32_t n, int ret, pid_t pid)
{
	struct uprobe_multi_attr a = {
		.prog_fd = (uint32_t)prog_fd, .attach_type = AT_TRACE_UPROBE_MULTI,
		.path = (uint64_t)(uintptr_t)path, .offsets = (uint64_t)(uintptr_t)off,
		.cookies = (uint64_t)(uintptr_t)cookies, .cnt = n,
		.multi_flags = ret ? AT_F_UPROBE_MULTI_RETURN : 0, .pid = (uint32_t)pid,
	};
	int fd = (int)syscall(SYS_bpf, BPF_LINK_CREATE, &a, sizeof(a));

	return fd < 0 ? -errno : fd;
}

static int keep_link(struct plink **v, size_t *n, size_t *cap, struct plink l)
{
	struct plink *grown = grow(*v, *n, cap, sizeof(**v), 64);

	if (!grown) {
		if (l.l)
			bpf_link__destroy(l.l);
		else
			close(l.fd);
		return -ENOMEM;
	}
	*v = grown;
	(*v)[(*n)++] = l;
	return 0;
}

static void attach_failed(const char *what, const char *path, int err, char *why,
			  size_t why_len)
{
	snprintf(why, why_len, "cannot attach uprobes to %s in %s: %s%s%s%s", what, path,
		 strerror(-err), libbpf_last[0] ? " (libbpf: " : "", libbpf_last,
		 libbpf_last[0] ? ")" : "");
}

/* Attaches the entry and return probes of defs[] found in the file path
 * (opened as the process sees it): return probes first, so that a call in
 * flight has no entry without its return.  Returns the number of
 * functions probed, or a negative errno (with why). */
static int probe_file(struct bpfsrc *s, const char *path, const struct probe_def *defs,
		      size_t n, int driver, int device, int shared, char *why, size_t why_len)
{
	unsigned extra = shared ? AT_CF_SKIP_DIRECT : 0;
	int heap = !driver && defs == heap_probes;
	struct bpf_program *enter = heap ? s->skel->progs.shm_heap_enter
					 : s->skel->progs.shm_call_enter;
	struct bpf_program *exit = heap ? s->skel->progs.shm_heap_exit
					: s->skel->progs.shm_call_exit;
	struct plink **v = device ? &s->device_links : &s->links;
	size_t *nv = device ? &s->ndevice_links : &s->nlinks;
	size_t *cap = device ? &s->device_cap : &s->links_cap;
	char names[64][48];
	const char *np[64];
	uint64_t off[64], moff[64], cookies[64];
	uint32_t m = 0;
	int found, err = 0;

	if (n > 64)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		const char *base = driver ? drivers[i].name
				   : defs[i].name ? defs[i].name : shm_fn_info[defs[i].fn].name;

		snprintf(names[i], sizeof(names[i]), "%s%s", base,
			 !driver && defs[i].suffix ? defs[i].suffix : "");
		np[i] = names[i];
	}
	found = procmaps_symbols(path, np, n, off);
	if (found <= 0)
		return found;
	for (size_t i = 0; i < n; i++) {
		int dup = 0;

		for (uint32_t j = 0; j < m && !dup; j++)
			dup = moff[j] == off[i];
		if (!off[i] || dup)
			continue;
		moff[m] = off[i];
		cookies[m++] = driver ? AT_COOKIE(i, AT_SH_DRIVER, extra)
				      : AT_COOKIE(defs[i].fn, defs[i].shape, defs[i].flags | extra);
	}
	if (s->multi) {
		int fd = multi_link(bpf_program__fd(exit), path, moff, cookies, m, 1, s->conf.pid);

		if (fd >= 0)
			err = keep_link(v, nv, cap, (struct plink){ NULL, fd });
		fd = fd < 0 || err ? fd : multi_link(bpf_program__fd(enter), path, moff, cookies, m,
						     0, s->conf.pid);
		if (!err && fd >= 0)
			err = keep_link(v, nv, cap, (struct plink){ NULL, fd });
		if (!err && fd < 0) {
			err = fd;
			attach_failed(heap ? "the malloc family" : driver ? "the CUDA driver"
				      : "the CUDA runtime", path, err, why, why_len);
		}
		return err ? err : (int)m;
	}
	for (uint32_t i = 0; i < m && !err; i++) {
		LIBBPF_OPTS(bpf_uprobe_opts, o, .bpf_cookie = cookies[i], .retprobe = true);
		struct bpf_link *ret, *ent;

		ret = bpf_program__attach_uprobe_opts(exit, s->conf.pid, path, moff[i], &o);
		o.retprobe = false;
		ent = ret ? bpf_program__attach_uprobe_opts(enter, s->conf.pid, path, moff[i], &o)
			  : NULL;
		if (ret)
			err = keep_link(v, nv, cap, (struct plink){ ret, -1 });
		if (!err && ent)
			err = keep_link(v, nv, cap, (struct plink){ ent, -1 });
		if (!err && (!ret || !ent)) {
			err = errno ? -errno : -EINVAL;
			attach_failed(heap ? "the malloc family" : driver ? "the CUDA driver"
				      : "the CUDA runtime", path, err, why, why_len);
		}
	}
	return err ? err : (int)m;
}

/* Probes one object for the sets it takes and remembers it. */
static int probe_object(struct bpfsrc *s, const struct pm_object *o, int is_exe, char *why,
			size_t why_len)
{
	unsigned kinds = kinds_of(s, o, is_exe);
	char path[4096];
	struct lib *l;
	int n, total = 0;

	if (!(s->conf.what & BPFSRC_CUDA))
		kinds &= ~(unsigned)(LIB_RUNTIME | LIB_DRIVER);
	if (!(s->conf.what & BPFSRC_HEAP))
		kinds &= ~(unsigned)LIB_HEAP;
	for (size_t i = 0; i < s->nlibs; i++)
		if (s->libs[i].dev == o->dev && s->libs[i].ino == o->ino)
			return 0;
	if (!kinds)
		return 0;
	if (procmaps_open_path(s->conf.pid, o->path, path, sizeof(path)))
		return 0;
	if (kinds & LIB_RUNTIME) {
		n = probe_file(s, path, runtime_probes, sizeof(runtime_probes) /
			       sizeof(runtime_probes[0]), 0, 0, !is_exe, why, why_len);
		if (n < 0)
			return n;
		total += n;
		if (n > 0 && s->ndevice_links == 0 &&
		    clock_ns(CLOCK_MONOTONIC) - s->t_attach < LEARN_DEVICE_NS) {
			int m = probe_file(s, path, device_probes, 1, 0, 1, !is_exe, why, why_len);

			if (m < 0)
				return m;
		}
		if (!n)
			kinds &= ~(unsigned)LIB_RUNTIME;
	}
	if (kinds & LIB_DRIVER) {
		n = probe_file(s, path, NULL, NDRIVERS, 1, 0, 1, why, why_len);
		if (n < 0)
			return n;
		total += n;
	}
	if (kinds & LIB_HEAP) {
		n = probe_file(s, path, heap_probes, sizeof(heap_probes) / sizeof(heap_probes[0]),
			       0, 0, !is_exe, why, why_len);
		if (n < 0)
			return n;
		total += n;
	}
	if (!total)
		return 0;
	l = realloc(s->libs, (s->nlibs + 1) * sizeof(*l));
	if (!l)
		return -ENOMEM;
	s->libs = l;
	l = &s->libs[s->nlibs++];
	*l = (struct lib){ .path = strdup(o->path), .dev = o->dev, .ino = o->ino,
			   .kinds = kinds, .probes = (unsigned)total };
	return l->path ? 0 : -ENOMEM;
}

static void describe(struct bpfsrc *s)
{
	size_t len = 0;

	s->describe[0] = '\0';
	for (size_t i = 0; i < s->nlibs && len < sizeof(s->describe); i++)
		len += (size_t)snprintf(s->describe + len, sizeof(s->describe) - len, "%s%u in %s",
					i ? ", " : "", s->libs[i].probes, base_name(s->libs[i].path));
	if (s->offcpu_link && len < sizeof(s->describe))
		snprintf(s->describe + len, sizeof(s->describe) - len, "%soff-CPU time",
			 len ? ", " : "");
}

/* The executable: /proc/PID/exe, compared by inode. */
static int is_exe(const struct bpfsrc *s, const struct pm_object *o)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)s->conf.pid);
	return stat(path, &st) == 0 && (uint64_t)st.st_ino == o->ino;
}

/* Re-reads the process's objects: new ones are probed (when they take
 * probes) and reported, gone ones reported unloaded.  A probe that cannot
 * be attached stops the scan with why. */
static int rescan(struct bpfsrc *s, uint64_t now, char *why, size_t why_len)
{
	int err = procmaps_read(s->conf.pid, &s->objs);

	if (err == -ENOENT || err == -ESRCH)
		return 0; /* it exited: the session notices */
	if (err)
		return err;
	for (size_t k = 0; k < s->nknown; k++)
		s->known[k].seen = 0;
	for (size_t i = 0; i < s->objs.n && !err; i++) {
		const struct pm_object *o = &s->objs.v[i];
		struct known_obj *kn;
		size_t k;

		for (k = 0; k < s->nknown; k++)
			if (s->known[k].lo == o->lo && s->known[k].dev == o->dev &&
			    s->known[k].ino == o->ino)
				break;
		if (k < s->nknown) {
			s->known[k].seen = 1;
			continue;
		}
		err = probe_object(s, o, is_exe(s, o), why, why_len);
		if (err)
			break;
		kn = realloc(s->known, (s->nknown + 1) * sizeof(*kn));
		if (!kn)
			return -ENOMEM;
		s->known = kn;
		kn = &s->known[s->nknown++];
		*kn = (struct known_obj){ .lo = o->lo, .dev = o->dev, .ino = o->ino, .seen = 1,
					  .path = strdup(o->path) };
		if (!kn->path)
			return -ENOMEM;
		module_rec(o, now, &kn->rec);
	}
	for (size_t k = s->nknown; k-- > 0 && !err;) {
		struct shm_rec_module r;

		if (s->known[k].seen)
			continue;
		if (s->conf.modules && s->known[k].reported) {
			r = s->known[k].rec;
			r.ts = now;
			r.unload = 1;
			err = hand_on_module(s, &r);
		}
		free(s->known[k].path);
		s->known[k] = s->known[--s->nknown];
	}
	describe(s);
	return err;
}

/* ---- records ---- */

static int call_record(struct bpfsrc *s, const struct at_ev_call *e, union rec *r)
{
	uint32_t shape = AT_COOKIE_SHAPE(e->cookie), fn = AT_COOKIE_FN(e->cookie);

	memset(r, 0, sizeof(r->cuda) > sizeof(r->heap) ? sizeof(r->cuda) : sizeof(r->heap));
	if (shape == AT_SH_DRIVER) {
		if (fn >= NDRIVERS)
			return -EBADMSG;
		if (!s->driver_name[fn])
			s->driver_name[fn] = string_new(s, drivers[fn].name, strlen(drivers[fn].name));
		if (s->err)
			return s->err;
		r->api = (struct shm_rec_api){
			.hdr = { .type = SHM_REC_API, .size = sizeof(r->api) },
			.start = e->t_begin, .end = e->t_end, .name_id = s->driver_name[fn],
			.domain = SHM_API_DRIVER, .cbid = drivers[fn].cbid,
		};
		return 0;
	}
	if (fn == SHM_FN_NONE || fn >= SHM_FN_COUNT)
		return -EBADMSG;
	if (AT_SH_IS_HEAP(shape)) {
		int failed = !!(e->flags & AT_PF_FAILED), sampled = !!(e->flags & AT_PF_SAMPLED);

		r->heap = (struct shm_rec_heap){
			.hdr = { .type = SHM_REC_HEAP, .size = sizeof(r->heap), .fn = (uint16_t)fn,
				 .flags = SHM_F_TIMED | (sampled ? SHM_F_SAMPLED : 0) |
					  (failed ? SHM_F_FAILED : 0) },
			.t_begin = e->t_begin, .t_end = e->t_end,
			.ptr = e->ptr, .size = e->bytes, .aux = e->aux,
		};
		if (sampled && !failed && (shm_fn_info[fn].flags & SHM_FNF_ALLOC))
			r->heap.stack_id = probe_stack(s, e->h.tid, e->stackid, e->ret1);
		return s->err;
	}
	r->cuda = (struct shm_rec_cuda){
		.hdr = { .type = SHM_REC_CUDA, .size = sizeof(r->cuda), .fn = (uint16_t)fn,
			 .flags = SHM_F_TIMED | (e->cookie >> 16 & AT_CF_PTSZ ? SHM_F_PTSZ : 0) |
				  (e->ret ? SHM_F_FAILED : 0) },
		.t_begin = e->t_begin, .t_end = e->t_end, .ret = (int32_t)e->ret,
		.device = e->device, .ptr = e->ptr, .bytes = e->bytes, .stream = e->stream,
		.aux = e->aux, .aux2 = e->aux2, .kind = e->kind,
	};
	memcpy(r->cuda.grid, e->grid, sizeof(r->cuda.grid));
	memcpy(r->cuda.block, e->block, sizeof(r->cuda.block));
	if (!e->ret && (shm_fn_info[fn].flags & SHM_FNF_ALLOC))
		r->cuda.stack_id = probe_stack(s, e->h.tid, e->stackid, e->ret1);
	return s->err;
}

static int offcpu_record(struct bpfsrc *s, uint32_t tid, const struct at_off *o, uint64_t t_in,
			 int open, union rec *r)
{
	r->offcpu = (struct shm_rec_offcpu){
		.hdr = { .type = SHM_REC_OFFCPU, .size = sizeof(r->offcpu),
			 .flags = open ? SHM_F_OPEN : 0 },
		.start = o->t_out, .end = t_in < o->t_out ? o->t_out : t_in,
		.state = o->state,
	};
	r->offcpu.stack_id = offcpu_stack(s, tid, o);
	return s->err;
}

static int batch_add(struct bpfsrc *s, uint32_t tid, const union rec *r)
{
	struct batched *b = grow(s->batch, s->nbatch, &s->batch_cap, sizeof(*b), 256);

	if (!b)
		return -ENOMEM;
	s->batch = b;
	b = &s->batch[s->nbatch++];
	b->key = rec_key(r, 0);
	b->tid = tid;
	memcpy(&b->r, r, r->h.size);
	return 0;
}

static int on_event(void *ctx, void *data, size_t size)
{
	struct bpfsrc *s = ctx;
	const struct at_ev_hdr *h = data;
	union rec r;
	int err;

	if (s->err)
		return s->err;
	if (size < sizeof(*h))
		return 0;
	err = thread_seen(s, h->tid, clock_ns(CLOCK_MONOTONIC));
	if (!err && h->type == AT_EV_CALL && size >= sizeof(struct at_ev_call)) {
		err = call_record(s, data, &r);
		if (err == -EBADMSG)
			return 0;
	} else if (!err && h->type == AT_EV_OFFCPU && size >= sizeof(struct at_ev_offcpu)) {
		const struct at_ev_offcpu *e = data;

		err = offcpu_record(s, h->tid, &e->off, e->t_in, 0, &r);
	} else {
		return err;
	}
	if (!err)
		err = batch_add(s, h->tid, &r);
	s->err = err;
	return err;
}

/* Sorts the batch by key (insertion sort on an index: the ring is nearly
 * in order) and hands it on. */
static int flush_batch(struct bpfsrc *s)
{
	size_t *ix;
	int err = 0;

	if (!s->nbatch)
		return 0;
	ix = malloc(s->nbatch * sizeof(*ix));
	if (!ix)
		return -ENOMEM;
	for (size_t i = 0; i < s->nbatch; i++) {
		size_t j = i;

		while (j && s->batch[ix[j - 1]].key > s->batch[i].key) {
			ix[j] = ix[j - 1];
			j--;
		}
		ix[j] = i;
	}
	for (size_t i = 0; i < s->nbatch && !err; i++) {
		const struct batched *b = &s->batch[ix[i]];
		union rec r;

		memcpy(&r, &b->r, b->r.h.size);
		err = hand_on(s, b->tid, &r);
	}
	free(ix);
	s->nbatch = 0;
	return err;
}

static int poll_ring(struct bpfsrc *s)
{
	int n;

	s->err = report_modules(s);
	if (s->err)
		return s->err;
	n = ring_buffer__consume(s->rb);
	if (s->err)
		return s->err;
	if (n < 0 && n != -EINTR)
		return n;
	return flush_batch(s);
}

int bpfsrc_poll(struct bpfsrc *s, const struct rec_sink *sink)
{
	if (s->stopped)
		return 0;
	s->sink = sink;
	return poll_ring(s);
}

/* ---- counts and drops ---- */

static int thread_alive(const struct bpfsrc *s, uint32_t tid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/task/%u", (int)s->conf.pid, tid);
	return access(path, F_OK) == 0;
}

static uint64_t grew(uint64_t *base, uint64_t now)
{
	uint64_t d = now >= *base ? now - *base : now;

	*base = now;
	return d;
}

/* Hands on the counters and drops that grew; forgets the threads that are
 * gone (final: nothing can grow them any more). */
static int flush_counts(struct bpfsrc *s, int final)
{
	struct at_thread *t = &s->tstate;
	uint32_t key, next, *prev = NULL;
	int ncpu = libbpf_num_possible_cpus(), err = 0;

	while (!err && bpf_map_get_next_key(s->threads_fd, prev, &next) == 0) {
		struct thread_base *b;
		int64_t ix;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(s->threads_fd, &key, t))
			continue;
		err = thread_seen(s, key, clock_ns(CLOCK_MONOTONIC));
		ix = ptrmap_get(&s->threads_seen, key, NULL);
		if (err || !ix)
			break;
		b = &s->bases[ix - 1];
		for (uint16_t fn = 1; !err && fn < SHM_FN_COUNT; fn++) {
			uint64_t dc = grew(&b->count[fn], t->count[fn]);
			uint64_t db = grew(&b->bytes[fn], t->bytes[fn]);

			if (dc || db)
				err = s->sink->counts(s->sink->ctx, key, fn, dc, db);
		}
		for (int d = 0; !err && d < AT_DROP_COUNT; d++) {
			uint64_t n = grew(&b->dropped[d], t->dropped[d]);

			if (n)
				err = s->sink->drops(s->sink->ctx, key, drop_reason[d], n);
		}
		if (!err && !final && !thread_alive(s, key)) {
			bpf_map_delete_elem(s->threads_fd, &key);
			memset(b, 0, sizeof(*b));
			b->tid = key;
		}
	}
	if (ncpu > 0 && !err) {
		uint64_t *v = calloc((size_t)ncpu, sizeof(*v));

		if (!v)
			return -ENOMEM;
		for (uint32_t d = 0; !err && d < AT_DROP_COUNT; d++) {
			uint64_t sum = 0, n;

			if (bpf_map_lookup_elem(s->lost_fd, &d, v))
				continue;
			for (int c = 0; c < ncpu; c++)
				sum += v[c];
			n = grew(&s->lost_base[d], sum);
			if (n)
				err = s->sink->drops(s->sink->ctx, 0, drop_reason[d], n);
		}
		free(v);
	}
	return err;
}

int bpfsrc_tick(struct bpfsrc *s, const struct rec_sink *sink)
{
	uint64_t now = clock_ns(CLOCK_MONOTONIC);
	char why[512];
	int err = 0;

	if (s->stopped)
		return 0;
	s->sink = sink;
	if (s->ndevice_links && now - s->t_attach >= LEARN_DEVICE_NS) {
		destroy_links(s->device_links, s->ndevice_links, 1);
		destroy_links(s->device_links, s->ndevice_links, 0);
		s->ndevice_links = 0;
	}
	if (now - s->t_counts >= TICK_COUNTS_NS) {
		s->t_counts = now;
		err = poll_ring(s);
		if (!err)
			err = flush_counts(s, 0);
	}
	if (!err && now - s->t_rescan >= RESCAN_NS) {
		s->t_rescan = now;
		why[0] = '\0';
		s->err = 0;
		err = rescan(s, now, why, sizeof(why));
		if (err && why[0]) {
			/* A library loaded later that cannot be probed costs
			 * its calls, not the session. */
			log_warn("pid %d: %s", (int)s->conf.pid, why);
			err = 0;
		}
	}
	return err;
}

/* The intervals of the threads still off the CPU: they end now. */
static int close_offcpu(struct bpfsrc *s, uint64_t now)
{
	uint32_t key, next, *prev = NULL;
	struct at_off o;
	union rec r;
	int err = 0;

	while (!err && bpf_map_get_next_key(s->offcpu_fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(s->offcpu_fd, &key, &o) || !o.t_out)
			continue;
		err = thread_seen(s, key, now);
		if (!err)
			err = offcpu_record(s, key, &o, now, 1, &r);
		if (!err)
			err = batch_add(s, key, &r);
	}
	return err ? err : flush_batch(s);
}

static void plink_destroy(struct plink *l)
{
	if (l->l)
		bpf_link__destroy(l->l);
	else if (l->fd >= 0)
		close(l->fd);
	l->l = NULL;
	l->fd = -1;
}

/* Links destroyed by one thread of destroy_links(). */
struct destroyer {
	pthread_t thread;
	struct plink *links;
	size_t n;
	unsigned parity, nthreads, me;
};

/* Every link of the given parity (in the arrays, return links sit at even
 * places and entry links at odd ones) whose place falls to this thread. */
static void *destroy_some(void *arg)
{
	struct destroyer *d = arg;

	for (size_t i = 0; i < d->n; i++)
		if (i % 2 == d->parity && (i / 2) % d->nthreads == d->me)
			plink_destroy(&d->links[i]);
	return NULL;
}

/*
 * Destroys the links of one parity (entries: 1, returns: 0).  Each removal
 * waits for the kernel's grace periods in the thread that makes it; from
 * many threads at once they share them (multi links; per-probe links are
 * serialized by the kernel anyway).  Without threads, in this one.
 */
static void destroy_links(struct plink *links, size_t n, unsigned parity)
{
	struct destroyer d[DESTROY_THREADS];
	unsigned want = (unsigned)(n / 2 < DESTROY_THREADS ? n / 2 : DESTROY_THREADS), started;

	for (started = 0; started < want; started++) {
		d[started] = (struct destroyer){ .links = links, .n = n, .parity = parity,
						 .nthreads = want, .me = started };
		if (pthread_create(&d[started].thread, NULL, destroy_some, &d[started]))
			break;
	}
	for (unsigned t = 0; t < started; t++)
		pthread_join(d[t].thread, NULL);
	for (size_t i = parity; i < n; i += 2)
		plink_destroy(&links[i]);
}

static void detach_all(struct bpfsrc *s)
{
	/* Entries first: a call that enters now is not recorded, and one in
	 * flight loses only its record (its return finds no entry). */
	destroy_links(s->links, s->nlinks, 1);
	destroy_links(s->links, s->nlinks, 0);
	s->nlinks = 0;
	destroy_links(s->device_links, s->ndevice_links, 1);
	destroy_links(s->device_links, s->ndevice_links, 0);
	s->ndevice_links = 0;
	bpf_link__destroy(s->offcpu_link);
	s->offcpu_link = NULL;
}

int bpfsrc_stop(struct bpfsrc *s, const struct rec_sink *sink, uint64_t *end_ns)
{
	int err;

	if (s->stopped)
		return 0;
	s->sink = sink;
	detach_all(s);
	if (!*end_ns)
		*end_ns = clock_ns(CLOCK_MONOTONIC);
	err = poll_ring(s);
	s->stopped = 1;
	if (!err && (s->conf.what & BPFSRC_OFFCPU))
		err = close_offcpu(s, *end_ns);
	if (!err)
		err = flush_counts(s, 1);
	return err;
}

/* ---- life ---- */

const char *bpfsrc_describe(const struct bpfsrc *s)
{
	return s->describe;
}

int bpfsrc_fd(const struct bpfsrc *s)
{
	return ring_buffer__epoll_fd(s->rb);
}

void bpfsrc_free(struct bpfsrc *s)
{
	if (!s)
		return;
	detach_all(s);
	ring_buffer__free(s->rb);
	probes_bpf__destroy(s->skel);
	for (size_t i = 0; i < s->nlibs; i++)
		free(s->libs[i].path);
	free(s->libs);
	for (size_t k = 0; k < s->nknown; k++)
		free(s->known[k].path);
	free(s->links);
	free(s->device_links);
	free(s->known);
	free(s->bases);
	free(s->batch);
	procmaps_free(&s->objs);
	caller_free(s->caller);
	ptrmap_free(&s->stack_ids);
	ptrmap_free(&s->threads_seen);
	free(s);
}

/* Loads the programs for s->conf, with only the ones it needs; the uprobe
 * programs for uprobe_multi links when s->multi. */
static int load(struct bpfsrc *s, char *why, size_t len)
{
	struct probes_bpf *k;
	int calls = !!(s->conf.what & (BPFSRC_CUDA | BPFSRC_HEAP));
	int err;

	libbpf_last[0] = '\0';
	k = probes_bpf__open();
	if (!k) {
		err = -errno;
		snprintf(why, len, "cannot open the BPF programs: %s", strerror(errno));
		return err;
	}
	s->skel = k;
	k->rodata->target_tgid = (uint32_t)s->conf.pid;
	if (s->conf.what & BPFSRC_HEAP)
		k->rodata->mean_ln2_q16 = (uint64_t)llround((double)s->conf.sample_bytes *
							     M_LN2 * 65536.0);
	bpf_program__set_autoload(k->progs.shm_call_enter, calls);
	bpf_program__set_autoload(k->progs.shm_call_exit, calls);
	bpf_program__set_autoload(k->progs.shm_heap_enter, calls);
	bpf_program__set_autoload(k->progs.shm_heap_exit, calls);
	bpf_program__set_autoload(k->progs.shm_offcpu, !!(s->conf.what & BPFSRC_OFFCPU));
	if (s->multi) {
		struct bpf_program *uprobes[] = { k->progs.shm_call_enter, k->progs.shm_call_exit,
						  k->progs.shm_heap_enter, k->progs.shm_heap_exit };

		for (size_t i = 0; i < sizeof(uprobes) / sizeof(uprobes[0]); i++)
			bpf_program__set_expected_attach_type(
				uprobes[i], (enum bpf_attach_type)AT_TRACE_UPROBE_MULTI);
	}
	bpf_map__set_max_entries(k->maps.events, calls ? RING_BYTES : RING_BYTES_OFFCPU);
	bpf_map__set_max_entries(k->maps.stacks, calls ? STACKS_MAX : STACKS_OFFCPU);
	if (!calls) {
		/* Unused, but a map cannot be left out: keep them tiny. */
		bpf_map__set_max_entries(k->maps.threads, 1);
		bpf_map__set_max_entries(k->maps.sampled_blocks, 1);
	}
	err = probes_bpf__load(k);
	if (err) {
		snprintf(why, len, "cannot load the BPF programs: %s%s%s%s", strerror(-err),
			 libbpf_last[0] ? " (libbpf: " : "", libbpf_last,
			 libbpf_last[0] ? ")" : "");
		return err;
	}
	s->stacks_fd = bpf_map__fd(k->maps.stacks);
	s->threads_fd = bpf_map__fd(k->maps.threads);
	s->offcpu_fd = bpf_map__fd(k->maps.offcpu);
	s->lost_fd = bpf_map__fd(k->maps.lost);
	s->rb = ring_buffer__new(bpf_map__fd(k->maps.events), on_event, s, NULL);
	if (!s->rb) {
		err = -errno;
		snprintf(why, len, "cannot open the BPF ring buffer: %s", strerror(errno));
	}
	return err;
}

struct bpfsrc *bpfsrc_new(const struct bpfsrc_conf *conf, char *why, size_t len)
{
	struct bpfsrc *s;
	int err = bpfsrc_check(why, len);

	if (err) {
		errno = -err;
		return NULL;
	}
	libbpf_set_print(libbpf_print);
	s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(why, len, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	s->conf = *conf;
	s->next_stack = BPFSRC_STACK_BASE;
	s->next_string = 1;
	s->t_attach = s->t_counts = s->t_rescan = clock_ns(CLOCK_MONOTONIC);
	err = procmaps_read(conf->pid, &s->objs);
	if (err) {
		snprintf(why, len, "cannot read /proc/%d/maps: %s%s", (int)conf->pid, strerror(-err),
			 err == -EACCES || err == -EPERM
			 ? " (another user's process needs CAP_SYS_PTRACE)" : "");
		goto fail;
	}
	s->caller = caller_new(conf->pid);
	/* uprobe_multi (kernels from 6.6) where the kernel takes it: detaching
	 * then costs one wait per file, not one per probe. */
	s->multi = !!(conf->what & (BPFSRC_CUDA | BPFSRC_HEAP));
	err = load(s, why, len);
	if (err && s->multi) {
		log_debug("uprobe_multi programs refused (%s): one link per probe", why);
		probes_bpf__destroy(s->skel);
		s->skel = NULL;
		s->multi = 0;
		err = load(s, why, len);
	}
	if (err)
		goto fail;
	if (conf->what & BPFSRC_OFFCPU) {
		s->offcpu_link = bpf_program__attach(s->skel->progs.shm_offcpu);
		if (!s->offcpu_link) {
			err = -errno;
			snprintf(why, len, "cannot attach to sched_switch: %s", strerror(errno));
			goto fail;
		}
	}
	why[0] = '\0';
	err = rescan(s, s->t_attach, why, len);
	if (err) {
		if (!why[0])
			snprintf(why, len, "cannot attach to pid %d: %s", (int)conf->pid,
				 strerror(-err));
		goto fail;
	}
	if ((conf->what & (BPFSRC_CUDA | BPFSRC_HEAP)) && !s->nlibs && !s->offcpu_link) {
		snprintf(why, len, "pid %d has loaded neither a CUDA runtime nor a C library to "
			 "probe", (int)conf->pid);
		err = -ENOENT;
		goto fail;
	}
	describe(s);
	return s;
fail:
	bpfsrc_free(s);
	errno = -err;
	return NULL;
}

#endif /* SHIMMER_BPF */
