/*
 * model: the one reader of a shimmer store.  Every command asks the model,
 * never SQLite, so that each figure has one definition: one process end,
 * one peak algorithm, one naming of memories, one list of synchronizing
 * functions (the wire format's).
 *
 * The API, in the order a command uses it:
 *
 *  - Open: model_open(path) or model_load(db), with a filter (--pid,
 *    --rank).  The processes, their tree, functions, drops and GPU
 *    sampling are read at once (small tables); everything below (threads
 *    and strings too) is read on first use and kept.  All reads share one read transaction,
 *    so a store a collector is still writing is read as of one instant.
 *  - Processes: model_nprocs()/model_proc() (every process; `selected`
 *    says whether the filter keeps it).  A process's end is one
 *    definition (struct model_proc.end_ns): its recorded end, else its
 *    last recorded event.  Drops per process, split by what they touch.
 *  - Aggregates, computed in one pass over their tables:
 *      model_calls()     per process and function: exact counts and bytes,
 *                        statistics of the timed calls;
 *      model_memories()  per process and memory ("host", "cuda:N",
 *                        "pinned", "managed:N"): peak, when, live at the
 *                        end, allocated;
 *      model_heap_groups() allocations grouped by (memory, call site) or
 *                        (memory, folded stack): allocated, live at the
 *                        end, live at the peak, or short-lived;
 *      model_heap_hist() per memory, the allocations by size or by
 *                        lifetime in power-of-two buckets;
 *      model_gpu()       per process: kernels by name, copies by kind,
 *                        ranges, busy time per stream and device;
 *      model_steps()     a process's steps (the most frequent top-level
 *                        range) and their statistics.
 *  - Streams, for timelines (export) and per-event analyses: one callback
 *    per row, as stored or by time (struct model_scan: also a time span),
 *    never all rows in memory:
 *    model_kernels_each(), model_copies_each(), model_api_each(),
 *    model_cuda_calls_each(), model_ranges_each(), model_markers_each(),
 *    model_windows_each(), model_blocks_each() (allocations, from the heap
 *    pass below), and model_mem_events()/model_mem_series() (a memory's
 *    live bytes over time).
 *
 * The heap (allocations) is the large table: model_want() says which heap
 * figures a command will ask for, and the first heap query reads the
 * table once, in parallel over rowid ranges when it is large, into 32
 * bytes per allocation (struct model_block) from which every heap figure
 * is computed.  A process traced in exact mode (SHIMMER_MALLOC=all) has
 * its host heap's answers computed by the collector as events arrived
 * (schema 9's heap_* tables, collector/heapagg.h) and rows only for its
 * long-lived and never-freed blocks: the same pass reads those tables
 * into the same figures, with the same definitions (struct
 * model_mem.aggregated says which memory came so); every answer is the
 * one its rows would give but two, which the model says: median lifetimes
 * (from a histogram of quarter octaves) and short-lived blocks for a
 * lifetime limit other than the collector's (model_groups.estimated).
 * SHIMMER_MODEL_HEAP=rows makes the model ignore those tables (tests).
 *
 * Ownership: the model owns everything it hands out; pointers stay valid
 * until model_close().  Errors: functions return 0 or a negative errno
 * (-EIO after one "shimmer: error:" line, -ENOMEM); callbacks stop a
 * stream by returning nonzero, which is passed back.  Not thread-safe.
 */
#ifndef SHIMMER_TOOLS_MODEL_H
#define SHIMMER_TOOLS_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "stats.h"

struct model;

/* ---- opening ---------------------------------------------------------------- */

/* Which processes a command reads: -1 for any. */
struct model_filter {
	int64_t pid;
	int64_t rank;
	/* One run's processes in a store that holds others too (shimmer run
	 * --db of an existing store, or two runs sharing one): those with a
	 * proc_id above after_proc_id that are, or descend from, a process
	 * among them of pid root_pid or whose parent's pid is root_pid (the
	 * root may be untraced).  0: no such condition. */
	int64_t after_proc_id;
	int64_t root_pid;
};

