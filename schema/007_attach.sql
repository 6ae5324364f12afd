-- shimmer store, schema version 7: processes traced by attaching to them
-- (shimmer attach: eBPF uprobes instead of the preloaded shim), and off-CPU
-- time (from the scheduler: shimmer attach, and preloaded runs with
-- SHIMMER_OFFCPU=1).

-- 'preload': traced by the shim from its start; 'attach': by shimmer attach,
-- from the attach (start_ns) to the detach or its exit (end_ns).
ALTER TABLE processes ADD COLUMN traced_by TEXT NOT NULL DEFAULT 'preload';
-- Off-CPU time: NULL when not asked for, 'traced', or 'unavailable' with
-- the reason in offcpu_detail (the collector lacked CAP_BPF, ...).
ALTER TABLE processes ADD COLUMN offcpu TEXT;
ALTER TABLE processes ADD COLUMN offcpu_detail TEXT;

-- One row per interval a traced thread spent off the CPU: from the switch
-- that took it off (the user stack then: what it was blocked in) to the
-- switch that put it back.  Intervals that began before tracing began are
-- absent; one still open when tracing stopped ends there, with open = 1.
CREATE TABLE IF NOT EXISTS offcpu (
	id INTEGER PRIMARY KEY,
	proc_id INTEGER NOT NULL,
	tid INTEGER NOT NULL,
	start_ns INTEGER NOT NULL,     -- off the CPU
	end_ns INTEGER NOT NULL,       -- back on it (or tracing stopped, open = 1)
	state TEXT NOT NULL,           -- 'sleep' (I/O, a lock, a wait), 'disk'
	                               -- (uninterruptible), 'preempted' (runnable,
	                               -- waiting for a CPU), 'other'
	stack_id INTEGER,              -- stack_frames.stack_id; NULL when none
	open INTEGER NOT NULL          -- 1: still off when tracing stopped
);

-- Off-CPU time per thread, stack and state: intervals and their total.
CREATE VIEW IF NOT EXISTS offcpu_stacks AS
SELECT proc_id, tid, stack_id, state, count(*) AS intervals,
	sum(end_ns - start_ns) AS total_ns, max(end_ns - start_ns) AS max_ns
FROM offcpu
GROUP BY proc_id, tid, stack_id, state;

INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', '7');
