/*
 * drops.h - which reasons of the store's `drops` rows are losses, one list
 * for the collector (what `shimmer ls` counts as lost) and the tools (what
 * withholds a figure).  Most rows count events the store does not have; a
 * few count events it has, without their call stack (docs/schema.md):
 *
 *   stack_full       the shim's table of distinct native stacks was full
 *   pystack_full     the same for its table of Python stacks
 *   stack_collision  attached: the BPF stack map had no room
 *
 * Their events were stored (shown as "(no stack)", or without Python
 * frames), so every count and byte stays exact; only the sites that name
 * them are missing.  Header only.
 */
#ifndef SHIMMER_DROPS_H
#define SHIMMER_DROPS_H

#include <string.h>

#define DROP_STACK_FULL "stack_full"
#define DROP_PYSTACK_FULL "pystack_full"
#define DROP_STACK_COLLISION "stack_collision"

/* Whether a drops row of this reason counts events the store lacks. */
static inline int drop_is_loss(const char *reason)
{
	return strcmp(reason, DROP_STACK_FULL) != 0 && strcmp(reason, DROP_PYSTACK_FULL) != 0 &&
	       strcmp(reason, DROP_STACK_COLLISION) != 0;
}

#endif /* SHIMMER_DROPS_H */
