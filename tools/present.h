/*
 * What the memory commands (leaks, peak, temporary, allocations) say of each process
 * besides their rows, in every format: the heading, whether events
 * lost between the shim and the store (drops) touch the answer, in words
 * that name what they do to it, and whether the shim's stack tables were
 * full (compare and summary say that too).  The summary has its own,
 * longer heading.
 */
#ifndef SHIMMER_TOOLS_PRESENT_H
#define SHIMMER_TOOLS_PRESENT_H

#include "emit.h"
#include "model.h"

/*
 * Table: "pid P (proc N, rank R) EXE" and, when p lost heap events or its
 * recording was cut short (p->cut), a "WARNING: ..." line for each, ending
 * with effect (what the loss does to this command's answer).  JSON: the
 * process's members (proc_id, pid, rank, exe, dropped_events, complete).
 * CSV: nothing.
 */
void present_proc(struct emit *e, const struct model_proc *p, const char *effect);

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
