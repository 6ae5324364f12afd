/*
 * wl_hard: workloads that try to break the shim from inside the traced
 * program (issue 13): its descriptors taken away, signal handlers that
 * allocate, threads that come and go, addresses reused across threads,
 * libraries opened with RTLD_DEEPBIND, fatal signals, no descriptors left.
 * Each says on stdout what it did (its own exact counts), so a test can
 * hold the store against them.  Counted work runs on threads of its own
 * ("workers"): their exact counters hold nothing but the workload's calls.
 * No stdio: its buffers would be heap calls of their own.
 *
 *   wl_hard closefds         close every descriptor above 2, then talk
 *                            on a socketpair: "got N" (bytes received, of 5)
 *   wl_hard replacefds       the same, every number from 3 to 1023 made a
 *                            copy of the socketpair's sending end
 *   wl_hard lowfds           dup2 /dev/null onto 3..9, then work
 *   wl_hard sigmalloc N US   a worker: N malloc+free pairs (64..568 bytes)
 *                            while a timer signals it every US microseconds;
 *                            its handler makes a 40-byte pair: "tid T mallocs
 *                            M frees F ticks K"
 *   wl_hard trap WHAT N [LIB]  a worker whose system calls that only the
 *                            shim makes in its other work are trapped, its
 *                            handler making a pair there (see mode_trap())
 *   wl_hard under WHAT N [LIB]  with libunder.so preloaded behind the
 *                            shim: a worker signalled from inside every
 *                            real allocator call, the shim's own among
 *                            them (see mode_under())
 *   wl_hard churn TOTAL ALIVE N   TOTAL workers over the run, at most ALIVE
 *                            at once, N malloc(40)+free pairs each, each
 *                            worker's last block kept until it ends
 *   wl_hard reuse THREADS N SIZE  workers: N x (malloc(SIZE), free) in one
 *                            arena, so that freed addresses come back at
 *                            once to other threads: "tid T pairs N" each
 *   wl_hard reallocarray N   a worker: N x (reallocarray(NULL, 3, 100),
 *                            reallocarray(p, 5, 100), free), then one
 *                            that overflows, a malloc(SIZE_MAX) and an
 *                            overflowing calloc: "tid T refused 1"
 *   wl_hard order N          with liborder.so preloaded behind the shim
 *                            (order_lib.c): two workers, a and b, pass one
 *                            address of ORDER_SIZE bytes back and forth, N
 *                            rounds of (a's free held open in the real free
 *                            while b allocates the address and frees it;
 *                            b's malloc held open in the real malloc until
 *                            a frees the address, then b frees it), then
 *                            two slow rounds (order_a()), b keeping the
 *                            last block: "pid P a TID b TID rounds N"
 *   wl_hard deepbind LIB N   dlopen(LIB, RTLD_NOW | RTLD_DEEPBIND), then its
 *                            hard_lib_allocs(N): N malloc(4321), N - 3 freed
 *   wl_hard fatal KIND       segv | abort | fpe | ill | bus | kill | caught
 *                            (kill: SIGBUS sent to itself with kill(2);
 *                            caught: its own SIGSEGV handler recovers)
 *   wl_hard fdfill           open descriptors until EMFILE, fork a child
 *                            that allocates, start a thread: "ok"
 *   wl_hard load THREADS N [keep [NAP]]  workers, all live at once (one 16-byte
 *                            pair each, then a barrier): N malloc+free pairs
 *                            of 24..536 bytes (keep: N mallocs, never freed;
 *                            then NAP: a pause of NAP us every 100 calls)
 *   wl_hard exits            fork a child that allocates and _exit(0)s;
 *                            wait for it: "child P"; then a vfork child
 *                            that _exit(0)s, a pause, malloc(888)
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "order_lib.h"

static void out(const char *s)
{
	size_t n = strlen(s);

	while (n) {
		ssize_t w = write(1, s, n);

		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

/* "key V " appended to buf (no stdio). */
static char *put(char *p, const char *key, uint64_t v)
{
	char tmp[24];
	int n = 0;

	while (*key)
		*p++ = *key++;
	*p++ = ' ';
	do
		tmp[n++] = (char)('0' + v % 10);
	while ((v /= 10) && n < 24);
	while (n)
		*p++ = tmp[--n];
	*p++ = ' ';
	return p;
}

static void out_line(char *buf, char *end)
{
	end[-1] = '\n';
	*end = 0;
	out(buf);
}

/* malloc(n) and free, which the compiler may not fold away. */
static void pair(size_t n)
{
	void *volatile p = malloc(n);

	free(p);
}

static void die(const char *why)
{
	out(why);
	out("\n");
	_exit(1);
}

/* ---- descriptors ---- */

static void *alloc_some(void *arg)
{
	(void)arg;
	for (int i = 0; i < 100; i++)
		pair(100 + (size_t)i);
	return 0;
}