#define MODEL_ANY (-1)

static inline struct model_filter model_filter_all(void)
{
	return (struct model_filter){ .pid = MODEL_ANY, .rank = MODEL_ANY };
}

/* Open the store at path read-only and load it (store_open's errors).
 * A filter that keeps no process gets one warning line, not an error. */
int model_open(const char *path, const struct model_filter *f, struct model **out);

/* The same on an open connection, which the model borrows (it must stay
 * open until model_close). */
int model_load(sqlite3 *db, const struct model_filter *f, struct model **out);

void model_close(struct model *m);

sqlite3 *model_db(const struct model *m);
int model_schema_version(const struct model *m);

/* ---- processes --------------------------------------------------------------- */

enum model_mode {
	MODEL_MALLOC_OFF,
	MODEL_MALLOC_SAMPLE,
	MODEL_MALLOC_ALL,
	MODEL_MALLOC_UNKNOWN,
};

struct model_drop {
	const char *reason; /* ring_full, no_slot, malformed, cupti, ... */
	int64_t events;
};

/* GPU sampling of a process (schema 4's gpu_sampling view). */
struct model_sampling {
	int64_t since_ns, until_ns, span_ns; /* span_ns 0: unknown */
	int64_t windows, traced_ns;
	double share;                        /* traced_ns / span_ns; 0: unknown */
	int64_t calls, calls_traced;         /* GPU-work runtime calls: all, in windows */
	double scale;                        /* recorded -> estimate; 0: none possible */
	int64_t whole_from_ns;               /* recorded whole from here (CUDA graphs); 0: never */
};

struct model_proc {
	int64_t proc_id, pid, ppid, uid;
	int64_t rank, local_rank;            /* -1: none */
	const char *host, *exe;
	const char *exe_base;                /* exe's last component */
	const char *args;                    /* argv joined with spaces */
	const char *argv_json;               /* a JSON array, or NULL */
	int64_t exit_cpu_ns;                 /* its CPU time at its exit, every thread's
	                                      * (schema 14, processes.exit_cpu_ns); -1:
	                                      * it ended without that reading (killed,
	                                      * exec'd, an older store): its cpu_time
	                                      * readings stop at the last one */
	int64_t argv_bytes;                  /* -1: argv whole; else argv was cut
	                                      * (at an argument's end) from a
	                                      * command line of this many bytes,
	                                      * and args says so */
	const char *mode_name;               /* malloc_mode as stored */
	enum model_mode mode;
	int64_t sample_bytes;                /* -1: none */
	int lossless;
	int64_t start_ns, start_wall_ns;
	/*
	 * The process's end, the one definition every command uses: the end
	 * the collector recorded (end_known), else the latest instant of any
	 * event recorded for it (a process still running, or cut off by a
	 * collector crash); start_ns when it recorded nothing.
	 */
	int64_t end_ns;
	int end_known;
	const char *end_reason;              /* NULL: no end recorded */
	int cut;                             /* the collector was lost while it ran
	                                      * (end_reason collector_lost): what it
	                                      * did after end_ns is not stored, and
	                                      * how much that was is not known */
	const char *gpu_status, *gpu_detail; /* NULL: CUDA never started */
	const struct model_sampling *sampling; /* NULL: GPU activity recorded whole */
	const struct model_proc *parent;     /* the traced parent in this store */
	const struct model_proc *const *children;
	size_t nchildren;
	const struct model_drop *drops;      /* by reason */
	size_t ndrops;
	int64_t dropped;                     /* every reason that is a loss (drops.h:
	                                      * not those stored without a stack) */
	int64_t stacks_refused;              /* stack_full: stack captures the shim's
	                                      * table refused, shown as (no stack) */
	int64_t pystacks_refused;            /* pystack_full: the same for Python stacks */
	/* Names that never reached the store (model_load_unnamed(); 0 until
	 * then): the shim announces a name once, and one it could not (the
	 * collector's socket full for the millisecond it waits, as under
	 * load) is left out, never replaced by another. */
	int64_t unnamed_frames;              /* Python frames without their file or
	                                      * function (python_frames; not the gap
	                                      * row of a deep stack) */
	int64_t unnamed_stacks;              /* the Python stacks they are in */
	int64_t unnamed_modules;             /* loaded objects without their path:
	                                      * their native frames are unnamed */
	int64_t dropped_host;                /* lost by the rings: heap, calls, ranges */
	int64_t dropped_gpu;                 /* lost by CUPTI: kernels, copies */
	/* What its host memory is known to miss, NULL when nothing: a Python
	 * runtime's pymalloc arenas (CPython's objects of 512 bytes or less)
	 * where they were not recorded (MODEL_ARENAS_*), in a process that
	 * traced the heap and is one (its executable is named python*, or
	 * it loaded a libpython*).  The sentence every command says. */
	const char *host_unseen;
	int calls_counted;                   /* its call counters reached the store
	                                      * (function_counts); 0 for a recording
	                                      * cut before the collector's first
	                                      * count write (about a second in):
	                                      * only the calls stored as rows are
	                                      * known, never how many were made */
	int selected;                        /* kept by the filter */
	size_t index;                        /* in model_proc() order */
};

