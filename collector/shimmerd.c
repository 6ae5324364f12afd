/*
 * shimmerd: accepts traced processes on a SOCK_SEQPACKET socket and stores
 * their events.  One thread, one epoll loop over the listening socket, a
 * signalfd (SIGTERM/SIGINT), a 5 ms timerfd that drives the drain passes,
 * and the clients' sockets.  With --attach PID it also traces a running
 * process through eBPF (attach.h) until --for elapses, a signal comes or
 * the process exits, and then stops (the socket is optional then).  On
 * its socket it attaches to processes on request too (`shimmer ctl
 * attach`: session.h, whose descriptors are one epoll set in ours).  A
 * client that ends during a batch of epoll events is only freed after the
 * batch, so a later event in the same batch never points at freed memory.
 *
 * Where processes go is job.h's: each job's into its recording under the
 * state directory (the service), or all into one store (--db).  `shimmer
 * ls` and `shimmer ctl` are answered on the same socket (ctl.h).  Settings
 * come from /etc/shimmer/shimmerd.conf and the command line (options.h).
 *
 * As a systemd service (shimmerd.service, shimmerd.socket): the listening
 * socket may come from systemd (sd_listen_fds: socket activation), and the
 * daemon says READY=1 once it listens, STATUS= now and then, WATCHDOG=1
 * when a watchdog is set, and STOPPING=1 (sd_notify).
 *
 * Exit status: 0 after a signal-driven shutdown, 1 on a startup error or
 * when the store cannot be written (the store has logged why), 2 on bad
 * usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#ifdef HAVE_LIBSYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "attach.h"
#include "bpfsrc.h"
#include "client.h"
#include "clock_ns.h"
#include "cputime.h"
#include "ctl.h"
#include "job.h"
#include "log.h"
#include "options.h"
#include "session.h"
#include "version.h"

#define TICK_NS 5000000L
#define COMMIT_NS 100000000LL
#define COUNTS_NS 1000000000LL
#define ATTACH_TICK_NS 100000000LL
#define OFFCPU_MAX 64 /* preloaded processes traced off the CPU at once */

/* A preloaded process that asked for off-CPU time (SHIMMER_OFFCPU=1):
 * a = NULL when it could not be given (the row says why). */
struct offcpu_session {
	struct client *c;
	struct attach *a;
	struct offcpu_session *next;
};
#define HELLO_TIMEOUT_NS 2000000000LL  /* a connection must say HELLO by then */
#define ACCEPT_PAUSE_NS 100000000LL    /* out of descriptors: stop accepting this long */
#define FDS_RESERVED 32                /* descriptors kept for the store, the loop, logs */
#define STATUS_NS 10000000000LL        /* sd_notify STATUS= at most this often */

/*
 * Descriptors are the resource a local user can exhaust: each connection
 * holds one.  So a connection that says no HELLO within HELLO_TIMEOUT_NS
 * is closed, one user holds at most per_user of them (a quarter of what
 * the descriptor limit leaves after FDS_RESERVED; more are accepted and
 * closed at once), and when accept4() still finds no descriptor (EMFILE,
 * ENFILE) the listening socket leaves the epoll set for ACCEPT_PAUSE_NS,
 * instead of waking the loop at once again (it stays readable) and
 * spinning.  Refusals are counted and logged once a second.
 */
struct daemon {
	struct collector co;
	const struct options *o;
	const char *sock_path;   /* NULL: no socket (--attach without --socket) */
	int listen_fd, sig_fd, timer_fd, ep;
	int activated;           /* the listening socket is systemd's (not ours to unlink) */
	int64_t last_status, last_watchdog, watchdog_ns;
	int parent_fd;           /* --parent-fd: stop at its EOF; -1 when none */
	int64_t last_commit, last_counts, last_refusal_log, last_attach_tick, last_cpu;
	unsigned per_user;       /* connections one uid may hold */
	int accept_paused;       /* the listening socket is out of the epoll set */
	int64_t accept_resume;   /* when to put it back */
	uint64_t refused_user, refused_fds, timed_out; /* since the last log line */
	struct attach_conf attach_conf; /* --attach: pid > 0 */
	struct attach *attach;
	struct offcpu_session *offcpu;
	unsigned noffcpu;
};

