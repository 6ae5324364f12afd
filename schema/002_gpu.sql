-- shimmer store, schema version 2: what the GPU did (CUPTI activity), the
-- API calls that started it, ranges, markers and counters.
--
-- GPU times are on the same clock as the host's (*_ns, CLOCK_MONOTONIC of
-- the traced host): a kernel and the call that launched it can be drawn on
-- one timeline.  Names are interned per process in `strings`.

ALTER TABLE processes ADD COLUMN gpu_status TEXT;   -- 'active', 'no_cupti',
	-- 'busy' (another profiler owns CUPTI), 'error', 'disabled'; NULL: the
	-- process never started CUDA
ALTER TABLE processes ADD COLUMN gpu_status_detail TEXT;

CREATE TABLE IF NOT EXISTS strings (
	proc_id INTEGER NOT NULL,
	id INTEGER NOT NULL,           -- the shim's id, per process
	text TEXT NOT NULL,
	demangled TEXT,                -- C++ names demangled; NULL when not mangled
	PRIMARY KEY (proc_id, id)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS kernels (
	id INTEGER PRIMARY KEY,
	proc_id INTEGER NOT NULL,
	device INTEGER NOT NULL,
	context INTEGER,
	stream INTEGER,
	correlation INTEGER NOT NULL,  -- = gpu_api.correlation of the launch
	name_id INTEGER NOT NULL,      -- strings.id
	start_ns INTEGER NOT NULL,
	end_ns INTEGER NOT NULL,
	grid_x INTEGER, grid_y INTEGER, grid_z INTEGER,
	block_x INTEGER, block_y INTEGER, block_z INTEGER,
	registers INTEGER,
	static_smem INTEGER,
	dynamic_smem INTEGER,
	graph_id INTEGER
);

-- Copies and memsets as the GPU ran them.
CREATE TABLE IF NOT EXISTS gpu_copies (
	id INTEGER PRIMARY KEY,
	proc_id INTEGER NOT NULL,
	op TEXT NOT NULL,              -- 'memcpy' or 'memset'
	device INTEGER NOT NULL,
	context INTEGER,
	stream INTEGER,
	correlation INTEGER NOT NULL,
	start_ns INTEGER NOT NULL,
	end_ns INTEGER NOT NULL,
	bytes INTEGER NOT NULL,
	copy_kind TEXT,                -- 'HtoD', 'DtoH', 'DtoD', 'HtoH', 'PtoP', ... (memcpy)
	src_kind TEXT,                 -- 'pageable', 'pinned', 'device', 'managed', ...
	dst_kind TEXT,                 -- memset: the memory kind
	async INTEGER,
	value INTEGER                  -- memset value
);

-- Synchronizations seen by the GPU side (event, stream, context).
CREATE TABLE IF NOT EXISTS gpu_syncs (
	id INTEGER PRIMARY KEY,
	proc_id INTEGER NOT NULL,
	type TEXT NOT NULL,            -- 'event', 'stream_wait_event', 'stream', 'context'
	context INTEGER,
	stream INTEGER,
	event INTEGER,
	correlation INTEGER,
	start_ns INTEGER NOT NULL,
	end_ns INTEGER NOT NULL
);

-- API calls that start GPU work, whichever API made them (runtime or
-- driver: cuBLAS, cuDNN and Triton launch through the driver).
CREATE TABLE IF NOT EXISTS gpu_api (
	id INTEGER PRIMARY KEY,
	proc_id INTEGER NOT NULL,
	tid INTEGER NOT NULL,
	domain TEXT NOT NULL,          -- 'runtime' or 'driver'
	name_id INTEGER NOT NULL,      -- strings.id of the function name
	cbid INTEGER NOT NULL,
	correlation INTEGER NOT NULL,
	start_ns INTEGER NOT NULL,
	end_ns INTEGER NOT NULL
);

-- Ranges: NVTX push/pop and start/end, shimmer.h ranges.  end_ns is NULL
-- for a range still open when the process ended.
CREATE TABLE IF NOT EXISTS ranges (
	id INTEGER PRIMARY KEY,
	proc_id INTEGER NOT NULL,
	tid INTEGER NOT NULL,          -- the thread that opened it
	kind TEXT NOT NULL,            -- 'push' (nested per thread) or 'startend'
	domain_id INTEGER NOT NULL,    -- strings.id; 0: NVTX's default domain
	name_id INTEGER NOT NULL,
	start_ns INTEGER NOT NULL,
	end_ns INTEGER,
	depth INTEGER NOT NULL,        -- push ranges: 0 outermost; startend: 0
	parent_id INTEGER,             -- the enclosing push range on its thread
	color INTEGER,
	category INTEGER
);

CREATE TABLE IF NOT EXISTS markers (
	id INTEGER PRIMARY KEY,
	proc_id INTEGER NOT NULL,
	tid INTEGER NOT NULL,
	domain_id INTEGER NOT NULL,
	name_id INTEGER NOT NULL,
	ts_ns INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS counters (
	id INTEGER PRIMARY KEY,
	proc_id INTEGER NOT NULL,
	tid INTEGER NOT NULL,
	domain_id INTEGER NOT NULL,
	name_id INTEGER NOT NULL,
	ts_ns INTEGER NOT NULL,
	value REAL                     -- NULL when the sample was NaN (SQLite has no NaN)
);

-- Every kernel with its name, the API call and thread that launched it.
-- Outer joins throughout: names come over the socket and records through
-- the rings, so a kernel whose name never arrived (a process cut off) still
-- appears, with name NULL.
CREATE VIEW IF NOT EXISTS kernels_named AS
SELECT k.*, coalesce(s.demangled, s.text) AS name, s.text AS mangled,
	k.end_ns - k.start_ns AS dur_ns,
	a.tid AS launch_tid, a.domain AS launch_domain, an.text AS launch_api,
	a.start_ns AS launch_ns, a.id AS api_id
FROM kernels k
LEFT JOIN strings s ON s.proc_id = k.proc_id AND s.id = k.name_id
LEFT JOIN gpu_api a ON a.proc_id = k.proc_id AND a.correlation = k.correlation
LEFT JOIN strings an ON an.proc_id = a.proc_id AND an.id = a.name_id;

CREATE VIEW IF NOT EXISTS ranges_named AS
SELECT r.*, s.text AS name, d.text AS domain, r.end_ns - r.start_ns AS dur_ns
FROM ranges r
LEFT JOIN strings s ON s.proc_id = r.proc_id AND s.id = r.name_id
LEFT JOIN strings d ON d.proc_id = r.proc_id AND d.id = r.domain_id;

-- Each kernel with the innermost push range open on the launching thread
-- when it was launched (NULL when none).  A correlated search per kernel:
-- fine for a run's worth of kernels; add an index on ranges (proc_id, tid,
-- start_ns) for very large stores.
CREATE VIEW IF NOT EXISTS kernels_in_ranges AS
SELECT k.*, (
	SELECT r.id FROM ranges r
	WHERE r.proc_id = k.proc_id AND r.tid = k.launch_tid AND r.kind = 'push'
	  AND r.start_ns <= k.launch_ns AND (r.end_ns IS NULL OR r.end_ns >= k.launch_ns)
	ORDER BY r.depth DESC LIMIT 1) AS range_id
FROM kernels_named k;

INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', '2');