/* model_proc.host_unseen's sentences: an attached process (shimmer
 * attach's probes are the malloc family's); a store written before shimmer
 * recorded the arenas (wire version 11). */
#define MODEL_ARENAS_ATTACHED "shimmer attach sees the malloc family only: this Python" \
	" process's host memory leaves out pymalloc's arenas, where CPython keeps its objects" \
	" of 512 bytes or less (most of them, unless PYTHONMALLOC=malloc), and is a lower bound"
#define MODEL_ARENAS_OLDER "this store was recorded before shimmer recorded pymalloc's" \
	" arenas: this Python process's host memory leaves out CPython's objects of 512 bytes" \
	" or less (most of them, unless PYTHONMALLOC=malloc) and is a lower bound"

/* Every process of the store, by proc_id; selected or not. */
size_t model_nprocs(const struct model *m);
const struct model_proc *model_proc(const struct model *m, size_t i);
const struct model_proc *model_proc_by_id(const struct model *m, int64_t proc_id);
size_t model_nselected(const struct model *m);

/* Wall time in ns: end_ns - start_ns. */
static inline double model_proc_wall(const struct model_proc *p)
{
	return (double)(p->end_ns - p->start_ns);
}

/* Whether the heap, call and range figures of p are complete: no event
 * was lost between the shim and the store, and its recording was not cut
 * short by a collector that died. */
static inline int model_proc_complete(const struct model_proc *p)
{
	return p->dropped_host == 0 && !p->cut;
}

struct model_thread {
	int64_t tid;
	const char *name; /* NULL: never named */
	int64_t first_ns;
};

/* p's threads, by tid. */
int model_threads(struct model *m, const struct model_proc *p, const struct model_thread **v,
		  size_t *n);

/* ---- functions and calls --------------------------------------------------------- */

struct model_fn {
	int64_t fn_id;
	const char *name;
	int heap;       /* the malloc family */
	unsigned flags; /* SHM_FNF_* of the wire format's function of this name; 0 if none */
};

/* NULL for an id the store does not name. */
const struct model_fn *model_fn(const struct model *m, int64_t fn_id);

/* CUDA runtime calls that block the CPU until the GPU is done, and those
 * that start GPU work: from the wire format's list (common/wire.h). */
int model_fn_syncs(const struct model_fn *f);
int model_fn_launches(const struct model_fn *f);