/* Traced activity that makes the shim send: a new thread (THREAD), a
 * library loaded (its module's name), plenty of heap calls. */
static void activity(void)
{
	pthread_t th;
	void *h;

	alloc_some(0);
	if (pthread_create(&th, 0, alloc_some, 0) == 0)
		pthread_join(th, 0);
	h = dlopen("libm.so.6", RTLD_NOW);
	if (h)
		dlclose(h);
	alloc_some(0);
}

/* Puts copies of /dev/null at 3..9, as daemons set up their descriptors
 * (dup2 onto fixed numbers), then works: "low fds ok". */
static int mode_lowfds(void)
{
	int fd = open("/dev/null", O_RDWR);

	if (fd < 0)
		die("open failed");
	for (int i = 3; i < 10; i++)
		if (i != fd && dup2(fd, i) < 0)
			die("dup2 failed");
	activity();
	out("low fds ok\n");
	return 0;
}

static int mode_fds(int replace)
{
	char buf[4096], line[64];
	int sp[2];
	ssize_t n, got = 0;

	if (syscall(SYS_close_range, 3, ~0u, 0) < 0)
		for (int fd = 3; fd < 65536; fd++)
			close(fd);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		die("socketpair failed");
	if (replace)
		for (int fd = 3; fd < 1024; fd++)
			if (fd != sp[0] && fd != sp[1])
				dup2(sp[0], fd);
	if (write(sp[0], "hello", 5) != 5)
		die("write failed");
	activity();
	fcntl(sp[1], F_SETFL, O_NONBLOCK);
	while ((n = read(sp[1], buf, sizeof(buf))) > 0)
		got += n;
	out_line(line, put(line, "got", (uint64_t)got));
	return 0;
}

/* ---- a signal handler that allocates ---- */

static volatile sig_atomic_t fired;

/*
 * malloc is not async-signal-safe: a handler's malloc that needs the lock
 * the interrupted one holds deadlocks, in glibc, with or without the shim.
 * This handler's 40 bytes come from glibc's per-thread cache, filled before
 * the timer starts, in a size class the loop never uses: it takes no lock
 * and touches nothing the interrupted call does.  Whatever it interrupts
 * in the shim, the shim must cope.
 */
static void on_tick(int sig)
{
	int saved = errno;

	(void)sig;
	pair(40);
	fired++;
	errno = saved;
}

struct sig_job {
	unsigned n, us;
	uint64_t mallocs, frees;
	uint64_t inside; /* wl_hard under: the shim's own calls that signalled */
	int mask_kept;   /* wl_hard under: the worker's mask as it set it */
	int tid;
};

static void *sig_worker(void *arg)
{
	struct sig_job *j = arg;
	struct sigevent ev = { .sigev_notify = SIGEV_THREAD_ID, .sigev_signo = SIGUSR1 };
	struct itimerspec its = { { 0, (long)j->us * 1000 }, { 0, (long)j->us * 1000 } };
	sigset_t set;
	timer_t tm;

	j->tid = gettid();
	ev._sigev_un._tid = j->tid;
	/* the thread's first traced call sets it up (claims its ring): in
	 * that the shim passes a handler's calls through uncounted; it also
	 * puts a 40-byte block in glibc's cache for the handler */
	pair(40);
	if (timer_create(CLOCK_MONOTONIC, &ev, &tm) < 0 || timer_settime(tm, 0, &its, 0) < 0)
		die("timer failed");
	for (unsigned i = 0; i < j->n; i++) {
		void *p = malloc(64 + (i % 64) * 8);

		*(volatile char *)p = 1;
		free(p);
	}
	/* No tick after this: the counts below are final. */
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, 0);
	timer_delete(tm);
	j->mallocs = j->n + 1 + (uint64_t)fired;
	j->frees = j->n + 1 + (uint64_t)fired;
	return 0;
}

/* Runs worker on j to its end: "tid T mallocs M frees F KEY *handled". */
static int sig_job_run(struct sig_job *j, void *(*worker)(void *), const char *key,
		       volatile sig_atomic_t *handled)
{
	char line[160], *p = line;
	pthread_t th;

	if (pthread_create(&th, 0, worker, j) != 0)
		die("pthread_create failed");
	pthread_join(th, 0);
	p = put(p, "tid", (uint64_t)j->tid);
	p = put(p, "mallocs", j->mallocs);
	p = put(p, "frees", j->frees);
	p = put(p, key, (uint64_t)*handled);
	out_line(line, p);
	return 0;
}

static int mode_sigmalloc(unsigned n, unsigned us)
{
	struct sigaction sa = { .sa_handler = on_tick, .sa_flags = SA_RESTART };
	struct sig_job j = { .n = n, .us = us };

	sigaction(SIGUSR1, &sa, 0);
	return sig_job_run(&j, sig_worker, "ticks", &fired);
}

