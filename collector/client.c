/*
 * The control protocol: a client's life is client_new() on accept, HELLO
 * (validated, its job chosen, its region handed to a ring source, a
 * processes row, an ingest sink), then any number of STRING/THREAD/
 * GPU_STATUS/KICK messages and drain passes, then BYE and/or the socket
 * closing, and client_end().  A control client sends one REQUEST instead
 * of HELLO (ctl.c answers it, through client_reply()).
 *
 * This file knows messages and processes only: reading the region is
 * ring.c's, what records mean is ingest.c's, which recording a process
 * goes to job.c's.  A drain is ring_drain(ring, now, sink), the sink being
 * ingest_sink(ingest) with the records and drops counted on the way, for
 * `shimmer ctl status`.
 */
#include "client.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock_ns.h"
#include "cputime.h"
#include "ctl.h"
#include "demangle.h"
#include "drops.h"
#include "ingest.h"
#include "job.h"
#include "log.h"
#include "ring.h"
#include "utf8.h"
#include "wire.h"

#define RECV_BATCH 64          /* messages per wake-up, for fairness */
#define FDS_MAX 8              /* room to receive (and close) extra fds */
#define OUT_MAX (16u << 20)    /* replies queued for a slow reader, at most */
/* BYE's user + system time may pass its total by this much: getrusage()
 * apportions the total into two figures at microseconds, each rounded. */
#define BYE_CPU_SLACK_NS 20000000

struct client {
	struct collector *co;
	struct client *next, **pprev;
	int fd;
	int64_t proc_id;
	uint32_t pid, uid;           /* as HELLO said, once it matched the peer */
	uint32_t peer_pid, peer_uid; /* the kernel's (SO_PEERCRED) */
	int has_peer;
	int64_t born_ns;             /* accepted, CLOCK_MONOTONIC */
	uint32_t clock;
	uint32_t hello_flags;  /* SHM_HELLO_* */
	uint32_t nslots;
	char *host;
	size_t host_len;
	struct ring *ring;     /* the region, from HELLO on */
	struct ingest *ingest; /* its records' meaning, from HELLO on */
	struct cputime cpu;    /* its threads' CPU time, when the kernel named its pid */
	struct store *store;   /* its recording's, from HELLO on */
	struct job *job;       /* NULL when the collector has one store only */
	struct rec_sink sink;  /* counts, then hands on to ingest_sink() */
	const struct rec_sink *inner;
	char *exe;
	int32_t rank;
	int64_t start_wall_ns;
	uint64_t events, dropped;      /* records stored, events lost */
	uint64_t lost;                 /* of dropped, with a dead collector (reconnect) */
	uint64_t events_then, dropped_then;
	int64_t rate_ns;               /* when the rates were last taken */
	double events_per_s, dropped_per_s;
	int control;           /* a control client: it sent REQUEST */
	int in_hello;          /* its HELLO is being handled */
	int resuming;          /* its HELLO was a reconnect's */
	uint64_t seq;          /* accept order */
	char *out;             /* replies not yet sent: [u32 length][message]... */
	size_t out_len, out_off;
	int bye;
	int exec_next; /* a later HELLO came from this pid: it exec'd */
	int64_t exec_ns;  /* then that HELLO's start: the exec came before it */
	int64_t start_ns; /* its HELLO's start_mono_ns */
	uint64_t bye_ts;
	int exit_cpu;          /* BYE carried the process's CPU time (SHM_BYE_CPU) */
	int64_t exit_cpu_ns, exit_user_ns, exit_sys_ns;
	uint32_t fatal_signo; /* SIGNAL: the fatal signal the shim saw, 0 before */
	uint64_t fatal_ts;
	int rejected;
	int ended;
};

/* Logs why the client is rejected (only the first reason) and returns the
 * code that makes the caller end it. */
__attribute__((format(printf, 2, 3)))
static int reject(struct client *c, const char *fmt, ...)
{
	char why[640];
	va_list ap;

	if (!c->rejected) {
		va_start(ap, fmt);
		vsnprintf(why, sizeof(why), fmt, ap);
		va_end(ap);
		if (c->pid)
			log_warn("rejecting pid %u: %s", c->pid, why);
		else
			log_warn("rejecting a client before HELLO: %s", why);
	}
	c->rejected = 1;
	return -EBADMSG;
}

/* ---- HELLO ---- */

int client_json_argv(const char *argv, size_t len, char **out, size_t *out_len)
{
	const unsigned char *s = (const unsigned char *)argv;
	char *j = malloc(len * 6 + 8), *p;

	if (!j)
		return -ENOMEM;
	p = j;
	*p++ = '[';
	if (len)
		*p++ = '"';
	for (size_t i = 0; i < len;) {
		size_t n = utf8_len(s + i, len - i);

		if (s[i] == 0) {
			p += sprintf(p, "\",\"");
		} else if (s[i] == '"' || s[i] == '\\') {
			*p++ = '\\';
			*p++ = (char)s[i];
		} else if (s[i] < 0x20 || s[i] == 0x7f) {
			p += sprintf(p, "\\u%04x", s[i]);
		} else if (n == 0) {
			p += sprintf(p, "\\ufffd");
		} else {
			memcpy(p, s + i, n);
			p += n;
			i += n;
			continue;
		}
		i++;
	}
	if (len)
		*p++ = '"';
	*p++ = ']';
	*out = j;
	*out_len = (size_t)(p - j);
	return 0;
}

