#!/bin/bash
# t_heaptrack: shimmer's host-heap leaks (SHIMMER_MALLOC=all) agree with
# heaptrack's on the same program, leaky (leaky.c), and both with leaky's
# own log.
#
# What is compared: for each function that plants a host leak (leaky's L
# lines with space host), the leaked bytes
#   - logged by leaky (the sum of its L lines),
#   - by heaptrack: `heaptrack_print --flamegraph-cost-type leaked -F`
#     writes one line per distinct stack, "frame;frame;...;frame BYTES"
#     (outermost first, each frame "function (file)" or "function" or an
#     address; an inlined function appears before the function it was
#     inlined into), with the exact leaked bytes of that stack; the bytes of
#     a function are the sum over the stacks that have a frame of it (no
#     planted function calls another, so each stack counts once);
#   - by shimmer: the rows of `shimmer leaks --format csv` whose frame is
#     the function's planted site (device host).
# and the totals over those functions.  heaptrack's whole-process total is
# not compared: the two tools see different processes (the shim loads the
# fake CUPTI, heaptrack its own helpers), but the program's own sites are
# the same.  CUDA blocks come from the fake runtime's mmap, which heaptrack
# does not trace, so only the host heap is compared.  Last, every host
# allocation per function of leaky: `shimmer allocations` against
# heaptrack's allocation counts.
. "$(dirname "$0")/lib.sh"

need "$SHIM" "$SHIMMERD" "$SHIMMER" "$LEAKY"

if ! command -v heaptrack > /dev/null || ! command -v heaptrack_print > /dev/null; then
	not_ok "heaptrack available" "heaptrack or heaptrack_print not found in PATH ($PATH):" \
		"install the Debian package heaptrack; this comparison cannot run without it"
	finish
fi

# heaptrack's run: its own log, its data file $T/ht.<compression suffix>.
WL_LOG=$T/ht.log heaptrack -o "$T/ht" "$LEAKY" > "$T/ht.out" 2>&1
rc=$?
htfile=$(ls "$T"/ht.zst "$T"/ht.gz "$T"/ht 2> /dev/null | head -1)
if [ "$rc" != 0 ] || [ -z "$htfile" ]; then
	not_ok "heaptrack ran leaky" "heaptrack exit $rc, no data file in $T:" "$(tail -5 "$T/ht.out")"
	finish
fi
ok "heaptrack ran leaky"
if ! heaptrack_print -f "$htfile" -p 0 -a 0 -T 0 -l 0 --flamegraph-cost-type leaked \
	-F "$T/ht.stacks" > "$T/ht.print" 2>&1 || [ ! -s "$T/ht.stacks" ]; then
	not_ok "heaptrack_print leaked stacks" "$(tail -5 "$T/ht.print")"
	finish
fi
ok "heaptrack_print leaked stacks"

# shimmer's run.
WLOG=$T/shimmer.log
start_collector "$T/all.db" || { not_ok "collector"; finish; }
SHIMMER_MALLOC=all traced "$LEAKY" 2> "$T/leaky.err"
rc=$?
stop_collector || not_ok "collector exit status"
check "shimmer ran leaky" "exit $rc, stderr $(head -3 "$T/leaky.err")" test "$rc" = 0
C=$T/check.db
load_sites "$WLOG" "$C"
if ! "$SHIMMER" leaks "$T/all.db" --format csv > "$T/leaks.csv" 2> "$T/leaks.err"; then
	not_ok "shimmer leaks csv" "$(head -3 "$T/leaks.err")"
	finish
fi
import_csv "$C" leaks "$T/leaks.csv"

