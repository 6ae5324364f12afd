/*
 * The GPU part of `shimmer summary`: per process, what the GPU ran as
 * CUPTI reported it (kernels per name, copies per kind, memsets), the
 * NVTX ranges, per-stream and per-device busy time (the union of the
 * intervals, overlaps counted once), and the CPU time blocked in
 * synchronizing calls; written as table sections, CSV rows or a JSON
 * member.  For a process whose GPU activity was sampled (schema 4), the
 * kernel, copy and busy counts and totals are estimates for the whole
 * process, marked as such.  docs/usage.md describes the output.
 */
#ifndef SHIMMER_TOOLS_GPU_H
#define SHIMMER_TOOLS_GPU_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <sqlite3.h>

struct gpu;

/* A synchronizing CUDA call's figures in one process, from the caller's
 * per-function statistics. */
struct gpu_sync_fn {
	const char *name;
	int64_t count;
	double total_ns; /* mean x count when not exact */
	int exact;       /* every call was timed */
};

/* What the GPU writers need to know of a process besides the GPU tables. */
struct gpu_proc {
	int64_t proc_id;
	int64_t pid;
	int64_t rank;
	int has_rank;
	double wall_ns;     /* -1 when unknown */
	const char *status; /* processes.gpu_status; NULL: CUDA never started */
	const char *detail; /* processes.gpu_status_detail */
	int used_cuda;      /* CUDA runtime calls were intercepted */
	const struct gpu_sync_fn *sync;
	size_t nsync;
};

/* 1 when the CUDA runtime function name blocks the CPU until the GPU is
 * done: cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize
 * and the synchronous cudaMemcpy. */
int gpu_is_sync_fn(const char *name);

/*
 * Read the GPU tables of db into *out, one scan of each (and one sort of
 * the kernel and copy intervals for the busy times), and the gpu_sampling
 * view from schema version 4 on.  A store older than schema version 2
 * gives an empty result.  Returns 0, -EIO after printing
 * one "shimmer: error:" line, or -ENOMEM.  Release with gpu_free().
 */
int gpu_load(sqlite3 *db, struct gpu **out);

void gpu_free(struct gpu *g);

/* Write p's GPU sections: table sections, CSV rows (the summary's columns)
 * or a JSON member `"gpu":{...}` (no leading comma). */
void gpu_table(const struct gpu *g, FILE *out, const struct gpu_proc *p);
void gpu_csv(const struct gpu *g, FILE *out, const struct gpu_proc *p);
void gpu_json(const struct gpu *g, FILE *out, const struct gpu_proc *p);

#endif /* SHIMMER_TOOLS_GPU_H */
