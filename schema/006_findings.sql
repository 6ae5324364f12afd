-- shimmer store, schema version 6: what the findings (shimmer bottlenecks,
-- shimmer report) need besides the GPU timeline: where the CPU waited for
-- the GPU, and how much CPU time each thread used over the run.

-- The caller's stacks of a synchronizing call, copy or memset that kept its
-- thread 50 us or more (wire.h's SHM_BLOCKED_STACK_NS): where the CPU
-- waited for the GPU.  NULL for shorter calls and every other function.
ALTER TABLE cuda_calls ADD COLUMN stack_id INTEGER;   -- stack_frames.stack_id
ALTER TABLE cuda_calls ADD COLUMN pystack_id INTEGER; -- python_frames.pystack_id

-- Each thread's CPU time (user + system), read by the collector from
-- /proc/PID/task/TID/stat about every 100 ms while the process is connected,
-- a row when it changed (so a thread asleep adds none).  Busy share between
-- two rows: (cpu_ns difference) / (ts_ns difference); the kernel counts in
-- clock ticks (10 ms at USER_HZ 100), so shares over less than a second
-- are coarse.
CREATE TABLE IF NOT EXISTS cpu_time (
	proc_id INTEGER NOT NULL,
	tid INTEGER NOT NULL,
	ts_ns INTEGER NOT NULL,        -- when read (the host's CLOCK_MONOTONIC)
	cpu_ns INTEGER NOT NULL,       -- the thread's CPU time since it started
	PRIMARY KEY (proc_id, tid, ts_ns)
) WITHOUT ROWID;

INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', '6');