static volatile sig_atomic_t trapped;

/*
 * A handler inside the shim's other work, every time: the worker's system
 * calls that only the shim makes there are trapped (seccomp), and its
 * SIGSYS handler makes a 40-byte pair and then does the call's work
 * itself, so that the shim goes on as it would have:
 *   setup  gettid(2), send(2) and sendmsg(2) from the worker's start: its
 *          first traced call sets it up (gettid before its ring is
 *          claimed, THREAD's send after), then N pairs of 64 bytes
 *   mark   sendmsg(2): N shimmer_mark() calls of new names, each name
 *          sent to the collector (STRING) as it is interned
 *   cuda   poll(2) and ppoll(2): N cudaStreamSynchronize(0) (the runtime
 *          LIB dlopened), while the collector is stopped: the records
 *          fill the ring, and a thread that drops looks for a dead
 *          collector (poll) inside the record of a call
 *   exit   send(2) and sendmsg(2): N pairs, then exit(3) on the worker:
 *          the shim's BYE; the handler says "traps K" each time
 *   revive poll(2) and ppoll(2): N pairs of 64 bytes, while the collector
 *          is stopped: the ring fills, and a thread that drops looks for
 *          a dead collector (poll)
 * The handler's pair interrupts no malloc (the shim makes these calls
 * after the real one returned, or before it) and, but in setup, comes
 * from glibc's per-thread cache.
 * "tid T mallocs M frees F traps K" (M, F: the worker's and the handler's
 * calls until then); status 3 and "no seccomp" when the kernel refuses.
 */
enum trap_what { TRAP_SETUP, TRAP_MARK, TRAP_CUDA, TRAP_EXIT, TRAP_REVIVE };

static int trap_say;
static void (*trap_mark)(const char *);
static int (*trap_sync)(void *);

/* gettid(2) without it: /proc/thread-self is "PID/task/TID". */
static long tid_of_self(void)
{
	char buf[64];
	ssize_t n = readlink("/proc/thread-self", buf, sizeof(buf) - 1);
	long tid = 0;

	if (n <= 0)
		return -ENOSYS;
	buf[n] = 0;
	for (char *p = strrchr(buf, '/') + 1; *p >= '0' && *p <= '9'; p++)
		tid = tid * 10 + (*p - '0');
	return tid;
}

static void on_trap(int sig, siginfo_t *si, void *ctx)
{
	greg_t *g = ((ucontext_t *)ctx)->uc_mcontext.gregs;
	int saved = errno;
	long r = 0;

	(void)sig;
	pair(40);
	trapped++;
	if (si->si_syscall == __NR_gettid) {
		r = tid_of_self();
	} else if (si->si_syscall == __NR_sendmsg) {
		struct mmsghdr mm = { .msg_hdr = *(const struct msghdr *)g[REG_RSI] };

		r = syscall(SYS_sendmmsg, (int)g[REG_RDI], &mm, 1, (int)g[REG_RDX]);
		r = r == 1 ? (long)mm.msg_len : r < 0 ? -errno : -EAGAIN;
	} else if (si->si_syscall == __NR_sendto) {
		struct iovec iov = { (void *)g[REG_RSI], (size_t)g[REG_RDX] };
		struct mmsghdr mm = { .msg_hdr = { .msg_name = (void *)g[REG_R8],
						   .msg_namelen = (socklen_t)g[REG_R9],
						   .msg_iov = &iov, .msg_iovlen = 1 } };

		r = syscall(SYS_sendmmsg, (int)g[REG_RDI], &mm, 1, (int)g[REG_R10]);
		r = r == 1 ? (long)mm.msg_len : r < 0 ? -errno : -EAGAIN;
	}
	g[REG_RAX] = r; /* poll, ppoll: no event */
	if (trap_say) {
		char line[32];

		out_line(line, put(line, "traps", (uint64_t)trapped));
	}
	errno = saved;
}

static void trap_filter(int what)
{
	struct sigaction sa = { .sa_sigaction = on_trap, .sa_flags = SA_SIGINFO };
	int polls = what == TRAP_CUDA || what == TRAP_REVIVE;
	unsigned a = polls ? __NR_poll : __NR_sendmsg;
	unsigned b = polls ? __NR_ppoll : what == TRAP_MARK ? a : __NR_sendto;
	unsigned c = what == TRAP_SETUP ? __NR_gettid : a;
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 5),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, a, 3, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, b, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, c, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	sigaction(SIGSYS, &sa, 0);
	/* this thread only (no TSYNC): the shim polls at the exit of main too */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0) {
		out("no seccomp\n");
		_exit(3);
	}
}

