/*
 * Finding and binding libcupti (one job of the CUPTI modules; cupti.h
 * names the others).
 *
 * Which libcupti: the one matching the process's CUDA runtime - (1) one
 * already loaded, (2) beside the loaded libcudart (pip wheels: the same
 * directory for CUDA 13, ../../cuda_cupti/lib for CUDA 12), (3) under
 * $CUDA_HOME and /usr/local/cuda.  Only the functions in CUPTI_FNS are
 * used; they are reached through cupti_fn, filled once by cupti_lib_bind()
 * before any other CUPTI module runs and read-only after.
 */
#ifndef SHIMMER_CUPTI_LIB_H
#define SHIMMER_CUPTI_LIB_H

#include <limits.h>
#include <stddef.h>

#include <cupti.h>

/* X(name, required) */
#define CUPTI_FNS(X)                                                        \
	X(cuptiSubscribe, 1) X(cuptiSubscribe_v2, 0) X(cuptiUnsubscribe, 1) \
	X(cuptiEnableCallback, 1) X(cuptiGetCallbackName, 1)                \
	X(cuptiActivityEnable, 1) X(cuptiActivityDisable, 1)                \
	X(cuptiActivityRegisterCallbacks, 1)                                \
	X(cuptiActivityRegisterTimestampCallback, 1)                        \
	X(cuptiActivitySetAttribute, 0)                                     \
	X(cuptiActivityFlushAll, 1) X(cuptiActivityFlushPeriod, 0)          \
	X(cuptiActivityGetNextRecord, 1)                                    \
	X(cuptiActivityGetNumDroppedRecords, 1) X(cuptiGetResultString, 1) \
	X(cuptiFinalize, 0)

#define CUPTI_FN_PTR(name, req) __typeof__(&name) name;
struct cupti_fns {
	CUPTI_FNS(CUPTI_FN_PTR)
};
#undef CUPTI_FN_PTR

/* The functions of the loaded libcupti; optional ones may be NULL. */
extern struct cupti_fns cupti_fn;

/* The path of the libcupti loaded, "" before. */
extern char cupti_lib_path[PATH_MAX];

/* dlopens the libcupti that matches the runtime and sets cupti_lib_path;
 * NULL with why[0..len) saying where it looked.  Not thread-safe (the one
 * start). */
void *cupti_lib_load(char *why, size_t len);

/* Fills cupti_fn from h.  0, or -ENOENT with why naming the required
 * function missing.  Not thread-safe (the one start). */
int cupti_lib_bind(void *h, char *why, size_t len);

/* CUPTI's words for r, or "unknown CUPTI error". */
const char *cupti_result_str(CUptiResult r);

#endif /* SHIMMER_CUPTI_LIB_H */
