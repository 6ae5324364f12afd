/*
 * sym_dump: symbolize every distinct (process, pc) of a store's stacks as
 * a return address, as the readers do, and print each logical frame.
 *
 *   sym_dump STORE [-q]
 *
 * One line per frame: proc, pc, level, status, module, offset, function,
 * file:line.  With -q nothing is printed: the time is the symbolizer's
 * (bench/RESULTS.md, "Symbolizing PyTorch-sized libraries").  Two builds'
 * outputs diff equal when a change to tools/symbolize.c keeps its answers.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "tools/store.h"
#include "tools/symbolize.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	struct symbolizer *sym = NULL;
	int quiet = argc > 2 && strcmp(argv[2], "-q") == 0;
	long pcs = 0, frames = 0;
	double t0;
	int r, err;

	if (argc < 2) {
		fprintf(stderr, "usage: sym_dump STORE [-q]\n");
		return 2;
	}
	err = store_connect(argv[1], &db);
	if (!err)
		err = store_prepare(db, store_schema_version(db) >= 10
					? "SELECT DISTINCT proc_id, pc FROM stack_nodes ORDER BY proc_id, pc"
					: "SELECT DISTINCT proc_id, pc FROM stack_frames ORDER BY proc_id, pc",
				    &st);
	if (!err && !(sym = symbolizer_new(db)))
		err = -ENOMEM;
	t0 = now_s();
	while (!err && (r = store_step(db, st)) > 0) {
		int64_t proc = sqlite3_column_int64(st, 0);
		uint64_t pc = (uint64_t)sqlite3_column_int64(st, 1);
		const struct sym_frame *f;
		int n = symbolize_pc(sym, proc, pc, 1, &f);

		if (n < 0) {
			err = n;
			break;
		}
		pcs++;
		frames += n;
		for (int i = 0; i < n && !quiet; i++)
			printf("%" PRId64 " %" PRIx64 " %d %s %s +%" PRIx64 " %s %s:%d\n", proc, pc,
			       i, sym_status_name(f[i].status), f[i].module ? f[i].module : "-",
			       f[i].offset, f[i].function ? f[i].function : "-",
			       f[i].file ? f[i].file : "-", f[i].line);
	}
	fprintf(stderr, "%ld pcs, %ld frames in %.3f s\n", pcs, frames, now_s() - t0);
	symbolizer_free(sym);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return err ? 1 : 0;
}
