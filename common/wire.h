/*
 * The shimmer wire format: what libshimmer.so (the shim, inside traced
 * processes) and shimmerd (the collector) agree on, and nothing else.
 *
 * Two channels join a traced process to the collector:
 *
 *  1. A SOCK_SEQPACKET Unix socket for control messages.  Each send() is one
 *     whole message, so threads send without a lock.  The first message is
 *     HELLO, which carries a memfd (SCM_RIGHTS) holding the event region.
 *
 *     A control client (`shimmer ls`, `shimmer ctl`) speaks on the same
 *     socket: its first message is REQUEST, answered by REPLY messages.
 *
 *  2. The event region: a sealed memfd shared by both sides.  It holds one
 *     single-producer single-consumer ring per traced thread ("slot"), plus
 *     exact per-thread call counters.  The hot path only writes into the
 *     thread's own slot: no lock, no syscall, no malloc.  Because the pages
 *     are shared, whatever a thread wrote survives SIGKILL of the process:
 *     the collector drains the rings after the socket closes.
 *
 * Strings are interned: a STRING message defines (id -> text) once per
 * process, and later messages and records refer to the id.
 *
 * Everything the collector reads, from the socket or the region, is
 * untrusted and validated; the shim may be buggy or the peer hostile.
 * All integers are native-endian (both sides are on the same host).
 */
#ifndef SHIMMER_WIRE_H
#define SHIMMER_WIRE_H

#include <stdint.h>

#define SHM_WIRE_VERSION 12 /* 2: GPU window records, CUPTI drop count; 3: 64-bit correlation;
			    4: heap order (seq), SIGNAL, the region's wake futex;
			    5: launch stacks in API records;
			    6: the job in HELLO, the region's control block, REQUEST/REPLY;
			    7: the control block read by the hooks, the plan's deadlines;
			    8: the collector's committed marks (slot and region);
			    9: reconnection (SHM_HELLO_RECONNECT, committed counters);
			    10: the stack tables' refused captures (stack_full);
			    11: pymalloc's arenas (SHM_FN_PYMALLOC_ARENA_*);
			    12: the process's CPU time in BYE (SHM_BYE_CPU) */
#define SHM_MAGIC 0x524d4853u /* "SHMR" */

/* Largest control message either side sends or accepts. */
#define SHM_MSG_MAX 65536u

/* ---- intercepted functions ------------------------------------------- */

/*
 * X(enum suffix, name, family, flags).  Ids are stable within a wire
 * version, and a new function takes the next id at the end: the ids
 * already stored (functions.fn_id) keep their meaning; the collector
 * stores the names, so the store never depends on them.  The _ptsz/_ptds
 * variants share their base function's id and set SHM_F_PTSZ in the
 * record.  A heap function is one whose calls make host memory, whatever
 * makes it: the malloc family, and (SHM_FNF_PAGES) pymalloc's arenas,
 * which CPython maps itself (preload/pyarena.h); nothing may assume the
 * heap ids are one range.
 */
#define SHM_FN_LIST(X)                                                       \
	X(MALLOC, "malloc", HEAP, SHM_FNF_ALLOC)                              \
	X(FREE, "free", HEAP, SHM_FNF_FREE)                                   \
	X(CALLOC, "calloc", HEAP, SHM_FNF_ALLOC)                              \
	X(REALLOC, "realloc", HEAP, SHM_FNF_ALLOC | SHM_FNF_FREE)             \
	X(REALLOCARRAY, "reallocarray", HEAP, SHM_FNF_ALLOC | SHM_FNF_FREE)   \
	X(POSIX_MEMALIGN, "posix_memalign", HEAP, SHM_FNF_ALLOC)              \
	X(ALIGNED_ALLOC, "aligned_alloc", HEAP, SHM_FNF_ALLOC)                \
	X(MEMALIGN, "memalign", HEAP, SHM_FNF_ALLOC)                          \
	X(VALLOC, "valloc", HEAP, SHM_FNF_ALLOC)                              \
	X(PVALLOC, "pvalloc", HEAP, SHM_FNF_ALLOC)                            \
	X(CUDA_MALLOC, "cudaMalloc", CUDA, SHM_FNF_ALLOC)                     \
	X(CUDA_FREE, "cudaFree", CUDA, SHM_FNF_FREE)                          \
	X(CUDA_MALLOC_HOST, "cudaMallocHost", CUDA, SHM_FNF_ALLOC)            \
	X(CUDA_HOST_ALLOC, "cudaHostAlloc", CUDA, SHM_FNF_ALLOC)              \
	X(CUDA_FREE_HOST, "cudaFreeHost", CUDA, SHM_FNF_FREE)                 \
	X(CUDA_MALLOC_MANAGED, "cudaMallocManaged", CUDA, SHM_FNF_ALLOC)      \
	X(CUDA_MALLOC_PITCH, "cudaMallocPitch", CUDA, SHM_FNF_ALLOC)          \
	X(CUDA_MALLOC_ASYNC, "cudaMallocAsync", CUDA, SHM_FNF_ALLOC)          \
	X(CUDA_FREE_ASYNC, "cudaFreeAsync", CUDA, SHM_FNF_FREE)               \
	X(CUDA_MALLOC_FROM_POOL_ASYNC, "cudaMallocFromPoolAsync", CUDA,       \
	  SHM_FNF_ALLOC)                                                     \
	X(CUDA_MEMCPY, "cudaMemcpy", CUDA, SHM_FNF_COPY | SHM_FNF_SYNC)       \
	X(CUDA_MEMCPY_ASYNC, "cudaMemcpyAsync", CUDA, SHM_FNF_COPY)           \
	X(CUDA_MEMCPY_PEER_ASYNC, "cudaMemcpyPeerAsync", CUDA, SHM_FNF_COPY)  \
	X(CUDA_MEMSET, "cudaMemset", CUDA, 0)                                 \
	X(CUDA_MEMSET_ASYNC, "cudaMemsetAsync", CUDA, 0)                      \
	X(CUDA_LAUNCH_KERNEL, "cudaLaunchKernel", CUDA, SHM_FNF_LAUNCH)       \
	X(CUDA_LAUNCH_KERNEL_STUB, "__cudaLaunchKernel", CUDA, SHM_FNF_LAUNCH) \
	X(CUDA_LAUNCH_KERNEL_EXC, "cudaLaunchKernelExC", CUDA, SHM_FNF_LAUNCH) \
	X(CUDA_LAUNCH_COOPERATIVE_KERNEL, "cudaLaunchCooperativeKernel", CUDA, \
	  SHM_FNF_LAUNCH)                                                    \
	X(CUDA_GRAPH_LAUNCH, "cudaGraphLaunch", CUDA, SHM_FNF_LAUNCH)         \
	X(CUDA_STREAM_SYNCHRONIZE, "cudaStreamSynchronize", CUDA, SHM_FNF_SYNC) \
	X(CUDA_DEVICE_SYNCHRONIZE, "cudaDeviceSynchronize", CUDA, SHM_FNF_SYNC) \
	X(CUDA_EVENT_SYNCHRONIZE, "cudaEventSynchronize", CUDA, SHM_FNF_SYNC) \
	X(CUDA_STREAM_WAIT_EVENT, "cudaStreamWaitEvent", CUDA, SHM_FNF_WAIT) \
	X(PYMALLOC_ARENA_MMAP, "pymalloc_arena_mmap", HEAP,                   \
	  SHM_FNF_ALLOC | SHM_FNF_PAGES)                                     \
	X(PYMALLOC_ARENA_MUNMAP, "pymalloc_arena_munmap", HEAP,               \
	  SHM_FNF_FREE | SHM_FNF_PAGES)

