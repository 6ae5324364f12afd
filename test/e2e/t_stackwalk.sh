#!/bin/bash
# The shim's stack walk (preload/unwind.c) against libunwind's
# unw_backtrace on real programs: with SHIMMER_STACK_CHECK=1 every captured
# stack is also unwound by unw_backtrace and the shim prints, at exit, how
# many walks gave other pcs.  sqlite3 (a 20k-row workload), Python and the
# e2e workload (threads, a fork, an exec), all allocations traced with their stacks.  Each
# must walk (not fall back to unw_backtrace for) most of its stacks, and
# every walk must agree.
. "$(dirname "$0")/lib.sh"
need "$SHIM" "$SHIMMERD" "$WL"

start_collector "$T/store.db" || { not_ok "collector starts"; finish; }

SQL="CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 20000)
INSERT INTO t SELECT x, hex(randomblob(24)) FROM c;
CREATE INDEX i ON t(b);
SELECT count(*), sum(length(b)) FROM t WHERE b > '8';"

# run NAME COMMAND...: the command traced with the check on; its report
run() {
	local name=$1
	shift
	LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK SHIMMER_MALLOC=all SHIMMER_LOSSLESS=1 \
		SHIMMER_STACK_CHECK=1 "$@" >/dev/null 2>"$T/$name.err"
	echo $? >"$T/$name.rc"
}

run sqlite sqlite3 "$T/w.db" "$SQL"
run python python3 -c 'import json; print(len(json.dumps([str(i) * 3 for i in range(50000)])))'
WLOG=$T/wl.log run wl "$WL" trace
check "collector exits 0" "see collector log" stop_collector

for name in sqlite python wl; do
	min=500
	[ $name = wl ] && min=20
	rc=$(cat "$T/$name.rc")
	check "$name: exits 0" "exit status $rc; $(cat "$T/$name.err")" [ "$rc" = 0 ]
	# one line per process (wl trace forks and execs): the sums
	line=$(grep 'stack check:' "$T/$name.err")
	read -r walked differ full < <(sed -n \
		's/.*check: \([0-9]*\) walked, \([0-9]*\) differ.*, \([0-9]*\) by unw_backtrace.*/\1 \2 \3/p' \
		<<<"$line" | awk '{ w += $1; d += $2; f += $3 } END { if (NR) print w, d, f }')
	if [ -z "$walked" ]; then
		not_ok "$name: the check reports" "stderr: $(cat "$T/$name.err")"
		continue
	fi
	check "$name: stacks walked ($walked)" "$line" [ "$walked" -gt "$min" ]
	check "$name: every walk as unw_backtrace" "$line" [ "$differ" = 0 ]
	check "$name: few stacks need unw_backtrace ($full)" "$line" [ "$full" -lt $((walked / 10)) ]
done
finish