/* Whether live client o is the same user's on the same host as c, and
 * records into the same store. */
static int same_owner(const struct client *o, const struct client *c)
{
	return o->uid == c->uid && o->store == c->store && o->host_len == c->host_len &&
	       !memcmp(o->host, c->host, c->host_len);
}

/* The traced parent: a live client first (its pid cannot have been reused
 * yet), else the latest process of that pid on the host.  Only the same
 * user's processes count: ppid is the client's word, and no one may hang
 * rows under another user's process. */
static int find_parent(struct client *c, uint32_t ppid, int64_t *parent)
{
	*parent = 0;
	for (struct client *o = c->co->clients; o; o = o->next)
		if (o != c && o->proc_id > *parent && !o->ended && o->pid == ppid &&
		    same_owner(o, c))
			*parent = o->proc_id;
	if (*parent)
		return 0;
	return store_process_find(c->store, ppid, c->uid, c->host, c->host_len, parent);
}

/*
 * exec() keeps the pid and closes the old image's socket without a BYE, and
 * the new image says HELLO again at once.  So the same pid on the same host
 * saying HELLO while its old connection lives, or seconds after it closed
 * without BYE, means the old one exec'd.  pid and uid are the kernel's, so
 * only the same process (or one its pid was reused for, by the same user)
 * is marked.  The old image ended by the new one's start: when we notice
 * its socket close is later (a busy collector: tens of ms, up to seconds),
 * and an end after the successor's start would count its time twice.
 */
#define EXEC_WINDOW_NS 2000000000ll

static int mark_exec(struct client *c, int64_t start_ns)
{
	for (struct client *o = c->co->clients; o; o = o->next)
		if (o != c && !o->ended && o->proc_id && o->pid == c->pid && same_owner(o, c)) {
			o->exec_next = 1;
			o->exec_ns = start_ns;
			return 0;
		}
	/* start_ns is the client's word: any value, so saturate */
	return store_process_exec(c->store, c->pid, c->uid, c->host, c->host_len,
				  start_ns < INT64_MIN + EXEC_WINDOW_NS ? INT64_MIN
									: start_ns - EXEC_WINDOW_NS,
				  start_ns);
}

/*
 * The job a new process joins (job.h): its SHIMMER_JOB's; else the job of
 * the live process of the same user and host it replaces by exec (same
 * pid) or is a child of (its ppid), so that a launcher's workers, forked or
 * exec'd, join the launcher's job whatever their own environment says;
 * else its launcher's id or process group, as it sent them.
 */
static int early_hello(struct client *o);

static int choose_job(struct client *c, const struct shm_msg_hello *h, const char *key)
{
	struct client *via = NULL;

	/* The parent (or pre-exec image) connected before us, but its HELLO
	 * may still wait behind ours in this batch of events: it is read now,
	 * so that the order of events never decides the job.  Only older
	 * connections: a newer one of the same pid is our own exec'd image. */
	if (h->job_kind != SHM_JOB_NAMED)
		for (struct client *o = c->co->clients; o; o = o->next)
			if (o != c && o->seq < c->seq && !o->ended && !o->proc_id && !o->control &&
			    !o->in_hello &&
			    o->has_peer && o->peer_uid == c->uid &&
			    (o->peer_pid == h->ppid || o->peer_pid == c->pid))
				early_hello(o);
	if (h->job_kind != SHM_JOB_NAMED)
		for (struct client *o = c->co->clients; o; o = o->next)
			if (o != c && !o->ended && o->job && o->uid == c->uid &&
			    (o->pid == c->pid || (o->pid == h->ppid && !via)) &&
			    o->host_len == c->host_len && !memcmp(o->host, c->host, c->host_len))
				via = o;
	if (via)
		c->job = via->job;
	/* A parent (or pre-exec image) that already ended, its job still
	 * open: a launcher may finish before the daemon reads its children. */
	else if (h->job_kind != SHM_JOB_NAMED &&
		 !(c->job = jobs_find_pid(c->co->jobs, c->uid, h->ppid)))
		c->job = jobs_find_pid(c->co->jobs, c->uid, c->pid);
	if (c->job) {
		int err = job_hold(c->job, c->pid);

		if (err) {
			c->job = NULL;
			return err;
		}
	} else {
		int err = jobs_join(c->co->jobs, c->uid, c->pid, key, h->job_len, c->host,
				    c->host_len, &c->job);

		if (err == -EPERM) {
			c->rejected = 1; /* said by jobs_join(), once for many */
			return -EBADMSG;
		}
		if (err)
			return err;
	}
	c->store = job_store(c->job);
	return 0;
}

static uint64_t record_now(const struct client *c);

/*
 * The control blocks' deadlines (ring.h): a ctl window's end, the time
 * triggers.  The daemon keeps them, and a process pauses or resumes when
 * the daemon writes its block, so a deadline met late is a window longer
 * than asked, truly recorded so.  They are met here, for every client,
 * before each client's drain and every CONTROL_EVERY records inside one,
 * not at each client's own turn in a pass: a pass over busy regions takes
 * long (tens of ms for 8 lossless processes under a sanitizer, seconds
 * for 32 lossy ones of 8 threads), and a deadline met only at its
 * client's turn was late by every drain before it (t_control measured
 * windows of 200 ms held 233 to 350 ms).  co->ctl_due keeps the walk
 * over the clients to the moments a deadline is due.
 */
