/*
 * Process headings and drop warnings of the memory commands; see present.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "drops.h"
#include "fmt.h"
#include "present.h"

const char *const present_mem_formats[] = {
	[EMIT_TABLE] = "table", [EMIT_CSV] = "csv", [EMIT_JSON] = "json",
	[PRESENT_FOLDED] = "folded", NULL,
};

size_t present_lost_line(char *buf, size_t len, const struct model_proc *p, int gpu,
			 const char *effect)
{
	int64_t n = p->dropped_host + (gpu ? p->dropped_gpu : 0);
	size_t at = 0;

	if (!n) {
		if (len)
			buf[0] = 0;
		return 0;
	}
#define ADD(...) (at += (size_t)snprintf(buf + (at < len ? at : len), \
					 at < len ? len - at : 0, __VA_ARGS__))
	ADD("%lld events of this process were lost before the store (", (long long)n);
	for (size_t i = 0, k = 0; i < p->ndrops; i++)
		if ((gpu || strcmp(p->drops[i].reason, "cupti") != 0) &&
		    drop_is_loss(p->drops[i].reason))
			ADD("%s%s %lld", k++ ? ", " : "", p->drops[i].reason,
			    (long long)p->drops[i].events);
	ADD("): %s", effect);
	/* the rings' losses have a remedy; CUPTI's, its buffers full, not this one */
	if (p->dropped_host)
		ADD("; SHIMMER_LOSSLESS=1 keeps every event%s",
		    gpu && p->dropped_gpu ? " the rings lost (not CUPTI's)" : "");
#undef ADD
	return at;
}

void present_proc(struct emit *e, const struct model_proc *p, const char *effect)
{
	emit_kv(e, "proc_id", EMIT_INT, ev_int(p->proc_id));
	emit_kv(e, "pid", EMIT_INT, ev_int(p->pid));
	emit_kv(e, "rank", EMIT_INT, p->rank >= 0 ? ev_int(p->rank) : ev_none());
	emit_kv(e, "exe", EMIT_STR, ev_str(p->exe));
	emit_kv(e, "dropped_events", EMIT_INT, ev_int(p->dropped_host));
	emit_kv(e, "complete", EMIT_BOOL, ev_int(model_proc_complete(p)));
	emit_kv(e, "ended", EMIT_BOOL, ev_int(p->end_known));
	emit_kv(e, "host_unseen", EMIT_STR, p->host_unseen ? ev_str(p->host_unseen) : ev_none());
	/* CSV rows carry no sentence: what they miss is said on stderr */
	if (e->fmt == EMIT_CSV && p->host_unseen)
		cli_warn("pid %lld (proc %lld): %s", (long long)p->pid, (long long)p->proc_id,
			 p->host_unseen);
	emit_text(e, "\npid %lld (proc %lld", (long long)p->pid, (long long)p->proc_id);
	if (p->rank >= 0)
		emit_text(e, ", rank %lld", (long long)p->rank);
	emit_text(e, ") %s\n", fmt_esc(p->exe ? p->exe : ""));
	present_incomplete(e, p, "  ", 0, effect, effect);
}

void present_incomplete(struct emit *e, const struct model_proc *p, const char *indent, int gpu,
			const char *lost, const char *cut)
{
	char line[PRESENT_LOST_LINE];

	if (p->cut)
		emit_text(e, "%sWARNING: %s: %s\n", indent, PRESENT_CUT, cut);
	else if (!p->end_known)
		emit_text(e, "%sWARNING: %s\n", indent, PRESENT_RUNNING);
	if (present_lost_line(line, sizeof(line), p, gpu, lost))
		emit_text(e, "%sWARNING: %s\n", indent, fmt_esc(line));
	if (p->host_unseen)
		emit_text(e, "%sWARNING: %s\n", indent, p->host_unseen);
}

