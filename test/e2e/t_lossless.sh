#!/bin/bash
# A burst of N malloc calls on one thread (SHIMMER_MALLOC=all) through a
# 4 KiB ring.  Lossless (SHIMMER_LOSSLESS=1, and by default in `all` mode):
# every call is a row, nothing dropped, the process marked lossless.  With
# SHIMMER_LOSSLESS=0 the collector falls behind, and the drops are counted
# exactly: stored + dropped == produced (the exact counter).  Then the
# rings' default size in each mode.
. "$(dirname "$0")/lib.sh"
need "$SHIM" "$SHIMMERD" "$WL"

N=50000 SIZE=72
for mode in lossless default lossy; do
	DB=$T/$mode.db
	WLOG=$T/$mode.log
	start_collector "$DB" || { not_ok "$mode: collector starts"; continue; }
	case $mode in
	lossless) SHIMMER_LOSSLESS=1 SHIMMER_RING_KB=4 traced "$WL" burst $N $SIZE ;;
	default) SHIMMER_RING_KB=4 traced "$WL" burst $N $SIZE ;;
	lossy) SHIMMER_LOSSLESS=0 SHIMMER_RING_KB=4 traced "$WL" burst $N $SIZE ;;
	esac
	rc=$?
	check "$mode: workload exits 0" "exit status $rc" [ $rc = 0 ]
	check "$mode: collector exits 0 on SIGTERM" "see collector log" stop_collector
	load_log "$WLOG" "$T/$mode-check.db" "$DB"
	TID=$(q "SELECT tid FROM main.T WHERE worker")
	PROC="(SELECT proc_id FROM s.processes WHERE pid IN $PIDS)"
	produced=$(q "SELECT coalesce(sum(c.count), 0) FROM s.function_counts c
		JOIN s.functions f USING (fn_id) WHERE c.proc_id IN $PROC AND c.tid = $TID
		AND f.family = 'heap'")
	mallocs=$(q "SELECT coalesce(sum(c.count), 0) FROM s.function_counts c
		JOIN s.functions f USING (fn_id) WHERE c.proc_id IN $PROC AND c.tid = $TID
		AND f.name = 'malloc'")
	stored=$(q "SELECT (SELECT count(*) FROM s.allocations WHERE proc_id IN $PROC
		AND alloc_tid = $TID) + (SELECT count(*) FROM s.allocations WHERE proc_id IN $PROC
		AND free_tid = $TID)")
	dropped=$(q "SELECT coalesce(sum(events), 0) FROM s.drops WHERE proc_id IN $PROC
		AND tid = $TID")
	check "$mode: counter exact ($N mallocs)" "function_counts says $mallocs" [ "$mallocs" = $N ]
	if [ $mode != lossy ]; then
		got=$(q "SELECT lossless FROM s.processes WHERE proc_id IN $PROC")
		check "$mode: process marked lossless" "lossless=$got" [ "$got" = 1 ]
		check "$mode: every call stored" "stored $stored of $produced" [ "$stored" = "$produced" ]
		alldrops=$(q "SELECT coalesce(sum(events), 0) FROM s.drops WHERE proc_id IN $PROC")
		check "$mode: nothing dropped" "drops: $alldrops" [ "$alldrops" = 0 ]
	else
		check "$mode: the tiny ring overflowed (drops counted)" "dropped $dropped" [ "$dropped" -gt 0 ]
		check "$mode: stored + dropped == produced" \
			"stored $stored + dropped $dropped != produced $produced" \
			[ $((stored + dropped)) = "$produced" ]
	fi
done

# The rings' size: 1 MiB by default in `all` mode (a fast allocator rides
# out the collector's moments off the CPU), 256 KiB in sample mode, and
# SHIMMER_RING_KB wins over both.  The shim's debug line says.
DB=$T/rings.db
WLOG=$T/rings.log
start_collector "$DB" || not_ok "rings: collector starts"
for c in "all||1048576" "sample||262144" "all|64|65536"; do
	IFS='|' read -r m kb want <<< "$c"
	out=$(SHIMMER_MALLOC=$m SHIMMER_RING_KB=$kb SHIMMER_DEBUG=1 traced "$WL" burst 10 $SIZE 2>&1)
	check "rings: SHIMMER_MALLOC=$m SHIMMER_RING_KB=${kb:-unset}: $want bytes" \
		"$(grep -m1 'slots of' <<< "$out")" grep -q "slots of $want bytes" <<< "$out"
done
# a value from the configuration file wins over the mode's default too
printf 'socket = %s\nSHIMMER_RING_KB = 64\nSHIMMER_LOSSLESS = 0\n' "$SOCK" > "$T/shimmer.conf"
out=$(env -u SHIMMER_SOCKET LD_PRELOAD=$SHIM SHIMMER_CONFIG="$T/shimmer.conf" SHIMMER_MALLOC=all \
	SHIMMER_DEBUG=1 WL_LOG=$WLOG "$WL" burst 10 $SIZE 2>&1)
check "rings: SHIMMER_RING_KB=64 in the configuration file: 65536 bytes" \
	"$(grep -m1 'slots of' <<< "$out")" grep -q "slots of 65536 bytes" <<< "$out"
stop_collector || not_ok "rings: collector exits 0"
lossy=$(sqlite3 "$DB" "SELECT count(*) FROM processes WHERE lossless = 0 AND malloc_mode = 'all'")
check "rings: SHIMMER_LOSSLESS=0 in the configuration file: not lossless" "$lossy processes" \
	[ "$lossy" = 1 ]
finish