#define CONTROL_EVERY 256u

static void control_due(struct collector *co)
{
	uint64_t now = clock_ns(CLOCK_MONOTONIC), due = UINT64_MAX;

	if (now < co->ctl_due)
		return;
	for (struct client *o = co->clients; o; o = o->next) {
		uint64_t next;

		if (!o->ring || o->ended)
			continue;
		next = ring_control_tick(o->ring, now, record_now(o));
		if (next && next < due)
			due = next;
	}
	co->ctl_due = due;
}

/* A deadline of c's block (next, 0: none) is kept from now on. */
static void control_planned(struct client *c, uint64_t next)
{
	if (next && next < c->co->ctl_due)
		c->co->ctl_due = next;
}

/* The sink in front of ingest's: counts for `shimmer ctl status`. */
static int count_record(void *ctx, uint32_t stream, uint32_t tid, const union rec *r)
{
	struct client *c = ctx;

	if (!(++c->events % CONTROL_EVERY))
		control_due(c->co);
	return c->inner->record(c->inner->ctx, stream, tid, r);
}

static void count_stream_new(void *ctx, uint32_t stream)
{
	struct client *c = ctx;

	c->inner->stream_new(c->inner->ctx, stream);
}

static int count_counts(void *ctx, uint32_t tid, uint16_t fn, uint64_t count, uint64_t bytes)
{
	struct client *c = ctx;

	return c->inner->counts(c->inner->ctx, tid, fn, count, bytes);
}

static int count_drops(void *ctx, uint32_t tid, const char *reason, uint64_t events)
{
	struct client *c = ctx;

	/* a refused stack capture's event was stored, without the stack */
	if (drop_is_loss(reason))
		c->dropped += events;
	return c->inner->drops(c->inner->ctx, tid, reason, events);
}

/*
 * When the kernel says the peer's process started, on CLOCK_MONOTONIC (its
 * start in /proc is in clock ticks on CLOCK_BOOTTIME), in *ns.  0 or
 * -errno.
 */
static int peer_start_ns(uint32_t pid, int64_t *ns)
{
	char path[64], buf[1024], *p;
	unsigned long long ticks;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = 0;
	/* after the command name, which may hold anything: from its last ')' */
	p = strrchr(buf, ')');
	if (!p)
		return -EIO;
	/* field 3 is the state, just after; starttime is field 22 */
	for (int field = 2; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p + 1, "%llu", &ticks) != 1)
		return -EIO;
	*ns = (int64_t)(ticks * (1000000000ull / (unsigned long long)sysconf(_SC_CLK_TCK))) -
	      ((int64_t)clock_ns(CLOCK_BOOTTIME) - (int64_t)clock_ns(CLOCK_MONOTONIC));
	return 0;
}

/* A kernel start time in ticks, converted: this much later than the shim's
 * own reading of its start is still the same process. */
#define START_SLACK_NS 1000000000ll

/*
 * A reconnect HELLO (SHM_HELLO_RECONNECT): continues the process's row, the
 * latest of its pid, uid and host, which must have started when HELLO says
 * and been ended by store_recover(); and the process must have existed
 * then (the kernel's start time, not the client's word: a later process
 * that got the pid, the same user's, cannot take the row over).  Under
 * jobs, the row is looked for in the recording the index lists it lost in
 * (jobs_resume(): the user's own, opened again when a restarted daemon
 * finished it), and the process joins that recording's job.
 */
static int resume(struct client *c, const struct shm_msg_hello *h)
{
	int64_t kstart = 0;
	char why[400];
	int err;

	if (c->fd >= 0 && (peer_start_ns(c->pid, &kstart) < 0 ||
			   kstart > (int64_t)h->start_mono_ns + START_SLACK_NS))
		return reject(c, "reconnect HELLO says the process started at %llu ns, the "
			      "kernel says it did not exist then",
			      (unsigned long long)h->start_mono_ns);
	if (c->co->jobs) {
		err = jobs_resume(c->co->jobs, c->uid, c->pid, c->host,
				  (int64_t)h->start_mono_ns, &c->job, why, sizeof(why));
		if (err)
			return err;
		if (!c->job && why[0])
			return reject(c, "reconnect HELLO of a process a restarted daemon ended as "
				      "'collector_lost': %s", why);
		if (!c->job)
			return reject(c, "reconnect HELLO for no process a restarted daemon ended "
				      "in a recording of uid %u (pid %u, started at %llu ns)", c->uid,
				      c->pid, (unsigned long long)h->start_mono_ns);
		c->store = job_store(c->job);
	}
	err = store_process_resume(c->store, c->pid, c->uid, c->host, c->host_len,
				   (int64_t)h->start_mono_ns, &c->proc_id);
	if (err)
		return err;
	if (!c->proc_id)
		return reject(c, "reconnect HELLO for no process this collector lost (pid %u, "
			      "uid %u, started at %llu ns)", c->pid, c->uid,
			      (unsigned long long)h->start_mono_ns);
	return 0;
}

/* ring_resume(): each thread with a slot gets its row if it has none (a
 * thread that started while no collector listened), and its loss. */
