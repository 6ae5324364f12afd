/*
 * Fatal signals: so that the store can say a process died of SIGSEGV
 * rather than that it disconnected, the shim handles SIGSEGV, SIGBUS,
 * SIGFPE, SIGILL and SIGABRT, where the program left the default action
 * (as it has when the constructor runs, before main), sends SIGNAL and
 * lets the default action happen as it would have: the handler is reset
 * on entry (SA_RESETHAND), a fault returns into the instruction that
 * faults again, a sent signal (kill, raise, abort) is sent again.  The
 * process ends with the same signal, status and core dump.
 *
 * A handler the program installs later replaces the shim's: the program's
 * own handling stands, and the shim does not see that signal (`shimmer
 * run` still records how its command ended).  sigaction(2) then reports
 * the shim's handler as the previous one, not SIG_DFL; a program that
 * calls it from its own handler chains to it, which is harmless.
 */
#ifndef SHIMMER_FATAL_H
#define SHIMMER_FATAL_H

/* Installs the handler where the action is the default.  Constructor. */
void fatal_setup(void);

/* Fork child: its first fatal signal is its own to report. */
void fatal_fork_child(void);

#endif /* SHIMMER_FATAL_H */
