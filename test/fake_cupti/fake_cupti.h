/*
 * The private link between the fake CUDA runtime (test/fake_cudart) and the
 * fake CUPTI (test/fake_cupti): what the real driver and CUPTI share inside
 * NVIDIA's libraries.  Neither name below is a CUDA or CUPTI name.
 *
 * The fake CUPTI is loaded by whoever profiles (the shim dlopens it, often
 * RTLD_LOCAL), so the runtime cannot look it up; instead its constructor
 * finds fake_cudart_attach_cupti() in the already loaded runtime
 * (dlsym(RTLD_DEFAULT)) and hands it the operations below.  The runtime
 * then calls them around every entry point:
 *
 *   api_enter()  before the work: assigns call->correlation and runs the
 *                subscriber's CUPTI_API_ENTER callback if it is enabled;
 *   timestamp()  CUPTI's clock (the registered timestamp callback, else
 *                CLOCK_REALTIME, which is not the host's monotonic clock);
 *   work_begins() as the "GPU" starts work: whether CUPTI records it (its
 *                activity kind enabled now), in op;
 *   record()     one activity record for work the "GPU" did, if it was
 *                recorded as it began (whatever the kinds are by its end, as
 *                CUPTI records work launched while its kind was on; lost,
 *                and counted, when CUPTI was detached meanwhile);
 *   api_exit()   CUPTI_API_EXIT with the call's return value.
 *
 * All operations are thread-safe; none allocates with malloc.
 */
#ifndef FAKE_CUPTI_H
#define FAKE_CUPTI_H

#include <stdint.h>

#include <cupti_callbacks.h>

struct fake_cupti_call {
	CUpti_CallbackDomain domain;
	CUpti_CallbackId cbid;
	const char *symbol;   /* launches: the kernel's (mangled) name */
	const void *params;   /* the call's <fn>_params struct, or NULL */
	uint32_t correlation; /* set by api_enter */
	uint64_t correlation_data;
	int ret;              /* set before api_exit */
};

enum fake_gpu_op_kind {
	FAKE_OP_KERNEL = 1,
	FAKE_OP_MEMCPY,
	FAKE_OP_MEMSET,
	FAKE_OP_SYNC,
};

/* Work the "GPU" did; fields by kind, unused ones 0. */
struct fake_gpu_op {
	enum fake_gpu_op_kind kind;
	uint32_t correlation;
	uint64_t start, end;
	uint32_t device, context, stream;
	/* kernel */
	const char *name;
	int32_t grid[3], block[3];
	int32_t dynamic_smem, static_smem;
	uint16_t registers;
	uint32_t graph_id;   /* launched by a CUDA graph: its id; else 0 */
	uint64_t graph_node; /* and the graph node's id */
	/* memcpy, memset */
	uint64_t bytes;
	uint8_t copy_kind, src_kind, dst_kind; /* CUpti_ActivityMemcpyKind / MemoryKind */
	uint8_t async;
	uint32_t value;
	uint16_t mem_kind;
	/* sync */
	uint32_t sync_type; /* CUpti_ActivitySynchronizationType */
	uint32_t event;
	/* set by work_begins() */
	uint32_t rec_kind;  /* CUpti_ActivityKind recording it; 0: none */
	uint64_t rec_attach; /* the attachment it began in */
};

struct fake_cupti_ops {
	void (*api_enter)(struct fake_cupti_call *call);
	void (*api_exit)(struct fake_cupti_call *call);
	uint64_t (*timestamp)(void);
	void (*work_begins)(struct fake_gpu_op *op);
	void (*record)(const struct fake_gpu_op *op);
};

/* Exported by the fake runtime; ops must stay valid for the process's life. */
void fake_cudart_attach_cupti(const struct fake_cupti_ops *ops);

#endif