static int resume_slot(void *ctx, uint32_t tid, uint64_t lost)
{
	struct client *c = ctx;
	int err = store_thread_add(c->store, c->proc_id, tid, 0,
				   (int64_t)clock_ns(CLOCK_MONOTONIC));

	c->lost += lost;
	return err || !lost ? err : count_drops(c, tid, "collector_lost", lost);
}

static int hello(struct client *c, const char *msg, size_t len, int memfd)
{
	static const char *const modes[] = { "off", "sample", "all" };
	struct shm_msg_hello h;
	struct store_proc p;
	char *argv = NULL;
	const char *text = msg + sizeof(h);
	char why[256];
	int err;

	if (c->proc_id)
		return reject(c, "second HELLO");
	if (len < sizeof(h))
		return reject(c, "HELLO of %zu bytes", len);
	memcpy(&h, msg, sizeof(h));
	/* Identity is the kernel's: a HELLO that claims another pid or uid
	 * (another process's rows, another user's) is refused. */
	if (!c->has_peer)
		return reject(c, "HELLO from a peer of unknown identity");
	if (h.pid != c->peer_pid || h.uid != c->peer_uid)
		return reject(c, "HELLO says pid %u uid %u, the socket's peer is pid %u uid %u",
			      h.pid, h.uid, c->peer_pid, c->peer_uid);
	c->pid = h.pid;
	c->uid = h.uid;
	if (len != sizeof(h) + h.exe_len + h.argv_len + h.host_len + h.job_len)
		return reject(c, "HELLO length %zu does not match its strings", len);
	if (h.job_len > SHM_JOB_MAX || h.job_kind < SHM_JOB_NAMED || h.job_kind > SHM_JOB_PGID)
		return reject(c, "HELLO job of kind %u, %u bytes", h.job_kind, h.job_len);
	if (h.malloc_mode > SHM_MALLOC_ALL)
		return reject(c, "HELLO malloc_mode %u", h.malloc_mode);
	/* a cut command line is longer than what came */
	if (h.argv_bytes && h.argv_bytes <= h.argv_len)
		return reject(c, "HELLO says its argv of %u bytes was cut from %u", h.argv_len,
			      h.argv_bytes);
	if (h.clock != SHM_CLOCK_MONOTONIC && h.clock != SHM_CLOCK_TSC)
		return reject(c, "HELLO clock %u", h.clock);
	c->ring = ring_new(memfd, &(struct ring_geometry){ h.nslots, h.ring_bytes,
							   h.region_bytes }, why, sizeof(why));
	if (!c->ring)
		return errno == EBADMSG ? reject(c, "%s", why) : -errno;
	ring_control_start(c->ring);
	/* its plan's deadlines: looked at with the others' from now on */
	c->co->ctl_due = 0;
	c->clock = h.clock;
	c->hello_flags = h.flags;
	c->nslots = h.nslots;
	c->host_len = h.host_len;
	c->host = malloc(h.host_len + 1);
	if (!c->host)
		return -ENOMEM;
	memcpy(c->host, text + h.exe_len + h.argv_len, h.host_len);
	c->host[h.host_len] = 0;
	c->exe = strndup(text, h.exe_len);
	if (!c->exe)
		return -ENOMEM;
	c->rank = h.rank;
	c->start_wall_ns = (int64_t)h.start_wall_ns;
	c->start_ns = (int64_t)h.start_mono_ns;
	/* A reconnect goes on in the recording its row is in (resume()). */
	if (c->co->jobs && !(h.flags & SHM_HELLO_RECONNECT)) {
		err = choose_job(c, &h, text + h.exe_len + h.argv_len + h.host_len);
		if (err)
			return err;
	} else if (!c->co->jobs) {
		c->store = c->co->store;
	}
	p = (struct store_proc){
		.pid = h.pid, .ppid = h.ppid, .uid = h.uid,
		.host = c->host, .host_len = c->host_len,
		.exe = text, .exe_len = h.exe_len,
		.rank = h.rank, .local_rank = h.local_rank,
		.malloc_mode = modes[h.malloc_mode],
		.sample_bytes = h.malloc_mode == SHM_MALLOC_SAMPLE ?
				(int64_t)h.sample_bytes : -1,
		.lossless = !!(h.flags & SHM_HELLO_LOSSLESS),
		.argv_bytes = h.argv_bytes,
		.start_wall_ns = (int64_t)h.start_wall_ns,
		.start_ns = (int64_t)h.start_mono_ns,
	};
	err = client_json_argv(text + h.exe_len, h.argv_len, &argv, &p.argv_json_len);
	if (err)
		goto out;
	p.argv_json = argv;
	if (h.flags & SHM_HELLO_RECONNECT) {
		c->resuming = 1;
		err = resume(c, &h);
	} else {
		err = find_parent(c, h.ppid, &p.parent_proc_id);
		if (!err)
			err = mark_exec(c, (int64_t)h.start_mono_ns);
		if (!err)
			err = store_process_add(c->store, &p, &c->proc_id);
	}
	if (!err) {
		struct ingest_conf ic = {
			.store = c->store, .proc_id = c->proc_id, .clock = h.clock,
			.tsc = &c->co->clock, .malloc_mode = h.malloc_mode,
			.sample_bytes = h.sample_bytes, .nstreams = h.nslots,
			.heap_rows = h.flags & (SHM_HELLO_HEAP_ROWS | SHM_HELLO_HEAP_AGG),
			.start_ns = (int64_t)h.start_mono_ns,
		};

		c->ingest = ingest_new(&ic);
		if (!c->ingest)
			err = -ENOMEM;
	}
	if (!err) {
		struct ucred cred;
		socklen_t clen = sizeof(cred);

		/* Only the pid the kernel vouches for is read in /proc. */
		if (c->fd >= 0 && getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0 &&
		    cred.pid > 0 && (uint32_t)cred.pid == h.pid)
			cputime_init(&c->cpu, (uint32_t)cred.pid);
		c->inner = ingest_sink(c->ingest);
		c->sink = (struct rec_sink){ count_record, count_stream_new, count_counts,
					     count_drops, c };
		c->rate_ns = (int64_t)clock_ns(CLOCK_MONOTONIC);
		log_debug("pid %u connected as proc_id %lld", c->pid, (long long)c->proc_id);
	}
	if (!err && (h.flags & SHM_HELLO_RECONNECT)) {
		uint64_t lost;

		err = ring_resume(c->ring, &lost, resume_slot, c);
		if (!err && lost)
			err = count_drops(c, 0, "collector_lost", lost);
		if (!err)
			log_info("pid %u (proc_id %lld) reconnected: %llu events lost with the "
				 "collector before, counted as 'collector_lost'", c->pid,
				 (long long)c->proc_id, (unsigned long long)(lost + c->lost));
	}
out:
	free(argv);
	return err;
}

