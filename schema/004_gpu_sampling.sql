-- shimmer store, schema version 4: GPU sampling.
--
-- By default the shim has CUPTI record only inside short windows (a few ms
-- every second or two, at a random point of each period), so that tracing
-- a loop of many small kernels costs about 1%.  Kernels, copies and their
-- launching API calls then exist only for work launched inside a window;
-- counts and totals over [since, end] are estimated by scaling with the
-- traced share.  A process whose gpu_sampled_since_ns is NULL had its GPU
-- activity recorded whole (SHIMMER_GPU=all).

ALTER TABLE processes ADD COLUMN gpu_sampled_since_ns INTEGER; -- sampling began; NULL: not sampled

CREATE TABLE IF NOT EXISTS gpu_windows (
	id INTEGER PRIMARY KEY,
	proc_id INTEGER NOT NULL,
	start_ns INTEGER NOT NULL,     -- recording on (host clock, as every *_ns)
	end_ns INTEGER NOT NULL        -- recording off
);

-- Per sampled process: how much of its sampled span was traced.  until_ns
-- is the process's end (or the last window's, if later); traced_share is
-- traced_ns / span_ns, the factor that turns a window count into an estimate.
CREATE VIEW IF NOT EXISTS gpu_sampling AS
SELECT proc_id, since_ns, until_ns, until_ns - since_ns AS span_ns, windows, traced_ns,
	CASE WHEN until_ns > since_ns THEN traced_ns * 1.0 / (until_ns - since_ns) END
		AS traced_share
FROM (SELECT p.proc_id, p.gpu_sampled_since_ns AS since_ns,
		max(coalesce(p.end_ns, 0), coalesce(w.last_ns, 0)) AS until_ns,
		coalesce(w.windows, 0) AS windows, coalesce(w.traced_ns, 0) AS traced_ns
	FROM processes p
	LEFT JOIN (SELECT proc_id, count(*) AS windows, sum(end_ns - start_ns) AS traced_ns,
			max(end_ns) AS last_ns FROM gpu_windows GROUP BY proc_id) w USING (proc_id)
	WHERE p.gpu_sampled_since_ns IS NOT NULL);

INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', '4');
