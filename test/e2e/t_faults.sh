#!/bin/bash
# Faults (issue 13):
#  - the collector is SIGKILLed mid-ingest and a new one starts on the same
#    store: it passes integrity_check, every stored row is one the program
#    logged (what was committed is whole), the cut-off process is ended as
#    'collector_lost' (not left live forever) and the new collector stores
#    a new program completely;
#  - the disk fills (a 1 MiB tmpfs, as root): the collector exits 1 with
#    one clear line and the traced program is unaffected (test_store
#    checks the store after a full disk).
# (Descriptor exhaustion in the collector: t_hostile.)
. "$(dirname "$0")/lib.sh"
# Rows are compared with the workload's log, and a flood of rows fills a
# small disk: a row per event (the default `all` mode aggregates the heap).
export SHIMMER_HEAP_ROWS=all
need "$SHIM" "$SHIMMERD" "$WL"

# -- killed mid-ingest, restarted -------------------------------------------
DB=$T/killed.db
WLOG=$T/long.log
start_collector "$DB" || { not_ok "collector starts"; finish; }
FAKE_CUDA_DELAY_NS=100000 traced "$WL" long 500 > /dev/null 2> "$T/long.err" &
wpid=$!
for _ in $(seq 200); do
	n=$(grep -c '^C' "$WLOG" 2> /dev/null)
	[ "${n:-0}" -ge 200 ] && break
	sleep 0.05
done
{ kill -KILL "$CPID"; wait "$CPID"; } 2> /dev/null
CPID=
live=$(sq "$DB" "SELECT count(*) FROM processes WHERE end_reason IS NULL" 2>&1)
check "killed: its process left live in the store" "got $live" [ "$live" = 1 ]
start_collector "$DB" || { not_ok "collector restarts"; finish; }
wait $wpid
rc=$?
check "killed: program carries on and exits normally" "exit $rc: $(head -c 300 "$T/long.err")" [ $rc = 3 ]
check "restart: says what it ended" "log: $(tail -3 "$T/collector.log")" \
	grep -q "1 processes were live in .* ended as 'collector_lost'" "$T/collector.log"
WLOG=$T/after.log
traced "$WL" trace > /dev/null 2> "$T/after.err"
check "restart: a new program runs" "exit $?" true
check "restart: collector exits 0" "see its log" stop_collector
check_integrity "killed: store passes integrity_check" "$DB"
load_log "$T/long.log" "$T/long-check.db" "$DB"
got=$(q "SELECT p.end_reason, p.end_ns >= p.start_ns FROM s.processes p WHERE p.pid IN $PIDS")
check "killed: cut-off process ended as collector_lost" "got '$got'" [ "$got" = "collector_lost|1" ]
extra=$(q "
CREATE TEMP VIEW got_c AS SELECT p.pid, c.tid, f.name AS fn, c.ret, coalesce(c.ptr, 0) AS ptr,
	coalesce(c.bytes, 0) AS bytes FROM s.cuda_calls c JOIN s.functions f USING (fn_id)
	JOIN s.processes p USING (proc_id) WHERE p.pid IN $PIDS;
SELECT count(*) FROM got_c;
SELECT 'stored, not logged:', * FROM (SELECT pid, tid, fn, ret, ptr, bytes FROM got_c EXCEPT
	SELECT pid, tid, fn, ret, ptr, bytes FROM main.C) LIMIT 5;")
n=$(head -1 <<< "$extra")
check "killed: what was committed is whole (every stored call was logged)" "$extra" \
	[ "$(wc -l <<< "$extra")" = 1 -a "${n:-0}" -gt 0 ]
load_log "$T/after.log" "$T/after-check.db" "$DB"
expect_empty "restart: the new program stored completely" "$(diff_procs exit)$(diff_cuda)$(diff_allocs)"

# -- disk full ------------------------------------------------------------------
if [ "$(id -u)" = 0 ] && unshare -m true 2> /dev/null; then
	mkdir "$T/small"
	WLOG=$T/full.log
	# In a mount namespace of its own, the collector writes to a 1 MiB tmpfs.
	fifo=$T/ready.full
	mkfifo "$fifo"
	unshare -m sh -c 'mount -t tmpfs -o size=1m tmpfs "$1" && exec "$2" --foreground \
		--socket "$3" --db "$1/full.db" --ready-fd 3 3> "$4"' sh "$T/small" "$SHIMMERD" \
		"$SOCK" "$fifo" 2> "$T/full.log.err" &
	CPID=$!
	timeout 20 head -c1 "$fifo" > /dev/null
	SHIMMER_MALLOC=all traced "$WL" flood 200 2000 > /dev/null 2> "$T/full.err"
	rc=$?
	check "disk full: the traced program is unaffected" "exit $rc" [ $rc = 0 ]
	for _ in $(seq 100); do kill -0 "$CPID" 2> /dev/null || break; sleep 0.05; done
	kill -TERM "$CPID" 2> /dev/null
	wait "$CPID"
	rc=$?
	CPID=
	check "disk full: collector exits 1" "exit $rc; log: $(tail -3 "$T/full.log.err")" [ $rc = 1 ]
	check "disk full: one clear line" "log: $(tail -3 "$T/full.log.err")" \
		grep -q "full" "$T/full.log.err"
else
	ok "disk full # SKIP needs root and unshare -m"
fi
finish