/* One function in one process. */
struct model_calls {
	const struct model_proc *proc;
	const struct model_fn *fn;
	int64_t counted;   /* exact, from the per-thread counters */
	int64_t bytes;     /* exact */
	struct stats st;   /* durations of the timed calls */
	long double sum;   /* their exact total */
};

/* Calls: the exact count, or the timed calls when more were timed (a
 * lower bound; the timed calls alone when !model_calls_counted(c)). */
int64_t model_calls_count(const struct model_calls *c);
/* Whether counted and bytes are the shim's counters (proc->calls_counted).
 * When not, the count of a CUDA function is still its calls stored (each
 * is a row), but a heap function's is unknown, and bytes of either. */
int model_calls_counted(const struct model_calls *c);
/* Every call was timed: the total is exact (without counters: a CUDA
 * function, whose every call stored was timed). */
int model_calls_exact(const struct model_calls *c);
/* Total time: exact, else mean x count. */
double model_calls_total(const struct model_calls *c);
/* Whether mean x count estimates the total (no: sampled heap calls, biased
 * towards large blocks; a heap function without counters, whose count is
 * unknown). */
int model_calls_estimable(const struct model_calls *c);

/* The called functions of the selected processes, by process (model_proc
 * order), then total time (descending), count, name.  Reads the heap's
 * timings (model_want(MODEL_WANT_CALLS) first to share the heap pass). */
int model_calls(struct model *m, struct model_calls *const **v, size_t *n);

/* ---- memory ------------------------------------------------------------------------ */

enum model_space {
	MODEL_HOST,    /* the malloc heap */
	MODEL_DEVICE,  /* cudaMalloc and friends */
	MODEL_MANAGED, /* cudaMallocManaged */
	MODEL_PINNED,  /* page-locked host memory */
	MODEL_OTHER,
};

/* One memory of one process. */
struct model_mem {
	const struct model_proc *proc;
	enum model_space space;
	int64_t device;  /* -1 for the host heap */
	const char *label; /* "host", "cuda:N", "managed:N", "pinned": every command's name */
	double peak;     /* the highest live bytes at any instant */
	int64_t peak_ns; /* the first instant it was reached (absolute ns) */
	double live_end; /* bytes never freed */
	double allocated, freed; /* bytes */
	double blocks;   /* allocations it stands for (its rows without
			  * MODEL_WANT_SITES; an aggregated heap: all of them) */
	size_t rows;     /* allocation rows (an aggregated heap: those a row
			  * store would hold, one per allocation) */
	int estimated;   /* weighted samples (the host heap in sample mode) */
	int aggregated;  /* figures computed at ingest (the heap_* tables) */
	int64_t late;    /* aggregated: events applied out of time order (the
			  * peak and the sites at it may be off) */
	size_t index;
};

/*
 * The heap figures a command will ask for, so that the one pass over the
 * allocations computes them all: call before the first heap query.
 * MODEL_WANT_CALLS: heap call timings (model_calls); MODEL_WANT_SITES:
 * call stacks (model_heap_groups); memories are always computed.
 */
#define MODEL_WANT_CALLS 0x1u
#define MODEL_WANT_SITES 0x2u
/* model_calls leaves the heap functions untimed (counts and bytes stay
 * exact): a command that shows no heap timings reads fewer columns. */
#define MODEL_NO_HEAP_TIMES 0x4u
/* MODEL_WANT_SIZES: the blocks' sizes (model_heap_hist's MODEL_HIST_SIZE). */
#define MODEL_WANT_SIZES 0x8u
void model_want(struct model *m, unsigned what);

/*
 * The memories of the selected processes, by process, then host, cuda,
 * managed, pinned, device.  A block is live at T when alloc_ns <= T <
 * free_ns: the peak is the highest sum of live weights at any instant, so
 * a block freed at T and another allocated at T are never both counted.
 */
int model_memories(struct model *m, struct model_mem *const **v, size_t *n);