/* Function property flags (shm_fn_info.flags). */
#define SHM_FNF_ALLOC 0x1u  /* returns memory */
#define SHM_FNF_FREE 0x2u   /* releases memory */
#define SHM_FNF_COPY 0x4u   /* moves bytes */
#define SHM_FNF_LAUNCH 0x8u /* starts GPU work */
#define SHM_FNF_SYNC 0x10u  /* blocks the calling CPU thread until GPU work is
			     * done (the synchronous cudaMemcpy too); the tools'
			     * "CPU blocked in synchronizing calls" */
#define SHM_FNF_WAIT 0x20u  /* makes a stream wait for other GPU work, not the CPU */
/* Maps or unmaps whole pages for an allocator of its own, not a call of
 * the malloc family: CPython's mmap and munmap of a pymalloc arena (its
 * objects of 512 bytes or less live in them).  Heap memory all the same;
 * an unmap's bytes are the pages it gave back. */
#define SHM_FNF_PAGES 0x40u

enum shm_family { SHM_FAMILY_HEAP = 1, SHM_FAMILY_CUDA = 2 };

/*
 * A synchronizing call (SHM_FNF_SYNC), a copy or a memset that kept its
 * thread this long or longer (ns) carries its caller's stacks (stack_id,
 * pystack_id of shm_rec_cuda): where the CPU waited for the GPU.  Shorter
 * calls carry none, so that unwinding never costs much against the wait.
 */
#define SHM_BLOCKED_STACK_NS 50000u

/*
 * The collector reads each connected process's threads' CPU time this
 * often (store table cpu_time), keeping a reading only when it changed: a
 * rise between two readings happened within the period before the later.
 */
#define SHM_CPUTIME_PERIOD_NS 100000000

/* The calls that may block their thread on the GPU: they get stacks when
 * they did (SHM_BLOCKED_STACK_NS). */
#define SHM_FN_MAY_BLOCK(fn)                                                  	((shm_fn_info[fn].flags & (SHM_FNF_SYNC | SHM_FNF_COPY)) ||         	 (fn) == SHM_FN_CUDA_MEMSET || (fn) == SHM_FN_CUDA_MEMSET_ASYNC)

/* Of the heap functions, those that release a block and make none: free,
 * and an arena's unmap (a realloc does both).  (cudaFree's flags are the
 * same: ask of heap functions only.) */
#define SHM_FN_RELEASES_ONLY(fn)                                              \
	((shm_fn_info[fn].flags & (SHM_FNF_ALLOC | SHM_FNF_FREE)) == SHM_FNF_FREE)

/* The runtime calls that start GPU work: launches, copies, memsets. */
#define SHM_FN_STARTS_GPU_WORK(fn)                                            \
	((shm_fn_info[fn].flags & (SHM_FNF_LAUNCH | SHM_FNF_COPY)) ||       \
	 (fn) == SHM_FN_CUDA_MEMSET || (fn) == SHM_FN_CUDA_MEMSET_ASYNC)

#define SHM_FN_ENUM(id, name, family, flags) SHM_FN_##id,
enum shm_fn {
	SHM_FN_NONE = 0,
	SHM_FN_LIST(SHM_FN_ENUM)
	SHM_FN_COUNT
};
#undef SHM_FN_ENUM

struct shm_fn_info {
	const char *name;
	uint8_t family; /* enum shm_family */
	uint8_t flags;  /* SHM_FNF_* */
};

/* Indexed by enum shm_fn; entry 0 is { NULL, 0, 0 }. */
#define SHM_FN_INFO(id, name_, family_, flags_)                              \
	[SHM_FN_##id] = { .name = name_, .family = SHM_FAMILY_##family_,      \
			  .flags = (flags_) },
static const struct shm_fn_info shm_fn_info[SHM_FN_COUNT] = {
	SHM_FN_LIST(SHM_FN_INFO)
};
#undef SHM_FN_INFO

/* ---- control messages (socket) ---------------------------------------- */

enum shm_msg_type {
	SHM_MSG_HELLO = 1,  /* shim -> collector, with the region's memfd */
	SHM_MSG_STRING = 2, /* shim -> collector: define an interned string */
	SHM_MSG_THREAD = 3, /* shim -> collector: a thread claimed a slot */
	SHM_MSG_KICK = 4,   /* shim -> collector: a lossless ring is full, drain now */
	SHM_MSG_BYE = 5,    /* shim -> collector: orderly exit */
	SHM_MSG_GPU_STATUS = 6, /* shim -> collector: GPU activity tracing state */
	SHM_MSG_SIGNAL = 7, /* shim -> collector: a fatal signal is ending the process */
	SHM_MSG_REQUEST = 8, /* control client -> collector: ls, ctl */
	SHM_MSG_REPLY = 9,   /* collector -> control client: one row, or the end */
};

struct shm_msg_hdr {
	uint32_t magic;   /* SHM_MAGIC */
	uint16_t version; /* SHM_WIRE_VERSION */
	uint16_t type;    /* enum shm_msg_type */
	uint32_t len;     /* whole message in bytes, header included */
	uint32_t reserved;
};