# per_function FUNCS FOLDED TABLE COLUMN: heaptrack's folded lines
# ("frame;...;frame WEIGHT") summed per function of FUNCS (one a line) that
# a stack passes through, the innermost of them, into table TABLE (func,
# COLUMN) of $C.
per_function() {
	awk -v funcs="$1" '
BEGIN { n = split(funcs, f, "\n"); for (i = 1; i <= n; i++) want[f[i]] = 1 }
{
	w = $NF; stack = $0; sub(/ [0-9]+$/, "", stack)
	k = split(stack, fr, ";"); hit = ""
	for (i = 1; i <= k; i++) { name = fr[i]; sub(/ \(.*$/, "", name); if (name in want) hit = name }
	if (hit != "") sum[hit] += w
}
END { for (h in sum) print h "," sum[h] }' "$2" > "$T/$3.csv"
	sq "$C" "CREATE TABLE $3 (func TEXT, $4 INTEGER);" ".mode csv" ".import $T/$3.csv $3"
}

# heaptrack's bytes per planted host function: table ht (func, bytes).
per_function "$(sq "$C" "SELECT DISTINCT func FROM site WHERE kind = 'L' AND dev = 'host';")" \
	"$T/ht.stacks" ht bytes

expect_empty "heaptrack: leaked bytes per planted host function = leaky's log" "$(sq "$C" "
CREATE TEMP VIEW exp AS SELECT func, sum(bytes) AS bytes FROM site
	WHERE kind = 'L' AND dev = 'host' GROUP BY func;
$(multiset_diff exp ht "func, bytes")" 2>&1)"

expect_empty "shimmer (all) = heaptrack: leaked host bytes per planted function" "$(sq "$C" "
$(site_rows leaks L)
CREATE TEMP VIEW got AS SELECT substr(site, 1, instr(site, '@') - 1) AS func, sum(bytes) AS bytes
	FROM own_leaks WHERE dev = 'host' AND site <> frame GROUP BY 1;
$(multiset_diff ht got "func, bytes")" 2>&1)"

got=$(sq "$C" "
$(site_rows leaks L)
SELECT (SELECT coalesce(sum(bytes), 0) FROM ht), (SELECT coalesce(sum(bytes), 0) FROM own_leaks
	WHERE dev = 'host' AND site <> frame), (SELECT sum(bytes) FROM site
	WHERE kind = 'L' AND dev = 'host');" 2>&1)
IFS='|' read -r h s l <<< "$got"
check "total planted host leak: heaptrack = shimmer = log" \
	"heaptrack $h, shimmer $s, logged $l ($got)" test "$h" = "$l" -a "$s" = "$l"

# Every allocation, not only the leaked: heaptrack's allocation count per
# stack (--flamegraph-cost-type allocations) summed per function of leaky
# that allocates host memory (leaked, held at the peak, temporary), against
# `shimmer allocations`: the rows whose site is in that function (any of
# its lines: leak_realloc's malloc and realloc are two allocations to
# both tools, where leaky logs the realloc alone).
if heaptrack_print -f "$htfile" -p 0 -a 0 -T 0 -l 0 --flamegraph-cost-type allocations \
	-F "$T/ht.allocs" > "$T/ht.print2" 2>&1 && [ -s "$T/ht.allocs" ] &&
	"$SHIMMER" allocations "$T/all.db" --format csv > "$T/allocs.csv" 2> "$T/allocs.err"; then
	per_function "$(sq "$C" "SELECT DISTINCT func FROM site WHERE dev = 'host';")" \
		"$T/ht.allocs" ht_allocs count
	import_csv "$C" allocs "$T/allocs.csv"
	expect_empty "shimmer allocations = heaptrack: host allocations per function of leaky" "$(sq "$C" "
CREATE TEMP VIEW got AS SELECT f.func, sum(CAST(a.count AS INTEGER)) AS count
	FROM (SELECT DISTINCT func FROM site WHERE dev = 'host') f JOIN allocs a
	ON a.memory = 'host' AND CAST(a.pid AS INTEGER) IN (SELECT pid FROM site)
	AND a.frame GLOB f.func || ' (*' GROUP BY f.func;
$(multiset_diff ht_allocs got "func, count")
SELECT 'no function compared' WHERE (SELECT count(*) FROM got) < 3;" 2>&1)"
else
	not_ok "shimmer allocations = heaptrack: host allocations per function of leaky" \
		"$(tail -3 "$T/ht.print2") $(head -3 "$T/allocs.err")"
fi

finish