static void *trap_worker(void *arg)
{
	struct sig_job *j = arg;
	int what = (int)j->us;
	uint64_t pairs = 0;
	char name[32] = "trap-mark-";

	j->tid = gettid();
	if (what != TRAP_SETUP) {
		/* claims the ring; a 40-byte block in the cache for the handler */
		pair(40);
		pairs++;
	}
	trap_filter(what);
	for (unsigned i = 0; i < j->n; i++) {
		switch (what) {
		case TRAP_MARK:
			put(name + 10, "", i)[-1] = 0;
			trap_mark(name);
			break;
		case TRAP_CUDA:
			if (trap_sync(0) != 0)
				die("cudaStreamSynchronize failed");
			break;
		default:
			pair(64);
			pairs++;
		}
	}
	j->mallocs = j->frees = pairs + (uint64_t)trapped;
	if (what == TRAP_EXIT) {
		char line[160], *p = line;

		p = put(p, "tid", (uint64_t)j->tid);
		p = put(p, "mallocs", j->mallocs);
		p = put(p, "frees", j->frees);
		p = put(p, "traps", (uint64_t)trapped);
		out_line(line, p);
		trap_say = 1;
		exit(0);
	}
	return 0;
}

static int mode_trap(const char *what, unsigned n, const char *lib)
{
	static const char *const names[] = { "setup", "mark", "cuda", "exit", "revive" };
	struct sig_job j = { .n = n, .us = 5 };

	for (unsigned i = 0; i < 5; i++)
		if (!strcmp(what, names[i]))
			j.us = i;
	if (j.us == 5)
		die("trap: setup | mark | cuda | exit | revive");
	/* found in the shim (LD_PRELOAD) or the runtime before the worker
	 * starts: dlsym's work is not the worker's */
	trap_mark = (void (*)(const char *))dlsym(RTLD_DEFAULT, "shimmer_mark");
	if (j.us == TRAP_CUDA) {
		if (!lib || !dlopen(lib, RTLD_NOW | RTLD_GLOBAL))
			die("trap cuda: cannot open the runtime");
		trap_sync = (int (*)(void *))dlsym(RTLD_DEFAULT, "cudaStreamSynchronize");
		/* the runtime's own first-call allocations, not the worker's */
		if (trap_sync && trap_sync(0) != 0)
			die("cudaStreamSynchronize failed");
	}
	if ((j.us == TRAP_MARK && !trap_mark) || (j.us == TRAP_CUDA && !trap_sync))
		die("trap: a function is missing");
	return sig_job_run(&j, trap_worker, "traps", &trapped);
}

/*
 * A handler inside the shim's own allocations, every time: libunder.so
 * (under_lib.c), preloaded behind the shim, signals the worker from inside
 * each call that reaches the real allocator, the shim's own among them
 * (those it makes in_shim), and the SIGUSR1 handler makes a 40-byte pair
 * there, unless the shim blocks the signal until the end of that call:
 *   setup  N pairs from the worker's start: its first traced call sets it
 *          up, and the first pthread_setspecific of the shim's key (past
 *          glibc's first 32) allocates
 *   stacks the same; run with stacks on (and SHIMMER_STACK_CHECK=1, so that
 *          libunwind's unw_backtrace makes every capture too: its first on
 *          a thread allocates)
 *   cuda   N cudaStreamSynchronize(0) and N pairs, the runtime LIB dlopened
 *          and set up by a cudaGetDevice (which the shim does not
 *          interpose): the worker's first call resolves the runtime's
 *          functions (dlsym) and asks it for the thread's device
 * The worker blocks SIGUSR2 and SIGRTMIN+5 first, and looks at the end
 * whether its mask is still that.  "tid T mallocs M frees F handled K",
 * then "inside I mask 0|1" (M, F: the worker's and the handler's calls; I:
 * the signals sent from calls the worker did not make itself, the shim's;
 * 1: the mask kept); status 3 and "no libunder" without the library.
 */
static volatile sig_atomic_t handled;
static void (*under_arm)(int), (*under_quiet)(int);
static uint64_t (*under_signals)(void);

static void on_under(int sig)
{
	int saved = errno;

	(void)sig;
	under_quiet(1);
	pair(40);
	handled++;
	under_quiet(0);
	errno = saved;
}

static void *under_worker(void *arg)
{
	struct sig_job *j = arg;
	uint64_t real = 0;
	sigset_t set, now;

	j->tid = gettid();
	/* a mask of the program's own, which the shim must leave as it is */
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	sigaddset(&set, SIGRTMIN + 5);
	pthread_sigmask(SIG_SETMASK, &set, 0);
	under_arm(1);
	for (unsigned i = 0; i < j->n; i++) {
		if (j->us && trap_sync(0) != 0)
			die("cudaStreamSynchronize failed");
		pair(64);
		real += 2; /* the worker's own malloc and free reach libunder */
	}
	under_arm(0);
	pthread_sigmask(SIG_SETMASK, 0, &now);
	j->mask_kept = 1;
	for (int s = 1; s < NSIG; s++)
		if (sigismember(&now, s) != sigismember(&set, s))
			j->mask_kept = 0;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, 0);
	j->mallocs = j->frees = j->n + (uint64_t)handled;
	j->inside = under_signals() - real;
	return 0;
}