enum shm_malloc_mode {
	SHM_MALLOC_OFF = 0,    /* CUDA only */
	SHM_MALLOC_SAMPLE = 1, /* exact counters, Poisson byte-sampled events */
	SHM_MALLOC_ALL = 2,    /* every call is an event */
};

enum shm_clock {
	SHM_CLOCK_MONOTONIC = 1, /* timestamps are CLOCK_MONOTONIC nanoseconds */
	SHM_CLOCK_TSC = 2,       /* timestamps are raw invariant-TSC ticks */
};

#define SHM_HELLO_LOSSLESS 0x1u /* SHIMMER_LOSSLESS=1: producers wait, never drop */
#define SHM_HELLO_OFFCPU 0x2u   /* SHIMMER_OFFCPU=1: the collector records off-CPU time */
/* SHIMMER_MALLOC=all: what the collector keeps of the host heap.  AGG: the
 * answers computed as events arrive and a row only for the blocks that need
 * one (the default); ROWS: a row per allocation (SHIMMER_HEAP_ROWS=all);
 * both: both, from the same events (SHIMMER_HEAP_ROWS=both). */
#define SHM_HELLO_HEAP_ROWS 0x4u
#define SHM_HELLO_HEAP_AGG 0x8u
/*
 * The process lost its collector (it crashed or was killed) and says HELLO
 * again to the next one, from the same region (the memfd it kept) and with
 * the fields of its first HELLO (pid, uid, host, start_mono_ns...): the
 * collector continues the process's row, which must be one it can prove
 * is this process's (same pid, uid, host and start time, ended as
 * 'collector_lost'), and counts what the dead collector read but never
 * committed, and what was dropped since, from the committed marks
 * (struct shm_slot).  Anything else is refused.
 */
#define SHM_HELLO_RECONNECT 0x10u
/* shm_region.collector_ended */
#define SHM_ENDED_ROW 1u
#define SHM_ENDED_REFUSED 2u

/*
 * Where the job key in HELLO came from (the collector groups one user's
 * processes of one job into one recording; see docs/service.md):
 * SHIMMER_JOB; a launcher's variable (TORCHELASTIC_RUN_ID, SLURM_JOB_ID,
 * PMIX_NAMESPACE, ...), written "launcher:value"; or, failing both, the
 * process group, "pgid:N".  The collector prefers a traced parent's job to
 * the last two.
 */
enum shm_job_kind {
	SHM_JOB_NAMED = 1,
	SHM_JOB_LAUNCHER = 2,
	SHM_JOB_PGID = 3,
};

#define SHM_JOB_MAX 128u /* bytes of a job key */

#define SHM_NO_RANK (-1)

/* Where a process's rank and local rank come from: the first of these
 * environment variables that holds a non-negative integer (HELLO's rank and
 * local_rank; the collector reads the same from an attached process). */
#define SHM_RANK_VARS "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"
#define SHM_LOCAL_RANK_VARS "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"

/*
 * HELLO: exe, argv, hostname and the job key follow the fixed part, in that
 * order, with the lengths given (no terminators; argv's elements are
 * separated by NUL).
 * start_mono_ns and start_tsc were read back to back, so the collector can
 * place TSC timestamps on CLOCK_MONOTONIC, and start_wall_ns on the wall
 * clock.
 */
struct shm_msg_hello {
	struct shm_msg_hdr hdr;
	uint32_t pid;         /* must be the socket's peer's (SO_PEERCRED) */
	uint32_t ppid;
	uint32_t uid;         /* the effective uid: must be the peer's too */
	uint32_t flags;       /* SHM_HELLO_* */
	int32_t rank;         /* RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID */
	int32_t local_rank;   /* LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID */
	uint32_t malloc_mode; /* enum shm_malloc_mode */
	uint32_t clock;       /* enum shm_clock */
	uint64_t sample_bytes;
	uint64_t start_wall_ns; /* CLOCK_REALTIME */
	uint64_t start_mono_ns; /* CLOCK_MONOTONIC */
	uint64_t start_ts;      /* the same instant in the record clock */
	uint64_t region_bytes;  /* size of the memfd */
	uint32_t nslots;
	uint32_t ring_bytes;
	uint16_t exe_len;
	uint16_t argv_len;
	uint16_t host_len;
	uint16_t job_len;     /* at most SHM_JOB_MAX */
	uint32_t job_kind;    /* enum shm_job_kind */
	/* 0: argv is the whole command line.  Else argv was cut at an
	 * argument boundary to fit the message, and this is the whole
	 * command line's length as argv_len counts it (more than argv_len).
	 * It fills what was the struct's tail padding, which every shim of
	 * this wire version sends as zeros: the layout is unchanged. */
	uint32_t argv_bytes;
	/* char text[exe_len + argv_len + host_len + job_len]; */
};
_Static_assert(sizeof(struct shm_msg_hello) == 112, "HELLO's layout is wire version 10's");

/* STRING: text follows, len bytes, no terminator.  Ids are per process. */
struct shm_msg_string {
	struct shm_msg_hdr hdr;
	uint32_t id;
	uint32_t len;
	/* char text[len]; */
};

struct shm_msg_thread {
	struct shm_msg_hdr hdr;
	uint32_t slot;
	uint32_t tid;
	uint32_t name_id; /* interned string, 0 = none */
	uint32_t pad;
	uint64_t ts; /* record clock */
};

/*
 * BYE: the orderly end (exit(), a return from main, _exit), with the
 * process's own CPU time read as it said BYE (flags SHM_BYE_CPU): the
 * collector reads its threads from /proc every SHM_CPUTIME_PERIOD_NS, but
 * a process reaped by its parent before the collector's last reading, and
 * every thread that ended before it, would lose what they ran since their
 * last reading.  cpu_ns: CLOCK_PROCESS_CPUTIME_ID (every thread of the
 * process, ended ones too, in the scheduler's ns as /proc's schedstat);
 * user_ns and sys_ns: getrusage(RUSAGE_SELF)'s split of it (microseconds,
 * as the kernel apportions it).  A process killed (SIGKILL), or that
 * exec'd, says no BYE and has no such reading.
 */
#define SHM_BYE_CPU 0x1u /* cpu_ns, user_ns and sys_ns were read */