/* One allocation row, compact.  free_ns is INT64_MAX for a block never freed. */
struct model_block {
	int64_t alloc_ns, free_ns;
	double weight; /* bytes it stands for (size, or size / P(sampled)) */
	float count;   /* allocations it stands for (1, or weight / size) */
	uint32_t key;  /* model_key() */
};

struct model_key {
	const struct model_mem *mem; /* its peak is set once model_memories() ran */
	int64_t stack_id, pystack_id; /* -1: none (or MODEL_WANT_SITES not asked) */
};

const struct model_key *model_key(const struct model *m, uint32_t key);

/* Every allocation of the selected processes, in no particular order; of
 * an aggregated memory, the blocks it kept rows for (freed after the
 * collector's row_ns, or never). */
int model_blocks_each(struct model *m, int (*cb)(void *ctx, const struct model_block *b),
		      void *ctx);

/*
 * The call site and folded stack of key's allocations (MODEL_WANT_SITES):
 * the innermost frame of the user's code ("function (file:line)"), and
 * "outer;...;inner".  Strings owned by the model.
 */
int model_key_site(struct model *m, uint32_t key, const char **site, const char **folded);

/* Counts each process's names that never reached the store
 * (model_proc.unnamed_*), for the commands that print stacks: a scan of
 * the store's Python frames, which costs about a microsecond a frame, so
 * not done by model_open().  Nothing for a store without stacks (schema
 * 3).  0 or a negative errno. */
int model_load_unnamed(struct model *m);

/* Names each call site with n of the frames that called it (sites.h), so
 * that the groups below split by them; before the first heap query.  0,
 * the default: the site alone. */
void model_set_callers(struct model *m, int n);

/* With on set, host allocations made from Python code are named by their
 * native frames, not by the Python line (sites.h); CUDA memory keeps its
 * Python line.  Before the first heap query. */
void model_set_native(struct model *m, int on);

/* Names the Python files of a's sites and b's alike (sites_add_paths()):
 * a file is shown by a longer tail of its path in both where either store
 * has another file of its base name, so that `compare` pairs its lines.
 * Before the first heap query of either. */
void model_share_names(struct model *a, struct model *b);

enum model_select {
	MODEL_ALLOCATED, /* every allocation */
	MODEL_LIVE_END,  /* never freed */
	MODEL_AT_PEAK,   /* live at its memory's peak */
	MODEL_SHORT,     /* freed within max_life_ns of being made */
};

struct model_group {
	const struct model_mem *mem;
	const char *name;     /* call site, or folded stack */
	double count, bytes;
	double live_count, live_bytes; /* those of them never freed */
	double median_life;   /* MODEL_SHORT: median lifetime of its rows, ns */
	size_t rows;
	/* Sampled rows: the variance sampling gives count, bytes and
	 * live_bytes (Horvitz-Thompson: a row of weight w for size n, kept
	 * with probability n / w, adds w (w - n)); 0 where every block is a
	 * row (exact mode, and a block as large as the sampling period). */
	double var_count, var_bytes, var_live;
};

struct model_groups {
	struct model_group *v; /* by memory (model_memories order), then bytes descending */
	size_t n;
	uint32_t *of_key;      /* group of each key; UINT32_MAX: none */
	size_t nkeys;
	int estimated;         /* MODEL_SHORT on an aggregated memory with a limit
				* the collector did not count at: a share of
				* one histogram bucket is estimated */
};

/* How model_heap_groups() names a group. */
enum model_naming {
	MODEL_BY_SITE,   /* the call site (sites.h) */
	MODEL_BY_FOLDED, /* the folded stack */
	MODEL_BY_NATIVE, /* the call site, host memory's by its native frames
			  * even where Python frames name it otherwise (the
			  * code that calls malloc: heap_churn's) */
};

/* Allocations of the selected processes grouped by (memory, name).  Free
 * with model_groups_free(). */
