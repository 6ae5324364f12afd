/*
 * The line is formatted into one buffer and written with a single write(2)
 * so that lines from the daemon and from a parent sharing its stderr do not
 * interleave mid-line.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

int log_level = LOG_LVL_INFO;

void log_write(int level, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warning", "info", "debug" };
	char line[1024];
	va_list ap;
	int n;

	n = snprintf(line, sizeof(line) - 1, "shimmerd: %s: ", names[level]);
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - 1 - (size_t)n, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}
