/*
 * The control connection to the collector: a SOCK_SEQPACKET Unix socket,
 * one message per send.  Every send is MSG_DONTWAIT | MSG_NOSIGNAL: a slow
 * or dead collector costs a lost message, never a blocked or killed host.
 *
 * The socket is the one descriptor the shim keeps in the program, and the
 * program may close it or put its own descriptor at its number (daemons
 * close every descriptor above 2 at start; dup2 and close_range reuse
 * numbers).  So it lives high (just under the soft RLIMIT_NOFILE, at most
 * 1023, away from the low numbers programs reuse) and its identity (device
 * and inode) is checked before every use: a send or close on a descriptor
 * that is no longer ours would write into, or close, the program's.  When
 * it is gone, the connection is lost for good: one stderr line, and the
 * callback given to conn_open() (which stops tracing) runs once.  A
 * descriptor replaced between the check and the send, by another thread,
 * in the microsecond between two system calls, is the one case left.
 *
 * Sends are thread-safe (each is one syscall); so is the loss.  Nothing
 * here allocates.  Messages other than HELLO are also async-signal-safe.
 */
#ifndef SHIMMER_CONN_H
#define SHIMMER_CONN_H

#include <stdint.h>
#include <sys/socket.h>

#include "wire.h"

/* Connects to path and keeps the socket, moved high and CLOEXEC.  lost:
 * called once (from whichever thread noticed) when the socket turns out to
 * have been closed or replaced by the program.  0 or -errno. */
int conn_open(const char *path, void (*lost)(void));

/* Whether the socket is still ours (it may have been lost just now). */
int conn_ok(void);

/* Closes the socket if it is still ours; forgets it either way, without
 * a word (a fork child starts over with its own: the parent's, closed or
 * replaced by the program, is no loss of the child's).  Not thread-safe
 * (constructor, fork child). */
void conn_close(void);

/*
 * Sends HELLO: the caller fills h's fixed fields from pid to nslots/
 * ring_bytes and job_kind; exe, argv, hostname and the job key (job_len
 * bytes, at most SHM_JOB_MAX) are appended here, and memfd travels by
 * SCM_RIGHTS.  Not thread-safe (constructor, fork child).  0 or -errno.
 */
int conn_hello(struct shm_msg_hello *h, int memfd, const char *job, uint32_t job_len);

/*
 * The collector's end closed (conn_hung_up()): connects to path again,
 * without ever waiting (a non-blocking connect), and sends h as HELLO on
 * the new socket (the caller sets SHM_HELLO_RECONNECT) with memfd, the
 * region kept since the first HELLO; then the new socket takes the old
 * one's number.  Async-signal-safe; one caller at a time (hello_buf is
 * shared with conn_hello()).  0 or -errno, the old socket kept.
 */
int conn_reconnect(const char *path, struct shm_msg_hello *h, int memfd, const char *job,
		   uint32_t job_len);

/* fd moved to a high number (F_DUPFD_CLOEXEC, the old one closed), where
 * programs that reuse low numbers leave it, or fd itself when no high
 * number is free.  For descriptors the shim keeps (the socket, the
 * region's memfd). */
int conn_move_high(int fd);
/* The same, the copy close-on-exec only when cloexec is set: a descriptor
 * made for another library (ownfds.h) keeps the flag it was asked with. */
int conn_move_high_as(int fd, int cloexec);

int conn_thread(uint32_t slot, uint32_t tid, uint32_t name_id, uint64_t ts);
int conn_kick(void);
/* BYE: the caller fills m's ts and CPU fields (wire.h), the header is
 * set here.  Async-signal-safe (_exit from a handler ends in it). */
int conn_bye(struct shm_msg_bye *m);

/* GPU_STATUS: status is enum shm_gpu_status; text one line (at most 1024
 * bytes are sent), may be NULL.  0 or -errno. */
int conn_gpu_status(uint32_t status, const char *text);

/* SIGNAL: from a signal handler. */
int conn_signal(int signo, int code, uint64_t addr, uint32_t tid, uint64_t ts);

/* Any message, as the caller built it (intern.c's STRING).  0, -EAGAIN
 * when the socket is full, -ENOTCONN when there is none, or -errno. */
int conn_sendmsg(const struct msghdr *mh);

/* Whether the collector's end closed (it exited or crashed): the one
 * thing that ends a lossless wait at once.  0 while it is connected. */
int conn_hung_up(void);

#endif /* SHIMMER_CONN_H */
