/*
 * gen_store: writes a large shimmer store quickly, for the tools'
 * benchmarks (bench/run-bench, section 9: export-bench).  Tracing a workload big
 * enough (5 million allocations, a million kernels) takes minutes on two
 * cores; this writes the same rows through the collector's own store
 * module (collector/store.h: the schema files, the batched writer, the
 * readers' indexes made at close), so the file is what shimmerd would have
 * written for such a run, in seconds.
 *
 *   gen_store DB [-a ALLOCS] [-k KERNELS] [-p] [-t THREADS] [-s SEED] [-S STACKS -d]
 *
 * One process (SHIMMER_MALLOC=all, lossless, nothing dropped):
 *  - ALLOCS heap allocations (default 5,000,000), malloc and calloc on
 *    THREADS threads (4), sizes log-uniform in 16 B..64 KiB, most freed
 *    within microseconds, some after milliseconds or seconds, 1% never
 *    (10 million heap events with the frees); one call in 8 timed, as the
 *    shim times them; each from one of 256 native stacks (6..24 frames of
 *    a pool of 512 return addresses, which name no loaded object: the
 *    tools print them as addresses), the first stacks far more often;
 *    a thousand cudaMalloc blocks on device 0;
 *  - KERNELS kernels (default 0) on 4 streams of device 0, 40 names, each
 *    launched by a cudaLaunchKernel the shim intercepted (cuda_calls) and
 *    CUPTI saw (gpu_api, with the launching Python stack, one of 16 lines
 *    of train.py), linked by its correlation id; with the process's GPU
 *    activity recorded whole (SHIMMER_GPU=all).  -p: each stream is
 *    backed up and runs its kernels as programmatic dependent launch does,
 *    each starting 2 us before the one before it on its stream ends (every
 *    kernel overlaps: the worst case of chrome's overlap lanes).
 * Exact per-thread call counts (function_counts) match the rows.  The
 * same seed writes the same rows.  Exit status 0, or 1 with one line.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collector/store.h"
#include "wire.h"

#define NSTACKS 256 /* by default */
#define NPCS 512
#define NKNAMES 40
#define NPYLINES 16
#define NSTREAMS 4
#define COMMIT_ROWS 200000

/* String ids of the process (strings table). */
enum {
	S_THREAD = 1,            /* thread names: S_THREAD + index */
	S_KERNEL = 100,          /* kernel names */
	S_API = 200,             /* "cudaLaunchKernel" */
	S_PYFILE = 201,          /* "train.py" */
	S_PYFUNC = 210,          /* Python functions */
	S_ANY = 300,
};

static uint64_t rng_state;

/* xorshift64*: fast, and the same rows for the same seed. */
static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ull;
}

static double unit(void)
{
	return (double)(rnd() >> 11) / 9007199254740992.0;
}

/* exponential with this mean */
static int64_t expo(double mean)
{
	return (int64_t)(-log(1.0 - unit()) * mean);
}

static int fail(const char *what, int err)
{
	fprintf(stderr, "gen_store: %s: %s\n", what, strerror(err < 0 ? -err : err));
	return 1;
}

struct gen {
	struct store *s;
	int64_t proc;
	uint32_t nthreads;
	int pdl;
	int64_t start_ns, now, rows;
	uint64_t mallocs[64], callocs[64], frees[64], mbytes[64], cbytes[64];
};

static int rows_done(struct gen *g, int64_t n)
{
	g->rows += n;
	if (g->rows < COMMIT_ROWS)
		return 0;
	g->rows = 0;
	return store_commit(g->s);
}

static int string(struct gen *g, uint32_t id, const char *text, const char *demangled)
{
	return store_string_add(g->s, g->proc, id, text, strlen(text), demangled);
}

static uint32_t nstacks = NSTACKS;
static int deep;