static int mode_under(const char *what, unsigned n, const char *lib)
{
	struct sigaction sa = { .sa_handler = on_under, .sa_flags = SA_RESTART };
	struct sig_job j = { .n = n };
	char line[160], *p = line;
	int (*get_device)(int *), dev;

	under_arm = (void (*)(int))dlsym(RTLD_DEFAULT, "under_arm");
	under_quiet = (void (*)(int))dlsym(RTLD_DEFAULT, "under_quiet");
	under_signals = (uint64_t (*)(void))dlsym(RTLD_DEFAULT, "under_signals");
	if (!under_arm || !under_quiet || !under_signals) {
		out("no libunder\n");
		return 3;
	}
	if (!strcmp(what, "cuda")) {
		/* opened, not called: the worker's calls are its first */
		if (!lib || !dlopen(lib, RTLD_NOW | RTLD_GLOBAL))
			die("under cuda: cannot open the runtime");
		trap_sync = (int (*)(void *))dlsym(RTLD_DEFAULT, "cudaStreamSynchronize");
		get_device = (int (*)(int *))dlsym(RTLD_DEFAULT, "cudaGetDevice");
		/* the runtime's own first-call work (it loads the injection
		 * library: the shim starts CUPTI) here, not in the worker; the
		 * shim does not interpose cudaGetDevice, so it resolves nothing */
		if (!trap_sync || !get_device || get_device(&dev) != 0)
			die("under cuda: cudaStreamSynchronize, cudaGetDevice");
		j.us = 1;
	} else if (strcmp(what, "setup") && strcmp(what, "stacks")) {
		die("under: setup | stacks | cuda");
	}
	sigaction(SIGUSR1, &sa, 0);
	sig_job_run(&j, under_worker, "handled", &handled);
	p = put(p, "inside", j.inside);
	p = put(p, "mask", (uint64_t)j.mask_kept);
	out_line(line, p);
	return 0;
}

/* ---- threads that come and go ---- */

static pthread_mutex_t churn_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t churn_cv = PTHREAD_COND_INITIALIZER;
static unsigned churn_alive, churn_n;

static void *churn_worker(void *arg)
{
	void *keep = 0;

	(void)arg;
	for (unsigned i = 0; i < churn_n; i++) {
		void *p = malloc(40);

		*(volatile char *)p = 1;
		if (i + 1 == churn_n) {
			keep = p; /* freed at the end: live while the thread is */
			break;
		}
		free(p);
	}
	usleep(200);
	free(keep);
	pthread_mutex_lock(&churn_lock);
	churn_alive--;
	pthread_cond_signal(&churn_cv);
	pthread_mutex_unlock(&churn_lock);
	return 0;
}

static int mode_churn(unsigned total, unsigned alive, unsigned n)
{
	pthread_attr_t at;
	char line[160], *p = line;

	churn_n = n;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	for (unsigned i = 0; i < total; i++) {
		pthread_t th;

		pthread_mutex_lock(&churn_lock);
		while (churn_alive >= alive)
			pthread_cond_wait(&churn_cv, &churn_lock);
		churn_alive++;
		pthread_mutex_unlock(&churn_lock);
		if (pthread_create(&th, &at, churn_worker, 0) != 0)
			die("pthread_create failed");
	}
	pthread_mutex_lock(&churn_lock);
	while (churn_alive)
		pthread_cond_wait(&churn_cv, &churn_lock);
	pthread_mutex_unlock(&churn_lock);
	p = put(p, "threads", total);
	p = put(p, "mallocs", (uint64_t)total * n);
	p = put(p, "frees", (uint64_t)total * n);
	out_line(line, p);
	return 0;
}

/* ---- addresses reused across threads ---- */

struct reuse_job {
	unsigned n;
	size_t size;
	int tid;
};

static pthread_barrier_t reuse_bar;

static void *reuse_worker(void *arg)
{
	struct reuse_job *j = arg;

	j->tid = gettid();
	pthread_barrier_wait(&reuse_bar);
	for (unsigned i = 0; i < j->n; i++) {
		char *p = malloc(j->size);

		*(volatile char *)p = 1;
		free(p);
	}
	return 0;
}

