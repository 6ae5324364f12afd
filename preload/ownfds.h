/*
 * Descriptors that the libraries the shim calls make for themselves, kept
 * out of the program's way.
 *
 * libunwind (1.6 to 1.8 at least) checks every address it reads while it
 * steps through a frame by writing one byte of it into a pipe of its own,
 * made with pipe2() at its first unwind, whose numbers it keeps in a static
 * array.  Made while the shim learns a rule, that pipe took the program's
 * lowest free numbers (a traced shell had 4 and 5 it never opened); and
 * when the program closed them (closefrom(3), a daemon's start) and opened
 * its own files there, libunwind's next check read a byte from the
 * program's file and wrote one into its other descriptor, or, failing to
 * read, closed both and made its pipe there again.
 *
 * So pipe() and pipe2() are interposed: a pipe made while the thread is
 * inside libunwind for the shim (ownfds_unwind_begin()) is moved high, as
 * the shim's socket is (conn_move_high_as(), the flags it was asked with
 * kept), and remembered; and before each later call into libunwind the
 * shim checks that both numbers still hold that pipe.  If the program
 * closed them, libunwind makes a new one (high again), unless the shim's
 * socket was closed with them (closefrom(3)): tracing stops there, and
 * nothing is opened behind the program's back; if it put
 * something else there, the shim does not call libunwind (that stack ends
 * where the shim's own walk could not go on), so libunwind never reads or
 * writes a descriptor of the program's.  Every other pipe is the program's:
 * the hooks make it with the same system call glibc's would and touch
 * nothing else.
 */
#ifndef SHIMMER_OWNFDS_H
#define SHIMMER_OWNFDS_H

/* Before a call into libunwind, on a thread that is in_shim: 0 when the
 * call may go ahead (libunwind's pipe, if it has one, is still the one it
 * made here, or both its numbers are closed and it will make a new one),
 * -1 when a descriptor of the program's sits at one of its numbers and
 * libunwind must not be called.  Pipes the thread makes until
 * ownfds_unwind_end() are libunwind's.  Async-signal-safe (fstat, close). */
int ownfds_unwind_begin(void);
void ownfds_unwind_end(void);

#endif