int model_heap_groups(struct model *m, enum model_select sel, enum model_naming naming,
		      int64_t max_life_ns, struct model_groups *out);
void model_groups_free(struct model_groups *g);

/*
 * The checkpoints of p's heap, where the live bytes of every site are
 * known exactly in every kind of store: the instants of p's allocations
 * number k x every (k = 1, 2, ...; every the least power of two that
 * leaves at most MODEL_POINTS), over all its memories, in time order.
 * Owned by the model.
 */
#define MODEL_POINTS 256
int model_heap_points(struct model *m, const struct model_proc *p, const int64_t **t,
		      size_t *n);

/*
 * The live bytes of each group of g at its process's instants: y[gi] (the
 * caller's, n[proc index] values; NULL: skip the group) gets, for each k,
 * the bytes of the group's blocks with alloc_ns <= t[proc index][k] <
 * free_ns.  For an aggregated memory the instants must be checkpoints
 * (model_heap_points, or the ends of top-level push ranges); exact[gi] is
 * cleared for a group they are not.
 */
int model_groups_live_at(struct model *m, const struct model_groups *g,
			 const int64_t *const *t, const size_t *n, double **y, int *exact);

/* Live bytes of mem at each of the n instants t (ascending), exactly (an
 * aggregated memory: as its timeline has them, at its resolution). */
int model_mem_series(struct model *m, const struct model_mem *mem, const int64_t *t, size_t n,
		     double *live);

/* mem's live bytes after each instant at which they change, in time order
 * (live: the bytes after every event of that instant).  An aggregated
 * memory has them at its timeline's resolution: each bucket's highest
 * value at its start, its last at its end, and the peak at its instant. */
int model_mem_events(struct model *m, const struct model_mem *mem,
		     int (*cb)(void *ctx, int64_t t, double live), void *ctx);

/*
 * Distributions of a memory's blocks, memray stats' and heaptrack's size
 * histogram: bucket b holds the values of bit length b (b = 0: the value
 * 0; b >= 1: 2^(b-1) to 2^b - 1), with how many blocks and bytes.
 *   MODEL_HIST_SIZE      the bytes requested, of every allocation;
 *   MODEL_HIST_LIFETIME  free_ns - alloc_ns, of every freed block (one
 *                        stamped free before its allocation counts as 0);
 *                        the blocks never freed are live_count, live_bytes.
 * Both add up to the memory's allocations.  An aggregated memory has them
 * from the collector's histograms (sizes; lifetimes up to row_ns, in
 * quarter octaves that add up to these buckets) and the rows it kept
 * (longer lifetimes, blocks never freed): exactly the figures a row per
 * allocation gives.  Sampled ones are estimates (model_mem.estimated).
 */
#define MODEL_HIST_BUCKETS 65

enum model_hist_kind {
	MODEL_HIST_SIZE,
	MODEL_HIST_LIFETIME,
};

struct model_hist {
	const struct model_mem *mem;
	double count[MODEL_HIST_BUCKETS], bytes[MODEL_HIST_BUCKETS];
	double live_count, live_bytes; /* MODEL_HIST_LIFETIME: never freed */
	double total_count, total_bytes; /* every allocation */
};

/* Bucket b's bounds, inclusive: [*lo, *hi]. */
void model_hist_bounds(unsigned b, uint64_t *lo, uint64_t *hi);

/* One distribution per memory of the selected processes, in
 * model_memories() order (v[i].mem is its i-th); owned by the model.
 * MODEL_HIST_SIZE wants MODEL_WANT_SIZES (asked for here if not before:
 * the heap is then read again). */
int model_heap_hist(struct model *m, enum model_hist_kind kind, const struct model_hist **v,
		    size_t *n);

/* ---- steps ------------------------------------------------------------------------------ */

