-- shimmer store, schema version 14: a process's CPU time at its exit.
--
-- The collector reads each thread's CPU time from /proc every 100 ms
-- (cpu_time).  A process reaped by its parent before the collector's last
-- reading (a pool worker, a torchrun worker that exits and is waited for at
-- once), and every thread that ended before its process, lost what it ran
-- since its last reading: children that each burnt 302 ms of CPU were
-- stored with 176 to 265 ms.  From wire version 12 the shim reads the
-- process's own CPU time as it says BYE (exit(), a return from main, _exit)
-- and the collector stores it here: every thread's, ended ones too
-- (CLOCK_PROCESS_CPUTIME_ID, ns), and getrusage()'s split of it into user
-- and system time.  NULL: the process ended without that reading (killed,
-- SIGKILL above all; it exec'd; a crash; the collector lost; attached with
-- shimmer attach; a store written before).

ALTER TABLE processes ADD COLUMN exit_cpu_ns INTEGER;
ALTER TABLE processes ADD COLUMN exit_user_ns INTEGER;
ALTER TABLE processes ADD COLUMN exit_sys_ns INTEGER;

-- One row per process: its CPU time over its life, whole or not.
-- (the view's text is stored in every store: its comments are up here)
-- t: the sum of its threads' last readings, and when the latest was taken.
-- cpu_ns: the larger of that sum and the exit reading (the collector may
-- read /proc after the BYE, the process still running its last
-- destructors), NULL when it has neither.  final: 1 when the exit reading
-- is there, so cpu_ns is the process's to its end (read_ns is then end_ns);
-- 0 when cpu_ns stops at its last reading (read_ns), which is short of
-- its end by what it ran after it, and of its ended threads' last 100 ms.
CREATE VIEW IF NOT EXISTS process_cpu AS
WITH l AS (
SELECT proc_id, tid, max(ts_ns) AS ts_ns FROM cpu_time GROUP BY proc_id, tid),
t AS (
SELECT c.proc_id, sum(c.cpu_ns) AS cpu_ns, max(c.ts_ns) AS read_ns, count(*) AS threads
FROM cpu_time c JOIN l ON l.proc_id = c.proc_id AND l.tid = c.tid AND l.ts_ns = c.ts_ns
GROUP BY c.proc_id)
SELECT p.proc_id,
CASE WHEN p.exit_cpu_ns IS NULL THEN t.cpu_ns
ELSE max(p.exit_cpu_ns, coalesce(t.cpu_ns, 0)) END AS cpu_ns,
p.exit_user_ns AS user_ns, p.exit_sys_ns AS sys_ns,
p.exit_cpu_ns IS NOT NULL AS final,
CASE WHEN p.exit_cpu_ns IS NOT NULL THEN p.end_ns ELSE t.read_ns END AS read_ns,
coalesce(t.threads, 0) AS threads_read
FROM processes p LEFT JOIN t USING (proc_id);

INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', '14');
