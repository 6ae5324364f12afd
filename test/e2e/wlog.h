/*
 * The workloads' own record of what they did: the independent truth the
 * end-to-end tests compare the store with.  One CSV line per event, each
 * written with a single write(2) to the O_APPEND file named by $WL_LOG, so
 * lines from threads and processes never interleave.  No stdio, no malloc:
 * the log must not add heap calls of its own.  Lines (first field = type):
 *
 *   P,pid,ppid,img            a process (img 0: the first image, 1: exec'd)
 *   T,pid,tid,worker          a thread that made calls (worker: 1 if only
 *                             the workload's own calls run on it)
 *   A,pid,tid,fn,ptr,size,space,device,fam   a successful allocation
 *   F,pid,tid,fn,ptr,fam      a release (logged before the call)
 *   C,pid,tid,fn,ret,device,ptr,bytes,stream,kind,aux,aux2,gx,gy,gz,bx,by,bz,ptsz
 *                             a CUDA runtime call, fields as in common/wire.h
 *   H,pid,tid,fn,size         a heap call, for the exact counters
 *
 * fam is "host" or "cuda".  wlog_lock() serializes an operation with its log
 * line, so that the file's order is the order in which blocks changed hands.
 */
#ifndef WLOG_H
#define WLOG_H

#include <stdint.h>

/* Opens $WL_LOG (no log when unset).  Call once, before threads. */
void wlog_open(void);
void wlog_lock(void);
void wlog_unlock(void);
/* Fields are strings (s) or unsigned/signed integers (u/d): fmt names them. */
void wlog_line(const char *fmt, ...);
int wlog_tid(void);
/* Writes s to fd with write(2). */
void wlog_puts(int fd, const char *s);

#endif