struct model_steps {
	const struct model_proc *proc;
	const char *name;     /* the range; NULL: the process has none */
	size_t n;             /* closed ranges of that name */
	const int64_t *start, *end; /* each step, by start */
	double total_ns, mean_ns, median_ns, p90_ns, min_ns, max_ns;
	double stddev_ns; /* population */
};

/*
 * p's steps: the ranges named name, or when name is NULL the most frequent
 * closed push range at depth 0 (ties: the first name in byte order).
 */
int model_steps(struct model *m, const struct model_proc *p, const char *name,
		const struct model_steps **out);

/* ---- GPU ------------------------------------------------------------------------------------- */

/* Kernels of one name, copies of one kind (or memsets), ranges of one name. */
struct model_gpu_agg {
	const char *name;   /* kernel: full (demangled) name; copy: HtoD, ..., memset; range */
	const char *domain; /* ranges: the NVTX domain, NULL for the default */
	struct stats st;    /* durations (ranges: the closed ones) */
	int64_t sum;        /* their exact total */
	int64_t bytes;      /* copies */
	int64_t open;       /* ranges left open */
	int64_t graph;      /* kernels: how many a CUDA graph launched */
};

/* Activity of one stream (stream >= 0, or -1: unknown) or one device. */
struct model_busy {
	int64_t device, stream;
	int64_t kernels, copies; /* recorded */
	int64_t busy_ns;         /* union of their intervals */
};

struct model_gpu {
	const struct model_proc *proc;
	struct model_gpu_agg *const *kernels, *const *copies, *const *ranges; /* by total time */
	size_t nkernels, ncopies, nranges;
	const struct model_busy *const *streams, *const *devices; /* by device, stream */
	size_t nstreams, ndevices;
	int64_t kernel_total;  /* recorded */
	int64_t kernel_count, graph_kernels; /* recorded; of them, launched by CUDA graphs */
	int64_t open_ranges;
	double scale;          /* recorded count or total -> estimate for the process (1: whole) */
};

/* p's GPU activity, as recorded (multiply by scale for estimates). */
int model_gpu(struct model *m, const struct model_proc *p, struct model_gpu *out);

/* ---- streams ----------------------------------------------------------------------------- */

/*
 * How to stream a table: the rows overlapping [begin_ns, end_ns) (absolute
 * ns; an instant: inside it), and whether in time order (by start, per
 * process; costs a sort when the store has no index, i.e. its recording
 * never closed).  NULL: every row, in the order stored.
 */
struct model_scan {
	int64_t begin_ns, end_ns;
	int by_time;
	int64_t proc_id; /* > 0: only this process's rows (it must be selected) */
	int brief;       /* kernels and CUDA calls: leave out the launch dimensions
			  * (and a kernel's registers and shared memory): -1, read
			  * faster */
};

/* Every row of one process (by time when by_time). */
static inline struct model_scan model_scan_proc(const struct model_proc *p, int by_time)
{
	return (struct model_scan){ INT64_MIN, INT64_MAX, by_time, p->proc_id, 0 };
}

struct model_kernel {
	const struct model_proc *proc;
	int64_t id, device, context, stream; /* stream, context -1: unknown */
	int64_t correlation;
	const char *name;                    /* full (demangled) name; NULL: unknown */
	int64_t start_ns, end_ns;
	int64_t grid[3], block[3];
	int64_t registers, static_smem, dynamic_smem; /* -1: unknown */
	int64_t graph_id;                    /* -1: none */
};

struct model_copy {
	const struct model_proc *proc;
	int64_t id, device, context, stream, correlation;
	int memset;                          /* 0: a copy */
	const char *kind;                    /* copy: HtoD, DtoH, ...; memset: NULL */
	const char *src_kind, *dst_kind;
	int64_t start_ns, end_ns, bytes;
	int64_t value;                       /* memset value */
};

/* A runtime or driver API call that started GPU work (CUPTI's view). */
struct model_api {
	const struct model_proc *proc;
	int64_t id, tid, correlation, cbid;
	const char *domain;                  /* "runtime" or "driver" */
	const char *name;
	int64_t start_ns, end_ns;
	int64_t stack_id, pystack_id;        /* the launching code's (schema 5); -1: none */
};

