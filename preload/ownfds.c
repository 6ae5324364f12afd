/*
 * libunwind's pipe, held high and checked (ownfds.h).
 *
 * The hooks make the pipe with the system call itself, as glibc's pipe()
 * and pipe2() do (one call, errno on failure), so they need nothing
 * resolved and work before the constructor.  One load of a thread-local
 * flag is all they add to a program's own pipes.
 *
 * The pipe is process-wide (libunwind's static array), its identity
 * (device and inode, both ends of one pipe share them) kept here with its
 * numbers.  Two threads learning at once race only as libunwind itself
 * does; the worst a stale identity does is refuse one learning.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "conn.h"
#include "ownfds.h"
#include "shim.h"

static __thread int unwinding __attribute__((tls_model("initial-exec")));

static int vp_fd[2] = { -1, -1 };
static dev_t vp_dev;
static ino_t vp_ino;

/* 1: fd holds libunwind's pipe; 0: fd is closed; -1: something else is
 * there (the program's). */
static int holds_pipe(int fd)
{
	struct stat sb;

	if (fstat(fd, &sb) < 0)
		return errno == EBADF ? 0 : -1;
	return S_ISFIFO(sb.st_mode) && sb.st_dev == vp_dev && sb.st_ino == vp_ino ? 1 : -1;
}

int ownfds_unwind_begin(void)
{
	int r0, r1, saved = errno;

	unwinding = 1;
	if (__atomic_load_n(&vp_fd[0], __ATOMIC_ACQUIRE) < 0) {
		/* none yet: libunwind's first unwind makes it through pipe2() */
		r0 = r1 = 0;
	} else {
		r0 = holds_pipe(vp_fd[0]);
		r1 = holds_pipe(vp_fd[1]);
	}
	/* One end closed, the other still ours: libunwind would keep
	 * writing to the closed one and take every address for invalid.
	 * Closing ours too makes it start over with a new pipe. */
	if (r0 == 1 && r1 == 0)
		close(vp_fd[0]), r0 = 0;
	else if (r0 == 0 && r1 == 1)
		close(vp_fd[1]), r1 = 0;
	/* Both closed, or none made yet: libunwind may make its pipe now.
	 * If the program closed our socket (closefrom(3)) tracing is over
	 * (one line says so, now rather than at the next message), and no
	 * pipe is opened behind its back in a process that just closed every
	 * descriptor it did not open. */
	if (r0 == 0 && r1 == 0 && !conn_ok())
		r0 = -1;
	errno = saved;
	if (r0 < 0 || r1 < 0) {
		unwinding = 0;
		return -1;
	}
	return 0;
}

void ownfds_unwind_end(void)
{
	unwinding = 0;
}

/* A pipe libunwind made for the shim: moved high, remembered. */
static void adopt(int fd[2], int flags)
{
	int saved = errno, cloexec = !!(flags & O_CLOEXEC);
	struct stat sb;

	fd[0] = conn_move_high_as(fd[0], cloexec);
	fd[1] = conn_move_high_as(fd[1], cloexec);
	if (fstat(fd[0], &sb) == 0) {
		__atomic_store_n(&vp_fd[0], -1, __ATOMIC_RELAXED);
		vp_dev = sb.st_dev;
		vp_ino = sb.st_ino;
		__atomic_store_n(&vp_fd[1], fd[1], __ATOMIC_RELAXED);
		__atomic_store_n(&vp_fd[0], fd[0], __ATOMIC_RELEASE);
	}
	errno = saved;
}

SHIM_EXPORT int pipe2(int fd[2], int flags)
{
	int r = (int)syscall(SYS_pipe2, fd, flags);

	if (r == 0 && unlikely(unwinding))
		adopt(fd, flags);
	return r;
}

SHIM_EXPORT int pipe(int fd[2])
{
	int r = (int)syscall(SYS_pipe, fd);

	if (r == 0 && unlikely(unwinding))
		adopt(fd, 0);
	return r;
}
