-- shimmer store, schema version 11: a command line too long for the
-- shim's HELLO (64 KiB with the path, host and job) is stored cut at an
-- argument boundary, and says so: argv_bytes is then the whole command
-- line's length in bytes (its arguments and the NULs between them), more
-- than argv holds.  NULL: argv is the whole command line.

ALTER TABLE processes ADD COLUMN argv_bytes INTEGER;

INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', '11');