static int stacks(struct gen *g)
{
	uint64_t pcs[NPCS], frames[64];
	struct stacktree tree = { 0 };
	int err = 0;

	for (int i = 0; i < NPCS; i++)
		pcs[i] = 0x7f0000400000ull + (rnd() % 0x200000) * 16;
	for (uint32_t id = 1; !err && id <= nstacks; id++) {
		uint32_t depth = deep ? 30 + (uint32_t)(rnd() % 31) : 6 + (uint32_t)(rnd() % 19);
		uint32_t h = id * 2654435761u;

		/* outer frames shared: a call tree, not noise */
		for (uint32_t l = 0; l < depth; l++) {
			uint32_t k = depth - 1 - l, bits = k / 4 < 16 ? k / 4 : 16;

			frames[l] = deep ? pcs[(k * 37 + (bits ? h >> (32 - bits) : 0)) % NPCS]
					 : pcs[(l * 37 + (l < depth - 4 ? id % 8 : id)) % NPCS];
		}
		err = store_stack_add(g->s, g->proc, &tree, id, frames, depth);
	}
	stacktree_free(&tree);
	return err;
}

/* A stack id, the first ones far more often (the product of two uniforms). */
static uint32_t pick_stack(void)
{
	uint64_t a = rnd() % nstacks, b = rnd() % nstacks;

	return 1 + (uint32_t)(a * b / nstacks);
}

static int heap(struct gen *g, int64_t nallocs, int64_t span_ns)
{
	double step = (double)span_ns / (double)(nallocs + 1);
	int64_t end = g->start_ns + span_ns;
	int err = 0;

	for (int64_t i = 0; !err && i < nallocs; i++) {
		uint32_t t = (uint32_t)(rnd() % g->nthreads);
		double r = unit();
		struct store_alloc a = {
			.proc_id = g->proc,
			.space = "host",
			.device = -1,
			.size = (uint64_t)exp(log(16) + unit() * (log(65536) - log(16))),
			.weight = 0,
			.fn = rnd() % 20 ? SHM_FN_MALLOC : SHM_FN_CALLOC,
			.tid = 1000 + t,
			.ns = g->start_ns + (int64_t)(step * (double)i),
			.end_ns = -1,
			.stack_id = pick_stack(),
		};
		int64_t id, life;

		a.ptr = 0x555500000000ull + (uint64_t)i * 64;
		a.weight = (double)a.size;
		if (i % 8 == 0)
			a.end_ns = a.ns + 40 + (int64_t)(rnd() % 200);
		err = store_alloc_add(g->s, &a, &id);
		if (err)
			break;
		if (a.fn == SHM_FN_MALLOC) {
			g->mallocs[t]++;
			g->mbytes[t] += a.size;
		} else {
			g->callocs[t]++;
			g->cbytes[t] += a.size;
		}
		life = r < 0.70 ? 200 + expo(2000) : r < 0.95 ? expo(50e6) : r < 0.99 ? expo(500e6)
									: -1;
		if (life >= 0 && a.ns + life < end) {
			int64_t fns = a.ns + life;

			err = store_alloc_free(g->s, id, SHM_FN_FREE, a.tid, fns,
					       i % 8 == 0 ? fns + 30 : -1);
			g->frees[t]++;
		}
		if (!err)
			err = rows_done(g, 1);
	}
	/* device memory: a thousand blocks, the model's weights and activations */
	for (int i = 0; !err && i < 1000; i++) {
		struct store_alloc a = {
			.proc_id = g->proc,
			.space = "device",
			.device = 0,
			.ptr = 0x7f1000000000ull + (uint64_t)i * (1u << 22),
			.size = (uint64_t)(1 + rnd() % 64) << 16,
			.fn = SHM_FN_CUDA_MALLOC,
			.tid = 1000,
			.ns = g->start_ns + (int64_t)((double)span_ns * i / 1000.0),
			.end_ns = -1,
			.stack_id = pick_stack(),
		};
		int64_t id;

		a.end_ns = a.ns + 5000;
		a.weight = (double)a.size;
		err = store_alloc_add(g->s, &a, &id);
		if (!err && i % 3)
			err = store_alloc_free(g->s, id, SHM_FN_CUDA_FREE, 1000,
					       a.ns + (int64_t)(rnd() % (uint64_t)(span_ns / 10)),
					       -1);
	}
	return err;
}

