/*
 * wl_host: what real programs do to their process that the shim must not
 * notice (t_hostprogs.sh).  Each mode prints what it saw on stdout, the
 * same bare and traced (no pointer, no pid, no time), and exits 0 unless
 * something went wrong; the test compares both runs.
 *
 *   wl_host mallocapi        every odd call of the malloc family: usable
 *                            sizes, mallinfo2, malloc_trim, posix_memalign
 *                            and friends with bad and huge alignments,
 *                            realloc(p, 0), reallocarray overflow
 *   wl_host closefrom HOW    close every descriptor above 2 (HOW: closefrom,
 *                            close_range, cloexec: close_range's CLOEXEC
 *                            flag), allocate, then fork + exec `wl_host
 *                            child` and wait for it
 *   wl_host sigblock         every signal blocked, then threads, a fork and
 *                            an exec, the mask checked unchanged throughout
 *   wl_host threads N        N threads created at once, each a few pairs,
 *                            joined
 *   wl_host forks N          N children, one after another, each allocates
 *                            and exits (by exit, _exit or return in turn)
 *   wl_host spawn            posix_spawn, vfork + exec, a raw clone() child
 *                            (no atfork handlers) that allocates, and
 *                            clone(CLONE_VM | CLONE_VFORK) + exec
 *   wl_host rawclone         3,100 realloc calls of its own around a child
 *                            made by a raw clone(2) (no atfork handler) that
 *                            makes 7,000: "child exit 0"
 *   wl_host selfexec N       exec itself N times, allocating at each step
 *   wl_host unsetenv         unsetenv("LD_PRELOAD"), then fork + exec child
 *   wl_host rlimit           RLIMIT_NOFILE lowered to 16, then fork + exec
 *   wl_host prctl            PR_SET_NAME, PR_SET_NO_NEW_PRIVS, PR_SET_DUMPABLE
 *                            0, PR_SET_PDEATHSIG, then fork + exec child
 *   wl_host seccomp          a filter that fails socket(2) and connect(2)
 *                            with EPERM, then fork + exec child
 *   wl_host dropuid          (root) setresgid/setresuid to 65534, then fork
 *                            + exec child
 *   wl_host dup2             dup2 /dev/null over every descriptor from 3 to
 *                            1023 that is open, then allocate, fork + exec
 *   wl_host unwfds DIR       a program that owns its descriptor numbers:
 *                            3 and up closed, heap work from new call
 *                            sites, then its first two files must be 3
 *                            and 4; all closed again (a daemon's start),
 *                            the files opened again, more new call sites,
 *                            then what it reads back from the first and
 *                            the size of the second (which it never wrote)
 *   wl_host proctitle        set its process title as nginx and Chromium do
 *                            (the environment copied to the heap, then the
 *                            memory of argv and the environment written
 *                            over), then fork + exec child
 *   wl_host alloc MB         malloc MB MiB and touch every page of it
 *   wl_host child            allocate and say "child ok"
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static const char *self;
/* through volatile: the compiler refuses these sizes when it sees them */
static volatile size_t huge = SIZE_MAX - 4096, huge_n = SIZE_MAX / 2;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
}

/* Some heap work whose result is checked, so it cannot be elided. */
static int churn(unsigned n)
{
	unsigned long sum = 0;

	for (unsigned i = 0; i < n; i++) {
		char *p = malloc(16 + i % 300);

		if (!p)
			return -1;
		p[0] = (char)i;
		sum += (unsigned char)p[0];
		p = realloc(p, 600);
		if (!p)
			return -1;
		free(p);
	}
	return sum ? 0 : 0;
}