/* ---- other messages ---- */

/*
 * Strings go to the store, not to memory: a process may define many (every
 * kernel, every NVTX name), and the one thing the collector itself needs
 * from them, a thread's name, the store finds with the THREAD row's insert.
 * A STRING always precedes its use on the socket; records may refer to ids
 * whose STRING is still in flight, so their ids are not checked.
 */
static int string_msg(struct client *c, const char *msg, size_t len)
{
	static char text[SHM_MSG_MAX + 1]; /* the text, NUL-terminated */
	static char demangled[DEMANGLE_OUT_MAX];
	struct shm_msg_string m;
	long n = -1;

	if (len < sizeof(m))
		return reject(c, "STRING of %zu bytes", len);
	memcpy(&m, msg, sizeof(m));
	if (len != sizeof(m) + (uint64_t)m.len || m.id == 0)
		return reject(c, "malformed STRING (id %u, %u bytes)", m.id, m.len);
	memcpy(text, msg + sizeof(m), m.len);
	text[m.len] = 0;
	/* CUPTI gives kernel names mangled; readers want them as written.
	 * Bounded: a crafted name must not stall the daemon (demangle.h). */
	if (m.len > 2 && text[0] == '_' && text[1] == 'Z')
		n = demangle(text, m.len, demangled, sizeof(demangled));
	return store_string_add(c->store, c->proc_id, m.id, text, m.len,
				n >= 0 ? demangled : NULL);
}

static int thread_msg(struct client *c, const char *msg, size_t len)
{
	struct shm_msg_thread m;

	if (len != sizeof(m))
		return reject(c, "THREAD of %zu bytes", len);
	memcpy(&m, msg, sizeof(m));
	if (m.slot >= c->nslots)
		return reject(c, "THREAD names slot %u of %u", m.slot, c->nslots);
	return store_thread_add(c->store, c->proc_id, m.tid, m.name_id,
				ingest_ns(c->ingest, m.ts));
}

static int gpu_status_msg(struct client *c, const char *msg, size_t len)
{
	struct shm_msg_gpu_status m;

	if (len < sizeof(m))
		return reject(c, "GPU_STATUS of %zu bytes", len);
	memcpy(&m, msg, sizeof(m));
	if (len != sizeof(m) + (uint64_t)m.len)
		return reject(c, "GPU_STATUS of %zu bytes with %u of text", len, m.len);
	if (m.status < SHM_GPU_ACTIVE || m.status > SHM_GPU_DISABLED)
		return reject(c, "GPU_STATUS status %u", m.status);
	return store_process_gpu_status(c->store, c->proc_id, m.status,
					msg + sizeof(m), m.len);
}

/* SIGNAL: the shim saw a fatal signal (the first one counts).  Whether it
 * ended the process, the socket closing without a BYE says. */
static int signal_msg(struct client *c, const char *msg, size_t len)
{
	struct shm_msg_signal m;

	if (len != sizeof(m))
		return reject(c, "SIGNAL of %zu bytes", len);
	memcpy(&m, msg, sizeof(m));
	if (m.signo <= 0 || m.signo > 64)
		return reject(c, "SIGNAL signal %d", m.signo);
	if (!c->fatal_signo) {
		c->fatal_signo = (uint32_t)m.signo;
		c->fatal_ts = m.ts;
	}
	return 0;
}