/* epoll tags for the daemon's own descriptors; anything else is a client */
static char tag_listen, tag_signal, tag_timer, tag_parent, tag_attach, tag_attach_exit,
	tag_sessions;

static int64_t now_ns(void)
{
	return (int64_t)clock_ns(CLOCK_MONOTONIC);
}

/* sd_notify(), when systemd asked for it (NOTIFY_SOCKET). */
__attribute__((format(printf, 1, 2)))
static void notify(const char *fmt, ...)
{
#ifdef HAVE_LIBSYSTEMD
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	sd_notify(0, msg);
#else
	(void)fmt;
#endif
}

/* The listening socket systemd handed over (socket activation): one
 * SOCK_SEQPACKET Unix socket, listening.  -ENOENT when none came. */
static int activated_socket(struct daemon *d)
{
#ifdef HAVE_LIBSYSTEMD
	int n = sd_listen_fds(1), fd = SD_LISTEN_FDS_START;

	if (n <= 0)
		return n < 0 ? n : -ENOENT;
	if (n > 1 || sd_is_socket_unix(fd, SOCK_SEQPACKET, 1, NULL, 0) <= 0) {
		log_error("systemd passed %d descriptors: expected one listening "
			  "SOCK_SEQPACKET Unix socket (ListenSequentialPacket=)", n);
		return -EINVAL;
	}
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
		return -errno;
	d->activated = 1;
	return fd;
#else
	(void)d;
	return -ENOENT;
#endif
}

static int count_traced(const struct daemon *d)
{
	int n = 0;

	for (struct client *c = d->co.clients; c; c = client_next(c))
		n += client_traced(c);
	return n;
}