/* fork + exec `self child`, waited for: its status as a word. */
static int run_child(const char *how)
{
	int st;
	pid_t pid = fork();

	if (pid < 0) {
		say("%s: fork failed: %s\n", how, strerror(errno));
		return -1;
	}
	if (pid == 0) {
		execl(self, self, "child", (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) != pid) {
		say("%s: waitpid failed\n", how);
		return -1;
	}
	say("%s: child %s %d\n", how, WIFEXITED(st) ? "exit" : "signal",
	    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static int mode_child(void)
{
	if (churn(100) < 0)
		return 1;
	say("child ok\n");
	return 0;
}

/* a rounded up to a power of 2 (1 for 0) */
static size_t pow2(size_t a)
{
	size_t r = 1;

	while (r < a && r < SIZE_MAX / 2 + 1)
		r <<= 1;
	return r;
}

static int mode_mallocapi(void)
{
	static const size_t aligns[] = { 0, 1, 3, 4, 8, 12, 16, 24, 32, 48, 64, 4096, 65536,
					 1u << 20, (size_t)1 << 40, SIZE_MAX / 2 + 1, SIZE_MAX };
	struct mallinfo2 mi;
	void *p, *q;
	size_t i;
	int rc;

	p = malloc(100);
	say("malloc_usable_size(100) >= 100: %d\n", p && malloc_usable_size(p) >= 100);
	q = realloc(p, 5000);
	say("realloc to 5000 usable >= 5000: %d\n", q && malloc_usable_size(q) >= 5000);
	say("malloc_usable_size(NULL): %zu\n", malloc_usable_size(NULL));
	free(q);
	p = calloc(10, 10);
	say("calloc usable >= 100 zeroed: %d\n",
	    p && malloc_usable_size(p) >= 100 && !((char *)p)[99]);
	free(p);

	mi = mallinfo2();
	say("mallinfo2 arena > 0: %d\n", mi.arena > 0);
	say("malloc_trim returns 0 or 1: %d\n", (unsigned)malloc_trim(0) <= 1);
	say("mallopt(M_TRIM_THRESHOLD): %d\n", mallopt(M_TRIM_THRESHOLD, 1 << 20));

	for (i = 0; i < sizeof(aligns) / sizeof(aligns[0]); i++) {
		size_t a = aligns[i];
		int ok;

		p = (void *)0x1;
		errno = 0;
		rc = posix_memalign(&p, a, 100);
		ok = rc == 0 ? p && !((uintptr_t)p % a) && malloc_usable_size(p) >= 100 : p == (void *)0x1;
		say("posix_memalign(%zu, 100): %s, untouched or aligned %d, errno %d\n", a,
		    rc ? strerror(rc) : "0", ok, errno);
		if (!rc)
			free(p);

		errno = 0;
		p = aligned_alloc(a, 128);
		/* glibc 2.36 rounds an alignment that is no power of 2 up to one */
		say("aligned_alloc(%zu, 128): %s errno %s\n", a,
		    p ? ((uintptr_t)p % pow2(a) ? "misaligned" : "aligned") : "NULL",
		    p ? "-" : strerror(errno));
		free(p);

		errno = 0;
		p = memalign(a, 100);
		say("memalign(%zu, 100): %s errno %s\n", a,
		    p ? ((uintptr_t)p % pow2(a) ? "misaligned" : "aligned") : "NULL",
		    p ? "-" : strerror(errno));
		free(p);
	}
	errno = 0;
	rc = posix_memalign(&p, 64, SIZE_MAX - 100);
	say("posix_memalign(64, huge): %s errno %d\n", strerror(rc), errno);

	p = valloc(10);
	say("valloc(10) page aligned: %d usable >= 10: %d\n", p && !((uintptr_t)p % 4096),
	    p && malloc_usable_size(p) >= 10);
	free(p);
	p = pvalloc(10);
	say("pvalloc(10) page aligned: %d usable >= 4096: %d\n", p && !((uintptr_t)p % 4096),
	    p && malloc_usable_size(p) >= 4096);
	free(p);
	p = pvalloc(0);
	say("pvalloc(0): %s\n", p ? "block" : "NULL");
	free(p);

	p = malloc(50);
	errno = 0;
	q = realloc(p, 0);
	say("realloc(p, 0): %s errno %d\n", q ? "block" : "NULL", errno);
	free(q);
	q = realloc(NULL, 0);
	say("realloc(NULL, 0): %s\n", q ? "block" : "NULL");
	free(q);
	q = malloc(0);
	say("malloc(0): %s usable %d\n", q ? "block" : "NULL", q ? malloc_usable_size(q) > 0 : -1);
	free(q);
	q = calloc(0, 0);
	say("calloc(0, 0): %s\n", q ? "block" : "NULL");
	free(q);

	p = malloc(10);
	errno = 0;
	q = reallocarray(p, huge_n, 3);
	say("reallocarray overflow: %s errno %s, old kept %d\n", q ? "block" : "NULL",
	    strerror(errno), p && malloc_usable_size(p) >= 10);
	q = reallocarray(p, 0, 7);
	say("reallocarray(p, 0, 7): %s\n", q ? "block" : "NULL");
	free(q);
	errno = 0;
	p = calloc(huge_n, 8);
	say("calloc overflow: %s errno %s\n", p ? "block" : "NULL", strerror(errno));
	errno = 0;
	p = malloc(huge);
	say("malloc(huge): %s errno %s\n", p ? "block" : "NULL", strerror(errno));
	errno = 0;
	p = realloc(NULL, huge);
	say("realloc(NULL, huge): %s errno %s\n", p ? "block" : "NULL", strerror(errno));
	errno = 12345;
	free(NULL);
	p = malloc(8);
	free(p);
	say("free keeps errno: %d\n", errno == 12345);
	return 0;
}

static int mode_closefrom(const char *how)
{
	if (!strcmp(how, "closefrom")) {
		closefrom(3);
	} else if (!strcmp(how, "close_range")) {
		if (syscall(SYS_close_range, 3u, ~0u, 0u) < 0) {
			say("close_range: %s\n", strerror(errno));
			return 1;
		}
	} else if (!strcmp(how, "cloexec")) {
		if (syscall(SYS_close_range, 3u, ~0u, 4u /* CLOSE_RANGE_CLOEXEC */) < 0) {
			say("close_range: %s\n", strerror(errno));
			return 1;
		}
	} else {
		return 2;
	}
	if (churn(1000) < 0)
		return 1;
	for (int fd = 3; fd < 1024; fd++)
		if (!strcmp(how, "cloexec") ? fcntl(fd, F_GETFD) >= 0 && !(fcntl(fd, F_GETFD) & FD_CLOEXEC)
					    : fcntl(fd, F_GETFD) >= 0)
			say("descriptor %d open after %s\n", fd, how);
	return run_child(how) < 0 || churn(1000) < 0;
}

static void *sig_worker(void *arg)
{
	sigset_t *want = arg, got;

	churn(500);
	pthread_sigmask(SIG_BLOCK, NULL, &got);
	return (void *)(uintptr_t)memcmp(&got, want, sizeof(got));
}

static int mask_is(const sigset_t *want)
{
	sigset_t got;

	pthread_sigmask(SIG_BLOCK, NULL, &got);
	for (int s = 1; s < NSIG; s++)
		if (sigismember(&got, s) != sigismember(want, s))
			return 0;
	return 1;
}

static int mode_sigblock(void)
{
	pthread_t th[8];
	sigset_t all;
	int bad = 0;

	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	pthread_sigmask(SIG_BLOCK, NULL, &all);
	if (churn(1000) < 0)
		return 1;
	for (int i = 0; i < 8; i++)
		pthread_create(&th[i], NULL, sig_worker, &all);
	for (int i = 0; i < 8; i++) {
		void *r;

		pthread_join(th[i], &r);
		bad += r != NULL;
	}
	say("threads with a changed mask: %d\n", bad);
	say("main mask unchanged: %d\n", mask_is(&all));
	if (run_child("sigblock") < 0)
		return 1;
	say("main mask unchanged after fork: %d\n", mask_is(&all));
	return 0;
}

static void *thr_worker(void *arg)
{
	(void)arg;
	for (int i = 0; i < 4; i++)
		free(malloc(32 + 8 * i));
	return NULL;
}

static int mode_threads(unsigned n)
{
	pthread_t *th = calloc(n, sizeof(*th));
	unsigned made = 0;

	if (!th)
		return 1;
	for (unsigned i = 0; i < n; i++)
		if (pthread_create(&th[i], NULL, thr_worker, NULL) == 0)
			made++;
		else
			th[i] = 0;
	for (unsigned i = 0; i < n; i++)
		if (th[i])
			pthread_join(th[i], NULL);
	free(th);
	say("threads %u of %u\n", made, n);
	return made != n;
}

static int mode_forks(unsigned n)
{
	unsigned good = 0;

	for (unsigned i = 0; i < n; i++) {
		int st;
		pid_t pid = fork();

		if (pid < 0) {
			say("fork %u: %s\n", i, strerror(errno));
			return 1;
		}
		if (pid == 0) {
			void *p = malloc(64 + i % 64);

			free(p);
			if (i % 3 == 0)
				exit(0);
			if (i % 3 == 1)
				_exit(0);
			return -1; /* main's return, exit status 255 */
		}
		if (waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
		    WEXITSTATUS(st) == (i % 3 == 2 ? 255 : 0))
			good++;
	}
	say("children %u of %u as expected\n", good, n);
	return good != n;
}

static int child_fn(void *arg)
{
	(void)arg;
	if (churn(50) < 0)
		_exit(1);
	_exit(0);
}

static int child_exec(void *arg)
{
	execl(self, self, "child", (char *)arg);
	_exit(127);
}

static int wait_say(const char *how, pid_t pid)
{
	int st;

	if (pid < 0) {
		say("%s: %s\n", how, strerror(errno));
		return -1;
	}
	if (waitpid(pid, &st, __WALL) != pid) {
		say("%s: waitpid: %s\n", how, strerror(errno));
		return -1;
	}
	say("%s: %s %d\n", how, WIFEXITED(st) ? "exit" : "signal",
	    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	return WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : -1;
}

static int mode_spawn(void)
{
	char *argv[] = { (char *)self, "child", NULL };
	static char stack[2][256 * 1024] __attribute__((aligned(16)));
	pid_t pid;
	volatile int bad = 0;

	if (posix_spawn(&pid, self, NULL, NULL, argv, environ) != 0)
		pid = -1;
	bad |= wait_say("posix_spawn", pid);
	pid = vfork();
	if (pid == 0) {
		execv(self, argv);
		_exit(127);
	}
	bad |= wait_say("vfork", pid);
	/* a raw clone, as sandboxes make their children: no atfork handler */
	pid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
	if (pid == 0) {
		churn(50);
		syscall(SYS_exit_group, 0);
	}
	bad |= wait_say("raw clone", pid);
	pid = clone(child_fn, stack[0] + sizeof(stack[0]), SIGCHLD, NULL);
	bad |= wait_say("clone", pid);
	pid = clone(child_exec, stack[1] + sizeof(stack[1]), CLONE_VM | CLONE_VFORK | SIGCHLD, NULL);
	bad |= wait_say("clone vm vfork exec", pid);
	return bad ? 1 : churn(100) < 0;
}

static int mode_rawclone(void)
{
	pid_t pid;

	if (churn(100) < 0)
		return 1;
	pid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
	if (pid == 0)
		syscall(SYS_exit_group, churn(7000) < 0);
	if (wait_say("raw clone", pid) < 0)
		return 1;
	return churn(3000) < 0;
}

static int mode_selfexec(unsigned n)
{
	char num[16];

	if (churn(200) < 0)
		return 1;
	say("step %u\n", n);
	if (!n)
		return 0;
	snprintf(num, sizeof(num), "%u", n - 1);
	execl(self, self, "selfexec", num, (char *)NULL);
	return 1;
}

static int mode_unsetenv(void)
{
	unsetenv("LD_PRELOAD");
	if (churn(100) < 0)
		return 1;
	return run_child("unsetenv") < 0;
}

static int mode_rlimit(void)
{
	struct rlimit r = { 16, 16 };

	if (setrlimit(RLIMIT_NOFILE, &r) < 0) {
		say("setrlimit: %s\n", strerror(errno));
		return 1;
	}
	if (churn(100) < 0)
		return 1;
	return run_child("rlimit") < 0;
}

static int mode_prctl(void)
{
	char name[17] = { 0 };

	if (prctl(PR_SET_NAME, "renamed", 0, 0, 0) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 || prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0) < 0) {
		say("prctl: %s\n", strerror(errno));
		return 1;
	}
	prctl(PR_GET_NAME, name, 0, 0, 0);
	say("name %s, no_new_privs %d, dumpable %d\n", name, prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0),
	    prctl(PR_GET_DUMPABLE, 0, 0, 0, 0));
	if (churn(100) < 0)
		return 1;
	return run_child("prctl") < 0;
}

static int mode_seccomp(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_socket, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_connect, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0) {
		say("seccomp: %s\n", strerror(errno));
		return 1;
	}
	say("socket(2) refused: %d\n", socket(AF_UNIX, SOCK_STREAM, 0) < 0 && errno == EPERM);
	if (churn(100) < 0)
		return 1;
	return run_child("seccomp") < 0;
}

static int mode_dropuid(void)
{
	if (getuid() != 0) {
		say("dropuid: not root\n");
		return 0;
	}
	if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
	    setresuid(65534, 65534, 65534) < 0) {
		say("dropuid: %s\n", strerror(errno));
		return 1;
	}
	if (churn(100) < 0)
		return 1;
	return run_child("dropuid") < 0;
}

