-- shimmer store, schema version 1: processes, threads, CUDA runtime calls,
-- allocations, exact per-function counters and dropped events.
--
-- Times are nanoseconds on the traced host's CLOCK_MONOTONIC (columns *_ns);
-- processes.start_wall_ns and start_ns were read at the same instant, so
-- wall = start_wall_ns + (t - start_ns).  A store may hold many processes,
-- from many hosts and runs: proc_id, not pid, identifies one.
--
-- The collector creates no secondary indexes while it ingests (each would
-- slow every insert); the tools create the few they need, once, on demand.

CREATE TABLE IF NOT EXISTS meta (
	key TEXT PRIMARY KEY,
	value TEXT
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS functions (
	fn_id INTEGER PRIMARY KEY,     -- as the wire format numbers them
	name TEXT NOT NULL UNIQUE,     -- 'malloc', 'cudaMalloc', ...
	family TEXT NOT NULL           -- 'heap' or 'cuda'
);

CREATE TABLE IF NOT EXISTS processes (
	proc_id INTEGER PRIMARY KEY,   -- assigned by the collector
	pid INTEGER NOT NULL,
	ppid INTEGER NOT NULL,
	parent_proc_id INTEGER,        -- the traced parent in this store, if any
	uid INTEGER NOT NULL,
	hostname TEXT,
	exe TEXT,
	argv TEXT,                     -- JSON array of strings
	rank INTEGER,                  -- NULL when no rank variable was set
	local_rank INTEGER,
	malloc_mode TEXT NOT NULL,     -- 'off', 'sample' or 'all'
	sample_bytes INTEGER,          -- mean bytes between samples (sample mode)
	lossless INTEGER NOT NULL,     -- 1 when SHIMMER_LOSSLESS=1
	start_wall_ns INTEGER NOT NULL,
	start_ns INTEGER NOT NULL,
	end_ns INTEGER,                -- last known instant of the process
	end_reason TEXT                -- 'exit' (orderly), 'signal' (died of
	                               -- end_signal), 'exec' (replaced by exec:
	                               -- the same pid's next row follows),
	                               -- 'disconnect' (kill, or exit without BYE),
	                               -- 'detach' (attached, lived on), 'rejected'
	                               -- (sent malformed data), 'shutdown'
	                               -- (collector stopped first), 'collector_lost'
	                               -- (the collector died); NULL while live.
	                               -- docs/schema.md says each in full.
);

CREATE TABLE IF NOT EXISTS threads (
	proc_id INTEGER NOT NULL,
	tid INTEGER NOT NULL,
	name TEXT,
	first_ns INTEGER,
	PRIMARY KEY (proc_id, tid)
) WITHOUT ROWID;

-- Every intercepted CUDA runtime call.  See docs/schema.md for what ptr,
-- bytes, aux and aux2 hold per function.
CREATE TABLE IF NOT EXISTS cuda_calls (
	id INTEGER PRIMARY KEY,
	proc_id INTEGER NOT NULL,
	tid INTEGER NOT NULL,
	fn_id INTEGER NOT NULL,
	start_ns INTEGER NOT NULL,
	end_ns INTEGER NOT NULL,
	ret INTEGER NOT NULL,          -- cudaError_t
	device INTEGER,                -- current device after the call
	ptr INTEGER,
	bytes INTEGER,
	stream INTEGER,
	copy_kind INTEGER,             -- cudaMemcpyKind, or cudaStreamWaitEvent flags
	aux INTEGER,
	aux2 INTEGER,
	grid_x INTEGER, grid_y INTEGER, grid_z INTEGER,
	block_x INTEGER, block_y INTEGER, block_z INTEGER,
	per_thread_stream INTEGER NOT NULL  -- 1 for the _ptsz/_ptds variants
);

-- One row per traced allocation: every CUDA allocation, every heap
-- allocation in 'all' mode, the sampled ones in 'sample' mode.  The free_*
-- columns stay NULL while the block is live.  weight is the bytes this row
-- stands for: size when exact, size / P(sampled) when sampled, so that
-- sum(weight) over live rows estimates the live heap without bias.
CREATE TABLE IF NOT EXISTS allocations (
	id INTEGER PRIMARY KEY,
	proc_id INTEGER NOT NULL,
	space TEXT NOT NULL,           -- 'host' (malloc heap), 'device',
	                               -- 'pinned' (page-locked host), 'managed'
	device INTEGER NOT NULL,       -- CUDA device, -1 for the host heap
	ptr INTEGER NOT NULL,
	size INTEGER NOT NULL,
	sampled INTEGER NOT NULL,      -- 1 when chosen by the byte sampler
	weight REAL NOT NULL,
	alloc_fn INTEGER NOT NULL,
	alloc_tid INTEGER NOT NULL,
	alloc_ns INTEGER NOT NULL,
	alloc_end_ns INTEGER,          -- NULL when the call was not timed
	free_fn INTEGER,
	free_tid INTEGER,
	free_ns INTEGER,
	free_end_ns INTEGER
);

-- Exact calls and requested bytes per thread and function, in every mode
-- (the shim counts every call even when it ships only a sample).
CREATE TABLE IF NOT EXISTS function_counts (
	proc_id INTEGER NOT NULL,
	tid INTEGER NOT NULL,
	fn_id INTEGER NOT NULL,
	count INTEGER NOT NULL,
	bytes INTEGER NOT NULL,
	PRIMARY KEY (proc_id, tid, fn_id)
) WITHOUT ROWID;

-- Events recorded by the shim but never stored.  reason: 'ring_full' (the
-- collector fell behind; tid is the thread), 'no_slot' (more live threads
-- than rings; tid 0), 'malformed' (the collector rejected a record),
-- 'cupti' (GPU records CUPTI lost; tid 0).
CREATE TABLE IF NOT EXISTS drops (
	proc_id INTEGER NOT NULL,
	tid INTEGER NOT NULL,
	reason TEXT NOT NULL,
	events INTEGER NOT NULL,
	PRIMARY KEY (proc_id, tid, reason)
) WITHOUT ROWID;

CREATE VIEW IF NOT EXISTS cuda_calls_named AS
SELECT c.*, f.name AS fn, c.end_ns - c.start_ns AS dur_ns, p.pid, p.rank
FROM cuda_calls c
JOIN functions f USING (fn_id)
JOIN processes p USING (proc_id);

CREATE VIEW IF NOT EXISTS allocations_named AS
SELECT a.*, fa.name AS alloc_fn_name, ff.name AS free_fn_name,
	a.alloc_end_ns - a.alloc_ns AS alloc_dur_ns,
	a.free_end_ns - a.free_ns AS free_dur_ns,
	p.pid, p.rank
FROM allocations a
JOIN functions fa ON fa.fn_id = a.alloc_fn
LEFT JOIN functions ff ON ff.fn_id = a.free_fn
JOIN processes p USING (proc_id);

INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', '1');