static int mkdir_parents(const char *path)
{
	char dir[PATH_MAX];
	size_t len = strlen(path);

	if (len >= sizeof(dir))
		return -ENAMETOOLONG;
	memcpy(dir, path, len + 1);
	for (char *p = dir + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(dir, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return 0;
}

static int listen_on(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat sb;
	int fd = -1, err;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		log_error("socket path %s is longer than %zu bytes", path,
			  sizeof(sa.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	strcpy(sa.sun_path, path);
	err = mkdir_parents(path);
	if (err) {
		log_error("cannot create the directory of %s: %s", path, strerror(-err));
		return err;
	}
	if (lstat(path, &sb) == 0) {
		if (!S_ISSOCK(sb.st_mode)) {
			log_error("%s exists and is not a socket", path);
			return -EEXIST;
		}
		fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ||
		    errno != ECONNREFUSED) {
			log_error("%s is in use: another shimmerd answers on it", path);
			err = -EADDRINUSE;
			goto out;
		}
		close(fd);
		log_info("removing stale socket %s", path);
		if (unlink(path) < 0 && errno != ENOENT) {
			err = -errno;
			log_error("cannot remove stale socket %s: %s", path, strerror(errno));
			return err;
		}
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	/* Any local process may connect (to reach it, the socket must be
	 * writable): who it is comes from the kernel, not from the mode.  A
	 * private collector's socket lies in a private directory. */
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    chmod(path, 0666) < 0 || listen(fd, SOMAXCONN) < 0) {
		err = -errno;
		log_error("cannot listen on %s: %s", path, strerror(errno));
		goto out;
	}
	return fd;
out:
	if (fd >= 0)
		close(fd);
	return err;
}

static int watch(struct daemon *d, int fd, void *tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = tag };

	return epoll_ctl(d->ep, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

/* Off-CPU time for a client that asked for it in its HELLO, once: an
 * eBPF source into its row, or the row says why not (no privilege, too
 * many at once). */
static int offcpu_check(struct daemon *d, struct client *c)
{
	struct offcpu_session *o;
	char why[512];

	if (!client_proc_id(c) || !(client_hello_flags(c) & SHM_HELLO_OFFCPU))
		return 0;
	for (o = d->offcpu; o; o = o->next)
		if (o->c == c)
			return 0;
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->c = c;
	o->next = d->offcpu;
	d->offcpu = o;
	if (d->noffcpu >= OFFCPU_MAX)
		snprintf(why, sizeof(why), "the collector traces off-CPU time for at most %d "
			 "processes at once", OFFCPU_MAX);
	else
		o->a = attach_offcpu(&d->co, client_store(c), client_proc_id(c),
				     (pid_t)client_pid(c), why, sizeof(why));
	if (o->a) {
		d->noffcpu++;
		return 0;
	}
	log_warn("pid %u asked for off-CPU time: %s", client_pid(c), why);
	return store_process_offcpu(client_store(c), client_proc_id(c), 0, why);
}

/* Ends a client's off-CPU session, if it has one: what is left is stored
 * before the client's last batch commits. */
static int offcpu_end(struct daemon *d, struct client *c)
{
	struct offcpu_session **pp, *o;
	int err = 0;

	for (pp = &d->offcpu; (o = *pp); pp = &o->next) {
		if (o->c != c)
			continue;
		*pp = o->next;
		if (o->a) {
			err = attach_end(o->a, ATTACH_DETACH, now_ns());
			attach_free(o->a);
			d->noffcpu--;
		}
		free(o);
		break;
	}
	return err;
}

/* Watches c for room to write while replies wait to be sent. */
static int sync_out(struct daemon *d, struct client *c)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.ptr = c };

	if (client_ended(c) || client_fd(c) < 0)
		return 0;
	if (client_wants_write(c))
		ev.events |= EPOLLOUT;
	return epoll_ctl(d->ep, EPOLL_CTL_MOD, client_fd(c), &ev) < 0 && errno != ENOENT ? -errno
											 : 0;
}

static int end_client(struct daemon *d, struct client *c, enum client_end why)
{
	int err;

	epoll_ctl(d->ep, EPOLL_CTL_DEL, client_fd(c), NULL);
	err = offcpu_end(d, c);
	return err ? err : client_end(c, why, now_ns());
}

/* Frees the clients that ended during the last batch of events. */
static void reap(struct daemon *d)
{
	struct client *c, *next;

	for (c = d->co.clients; c; c = next) {
		next = client_next(c);
		if (client_ended(c))
			client_free(c);
	}
}

/* Out of descriptors: stop watching the listening socket for a while. */
static int pause_accepting(struct daemon *d)
{
	d->refused_fds++;
	if (d->accept_paused)
		return 0;
	d->accept_paused = 1;
	d->accept_resume = now_ns() + ACCEPT_PAUSE_NS;
	return epoll_ctl(d->ep, EPOLL_CTL_DEL, d->listen_fd, NULL) < 0 ? -errno : 0;
}

/* Live connections of uid. */
static unsigned connections_of(struct daemon *d, int uid)
{
	unsigned n = 0;

	for (struct client *c = d->co.clients; c; c = client_next(c))
		n += !client_ended(c) && client_peer_uid(c) == uid;
	return n;
}

static int accept_all(struct daemon *d)
{
	for (;;) {
		int fd = accept4(d->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP };
		struct client *c;

		if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			       errno == ENOMEM))
			return pause_accepting(d);
		if (fd < 0)
			return errno == EAGAIN || errno == EINTR || errno == ECONNABORTED ? 0 : -errno;
		c = client_new(&d->co, fd);
		if (!c) {
			close(fd);
			if (errno == ENOMEM)
				return -ENOMEM;
			continue; /* the peer left before we asked who it was */
		}
		if (connections_of(d, client_peer_uid(c)) > d->per_user) {
			d->refused_user++;
			client_free(c);
			continue;
		}
		ev.data.ptr = c;
		if (epoll_ctl(d->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
			client_free(c);
			return -errno;
		}
		log_debug("client connected (fd %d)", fd);
	}
}

/* Reads what the client sent; ends it when it closed or misbehaved, or,
 * when the daemon is stopping, in any case. */
static int on_client(struct daemon *d, struct client *c, int stopping)
{
	int err = client_recv(c);

	/* Stopping, everything it sent still counts (a BYE behind many
	 * messages makes an 'exit'), within reason. */
	for (int n = 0; stopping && err == 1 && n < 10000; n++)
		err = client_recv(c);
	if (err == 1)
		err = 0;

	if (err == -EPIPE)
		return end_client(d, c, CLIENT_CLOSED);
	if (err == -EBADMSG)
		return end_client(d, c, CLIENT_REJECTED);
	if (!err && stopping)
		return end_client(d, c, CLIENT_SHUTDOWN);
	if (!err && client_is_control(c))
		return client_flush_out(c) < 0 ? end_client(d, c, CLIENT_CLOSED) : sync_out(d, c);
	if (!err)
		err = offcpu_check(d, c);
	return err;
}

/* The 5 ms pass: re-anchor the TSC, drain every region, store counters
 * about once a second, commit at least every 100 ms. */
static int tick(struct daemon *d)
{
	uint64_t tsc, ns;
	int64_t now;
	int err = 0;

	clock_sample(&tsc, &ns);
	clock_update(&d->co.clock, tsc, ns);
	for (struct client *c = d->co.clients; c && !err; c = client_next(c)) {
		if (client_ended(c))
			continue;
		err = client_drain(c);
		if (err == -EBADMSG)
			err = end_client(d, c, CLIENT_REJECTED);
	}
	now = now_ns();
	if (!err && now - d->last_cpu >= CPUTIME_PERIOD_NS) {
		d->last_cpu = now;
		for (struct client *c = d->co.clients; c && !err; c = client_next(c))
			err = client_sample_cpu(c, now);
	}
	for (struct offcpu_session *o = d->offcpu; o && !err; o = o->next)
		if (o->a)
			err = attach_poll(o->a);
	/* eBPF sources: counts, new libraries, the window (attach_tick()). */
	if (!err && now - d->last_attach_tick >= ATTACH_TICK_NS) {
		d->last_attach_tick = now;
		for (struct offcpu_session *o = d->offcpu; o && !err; o = o->next) {
			int r = o->a ? attach_tick(o->a, now) : 0;

			err = r < 0 ? r : 0; /* no window: never 1 */
		}
		if (!err)
			err = session_tick(&d->co, now);
		if (!err && d->attach && !attach_ended(d->attach)) {
			err = attach_tick(d->attach, now);
			if (err == 1) {
				log_info("pid %d: the window is over; detaching",
					 (int)attach_pid(d->attach));
				err = attach_end(d->attach, ATTACH_DETACH, now);
			}
		}
	}
	if (!err && d->accept_paused && now >= d->accept_resume) {
		d->accept_paused = 0;
		err = watch(d, d->listen_fd, &tag_listen);
	}
	/* Connections that never said HELLO (or REQUEST) give their
	 * descriptor back.  A HELLO may be waiting behind a long pass over
	 * busy regions (32 lossy processes of 8 threads: seconds): read it
	 * first. */
	for (struct client *c = d->co.clients; c && !err; c = client_next(c))
		if (!client_ended(c) && !client_proc_id(c) && !client_is_control(c) &&
		    now - client_born_ns(c) > HELLO_TIMEOUT_NS) {
			err = on_client(d, c, 0);
			if (err || client_ended(c) || client_proc_id(c))
				continue;
			d->timed_out++;
			err = end_client(d, c, CLIENT_CLOSED);
		}
	if (now - d->last_refusal_log >= COUNTS_NS &&
	    (d->refused_user || d->refused_fds || d->timed_out)) {
		log_warn("in the last second: %llu connections refused (a user over %u "
			 "connections), %llu accepts failed for lack of descriptors, %llu "
			 "closed without HELLO after %lld s",
			 (unsigned long long)d->refused_user, d->per_user,
			 (unsigned long long)d->refused_fds, (unsigned long long)d->timed_out,
			 HELLO_TIMEOUT_NS / 1000000000LL);
		d->refused_user = d->refused_fds = d->timed_out = 0;
		d->last_refusal_log = now;
	}
	if (!err && now - d->last_counts >= COUNTS_NS) {
		d->last_counts = now;
		for (struct client *c = d->co.clients; c && !err; c = client_next(c))
			if (!client_ended(c))
				err = client_flush_counts(c);
	}
	if (!err && now - d->last_commit >= COMMIT_NS) {
		d->last_commit = now;
		err = jobs_commit(d->co.jobs);
	}
	for (struct client *c = d->co.clients; c && !err; c = client_next(c))
		if (client_is_control(c))
			err = sync_out(d, c);
	if (!err)
		err = jobs_tick(d->co.jobs, now);
	if (d->watchdog_ns && now - d->last_watchdog >= d->watchdog_ns / 2) {
		d->last_watchdog = now;
		notify("WATCHDOG=1");
	}
	if (now - d->last_status >= STATUS_NS) {
		d->last_status = now;
		notify("STATUS=%d traced processes, %u live recordings", count_traced(d),
		       jobs_live(d->co.jobs));
	}
	return err;
}

/* SIGTERM/SIGINT: read what the clients still sent, drain them a last
 * time and mark the live ones 'shutdown'. */
static int shutdown_clients(struct daemon *d)
{
	int err = 0;

	if (d->attach && !attach_ended(d->attach))
		err = attach_end(d->attach, ATTACH_DETACH, now_ns());
	if (!err)
		err = session_end_all(&d->co, now_ns());
	for (struct client *c = d->co.clients; c && !err; c = client_next(c))
		if (!client_ended(c))
			err = on_client(d, c, 1);
	return err;
}

/* The attached process exited (its pidfd is readable): what is still on
 * the ring buffer is stored, and the row ends as 'exit'. */
static int on_attach_exit(struct daemon *d)
{
	if (!d->attach || attach_ended(d->attach))
		return 0;
	log_info("pid %d exited", (int)attach_pid(d->attach));
	epoll_ctl(d->ep, EPOLL_CTL_DEL, attach_pidfd(d->attach), NULL);
	return attach_end(d->attach, ATTACH_EXITED, now_ns());
}

/*
 * Drains again, at once, each client whose last pass found a ring a
 * quarter full or more (client_busy): a program that allocates as fast as
 * the collector stores fills a ring between two ticks, and a lossless one
 * would then wait for room, kick, and wait again while its ring is
 * drained, taking turns with the collector instead of running beside it
 * (twice the wall time for heap_random's 10 M events).  Each such pass
 * has a quarter ring of records to store, so this is work, not spinning;
 * it stops with the first pass that finds less.  1 if some client was
 * busy, 0 if none, or an error.
 */
static int drain_busy(struct daemon *d)
{
	int any = 0, err = 0;

	for (struct client *c = d->co.clients; c && !err; c = client_next(c)) {
		if (client_ended(c) || !client_busy(c))
			continue;
		any = 1;
		err = client_drain(c);
		if (err == -EBADMSG)
			err = end_client(d, c, CLIENT_REJECTED);
	}
	return err ? err : any;
}

/* A traced process's CPU time is read once more as its connection ends
 * (client_end()), while /proc still has it: a process that exits closes its
 * socket before its parent can reap it, not long before.  So that reading
 * is taken for every client that hung up in this batch of events, before
 * any of them is ended (ending one drains and stores what it left, during
 * which another's parent reaps it: of two DataLoader-like workers ending
 * together, one lost its last 50-60 ms of CPU time in every run). */
static void hung_up_cpu(struct daemon *d, const struct epoll_event *evs, int n)
{
	int64_t now = 0;

	for (int i = 0; i < n; i++) {
		void *tag = evs[i].data.ptr;

		if (tag == &tag_listen || tag == &tag_signal || tag == &tag_timer ||
		    tag == &tag_parent || tag == &tag_attach || tag == &tag_attach_exit ||
		    tag == &tag_sessions || !(evs[i].events & (EPOLLHUP | EPOLLRDHUP)) ||
		    client_ended(tag) || client_is_control(tag))
			continue;
		if (!now)
			now = now_ns();
		/* a store error shows again, and is handled, at the end */
		(void)client_sample_cpu(tag, now);
	}
	(void)d;
}

static int loop(struct daemon *d)
{
	struct epoll_event evs[64];
	int stop = 0, err = 0, busy = 0;

	while (!stop && !err) {
		/* busy: look at the other descriptors without waiting, then
		 * drain the busy rings again */
		int n = epoll_wait(d->ep, evs, 64, busy ? 0 : -1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		hung_up_cpu(d, evs, n);
		for (int i = 0; i < n && !err; i++) {
			void *tag = evs[i].data.ptr;
			uint64_t ticks;
			struct signalfd_siginfo si;

			if (tag == &tag_signal) {
				if (read(d->sig_fd, &si, sizeof(si)) == sizeof(si))
					log_info("signal %u: shutting down", si.ssi_signo);
				stop = 1;
			} else if (tag == &tag_parent) {
				/* EOF (or anything) on --parent-fd: the parent is
				 * done, or gone (killed): so are we. */
				log_debug("the parent closed --parent-fd: shutting down");
				stop = 1;
			} else if (tag == &tag_timer) {
				if (read(d->timer_fd, &ticks, sizeof(ticks)) == sizeof(ticks))
					err = tick(d);
			} else if (tag == &tag_listen) {
				err = accept_all(d);
			} else if (tag == &tag_attach) {
				if (!attach_ended(d->attach))
					err = attach_poll(d->attach);
			} else if (tag == &tag_attach_exit) {
				err = on_attach_exit(d);
			} else if (tag == &tag_sessions) {
				err = session_poll(&d->co, now_ns());
			} else if (client_ended(tag)) {
				continue;
			} else if ((evs[i].events & EPOLLOUT) && client_is_control(tag) &&
				   !(evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP))) {
				err = client_flush_out(tag) < 0 ? end_client(d, tag, CLIENT_CLOSED)
								: sync_out(d, tag);
			} else {
				err = on_client(d, tag, 0);
			}
		}
		if (!stop && !err) {
			busy = drain_busy(d);
			if (busy < 0)
				err = busy;
		}
		reap(d);
		/* --attach: the daemon lives as long as its attach. */
		if (d->attach && attach_ended(d->attach))
			stop = 1;
	}
	notify("STOPPING=1");
	return err ? err : shutdown_clients(d);
}

/* --attach: traces the process from now on, or says in one line why not. */
static int start_attach(struct daemon *d)
{
	char why[512];
	int err;

	d->attach = attach_start(&d->co, &d->attach_conf, why, sizeof(why));
	if (!d->attach) {
		log_error("cannot attach to pid %d: %s", (int)d->attach_conf.pid, why);
		return -errno;
	}
	err = watch(d, attach_fd(d->attach), &tag_attach);
	if (!err)
		err = watch(d, attach_pidfd(d->attach), &tag_attach_exit);
	if (!err)
		log_info("attached to pid %d: %s", (int)d->attach_conf.pid,
			 attach_describe(d->attach));
	return err;
}

static int setup(struct daemon *d)
{
	struct itimerspec its = { { 0, TICK_NS }, { 0, TICK_NS } };
	const struct options *o = d->o;
	struct rlimit nofile;
	sigset_t sigs;
	int err;

	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	signal(SIGPIPE, SIG_IGN);
	if (sigprocmask(SIG_BLOCK, &sigs, NULL) < 0)
		return -errno;
	d->sig_fd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
	d->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	d->ep = epoll_create1(EPOLL_CLOEXEC);
	if (d->sig_fd < 0 || d->timer_fd < 0 || d->ep < 0 ||
	    timerfd_settime(d->timer_fd, 0, &its, NULL) < 0) {
		err = -errno;
		log_error("cannot set up the event loop: %s", strerror(errno));
		return err;
	}
	/* As many descriptors as we may have; a quarter of them per user. */
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
		nofile.rlim_cur = nofile.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nofile);
		getrlimit(RLIMIT_NOFILE, &nofile);
		d->per_user = nofile.rlim_cur > 4 * FDS_RESERVED ?
			      (unsigned)((nofile.rlim_cur - FDS_RESERVED) / 4) : FDS_RESERVED;
		if (nofile.rlim_cur > 1u << 20)
			d->per_user = (1u << 20) / 4;
	}
	err = clock_calibrate(&d->co.clock);
	if (err) {
		log_error("cannot calibrate the TSC against CLOCK_MONOTONIC");
		return err;
	}
	/* The socket first: a second daemon must not touch the store. */
	if (d->sock_path) {
		d->listen_fd = activated_socket(d);
		if (d->listen_fd == -ENOENT)
			d->listen_fd = listen_on(d->sock_path);
		if (d->listen_fd < 0)
			return d->listen_fd;
	}
	if (o->db) {
		err = mkdir_parents(o->db);
		if (err) {
			log_error("cannot create the directory of %s: %s", o->db, strerror(-err));
			return err;
		}
	}
	/* Each commit tells the regions what is stored (ring_committed()). */
	store_on_commit(client_committed, &d->co);
	d->co.jobs = jobs_open(&(struct jobs_conf){
		.db = o->db, .state_dir = o->state_dir, .linger_ns = o->linger_ns,
		.max_age_ns = o->max_age_ns, .max_bytes = o->max_bytes,
	});
	if (!d->co.jobs)
		return -errno;
	/* --attach writes the one store (attach.h). */
	d->co.store = jobs_single_store(d->co.jobs);
	/* `shimmer ctl attach`: the sessions' descriptors are one of ours. */
	if (d->listen_fd >= 0) {
		err = session_open(&d->co);
		if (!err)
			err = watch(d, session_fd(&d->co), &tag_sessions);
	}
	if (!err && d->listen_fd >= 0)
		err = watch(d, d->listen_fd, &tag_listen);
	if (!err && d->parent_fd >= 0)
		err = watch(d, d->parent_fd, &tag_parent);
	if (!err)
		err = watch(d, d->sig_fd, &tag_signal);
	if (!err)
		err = watch(d, d->timer_fd, &tag_timer);