static int mode_dup2(void)
{
	int fd = open("/dev/null", O_RDWR), n = 0;

	for (int i = 3; i < 1024; i++)
		if (i != fd && fcntl(i, F_GETFD) >= 0) {
			dup2(fd, i);
			n++;
		}
	(void)n;
	if (churn(1000) < 0)
		return 1;
	return run_child("dup2") < 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Heap calls from call sites not seen before (libc's own, different ones
 * in each round): the shim learns their rules from libunwind, which
 * checks the stack it reads through a pipe of its own
 * (preload/ownfds.h). */
static int new_sites(int round)
{
	char *v[40], name[32], *line = NULL, *s = NULL;
	struct dirent **list, *e;
	size_t cap = 0, len = 0;
	int n = 0;
	DIR *d;
	FILE *f;

	if (!round) {
		d = opendir("/");
		while (d && (e = readdir(d)))
			n++;
		if (d)
			closedir(d);
		for (int i = 0; i < 40; i++) {
			snprintf(name, sizeof(name), "%d", (i * 7919) % 101);
			v[i] = strdup(name);
			if (!v[i])
				return -1;
		}
		qsort(v, 40, sizeof(v[0]), cmp_str);
		for (int i = 0; i < 40; i++)
			free(v[i]);
		return n > 0 ? 0 : -1;
	}
	n = scandir("/usr/lib", &list, NULL, alphasort);
	for (int i = 0; i < n; i++)
		free(list[i]);
	if (n >= 0)
		free(list);
	f = fopen("/proc/self/stat", "r");
	if (f && getline(&line, &cap, f) > 0 && asprintf(&s, "%.8s", line) > 0)
		free(s);
	free(line);
	if (f)
		fclose(f);
	f = open_memstream(&s, &len);
	if (f) {
		fprintf(f, "%d", n);
		fclose(f);
		free(s);
	}
	s = strndup("abcdef", 3);
	free(s);
	return n > 0 ? 0 : -1;
}

/* new_sites(1) from stack pages libunwind has not checked yet (it keeps
 * the last 4 it checked): 6 frames of 4 KiB further down. */
static __attribute__((noinline)) int deeper(int k)
{
	volatile char pad[4096];

	pad[0] = (char)k;
	pad[4095] = pad[0];
	return k ? deeper(k - 1) + pad[4095] - (char)k : new_sites(1);
}

static int mode_unwfds(const char *dir)
{
	char pa[4096], pb[4096], buf[32] = { 0 };
	struct stat sb;
	int a, b;
	ssize_t n;

	snprintf(pa, sizeof(pa), "%s/unwfds.a", dir);
	snprintf(pb, sizeof(pb), "%s/unwfds.b", dir);
	for (int fd = 3; fd < 64; fd++)
		close(fd);
	if (churn(200) < 0 || new_sites(0) < 0)
		return 1;
	a = open(pa, O_RDWR | O_CREAT | O_TRUNC, 0600);
	b = open(pb, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	say("first files at %d and %d\n", a, b);
	for (int fd = 3; fd < 64; fd++)
		close(fd);
	a = open(pa, O_RDWR | O_CREAT | O_TRUNC, 0600);
	b = open(pb, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (a < 0 || b < 0 || write(a, "0123456789", 10) != 10 || lseek(a, 0, SEEK_SET) != 0)
		return 1;
	if (deeper(6) < 0)
		return 1;
	n = read(a, buf, 10);
	say("read back %zd: %s\n", n, n > 0 ? buf : "-");
	say("unwritten file: %lld bytes\n", fstat(b, &sb) == 0 ? (long long)sb.st_size : -1ll);
	return 0;
}

static int mode_proctitle(int argc, char **argv)
{
	char *start = argv[0], *end = argv[argc - 1] + strlen(argv[argc - 1]) + 1;
	size_t n = 0;

	if (!(self = strdup(self)))
		return 1;
	for (char **e = environ; *e; e++, n++)
		if (*e == end)
			end += strlen(*e) + 1;
	for (size_t i = 0; i < n; i++)
		if (!(environ[i] = strdup(environ[i])))
			return 1;
	memset(start, 0, (size_t)(end - start));
	snprintf(start, (size_t)(end - start), "wl_host: a title");
	if (churn(100) < 0)
		return 1;
	return run_child("proctitle") < 0;
}

static int mode_alloc(unsigned mb)
{
	size_t n = (size_t)mb << 20;
	char *p = malloc(n);

	if (!p) {
		say("malloc(%u MiB) failed\n", mb);
		return 1;
	}
	for (size_t i = 0; i < n; i += 4096)
		p[i] = 1;
	free(p);
	say("allocated %u MiB\n", mb);
	return 0;
}

int main(int argc, char **argv)
{
	const char *m = argc > 1 ? argv[1] : "";

	self = argv[0][0] == '/' ? argv[0] : "/proc/self/exe";
	if (!strcmp(m, "child"))
		return mode_child();
	if (!strcmp(m, "mallocapi"))
		return mode_mallocapi();
	if (!strcmp(m, "closefrom") && argc > 2)
		return mode_closefrom(argv[2]);
	if (!strcmp(m, "sigblock"))
		return mode_sigblock();
	if (!strcmp(m, "threads") && argc > 2)
		return mode_threads((unsigned)atoi(argv[2]));
	if (!strcmp(m, "forks") && argc > 2)
		return mode_forks((unsigned)atoi(argv[2]));
	if (!strcmp(m, "spawn"))
		return mode_spawn();
	if (!strcmp(m, "rawclone"))
		return mode_rawclone();
	if (!strcmp(m, "selfexec") && argc > 2)
		return mode_selfexec((unsigned)atoi(argv[2]));
	if (!strcmp(m, "unsetenv"))
		return mode_unsetenv();
	if (!strcmp(m, "rlimit"))
		return mode_rlimit();
	if (!strcmp(m, "prctl"))
		return mode_prctl();
	if (!strcmp(m, "seccomp"))
		return mode_seccomp();
	if (!strcmp(m, "dropuid"))
		return mode_dropuid();
	if (!strcmp(m, "dup2"))
		return mode_dup2();
	if (!strcmp(m, "alloc") && argc > 2)
		return mode_alloc((unsigned)atoi(argv[2]));
	if (!strcmp(m, "proctitle"))
		return mode_proctitle(argc, argv);
	if (!strcmp(m, "unwfds") && argc > 2)
		return mode_unwfds(argv[2]);
	fprintf(stderr, "usage: wl_host MODE [ARG]\n");
	return 2;
}