struct shm_msg_bye {
	struct shm_msg_hdr hdr;
	uint64_t ts; /* record clock, at exit */
	uint32_t flags; /* SHM_BYE_* */
	uint32_t pad;
	uint64_t cpu_ns;
	uint64_t user_ns;
	uint64_t sys_ns;
};
_Static_assert(sizeof(struct shm_msg_bye) == 56, "BYE's layout is wire version 12's");

/*
 * GPU_STATUS: whether GPU-side records (CUPTI) will come, and if not why.
 * Sent when CUDA starts in the process (or at the first CUDA call if the
 * driver's injection hook did not run), again if the state changes.  text:
 * one human-readable line (the CUPTI path, the error, the other profiler).
 */
enum shm_gpu_status {
	SHM_GPU_ACTIVE = 1,     /* CUPTI activity tracing is on */
	SHM_GPU_NO_CUPTI = 2,   /* no libcupti could be loaded */
	SHM_GPU_BUSY = 3,       /* another CUPTI subscriber (a profiler) owns CUPTI */
	SHM_GPU_ERROR = 4,      /* CUPTI failed (old driver, unsupported call, ...) */
	SHM_GPU_DISABLED = 5,   /* SHIMMER_CUPTI=0 */
	/* The collector's own, never sent by a shim (a GPU_STATUS message
	 * carries one of the above): the process was traced by attaching
	 * (eBPF uprobes), which see the CPU side of CUDA calls only. */
	SHM_GPU_ATTACHED = 6,
};

struct shm_msg_gpu_status {
	struct shm_msg_hdr hdr;
	uint32_t status; /* enum shm_gpu_status */
	uint32_t len;
	/* char text[len]; */
};

/*
 * SIGNAL: sent from the shim's handler of a fatal signal (SIGSEGV, SIGBUS,
 * SIGFPE, SIGILL, SIGABRT) just before the default action (or the handler
 * the program had before the shim's, which it chains to) runs.  The process
 * may still survive it (a handler of the program's that recovers), so it
 * says what the shim saw, not how the process ended; the socket closing
 * after it without a BYE says that.  code and addr: siginfo's si_code and
 * si_addr; tid: the thread that received it; ts: record clock.
 */
struct shm_msg_signal {
	struct shm_msg_hdr hdr;
	int32_t signo;
	int32_t code;
	uint64_t addr;
	uint32_t tid;
	uint32_t pad;
	uint64_t ts;
};

/*
 * Control clients (`shimmer ls`, `shimmer ctl`): one REQUEST as the first
 * and only message, answered by REPLY messages: rows (SHM_REPLY_RECORDING,
 * SHM_REPLY_PROCESS, SHM_REPLY_ACTED), then exactly one SHM_REPLY_END.
 * Who asks is the kernel's word (SO_PEERCRED): a user sees and controls
 * only their own processes and recordings, root all of them.
 *
 * Targets: pid != 0 names one traced process, else job_len > 0 names a job
 * (its key as `shimmer ls` shows it), else the op is about everything the
 * user may see (LIST, STATUS only).
 */
enum shm_req_op {
	SHM_REQ_LIST = 1,   /* the recordings (SHM_REPLY_RECORDING rows) */
	SHM_REQ_STATUS = 2, /* the connected processes (SHM_REPLY_PROCESS rows) */
	SHM_REQ_PAUSE = 3,  /* SHM_CTL_PAUSE to the targets (SHM_REPLY_ACTED rows) */
	SHM_REQ_RESUME = 4, /* SHM_CTL_RESUME */
	SHM_REQ_WINDOW = 5, /* SHM_CTL_WINDOW of arg_ns */
	SHM_REQ_ATTACH = 6, /* the daemon attaches to pid (eBPF) for arg_ns (0: until
			     * it exits, DETACH or the daemon stops); flags SHM_ATTACH_* */
	SHM_REQ_DETACH = 7, /* ends the daemon's attach to pid */
};

/* SHM_REQ_ATTACH's flags: what to trace beside the CUDA calls. */
#define SHM_ATTACH_HEAP 0x1u      /* the malloc family, byte-sampled */
#define SHM_ATTACH_NO_OFFCPU 0x2u /* no off-CPU time */

struct shm_msg_request {
	struct shm_msg_hdr hdr;
	uint32_t op;     /* enum shm_req_op */
	uint32_t pid;    /* 0: none */
	uint64_t arg_ns; /* SHM_REQ_WINDOW, SHM_REQ_ATTACH: the window */
	uint16_t job_len;
	uint16_t pad;
	uint32_t flags;  /* SHM_REQ_ATTACH: SHM_ATTACH_*; else 0 */
	/* char job[job_len]; */
};

enum shm_reply_kind {
	SHM_REPLY_END = 1,
	SHM_REPLY_RECORDING = 2,
	SHM_REPLY_PROCESS = 3,
	SHM_REPLY_ACTED = 4,
};

/* Every REPLY starts so; kind says which of the structs below it is. */
struct shm_reply_hdr {
	struct shm_msg_hdr hdr;
	uint32_t kind; /* enum shm_reply_kind */
	uint32_t pad;
};

/* The end of the reply: status 0 or a negative errno, with a line of text
 * saying why (len bytes follow). */
struct shm_reply_end {
	struct shm_reply_hdr r;
	int32_t status;
	uint32_t len;
};

/* One recording; job, host, path and user (name) follow, in that order. */
struct shm_reply_recording {
	struct shm_reply_hdr r;
	uint32_t uid;
	uint32_t live;      /* 1 while processes of the job are connected */
	uint32_t processes; /* processes rows (an exec counts twice) */
	uint32_t ranks;     /* distinct ranks */
	int64_t start_wall_ns;
	int64_t end_wall_ns; /* the last process's end; while live, now */
	uint64_t bytes;      /* the store's size on disk */
	uint16_t job_len, host_len, path_len, user_len;
	/* char text[...]; */
};

/* One connected process; job and exe follow. */
struct shm_reply_process {
	struct shm_reply_hdr r;
	uint32_t pid;
	uint32_t uid;
	int32_t rank;       /* SHM_NO_RANK: none */
	uint32_t state;     /* the region's ctl_state (SHM_STATE_*) */
	int64_t start_wall_ns;
	uint64_t events;    /* records stored */
	uint64_t dropped;   /* events lost (every reason that loses one: drops.h) */
	double events_per_s; /* over the last interval (about a second) */
	double dropped_per_s;
	uint16_t job_len, exe_len;
	uint32_t pad;
	/* char text[job_len + exe_len]; */
};