static int kernels(struct gen *g, int64_t n, int64_t span_ns)
{
	int64_t step = span_ns / (n + 1), busy[NSTREAMS] = { 0 };
	uint64_t launches = 0;
	char name[96], dem[64];
	int err = 0;

	for (int k = 0; !err && k < NKNAMES; k++) {
		int len = snprintf(dem, sizeof(dem), "elementwise_kernel_%d", k);

		/* a mangled name, and the demangled one the collector would store */
		snprintf(name, sizeof(name), "_Z%d%sILi4EfEvPT_", len, dem);
		snprintf(dem, sizeof(dem), "void elementwise_kernel_%d<4, float>(float*)", k);
		err = string(g, S_KERNEL + (uint32_t)k, name, dem);
	}
	if (!err)
		err = string(g, S_API, "cudaLaunchKernel", NULL);
	if (!err)
		err = string(g, S_PYFILE, "train.py", NULL);
	for (int f = 0; !err && f < 4; f++) {
		static const char *const fns[] = { "<module>", "train_step", "forward", "backward" };

		err = string(g, S_PYFUNC + (uint32_t)f, fns[f], NULL);
	}
	/* Python stacks: <module> -> train_step -> forward|backward, at one of 16 lines */
	for (uint32_t id = 1; !err && id <= NPYLINES; id++) {
		struct shm_pyframe fr[3] = {
			{ S_PYFILE, S_PYFUNC + 2 + (id & 1), 40 + id, 0 },
			{ S_PYFILE, S_PYFUNC + 1, 20 + (id & 1), 0 },
			{ S_PYFILE, S_PYFUNC, 90, 0 },
		};

		err = store_pystack_add(g->s, g->proc, id, fr, 3);
	}
	for (int64_t i = 0; !err && i < n; i++) {
		int64_t t0 = g->start_ns + step * i, t1 = t0 + step / 2;
		uint32_t stream = (uint32_t)(i % NSTREAMS), py = 1 + (uint32_t)(rnd() % NPYLINES);
		int64_t kd = (g->pdl ? 21000 : 1000) + (int64_t)(rnd() % 8000);
		int64_t ready = g->pdl ? busy[stream] - 2000 : busy[stream];
		int64_t ks = t1 + 500 > ready ? t1 + 500 : ready;
		struct shm_rec_cuda c = {
			.hdr = { .type = SHM_REC_CUDA, .size = sizeof(c), .fn = SHM_FN_CUDA_LAUNCH_KERNEL },
			.device = 0,
			.stream = 7 + stream,
			.grid = { 1 + (uint32_t)(i % 1024), 1, 1 },
			.block = { 256, 1, 1 },
		};
		struct shm_rec_api a = {
			.hdr = { .type = SHM_REC_API, .size = sizeof(a) },
			.correlation = (uint64_t)i + 1,
			.name_id = S_API,
			.domain = SHM_API_RUNTIME,
			.cbid = 211,
			.pystack_id = py,
		};
		struct shm_rec_kernel k = {
			.hdr = { .type = SHM_REC_KERNEL, .size = sizeof(k) },
			.correlation = (uint64_t)i + 1,
			.name_id = S_KERNEL + (uint32_t)(rnd() % NKNAMES),
			.device = 0,
			.context = 1,
			.stream = 7 + stream,
			.registers = 32,
			.grid = { 1 + (uint32_t)(i % 1024), 1, 1 },
			.block = { 256, 1, 1 },
		};

		busy[stream] = ks + kd;
		err = store_cuda_add(g->s, g->proc, 1000, &c, t0, t1);
		if (!err)
			err = store_api_add(g->s, g->proc, 1000, &a, t0 + 100, t1 - 100);
		if (!err)
			err = store_kernel_add(g->s, g->proc, &k, ks, ks + kd);
		if (!err)
			err = rows_done(g, 3);
		launches++;
	}
	if (!err && n)
		err = store_count_add(g->s, g->proc, 1000, SHM_FN_CUDA_LAUNCH_KERNEL, launches, 0);
	return err;
}

