/*
 * shimmerd's settings: built-in defaults, then the configuration file
 * (common/conf.h; /etc/shimmer/shimmerd.conf unless --config names another
 * or --no-config), then the command line, each overriding the one before.
 * Every key of the file is also a flag of the same name (--max-age 30d is
 * max-age = 30d); keys written SHIMMER_* are the traced processes'
 * defaults, read by the shim itself, and only kept here to be shown
 * (--check-config).  A key or value that cannot be used is one line naming
 * the file and line, and shimmerd does not start.
 */
#ifndef SHIMMER_COLLECTOR_OPTIONS_H
#define SHIMMER_COLLECTOR_OPTIONS_H

#include <stdint.h>
#include <stdio.h>

#define OPT_STATE_DIR "/var/lib/shimmer"

struct options {
	char *socket;          /* socket */
	char *db;              /* db: one store for every process; NULL: state_dir */
	char *state_dir;       /* state-dir */
	int64_t max_age_ns;    /* max-age: 0 none */
	uint64_t max_bytes;    /* max-size: 0 none */
	int64_t linger_ns;     /* job-linger */
	int log_level;         /* log-level (enum log_levels) */
	/* flags only */
	int foreground, check;
	int ready_fd, parent_fd;
	int socket_flag;       /* --socket was given (--attach listens only then) */
	/* --attach PID [--for S] [--sample-bytes N] [--probes LIST]; --check-attach */
	int attach_pid;
	int64_t attach_for_ns;
	uint64_t attach_sample_bytes;
	char *attach_probes;
	int check_attach;
	char *config;          /* the file read, NULL when none */
	char *shim_defaults;   /* the file's SHIMMER_* lines, "KEY=VALUE\n"... */
};

/* Fills o from the defaults, the file and argv.  Returns 0, 1 when the
 * command line asked for --help or --version (printed; exit 0), or 2
 * after printing why (bad usage, a bad key or value; exit 2). */
int options_parse(struct options *o, int argc, char **argv);

/* The settings in force, as a configuration file would write them. */
void options_print(const struct options *o, FILE *out);

void options_free(struct options *o);

#endif
