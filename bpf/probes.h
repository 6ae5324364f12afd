/*
 * What the BPF programs (bpf/probes.bpf.c) and the collector's attach
 * engine (collector/bpfsrc.c) agree on: the records on the BPF ring buffer,
 * the layout of the maps the engine reads, and how a probe's cookie says
 * what to record.  Like libbpf-tools' shared headers it uses only the
 * kernel's __u32/__u64 types: the includer provides them (vmlinux.h on the
 * BPF side, <linux/types.h> on the user side).
 *
 * The BPF side knows nothing of the wire format (common/wire.h needs libc
 * headers that do not build for the BPF target): each probe's cookie
 * carries the wire function id as an opaque number, with a "shape" that
 * says which arguments to read and where they go.  The engine turns each
 * record into the same wire record the shim would have written.
 */
#ifndef SHIMMER_BPF_PROBES_H
#define SHIMMER_BPF_PROBES_H

/* ---- probe cookies ------------------------------------------------------ */

/*
 * cookie = fn | shape << 8 | flags << 16.  fn: the wire function id (enum
 * shm_fn, < AT_MAX_FN) for the runtime and heap probes, the index into the
 * engine's table of driver functions for the driver probes.  flags:
 * AT_CF_PTSZ for the _ptsz/_ptds variants.
 */
#define AT_COOKIE(fn, shape, flags) ((__u64)(fn) | (__u64)(shape) << 8 | (__u64)(flags) << 16)
#define AT_COOKIE_FN(c) ((__u32)(c) & 0xff)
#define AT_COOKIE_SHAPE(c) (((__u32)(c) >> 8) & 0xff)
#define AT_COOKIE_FLAGS(c) (((__u32)(c) >> 16) & 0xff)

#define AT_CF_PTSZ 0x1
/* A call that reaches the probed function by a direct call (call rel32 to
 * its own address) is its library's own: glibc's realloc calling malloc,
 * its thread exit freeing its cache.  An interposed function (the shim's)
 * is only ever reached through the PLT or the GOT, so such calls are not
 * recorded.  Set for probes in shared libraries, not in an executable,
 * where the application's own direct calls look the same. */
#define AT_CF_SKIP_DIRECT 0x2

/*
 * Where a call's fields come from (a0..a5: the integer argument registers;
 * s0, s1: the 7th and 8th arguments, on the stack; *aN: read through the
 * pointer when the call returns).  Names follow the runtime's functions.
 */
enum at_shape {
	/* CUDA runtime */
	AT_SH_ALLOC = 1,        /* ptr = *a0, bytes = a1 (cudaMalloc, cudaMallocHost) */
	AT_SH_ALLOC_FLAGS,      /* ptr = *a0, bytes = a1, aux = a2 (cudaHostAlloc, cudaMallocManaged) */
	AT_SH_ALLOC_STREAM,     /* ptr = *a0, bytes = a1, stream = a2 (cudaMallocAsync) */
	AT_SH_ALLOC_POOL,       /* ptr = *a0, bytes = a1, aux = a2, stream = a3 */
	AT_SH_PITCH,            /* ptr = *a0, aux = *a1, bytes = aux * a3, aux2 = a2 */
	AT_SH_FREE,             /* ptr = a0 (cudaFree, cudaFreeHost) */
	AT_SH_FREE_STREAM,      /* ptr = a0, stream = a1 */
	AT_SH_COPY,             /* ptr = a0, aux = a1, bytes = a2, kind = a3 */
	AT_SH_COPY_STREAM,      /* as COPY, stream = a4 */
	AT_SH_PEER,             /* ptr = a0, device = a1, aux = a2, aux2 = a3, bytes = a4, stream = a5 */
	AT_SH_MEMSET,           /* ptr = a0, aux = (int)a1, bytes = a2 */
	AT_SH_MEMSET_STREAM,    /* as MEMSET, stream = a3 */
	AT_SH_LAUNCH,           /* aux = a0, grid = a1:a2, block = a3:a4, bytes = s0, stream = s1 */
	AT_SH_LAUNCH_EXC,       /* aux = a1, grid, block, bytes, stream from *a0 (cudaLaunchConfig_t) */
	AT_SH_GRAPH,            /* aux = a0, stream = a1 */
	AT_SH_STREAM,           /* stream = a0 */
	AT_SH_NONE,             /* nothing (cudaDeviceSynchronize) */
	AT_SH_EVENT,            /* aux = a0 */
	AT_SH_WAIT_EVENT,       /* stream = a0, aux = a1, kind = a2 */
	AT_SH_SET_DEVICE,       /* no record: the thread's device becomes a0 */
	AT_SH_GET_DEVICE,       /* no record: the thread's device becomes *a0 */
	/* the malloc family */
	AT_SH_MALLOC,           /* n = a0 (malloc, valloc, pvalloc) */
	AT_SH_CALLOC,           /* n = a0 * a1 */
	AT_SH_REALLOC,          /* old = a0, n = a1 */
	AT_SH_REALLOCARRAY,     /* old = a0, n = a1 * a2 */
	AT_SH_POSIX_MEMALIGN,   /* ptr = *a0 when it returns 0, aux = a1, n = a2 */
	AT_SH_ALIGNED,          /* aux = a0, n = a1 (aligned_alloc, memalign) */
	AT_SH_HEAP_FREE,        /* old = a0 */
	/* the CUDA driver */
	AT_SH_DRIVER,           /* only the times */
	AT_SH_COUNT
};

#define AT_SH_IS_HEAP(s) ((s) >= AT_SH_MALLOC && (s) <= AT_SH_HEAP_FREE)

