/*
 * The workloads' log (see wlog.h): a hand-rolled formatter into a stack
 * buffer and one write(2) per line, so that logging never allocates.
 */
#include "wlog.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int log_fd = -1;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void wlog_open(void)
{
	const char *path = getenv("WL_LOG");

	if (path && *path)
		log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

void wlog_lock(void)
{
	pthread_mutex_lock(&lock);
}

void wlog_unlock(void)
{
	pthread_mutex_unlock(&lock);
}

int wlog_tid(void)
{
	return gettid();
}

void wlog_puts(int fd, const char *s)
{
	size_t n = strlen(s);

	while (n) {
		ssize_t w = write(fd, s, n);

		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

static char *put_u(char *p, char *end, uint64_t v)
{
	char tmp[24];
	int n = 0;

	do
		tmp[n++] = (char)('0' + v % 10);
	while ((v /= 10) && n < 24);
	while (n && p < end)
		*p++ = tmp[--n];
	return p;
}

void wlog_line(const char *fmt, ...)
{
	char buf[512], *p = buf, *end = buf + sizeof(buf) - 1;
	va_list ap;

	if (log_fd < 0)
		return;
	va_start(ap, fmt);
	for (const char *f = fmt; *f; f++) {
		if (f != fmt && p < end)
			*p++ = ',';
		if (*f == 's') {
			for (const char *s = va_arg(ap, const char *); *s && p < end; s++)
				*p++ = *s;
		} else if (*f == 'u') {
			p = put_u(p, end, va_arg(ap, uint64_t));
		} else { /* 'd' */
			int64_t v = va_arg(ap, int64_t);

			if (v < 0 && p < end)
				*p++ = '-';
			p = put_u(p, end, v < 0 ? -(uint64_t)v : (uint64_t)v);
		}
	}
	va_end(ap);
	*p++ = '\n';
	if (write(log_fd, buf, (size_t)(p - buf)) < 0)
		abort();
}
