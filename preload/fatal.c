/*
 * The fatal-signal handler (fatal.h).  Async-signal-safe throughout: a
 * send(2) on the control socket (conn.c checks it is still ours), the
 * record clock, tgkill.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "conn.h"
#include "fatal.h"
#include "log.h"
#include "shim.h"

static const int fatal_sigs[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };

/* The first fatal signal of the process is the one reported. */
static int sent;

static void on_fatal(int sig, siginfo_t *si, void *uc)
{
	int saved = errno, code = si ? si->si_code : 0;

	(void)uc;
	if (__atomic_load_n(&shim_live.on, __ATOMIC_ACQUIRE) && (uint32_t)getpid() == shim.pid &&
	    !__atomic_exchange_n(&sent, 1, __ATOMIC_ACQ_REL))
		conn_signal(sig, code, si ? (uint64_t)(uintptr_t)si->si_addr : 0,
			    (uint32_t)gettid(), clock_now());
	/* The action is the default again (SA_RESETHAND).  A fault (si_code
	 * > 0: the kernel's) happens again when we return; a signal that was
	 * sent is sent again, to this thread, and delivered to the default
	 * action once we return (or at once: it may not be blocked). */
	if (code <= 0)
		syscall(SYS_tgkill, getpid(), gettid(), sig);
	errno = saved;
}

void fatal_setup(void)
{
	struct sigaction sa = { .sa_sigaction = on_fatal,
				.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK | SA_RESTART };
	unsigned int i;

	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof(fatal_sigs) / sizeof(fatal_sigs[0]); i++) {
		struct sigaction cur;

		if (sigaction(fatal_sigs[i], 0, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) &&
		    cur.sa_handler == SIG_DFL && sigaction(fatal_sigs[i], &sa, 0) < 0)
			log_debug("signal %d: %s; not reported", fatal_sigs[i], strerrordesc_np(errno));
	}
}

void fatal_fork_child(void)
{
	sent = 0;
}
