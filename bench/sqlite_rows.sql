-- The sqlite workload of bench/run-bench's exact-mode comparison:
-- @ROWS@ rows (run-bench substitutes SHIMMER_BENCH_SQLITE_ROWS, 200000)
-- inserted into an in-memory table, indexed, then scanned.
CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT, b REAL);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < @ROWS@)
INSERT INTO t SELECT x, hex(randomblob(16)), random() FROM c;
CREATE INDEX ta ON t(a);
SELECT count(*), sum(length(a)) FROM t WHERE a > '7';
