#!/bin/bash
# Fatal signals (issue 13, item 12): a traced process that dies of
# SIGSEGV, SIGABRT, SIGFPE, SIGILL or SIGBUS (a fault, or sent with kill)
# dies exactly as it does bare
# (the same status), and the store says which signal (the shim's handler
# sent it before the default action ran): end_reason 'signal', end_signal.
# A program with a SIGSEGV handler of its own, installed in main, recovers
# as it does bare and ends as 'exit'.
. "$(dirname "$0")/lib.sh"
WL_HARD=$O/test/e2e/wl_hard
need "$SHIM" "$SHIMMERD" "$WL_HARD"

DB=$T/store.db
start_collector "$DB" || { not_ok "collector starts"; finish; }
for k in segv:11 abort:6 fpe:8 ill:4 bus:7 kill:7 caught:0; do
	kind=${k%:*} sig=${k#*:}
	(ulimit -c 0; exec "$WL_HARD" fatal "$kind") > "$T/$kind.bare" 2>&1
	bare=$?
	# (a signal the shim swallowed would leave `kill` in pause(): timeout)
	(ulimit -c 0; exec timeout -s KILL 30 env SHIMMER_MALLOC=all LD_PRELOAD=$SHIM \
		SHIMMER_SOCKET=$SOCK "$WL_HARD" fatal "$kind") > "$T/$kind.out" 2> "$T/$kind.err"
	rc=$?
	check "$kind: the same status as bare ($bare)" "traced $rc; stderr: $(head -c 300 "$T/$kind.err")" \
		[ "$rc" = "$bare" ]
	check "$kind: the same output as bare" "traced '$(cat "$T/$kind.out")', bare '$(cat "$T/$kind.bare")'" \
		[ "$(cat "$T/$kind.out")" = "$(cat "$T/$kind.bare")" ]
	if [ "$sig" != 0 ]; then
		check "$kind: died of signal $sig" "status $rc" [ "$rc" = $((128 + sig)) ]
	fi
done
check "collector exits 0 on SIGTERM" "see collector log" stop_collector
for k in segv:11 abort:6 fpe:8 ill:4 bus:7 kill:7 caught:0; do
	kind=${k%:*} sig=${k#*:}
	got=$(sq -separator ' ' "$DB" "SELECT end_reason, coalesce(end_signal, 0) FROM processes
		WHERE argv LIKE '%\"$kind\"%'")
	if [ "$sig" != 0 ]; then
		check "$kind: stored as signal $sig" "stored '$got'" [ "$got" = "signal $sig" ]
	else
		check "$kind: its own handler recovered: stored as exit" "stored '$got'" [ "$got" = "exit 0" ]
	fi
done
finish