/* An intercepted CUDA runtime call (the shim's view). */
struct model_cuda_call {
	const struct model_proc *proc;
	int64_t id, tid;
	const struct model_fn *fn;
	int64_t start_ns, end_ns, ret;
	int64_t device, stream, bytes, copy_kind; /* -1 / 0 when not recorded */
	int64_t grid[3], block[3];
	/* where it was called from, for a call that blocked its thread
	 * SHM_BLOCKED_STACK_NS or more (schema 8); -1: none */
	int64_t stack_id, pystack_id;
};

/* A thread's CPU time as the collector read it (schema 8): on a CPU, and
 * runnable waiting for one (-1: unknown). */
struct model_cpu {
	const struct model_proc *proc;
	int64_t tid, ts_ns, cpu_ns, wait_ns;
};

struct model_range {
	const struct model_proc *proc;
	int64_t id, tid;
	int push;                            /* 1: push/pop, 0: start/end */
	const char *domain;                  /* NULL: NVTX's default domain */
	const char *name;
	int64_t start_ns, end_ns;            /* end_ns -1: still open */
	int64_t depth, parent_id;            /* parent_id -1: none */
};

struct model_marker {
	const struct model_proc *proc;
	int64_t tid;
	const char *domain, *name;
	int64_t ns;
};

struct model_window {
	const struct model_proc *proc;
	int64_t start_ns, end_ns, calls;
};

/* Each row of the selected processes that w keeps. */
int model_kernels_each(struct model *m, const struct model_scan *w,
		       int (*cb)(void *ctx, const struct model_kernel *k), void *ctx);
int model_copies_each(struct model *m, const struct model_scan *w,
		      int (*cb)(void *ctx, const struct model_copy *c), void *ctx);
int model_api_each(struct model *m, const struct model_scan *w,
		   int (*cb)(void *ctx, const struct model_api *a), void *ctx);
int model_cuda_calls_each(struct model *m, const struct model_scan *w,
			  int (*cb)(void *ctx, const struct model_cuda_call *c), void *ctx);
int model_ranges_each(struct model *m, const struct model_scan *w,
		      int (*cb)(void *ctx, const struct model_range *r), void *ctx);
int model_markers_each(struct model *m, const struct model_scan *w,
		       int (*cb)(void *ctx, const struct model_marker *k), void *ctx);
int model_windows_each(struct model *m, const struct model_scan *w,
		       int (*cb)(void *ctx, const struct model_window *g), void *ctx);
/* Readings of threads' CPU time; by time (w->by_time): per process by
 * time, else per process by thread and time. */
int model_cpu_each(struct model *m, const struct model_scan *w,
		   int (*cb)(void *ctx, const struct model_cpu *c), void *ctx);

/*
 * Where a call was made from: its stacks (an API call's, a CUDA call's)
 * rendered as the memory commands render an allocation's (sites.h): *native
 * the innermost frame of the caller's native code outside the CUDA
 * libraries, *python the innermost Python frame of the user's code ("fn
 * (file.py:line)"), each NULL when the call has no such stack.  Strings
 * owned by the model.  Returns 0, -EINVAL (a store without stacks), -EIO
 * or -ENOMEM.
 */
int model_stack_site(struct model *m, int64_t proc_id, int64_t stack_id, int64_t pystack_id,
		     const char **native, const char **python);

/* Whether the store has the indexes a closed recording gets (collector/
 * store.c): without them, time-ordered and filtered streams sort or scan. */
int model_indexed(const struct model *m);

/* The process's string id (demangled when it was mangled), or NULL. */
const char *model_string(struct model *m, int64_t proc_id, int64_t id);

#endif /* SHIMMER_TOOLS_MODEL_H */
