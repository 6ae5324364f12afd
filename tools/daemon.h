/*
 * Talking to shimmerd as a control client (common/wire.h, REQUEST/REPLY):
 * `shimmer ls` and `shimmer ctl`.  The socket is --socket's, else
 * SHIMMER_SOCKET's, else the service configuration's (common/conf.h), else
 * /run/shimmer/shimmer.sock.  The daemon answers from the kernel's word on
 * who asks: each user sees and controls their own processes and
 * recordings, root all of them.
 */
#ifndef SHIMMER_TOOLS_DAEMON_H
#define SHIMMER_TOOLS_DAEMON_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h"

/* The socket to use: opt when given, else as above.  Returns a pointer to
 * static storage or to opt. */
const char *daemon_socket(const char *opt);

/* One row of a reply, as it came (validated: its strings lie inside it). */
struct daemon_row {
	uint32_t kind; /* enum shm_reply_kind */
	union {
		struct shm_reply_recording rec;
		struct shm_reply_process proc;
		struct shm_reply_acted acted;
	} u;
	/* The strings that follow the fixed part, in the order wire.h gives
	 * (recording: job, host, path; process: job, exe; acted: job). */
	const char *s[4];
	size_t len[4];
};

/*
 * Sends the request (op, pid, arg_ns, flags, job) to the daemon on path and calls
 * fn for each row of the answer.  Returns the answer's status (0 or a
 * negative errno) with its text in why (may be empty), or, when the daemon
 * could not be asked at all, a negative errno with why saying so (why is
 * always a full sentence for "shimmer: error: ...").
 */
int daemon_ask(const char *path, uint32_t op, uint32_t pid, uint64_t arg_ns, uint32_t flags,
	       const char *job, int (*fn)(void *ctx, const struct daemon_row *r), void *ctx, char *why,
	       size_t why_len);

/* uid's user name, or its number when it has none; returns buf. */
const char *daemon_user_name(uint32_t uid, char *buf, size_t len);

#endif
