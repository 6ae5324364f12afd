/*
 * The shim's two kinds of output, both one line on stderr made with one
 * write(2) from a stack buffer: no stdio, no malloc, errno preserved, safe
 * in any thread and in a signal handler.  Nothing ever goes to stdout.
 *
 *   log_debug()  only when SHIMMER_DEBUG=1 ("shimmer[PID]: ...")
 *   log_warn()   always ("shimmer: ..."): the one short line that says what
 *                degraded and what the shim does instead
 */
#ifndef SHIMMER_LOG_H
#define SHIMMER_LOG_H

/* Turns debug lines on or off (settings_read() does, first of all). */
void log_init(int debug);

/* Whether debug lines are on: for callers that would do work to build one. */
int log_debugging(void);

void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* log_warn() the first time only, of all threads, for the flag given (a
 * static int of the caller's, 0 at first).  Returns 1 when it wrote. */
int log_warn_once(int *once, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif /* SHIMMER_LOG_H */
