/*
 * The shim's settings: every SHIMMER_* environment variable, read once by
 * the constructor (settings_read()) into `settings`, read-only after that.
 * A value that cannot be used - a misspelt word, a number that is not one
 * or is out of range, a ring size that is not a power of two - gets one
 * line on stderr naming the variable, the value, and what is used instead;
 * an empty value means the default, silently.  The table of variables, with
 * their defaults, is in settings.c and README.md.
 *
 * Defaults come from the service configuration (common/conf.h) when the
 * process talks to the service: with SHIMMER_SOCKET unset, the file
 * SHIMMER_CONFIG names (else /etc/shimmer/shimmerd.conf), if present, gives
 * the socket and a default for any SHIMMER_* variable the environment
 * leaves unset or empty.  A process given SHIMMER_SOCKET (shimmer run) has
 * a collector of its own and reads no file.
 *
 * Reads the environment with getenv (no allocation); safe to call again in
 * a fork child (same environment, no new lines: lines are said once).
 */
#ifndef SHIMMER_SETTINGS_H
#define SHIMMER_SETTINGS_H

#include <stdint.h>

/* When recording starts or stops (SHIMMER_START, SHIMMER_STOP). */
enum trigger_kind {
	TRIGGER_NONE = 0, /* START: at once; STOP: never */
	TRIGGER_PAUSED,   /* START only: paused until `shimmer ctl` or shimmer_resume() */
	TRIGGER_AFTER,    /* ns after the process started */
	TRIGGER_RANGE,    /* when the count-th instance of the range `range` ended */
};

#define TRIGGER_RANGE_MAX 64 /* bytes of a range name, NUL included */

struct trigger {
	int kind; /* enum trigger_kind */
	uint64_t ns;
	uint64_t count;
	char range[TRIGGER_RANGE_MAX];
};

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
	struct trigger start;   /* SHIMMER_START */
	struct trigger stop;    /* SHIMMER_STOP */
	uint64_t duration_ns;   /* SHIMMER_DURATION: recording stops this long after it
				   first started; 0 never */
	int control;            /* SHIMMER_CONTROL: the process takes `shimmer ctl` commands */
	int32_t rank;           /* RANK and friends, SHM_NO_RANK when none */
	int32_t local_rank;     /* LOCAL_RANK and friends */
	const char *job;        /* the job key (SHIMMER_JOB, a launcher's id, pgid:N) */
	uint32_t job_len;       /* at most SHM_JOB_MAX */
	int job_kind;           /* enum shm_job_kind */
	const char *conf;       /* the configuration file read, NULL if none */
	const char *withhold;   /* SHIMMER_TEST_WITHHOLD (tests): names that contain it
				   are never announced (intern_withhold()); NULL: none */
};

extern struct settings settings;

/* Fills `settings` from the environment (and turns debug lines on when
 * SHIMMER_DEBUG says so).  With SHIMMER_DISABLE set, reads nothing else. */
void settings_read(void);

#endif /* SHIMMER_SETTINGS_H */
