/*
 * NVTX ranges and markers, by NVTX's injection interface (see nvtx.c).
 */
#ifndef SHIMMER_NVTX_H
#define SHIMMER_NVTX_H

#include <stdint.h>

#include "shim.h"

/* Constructor, tracing on: reads SHIMMER_NVTX and sets NVTX_INJECTION64_PATH
 * to self (the shim's absolute path) when unset.  Not thread-safe. */
void nvtx_setup(const char *self);

/* NVTX's entry point; get is its NvtxGetExportTableFunc_t.  Returns 1 when
 * our handlers are installed, 0 to leave NVTX a no-op. */
int InitializeInjectionNvtx2(const void *(*get)(uint32_t));

#endif /* SHIMMER_NVTX_H */
