/*
 * What the memory commands (leaks, peak, temporary, allocations) say of each process
 * besides their rows, in every format: the heading, whether events
 * lost between the shim and the store (drops) touch the answer, in words
 * that name what they do to it, and whether the shim's stack tables were
 * full (compare and summary say that too).  The summary has its own,
 * longer heading.  Folded lines (flame-graph input) and the export's files
 * carry neither: their commands say both on stderr (present_warn()), in
 * the sentences every command uses (present_lost_line(), PRESENT_CUT,
 * present_stacks_line()).
 */
#ifndef SHIMMER_TOOLS_PRESENT_H
#define SHIMMER_TOOLS_PRESENT_H

#include "emit.h"
#include "model.h"

/*
 * Table: "pid P (proc N, rank R) EXE" and, when p lost heap events or its
 * recording was cut short (p->cut), a "WARNING: ..." line for each, ending
 * with effect (what the loss does to this command's answer), and when it
 * had not ended when read, PRESENT_RUNNING's; when its host memory misses
 * pymalloc's arenas (model_proc.host_unseen), that sentence's.  JSON: the
 * process's members (proc_id, pid, rank, exe, dropped_events, complete,
 * ended: whether its end was recorded, host_unseen: that sentence or
 * null).  CSV: nothing but host_unseen's sentence, on stderr.
 */
void present_proc(struct emit *e, const struct model_proc *p, const char *effect);

/* present_proc()'s WARNING lines alone, in the table, after indent: the
 * cut recording's (": " cut after PRESENT_CUT), or a process not ended's
 * (PRESENT_RUNNING), the lost events' (present_lost_line(gpu, lost),
 * below), and model_proc.host_unseen's. */
void present_incomplete(struct emit *e, const struct model_proc *p, const char *indent, int gpu,
			const char *lost, const char *cut);

/* What a process with no end recorded that was not cut (model_proc
 * end_known 0: still running when read, e.g. a store a live service is
 * writing, or a row that never ended) means, in the words every command
 * uses. */
#define PRESENT_RUNNING "this process had not ended when the store was read (no end" \
	" recorded): its figures stop at its last event, and what is live there is" \
	" live now, not leaked"

/* What a cut recording (model_proc.cut) lost, in the words every command
 * uses. */
#define PRESENT_CUT "the collector was lost while this process ran: what it did after" \
	" the collector's last commit (the end recorded) was never stored, and how much" \
	" that was is not known"

/*
 * When the shim's stack tables were full (drops stack_full, pystack_full):
 * in the table, one "WARNING: ..." line after indent saying how many
 * captures were refused and that those allocations are shown as (no
 * stack) (unless a Python line names them) or without their Python line;
 * nothing when none was.  JSON: the
 * members stack_captures_refused and python_stack_captures_refused.  For
 * the commands that name call sites, after present_proc().
 */
void present_stacks_refused(struct emit *e, const struct model_proc *p, const char *indent);

/* That line's sentence, without "WARNING: ", into buf (the report's note,
 * the memory findings' coverage), truncated to len; its length, 0 (buf
 * empty) when no capture was refused. */
#define PRESENT_STACKS_LINE 320
size_t present_stacks_line(char *buf, size_t len, const struct model_proc *p);

/* The same sentence of other things than allocations: those names what
 * the refused captures' events are shown as ("the launches among them"),
 * exact what stays exact ("their GPU time is exact"). */
size_t present_stacks_line_of(char *buf, size_t len, const struct model_proc *p,
			      const char *those, const char *exact);

/*
 * Names that never reached the store (model_load_unnamed(), which the
 * caller ran): in the table, one "WARNING: ..." line after indent saying
 * how many Python frames (in how many stacks) and loaded objects have no
 * name, how they are shown ('?', '?+0xOFFSET [name not recorded]') and
 * that no frame is shown under another's name; nothing when all are
 * named.  JSON: the members unnamed_frames (Python frames) and
 * unnamed_modules.  CSV: the line on stderr ("shimmer: warning: pid P
 * (proc N): ...").  For the commands that print stacks or call sites.
 */
void present_unnamed(struct emit *e, const struct model_proc *p, const char *indent);

/* That line's sentence, without "WARNING: ", into buf (the report's note,
 * stderr beside folded lines), truncated to len; its length, 0 (buf
 * empty) when every name arrived. */
#define PRESENT_UNNAMED_LINE 480
size_t present_unnamed_line(char *buf, size_t len, const struct model_proc *p);

