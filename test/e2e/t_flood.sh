#!/bin/bash
# A flood of heap events does not crowd out the rarer records: in lossy
# mode (SHIMMER_LOSSLESS=0; `all` mode is lossless by default) a heap record is dropped once it would leave less than
# an eighth of the thread's ring free, so that CUDA calls (and ranges, and
# GPU work) still find room.  wl flood makes bursts of malloc+free pairs
# (SHIMMER_MALLOC=all, a 4 KiB ring: each burst overflows it many times)
# with one logged cudaMalloc+cudaFree after each; every one of those must
# be stored, and heap records must have been dropped.
. "$(dirname "$0")/lib.sh"
need "$SHIM" "$SHIMMERD" "$WL"

N=20 BURST=2000
DB=$T/store.db
WLOG=$T/wl.log
start_collector "$DB" || { not_ok "collector starts"; finish; }
SHIMMER_LOSSLESS=0 SHIMMER_RING_KB=4 traced "$WL" flood $N $BURST
rc=$?
check "workload exits 0" "exit status $rc" [ $rc = 0 ]
check "collector exits 0 on SIGTERM" "see collector log" stop_collector
load_log "$WLOG" "$T/check.db" "$DB"

dropped=$(q "SELECT coalesce(sum(d.events), 0) FROM s.drops d JOIN s.processes p USING (proc_id)
	WHERE p.pid IN $PIDS AND d.reason = 'ring_full'")
check "heap records dropped (the flood overflowed the ring)" "dropped $dropped" [ "$dropped" -gt 0 ]
expect_empty "every logged CUDA call stored" "$(diff_cuda)"
finish
