/*
 * One traced process's control connection: the protocol of common/wire.h
 * (HELLO, STRING, THREAD, GPU_STATUS, KICK, BYE), the processes row and
 * its parent and exec links.  Its event region is read by a ring source
 * (ring.h) into an ingest sink (ingest.h); this module only starts and
 * ends them.  Everything a client sends is untrusted.  Tests drive it
 * without a socket: client_message() takes a message and its fds as
 * recvmsg() gave them, client_drain() consumes the region.
 *
 * Return codes: 0; -EBADMSG when the client sent something invalid (one
 * line was logged; the caller ends it with CLIENT_REJECTED); any other
 * negative errno is the store's (already logged) and fatal for the daemon.
 * Single-threaded, like the daemon.
 */
#ifndef SHIMMER_COLLECTOR_CLIENT_H
#define SHIMMER_COLLECTOR_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "store.h"

struct shm_msg_request;

/* What every client shares: where processes are recorded (jobs; or, when
 * jobs is NULL, the one store: tests), the collector's TSC calibration,
 * and the list of live clients (to find a traced parent, and the targets
 * of control requests: ctl.h). */
struct collector {
	struct jobs *jobs;
	struct store *store;
	struct clock clock;
	struct client *clients;
	uint64_t accepted; /* clients made so far */
	/* The earliest deadline of any client's control block
	 * (CLOCK_MONOTONIC ns; 0: not known, UINT64_MAX: none): a ctl
	 * window's end, SHIMMER_START=after:, SHIMMER_DURATION (client.c). */
	uint64_t ctl_due;
	/* SHM_REQ_ATTACH and SHM_REQ_DETACH, handed over by ctl.c: session.h's
	 * when the daemon attaches, else NULL (a pointer, so that ctl.c and
	 * the unit tests that link it need no libbpf).  *status is the
	 * answer (0 or a negative errno) and why its line; the return value
	 * is 0 or a store error, fatal for the daemon. */
	int (*attach_request)(struct collector *co, uint32_t peer,
			      const struct shm_msg_request *rq, int *status, char *why, size_t len);
	struct sessions *sessions;
};

enum client_end {
	CLIENT_CLOSED,   /* the socket closed: 'exit' after BYE, else 'disconnect' */
	CLIENT_REJECTED, /* it sent invalid data: 'rejected' */
	CLIENT_SHUTDOWN, /* the daemon is stopping: 'shutdown' */
};

struct client;

/* A client on socket fd (-1 in tests), linked into co->clients, its
 * peer's pid and uid taken from the kernel (SO_PEERCRED).  The client owns
 * fd from now on.  NULL on error, errno set. */
struct client *client_new(struct collector *co, int fd);

/* Sets the peer's identity, for a client without a socket (tests).  A
 * HELLO is accepted only from a peer of known identity, and only when its
 * pid and uid are the peer's. */
void client_set_peer(struct client *c, uint32_t pid, uint32_t uid);

/* The peer's uid (SO_PEERCRED), -1 when unknown. */
int client_peer_uid(const struct client *c);

/* When client_new() made it (CLOCK_MONOTONIC ns). */
int64_t client_born_ns(const struct client *c);

/* The socket, or -1. */
int client_fd(const struct client *c);

/* Processes one control message of len bytes.  fds are the descriptors
 * that came with it (nfds of them); the client takes them all, keeping the
 * region's memfd and closing the rest.  ctrunc: the kernel truncated the
 * control data (MSG_CTRUNC), so the message is rejected. */
int client_message(struct client *c, const void *msg, size_t len,
		   const int *fds, int nfds, int ctrunc);

/* Receives and processes the messages waiting on the socket (at most a
 * fixed number, so one client cannot starve the others).  Returns 0 when
 * none is left, 1 when more may wait, -EPIPE when the peer closed,
 * -EBADMSG, or a store error. */
int client_recv(struct client *c);

/* One pass over the region: consumes every slot's records, bumps the
 * heartbeat, frees retired slots once drained.  No-op before HELLO. */
int client_drain(struct client *c);

/* Reads its threads' CPU time (cputime.h) as of now_ns. */
int client_sample_cpu(struct client *c, int64_t now_ns);

/* Whether the last pass found a thread's ring a quarter full or more
 * (ring_busy): drain again at once rather than on the next tick. */
int client_busy(const struct client *c);

/* Stores the per-thread counters and drops accumulated since the last
 * call. */
int client_flush_counts(struct client *c);

/* Drains a last time, stores counters, drops, end_ns and end_reason, and
 * commits.  now_ns: the collector's CLOCK_MONOTONIC, the end time unless a
 * BYE gave one.  The client stays allocated until client_free(). */
int client_end(struct client *c, enum client_end why, int64_t now_ns);

/* Unmaps, closes, unlinks from the collector and frees.  NULL is a no-op. */
void client_free(struct client *c);

/* The process's pid (the kernel's), 0 before HELLO. */
uint32_t client_pid(const struct client *c);

/* HELLO's flags (SHM_HELLO_*), 0 before HELLO. */
uint32_t client_hello_flags(const struct client *c);

/* The store its rows go to (its job's recording), NULL before HELLO. */
struct store *client_store(const struct client *c);

/* The proc_id of this client's processes row, 0 before HELLO. */
int64_t client_proc_id(const struct client *c);

/* Whether client_end() was called. */
int client_ended(const struct client *c);

/* argv (elements separated by NUL) as a JSON array of strings, as the
 * processes table stores it; bytes that are not UTF-8 become U+FFFD.  The
 * caller frees *out.  0 or -ENOMEM. */
int client_json_argv(const char *argv, size_t len, char **out, size_t *out_len);

/* The next client in co->clients, or NULL. */
struct client *client_next(const struct client *c);

/* Store s just committed: the regions of co's clients that write to it get
 * their committed marks (ring_committed()).  A store_on_commit() hook, ctx
 * being co. */
void client_committed(void *co, struct store *s);

/* ---- for control requests (ctl.h) ---- */

/* Whether c is a control client (it sent REQUEST), and whether it is a
 * traced process past HELLO that has not ended. */
int client_is_control(const struct client *c);
int client_traced(const struct client *c);

struct client_info {
	uint32_t pid, uid;
	int32_t rank;
	int64_t start_wall_ns;
	uint32_t state; /* the region's SHM_STATE_* (the process's word) */
	uint64_t events, dropped;
	double events_per_s, dropped_per_s; /* over the last second */
	const char *job, *exe;
};

void client_info(const struct client *c, struct client_info *i);

/* Writes `shimmer ctl` command op (SHM_REQ_PAUSE, SHM_REQ_RESUME,
 * SHM_REQ_WINDOW of arg ns) into a traced process's region, in force at
 * once (ring.h); returns its number for client_control_done(). */
uint32_t client_control(struct client *c, uint32_t op, uint64_t arg);

/* Queues one message to send to a control client (no-op without a
 * socket).  -EPIPE when too much waits already. */
int client_reply(struct client *c, const void *msg, size_t len);

/* Sends what is queued: 0 all sent, 1 some waits for room, -EPIPE. */
int client_flush_out(struct client *c);

/* Whether replies wait to be sent. */
int client_wants_write(const struct client *c);

#endif
