/*
 * The shim's settings: every SHIMMER_* environment variable, read once by
 * the constructor (settings_read()) into `settings`, read-only after that.
 * A value that cannot be used - a misspelt word, a number that is not one
 * or is out of range, a ring size that is not a power of two - gets one
 * line on stderr naming the variable, the value, and what is used instead;
 * an empty value means the default, silently.  The table of variables, with
 * their defaults, is in settings.c and README.md.
 *
 * Reads the environment with getenv (no allocation); safe to call again in
 * a fork child (same environment, no new lines: lines are said once).
 */
#ifndef SHIMMER_SETTINGS_H
#define SHIMMER_SETTINGS_H

#include <stdint.h>

struct settings {
	int disable;            /* SHIMMER_DISABLE: pass every call through */
	const char *socket;     /* SHIMMER_SOCKET */
	int malloc_mode;        /* SHIMMER_MALLOC: enum shm_malloc_mode */
	uint64_t sample_bytes;  /* SHIMMER_SAMPLE_BYTES */
	int lossless;           /* SHIMMER_LOSSLESS; on by default with SHIMMER_MALLOC=all */
	uint32_t heap_rows;     /* SHIMMER_HEAP_ROWS: SHM_HELLO_HEAP_* (all mode) */
	int offcpu;             /* SHIMMER_OFFCPU: ask the collector for off-CPU time */
	uint32_t ring_bytes;    /* SHIMMER_RING_KB * 1024, a power of two (1 MiB by default with SHIMMER_MALLOC=all) */
	uint32_t nslots;        /* SHIMMER_MAX_THREADS */
	int stacks;             /* SHIMMER_STACKS */
	uint32_t stack_depth;   /* SHIMMER_STACK_DEPTH, 1..SHM_STACK_MAX */
	int stack_check;        /* SHIMMER_STACK_CHECK: walks checked against unw_backtrace */
	int cupti;              /* SHIMMER_CUPTI */
	int gpu_sample;         /* SHIMMER_GPU: 1 sample, 0 all */
	uint64_t gpu_window_ns; /* SHIMMER_GPU_WINDOW_MS */
	uint64_t gpu_period_ns; /* SHIMMER_GPU_PERIOD_MS */
	int gpu_detach;         /* SHIMMER_GPU_DETACH */
	int gpu_sync;           /* SHIMMER_GPU_SYNC */
	int nvtx;               /* SHIMMER_NVTX */
	int debug;              /* SHIMMER_DEBUG */
	int32_t rank;           /* RANK and friends, SHM_NO_RANK when none */
	int32_t local_rank;     /* LOCAL_RANK and friends */
};

extern struct settings settings;

/* Fills `settings` from the environment (and turns debug lines on when
 * SHIMMER_DEBUG says so).  With SHIMMER_DISABLE set, reads nothing else. */
void settings_read(void);

#endif /* SHIMMER_SETTINGS_H */
