/*
 * liborder.so (order_lib.c): the pool's block size and the calls with
 * which wl_hard order holds the real allocator's calls open.  The
 * workload finds them with dlsym(RTLD_DEFAULT): they are there only when
 * the library is preloaded behind the shim.
 */
#ifndef SHIMMER_ORDER_LIB_H
#define SHIMMER_ORDER_LIB_H

/* the one size the pool serves (no other call of the workload uses it) */
#define ORDER_SIZE 3001

/* The next free of the pool's block returns only after order_let_free(),
 * the block already handed back. */
void order_hold_free(void);
/* Returns once a free is held so. */
void order_wait_held(void);
void order_let_free(void);
/* Returns once a malloc of ORDER_SIZE waits for the block. */
void order_wait_waiter(void);

#endif /* SHIMMER_ORDER_LIB_H */
