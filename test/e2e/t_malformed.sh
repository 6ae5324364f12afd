#!/bin/bash
# Hostile peers: a bad wire version, an oversized message and a corrupt
# record in the event region (test/e2e/badclient speaks the wire format
# itself).  The collector logs a line for each, closes that client only,
# keeps what the client sent before ('rejected' process, its earlier
# record stored) and stores a well-behaved client traced at the same time
# completely.
. "$(dirname "$0")/lib.sh"
# The workload's every allocation is compared with the rows: a row per
# event (the default `all` mode keeps rows only for long-lived blocks).
export SHIMMER_HEAP_ROWS=all
need "$SHIM" "$SHIMMERD" "$WL" "$BADCLIENT"

DB=$T/store.db
WLOG=$T/wl.log
start_collector "$DB" || { not_ok "collector starts"; finish; }
FAKE_CUDA_DELAY_NS=1000000 traced "$WL" trace > /dev/null 2> "$T/wl.err" &
wpid=$!
log0=$(wc -l < "$T/collector.log")
declare -A bpid
for c in version oversize corrupt; do
	"$BADCLIENT" "$SOCK" $c > "$T/bad-$c.out" 2> "$T/bad-$c.err"
	rc=$?
	bpid[$c]=$(sed -n 's/^pid //p' "$T/bad-$c.out")
	check "$c: collector closes the offending client" "$(cat "$T/bad-$c.err")" [ $rc = 0 ]
done
wait $wpid
rc=$?
check "good client traced meanwhile exits 0" "exit status $rc: $(head -c 300 "$T/wl.err")" [ $rc = 0 ]
check "collector survives" "it died; log: $(tail -5 "$T/collector.log")" kill -0 "$CPID"
check "collector exits 0 on SIGTERM" "see collector log" stop_collector
log1=$(wc -l < "$T/collector.log")
check "collector logs a line per bad client" "$((log1 - log0)) lines: $(tail -n +$((log0 + 1)) "$T/collector.log" | head -5)" \
	[ $((log1 - log0)) -ge 3 ]

load_log "$WLOG" "$T/check.db" "$DB"
for c in oversize corrupt; do
	size=$([ $c = oversize ] && echo 424242 || echo 424243)
	got=$(q "SELECT p.end_reason, count(a.id) FROM s.processes p LEFT JOIN s.allocations a
		ON a.proc_id = p.proc_id AND a.size = $size WHERE p.pid = ${bpid[$c]:-0}
		GROUP BY p.proc_id")
	check "$c: process 'rejected', its earlier record kept" "got '$got'" [ "$got" = "rejected|1" ]
done
expect_empty "good client: processes and threads" "$(diff_procs exit)"
expect_empty "good client: CUDA calls" "$(diff_cuda)"
expect_empty "good client: allocations" "$(diff_allocs)"
expect_empty "good client: function_counts" "$(diff_counts)"
check_integrity "store passes integrity_check" "$DB"
finish
