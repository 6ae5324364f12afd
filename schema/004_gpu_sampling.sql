-- shimmer store, schema version 4: GPU sampling.
--
-- By default the shim has CUPTI record only inside short windows (a few ms
-- every second or two, at a random point of each period), so that tracing
-- a loop of many small kernels costs about 1%.  Kernels, copies and their
-- launching API calls then exist only for work launched inside a window;
-- counts and totals over [since, end] are estimated by scaling with the
-- gpu_sampling view's scale (below).  A process whose gpu_sampled_since_ns
-- is NULL had its GPU activity recorded whole (SHIMMER_GPU=all).

ALTER TABLE processes ADD COLUMN gpu_sampled_since_ns INTEGER; -- sampling began; NULL: not sampled
-- 1 for the runtime calls that start GPU work (launches, copies, memsets);
-- the daemon sets it from the wire format, as it does the rest of the row.
ALTER TABLE functions ADD COLUMN gpu_work INTEGER NOT NULL DEFAULT 0;

CREATE TABLE IF NOT EXISTS gpu_windows (
	id INTEGER PRIMARY KEY,
	proc_id INTEGER NOT NULL,
	start_ns INTEGER NOT NULL,     -- recording on (host clock, as every *_ns)
	end_ns INTEGER NOT NULL,       -- recording off
	calls INTEGER NOT NULL DEFAULT 0 -- runtime launch, copy and memset calls meanwhile
);

-- Per sampled process: how much of its sampled span was traced, and the
-- factor that turns what the windows recorded into estimates for the whole
-- span.  until_ns is the process's end (or the last window's, if later).
-- Recording slows a process inside its windows, so the share of time
-- traced would undercount; the share of its GPU-work calls (functions
-- with gpu_work, counted exactly in function_counts) made inside windows
-- does not.  scale = calls / calls_traced, or span_ns / traced_ns when no
-- such call fell in a window.
CREATE VIEW IF NOT EXISTS gpu_sampling AS
SELECT proc_id, since_ns, until_ns, until_ns - since_ns AS span_ns, windows, traced_ns,
	CASE WHEN until_ns > since_ns THEN traced_ns * 1.0 / (until_ns - since_ns) END
		AS traced_share,
	calls, calls_traced,
	CASE WHEN calls_traced > 0 THEN calls * 1.0 / calls_traced
		WHEN traced_ns > 0 AND until_ns > since_ns
		THEN (until_ns - since_ns) * 1.0 / traced_ns END AS scale
FROM (SELECT p.proc_id, p.gpu_sampled_since_ns AS since_ns,
		-- NULL, not 0, for a live process that has no window yet
		nullif(max(coalesce(p.end_ns, 0), coalesce(w.last_ns, 0)), 0) AS until_ns,
		coalesce(w.windows, 0) AS windows, coalesce(w.traced_ns, 0) AS traced_ns,
		coalesce(w.calls, 0) AS calls_traced,
		(SELECT coalesce(sum(fc.count), 0) FROM function_counts fc
			JOIN functions f USING (fn_id)
			WHERE fc.proc_id = p.proc_id AND f.gpu_work) AS calls
	FROM processes p
	LEFT JOIN (SELECT proc_id, count(*) AS windows, sum(end_ns - start_ns) AS traced_ns,
			sum(calls) AS calls, max(end_ns) AS last_ns
			FROM gpu_windows GROUP BY proc_id) w USING (proc_id)
	WHERE p.gpu_sampled_since_ns IS NOT NULL);

INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', '4');
