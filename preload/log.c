/*
 * Lines on stderr.  Async-signal-safe: vsnprintf into a stack buffer (glibc's
 * does not allocate for the conversions used here: %s %d %u %llu %x %p) and
 * one write(2), so that a line never interleaves with another thread's.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "log.h"

static int debug_on;

void log_init(int debug)
{
	__atomic_store_n(&debug_on, debug, __ATOMIC_RELAXED);
}

int log_debugging(void)
{
	return __atomic_load_n(&debug_on, __ATOMIC_RELAXED);
}

/* One line: prefix, the formatted text, a newline. */
static void say(const char *prefix, const char *fmt, va_list ap)
{
	char buf[1024];
	int n, saved = errno;

	n = snprintf(buf, sizeof(buf), "%s: ", prefix);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	if (write(STDERR_FILENO, buf, (size_t)n) < 0)
		n = 0; /* nowhere to report it */
	errno = saved;
}

void log_debug(const char *fmt, ...)
{
	char prefix[32];
	va_list ap;

	if (!log_debugging())
		return;
	snprintf(prefix, sizeof(prefix), "shimmer[%d]", (int)getpid());
	va_start(ap, fmt);
	say(prefix, fmt, ap);
	va_end(ap);
}

void log_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say("shimmer", fmt, ap);
	va_end(ap);
}

int log_warn_once(int *once, const char *fmt, ...)
{
	va_list ap;

	if (__atomic_exchange_n(once, 1, __ATOMIC_RELAXED))
		return 0;
	va_start(ap, fmt);
	say("shimmer", fmt, ap);
	va_end(ap);
	return 1;
}