static int mode_reuse(unsigned threads, unsigned n, size_t size)
{
	struct reuse_job j[64];
	pthread_t th[64];
	char line[160];

	if (threads > 64)
		threads = 64;
	/* one arena for all threads (and, with GLIBC_TUNABLES'
	 * glibc.malloc.tcache_count=0, no per-thread cache): a freed address
	 * goes straight back to whichever thread allocates next */
	mallopt(M_ARENA_MAX, 1);
	pthread_barrier_init(&reuse_bar, 0, threads);
	for (unsigned i = 0; i < threads; i++) {
		j[i] = (struct reuse_job){ .n = n, .size = size };
		if (pthread_create(&th[i], 0, reuse_worker, &j[i]) != 0)
			die("pthread_create failed");
	}
	for (unsigned i = 0; i < threads; i++) {
		char *p = line;

		pthread_join(th[i], 0);
		p = put(p, "tid", (uint64_t)j[i].tid);
		p = put(p, "pairs", n);
		out_line(line, p);
	}
	return 0;
}

/* ---- reallocarray: glibc's calls realloc through the PLT ---- */

static unsigned ra_n;
static int ra_tid, ra_refused;

/* N x (reallocarray(NULL, 3, 100), grown by reallocarray(p, 5, 100),
 * free), then one whose product overflows (NULL with ENOMEM), a
 * malloc(SIZE_MAX) and a calloc whose product overflows (NULL). */
static void *ra_worker(void *arg)
{
	void *volatile p;
	volatile size_t half = SIZE_MAX / 2; /* not folded: GCC refuses the constant */

	(void)arg;
	ra_tid = gettid();
	for (unsigned i = 0; i < ra_n; i++) {
		p = reallocarray(NULL, 3, 100);
		p = reallocarray(p, 5, 100);
		free(p);
	}
	errno = 0;
	p = reallocarray(NULL, half, 3);
	ra_refused = !p && errno == ENOMEM;
	/* requests no allocator grants: their bytes must not wrap a sum */
	p = malloc(half * 2 + 1);
	ra_refused &= !p;
	p = calloc(half, 3);
	ra_refused &= !p;
	return 0;
}

static int mode_reallocarray(unsigned n)
{
	pthread_t th;
	char line[96], *p = line;

	ra_n = n;
	if (pthread_create(&th, 0, ra_worker, 0) != 0)
		die("pthread_create failed");
	pthread_join(th, 0);
	p = put(p, "tid", (uint64_t)ra_tid);
	p = put(p, "refused", (uint64_t)ra_refused);
	out_line(line, p);
	return 0;
}

/* ---- the heap order: calls held open inside the real allocator ---- */

static struct {
	void (*hold_free)(void);
	void (*wait_held)(void);
	void (*let_free)(void);
	void (*wait_waiter)(void);
} order;
static pthread_barrier_t order_bar;
static unsigned order_rounds;
static int order_tid[2];
static void *volatile order_kept;

/* Each worker allocates at a call site of its own (so that the aggregated
 * sites and the leak report tell whose block a free ended): neither is
 * inlined nor a tail call, and each marks its block with its own letter
 * (identical bodies would be folded into one function). */
static __attribute__((noinline)) void *order_a_alloc(void)
{
	char *volatile p = malloc(ORDER_SIZE);

	*p = 'a';
	return p;
}

static __attribute__((noinline)) void *order_b_alloc(void)
{
	char *volatile p = malloc(ORDER_SIZE);

	*p = 'b';
	return p;
}

static __attribute__((noinline)) void order_free(void *p)
{
	free(p);
	__asm__ volatile("" ::: "memory");
}

/* Until the collector has taken what this thread shipped: a nap, a heap
 * call 40 ms later than the last one (the aggregated heap applies an
 * event once one 20 ms newer has come), another nap. */
static void order_settle(void)
{
	struct timespec nap = { 0, 40 * 1000 * 1000 };

	nanosleep(&nap, 0);
	pair(40);
	nanosleep(&nap, 0);
}

/* One of worker a's slow rounds (below). */
static void order_a_slow(int b_first)
{
	void *p = order_a_alloc();

	order.hold_free();
	pthread_barrier_wait(&order_bar);
	if (b_first)
		order.wait_waiter(); /* b's malloc began before this free */
	order_free(p);
	pthread_barrier_wait(&order_bar);
}

/*
 * Worker a.  Each of the N quick rounds: a's free held open after the real
 * free while b allocates the address (and frees it); then a's block out
 * when b's malloc begins, and freed once that malloc waits in the real
 * malloc.  Whether a wrong number then pairs the wrong block depends on
 * which record the collector takes first (both ways happen).  So two slow
 * rounds follow, where it is certain, each with a's free held open until
 * b's allocation has been taken by the collector (order_settle()): one
 * where b's malloc began before a's free (and b frees the block), one
 * where it began after (b keeps the block).
 */
