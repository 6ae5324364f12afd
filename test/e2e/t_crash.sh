#!/bin/bash
# Crashes on either side:
#  - the collector is SIGKILLed mid-run: the traced program carries on and
#    exits normally; the store opens and passes integrity_check;
#  - the traced process SIGKILLs itself: everything it did before is stored,
#    end_reason 'disconnect';
#  - the collector is stopped (SIGTERM) while clients are live: it drains
#    them first (everything stored, end_reason 'shutdown', store consistent)
#    and the clients carry on without it.
. "$(dirname "$0")/lib.sh"
# The workload's every allocation is compared with the rows: a row per
# event (the default `all` mode keeps rows only for long-lived blocks).
export SHIMMER_HEAP_ROWS=all
need "$SHIM" "$SHIMMERD" "$WL"

# -- collector killed ----------------------------------------------------
DB=$T/killed.db
WLOG=$T/long.log
start_collector "$DB" || { not_ok "collector starts"; finish; }
FAKE_CUDA_DELAY_NS=100000 traced "$WL" long 500 > "$T/long.out" 2> "$T/long.err" &
wpid=$!
for _ in $(seq 200); do
	n=$(grep -c '^C' "$WLOG" 2>/dev/null)
	[ "${n:-0}" -ge 200 ] && break
	sleep 0.05
done
kill -KILL "$CPID"
wait "$CPID" 2>/dev/null
CPID=
lines_at_kill=$(grep -c '^C' "$WLOG")
wait $wpid
rc=$?
check "collector killed: program exits normally" "exit status $rc (expected 3); stderr: $(head -c 300 "$T/long.err")" [ $rc = 3 ]
check "collector killed: program's stdout intact" "stdout: $(cat "$T/long.out")" \
	[ "$(cat "$T/long.out")" = done ]
check "collector killed: it was killed mid-run" "log had $lines_at_kill of $(grep -c '^C' "$WLOG") calls" \
	[ "$lines_at_kill" -lt "$(grep -c '^C' "$WLOG")" ]
check_integrity "collector killed: store passes integrity_check" "$DB"

# -- traced process killed --------------------------------------------------
DB=$T/selfkill.db
WLOG=$T/selfkill.log
start_collector "$DB" || { not_ok "collector starts"; finish; }
(traced "$WL" selfkill; exit $?) 2> /dev/null # no "Killed" notice from bash
rc=$?
check "process killed: died of SIGKILL" "exit status $rc" [ $rc = 137 ]
check "process killed: collector exits 0 on SIGTERM" "see collector log" stop_collector
load_log "$WLOG" "$T/selfkill-check.db" "$DB"
expect_empty "process killed: process and threads, end_reason disconnect" "$(diff_procs disconnect)"
expect_empty "process killed: CUDA calls before the kill stored" "$(diff_cuda)"
expect_empty "process killed: allocations before the kill stored" "$(diff_allocs)"

# -- collector stopped with live clients -----------------------------------
DB=$T/shutdown.db
WLOG=$T/block.log
start_collector "$DB" || { not_ok "collector starts"; finish; }
mkfifo "$T/in"
traced "$WL" block < "$T/in" > "$T/block.out" 2> "$T/block.err" &
wpid=$!
exec 7> "$T/in"
for _ in $(seq 400); do
	grep -q ready "$T/block.out" 2>/dev/null && break
	sleep 0.05
done
cp "$WLOG" "$T/block-at-stop.log"
stop_collector
rc=$?
check "shutdown: collector exits 0 on SIGTERM with live clients" "exit status $rc" [ $rc = 0 ]
exec 7>&-
wait $wpid
rc=$?
check "shutdown: client carries on and exits 0" "exit status $rc; stdout: $(cat "$T/block.out")" \
	[ $rc = 0 -a "$(tail -n1 "$T/block.out")" = done ]
load_log "$T/block-at-stop.log" "$T/shutdown-check.db" "$DB"
expect_empty "shutdown: process and threads, end_reason shutdown" "$(diff_procs shutdown)"
expect_empty "shutdown: CUDA calls drained" "$(diff_cuda)"
expect_empty "shutdown: allocations drained" "$(diff_allocs)"
check_integrity "shutdown: store passes integrity_check" "$DB"
finish
