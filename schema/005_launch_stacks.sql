-- shimmer store, schema version 5: where GPU work was launched from.
--
-- Inside GPU sampling windows (for every launch with SHIMMER_GPU=all) the
-- shim captures the call stack of each API call that starts GPU work, native
-- and Python, and stores it with the call: a kernel joins its call on
-- (proc_id, correlation), so GPU time can be summed per line of the code
-- that launched it.  Stacks are interned as for allocations (stack_frames,
-- python_frames).

ALTER TABLE gpu_api ADD COLUMN stack_id INTEGER;   -- native stack of the call; NULL: none
ALTER TABLE gpu_api ADD COLUMN pystack_id INTEGER; -- its Python frames; NULL: none

INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', '5');
