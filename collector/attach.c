/*
 * An attached process's row and life (attach.h).  What HELLO carries for a
 * preloaded process is read from /proc/PID: stat (ppid), status (the
 * effective uid), exe, cmdline (argv), environ (rank variables, when we
 * may read it).  Records come in CLOCK_MONOTONIC (the BPF programs'
 * bpf_ktime_get_ns()), so the ingest needs no TSC calibration.
 */
#include "attach.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "bpfsrc.h"
#include "clock_ns.h"
#include "ingest.h"
#include "log.h"

#define DEFAULT_SAMPLE_BYTES 524288u /* the shim's SHIMMER_SAMPLE_BYTES default */

struct attach {
	struct collector *co;
	struct store *store; /* the row's: co->store, or the preloaded process's */
	struct attach_conf conf;
	int own_row;   /* the row is ours to end (not a preloaded process's) */
	int64_t proc_id;
	int64_t start_ns;
	int pidfd;
	struct ingest *in;
	struct bpfsrc *src;
	int ended;
};

/* The whole of a /proc file (NUL-terminated too); NULL with errno. */
static char *read_proc(pid_t pid, const char *what, size_t *len)
{
	char path[64], *buf = NULL;
	size_t cap = 0, n = 0;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, what);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	for (;;) {
		ssize_t r;

		if (n + 1 >= cap) {
			char *grown = realloc(buf, cap ? cap * 2 : 4096);

			if (!grown) {
				free(buf);
				close(fd);
				errno = ENOMEM;
				return NULL;
			}
			buf = grown;
			cap = cap ? cap * 2 : 4096;
		}
		r = read(fd, buf + n, cap - n - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = '\0';
	*len = n;
	return buf;
}

/* A rank variable from the process's environment, as the shim reads its
 * own (SHM_RANK_VARS): the first that holds a non-negative integer. */
static int32_t env_rank(const char *env, size_t len, const char *const *names)
{
	for (; *names; names++) {
		size_t nl = strlen(*names);

		for (size_t i = 0; i < len; i += strlen(env + i) + 1) {
			char *end;
			unsigned long long v;

			if (strncmp(env + i, *names, nl) || env[i + nl] != '=')
				continue;
			errno = 0;
			v = strtoull(env + i + nl + 1, &end, 10);
			if (!errno && end != env + i + nl + 1 && !*end && v <= INT32_MAX)
				return (int32_t)v;
		}
	}
	return SHM_NO_RANK;
}

/* ppid from stat: the fields after the command's closing parenthesis. */
static uint32_t read_ppid(pid_t pid)
{
	size_t len;
	char *stat = read_proc(pid, "stat", &len), *p;
	unsigned ppid = 0;

	if (stat && (p = strrchr(stat, ')')))
		sscanf(p + 1, " %*c %u", &ppid);
	free(stat);
	return ppid;
}

static uint32_t read_euid(pid_t pid)
{
	size_t len;
	char *status = read_proc(pid, "status", &len), *p;
	unsigned ruid = 0, euid = 0;

	if (status && (p = strstr(status, "\nUid:")))
		sscanf(p + 5, "%u %u", &ruid, &euid);
	free(status);
	return euid;
}

static int add_process(struct attach *a, char *why, size_t len)
{
	static const char gpu_detail[] = "uprobes see the CPU side of CUDA calls; kernels and "
					  "copies need the shim (shimmer run)";
	static const char *const rank_vars[] = { SHM_RANK_VARS, 0 };
	static const char *const local_vars[] = { SHM_LOCAL_RANK_VARS, 0 };
	pid_t pid = a->conf.pid;
	char host[256] = "localhost", exe[PATH_MAX], link[64];
	char *cmdline, *env, *argv = NULL;
	size_t cmd_len = 0, env_len = 0;
	ssize_t n;
	struct store_proc p;
	int err;

	gethostname(host, sizeof(host) - 1);
	host[sizeof(host) - 1] = '\0';
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
	n = readlink(link, exe, sizeof(exe) - 1);
	if (n < 0) {
		err = -errno;
		snprintf(why, len, "cannot read %s: %s", link, strerror(errno));
		return err;
	}
	exe[n] = '\0';
	cmdline = read_proc(pid, "cmdline", &cmd_len);
	if (cmdline && cmd_len && cmdline[cmd_len - 1] == '\0')
		cmd_len--; /* the shim sends no terminator after the last */
	env = read_proc(pid, "environ", &env_len);
	p = (struct store_proc){
		.pid = (uint32_t)pid, .ppid = read_ppid(pid), .uid = read_euid(pid),
		.host = host, .host_len = strlen(host),
		.exe = exe, .exe_len = (size_t)n,
		.rank = env ? env_rank(env, env_len, rank_vars) : SHM_NO_RANK,
		.local_rank = env ? env_rank(env, env_len, local_vars) : SHM_NO_RANK,
		.malloc_mode = a->conf.what & BPFSRC_HEAP ? "sample" : "off",
		.sample_bytes = a->conf.what & BPFSRC_HEAP ? (int64_t)a->conf.sample_bytes : -1,
		.start_wall_ns = (int64_t)clock_ns(CLOCK_REALTIME),
		.start_ns = a->start_ns,
		.traced_by = "attach",
	};
	err = client_json_argv(cmdline ? cmdline : "", cmd_len, &argv, &p.argv_json_len);
	if (!err) {
		p.argv_json = argv;
		err = store_process_add(a->store, &p, &a->proc_id);
	}
	if (!err)
		err = store_process_gpu_status(a->store, a->proc_id, SHM_GPU_ATTACHED,
					       gpu_detail, strlen(gpu_detail));
	if (!err && (a->conf.what & BPFSRC_OFFCPU))
		err = store_process_offcpu(a->store, a->proc_id, 1, NULL);
	free(argv);
	free(cmdline);
	free(env);
	return err;
}

static int host_string(void *ctx, uint32_t id, const char *text, size_t len)
{
	struct attach *a = ctx;

	return store_string_add(a->store, a->proc_id, id, text, len, NULL);
}

static int host_thread(void *ctx, uint32_t tid, uint32_t name_id, uint64_t ts)
{
	struct attach *a = ctx;

	return store_thread_add(a->store, a->proc_id, tid, name_id,
				ts > INT64_MAX ? INT64_MAX : (int64_t)ts);
}

struct attach *attach_start(struct collector *co, const struct attach_conf *conf,
			    char *why, size_t len)
{
	struct attach *a = calloc(1, sizeof(*a));
	struct bpfsrc_conf bc;
	int err;

	if (!a) {
		snprintf(why, len, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	a->co = co;
	a->store = conf->store ? conf->store : co->store;
	a->conf = *conf;
	a->pidfd = -1;
	/* The malloc family costs a uprobe and a uretprobe per call: only
	 * when asked for. */
	if (!a->conf.what)
		a->conf.what = BPFSRC_CUDA | BPFSRC_OFFCPU;
	if (!a->conf.sample_bytes)
		a->conf.sample_bytes = DEFAULT_SAMPLE_BYTES;
	a->pidfd = (int)syscall(SYS_pidfd_open, conf->pid, 0);
	if (a->pidfd < 0) {
		err = -errno;
		snprintf(why, len, "no process %d: %s", (int)conf->pid, strerror(errno));
		goto fail;
	}
	/* Probes first: the row is made only once they are in.  What they
	 * record meanwhile waits on the ring buffer for the first poll. */
	a->start_ns = (int64_t)clock_ns(CLOCK_MONOTONIC);
	bc = (struct bpfsrc_conf){
		.pid = conf->pid, .what = a->conf.what, .sample_bytes = a->conf.sample_bytes,
		.modules = 1,
		.host = { .string = host_string, .thread = host_thread, .ctx = a },
	};
	a->src = bpfsrc_new(&bc, why, len);
	if (!a->src) {
		err = -errno;
		goto fail;
	}
	err = add_process(a, why, len);
	if (err)
		goto fail;
	a->in = ingest_new(&(struct ingest_conf){
		.store = a->store, .proc_id = a->proc_id, .clock = SHM_CLOCK_MONOTONIC,
		.malloc_mode = a->conf.what & BPFSRC_HEAP ? SHM_MALLOC_SAMPLE : SHM_MALLOC_OFF,
		.sample_bytes = a->conf.sample_bytes, .nstreams = 1,
	});
	if (!a->in) {
		err = -ENOMEM;
		snprintf(why, len, "out of memory");
		goto fail;
	}
	err = store_commit(a->store);
	if (err)
		goto fail;
	a->own_row = 1;
	log_debug("attached to pid %d as proc_id %lld: %s", (int)conf->pid,
		  (long long)a->proc_id, bpfsrc_describe(a->src));
	return a;
fail:
	attach_free(a);
	errno = err < 0 ? -err : EINVAL;
	return NULL;
}

struct attach *attach_offcpu(struct collector *co, struct store *store, int64_t proc_id,
			     pid_t pid, char *why, size_t len)
{
	struct attach *a = calloc(1, sizeof(*a));
	int err = -ENOMEM;

	snprintf(why, len, "out of memory");
	if (!a)
		goto fail;
	a->co = co;
	a->store = store;
	a->conf = (struct attach_conf){ .pid = pid, .what = BPFSRC_OFFCPU };
	a->proc_id = proc_id;
	a->pidfd = -1;
	a->start_ns = (int64_t)clock_ns(CLOCK_MONOTONIC);
	a->in = ingest_new(&(struct ingest_conf){
		.store = store, .proc_id = proc_id, .clock = SHM_CLOCK_MONOTONIC,
		.malloc_mode = SHM_MALLOC_OFF, .nstreams = 1,
	});
	if (!a->in)
		goto fail;
	a->src = bpfsrc_new(&(struct bpfsrc_conf){ .pid = pid, .what = BPFSRC_OFFCPU }, why, len);
	if (!a->src) {
		err = -errno;
		goto fail;
	}
	err = store_process_offcpu(store, proc_id, 1, NULL);
	if (err)
		goto fail;
	return a;
fail:
	attach_free(a);
	errno = err < 0 ? -err : EINVAL;
	return NULL;
}

int attach_fd(const struct attach *a)
{
	return bpfsrc_fd(a->src);
}

int attach_pidfd(const struct attach *a)
{
	return a->pidfd;
}

int attach_poll(struct attach *a)
{
	return a->ended ? 0 : bpfsrc_poll(a->src, ingest_sink(a->in));
}

int attach_tick(struct attach *a, int64_t now_ns)
{
	int err;

	if (a->ended)
		return 0;
	err = bpfsrc_tick(a->src, ingest_sink(a->in));
	if (err)
		return err;
	return a->conf.window_ns > 0 && now_ns - a->start_ns >= a->conf.window_ns;
}

int attach_end(struct attach *a, enum attach_end why, int64_t now_ns)
{
	/* A detach ends tracing when the probes are out; an exit, when the
	 * process was seen gone (its threads' last waits end there too). */
	uint64_t end_ns = why == ATTACH_EXITED ? (uint64_t)now_ns : 0;
	int err;

	if (a->ended)
		return 0;
	a->ended = 1;
	err = bpfsrc_stop(a->src, ingest_sink(a->in), &end_ns);
	if (!a->own_row)
		return err;
	if (!err)
		err = store_process_end(a->store, a->proc_id, (int64_t)end_ns,
					why == ATTACH_EXITED ? "exit" : "detach", 0);
	if (!err)
		err = store_commit(a->store);
	if (!err)
		log_debug("pid %d (proc_id %lld) %s", (int)a->conf.pid, (long long)a->proc_id,
			  why == ATTACH_EXITED ? "exited" : "detached");
	return err;
}

int attach_ended(const struct attach *a)
{
	return a->ended;
}

const char *attach_describe(const struct attach *a)
{
	return bpfsrc_describe(a->src);
}

pid_t attach_pid(const struct attach *a)
{
	return a->conf.pid;
}

void attach_free(struct attach *a)
{
	if (!a)
		return;
	bpfsrc_free(a->src);
	ingest_free(a->in);
	if (a->pidfd >= 0)
		close(a->pidfd);
	free(a);
}
