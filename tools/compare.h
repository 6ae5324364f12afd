/*
 * shimmer compare A.db B.db: two runs side by side (compare.c; docs/usage.md).
 * Its comparison is also the report's (shimmer report --baseline).
 */
#ifndef SHIMMER_TOOLS_COMPARE_H
#define SHIMMER_TOOLS_COMPARE_H

#include <stdio.h>

#include "model.h"

/*
 * The comparison of A (ma, from the store at pa) and B (mb, pb) as
 * `shimmer compare` writes it, without --fail-if conditions, to out in fmt
 * (an emit_format).  Call before any other question to either model (it
 * says which heap figures it wants).  Returns 0 or a negative errno.
 */
int compare_write(struct model *ma, struct model *mb, const char *pa, const char *pb, FILE *out,
		  int fmt);

#endif /* SHIMMER_TOOLS_COMPARE_H */