/* A control command's outcome in one process: in force after latency_ns
 * (from the request to the moment the collector wrote it into the
 * process's region, which every hook reads), or not (latency_ns -2: it
 * takes no commands, SHIMMER_CONTROL=0). */
struct shm_reply_acted {
	struct shm_reply_hdr r;
	uint32_t pid;
	uint32_t uid;
	int64_t latency_ns;
	uint16_t job_len;
	uint16_t pad;
	uint32_t pad2;
	/* char job[job_len]; */
};

/* ---- the event region (memfd) ---------------------------------------- */

#define SHM_REGION_HDR_BYTES 4096u
#define SHM_SLOT_CTL_BYTES 4096u
#define SHM_RING_MIN_BYTES 4096u
#define SHM_RING_MAX_BYTES (64u << 20)
#define SHM_SLOTS_MAX 4096u

/*
 * Region header, at offset 0.  The producer fills it before HELLO; the
 * collector checks it against HELLO.  Atomic fields are accessed with
 * __atomic builtins by both sides.
 */
struct shm_region {
	uint32_t magic;
	uint16_t version;
	uint16_t pad;
	uint32_t nslots;
	uint32_t ring_bytes;     /* power of two */
	uint32_t slots_hwm;      /* slots ever claimed: collector scans [0, hwm) */
	uint32_t pad2;
	uint64_t dropped_no_slot; /* events lost: more live threads than slots */
	uint64_t heartbeat;       /* collector bumps it on every drain pass */
	uint64_t exit_ts;         /* record clock at orderly exit, 0 before */
	uint64_t dropped_cupti;   /* GPU records CUPTI lost (it reports how many) */
	/*
	 * Lossless waiting (SHIMMER_LOSSLESS=1).  A producer that finds its
	 * ring full, or no free slot, adds itself to waiters, reads wake,
	 * looks again and, still stuck, sleeps in FUTEX_WAIT on wake (a shared
	 * futex: the region is MAP_SHARED).  After a pass that moved a tail or
	 * freed a slot the collector, seeing waiters, bumps wake and wakes them
	 * all (FUTEX_WAKE).  Both sides reach waiters with a sequentially
	 * consistent read-modify-write (the collector adds 0) after their own
	 * stores, so one always sees the other and a wake is never missed;
	 * waits are also bounded in time.
	 */
	uint32_t wake;
	uint32_t waiters;
	/*
	 * The collector's committed marks (with each slot's consumed,
	 * committed and committed_dropped): the no_slot and cupti drop counts,
	 * and the refused stack captures (stack_full, pystack_full), it had
	 * handed on when its store last committed.  Written by the
	 * collector after each commit, never by the shim: what a collector
	 * that died left behind says what it had stored, so that the next
	 * one to read the region stores the rest, and counts what was lost.
	 */
	uint64_t committed_no_slot;
	uint64_t committed_cupti;
	uint64_t committed_stack_full;
	uint64_t committed_pystack_full;
	/* The collector ended the process's row (client_end(): an exit, a
	 * shutdown, a rejection...), as one that dies never does: the shim
	 * does not say HELLO again to another (SHM_HELLO_RECONNECT).
	 * SHM_ENDED_ROW, or SHM_ENDED_REFUSED: a collector refused the
	 * process's reconnect HELLO (no row of it to go on with), which the
	 * shim says on stderr at its exit, the loss uncounted. */
	uint32_t collector_ended;
	uint32_t pad_ended;
	uint8_t pad3[24];
	/*
	 * Control: when the process records (docs/service.md).  The shim has
	 * no thread of its own to wait for commands: every hook compares
	 * ctl_seq with the last value it applied (one load of a line only
	 * the collector writes, and rarely) and, when it moved, applies the
	 * block before it records the call.  So a command is in force from
	 * the moment it is written: whatever the process does afterwards is
	 * recorded, or not, as it says.
	 *
	 * The collector's line: ctl_seq is a sequence lock over the rest of
	 * it (odd while the collector writes, one more after; the collector
	 * is its only writer once HELLO was sent).  ctl_id numbers commands
	 * (0: none yet), ctl_cmd is the last one (enum shm_ctl_cmd), ctl_user
	 * counts those that came from `shimmer ctl` (a new one cancels the
	 * process's range triggers), ctl_ts is when the last command came
	 * into force (record clock).  The plan: CLOCK_MONOTONIC deadlines, 0
	 * when none: at ctl_start_at the collector resumes the process and,
	 * if ctl_duration_ns is set, plans a stop that much later; at
	 * ctl_stop_at it pauses it.  Before HELLO the shim writes its plan
	 * (SHIMMER_START=after:, SHIMMER_STOP=after:, SHIMMER_DURATION, or
	 * the one a fork child inherits); from HELLO on the collector owns
	 * the line and keeps the plan there for the process's fork children.
	 */
	uint32_t ctl_seq;
	uint32_t ctl_id;
	uint32_t ctl_cmd;          /* enum shm_ctl_cmd */
	uint32_t ctl_user;
	uint64_t ctl_ts;
	uint64_t ctl_start_at;
	uint64_t ctl_stop_at;
	uint64_t ctl_duration_ns;
	uint8_t pad4[16];
	/*
	 * The shim's line, reported and used by the collector, trusted for
	 * nothing else: ctl_done, the last ctl_id applied (until it is, the
	 * command's state is the one in force); ctl_state (SHM_STATE_*);
	 * ctl_began, CLOCK_MONOTONIC ns when a range trigger
	 * (SHIMMER_START=after-range:) began recording, from which the
	 * collector plans SHIMMER_DURATION's stop.
	 *
	 * stack_full and pystack_full: stack captures the shim's table of
	 * native (Python) stacks refused for want of room, counted where they
	 * happen (they are rare but for a full table, and cost nothing more
	 * here than in the table), so that a process killed later still
	 * reports them.  Their events were recorded, without that stack: the
	 * collector stores the counts as drops that are not losses.
	 */
	uint32_t ctl_done;
	uint32_t ctl_state;   /* SHM_STATE_* */
	uint64_t ctl_began;
	uint64_t stack_full;
	uint64_t pystack_full;
};

#define SHM_STATE_RECORDING 0x1u /* not paused */
#define SHM_STATE_CONTROL 0x2u   /* takes `shimmer ctl` commands (not SHIMMER_CONTROL=0) */

