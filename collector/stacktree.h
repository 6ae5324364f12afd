/*
 * The stack tree of one process as the collector writes it (schema 10,
 * stack_nodes): which node id each (caller node, return address) already
 * has, so that stacks sharing their outer frames share their nodes.  Node
 * ids run from 1 in the order nodes are made, so a node's caller always has
 * a lower id; 0 is the root (no caller).
 *
 * The map is a cache: past STACKTREE_MAX_NODES remembered nodes it stops
 * remembering (a process that sends ever new stacks cannot make the
 * daemon's memory grow without bound), and new nodes are then made again
 * for frames it no longer finds: the tree stays right, it only shares less.
 * Not thread-safe.
 */
#ifndef SHIMMER_COLLECTOR_STACKTREE_H
#define SHIMMER_COLLECTOR_STACKTREE_H

#include <stddef.h>
#include <stdint.h>

#define STACKTREE_MAX_NODES (1u << 18)

struct stacktree_slot {
	uint64_t pc;
	uint32_t parent;
	uint32_t node; /* 0: empty */
};

/* Zero-initialised is empty and valid; next 0 means not yet numbered
 * (store.c starts it after the ids the process already has in the store). */
struct stacktree {
	struct stacktree_slot *slots;
	size_t mask, count;
	uint32_t next; /* the id the next new node gets */
};

/* The node of pc called from parent, or 0 when none is remembered. */
uint32_t stacktree_find(const struct stacktree *t, uint32_t parent, uint64_t pc);

/* Remembers node (non-zero) as the node of pc called from parent.  0, or
 * -ENOMEM (the tree is unchanged); a full map ignores it and returns 0. */
int stacktree_remember(struct stacktree *t, uint32_t parent, uint64_t pc, uint32_t node);

/* Releases the map; empty (and not numbered) afterwards. */
void stacktree_free(struct stacktree *t);

#endif
