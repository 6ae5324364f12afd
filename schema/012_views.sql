-- shimmer store, schema version 12: two views that said less than
-- docs/schema.md promises.
--
-- python_frames_named joined the strings table inside, so the row that
-- stands for the frames left out of a deep stack (file_id = func_id = 0,
-- no such string) was missing from it, as were the frames whose names
-- never arrived: both are there now, with file and function NULL.
--
-- kernels_in_ranges searched every earlier range of the launching thread
-- for each kernel (a run of N steps, each a range, took time in N^2: 20
-- minutes for 100,000 kernels), and took the deepest open range for the
-- innermost, which it is not once NVTX domains interleave (a pop closes the
-- innermost range of its own domain: an older range of another domain can
-- be deeper than the range opened last).  It now takes, for each launch,
-- the range its thread opened last at or before it, and, if that one had
-- closed by then, walks out through parent_id to the first one still open:
-- the ranges open at an instant are exactly that range's enclosing chain
-- (parent_id is the range opened last among those open at a push).  One
-- sort of the thread's launches and ranges, with or without the readers'
-- indexes.  A range is open from start_ns to before end_ns.

DROP VIEW IF EXISTS python_frames_named;
CREATE VIEW python_frames_named AS
SELECT f.*, fs.text AS file, fn.text AS function
FROM python_frames f
LEFT JOIN strings fs ON fs.proc_id = f.proc_id AND fs.id = f.file_id
LEFT JOIN strings fn ON fn.proc_id = f.proc_id AND fn.id = f.func_id;

DROP VIEW IF EXISTS kernels_in_ranges;
CREATE VIEW kernels_in_ranges AS
WITH RECURSIVE
-- each thread's kernel launches and its push ranges' starts; a range
-- opened at the instant of a launch is open for it
ev (proc_id, tid, t, o, kernel_id, range_id) AS (
	SELECT proc_id, launch_tid, launch_ns, 1, id, NULL FROM kernels_named
	WHERE launch_tid IS NOT NULL
	UNION ALL
	SELECT proc_id, tid, start_ns, 0, NULL, id FROM ranges WHERE kind = 'push'),
-- the range the thread opened last at or before each launch (a thread's
-- ranges take ids in the order it opened them)
latest (kernel_id, t, range_id) AS (
	SELECT kernel_id, t, max(range_id) OVER (PARTITION BY proc_id, tid ORDER BY t, o
		ROWS UNBOUNDED PRECEDING)
	FROM ev),
-- out through the enclosing ranges while the one in hand had closed
walk (kernel_id, t, range_id, end_ns, parent_id) AS (
	SELECT l.kernel_id, l.t, r.id, r.end_ns, r.parent_id
	FROM latest l JOIN ranges r ON r.id = l.range_id
	WHERE l.kernel_id IS NOT NULL
	UNION ALL
	SELECT w.kernel_id, w.t, r.id, r.end_ns, r.parent_id
	FROM walk w JOIN ranges r ON r.id = w.parent_id
	WHERE w.end_ns <= w.t AND r.id < w.range_id),
innermost (kernel_id, range_id) AS (
	SELECT kernel_id, range_id FROM walk WHERE end_ns IS NULL OR end_ns > t)
-- joined on the kernel's key: whichever side SQLite takes first (a query
-- that needs range_id may start from innermost), the other is one lookup
SELECT k.*, i.range_id
FROM kernels_named k LEFT JOIN innermost i ON i.kernel_id = k.id;

INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', '12');
