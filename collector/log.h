/*
 * Daemon logging: one line per event on stderr, "shimmerd: LEVEL: text",
 * filtered by log_level.  The macros test the level before formatting, so
 * a debug line costs a branch when --verbose is off.  Not thread-safe (the
 * daemon is single-threaded); never used on the per-record path.
 */
#ifndef SHIMMER_COLLECTOR_LOG_H
#define SHIMMER_COLLECTOR_LOG_H

enum log_levels { LOG_LVL_ERROR, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

/* Lines above this level are dropped; LOG_LVL_INFO unless --verbose. */
extern int log_level;

void log_write(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define log_at(lvl, ...)                                                     \
	do {                                                                 \
		if ((lvl) <= log_level)                                      \
			log_write((lvl), __VA_ARGS__);                       \
	} while (0)
#define log_error(...) log_at(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...) log_at(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_at(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_at(LOG_LVL_DEBUG, __VA_ARGS__)

#endif