/*
 * The lost events' sentence, as present_proc() writes it: "N events of
 * this process were lost before the store (REASON N, ...): EFFECT;
 * SHIMMER_LOSSLESS=1 keeps every event" into buf, truncated to len.  The
 * rings' losses (dropped_host: heap, calls, ranges) or, with gpu, CUPTI's
 * too (dropped: what a command reading kernels misses).  Its length; 0
 * (buf empty) when p lost none of them.
 */
#define PRESENT_LOST_LINE 640
size_t present_lost_line(char *buf, size_t len, const struct model_proc *p, int gpu,
			 const char *effect);

/*
 * For the outputs that hold nothing but their data (folded lines, a
 * flame-graph tool's input; the export's files): for each selected
 * process of m, on stderr, "shimmer: warning: pid P (proc N): ..." with
 * PRESENT_CUT (and ": " cut, unless cut is NULL) when its recording was
 * cut, PRESENT_RUNNING when it had not ended, present_lost_line(gpu,
 * lost) when it lost events, and model_proc.host_unseen when its host
 * memory misses pymalloc's arenas.  Nothing for a process that lost
 * nothing.
 */
void present_warn(struct model *m, int gpu, const char *lost, const char *cut);

/*
 * The folded lines' version of the warnings (leaks, peak and export
 * --format folded or speedscope with a memory weight): present_warn() of
 * the rings' losses with what they do to the lines (live: the lines weigh
 * blocks live at an instant, which a lost free leaves live; else every
 * allocation's bytes, which lost allocations leave lower bounds), and
 * present_stacks_line()'s and present_unnamed_line()'s, per process.
 */
void present_warn_folded(struct model *m, int live);

/* present_unnamed_line() on stderr, "shimmer: warning: pid P (proc N):
 * ...", when p has names missing; for outputs that hold data alone. */
void present_warn_unnamed(const struct model_proc *p);

/*
 * The processes a memory command's table leaves out: those with no row to
 * show and nothing to warn of (complete, ended, no stack capture refused).
 * A run of a Python installed by pyenv is 78 shell and env processes
 * around the interpreter: 78 empty headings before the one that answers.
 * They are named at the end instead, one line: "N more processes with
 * WHAT: bash x60, env x10".  JSON and CSV keep every process.
 */
struct present_quiet_exe {
	const char *exe;
	size_t n;
};

struct present_quiet {
	struct present_quiet_exe *v;
	size_t n, cap, procs;
};

/* Whether p has nothing the commands warn of: complete, ended, not cut,
 * no stack capture refused, every name in the store, its host memory
 * whole (no host_unseen). */
int present_settled(const struct model_proc *p);

/* 1 when the table leaves p out (rows: what it would show of p; p must be
 * present_settled()), counted in q; 0 when p is shown (also when q cannot
 * grow). */
int present_quiet(struct present_quiet *q, const struct emit *e, const struct model_proc *p,
		  size_t rows);

/* The table's line naming q's processes (nothing when there are none),
 * "with " what; frees q. */
void present_quiet_end(struct present_quiet *q, struct emit *e, const char *what);

/* p counted in q whatever it holds (0, or -ENOMEM); and the names of q's
 * processes, ": bash x52, env x16\n", after a caller's own words (frees
 * q). */
int present_quiet_add(struct present_quiet *q, const struct model_proc *p);
void present_quiet_list(struct present_quiet *q, struct emit *e);

/* CSV's columns of present_stacks_refused()'s two counts, after the
 * command's "complete" (each row repeats its process's), and their values. */
#define PRESENT_STACKS_COLS                                                          \
	{ "stack_captures_refused", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 },           \
	{ "python_stack_captures_refused", NULL, EMIT_INT, 0, EMIT_IN_CSV, 0, 0 }
#define PRESENT_STACKS_VALS(p) ev_int((p)->stacks_refused), ev_int((p)->pystacks_refused)

/* 0 when m's store has call stacks (schema 3 on), which the memory
 * commands group by; else -EINVAL after one error line. */
int present_need_stacks(struct model *m);

/* The footnote for the "~" of estimated figures (sampled host heaps), in
 * the table only, when any figure shown was one; indent before the "~". */
void present_estimated_note(struct emit *e, int any, const char *indent);

/* The "--format" values of the memory commands: the emitter's and folded. */
#define PRESENT_FOLDED 3
extern const char *const present_mem_formats[];

#endif /* SHIMMER_TOOLS_PRESENT_H */