enum shm_ctl_cmd {
	SHM_CTL_PAUSE = 1,  /* record nothing until resumed */
	SHM_CTL_RESUME = 2, /* record again */
};

enum shm_slot_state {
	SHM_SLOT_FREE = 0,    /* claimable by a thread (CAS FREE -> ACTIVE) */
	SHM_SLOT_ACTIVE = 1,  /* owned by thread `tid` */
	SHM_SLOT_RETIRED = 2, /* thread exited; collector drains, then sets FREE */
};

/*
 * Slot control block; the ring's bytes follow it (ring_bytes of them).
 * head and tail count bytes ever written/consumed, so used = head - tail.
 * The producer owns head, tid, state (except RETIRED -> FREE), dropped and
 * the counters; the collector owns tail.  Each side's hot word has its own
 * cache line.
 */
struct shm_slot {
	uint64_t head;
	uint32_t state;
	uint32_t tid;
	uint64_t dropped; /* events lost because the ring was full */
	uint64_t generation; /* bumped on every claim */
	uint8_t pad0[32];
	uint64_t tail;
	/* The collector's marks (region header): consumed, the records (PAD
	 * excluded) before tail; committed, committed_dropped and
	 * committed_count/bytes, consumed, dropped and the counters as handed
	 * on when the store last committed, for the owner of generation
	 * committed_gen.  consumed - committed records were read but never
	 * stored if it dies now; the next collector hands on the counters
	 * from the committed ones (SHM_HELLO_RECONNECT). */
	uint64_t consumed;
	uint64_t committed;
	uint64_t committed_dropped;
	uint64_t committed_gen;
	uint8_t pad1[24];
	uint64_t count[SHM_FN_COUNT]; /* exact calls per function */
	uint64_t bytes[SHM_FN_COUNT]; /* exact bytes requested per function */
	uint64_t committed_count[SHM_FN_COUNT];
	uint64_t committed_bytes[SHM_FN_COUNT];
};

_Static_assert(sizeof(struct shm_slot) <= SHM_SLOT_CTL_BYTES, "slot ctl");
_Static_assert(sizeof(struct shm_region) <= SHM_REGION_HDR_BYTES, "region");
_Static_assert(__builtin_offsetof(struct shm_region, ctl_seq) == 128, "control line");
_Static_assert(__builtin_offsetof(struct shm_region, ctl_done) == 192, "the shim's control line");
_Static_assert(__builtin_offsetof(struct shm_region, pystack_full) < 256, "the shim's line");

#define SHM_SLOT_STRIDE(ring_bytes) ((uint64_t)SHM_SLOT_CTL_BYTES + (ring_bytes))
#define SHM_REGION_BYTES(nslots, ring_bytes)                                  \
	((uint64_t)SHM_REGION_HDR_BYTES + (uint64_t)(nslots) * SHM_SLOT_STRIDE(ring_bytes))

/* ---- records (in a slot's ring) ----------------------------------------- */

/*
 * Every record starts with shm_rec_hdr; size counts the header and is a
 * multiple of 8, so a record never straddles the ring's end: when the rest
 * of the ring is too short, the producer writes a PAD record over it.
 */
enum shm_rec_type {
	SHM_REC_PAD = 1,
	SHM_REC_HEAP = 2,
	SHM_REC_CUDA = 3,
	SHM_REC_KERNEL = 4,   /* GPU: a kernel ran (CUPTI) */
	SHM_REC_MEMCPY = 5,   /* GPU: a copy ran (CUPTI) */
	SHM_REC_MEMSET = 6,   /* GPU: a memset ran (CUPTI) */
	SHM_REC_GPU_SYNC = 7, /* GPU: a synchronization the CPU waited on (CUPTI) */
	SHM_REC_API = 8,      /* a runtime or driver API call that starts GPU work (CUPTI callback) */
	SHM_REC_RANGE = 9,    /* a range begins or ends (NVTX, shimmer.h) */
	SHM_REC_MARK = 10,    /* an instant marker (NVTX, shimmer.h) */
	SHM_REC_COUNTER = 11, /* a counter sample (shimmer.h) */
	SHM_REC_STACK = 12,   /* a native call stack, sent once per process */
	SHM_REC_PYSTACK = 13, /* Python frames, sent once per process */
	SHM_REC_MODULE = 14,  /* a loaded object (at start and on dlopen) */
	SHM_REC_GPU_WINDOW = 15, /* GPU sampling: a window in which CUPTI recorded */
	SHM_REC_OFFCPU = 16,  /* a thread off the CPU (the collector's BPF source) */
};

/* Record flags. */
#define SHM_F_SAMPLED 0x1u /* heap: chosen by the byte sampler (weight applies) */
#define SHM_F_TIMED 0x2u   /* t_end is valid */
#define SHM_F_PTSZ 0x4u    /* CUDA: the _ptsz/_ptds per-thread-stream variant */
#define SHM_F_FAILED 0x8u  /* the call returned failure (NULL, ENOMEM, error) */
#define SHM_F_OPEN 0x10u   /* off-CPU: still off when tracing stopped (end is that) */
#define SHM_F_WHOLE 0x20u  /* GPU window: held open to the end or a pause (CUDA graphs) */

struct shm_rec_hdr {
	uint16_t type;  /* enum shm_rec_type */
	uint16_t size;  /* bytes, header included, multiple of 8 */
	uint16_t fn;    /* enum shm_fn */
	uint16_t flags; /* SHM_F_* */
};

/*
 * Heap call.  ptr is the block returned (0 on failure) or, for free, the
 * block released.  size is the bytes requested (calloc: nmemb * size).
 * aux: realloc/reallocarray's old pointer; the alignment for the aligned
 * functions.
 *
 * seq and seq_free place the call in the process's heap order, one counter
 * for all its threads (0 = none): seq is taken after the real allocator
 * returned the block (allocations: twice the counter's value once this
 * call incremented it), seq_free before the real free or realloc released
 * one (free, realloc: twice the counter's value as read then, plus one;
 * a release does not increment it).  A block's number was taken before
 * its release read the counter, and an address is only handed out again
 * after its release completed, so birth < release < the allocation that
 * reuses the address, in whatever order the threads' records arrive: pair
 * a release with the live block of that address whose seq is smaller.
 * Births are unique and even, releases odd; two releases may share a
 * number.  (Timestamps cannot do this: an untimed call is stamped when it
 * starts.)
 */
