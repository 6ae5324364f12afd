/*
 * shimmerd's settings (options.h): one table of keys, read from the file
 * and from the command line alike.
 */
#include "options.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf.h"
#include "log.h"
#include "store.h"
#include "version.h"
#include "wire.h"

#define DAY_NS 86400000000000ll

enum kind { PATH, DURATION, SIZE, LEVEL };

struct key {
	const char *name;
	enum kind kind;
	size_t off;
	const char *help;
};

#define K(name, kind, field, help) { name, kind, offsetof(struct options, field), help }

static const struct key keys[] = {
	K("socket", PATH, socket, "the socket traced processes and shimmer connect to"),
	K("state-dir", PATH, state_dir, "where recordings and their index are kept"),
	K("db", PATH, db, "one store for every process instead (no recordings, no retention)"),
	K("max-age", DURATION, max_age_ns, "finished recordings older than this go (0: never)"),
	K("max-size", SIZE, max_bytes, "the oldest finished recordings go while all take more"),
	K("job-linger", DURATION, linger_ns, "a job's recording stays open this long after its "
					   "last process"),
	K("log-level", LEVEL, log_level, "error, warn, info or debug"),
};

#define NKEYS (sizeof(keys) / sizeof(keys[0]))

static const char *const levels[] = { "error", "warn", "info", "debug" };

static void usage(FILE *f)
{
	fputs("usage: shimmerd [--config FILE | --no-config] [--foreground] [--ready-fd N]\n"
	      "                [--parent-fd N] [--verbose | --quiet] [--KEY VALUE]...\n"
	      "       shimmerd --attach PID [--for DURATION] [--probes cuda,heap,offcpu]\n"
	      "                [--sample-bytes N] --db PATH [--socket PATH] ...\n"
	      "       shimmerd --check-config [...] | --check-attach | --version\n"
	      "\n"
	      "keys (each also a line \"KEY = VALUE\" of " SHIMMER_CONF_PATH "):\n", f);
	for (size_t i = 0; i < NKEYS; i++)
		fprintf(f, "  --%-11s %s\n", keys[i].name, keys[i].help);
	fputs("\nDurations, sizes and counts as in docs/usage.md (Numbers, sizes and durations).\n"
	      "See shimmerd(8) and docs/service.md.\n", f);
}

/* path made absolute against the current directory, so that it still
 * names the same file after the daemon's chdir("/"). */
static char *absolute(const char *path, size_t len)
{
	char cwd[PATH_MAX], *out;

	if (len && path[0] == '/')
		return strndup(path, len);
	if (!getcwd(cwd, sizeof(cwd)))
		return NULL;
	if (asprintf(&out, "%s/%.*s", cwd, (int)len, path) < 0)
		return NULL;
	return out;
}

/* Sets key k from val; where says where val came from, for the error. */
static int set(struct options *o, const struct key *k, const char *val, size_t len,
	       const char *where)
{
	char *field = (char *)o + k->off;
	uint64_t x;
	char *p;

	switch (k->kind) {
	case PATH:
		if (!len)
			break;
		p = absolute(val, len);
		if (!p)
			return -ENOMEM;
		free(*(char **)field);
		*(char **)field = p;
		return 0;
	case DURATION:
		if (conf_duration(val, len, &x) < 0 || x > INT64_MAX)
			break;
		*(int64_t *)field = (int64_t)x;
		return 0;
	case SIZE:
		if (conf_size(val, len, &x) < 0)
			break;
		*(uint64_t *)field = x;
		return 0;
	case LEVEL:
		for (int i = 0; i < 4; i++)
			if (strlen(levels[i]) == len && !memcmp(levels[i], val, len)) {
				*(int *)field = i;
				return 0;
			}
		break;
	}
	log_error("%s: %s = %.*s is not a %s", where, k->name, (int)len, val,
		  k->kind == PATH ? "path" : k->kind == DURATION ? "duration (30s, 10m, 7d)" :
		  k->kind == SIZE ? "size (500M, 20G)" : "level (error, warn, info, debug)");
	return -EINVAL;
}

