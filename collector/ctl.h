/*
 * Control requests (`shimmer ls`, `shimmer ctl`; wire.h, REQUEST/REPLY):
 * what a control client may see and do, and the answers.
 *
 * Who asks is the kernel's word (SO_PEERCRED, client.c); ctl_may() is the
 * one rule: root may act on anything, anyone else on their own processes
 * and recordings only.  LIST and STATUS show only those; PAUSE, RESUME and
 * WINDOW to a pid or a job that is not the asker's are refused with EPERM,
 * and a job key the asker has no live process in is "not found" (no
 * existence of another user's job is revealed).
 *
 * A command is written into each target process's region (ring.h) at
 * once; the answer waits, for at most CTL_WAIT_NS, until every target says
 * it acted, and then gives each one's latency (request to the process's
 * word that it acted) or that it did not act in time.
 *
 * ATTACH and DETACH (`shimmer ctl attach PID`, issue 16) are handed to
 * co->attach_request (session.h), which applies ctl_may() to /proc's word
 * for the target's owner and answers in one line.
 *
 * Single-threaded, like the daemon.
 */
#ifndef SHIMMER_COLLECTOR_CTL_H
#define SHIMMER_COLLECTOR_CTL_H

#include <stddef.h>
#include <stdint.h>

#define CTL_WAIT_NS 1000000000ll /* how long an answer waits for processes to act */

struct collector;
struct client;

/* Whether the user peer_uid may see or act on what owner_uid owns. */
static inline int ctl_may(uint32_t peer_uid, uint32_t owner_uid)
{
	return peer_uid == 0 || peer_uid == owner_uid;
}

/* Answers control client c's REQUEST (msg, len bytes, header checked):
 * rows and the end at once, or, for a command, once the targets acted
 * (ctl_tick()).  0; -EBADMSG for a malformed request; -ENOMEM. */
int ctl_request(struct collector *co, struct client *c, const void *msg, size_t len);

/* Answers the commands whose targets all acted or whose time is up. */
int ctl_tick(struct collector *co, int64_t now_ns);

/* c goes away: a command waiting on it as target or asker forgets it. */
void ctl_forget(struct collector *co, struct client *c);

/* Frees what waits. */
void ctl_free(struct collector *co);

#endif
