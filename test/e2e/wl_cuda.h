/*
 * The workload's CUDA call sequence, compiled twice: wl_cuda_plain.c calls
 * the plain entry points, wl_cuda_ptsz.c is built with
 * CUDA_API_PER_THREAD_DEFAULT_STREAM, so the CUDA header renames the
 * per-thread-stream calls to their _ptsz/_ptds variants, as nvcc
 * --default-stream per-thread does.  Each call is logged (wlog.h) with the
 * fields common/wire.h says the shim records.
 */
#ifndef WL_CUDA_H
#define WL_CUDA_H

/* Runs the sequence on the calling thread; k (< 64) makes sizes distinct. */
void wl_cuda_plain(unsigned k);
void wl_cuda_ptsz(unsigned k);
/* Calls that fail: cudaMalloc of an impossible size, a bad copy kind. */
void wl_cuda_failures(void);
/* n cudaMalloc of size bytes each, all freed; returns the bytes. */
unsigned long long wl_cuda_mallocs(unsigned n, unsigned long long size);

#endif