static void *order_a(void *arg)
{
	void *p;

	(void)arg;
	order_tid[0] = gettid();
	for (unsigned i = 0; i < order_rounds; i++) {
		p = order_a_alloc();
		order.hold_free();
		pthread_barrier_wait(&order_bar);
		order_free(p);
		pthread_barrier_wait(&order_bar);
		p = order_a_alloc();
		pthread_barrier_wait(&order_bar);
		order.wait_waiter();
		order_free(p);
		pthread_barrier_wait(&order_bar);
	}
	order_a_slow(1);
	order_a_slow(0);
	return 0;
}

static void *order_b(void *arg)
{
	void *q;

	(void)arg;
	order_tid[1] = gettid();
	for (unsigned i = 0; i < order_rounds; i++) {
		pthread_barrier_wait(&order_bar);
		order.wait_held();
		q = order_b_alloc();
		order.let_free();
		order_free(q);
		pthread_barrier_wait(&order_bar);
		pthread_barrier_wait(&order_bar);
		q = order_b_alloc();
		order_free(q);
		pthread_barrier_wait(&order_bar);
	}
	pthread_barrier_wait(&order_bar);
	q = order_b_alloc();
	order_settle();
	order.let_free();
	order_free(q);
	pthread_barrier_wait(&order_bar);
	pthread_barrier_wait(&order_bar);
	order.wait_held();
	q = order_b_alloc();
	order_settle();
	order.let_free();
	order_kept = q;
	pthread_barrier_wait(&order_bar);
	return 0;
}

static int mode_order(unsigned rounds)
{
	pthread_t a, b;
	char line[96], *p = line;

	order.hold_free = (void (*)(void))dlsym(RTLD_DEFAULT, "order_hold_free");
	order.wait_held = (void (*)(void))dlsym(RTLD_DEFAULT, "order_wait_held");
	order.let_free = (void (*)(void))dlsym(RTLD_DEFAULT, "order_let_free");
	order.wait_waiter = (void (*)(void))dlsym(RTLD_DEFAULT, "order_wait_waiter");
	if (!order.hold_free || !order.wait_held || !order.let_free || !order.wait_waiter)
		die("liborder.so is not preloaded");
	order_rounds = rounds;
	pthread_barrier_init(&order_bar, 0, 2);
	if (pthread_create(&a, 0, order_a, 0) != 0 || pthread_create(&b, 0, order_b, 0) != 0)
		die("pthread_create failed");
	pthread_join(a, 0);
	pthread_join(b, 0);
	p = put(p, "pid", (uint64_t)getpid());
	p = put(p, "a", (uint64_t)order_tid[0]);
	p = put(p, "b", (uint64_t)order_tid[1]);
	p = put(p, "rounds", rounds);
	out_line(line, p);
	return 0;
}

/* ---- RTLD_DEEPBIND ---- */

static int mode_deepbind(const char *lib, unsigned n)
{
	void *h = dlopen(lib, RTLD_NOW | RTLD_DEEPBIND);
	unsigned (*allocs)(unsigned);
	char line[64];

	if (!h) {
		out(dlerror());
		die("");
	}
	allocs = (unsigned (*)(unsigned))dlsym(h, "hard_lib_allocs");
	if (!allocs)
		die("no hard_lib_allocs");
	out_line(line, put(line, "kept", allocs(n)));
	return 0;
}

/* ---- fatal signals ---- */

static sigjmp_buf caught_env;

static void on_segv(int sig)
{
	(void)sig;
	siglongjmp(caught_env, 1);
}