struct shm_rec_heap {
	struct shm_rec_hdr hdr;
	uint64_t t_begin;
	uint64_t t_end;
	uint64_t ptr;
	uint64_t size;
	uint64_t aux;
	uint32_t stack_id;   /* native call stack (SHM_REC_STACK), 0 = none */
	uint32_t pystack_id; /* Python frames (SHM_REC_PYSTACK), 0 = none */
	uint64_t seq;        /* allocations: heap order of the block's birth */
	uint64_t seq_free;   /* free, realloc: heap order of the old block's release */
};

/*
 * CUDA runtime call.  Fields by function (unused ones are 0):
 *   allocations: ptr = result, bytes = size, aux = flags / pool,
 *                cudaMallocPitch: bytes = pitch * height, aux = pitch, aux2 = width
 *   frees: ptr
 *   copies: ptr = dst, aux = src, bytes = count, kind = cudaMemcpyKind,
 *           cudaMemcpyPeerAsync: device = dst device, aux2 = src device
 *   memsets: ptr, bytes, aux = value
 *   launches: aux = function (__cudaLaunchKernel: the cudaKernel_t; cudaGraphLaunch:
 *             the graph exec), bytes = dynamic shared memory,
 *             grid[], block[]
 *   cudaEventSynchronize: aux = event; cudaStreamWaitEvent: aux = event, kind = flags
 * device is the caller's current device after the call (-1 if unknown).
 */
struct shm_rec_cuda {
	struct shm_rec_hdr hdr;
	uint64_t t_begin;
	uint64_t t_end;
	int32_t ret;
	int32_t device;
	uint64_t ptr;
	uint64_t bytes;
	uint64_t stream;
	uint64_t aux;
	uint64_t aux2;
	uint32_t kind;
	uint32_t grid[3];
	uint32_t block[3];
	uint32_t stack_id;   /* allocations, and calls that blocked SHM_BLOCKED_STACK_NS or
			      * more (SHM_FN_MAY_BLOCK): as in shm_rec_heap */
	uint32_t pystack_id;
	uint32_t pad;
};

/*
 * GPU records.  hdr.fn is SHM_FN_NONE.  start/end are GPU timestamps in the
 * record clock: the shim hands CUPTI its own clock
 * (cuptiActivityRegisterTimestampCallback), so host and GPU events share
 * one timeline.  correlation is CUPTI's correlation id, with the shim's
 * CUPTI session above bit 32 (GPU sampling attaches CUPTI anew for each
 * window, and a new session may number its calls from 1 again): it links a
 * GPU record to the shm_rec_api record of the call that started the work.
 * These records are written by whatever thread CUPTI delivers buffers on;
 * that thread's tid means nothing for them.
 */
struct shm_rec_kernel {
	struct shm_rec_hdr hdr;
	uint64_t start;
	uint64_t end;
	uint64_t correlation;
	uint32_t name_id; /* interned kernel name, as CUPTI gives it (mangled) */
	int32_t device;
	uint32_t context;
	uint32_t stream;
	uint32_t registers; /* per thread */
	uint32_t static_smem;
	uint32_t dynamic_smem;
	uint32_t grid[3];
	uint32_t block[3];
	uint32_t graph_id; /* 0 unless launched by a CUDA graph */
	uint32_t pad;
};

/* copy_kind: CUpti_ActivityMemcpyKind (1 HtoD, 2 DtoH, 8 DtoD, 10 PtoP, ...);
 * src_kind/dst_kind and mem_kind: CUpti_ActivityMemoryKind (1 pageable,
 * 2 pinned, 3 device, ...). */
struct shm_rec_memcpy {
	struct shm_rec_hdr hdr;
	uint64_t start;
	uint64_t end;
	uint64_t bytes;
	uint64_t correlation;
	int32_t device;
	uint32_t context;
	uint32_t stream;
	uint8_t copy_kind;
	uint8_t src_kind;
	uint8_t dst_kind;
	uint8_t async; /* 1 when the copy was asynchronous */
};

struct shm_rec_memset {
	struct shm_rec_hdr hdr;
	uint64_t start;
	uint64_t end;
	uint64_t bytes;
	uint64_t correlation;
	int32_t device;
	uint32_t context;
	uint32_t stream;
	uint32_t value;
	uint16_t mem_kind;
	uint16_t async;
	uint32_t pad;
};

/* type: CUpti_ActivitySynchronizationType (1 event, 2 stream wait event,
 * 3 stream, 4 context/device). */
struct shm_rec_gpu_sync {
	struct shm_rec_hdr hdr;
	uint64_t start;
	uint64_t end;
	uint64_t correlation;
	uint32_t type;
	uint32_t context;
	uint32_t stream; /* CUPTI_SYNCHRONIZATION_INVALID_VALUE when none */
	uint32_t pad;
	uint64_t event;
};

enum shm_api_domain { SHM_API_RUNTIME = 1, SHM_API_DRIVER = 2 };

/*
 * An API call that starts GPU work (launch, graph launch, copy, memset),
 * recorded by a CUPTI callback on the calling thread, so its slot's tid is
 * the launching thread, whichever API (runtime, driver: cuBLAS, cuDNN,
 * Triton) made the call.  start/end are host times (record clock).
 * stack_id/pystack_id: the call stack of the launching code (native and
 * Python, as in shm_rec_heap), 0 when none was captured; for a runtime
 * call made through the shim's hook the native stack starts at the hook's
 * caller, for any other call at the CUPTI callback (frames of libcupti and
 * the CUDA libraries innermost).
 */
struct shm_rec_api {
	struct shm_rec_hdr hdr;
	uint64_t start;
	uint64_t end;
	uint64_t correlation;
	uint32_t name_id; /* interned API function name, e.g. "cuLaunchKernelEx" */
	uint32_t domain;  /* enum shm_api_domain */
	uint32_t cbid;    /* CUPTI callback id within the domain */
	uint32_t stack_id;
	uint32_t pystack_id;
	uint32_t pad;
};

/*
 * Ranges.  PUSH/POP nest per thread (nvtxRangePush/Pop, shimmer_range_push/
 * pop); START/END may cross threads and are paired by id (nvtxRangeStart/
 * End).  name_id and domain_id are interned strings (domain 0: the default
 * domain; shimmer.h ranges use the domain "shimmer").
 */
