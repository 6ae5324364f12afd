/*
 * The GPU part of `shimmer summary`: per process, what the GPU ran as
 * CUPTI reported it (kernels per name, copies per kind, memsets), the
 * NVTX ranges, per-stream and per-device busy time (the union of the
 * intervals, overlaps counted once), and the CPU time blocked in
 * synchronizing calls; written through the emitter as table sections, CSV
 * rows (the summary's columns) or a JSON member "gpu".  For a process
 * whose GPU activity was sampled, the kernel, copy and busy counts and
 * totals are estimates for the whole process, marked as such.  The
 * figures are the model's (model_gpu); docs/usage.md describes the output.
 */
#ifndef SHIMMER_TOOLS_GPU_H
#define SHIMMER_TOOLS_GPU_H

#include "emit.h"
#include "model.h"

/* The summary's CSV columns, shared by every row it writes: each table of
 * the summary lists these (marked EMIT_IN_CSV) in this order. */
#define SUMMARY_CSV_HEAD                                                                  \
	"pid,rank,event,count,bytes,total_ns,mean_ns,stddev_ns,min_ns,max_ns,timed,"      \
	"wall_share,kind,proc_id"

/* Write p's GPU sections; kernel names in tables are short unless
 * full_names; max_rows > 0 limits each table section to its first rows
 * (by time), with a line saying how many more there are.  Returns 0 or a
 * negative errno (the model's). */
int gpu_emit(struct emit *e, struct model *m, const struct model_proc *p, int full_names,
	     size_t max_rows);

#endif /* SHIMMER_TOOLS_GPU_H */
