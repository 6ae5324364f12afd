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
 * A command is written into each target process's region (ring.h), where
 * it is in force at once: the process's hooks read it on every call, so
 * whatever the process does afterwards is recorded, or not, as it says.
 * The answer gives each process the time from the request to that write,
 * or that it takes no commands (SHIMMER_CONTROL=0).
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

struct collector;
struct client;

/* Whether the user peer_uid may see or act on what owner_uid owns. */
static inline int ctl_may(uint32_t peer_uid, uint32_t owner_uid)
{
	return peer_uid == 0 || peer_uid == owner_uid;
}

/* Answers control client c's REQUEST (msg, len bytes, header checked):
 * rows and the end at once.  0; -EBADMSG for a malformed request; a
 * reply's error. */
int ctl_request(struct collector *co, struct client *c, const void *msg, size_t len);

#endif
