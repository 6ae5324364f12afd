-- shimmer store, schema version 6: how processes ended, and what a
-- collector that died left behind.
--
-- end_reason gains 'signal' (the shim saw a fatal signal: end_signal says
-- which) and 'collector_lost' (the collector stopped without ending the
-- process: it was killed or crashed; the next collector to open the store
-- ends such rows at its start, and what the process did after end_ns is
-- not stored).  exit_status is set by `shimmer run` for its command.

ALTER TABLE processes ADD COLUMN end_signal INTEGER;  -- the signal that ended it, when known
ALTER TABLE processes ADD COLUMN exit_status INTEGER; -- its exit status (0-255), when known

INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', '6');