/* BYE: the orderly end, and the process's CPU time at it (wire.h). */
static int bye_msg(struct client *c, const char *msg, size_t len)
{
	struct shm_msg_bye m;

	if (len != sizeof(m))
		return reject(c, "BYE of %zu bytes", len);
	memcpy(&m, msg, sizeof(m));
	c->bye_ts = m.ts;
	c->bye = 1;
	/* The process's word on itself, kept only when it can be true: a
	 * split within its total (getrusage's microseconds, apportioned by
	 * the kernel, may round past it by a tick's worth), every figure a
	 * row can hold.  Else the process ends without a final reading, as
	 * one killed does. */
	if ((m.flags & SHM_BYE_CPU) && m.cpu_ns <= INT64_MAX && m.user_ns <= INT64_MAX &&
	    m.sys_ns <= INT64_MAX && m.user_ns + m.sys_ns <= m.cpu_ns + BYE_CPU_SLACK_NS) {
		c->exit_cpu = 1;
		c->exit_cpu_ns = (int64_t)m.cpu_ns;
		c->exit_user_ns = (int64_t)m.user_ns;
		c->exit_sys_ns = (int64_t)m.sys_ns;
	}
	/* its CPU time now, while it is still there: once it has
	 * exited its parent may reap it before its end is read */
	return client_sample_cpu(c, (int64_t)clock_ns(CLOCK_MONOTONIC));
}

int client_message(struct client *c, const void *msg, size_t len,
		   const int *fds, int nfds, int ctrunc)
{
	struct shm_msg_hdr h;
	int err;

	if (ctrunc) {
		err = reject(c, "message came with too many descriptors");
		goto out;
	}
	if (len < sizeof(h) || len > SHM_MSG_MAX) {
		err = reject(c, "message of %zu bytes", len);
		goto out;
	}
	memcpy(&h, msg, sizeof(h));
	if (h.magic != SHM_MAGIC || h.version != SHM_WIRE_VERSION) {
		err = reject(c, "wire magic %#x version %u, expected %#x version %u",
			     h.magic, h.version, SHM_MAGIC, SHM_WIRE_VERSION);
		goto out;
	}
	if (h.len != len) {
		err = reject(c, "message header says %u bytes, %zu arrived", h.len, len);
		goto out;
	}
	if (c->control) {
		err = reject(c, "a control client sent a second message (type %u)", h.type);
		goto out;
	}
	if (h.type == SHM_MSG_REQUEST && !c->proc_id && nfds == 0) {
		if (!c->has_peer) {
			err = reject(c, "REQUEST from a peer of unknown identity");
			goto out;
		}
		c->control = 1;
		err = ctl_request(c->co, c, msg, len);
		goto out;
	}
	if (h.type != SHM_MSG_HELLO && !c->proc_id) {
		err = reject(c, "first message is of type %u, not HELLO", h.type);
		goto out;
	}
	if (h.type == SHM_MSG_HELLO ? nfds != 1 : nfds != 0) {
		err = reject(c, "message of type %u came with %d descriptors", h.type, nfds);
		goto out;
	}
	switch (h.type) {
	case SHM_MSG_HELLO:
		c->in_hello = 1;
		err = hello(c, msg, len, fds[0]);
		c->in_hello = 0;
		break;
	case SHM_MSG_STRING:
		err = string_msg(c, msg, len);
		break;
	case SHM_MSG_THREAD:
		err = thread_msg(c, msg, len);
		break;
	case SHM_MSG_GPU_STATUS:
		err = gpu_status_msg(c, msg, len);
		break;
	case SHM_MSG_KICK:
		err = len == sizeof(h) ? client_drain(c) : reject(c, "KICK of %zu bytes", len);
		break;
	case SHM_MSG_BYE:
		err = bye_msg(c, msg, len);
		break;
	case SHM_MSG_SIGNAL:
		err = signal_msg(c, msg, len);
		break;
	default:
		err = reject(c, "unknown message type %u", h.type);
	}
out:
	/* The mapping outlives the memfd; no descriptor is kept. */
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	return err;
}

/* Receives one message into buf (SHM_MSG_MAX + 1 bytes) and handles it:
 * 0, 1 when none waited, -EPIPE, or client_message()'s error. */
static int recv_one(struct client *c, unsigned char *buf)
{
	union {
		struct cmsghdr align;
		char b[CMSG_SPACE(sizeof(int) * FDS_MAX)];
	} ctl;
	struct iovec iov = { buf, SHM_MSG_MAX + 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = ctl.b, .msg_controllen = sizeof(ctl.b) };
	int fds[FDS_MAX * 2], nfds = 0;
	ssize_t len;

	do
		len = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	while (len < 0 && errno == EINTR);
	if (len < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 1;
	if (len <= 0)
		return -EPIPE;
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		size_t n_in;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		n_in = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n_in && nfds < FDS_MAX * 2; i++)
			memcpy(&fds[nfds++], CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
	}
	if (mh.msg_flags & MSG_TRUNC) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		return reject(c, "message longer than %u bytes", SHM_MSG_MAX);
	}
	return client_message(c, buf, (size_t)len, fds, nfds, !!(mh.msg_flags & MSG_CTRUNC));
}

int client_recv(struct client *c)
{
	static unsigned char buf[SHM_MSG_MAX + 1] __attribute__((aligned(8)));

	for (int n = 0; n < RECV_BATCH; n++) {
		int err = recv_one(c, buf);

		if (err == 1)
			return 0;
		if (err)
			return err;
	}
	return 1;
}