static const struct key *find(const char *name, size_t len)
{
	for (size_t i = 0; i < NKEYS; i++)
		if (strlen(keys[i].name) == len && !memcmp(keys[i].name, name, len))
			return &keys[i];
	return NULL;
}

struct file_ctx {
	struct options *o;
	const char *path;
	size_t shim_len;
	int err;
};

static int file_line(void *ctx, const struct conf_line *l)
{
	struct file_ctx *f = ctx;
	const struct key *k;
	char where[PATH_MAX + 32];
	char *grown;
	int err;

	snprintf(where, sizeof(where), "%s:%u", f->path, l->lineno);
	if (!l->key) {
		log_error("%s: not KEY = VALUE: %.*s", where, (int)l->val_len, l->val);
		return -EINVAL;
	}
	if (l->key_len > 8 && !memcmp(l->key, "SHIMMER_", 8)) {
		/* The shim's: kept to be shown. */
		grown = realloc(f->o->shim_defaults, f->shim_len + l->key_len + l->val_len + 3);
		if (!grown)
			return -ENOMEM;
		f->o->shim_defaults = grown;
		f->shim_len += (size_t)sprintf(grown + f->shim_len, "%.*s=%.*s\n", (int)l->key_len,
					       l->key, (int)l->val_len, l->val);
		return 0;
	}
	k = find(l->key, l->key_len);
	if (!k) {
		log_error("%s: unknown key %.*s (see shimmerd --help)", where, (int)l->key_len,
			  l->key);
		return -EINVAL;
	}
	err = set(f->o, k, l->val, l->val_len, where);
	return err;
}

static int read_file(struct options *o, const char *path, int must)
{
	static char text[CONF_MAX_BYTES];
	struct file_ctx f = { .o = o, .path = path };
	ssize_t n = conf_read(path, text, sizeof(text));

	if (n == -ENOENT && !must)
		return 0;
	if (n < 0) {
		log_error("cannot read %s: %s", path, strerror((int)-n));
		return (int)n;
	}
	o->config = strdup(path);
	if (!o->config)
		return -ENOMEM;
	return conf_parse(text, (size_t)n, file_line, &f);
}

/* Counts, sizes and durations are read as shimmer reads its own
 * (conf.h; docs/usage.md, "Numbers, sizes and durations"). */
static int fd_arg(const char *name, const char *arg, int *fd)
{
	uint64_t v;

	if (conf_count(arg, strlen(arg), INT_MAX, &v) < 0 || fcntl((int)v, F_GETFD) < 0) {
		log_error("--%s %s is not an open descriptor (a whole decimal number)", name, arg);
		return -EINVAL;
	}
	*fd = (int)v;
	return 0;
}