#ifdef HAVE_LIBSYSTEMD
	{
		uint64_t usec = 0;

		if (sd_watchdog_enabled(0, &usec) > 0)
			d->watchdog_ns = (int64_t)usec * 1000;
	}
#endif
	d->last_commit = d->last_counts = d->last_attach_tick = d->last_status = now_ns();
	if (!err && d->attach_conf.pid > 0)
		err = start_attach(d);
	return err;
}

/* Forks; the parent waits until the child is listening (or has failed) so
 * that its exit status and stderr tell the caller how startup went.  The
 * store is opened after the fork: SQLite's locks do not survive one. */
static int daemonize(int *ready_pipe)
{
	int p[2], fd;
	char b;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		close(p[1]);
		_exit(read(p[0], &b, 1) == 1 ? 0 : 1);
	}
	close(p[0]);
	setsid();
	if (chdir("/") < 0)
		return -errno;
	fd = open("/dev/null", O_RDWR);
	if (fd >= 0) {
		dup2(fd, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		if (fd > STDERR_FILENO)
			close(fd);
	}
	*ready_pipe = p[1];
	return 0;
}

/* One byte; with --attach, what was attached as a line instead (shimmer
 * attach shows it). */
static void say_ready(int fd, const struct daemon *d)
{
	char line[600];
	size_t len = 1;

	if (fd < 0)
		return;
	line[0] = '\0';
	if (d->attach)
		len = (size_t)snprintf(line, sizeof(line), "%s\n", attach_describe(d->attach));
	if (len >= sizeof(line))
		len = sizeof(line) - 1;
	if (write(fd, line, len) != (ssize_t)len)
		log_warn("cannot signal readiness on fd %d: %s", fd, strerror(errno));
	close(fd);
}