/* Handles o's first message now if it is a HELLO waiting on its socket;
 * anything else waits for its turn.  What goes wrong is o's: it is
 * rejected, and ended by the daemon's timeout for connections without
 * HELLO. */
static int early_hello(struct client *o)
{
	struct shm_msg_hdr h;
	unsigned char *buf;
	ssize_t n;
	int err;

	if (o->fd < 0)
		return 0;
	n = recv(o->fd, &h, sizeof(h), MSG_PEEK | MSG_DONTWAIT);
	if (n != (ssize_t)sizeof(h) || h.magic != SHM_MAGIC || h.type != SHM_MSG_HELLO)
		return 0;
	/* Not client_recv()'s buffer: the HELLO being handled lies in it. */
	buf = malloc(SHM_MSG_MAX + 1);
	if (!buf)
		return -ENOMEM;
	err = recv_one(o, buf);
	free(buf);
	return err;
}

/* Now, in the client's record clock. */
static uint64_t record_now(const struct client *c)
{
	if (c->clock == SHM_CLOCK_TSC)
		return __builtin_ia32_rdtsc();
	return clock_ns(CLOCK_MONOTONIC);
}

/* A pass up to limit; invalid data rejects the client. */
static int drain(struct client *c, uint64_t limit)
{
	int err;

	if (!c->ring || !c->ingest)
		return 0;
	err = ring_drain(c->ring, limit, &c->sink);
	return err == -EBADMSG ? reject(c, "%s", ring_why(c->ring)) : err;
}

int client_drain(struct client *c)
{
	/* Every client's deadlines due (control_due()), then c's own block,
	 * where a range trigger may have begun a SHIMMER_DURATION. */
	control_due(c->co);
	if (c->ring && !c->ended)
		control_planned(c, ring_control_tick(c->ring, clock_ns(CLOCK_MONOTONIC),
						     record_now(c)));
	return drain(c, record_now(c));
}

int client_sample_cpu(struct client *c, int64_t now_ns)
{
	return c->proc_id && !c->ended ? cputime_sample(&c->cpu, c->store, c->proc_id, now_ns)
				       : 0;
}

int client_busy(const struct client *c)
{
	return c->ring && !c->ended && ring_busy(c->ring);
}

int client_flush_counts(struct client *c)
{
	int64_t now = (int64_t)clock_ns(CLOCK_MONOTONIC);
	int err;

	if (!c->ring || !c->ingest)
		return 0;
	err = ring_flush(c->ring, &c->sink);
	if (now - c->rate_ns >= 100000000) {
		double dt = (double)(now - c->rate_ns) / 1e9;

		c->events_per_s = (double)(c->events - c->events_then) / dt;
		c->dropped_per_s = (double)(c->dropped - c->dropped_then) / dt;
		c->events_then = c->events;
		c->dropped_then = c->dropped;
		c->rate_ns = now;
	}
	return err;
}

int client_end(struct client *c, enum client_end why, int64_t now_ns)
{
	static const char *const reasons[] = {
		[CLIENT_REJECTED] = "rejected", [CLIENT_SHUTDOWN] = "shutdown",
	};
	const char *reason;
	int err;

	if (c->ended)
		return 0;
	/* the last reading, while its /proc entries may still be there */
	err = client_sample_cpu(c, now_ns);
	c->ended = 1;
	if (!err)
		err = drain(c, UINT64_MAX);
	if (err == -EBADMSG) {
		why = CLIENT_REJECTED;
		err = 0;
	}
	if (!err)
		err = client_flush_counts(c);
	if (!err && c->ingest)
		err = ingest_end(c->ingest);
	/* What the process told us of its end wins over how its connection
	 * ended: a BYE already in hand at shutdown is an 'exit', not a
	 * 'shutdown'; a fatal SIGNAL not followed by a BYE (a handler may
	 * recover) is a 'signal'. */
	if (why == CLIENT_REJECTED || c->rejected)
		reason = reasons[CLIENT_REJECTED];
	else if (c->bye)
		reason = "exit";
	else if (c->fatal_signo)
		reason = "signal";
	else if (why == CLIENT_SHUTDOWN)
		reason = reasons[CLIENT_SHUTDOWN];
	else
		reason = c->exec_next ? "exec" : "disconnect";
	if (!err && c->proc_id) {
		int64_t end = c->bye ? ingest_ns(c->ingest, c->bye_ts) :
			      c->fatal_signo ? ingest_ns(c->ingest, c->fatal_ts) : now_ns;

		/* exec: by the new image's start (mark_exec()), never before
		 * our own (both are the process's word) */
		if (!strcmp(reason, "exec") && c->exec_ns < end)
			end = c->exec_ns > c->start_ns ? c->exec_ns : c->start_ns;
		err = store_process_end(c->store, c->proc_id, end, reason,
					strcmp(reason, "signal") ? 0 : (int)c->fatal_signo);
		if (!err && c->bye && c->exit_cpu)
			err = store_process_exit_cpu(c->store, c->proc_id, c->exit_cpu_ns,
						     c->exit_user_ns, c->exit_sys_ns);
	}
	if (!err && c->store)
		err = store_commit(c->store);
	if (c->ring)
		ring_ended(c->ring, c->resuming && !c->proc_id ? SHM_ENDED_REFUSED : SHM_ENDED_ROW);
	if (c->job)
		job_leave(c->job, now_ns);
	if (!err && c->proc_id)
		log_debug("pid %u (proc_id %lld) ended: %s", c->pid,
			  (long long)c->proc_id, reason);
	return err;
}

