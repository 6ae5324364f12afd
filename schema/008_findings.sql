-- shimmer store, schema version 8: what the findings (shimmer bottlenecks,
-- shimmer report) need besides the GPU timeline: where the CPU waited for
-- the GPU, and how much CPU time each thread used over the run.

-- The caller's stacks of a synchronizing call, copy or memset that kept its
-- thread 50 us or more (wire.h's SHM_BLOCKED_STACK_NS): where the CPU
-- waited for the GPU.  NULL for shorter calls and every other function.
ALTER TABLE cuda_calls ADD COLUMN stack_id INTEGER;   -- stack_frames.stack_id
ALTER TABLE cuda_calls ADD COLUMN pystack_id INTEGER; -- python_frames.pystack_id

-- Each thread's CPU time, read by the collector about every 100 ms while
-- the process is connected (wire.h SHM_CPUTIME_PERIOD_NS), a row when it
-- changed (so a thread asleep adds none): from /proc/PID/task/TID/schedstat
-- (the scheduler's run and run-queue wait times, in ns), or where the kernel
-- has none, from .../stat (user + system time, in clock ticks of 10 ms at
-- USER_HZ 100; wait_ns NULL).  Between two rows the rise happened within
-- the period before the later one.  Busy share over an interval: the rise
-- of cpu_ns (on a CPU) and of wait_ns (runnable, waiting for one) over its
-- length.
CREATE TABLE IF NOT EXISTS cpu_time (
	proc_id INTEGER NOT NULL,
	tid INTEGER NOT NULL,
	ts_ns INTEGER NOT NULL,        -- when read (the host's CLOCK_MONOTONIC)
	cpu_ns INTEGER NOT NULL,       -- time on a CPU since the thread started
	wait_ns INTEGER,               -- time runnable but waiting for a CPU; NULL: unknown
	PRIMARY KEY (proc_id, tid, ts_ns)
) WITHOUT ROWID;

INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', '8');
