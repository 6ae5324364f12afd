/* The workload's CUDA sequence as a per-thread-default-stream build calls
 * it: the CUDA header renames the stream-ordered calls to _ptsz/_ptds. */
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1
#define WL_CUDA_FN wl_cuda_ptsz
#define WL_PTSZ 1
#include "wl_cuda_body.h"
