-- shimmer store, schema version 3: call stacks of allocations, the loaded
-- objects needed to symbolize them offline, and Python frames.
--
-- Stacks are stored as the shim interned them: one row per frame, keyed by
-- the process's stack id.  Addresses are resolved by the tools (function,
-- file, line, inlined frames) from `modules`, also after the process is
-- gone, as long as the files (or their debug files) are still there.

ALTER TABLE allocations ADD COLUMN stack_id INTEGER;   -- native stack of the allocating call
ALTER TABLE allocations ADD COLUMN pystack_id INTEGER; -- Python frames of it, if any

CREATE TABLE IF NOT EXISTS stack_frames (
	proc_id INTEGER NOT NULL,
	stack_id INTEGER NOT NULL,
	level INTEGER NOT NULL,        -- 0 innermost (the caller of the allocator)
	pc INTEGER NOT NULL,           -- return address in the process
	PRIMARY KEY (proc_id, stack_id, level)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS python_frames (
	proc_id INTEGER NOT NULL,
	pystack_id INTEGER NOT NULL,
	level INTEGER NOT NULL,        -- 0 innermost
	file_id INTEGER NOT NULL,      -- strings.id
	func_id INTEGER NOT NULL,      -- strings.id
	line INTEGER NOT NULL,
	PRIMARY KEY (proc_id, pystack_id, level)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS modules (
	id INTEGER PRIMARY KEY,
	proc_id INTEGER NOT NULL,
	path_id INTEGER NOT NULL,      -- strings.id of the file's path
	bias INTEGER NOT NULL,         -- load bias: file address = pc - bias
	lo INTEGER NOT NULL,           -- its mapped address range [lo, hi)
	hi INTEGER NOT NULL,
	build_id TEXT,                 -- hex GNU build-id, NULL if none
	loaded_ns INTEGER NOT NULL,
	unloaded_ns INTEGER
);

CREATE VIEW IF NOT EXISTS python_frames_named AS
SELECT f.*, fs.text AS file, fn.text AS function
FROM python_frames f
JOIN strings fs ON fs.proc_id = f.proc_id AND fs.id = f.file_id
JOIN strings fn ON fn.proc_id = f.proc_id AND fn.id = f.func_id;

INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', '3');