struct client *client_new(struct collector *co, int fd)
{
	struct client *c = calloc(1, sizeof(*c));
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (!c)
		return NULL;
	if (fd >= 0) {
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
			free(c);
			return NULL;
		}
		/* pid 0: the peer is in a pid namespace we cannot see into */
		if (cred.pid > 0)
			client_set_peer(c, (uint32_t)cred.pid, cred.uid);
	}
	c->co = co;
	c->fd = fd;
	cputime_init(&c->cpu, 0);
	c->seq = ++co->accepted;
	c->born_ns = (int64_t)clock_ns(CLOCK_MONOTONIC);
	c->next = co->clients;
	if (c->next)
		c->next->pprev = &c->next;
	c->pprev = &co->clients;
	co->clients = c;
	return c;
}

void client_set_peer(struct client *c, uint32_t pid, uint32_t uid)
{
	c->peer_pid = pid;
	c->peer_uid = uid;
	c->has_peer = 1;
}

int client_peer_uid(const struct client *c)
{
	return c->has_peer ? (int)c->peer_uid : -1;
}

int64_t client_born_ns(const struct client *c)
{
	return c->born_ns;
}

int client_fd(const struct client *c)
{
	return c->fd;
}

uint32_t client_pid(const struct client *c)
{
	return c->proc_id ? c->pid : 0;
}

uint32_t client_hello_flags(const struct client *c)
{
	return c->hello_flags;
}

int64_t client_proc_id(const struct client *c)
{
	return c->proc_id;
}

int client_ended(const struct client *c)
{
	return c->ended;
}

struct client *client_next(const struct client *c)
{
	return c->next;
}

void client_committed(void *co, struct store *s)
{
	/* Only regions whose records this collector ingests: a client still in
	 * or refused at HELLO has read nothing, and its marks would claim
	 * what a dead collector read as committed (a reconnect's loss). */
	for (struct client *c = ((struct collector *)co)->clients; c; c = c->next)
		if (c->store == s && c->ring && c->ingest && !c->in_hello && !c->rejected)
			ring_committed(c->ring);
}

void client_free(struct client *c)
{
	if (!c)
		return;
	*c->pprev = c->next;
	if (c->next)
		c->next->pprev = c->pprev;
	ring_free(c->ring);
	ingest_free(c->ingest);
	cputime_free(&c->cpu);
	if (c->fd >= 0)
		close(c->fd);
	free(c->host);
	free(c->exe);
	free(c->out);
	free(c);
}

/* ---- what control requests need (ctl.c) ---- */

struct store *client_store(const struct client *c)
{
	return c->store;
}

int client_is_control(const struct client *c)
{
	return c->control;
}

void client_info(const struct client *c, struct client_info *i)
{
	*i = (struct client_info){
		.pid = c->pid, .uid = c->uid, .rank = c->rank,
		.start_wall_ns = c->start_wall_ns,
		.state = c->ring ? ring_control_state(c->ring) : 0,
		.events = c->events, .dropped = c->dropped,
		.events_per_s = c->events_per_s, .dropped_per_s = c->dropped_per_s,
		.job = c->job ? job_key(c->job) : "-", .exe = c->exe ? c->exe : "",
	};
}

int client_traced(const struct client *c)
{
	return c->proc_id && !c->ended && c->ring;
}

uint32_t client_control(struct client *c, uint32_t op, uint64_t arg)
{
	uint64_t now = clock_ns(CLOCK_MONOTONIC);
	uint32_t id = ring_control(c->ring, op, arg, now, record_now(c));

	/* a window's end */
	if (op == SHM_REQ_WINDOW)
		control_planned(c, arg > UINT64_MAX - now ? UINT64_MAX : now + arg);
	return id;
}

/* Sends what is queued; 0 when all of it went, 1 when some waits (the
 * socket is full), -EPIPE when the reader is gone. */
int client_flush_out(struct client *c)
{
	while (c->out_off < c->out_len) {
		uint32_t n;
		ssize_t sent;

		memcpy(&n, c->out + c->out_off, sizeof(n));
		sent = send(c->fd, c->out + c->out_off + sizeof(n), n,
			    MSG_DONTWAIT | MSG_NOSIGNAL);
		if (sent < 0 && errno == EINTR)
			continue;
		if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 1;
		if (sent < 0)
			return -EPIPE;
		c->out_off += sizeof(n) + n;
	}
	c->out_off = c->out_len = 0;
	return 0;
}

int client_reply(struct client *c, const void *msg, size_t len)
{
	uint32_t n = (uint32_t)len;
	char *grown;

	if (c->fd < 0)
		return 0;
	if (c->out_len + sizeof(n) + len > OUT_MAX)
		return -EPIPE;
	grown = realloc(c->out, c->out_len + sizeof(n) + len);
	if (!grown)
		return -ENOMEM;
	c->out = grown;
	memcpy(c->out + c->out_len, &n, sizeof(n));
	memcpy(c->out + c->out_len + sizeof(n), msg, len);
	c->out_len += sizeof(n) + len;
	return 0;
}

int client_wants_write(const struct client *c)
{
	return c->out_off < c->out_len;
}
