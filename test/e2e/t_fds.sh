#!/bin/bash
# The shim's descriptor belongs to the program's numbers too (issue 13,
# defect 6).  A program that closes every descriptor above 2 at start, as
# daemons do, then talks on a socketpair must receive exactly its own 5
# bytes, never the shim's messages; so must one that puts a copy of its
# socket at every number from 3 to 1023.  The shim notices that its socket
# is gone, says so in one stderr line and stops tracing; the process row
# still ends.  A program that sets up its own low descriptors (dup2 onto
# 3..9) is traced to its end.  And a program at RLIMIT_NOFILE (issue 13, faults): with no
# descriptor for the shim's region, one line and an untraced program whose
# output and status are unchanged; descriptors exhausted while traced: the
# program (a thread, a forked child) runs as it does bare.
. "$(dirname "$0")/lib.sh"
# These checks count the rows of single events: all mode keeps one per heap
# event only when asked (t_heapagg checks that the aggregated answers,
# all mode's default, equal those rows).
export SHIMMER_HEAP_ROWS=all
WL_HARD=$O/test/e2e/wl_hard
need "$SHIM" "$SHIMMERD" "$WL_HARD"

DB=$T/store.db
start_collector "$DB" || { not_ok "collector starts"; finish; }
for mode in closefds replacefds; do
	SHIMMER_MALLOC=all LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK "$WL_HARD" $mode \
		> "$T/$mode.out" 2> "$T/$mode.err"
	rc=$?
	check "$mode: exits 0" "status $rc; stderr: $(head -c 300 "$T/$mode.err")" [ $rc = 0 ]
	check "$mode: the program received exactly its 5 bytes" "stdout: $(cat "$T/$mode.out")" \
		[ "$(cat "$T/$mode.out")" = "got 5" ]
	lines=$(grep -c '^shimmer' "$T/$mode.err")
	check "$mode: one stderr line says the shim's descriptor was taken" \
		"stderr: $(cat "$T/$mode.err")" \
		holds '[ "$lines" = 1 ] && grep -q '\''closed or replaced descriptor'\'' "$T/$mode.err"'
done
# dup2 onto the low numbers (3..9) a program sets up for itself: the
# shim's descriptor is not among them, tracing goes on
SHIMMER_MALLOC=all LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK "$WL_HARD" lowfds \
	> "$T/lowfds.out" 2> "$T/lowfds.err"
rc=$?
check "lowfds: exits 0, says nothing" "status $rc; stderr: $(cat "$T/lowfds.err")" \
	holds '[ $rc = 0 ] && [ ! -s "$T/lowfds.err" ] && [ "$(cat "$T/lowfds.out")" = "low fds ok" ]'
check "collector exits 0 on SIGTERM" "see collector log" stop_collector
n=$(sq "$DB" "SELECT count(*) FROM processes WHERE end_ns IS NOT NULL AND argv LIKE '%fds%'
	AND argv NOT LIKE '%lowfds%'")
check "both processes stored and ended" "$n ended" [ "$n" = 2 ]
got=$(sq -separator ' ' "$DB" "SELECT p.end_reason, count(a.ptr) FROM processes p
	JOIN allocations a USING (proc_id) WHERE p.argv LIKE '%lowfds%' AND a.size BETWEEN 100 AND 199")
check "lowfds: traced to the end (its 300 allocations, BYE)" "end, allocations: $got" \
	[ "$got" = "exit 300" ]

# -- no descriptor for the shim -----------------------------------------
DB=$T/limit.db
start_collector "$DB" || { not_ok "collector starts"; finish; }
# limited N OUT ERR CMD...: CMD with RLIMIT_NOFILE N and nothing open but
# 0, 1 (OUT) and 2 (ERR); the shim's variables go on CMD itself.
limited() {
	local n=$1 out=$2 err=$3
	shift 3
	(
		exec > "$out" 2> "$err" < /dev/null
		for fd in /proc/$BASHPID/fd/*; do
			fd=${fd##*/}
			[ "$fd" -gt 2 ] && [ "$fd" != 255 ] && eval "exec $fd>&-"
		done
		ulimit -n "$n" && exec "$@"
	)
}
limited 4 "$T/bare.out" "$T/bare.err" "$WL_HARD" exits
limited 4 "$T/limit.out" "$T/limit.err" env SHIMMER_MALLOC=all LD_PRELOAD=$SHIM \
	SHIMMER_SOCKET=$SOCK "$WL_HARD" exits
rc=$?
bare=$(sed 's/[0-9]*$//' "$T/bare.out")
traced_out=$(sed 's/[0-9]*$//' "$T/limit.out")
check "RLIMIT_NOFILE 4: program's status and output unchanged" \
	"status $rc, stdout '$traced_out', bare '$bare' ($(cat "$T/bare.err"))" \
	holds '[ $rc = 0 ] && [ "$traced_out" = "$bare" ] && [ "$bare" = "child " ]'
check "RLIMIT_NOFILE 4: one stderr line: not tracing, and why" "stderr: $(cat "$T/limit.err")" \
	holds '[ "$(grep -c '\''^shimmer'\'' "$T/limit.err")" = 1 ] && grep -q '\''Too many open files.*not tracing'\'' "$T/limit.err"'

bare=$("$WL_HARD" fdfill 2>&1)
traced_out=$(SHIMMER_MALLOC=all LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK "$WL_HARD" fdfill \
	2> "$T/fill.err")
rc=$?
check "descriptors exhausted while traced: program unchanged" \
	"status $rc, stdout '$traced_out', bare '$bare'; stderr: $(head -c 300 "$T/fill.err")" \
	holds '[ $rc = 0 ] && [ "$traced_out" = "$bare" ] && [ "$bare" = ok ]'
# The shim keeps two descriptors (its socket and the region's memfd, for a
# reconnect); a fork child closes the parent's copies and gets its own in
# their place, so even a child forked with none free is traced.
check "descriptors exhausted: the forked child is traced, silently" \
	"stderr: $(cat "$T/fill.err")" [ ! -s "$T/fill.err" ]
check "collector exits 0 on SIGTERM" "see collector log" stop_collector
n=$(sq "$DB" "SELECT count(*) FROM processes WHERE argv LIKE '%fdfill%' AND end_ns IS NOT NULL")
check "descriptors exhausted: the parent and its child were traced to their end" "$n processes" \
	[ "$n" = 2 ]
finish