size_t present_stacks_line_of(char *buf, size_t len, const struct model_proc *p,
			      const char *those, const char *exact)
{
	long long n = (long long)p->stacks_refused, py = (long long)p->pystacks_refused;
	int w = 0;

	if (n && py)
		w = snprintf(buf, len, "%lld stack captures and %lld Python ones were refused"
			     " because the shim's stack tables were full: %s are shown as (no"
			     " stack) unless a Python line names them, or without their Python"
			     " line; %s", n, py, those, exact);
	else if (n)
		w = snprintf(buf, len, "%lld stack captures were refused because the shim's"
			     " stack table was full: %s are shown as (no stack) unless a Python"
			     " line names them; %s", n, those, exact);
	else if (py)
		w = snprintf(buf, len, "%lld Python stack captures were refused because the"
			     " shim's Python stack table was full: %s are shown at their native"
			     " site, not their Python line; %s", py, those, exact);
	else if (len)
		buf[0] = 0;
	return w > 0 ? (size_t)w : 0;
}

size_t present_stacks_line(char *buf, size_t len, const struct model_proc *p)
{
	return present_stacks_line_of(buf, len, p, "those allocations",
				      "their counts and bytes are exact");
}

void present_stacks_refused(struct emit *e, const struct model_proc *p, const char *indent)
{
	char line[PRESENT_STACKS_LINE];

	emit_kv(e, "stack_captures_refused", EMIT_INT, ev_int(p->stacks_refused));
	emit_kv(e, "python_stack_captures_refused", EMIT_INT, ev_int(p->pystacks_refused));
	if (present_stacks_line(line, sizeof(line), p))
		emit_text(e, "%sWARNING: %s\n", indent, line);
}

size_t present_unnamed_line(char *buf, size_t len, const struct model_proc *p)
{
	long long py = (long long)p->unnamed_frames, stacks = (long long)p->unnamed_stacks;
	long long mods = (long long)p->unnamed_modules;
	size_t at = 0;

	if (len)
		buf[0] = 0;
	if (!py && !mods)
		return 0;
#define ADD(...) (at += (size_t)snprintf(buf + (at < len ? at : len), \
					 at < len ? len - at : 0, __VA_ARGS__))
	if (py)
		ADD("%lld Python frame%s (in %lld stack%s)%s", py, py == 1 ? "" : "s", stacks,
		    stacks == 1 ? "" : "s", mods ? " and " : "");
	if (mods)
		ADD("the native frames of %lld loaded object%s", mods, mods == 1 ? "" : "s");
	ADD(" have no name: the shim could not announce it to the collector in time (its socket"
	    " full, as under load); shown as %s%s%s, never under another frame's name (a site"
	    " named in some of its stacks only shows as two rows)", py ? "'?'" : "",
	    py && mods ? " and " : "", mods ? "'?+0xOFFSET [name not recorded]'" : "");
#undef ADD
	return at;
}

void present_unnamed(struct emit *e, const struct model_proc *p, const char *indent)
{
	char line[PRESENT_UNNAMED_LINE];

	emit_kv(e, "unnamed_frames", EMIT_INT, ev_int(p->unnamed_frames));
	emit_kv(e, "unnamed_modules", EMIT_INT, ev_int(p->unnamed_modules));
	if (!present_unnamed_line(line, sizeof(line), p))
		return;
	if (e->fmt == EMIT_CSV)
		cli_warn("pid %lld (proc %lld): %s", (long long)p->pid, (long long)p->proc_id, line);
	emit_text(e, "%sWARNING: %s\n", indent, line);
}

/* present_warn()'s lines of one process. */
static void warn_proc(const struct model_proc *p, int gpu, const char *lost, const char *cut)
{
	char line[PRESENT_LOST_LINE];

	if (p->cut)
		cli_warn("pid %lld (proc %lld): %s%s%s", (long long)p->pid, (long long)p->proc_id,
			 PRESENT_CUT, cut ? ": " : "", cut ? cut : "");
	else if (!p->end_known)
		cli_warn("pid %lld (proc %lld): %s", (long long)p->pid, (long long)p->proc_id,
			 PRESENT_RUNNING);
	if (present_lost_line(line, sizeof(line), p, gpu, lost))
		cli_warn("pid %lld (proc %lld): %s", (long long)p->pid, (long long)p->proc_id, line);
	if (p->host_unseen)
		cli_warn("pid %lld (proc %lld): %s", (long long)p->pid, (long long)p->proc_id,
			 p->host_unseen);
}

