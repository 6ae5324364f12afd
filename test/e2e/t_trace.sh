#!/bin/bash
# Threads, a forked child and an exec'd child, every heap call traced
# (SHIMMER_MALLOC=all): the store must hold exactly the CUDA calls, the
# allocations, the processes and threads and the counters the workload
# logged.  Every CUDA call of the fake runtime takes at least DELAY ns, so
# every stored duration must be at least that.
. "$(dirname "$0")/lib.sh"
# The workload's every allocation is compared with the rows: a row per
# event (the default `all` mode keeps rows only for long-lived blocks).
export SHIMMER_HEAP_ROWS=all
need "$SHIM" "$SHIMMERD" "$WL"

DELAY=200000
DB=$T/store.db
WLOG=$T/wl.log
start_collector "$DB" || { not_ok "collector starts"; finish; }
FAKE_CUDA_DELAY_NS=$DELAY traced "$WL" trace > "$T/out" 2> "$T/err"
rc=$?
check "workload exits 0" "exit status $rc; stderr: $(head -c 500 "$T/err")" [ $rc = 0 ]
check "collector exits 0 on SIGTERM" "see $T/collector.log" stop_collector
load_log "$WLOG" "$T/check.db" "$DB"

check "log has 3 processes" "$(q 'SELECT count(*) FROM main.P')" \
	[ "$(q 'SELECT count(*) FROM main.P')" = 3 ]
expect_empty "processes, parents and threads" "$(diff_procs exit)"
expect_empty "CUDA calls, all fields, per thread and process" "$(diff_cuda)"
expect_empty "allocations (host, device, pinned, managed) and their frees" "$(diff_allocs)"
expect_empty "function_counts exact" "$(diff_counts)"
expect_empty "CUDA durations >= FAKE_CUDA_DELAY_NS" "$(q "
SELECT 'too short:', fn, dur_ns FROM s.cuda_calls_named
WHERE pid IN $PIDS AND dur_ns < $DELAY LIMIT 10;")"
expect_empty "no drops" "$(q "SELECT 'dropped:', * FROM s.drops WHERE events > 0;")"
check_integrity "integrity_check" "$DB"
finish
