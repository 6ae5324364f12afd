/*
 * The line is formatted into one buffer and written with a single write(2)
 * so that lines from the daemon and from a parent sharing its stderr do not
 * interleave mid-line.  Its text is escaped (common/esc.h): a line names
 * what clients sent (a job key, a path, an executable), and a client may
 * hold control characters for whoever reads the log in a terminal.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "esc.h"

int log_level = LOG_LVL_INFO;

void log_write(int level, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warning", "info", "debug" };
	char text[1024], line[1024];
	va_list ap;
	int m;
	size_t n;

	va_start(ap, fmt);
	m = vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (m < 0)
		return;
	n = (size_t)snprintf(line, sizeof(line), "shimmerd: %s: ", names[level]);
	n += esc_copy(line + n, sizeof(line) - 1 - n,
		      text, (size_t)m < sizeof(text) ? (size_t)m : sizeof(text) - 1);
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, n) < 0)
		return;
}