int options_parse(struct options *o, int argc, char **argv)
{
	enum { O_CONFIG = 256, O_NO_CONFIG, O_CHECK, O_READY, O_PARENT, O_VERSION, O_ATTACH,
	       O_FOR, O_SAMPLE, O_PROBES, O_CHECK_ATTACH };
	struct option opts[NKEYS + 20];
	uint64_t x;
	const char *config = SHIMMER_CONF_PATH;
	int must = 0, n = 0, opt, idx, err;

	*o = (struct options){
		.max_age_ns = 30 * DAY_NS, .max_bytes = 10ull << 30,
		.linger_ns = 10000000000ll, .log_level = LOG_LVL_INFO,
		.ready_fd = -1, .parent_fd = -1,
	};
	if (!(o->socket = strdup(SHIMMER_SOCKET_PATH)) || !(o->state_dir = strdup(OPT_STATE_DIR)))
		return -ENOMEM;
	for (size_t i = 0; i < NKEYS; i++)
		opts[n++] = (struct option){ keys[i].name, required_argument, NULL, (int)i };
	opts[n++] = (struct option){ "config", required_argument, NULL, O_CONFIG };
	opts[n++] = (struct option){ "no-config", no_argument, NULL, O_NO_CONFIG };
	opts[n++] = (struct option){ "check-config", no_argument, NULL, O_CHECK };
	opts[n++] = (struct option){ "foreground", no_argument, NULL, 'f' };
	opts[n++] = (struct option){ "verbose", no_argument, NULL, 'v' };
	opts[n++] = (struct option){ "quiet", no_argument, NULL, 'q' };
	opts[n++] = (struct option){ "ready-fd", required_argument, NULL, O_READY };
	opts[n++] = (struct option){ "parent-fd", required_argument, NULL, O_PARENT };
	opts[n++] = (struct option){ "version", no_argument, NULL, O_VERSION };
	opts[n++] = (struct option){ "attach", required_argument, NULL, O_ATTACH };
	opts[n++] = (struct option){ "for", required_argument, NULL, O_FOR };
	opts[n++] = (struct option){ "sample-bytes", required_argument, NULL, O_SAMPLE };
	opts[n++] = (struct option){ "probes", required_argument, NULL, O_PROBES };
	opts[n++] = (struct option){ "check-attach", no_argument, NULL, O_CHECK_ATTACH };
	opts[n++] = (struct option){ "help", no_argument, NULL, 'h' };
	opts[n] = (struct option){ 0 };
	/* The file first, whichever place --config has on the line. */
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--no-config")) {
			config = NULL;
		} else if (!strcmp(argv[i], "--config")) {
			if (i + 1 == argc || !strcmp(argv[i + 1], "--")) {
				log_error("--config needs a value (see shimmerd --help)");
				return 2;
			}
			config = argv[++i];
			must = 1;
		} else if (!strncmp(argv[i], "--config=", 9)) {
			config = argv[i] + 9;
			must = 1;
		} else if (!strcmp(argv[i], "--")) {
			break;
		}
	}
	if (config && (err = read_file(o, config, must)) < 0)
		return err == -ENOMEM ? -ENOMEM : 2;
	/* ':' first: getopt prints nothing, its errors are one line each,
	 * ours. */
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":fvqh", opts, &idx)) != -1) {
		/* "--" where a value goes is a value forgotten ("--db --
		 * --foreground"), not a file or a name: taken, it made a store
		 * named "--" (as tools/cli.c refuses it; "--db=--" names it). */
		if (((opt >= 0 && opt < (int)NKEYS) || opt >= O_CONFIG) && opts[idx].has_arg &&
		    optind >= 2 && optarg == argv[optind - 1] && !strcmp(optarg, "--")) {
			log_error("%s needs a value (see shimmerd --help)", argv[optind - 2]);
			return 2;
		}
		if (opt == ':') {
			log_error("%s needs a value (see shimmerd --help)", argv[optind - 1]);
			return 2;
		}
		if (opt == '?') {
			if (optopt)
				log_error("unknown option -%c (see shimmerd --help)", optopt);
			else
				log_error("unknown option %s (see shimmerd --help)", argv[optind - 1]);
			return 2;
		}
		if (opt >= 0 && opt < (int)NKEYS) {
			if (set(o, &keys[opt], optarg, strlen(optarg), "command line") < 0)
				return 2;
			o->socket_flag |= !strcmp(keys[opt].name, "socket");
			continue;
		}
		switch (opt) {
		case O_ATTACH:
			if (conf_count(optarg, strlen(optarg), conf_pid_max() - 1, &x) < 0 || !x) {
				log_error("--attach %s is not a process id (a whole decimal number,"
					  " 1 to %llu: below the kernel's pid_max)", optarg,
					  (unsigned long long)(conf_pid_max() - 1));
				return 2;
			}
			o->attach_pid = (int)x;
			break;
		case O_FOR:
			if (conf_duration(optarg, strlen(optarg), &x) < 0 || !x || x > INT64_MAX) {
				log_error("--for %s is not a duration > 0 (a decimal number and ns,"
					  " us, ms, s, m, h or d; seconds without a unit)", optarg);
				return 2;
			}
			o->attach_for_ns = (int64_t)x;
			break;
		case O_SAMPLE:
			if (conf_size(optarg, strlen(optarg), &x) < 0 || !x || x > (1ull << 40)) {
				log_error("--sample-bytes %s is not a size in [1, 1T] (bytes, or"
					  " with K, M, G or T)", optarg);
				return 2;
			}
			o->attach_sample_bytes = x;
			break;
		case O_PROBES:
			free(o->attach_probes);
			o->attach_probes = strdup(optarg);
			if (!o->attach_probes)
				return -ENOMEM;
			break;
		case O_CHECK_ATTACH:
			o->check_attach = 1;
			break;
		case O_CONFIG:
		case O_NO_CONFIG:
			break;
		case O_CHECK:
			o->check = 1;
			break;
		case 'f':
			o->foreground = 1;
			break;
		case 'v':
			o->log_level = LOG_LVL_DEBUG;
			break;
		case 'q':
			o->log_level = LOG_LVL_WARN;
			break;
		case O_READY:
			if (fd_arg("ready-fd", optarg, &o->ready_fd) < 0)
				return 2;
			break;
		case O_PARENT:
			if (fd_arg("parent-fd", optarg, &o->parent_fd) < 0)
				return 2;
			fcntl(o->parent_fd, F_SETFD, FD_CLOEXEC);
			break;
		case O_VERSION:
			printf("shimmerd %s (wire format %d, store schema %d, systemd %s)\n",
			       SHIMMER_VERSION, SHM_WIRE_VERSION, STORE_SCHEMA_VERSION,
#ifdef HAVE_LIBSYSTEMD
			       "yes"
#else
			       "no"
#endif
			);
			return 1;
		case 'h':
			usage(stdout);
			return 1;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		log_error("unexpected argument %s", argv[optind]);
		usage(stderr);
		return 2;
	}
	if ((o->attach_for_ns || o->attach_sample_bytes || o->attach_probes) &&
	    o->attach_pid <= 0) {
		log_error("--for, --sample-bytes and --probes need --attach");
		return 2;
	}
	return 0;
}