static int mode_fatal(const char *kind)
{
	volatile int zero = 0;

	pair(1000);
	if (!strcmp(kind, "segv"))
		*(volatile int *)(uintptr_t)zero = 1;
	else if (!strcmp(kind, "abort"))
		abort();
	else if (!strcmp(kind, "fpe"))
		return 10 / zero;
	else if (!strcmp(kind, "ill"))
		__builtin_trap();
	else if (!strcmp(kind, "bus")) {
		char path[] = "/tmp/wl_hard.XXXXXX";
		int fd = mkstemp(path);
		char *m;

		if (fd < 0 || ftruncate(fd, 4096) < 0)
			die("mkstemp failed");
		m = mmap(0, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		unlink(path);
		if (m == MAP_FAILED)
			die("mmap failed");
		m[4096] = 1; /* past the end of the file */
	} else if (!strcmp(kind, "kill")) {
		kill(getpid(), SIGBUS); /* sent, not a fault: si_code SI_USER */
		pause();
	} else if (!strcmp(kind, "caught")) {
		struct sigaction sa = { .sa_handler = on_segv };

		sigaction(SIGSEGV, &sa, 0);
		if (!sigsetjmp(caught_env, 1))
			*(volatile int *)(uintptr_t)zero = 1;
		out("recovered\n");
		return 0;
	}
	die("no such kind");
	return 1;
}

/* ---- no descriptors left ---- */

static int mode_fdfill(void)
{
	int fds[65536], n = 0, status;
	pthread_t th;
	pid_t pid;

	while (n < 65536 && (fds[n] = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
		n++;
	if (errno != EMFILE || n == 0)
		die("expected EMFILE");
	if (pthread_create(&th, 0, alloc_some, 0) != 0)
		die("pthread_create failed");
	pthread_join(th, 0);
	pid = fork();
	if (pid == 0) {
		alloc_some(0);
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0)
		die("child failed");
	while (n)
		close(fds[--n]);
	out("ok\n");
	return 0;
}

/* ---- load ---- */

static unsigned load_n, load_nap_us;
static int load_keep;
static pthread_barrier_t load_bar;

static void *load_worker(void *arg)
{
	uint32_t x = (uint32_t)(uintptr_t)arg * 2654435761u + 1;

	/* every worker is live and has allocated before any goes on: a
	 * shim that made a worker wait for another's slot would hang here */
	pair(16);
	pthread_barrier_wait(&load_bar);
	for (unsigned i = 0; i < load_n; i++) {
		void *p;

		x = x * 1103515245u + 12345u;
		p = malloc(24 + (x >> 16) % 513);
		*(volatile char *)p = 1;
		if (!load_keep)
			free(p);
		if (load_nap_us && i % 100 == 99)
			usleep(load_nap_us);
	}
	return 0;
}

static int mode_load(unsigned threads, unsigned n, int keep, unsigned nap_us)
{
	pthread_t th[64];
	char line[160], *p = line;

	if (threads > 64)
		threads = 64;
	load_n = n;
	load_keep = keep;
	load_nap_us = nap_us;
	pthread_barrier_init(&load_bar, 0, threads);
	for (unsigned i = 0; i < threads; i++)
		if (pthread_create(&th[i], 0, load_worker, (void *)(uintptr_t)i) != 0)
			die("pthread_create failed");
	for (unsigned i = 0; i < threads; i++)
		pthread_join(th[i], 0);
	p = put(p, "threads", threads);
	p = put(p, "pairs", (uint64_t)threads * n);
	out_line(line, p);
	return 0;
}

/* ---- exits ---- */

static int mode_exits(void)
{
	char line[64];
	int status;
	pid_t pid = fork(), vpid;

	if (pid == 0) {
		pair(777);
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		die("child failed");
	/* a vfork child shares our memory and socket: its _exit is not ours */
	vpid = vfork();
	if (vpid == 0)
		_exit(0);
	if (vpid < 0 || waitpid(vpid, &status, 0) != vpid)
		die("vfork child failed");
	usleep(20000);
	pair(888);
	out_line(line, put(line, "child", (uint64_t)pid));
	return 0;
}

int main(int argc, char **argv)
{
	const char *m = argc > 1 ? argv[1] : "";

	if (!strcmp(m, "closefds"))
		return mode_fds(0);
	if (!strcmp(m, "replacefds"))
		return mode_fds(1);
	if (!strcmp(m, "lowfds"))
		return mode_lowfds();
	if (!strcmp(m, "sigmalloc") && argc == 4)
		return mode_sigmalloc((unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]));
	if (!strcmp(m, "trap") && (argc == 4 || argc == 5))
		return mode_trap(argv[2], (unsigned)atoi(argv[3]), argc == 5 ? argv[4] : 0);
	if (!strcmp(m, "under") && (argc == 4 || argc == 5))
		return mode_under(argv[2], (unsigned)atoi(argv[3]), argc == 5 ? argv[4] : 0);
	if (!strcmp(m, "churn") && argc == 5)
		return mode_churn((unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]),
				  (unsigned)atoi(argv[4]));
	if (!strcmp(m, "reuse") && argc == 5)
		return mode_reuse((unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]),
				  (size_t)atol(argv[4]));
	if (!strcmp(m, "order") && argc == 3)
		return mode_order((unsigned)atoi(argv[2]));
	if (!strcmp(m, "deepbind") && argc == 4)
		return mode_deepbind(argv[2], (unsigned)atoi(argv[3]));
	if (!strcmp(m, "fatal") && argc == 3)
		return mode_fatal(argv[2]);
	if (!strcmp(m, "fdfill"))
		return mode_fdfill();
	if (!strcmp(m, "load") && (argc == 4 || (argc >= 5 && argc <= 6 && !strcmp(argv[4], "keep"))))
		return mode_load((unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]), argc >= 5,
				 argc == 6 ? (unsigned)atoi(argv[5]) : 0);
	if (!strcmp(m, "reallocarray") && argc == 3)
		return mode_reallocarray((unsigned)atoi(argv[2]));
	if (!strcmp(m, "exits"))
		return mode_exits();
	die("usage: wl_hard MODE ARGS (see wl_hard.c)");
	return 2;
}
