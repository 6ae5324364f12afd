-- shimmer store, schema 9: heap answers computed by the collector as events
-- arrive, for processes traced with SHIMMER_MALLOC=all (unless
-- SHIMMER_HEAP_ROWS=all): per process and per call site instead of a row per
-- allocation.  allocations keeps a row only for each block that lived longer
-- than heap_totals.row_ns or was never freed.
-- docs/schema.md ("The aggregated heap") defines every column.
--
-- Sites are (stack_id, pystack_id) with 0 for none, as the records carry
-- them (the allocations table stores NULL there).  Bytes are the bytes
-- requested (calloc: nmemb x size).  Times are ns on the host's
-- CLOCK_MONOTONIC.

CREATE TABLE IF NOT EXISTS heap_totals (
	proc_id INTEGER PRIMARY KEY,
	final INTEGER NOT NULL,        -- 1: written at the process's end; 0: a
	                               -- snapshot of a process still running
	allocs INTEGER NOT NULL,       -- blocks allocated
	alloc_bytes INTEGER NOT NULL,
	frees INTEGER NOT NULL,        -- blocks released
	freed_bytes INTEGER NOT NULL,
	live_count INTEGER NOT NULL,   -- blocks never released
	live_bytes INTEGER NOT NULL,
	peak_bytes INTEGER NOT NULL,   -- the highest live bytes at any instant
	peak_count INTEGER NOT NULL,   -- blocks live at that instant
	peak_ns INTEGER,               -- the first instant it was reached
	temp_count INTEGER NOT NULL,   -- temporary (heaptrack's definition)
	temp_bytes INTEGER NOT NULL,
	short_ns INTEGER NOT NULL,     -- blocks freed within this are short-lived
	short_count INTEGER NOT NULL,
	short_bytes INTEGER NOT NULL,
	row_ns INTEGER NOT NULL,       -- blocks that live longer also keep a row
	                               -- of allocations; shorter ones are in the
	                               -- lifetime histogram
	point_allocs INTEGER NOT NULL, -- a checkpoint at every this many allocations
	late_events INTEGER NOT NULL,  -- heap events applied out of time order
	late_steps INTEGER NOT NULL    -- range ends that came after that too
);

CREATE TABLE IF NOT EXISTS heap_sites (
	proc_id INTEGER NOT NULL,
	stack_id INTEGER NOT NULL,
	pystack_id INTEGER NOT NULL,
	allocs INTEGER NOT NULL,
	alloc_bytes INTEGER NOT NULL,
	frees INTEGER NOT NULL,
	freed_bytes INTEGER NOT NULL,
	live_count INTEGER NOT NULL,
	live_bytes INTEGER NOT NULL,
	peak_count INTEGER NOT NULL,   -- live at the process's peak
	peak_bytes INTEGER NOT NULL,
	temp_count INTEGER NOT NULL,
	temp_bytes INTEGER NOT NULL,
	short_count INTEGER NOT NULL,
	short_bytes INTEGER NOT NULL,
	PRIMARY KEY (proc_id, stack_id, pystack_id)
) WITHOUT ROWID;

-- kind 'size': every allocation by its size, bucket b = the bit length of
-- the size (sizes 2^(b-1) .. 2^b - 1; bucket 0: size 0).  kind 'life': the
-- blocks freed within row_ns by lifetime in ns, quarter octaves: buckets 0..7 are
-- exactly 0..7 ns, bucket b >= 12 holds lifetimes from
-- (4 + b % 4) << (b / 4 - 2) up to the next bucket's start.  The views
-- heap_sizes and heap_lifetimes give each bucket's bounds.
CREATE TABLE IF NOT EXISTS heap_histograms (
	proc_id INTEGER NOT NULL,
	stack_id INTEGER NOT NULL,
	pystack_id INTEGER NOT NULL,
	kind TEXT NOT NULL,
	bucket INTEGER NOT NULL,
	count INTEGER NOT NULL,
	bytes INTEGER NOT NULL,
	PRIMARY KEY (proc_id, stack_id, pystack_id, kind, bucket)
) WITHOUT ROWID;

-- Live bytes over time, at most 512 buckets a process (their width
-- doubles as the run goes on): the lowest, highest and last value within
-- [start_ns, end_ns).
CREATE TABLE IF NOT EXISTS heap_timeline (
	proc_id INTEGER NOT NULL,
	start_ns INTEGER NOT NULL,
	end_ns INTEGER NOT NULL,
	min_bytes INTEGER NOT NULL,
	max_bytes INTEGER NOT NULL,
	end_bytes INTEGER NOT NULL,
	PRIMARY KEY (proc_id, start_ns)
) WITHOUT ROWID;

-- Durations of the timed heap calls (one in 8 per thread in 'all' mode):
-- side 'alloc' times the calls that returned a block, 'free' the calls
-- that released a traced one.
CREATE TABLE IF NOT EXISTS heap_calls (
	proc_id INTEGER NOT NULL,
	fn_id INTEGER NOT NULL,
	side TEXT NOT NULL,
	timed INTEGER NOT NULL,
	total_ns INTEGER NOT NULL,
	m2 REAL NOT NULL,              -- sum of squared deviations from the mean
	                               -- (variance: m2 / timed)
	min_ns INTEGER NOT NULL,
	max_ns INTEGER NOT NULL,
	PRIMARY KEY (proc_id, fn_id, side)
) WITHOUT ROWID;

-- Checkpoints, where `leaks` fits live bytes over a run.  Points: the
-- instant of allocation k * heap_totals.point_allocs of the process (every
-- memory, in time order), k = 1, 2, ... (heap_points).  Steps: the ends of
-- top-level push ranges, numbered in time order (heap_steps).
CREATE TABLE IF NOT EXISTS heap_points (
	proc_id INTEGER NOT NULL,
	idx INTEGER NOT NULL,
	ns INTEGER NOT NULL,
	PRIMARY KEY (proc_id, idx)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS heap_steps (
	proc_id INTEGER NOT NULL,
	idx INTEGER NOT NULL,
	ns INTEGER NOT NULL,
	range_id INTEGER,              -- the ranges row that ended
	PRIMARY KEY (proc_id, idx)
) WITHOUT ROWID;

-- Each site's live bytes at the checkpoints, run-length coded: bytes from
-- checkpoint idx (of kind 'alloc', heap_points.idx; or 'step',
-- heap_steps.idx) on, up to the site's next row of that kind; 0 before
-- its first.
CREATE TABLE IF NOT EXISTS heap_series (
	proc_id INTEGER NOT NULL,
	stack_id INTEGER NOT NULL,
	pystack_id INTEGER NOT NULL,
	kind TEXT NOT NULL,
	idx INTEGER NOT NULL,
	bytes INTEGER NOT NULL,
	PRIMARY KEY (proc_id, stack_id, pystack_id, kind, idx)
) WITHOUT ROWID;

CREATE VIEW IF NOT EXISTS heap_sizes AS
SELECT proc_id, stack_id, pystack_id,
	CASE WHEN bucket = 0 THEN 0 ELSE 1 << (bucket - 1) END AS lo_bytes,
	CASE WHEN bucket = 0 THEN 0 ELSE (1 << bucket) - 1 END AS hi_bytes,
	count, bytes
FROM heap_histograms WHERE kind = 'size';

CREATE VIEW IF NOT EXISTS heap_lifetimes AS
SELECT proc_id, stack_id, pystack_id,
	CASE WHEN bucket < 8 THEN bucket ELSE (4 + bucket % 4) << (bucket / 4 - 2) END AS lo_ns,
	CASE WHEN bucket < 7 THEN bucket
	     WHEN bucket = 7 THEN 7
	     ELSE ((4 + (bucket + 1) % 4) << ((bucket + 1) / 4 - 2)) - 1 END AS hi_ns,
	count, bytes
FROM heap_histograms WHERE kind = 'life';

INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', '9');
