/*
 * The shared daemon's attaches (`shimmer ctl attach PID`, issue 16): each
 * a session that traces one running process through eBPF (attach.h) into
 * a recording of the process's owner, made as a preloaded process's would
 * be (job.h: the job "attach:PID" of that uid, STATE/recordings/UID/...,
 * listed by `shimmer ls`, readable by its owner; or the one store of a
 * --db daemon).
 *
 * Who may: the process's owner, or root (ctl_may(); the asker's uid is
 * the kernel's, SO_PEERCRED).  The owner is read so that a reused pid
 * cannot stand in for the process: a pidfd is opened first, then
 * /proc/PID as a directory and its status through that; the pidfd must
 * still name a live (or unreaped) process once the status is read and
 * again once the probes are in, so the pid was held by the same process
 * throughout.  The process's real, effective, saved and filesystem uids
 * must all be the owner's (ptrace's rule): a set-uid program a user
 * started is not that user's to trace.  One attach per process; at most
 * SESSION_PER_USER per user and SESSION_MAX in all.
 *
 * The sessions' descriptors (each one's BPF ring buffer and pidfd) sit in
 * an epoll set of their own, session_fd(), which the daemon watches as one
 * descriptor of its loop: records are read as they come, between the
 * other clients' events.  Attaching itself (loading the programs, reading
 * the process's libraries) runs in the loop, once per request: tens to a
 * few hundred milliseconds.
 *
 * A session ends at the end of its window, on SHM_REQ_DETACH, when the
 * process exits, and when the daemon stops; each detaches at once
 * (nothing of ours stays loaded), ends the row ('detach' or 'exit') and
 * leaves the job.
 *
 * Return codes: 0 or a negative errno; store errors are fatal for the
 * daemon.  Single-threaded, like the daemon.
 */
#ifndef SHIMMER_COLLECTOR_SESSION_H
#define SHIMMER_COLLECTOR_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "client.h"

#define SESSION_MAX 32     /* attaches at once */
#define SESSION_PER_USER 4 /* attaches at once by one owner's processes */

/* Makes co's sessions (none yet) and sets co->attach_request, through
 * which ctl.c hands over SHM_REQ_ATTACH and SHM_REQ_DETACH.  0 or a
 * negative errno. */
int session_open(struct collector *co);

/* Readable when a session has records waiting or its process exited. */
int session_fd(const struct collector *co);

/* Hands waiting records on; ends the sessions whose process exited. */
int session_poll(struct collector *co, int64_t now_ns);

/* Periodic work (about every 100 ms): each source's tick; ends the
 * sessions whose window is over. */
int session_tick(struct collector *co, int64_t now_ns);

/* Ends every session (the daemon stops). */
int session_end_all(struct collector *co, int64_t now_ns);

/* Frees (ending nothing: session_end_all() first).  No-op without
 * sessions. */
void session_free(struct collector *co);

#endif
