-- shimmer store, schema version 13: a sampling window held open to the end.
--
-- Once a process launches a CUDA graph, the shim stops sampling its GPU
-- activity: the window open then (or the next) is held open until the
-- process ends or pauses, and every launch in it is recorded (CUPTI
-- crashes or misreports graph kernels when it is detached or its kinds
-- are turned off between windows; README, "GPU sampling").  Such a window
-- has whole = 1.
--
-- gpu_sampling's scale assumed windows at random points.  Scaled by the
-- share of calls traced (a process that calls the runtime), a held window
-- stays right: its calls count once, as its kernels, and the graph
-- launches made before it but in no window are counted in the calls, so
-- the ratio adds their kernels (a PyTorch replay loop: within 2-5%).  But
-- scaled by the share of time traced (a process that only calls the
-- driver, as JAX), the whole recording was multiplied by the span over the
-- traced time: a JAX loop run entirely inside a held window after 4 s of
-- compiling was estimated at 3.2 times its kernels.  There the part before
-- the first held window (whole_from_ns) is now scaled by its own windows
-- (pre_scale: its span over its traced time), the kernels from
-- whole_from_ns on count once, and scale is the one factor that gives that
-- total when applied to every kernel recorded: (kernels before x pre_scale
-- + kernels from then) / kernels.  Otherwise pre_scale and scale are the
-- old scale.

ALTER TABLE gpu_windows ADD COLUMN whole INTEGER NOT NULL DEFAULT 0;

DROP VIEW IF EXISTS gpu_sampling;
-- (the view's text is stored in every store: its comments are up here)
-- b: the process's windows, with those held (whole) summed apart; until_ns
-- is NULL, not 0, for a live process that has no window yet.  p: pre_scale.
-- c: the kernels before and from whole_from_ns, for a time-scaled process.
CREATE VIEW IF NOT EXISTS gpu_sampling AS
WITH b AS (
SELECT p.proc_id, p.gpu_sampled_since_ns AS since_ns,
nullif(max(coalesce(p.end_ns, 0), coalesce(w.last_ns, 0)), 0) AS until_ns,
coalesce(w.n, 0) AS windows, coalesce(w.t, 0) AS traced_ns, coalesce(w.c, 0) AS calls_traced,
(SELECT coalesce(sum(fc.count), 0) FROM function_counts fc JOIN functions f USING (fn_id)
WHERE fc.proc_id = p.proc_id AND f.gpu_work) AS calls,
w.whole_from_ns, coalesce(w.wt, 0) AS wt
FROM processes p
LEFT JOIN (SELECT proc_id, count(*) AS n, sum(end_ns - start_ns) AS t, sum(calls) AS c,
max(end_ns) AS last_ns, min(CASE WHEN whole THEN start_ns END) AS whole_from_ns,
sum(CASE WHEN whole THEN end_ns - start_ns END) AS wt
FROM gpu_windows GROUP BY proc_id) w USING (proc_id)
WHERE p.gpu_sampled_since_ns IS NOT NULL),
p AS (
SELECT *, CASE WHEN calls_traced > 0 THEN calls * 1.0 / calls_traced
WHEN whole_from_ns IS NULL THEN CASE WHEN traced_ns > 0 AND until_ns > since_ns
THEN (until_ns - since_ns) * 1.0 / traced_ns END
WHEN traced_ns - wt > 0 AND whole_from_ns > since_ns
THEN (whole_from_ns - since_ns) * 1.0 / (traced_ns - wt) ELSE 1.0 END AS pre_scale
FROM b),
c AS (
SELECT *, CASE WHEN whole_from_ns IS NULL OR calls_traced > 0 THEN 0 ELSE
(SELECT count(*) FROM kernels k WHERE k.proc_id = p.proc_id AND k.start_ns < whole_from_ns)
END AS kb,
CASE WHEN whole_from_ns IS NULL OR calls_traced > 0 THEN 0 ELSE
(SELECT count(*) FROM kernels k WHERE k.proc_id = p.proc_id AND k.start_ns >= whole_from_ns)
END AS kw
FROM p)
SELECT proc_id, since_ns, until_ns, until_ns - since_ns AS span_ns, windows, traced_ns,
CASE WHEN until_ns > since_ns THEN traced_ns * 1.0 / (until_ns - since_ns) END AS traced_share,
calls, calls_traced,
CASE WHEN kb + kw = 0 THEN pre_scale ELSE (kb * pre_scale + kw) * 1.0 / (kb + kw) END AS scale,
whole_from_ns, pre_scale
FROM c;

INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', '13');