/* --check-attach: whether this daemon can attach here, in one line on
 * stdout; exit status 0 when it can, 1 when not. */
static int check_attach(void)
{
	char why[512];

	if (bpfsrc_check(why, sizeof(why)) == 0 && access("/sys/kernel/btf/vmlinux", R_OK) != 0)
		snprintf(why, sizeof(why), "the kernel exposes no BTF (/sys/kernel/btf/vmlinux: %s)",
			 strerror(errno));
	else if (bpfsrc_check(why, sizeof(why)) == 0) {
		printf("attach: available\n");
		return 0;
	}
	printf("attach: unavailable: %s\n", why);
	return 1;
}

/* --probes: which of the eBPF source's sets to attach (bpfsrc.h). */
static int parse_probes(const char *list, unsigned *what)
{
	static const struct {
		const char *name;
		unsigned bit;
	} sets[] = { { "cuda", BPFSRC_CUDA }, { "heap", BPFSRC_HEAP }, { "offcpu", BPFSRC_OFFCPU } };
	char *copy = strdup(list), *tok, *save = NULL;

	*what = 0;
	for (tok = copy ? strtok_r(copy, ",", &save) : NULL; tok; tok = strtok_r(NULL, ",", &save)) {
		size_t i;

		for (i = 0; i < sizeof(sets) / sizeof(sets[0]); i++)
			if (!strcmp(tok, sets[i].name))
				break;
		if (i == sizeof(sets) / sizeof(sets[0])) {
			free(copy);
			return -EINVAL;
		}
		*what |= sets[i].bit;
	}
	free(copy);
	return *what ? 0 : -EINVAL;
}

