#!/bin/bash
# t_api: include/shimmer.h.  Without the shim, wl_api's calls are no-ops
# (it prints its one line and exits 0); under the shim its ranges, marker
# and counters are recorded as it logged them, and nothing it did between
# shimmer_pause() and shimmer_resume() is, while both are marked.
. "$(dirname "$0")/lib.sh"

WL_API=$O/test/e2e/wl_api
need "$SHIM" "$SHIMMERD" "$WL_API"

out=$("$WL_API" 2> "$T/bare.err")
rc=$?
check "bare: no-op, same output, exit 0" "exit $rc, stdout '$out', stderr $(head -3 "$T/bare.err")" \
	test "$rc" = 0 -a "$out" = "wl_api: done" -a ! -s "$T/bare.err"

DB=$T/api.db
WLOG=$T/api.log
start_collector "$DB" || { not_ok "collector"; finish; }
out=$(traced "$WL_API" 2> "$T/err")
rc=$?
stop_collector || not_ok "collector exit status"
check "traced: same output, exit 0" "exit $rc, stdout '$out', stderr $(head -3 "$T/err")" \
	test "$rc" = 0 -a "$out" = "wl_api: done"
load_log "$WLOG" "$T/check.db" "$DB"
load_gpu_log "$WLOG"
sq "$CHECKDB" "CREATE TABLE N (seq INTEGER, pid INTEGER, tid INTEGER, name TEXT, v INTEGER);"
awk -F, '$1 == "N" { sub(/^[^,]*/, NR); print }' "$WLOG" > "$T/N.csv"
sq "$CHECKDB" ".mode csv" ".import $T/N.csv N"

expect_empty "ranges (none while paused)" "$(diff_ranges; q "
SELECT 'range not closed inside the logged window:', r.name FROM s.ranges_named r
	JOIN main.R x ON x.name = r.name WHERE r.end_ns IS NULL OR r.start_ns >= r.end_ns
	OR r.start_ns < x.t0 OR r.end_ns > x.t1;")"

expect_empty "counters (none while paused)" "$(q "
CREATE TEMP VIEW exp_n AS SELECT pid, tid, name, v FROM main.N;
CREATE TEMP VIEW got_n AS SELECT p.pid, c.tid, n.text AS name,
	CAST(round(c.value * 1000) AS INTEGER) AS v FROM s.counters c
	JOIN s.processes p USING (proc_id)
	JOIN s.strings n ON n.proc_id = c.proc_id AND n.id = c.name_id WHERE p.pid IN $PIDS;
$(multiset_diff exp_n got_n "pid, tid, name, v")")"

# The marker, and the pause and resume markers around the gap, in order.
got=$(q "SELECT n.text FROM s.markers m JOIN s.strings n ON n.proc_id = m.proc_id
	AND n.id = m.name_id ORDER BY m.ts_ns;" | tr '\n' ' ')
check "markers: step-done, shimmer.pause, shimmer.resume" "markers in time order: $got" \
	test "$got" = "step-done shimmer.pause shimmer.resume "

expect_empty "cuda_calls: none while paused" "$(diff_cuda)"

finish