/* ns in the largest unit that writes it whole (30d, 10s, 500ms). */
static const char *duration_text(int64_t ns, char *buf, size_t len)
{
	static const struct {
		const char *unit;
		int64_t ns;
	} units[] = { { "d", 86400000000000ll }, { "h", 3600000000000ll }, { "m", 60000000000ll },
		      { "s", 1000000000ll }, { "ms", 1000000ll }, { "us", 1000ll } };

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (ns && ns % units[i].ns == 0) {
			snprintf(buf, len, "%lld%s", (long long)(ns / units[i].ns), units[i].unit);
			return buf;
		}
	snprintf(buf, len, "%lld%s", (long long)ns, ns ? "ns" : "");
	return buf;
}

/* bytes in the largest unit that writes it whole (10G, 500M). */
static const char *size_text(uint64_t b, char *buf, size_t len)
{
	static const char units[] = "TGMK";

	for (int i = 0; i < 4; i++) {
		uint64_t u = 1ull << (10 * (4 - i));

		if (b && b % u == 0) {
			snprintf(buf, len, "%llu%c", (unsigned long long)(b / u), units[i]);
			return buf;
		}
	}
	snprintf(buf, len, "%llu", (unsigned long long)b);
	return buf;
}

void options_print(const struct options *o, FILE *out)
{
	char buf[64];

	fprintf(out, "# shimmerd's settings in force%s%s\n", o->config ? ", read from " : "",
		o->config ? o->config : " (no configuration file)");
	fprintf(out, "socket = %s\n", o->socket);
	if (o->db)
		fprintf(out, "db = %s\n", o->db);
	else
		fprintf(out, "state-dir = %s\n", o->state_dir);
	fprintf(out, "max-age = %s\n", duration_text(o->max_age_ns, buf, sizeof(buf)));
	fprintf(out, "max-size = %s\n", size_text(o->max_bytes, buf, sizeof(buf)));
	fprintf(out, "job-linger = %s\n", duration_text(o->linger_ns, buf, sizeof(buf)));
	fprintf(out, "log-level = %s\n", levels[o->log_level]);
	if (o->shim_defaults)
		fprintf(out, "# defaults of traced processes (the shim reads them)\n%s",
			o->shim_defaults);
}

void options_free(struct options *o)
{
	free(o->attach_probes);
	free(o->socket);
	free(o->db);
	free(o->state_dir);
	free(o->config);
	free(o->shim_defaults);
}