/* ---- limits -------------------------------------------------------------- */

#define AT_MAX_FN 48       /* wire function ids counted per thread */
#define AT_MAX_PENDING 8   /* probed calls in flight on one thread */
#define AT_STACK_DEPTH 127 /* frames kept in the stack map (PERF_MAX_STACK_DEPTH) */
#define AT_SP_WORDS 16     /* words of the user stack an off-CPU record copies */

/* Reasons for lost data, counted per thread (at_thread.dropped[]) or, when
 * no thread state could be made, in the per-CPU array `lost`. */
enum at_drop {
	AT_DROP_RING_FULL = 0, /* the ring buffer was full: the record is lost */
	AT_DROP_NO_THREAD,     /* the thread table was full: the call is lost, uncounted */
	AT_DROP_NESTED,        /* more than AT_MAX_PENDING probed calls in flight */
	AT_DROP_STACK,         /* the stack map had no room (collision): stored without stack */
	AT_DROP_SAMPLED_FULL,  /* the sampled-block table was full: sample not shipped */
	AT_DROP_COUNT
};

/* ---- maps the engine reads ------------------------------------------------ */

/* A probed call between its entry and its return. */
struct at_pending {
	__u64 sp;      /* stack pointer at entry: the return finds its entry by it */
	__u64 t_begin; /* CLOCK_MONOTONIC */
	__u64 a[6];    /* argument registers */
	__u64 s[2];    /* the 7th and 8th arguments (launches) */
	__u64 ret1;    /* the return address at entry: the caller */
	__u64 n;       /* heap: bytes requested */
	__s32 stackid; /* user stack at entry, < 0 when none */
	__u32 cookie;
	__u32 flags;   /* AT_PF_* */
	__u32 pad;
};

#define AT_PF_NESTED 0x1   /* a probed call inside another of its kind: ignored */
#define AT_PF_SKIP 0x2     /* heap: neither sampled nor releasing a sample */
#define AT_PF_SAMPLED 0x4  /* heap: the sampler chose it */
#define AT_PF_RELEASED 0x8 /* heap: it releases a sampled block */
#define AT_PF_FAILED 0x10  /* heap: the call failed (NULL, or posix_memalign's error) */
#define AT_PF_HEAPD 0x20   /* it raised heap_depth (lowered at its return) */
#define AT_PF_CUDAD 0x40   /* it raised cuda_depth */

/* Per traced thread (map `threads`, keyed by tid).  Only the thread itself
 * writes its entry; the engine reads count[], bytes[] and dropped[] while
 * it runs and deletes the entries of threads that are gone. */
struct at_thread {
	__u64 countdown;  /* heap sampler: bytes until the next sample */
	__s32 device;     /* current CUDA device, -1 until known */
	__u32 depth;      /* pending[] in use */
	__u32 heap_depth; /* heap calls in flight (nested ones are libc's own) */
	__u32 cuda_depth; /* runtime calls in flight */
	struct at_pending pending[AT_MAX_PENDING];
	__u64 count[AT_MAX_FN]; /* exact calls per wire function */
	__u64 bytes[AT_MAX_FN]; /* exact bytes requested per wire function */
	__u64 dropped[AT_DROP_COUNT];
};

/* A thread that went off the CPU (map `offcpu`, keyed by tid): what the
 * switch back in needs to make the record. */
struct at_off {
	__u64 t_out;
	__u64 ip, sp, bp;
	__u64 words[AT_SP_WORDS]; /* the user stack from sp */
	__s32 stackid;
	__u32 state; /* enum at_off_state */
};

enum at_off_state {
	AT_OFF_PREEMPTED = 1, /* runnable, waiting for a CPU */
	AT_OFF_SLEEP = 2,     /* interruptible sleep: I/O, locks, waits */
	AT_OFF_DISK = 3,      /* uninterruptible sleep */
	AT_OFF_OTHER = 4,     /* stopped, traced, parked */
};

/* ---- ring buffer records ---------------------------------------------- */

enum at_ev_type {
	AT_EV_CALL = 1,   /* struct at_ev_call */
	AT_EV_OFFCPU = 2, /* struct at_ev_offcpu */
};

struct at_ev_hdr {
	__u32 type; /* enum at_ev_type */
	__u32 tid;
};

/*
 * A CUDA runtime, heap or driver call, its fields decoded by shape (the
 * wire record's names).  heap: ptr is the block returned (free: released),
 * bytes the size requested, aux realloc's old block or the alignment.
 */
struct at_ev_call {
	struct at_ev_hdr h;
	__u32 cookie;
	__s32 stackid;
	__u64 ret1;
	__u64 t_begin, t_end;
	__s64 ret;     /* the return value (cudaError_t, CUresult, the pointer) */
	__s32 device;  /* -1: unknown */
	__u32 flags;   /* AT_PF_SAMPLED, AT_PF_RELEASED */
	__u64 ptr, bytes, stream, aux, aux2;
	__u32 kind;
	__u32 grid[3], block[3];
	__u32 pad;
};

/* A thread was off the CPU from t_out to t_in (t_in 0: still off at the
 * detach, the engine completes it). */
struct at_ev_offcpu {
	struct at_ev_hdr h;
	struct at_off off;
	__u64 t_in;
};

/* cudaLaunchConfig_t's head, as cudaLaunchKernelExC's config points at it
 * (the engine checks the layout against the CUDA header). */
struct at_launch_config {
	__u32 grid[3];
	__u32 block[3];
	__u64 dynamic_smem;
	__u64 stream;
};

#endif /* SHIMMER_BPF_PROBES_H */
