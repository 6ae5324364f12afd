/*
 * The control connection to the collector: a SOCK_SEQPACKET Unix socket,
 * one message per send.  Every send is MSG_DONTWAIT | MSG_NOSIGNAL: a slow
 * or dead collector costs a lost message, never a blocked or killed host.
 *
 * Sends are thread-safe (each is one syscall).  STRING messages are
 * intern.c's.  Nothing here allocates.
 */
#ifndef SHIMMER_CONN_H
#define SHIMMER_CONN_H

#include <stdint.h>

#include "wire.h"

/* Connects to path; returns the CLOEXEC socket or -errno. */
int conn_open(const char *path);

/*
 * Sends HELLO: the caller fills h's fixed fields from pid to nslots/
 * ring_bytes and job_kind; exe, argv, hostname and the job key (job_len
 * bytes, at most SHM_JOB_MAX) are appended here, and memfd travels by
 * SCM_RIGHTS.  Not thread-safe (constructor, fork child).  0 or -errno.
 */
int conn_hello(int fd, struct shm_msg_hello *h, int memfd, const char *job, uint32_t job_len);

int conn_thread(int fd, uint32_t slot, uint32_t tid, uint32_t name_id, uint64_t ts);
int conn_kick(int fd);
int conn_bye(int fd, uint64_t ts);

/* GPU_STATUS: status is enum shm_gpu_status; text one line (at most 1024
 * bytes are sent), may be NULL.  0 or -errno. */
int conn_gpu_status(int fd, uint32_t status, const char *text);

#endif /* SHIMMER_CONN_H */