void present_warn(struct model *m, int gpu, const char *lost, const char *cut)
{
	for (size_t i = 0; i < model_nprocs(m); i++)
		if (model_proc(m, i)->selected)
			warn_proc(model_proc(m, i), gpu, lost, cut);
}

void present_warn_unnamed(const struct model_proc *p)
{
	char line[PRESENT_UNNAMED_LINE];

	if (present_unnamed_line(line, sizeof(line), p))
		cli_warn("pid %lld (proc %lld): %s", (long long)p->pid, (long long)p->proc_id,
			 line);
}

void present_warn_folded(struct model *m, int live)
{
	const char *effect = live ? "blocks whose free was lost count as live, lost allocations"
				    " are missing: its stacks' bytes may be wrong either way"
				  : "lost allocations are missing: its stacks' bytes are lower"
				    " bounds";

	for (size_t i = 0; i < model_nprocs(m); i++) {
		const struct model_proc *p = model_proc(m, i);
		char line[PRESENT_STACKS_LINE];

		if (!p->selected)
			continue;
		warn_proc(p, 0, effect, NULL);
		if (present_stacks_line(line, sizeof(line), p))
			cli_warn("pid %lld (proc %lld): %s", (long long)p->pid,
				 (long long)p->proc_id, line);
		present_warn_unnamed(p);
	}
}

int present_need_stacks(struct model *m)
{
	if (model_schema_version(m) >= 3)
		return 0;
	cli_error("the store has no call stacks (schema version %d; 3 or later needed)",
		  model_schema_version(m));
	return -EINVAL;
}

void present_estimated_note(struct emit *e, int any, const char *indent)
{
	if (any)
		emit_text(e, "\n%s~: estimated from sampled allocations\n", indent);
}

int present_quiet_add(struct present_quiet *q, const struct model_proc *p)
{
	const char *exe = p->exe_base ? p->exe_base : "?";
	size_t j;

	for (j = 0; j < q->n && strcmp(q->v[j].exe, exe) != 0; j++)
		;
	if (j == q->n) {
		if (q->n == q->cap) {
			size_t cap = q->cap ? 2 * q->cap : 8;
			struct present_quiet_exe *v = realloc(q->v, cap * sizeof(*v));

			if (!v)
				return -ENOMEM;
			q->v = v;
			q->cap = cap;
		}
		q->v[q->n++] = (struct present_quiet_exe){ .exe = exe };
	}
	q->v[j].n++;
	q->procs++;
	return 0;
}

int present_settled(const struct model_proc *p)
{
	return model_proc_complete(p) && p->end_known && !p->cut && !p->stacks_refused &&
	       !p->pystacks_refused && !p->unnamed_frames && !p->unnamed_modules &&
	       !p->host_unseen;
}

int present_quiet(struct present_quiet *q, const struct emit *e, const struct model_proc *p,
		  size_t rows)
{
	if (e->fmt != EMIT_TABLE || rows || !present_settled(p))
		return 0;
	return present_quiet_add(q, p) == 0;
}

void present_quiet_list(struct present_quiet *q, struct emit *e)
{
	for (size_t j = 0; j < q->n; j++)
		emit_text(e, "%s %s x%zu", j ? "," : ":", fmt_esc(q->v[j].exe), q->v[j].n);
	emit_text(e, "\n");
	free(q->v);
	memset(q, 0, sizeof(*q));
}

void present_quiet_end(struct present_quiet *q, struct emit *e, const char *what)
{
	/* none counted, none held (q->v grows with the first) */
	if (!q->procs)
		return;
	emit_text(e, "\n%zu more process%s with %s", q->procs, q->procs == 1 ? "" : "es", what);
	present_quiet_list(q, e);
}