int main(int argc, char **argv)
{
	struct daemon d = { .listen_fd = -1, .sig_fd = -1, .timer_fd = -1, .ep = -1,
			    .parent_fd = -1 };
	struct options o;
	int ready_pipe = -1, err;

	err = options_parse(&o, argc, argv);
	if (err) {
		options_free(&o);
		return err == 1 ? 0 : 2;
	}
	log_level = o.log_level;
	if (o.check) {
		options_print(&o, stdout);
		options_free(&o);
		return 0;
	}
	if (o.check_attach) {
		options_free(&o);
		return check_attach();
	}
	if (o.attach_pid > 0) {
		/* A daemon of its own for one process: one store, and a socket
		 * only when asked for one (never the service's). */
		if (!o.db) {
			log_error("--attach needs --db");
			options_free(&o);
			return 2;
		}
		d.attach_conf.pid = o.attach_pid;
		d.attach_conf.window_ns = o.attach_for_ns;
		d.attach_conf.sample_bytes = o.attach_sample_bytes;
		if (o.attach_probes && parse_probes(o.attach_probes, &d.attach_conf.what)) {
			log_error("--probes %s: a list of cuda, heap and offcpu, comma-separated",
				  o.attach_probes);
			options_free(&o);
			return 2;
		}
	}
	/* Stores are made private or handed over explicitly (job.h); nothing
	 * else the daemon makes is anyone else's. */
	umask(077);
	d.o = &o;
	d.sock_path = o.attach_pid > 0 && !o.socket_flag ? NULL : o.socket;
	d.parent_fd = o.parent_fd;
	err = o.foreground ? 0 : daemonize(&ready_pipe);
	if (!err)
		err = setup(&d);
	if (!err) {
		if (d.sock_path && o.db)
			log_info("listening on %s%s, storing into %s", d.sock_path,
				 d.activated ? " (socket activation)" : "", o.db);
		else if (d.sock_path)
			log_info("listening on %s%s, recordings in %s/recordings", d.sock_path,
				 d.activated ? " (socket activation)" : "", o.state_dir);
		say_ready(o.ready_fd, &d);
		say_ready(ready_pipe, &d);
		notify("READY=1\nSTATUS=listening on %s", d.sock_path ? d.sock_path : "no socket");
		err = loop(&d);
		if (err == -ENOMEM)
			log_error("out of memory");
	}
	if (d.listen_fd >= 0) {
		close(d.listen_fd);
		if (!d.activated)
			unlink(d.sock_path);
	}
	attach_free(d.attach);
	while (d.offcpu) {
		struct offcpu_session *s = d.offcpu;

		d.offcpu = s->next;
		attach_free(s->a);
		free(s);
	}
	session_free(&d.co);
	while (d.co.clients)
		client_free(d.co.clients);
	if (jobs_close(d.co.jobs) && !err)
		err = -EIO;
	if (d.ep >= 0)
		close(d.ep);
	if (d.sig_fd >= 0)
		close(d.sig_fd);
	if (d.timer_fd >= 0)
		close(d.timer_fd);
	options_free(&o);
	return err ? 1 : 0;
}
