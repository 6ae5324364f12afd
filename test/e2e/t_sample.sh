#!/bin/bash
# Sample mode: the counters stay exact (every call, every byte) while only a
# byte-proportional sample of allocations becomes rows.  One worker thread
# makes N malloc(SIZE)+free pairs; with SHIMMER_SAMPLE_BYTES=S each block is
# sampled with probability about SIZE/S, so about N*SIZE/S rows (~303 here,
# standard deviation ~17): the bounds below are about 6 standard deviations.
. "$(dirname "$0")/lib.sh"
need "$SHIM" "$SHIMMERD" "$WL"

N=20000 SIZE=1000 S=65536
DB=$T/store.db
WLOG=$T/wl.log
start_collector "$DB" || { not_ok "collector starts"; finish; }
SHIMMER_MALLOC=sample SHIMMER_SAMPLE_BYTES=$S traced "$WL" sample $N $SIZE
rc=$?
check "workload exits 0" "exit status $rc" [ $rc = 0 ]
check "collector exits 0 on SIGTERM" "see collector log" stop_collector
load_log "$WLOG" "$T/check.db" "$DB"
TID=$(q "SELECT tid FROM main.T WHERE worker")
PROC="(SELECT proc_id FROM s.processes WHERE pid IN $PIDS)"

got=$(q "SELECT malloc_mode, sample_bytes FROM s.processes WHERE proc_id IN $PROC")
check "process is in sample mode" "got '$got'" [ "$got" = "sample|$S" ]
fc() {
	q "SELECT c.count, c.bytes FROM s.function_counts c JOIN s.functions f USING (fn_id)
		WHERE c.proc_id IN $PROC AND c.tid = $TID AND f.name = '$1'"
}
got=$(fc malloc)
check "function_counts exact: $N mallocs, $((N * SIZE)) bytes" "got '$got'" \
	[ "$got" = "$N|$((N * SIZE))" ]
got=$(fc free)
check "function_counts exact: $N frees" "got '$got'" [ "${got%%|*}" = "$N" ]
rows=$(q "SELECT count(*) FROM s.allocations WHERE proc_id IN $PROC AND alloc_tid = $TID")
check "sampled rows plausible for SHIMMER_SAMPLE_BYTES (200..420)" "got $rows rows" \
	[ "$rows" -ge 200 -a "$rows" -le 420 ]
bad=$(q "SELECT count(*) FROM s.allocations WHERE proc_id IN $PROC AND alloc_tid = $TID
	AND (sampled <> 1 OR size <> $SIZE OR space <> 'host')")
check "sampled rows are flagged, of the right size" "$bad rows are not" [ "$bad" = 0 ]
est=$(q "SELECT CAST(sum(weight) AS INTEGER) FROM s.allocations WHERE proc_id IN $PROC
	AND alloc_tid = $TID")
check "sum(weight) estimates the bytes allocated (+-40%)" "estimate ${est:-none} for $((N * SIZE))" \
	[ "${est:-0}" -ge $((N * SIZE * 6 / 10)) -a "${est:-0}" -le $((N * SIZE * 14 / 10)) ]
unfreed=$(q "SELECT count(*) FROM s.allocations a JOIN s.functions f ON f.fn_id = a.free_fn
	WHERE a.proc_id IN $PROC AND a.alloc_tid = $TID AND f.name = 'free' AND a.free_tid = $TID")
check "the frees of sampled blocks are recorded" "$unfreed of $rows rows freed" [ "$unfreed" = "$rows" ]
finish