int main(int argc, char **argv)
{
	struct gen g = { .nthreads = 4 };
	int64_t nallocs = 5000000, nkernels = 0;
	const char *path = NULL;
	struct timespec wall;
	struct store_proc p;
	uint64_t seed = 1;
	int64_t span;
	int opt, err;

	while ((opt = getopt(argc, argv, "a:k:pt:s:S:d")) != -1) {
		switch (opt) {
		case 'a':
			nallocs = atoll(optarg);
			break;
		case 'k':
			nkernels = atoll(optarg);
			break;
		case 'p':
			g.pdl = 1;
			break;
		case 't':
			g.nthreads = (uint32_t)atoi(optarg);
			break;
		case 's':
			seed = strtoull(optarg, NULL, 0);
			break;
		case 'S':
			nstacks = (uint32_t)atoi(optarg);
			break;
		case 'd':
			deep = 1;
			break;
		default:
			goto usage;
		}
	}
	if (optind + 1 != argc || nallocs < 0 || nkernels < 0 || g.nthreads < 1 ||
	    g.nthreads > 64 || nstacks < 1 || nstacks > 1000000)
		goto usage;
	path = argv[optind];
	rng_state = seed * 0x9e3779b97f4a7c15ull + 1;
	if (unlink(path) && errno != ENOENT)
		return fail(path, errno);
	g.s = store_open(path);
	if (!g.s)
		return fail(path, errno);
	clock_gettime(CLOCK_REALTIME, &wall);
	g.start_ns = 1000000000000ll;
	p = (struct store_proc){
		.pid = 4242, .ppid = 1, .uid = (uint32_t)getuid(),
		.host = "bench", .host_len = 5, .exe = "/usr/bin/python3", .exe_len = 16,
		.argv_json = "[\"python3\",\"train.py\"]", .argv_json_len = 22,
		.rank = SHM_NO_RANK, .local_rank = SHM_NO_RANK,
		.malloc_mode = "all", .sample_bytes = -1, .lossless = 1,
		.start_wall_ns = (int64_t)wall.tv_sec * 1000000000 + wall.tv_nsec,
		.start_ns = g.start_ns,
	};
	err = store_process_add(g.s, &p, &g.proc);
	/* about 200 ns an allocation (a busy allocator), 5 us a launch */
	span = nallocs * 200 > nkernels * 5000 ? nallocs * 200 : nkernels * 5000;

	if (span < 1000000)
		span = 1000000;
	for (uint32_t t = 0; !err && t < g.nthreads; t++) {
		char name[32];

		snprintf(name, sizeof(name), t ? "worker-%u" : "python3", t);
		err = string(&g, S_THREAD + t, name, NULL);
		if (!err)
			err = store_thread_add(g.s, g.proc, 1000 + t, S_THREAD + t, g.start_ns);
	}
	if (!err)
		err = stacks(&g);
	if (!err)
		err = heap(&g, nallocs, span);
	if (!err)
		err = kernels(&g, nkernels, span);
	for (uint32_t t = 0; !err && t < g.nthreads; t++) {
		err = store_count_add(g.s, g.proc, 1000 + t, SHM_FN_MALLOC, g.mallocs[t],
				      g.mbytes[t]);
		if (!err)
			err = store_count_add(g.s, g.proc, 1000 + t, SHM_FN_CALLOC, g.callocs[t],
					      g.cbytes[t]);
		if (!err)
			err = store_count_add(g.s, g.proc, 1000 + t, SHM_FN_FREE, g.frees[t], 0);
	}
	if (!err)
		err = store_process_end(g.s, g.proc, g.start_ns + span + 1000, "exit", 0);
	if (err) {
		store_close(g.s);
		return fail(path, err);
	}
	err = store_close(g.s);
	if (err)
		return fail(path, err);
	return 0;
usage:
	fprintf(stderr, "usage: gen_store DB [-a ALLOCS] [-k KERNELS] [-p] [-t THREADS] [-s SEED]\n"
		"                [-S STACKS] [-d]\n");
	return 2;
}