enum shm_range_op {
	SHM_RANGE_PUSH = 1,
	SHM_RANGE_POP = 2,
	SHM_RANGE_START = 3,
	SHM_RANGE_END = 4,
};

struct shm_rec_range {
	struct shm_rec_hdr hdr;
	uint64_t ts;
	uint64_t id; /* START/END: the range id; PUSH/POP: 0 */
	uint32_t op; /* enum shm_range_op */
	uint32_t name_id;   /* 0 for POP and END */
	uint32_t domain_id;
	uint32_t color;     /* ARGB from the NVTX attributes, 0 if none */
	uint32_t category;
	uint32_t pad;
};

struct shm_rec_mark {
	struct shm_rec_hdr hdr;
	uint64_t ts;
	uint32_t name_id;
	uint32_t domain_id;
};

struct shm_rec_counter {
	struct shm_rec_hdr hdr;
	uint64_t ts;
	uint32_t name_id;
	uint32_t domain_id;
	double value;
};

/*
 * Call stacks are interned in the shim: each distinct stack is sent once
 * (in the ring of the thread that first saw it) and records refer to its
 * id, so a hot call site costs a lookup, not a message.  Ids are per
 * process and never reused; the collector keeps them unresolved (records
 * may arrive before the stack they name).  Frames run innermost first.
 * A pc is a return address as unwound (the caller's instruction after the
 * call) except frame 0, the interposed function's caller.
 */
#define SHM_STACK_MAX 128u

struct shm_rec_stack {
	struct shm_rec_hdr hdr; /* size = sizeof(struct shm_rec_stack) + 8 * depth */
	uint32_t stack_id;
	uint32_t depth;
	/* uint64_t pc[depth]; */
};

/* Python frames (file, function: interned strings; line), innermost first. */
struct shm_pyframe {
	uint32_t file_id;
	uint32_t func_id;
	uint32_t line;
	uint32_t pad;
};

struct shm_rec_pystack {
	struct shm_rec_hdr hdr; /* size = sizeof(struct shm_rec_pystack) + 16 * depth */
	uint32_t stack_id;
	uint32_t depth;
	/* struct shm_pyframe frame[depth]; */
};

/*
 * A loaded object, for offline symbolization: addresses in [lo, hi) belong
 * to the file path_id, loaded with bias (its dlpi_addr: address - bias is
 * the address in the file's own terms).  build_id: the GNU build-id note,
 * build_id_len bytes of it (0 when the file has none).  unload is 1 when the
 * object was removed (dlclose).
 */
struct shm_rec_module {
	struct shm_rec_hdr hdr;
	uint64_t ts;
	uint64_t bias;
	uint64_t lo;
	uint64_t hi;
	uint32_t path_id;
	uint8_t build_id_len;
	uint8_t unload;
	uint8_t build_id[20];
	uint8_t pad[2];
};

/*
 * GPU sampling (SHIMMER_GPU=sample, the default): CUPTI records kernels,
 * copies and the API calls that launched them only inside windows, one
 * record per window, sent when it closes.  Recording was on from start to
 * end (host times, record clock); work launched outside every window is
 * absent from the trace.  since: when sampling began in this process (the
 * moment CUPTI started; the same in every record of a process): the span
 * [since, process end] is what the estimates cover.  The first record,
 * sent when sampling begins, is empty (start == end == since): it
 * announces sampling, since a process may end before its first window.
 * calls: the launch, copy and memset calls the runtime hooks counted (all
 * threads) while the window was open.  Recording slows the process inside
 * a window, so the traced share of time would scale its counts too little;
 * the share of these calls made in windows scales them right (the traced
 * share of time only where no such call fell in a window).
 */
struct shm_rec_gpu_window {
	struct shm_rec_hdr hdr;
	uint64_t start;
	uint64_t end;
	uint64_t since;
	uint64_t calls; /* runtime calls that start GPU work made in the window */
};

/*
 * Off-CPU time: the thread was off the CPU from start to end (record
 * clock), having gone off in `state` with the user stack stack_id (0:
 * none).  Made by the collector's BPF source from the scheduler's
 * switches (shimmer attach, SHIMMER_OFFCPU=1), never by the shim (a shim
 * that wrote one would only describe itself).  hdr.fn is SHM_FN_NONE;
 * SHM_F_OPEN: still off when tracing stopped, which is end.
 */
enum shm_offcpu_state {
	SHM_OFFCPU_PREEMPTED = 1, /* runnable, waiting for a CPU */
	SHM_OFFCPU_SLEEP = 2,     /* interruptible sleep: I/O, a lock, a wait */
	SHM_OFFCPU_DISK = 3,      /* uninterruptible sleep */
	SHM_OFFCPU_OTHER = 4,     /* stopped, traced or parked */
};

struct shm_rec_offcpu {
	struct shm_rec_hdr hdr;
	uint64_t start;
	uint64_t end;
	uint32_t stack_id;
	uint32_t state; /* enum shm_offcpu_state */
};

_Static_assert(sizeof(struct shm_rec_heap) % 8 == 0, "heap rec");
_Static_assert(sizeof(struct shm_rec_offcpu) % 8 == 0, "offcpu rec");
_Static_assert(sizeof(struct shm_rec_stack) % 8 == 0, "stack rec");
_Static_assert(sizeof(struct shm_rec_pystack) % 8 == 0, "pystack rec");
_Static_assert(sizeof(struct shm_rec_module) % 8 == 0, "module rec");
_Static_assert(sizeof(struct shm_rec_cuda) % 8 == 0, "cuda rec");
_Static_assert(sizeof(struct shm_rec_kernel) % 8 == 0, "kernel rec");
_Static_assert(sizeof(struct shm_rec_memcpy) % 8 == 0, "memcpy rec");
_Static_assert(sizeof(struct shm_rec_memset) % 8 == 0, "memset rec");
_Static_assert(sizeof(struct shm_rec_gpu_sync) % 8 == 0, "sync rec");
_Static_assert(sizeof(struct shm_rec_api) % 8 == 0, "api rec");
_Static_assert(sizeof(struct shm_rec_range) % 8 == 0, "range rec");
_Static_assert(sizeof(struct shm_rec_mark) % 8 == 0, "mark rec");
_Static_assert(sizeof(struct shm_rec_counter) % 8 == 0, "counter rec");
_Static_assert(sizeof(struct shm_rec_gpu_window) % 8 == 0, "gpu window rec");

#endif /* SHIMMER_WIRE_H */
