/*
 * The model's insides, shared by its files: model.c (opening, processes,
 * functions, calls, steps, strings, streams), model_heap.c (the pass over
 * allocations and every heap figure) and model_gpu.c (GPU aggregates).
 * Nothing outside tools/model*.c includes this.
 */
#ifndef SHIMMER_TOOLS_MODEL_INT_H
#define SHIMMER_TOOLS_MODEL_INT_H

#include "map.h"
#include "model.h"

/* The schema that has cuda_calls' stacks and cpu_time (008_findings.sql). */
#define MODEL_V_FINDINGS 8
/* The schema that has processes.exit_cpu_ns (014_exit_cpu.sql). */
#define MODEL_V_EXIT_CPU 14

struct model_heap;
struct model_gpu_data;

struct string_item {
	struct map_key key; /* proc, id, 0 */
	char *text;
	char *demangled;
};

struct steps_item {
	struct model_steps s;
	char *name;
	int64_t *start, *end;
	int named; /* asked for by name */
};

struct model {
	sqlite3 *db;
	int own_db;
	int own_txn;
	char *path; /* the main database's file; NULL when it has none */
	int version;
	int indexed;
	int unnamed_loaded; /* model_load_unnamed() done */
	struct model_filter filter;
	int callers; /* model_set_callers() */
	int native;  /* model_set_native() */
	sqlite3 *peer; /* model_share_names(): another store's files named too */

	struct model_proc *procs; /* by proc_id */
	size_t nprocs, nselected;
	struct model_proc **by_id; /* proc_id -> process, when proc_ids are small */
	int64_t by_id_n;
	const struct model_proc **children; /* every process's children, in runs */
	struct model_drop *drops;
	size_t ndrops;
	struct model_sampling *samplings;
	size_t nsamplings;

	struct model_fn *fns; /* by fn_id */
	size_t nfns;

	struct model_thread *threads; /* by process, tid */
	size_t nthreads;
	size_t *thread_first; /* per process: index of its first thread; [nprocs] = nthreads */
	int threads_loaded;

	struct map strings;
	int strings_loaded;

	struct map calls;
	struct model_calls **call_list;
	size_t ncalls;
	int calls_loaded;

	unsigned want;
	struct model_heap *heap;
	struct model_gpu_data *gpu;

	struct steps_item **steps;
	size_t nsteps, steps_cap;

	struct sites *call_sites; /* stacks of API and CUDA calls (model_stack_site) */
};

/* The selected process proc_id, or NULL (also when it is not selected). */
static inline const struct model_proc *model_selected(const struct model *m, int64_t proc_id)
{
	const struct model_proc *p;

	if (proc_id >= 0 && proc_id < m->by_id_n) {
		p = m->by_id[proc_id];
	} else {
		p = model_proc_by_id(m, proc_id);
	}
	return p && p->selected ? p : NULL;
}

/* Add heap timings of one function in one process (model.c). */
int model_calls_add(struct model *m, int64_t proc_id, int64_t fn_id, const struct stats *st,
		    long double sum);

/* Heap timings of the calls, from the heap pass (model_heap.c). */
int model_heap_add_times(struct model *m);
void model_heap_free(struct model_heap *h);
void model_gpu_free(struct model_gpu_data *g);

/* A statement on the model's connection; -EIO after one error line. */
int model_prepare(struct model *m, const char *sql, sqlite3_stmt **st);

/* 0 for NULL: the columns read so (times, ids) are never 0 when set. */
static inline int64_t col_i64(sqlite3_stmt *st, int col)
{
	return sqlite3_column_int64(st, col);
}

/* -1 for NULL. */
static inline int64_t col_opt(sqlite3_stmt *st, int col)
{
	return sqlite3_column_type(st, col) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, col);
}

#endif /* SHIMMER_TOOLS_MODEL_INT_H */
