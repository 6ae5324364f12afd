#!/bin/bash
# t_heapagg: the heap answers the collector computes as events arrive
# (SHIMMER_MALLOC=all, the default SHIMMER_HEAP_ROWS) are the answers a row
# per event gives.  Each workload runs once with SHIMMER_HEAP_ROWS=both: the
# collector stores every row and the aggregated tables from the very same
# events, so the two can be compared on any workload, threads and all.
# Every memory command then reads the store twice - as usual (the
# aggregated tables) and with SHIMMER_MODEL_HEAP=rows (the rows alone) -
# and every figure of summary, peak, leaks, temporary, allocations (its size
# and lifetime histograms too) and export's folded weights must be the
# same: counts and bytes exactly, peaks to the byte, leak fits to the last
# digit; only floating-point means and deviations of
# call times (summed in another order) may differ in their last digits,
# and median lifetimes by the width of a histogram bucket (a quarter
# octave), as docs/schema.md says.
#
# Workloads: sqlite3 (one thread, many call sites), Python, wl trace
# (threads, a fork, an exec, CUDA memory through the fake runtime), and
# leakstep (top-level "step" ranges: the step fit's checkpoints).
#
# Then a 10-million-event run in the default mode: heap_random's 5 million
# random-size allocations and frees, lossless by default, nothing dropped,
# every event in the aggregated totals, a store of a few hundred KiB, and
# the collector's peak with the sites holding it.
. "$(dirname "$0")/lib.sh"
need "$SHIM" "$SHIMMERD" "$SHIMMER" "$WL" "$LEAKSTEP" "$O/bench/heap_random"

# the interpreter itself, not a wrapper script (pyenv's shims are shells)
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
DB=$T/both.db
start_collector "$DB" || { not_ok "collector starts"; finish; }

SQL="CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 20000)
INSERT INTO t SELECT x, hex(randomblob(24)) FROM c;
CREATE INDEX i ON t(b);
DELETE FROM t WHERE a % 3 = 0;
SELECT count(*), sum(length(b)) FROM t WHERE b > '8';"

# both NAME CMD...: CMD traced, rows and aggregates
both() {
	local name=$1 rc
	shift
	LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK SHIMMER_MALLOC=all SHIMMER_HEAP_ROWS=both \
		WL_LOG=$T/$name.log "$@" > /dev/null 2> "$T/$name.err"
	rc=$?
	check "$name: runs" "exit status $rc: $(head -c 300 "$T/$name.err")" [ $rc = 0 ]
}
both sqlite sqlite3 "$T/w.db" "$SQL"
both python $PY -c 'import json; d = {str(i): [i] * (i % 7) for i in range(30000)}; print(len(json.dumps(d)))'
both wl "$WL" trace
both leakstep "$LEAKSTEP" grow 20
check "collector exits 0" "see collector log" stop_collector

aggs=$(sqlite3 "$DB" "SELECT count(*) FROM heap_totals")
procs=$(sqlite3 "$DB" "SELECT count(*) FROM processes WHERE malloc_mode = 'all'")
check "every process aggregated ($aggs of $procs)" "heap_totals has $aggs rows" \
	holds '[ "$aggs" -ge 5 ] && [ "$aggs" = "$procs" ]'
late=$(sqlite3 "$DB" "SELECT coalesce(sum(late_events), 0) FROM heap_totals")
drops=$(sqlite3 "$DB" "SELECT coalesce(sum(events), 0) FROM drops")
check "nothing dropped" "drops: $drops" [ "$drops" = 0 ]
echo "# events applied out of time order: $late"
# the aggregates count what the rows hold
bad=$(sqlite3 "$DB" "SELECT h.proc_id, h.allocs, r.n, h.live_bytes, r.live
	FROM heap_totals h JOIN (SELECT proc_id, count(*) AS n,
		coalesce(sum(CASE WHEN free_ns IS NULL THEN size END), 0) AS live
		FROM allocations WHERE space = 'host' GROUP BY proc_id) r USING (proc_id)
	WHERE h.allocs != r.n OR h.live_bytes != r.live")
expect_empty "heap_totals: allocations and live bytes as the rows" "$bad"

# compare NAME FILE_AGG FILE_ROWS: every field equal but the tolerated
cmp_py='
import csv, sys, math
name, a, b = sys.argv[1], sys.argv[2], sys.argv[3]
ra, rb = list(csv.reader(open(a))), list(csv.reader(open(b)))
if len(ra) != len(rb):
    print("%s: %d rows against %d" % (name, len(ra), len(rb))); sys.exit(1)
head = ra[0] if ra else []
loose = {"mean_ns": 1e-9, "stddev_ns": 1e-6, "median_lifetime_ns": 0.25}
bad = 0
for i, (x, y) in enumerate(zip(ra, rb)):
    for j, (u, v) in enumerate(zip(x, y)):
        if u == v:
            continue
        col = head[j] if j < len(head) else str(j)
        tol = loose.get(col)
        try:
            fu, fv = float(u), float(v)
        except ValueError:
            tol = None
        if tol is not None and abs(fu - fv) <= tol * max(abs(fu), abs(fv), 1.0):
            continue
        bad += 1
        if bad <= 5:
            print("%s row %d %s: aggregated %s, rows %s" % (name, i, col, u, v))
    if len(x) != len(y):
        bad += 1
        print("%s row %d: %d fields against %d" % (name, i, len(x), len(y)))
sys.exit(1 if bad else 0)
'
for cmd in summary peak leaks temporary allocations "allocations --histogram size" \
	"allocations --histogram lifetime"; do
	c=${cmd// --histogram /.}
	# shellcheck disable=SC2086 # the command and its options
	"$SHIMMER" $cmd "$DB" --format csv > "$T/agg.$c.csv" 2> "$T/agg.$c.err"
	ra=$?
	# shellcheck disable=SC2086
	SHIMMER_MODEL_HEAP=rows "$SHIMMER" $cmd "$DB" --format csv > "$T/rows.$c.csv" 2> "$T/rows.$c.err"
	rr=$?
	check "$cmd: reads both ways" "exit $ra / $rr: $(head -c 300 "$T/agg.$c.err")" holds '[ $ra = 0 ] && [ $rr = 0 ]'
	why=$($PY -c "$cmp_py" "$cmd" "$T/agg.$c.csv" "$T/rows.$c.csv")
	check "$cmd: every figure as the rows give it ($(($(wc -l < "$T/agg.$c.csv") - 1)) rows)" "$why" \
		[ -z "$why" ]
done
# the memories themselves, which the CSV rows cannot show for a memory with
# no site at its peak: leakstep allocates nothing on the host, so it has no
# host memory either way (not a host peak of 0 B at some instant), and its
# heap_totals row no peak instant
"$SHIMMER" peak "$DB" --format json 2>&1 | $PY -m json.tool > "$T/agg.peak.json"
SHIMMER_MODEL_HEAP=rows "$SHIMMER" peak "$DB" --format json 2>&1 | $PY -m json.tool \
	> "$T/rows.peak.json"
expect_empty "peak --format json: the same memories, peaks and sites" \
	"$(diff "$T/agg.peak.json" "$T/rows.peak.json" | head -12)"
read -r none bad < <(sqlite3 -separator ' ' "$DB" "SELECT count(*),
	count(peak_ns) FROM heap_totals WHERE allocs = 0")
check "a heap with no allocation has no peak instant ($none such, $bad with one)" \
	"heap_totals: $none rows with no allocation, $bad of them with peak_ns" \
	holds '[ "$none" -ge 1 ] && [ "$bad" = 0 ]'
# not a comparison of empty or one-bucket histograms: the host lifetimes
# span many buckets (pid,proc_id,memory,lo_ns,hi_ns,live_at_end,count,...)
n=$(awk -F, 'NR > 1 && $3 == "host" && $6 == 0 && $7 > 0' "$T/agg.allocations.lifetime.csv" | wc -l)
check "the lifetime histograms have many host buckets ($n)" "$n" [ "$n" -gt 15 ]
# the same sites: not a comparison of empty tables
n=$(awk 'END { print NR - 1 }' "$T/agg.leaks.csv")
check "leaks lists the sites ($n)" "$n rows" [ "$n" -gt 20 ]
for w in allocated leaked peak; do
	"$SHIMMER" export "$DB" --format folded --weight $w > "$T/agg.$w.folded" 2>&1
	SHIMMER_MODEL_HEAP=rows "$SHIMMER" export "$DB" --format folded --weight $w \
		> "$T/rows.$w.folded" 2>&1
	expect_empty "export folded --weight $w: the same stacks and bytes" \
		"$(diff <(sort "$T/agg.$w.folded") <(sort "$T/rows.$w.folded") | head -10)"
done
# a step fit from the checkpoints kept at the ends of top-level ranges
steps=$(sqlite3 "$DB" "SELECT count(*) FROM heap_steps")
check "leakstep's steps kept as checkpoints ($steps)" "heap_steps has $steps" [ "$steps" -ge 20 ]
check "leaks fits over steps from the aggregates" "no step fit in $(head -3 "$T/agg.leaks.csv")" \
	grep -q ',steps,' "$T/agg.leaks.csv"

# --- 10 million events, the default mode ----------------------------------
DB=$T/ten.db
start_collector "$DB" || { not_ok "collector starts (10 M)"; finish; }
LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK SHIMMER_MALLOC=all "$O/bench/heap_random" -n 5000000 \
	> "$T/ten.out" 2> "$T/ten.err"
rc=$?
check "10 M: heap_random runs" "exit $rc: $(head -c 300 "$T/ten.err")" [ $rc = 0 ]
check "10 M: collector exits 0" "see collector log" stop_collector
read -r lossless allocs frees drops < <(sqlite3 "$DB" "SELECT p.lossless, h.allocs, h.frees,
	(SELECT coalesce(sum(events), 0) FROM drops) FROM processes p JOIN heap_totals h USING (proc_id)" |
	tr '|' ' ')
check "10 M: lossless by default" "lossless=$lossless" [ "$lossless" = 1 ]
check "10 M: nothing dropped" "drops: $drops" [ "$drops" = 0 ]
# 5,000,000 allocations and frees, and the table's own
check "10 M: every event aggregated ($allocs allocations, $frees frees)" \
	"heap_totals: $allocs, $frees" holds '[ "$allocs" -ge 5000001 ] && [ "$frees" -ge 5000001 ]'
size=$(stat -c %s "$DB")
check "10 M: the store is small ($size bytes)" "$size bytes" [ "$size" -lt 4000000 ]
# peak reads the collector's peak and the sites holding it (the kept rows
# alone are the long-lived blocks: their peak is another figure)
"$SHIMMER" peak "$DB" --format csv > "$T/ten.peak.csv" 2> "$T/ten.peak.err"
want=$(sqlite3 "$DB" "SELECT peak_bytes FROM heap_totals")
got=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "bytes") b = i }
	NR > 1 && $3 == "host" { p = $4; s += $b } END { print p + 0, s + 0 }' "$T/ten.peak.csv")
check "10 M: peak is the collector's ($want bytes), its sites sum to it" \
	"peak, sites' sum: $got; $(head -c 300 "$T/ten.peak.err")" [ "$got" = "$want $want" ]
# the event logs (csv, chrome) hold only the kept rows: export says so, and
# names how to keep every event; a store that kept every row (both) is silent
"$SHIMMER" export "$DB" --format csv -o "$T/ten.csv" 2> "$T/ten.csv.err"
check "10 M: export csv says the heap was aggregated, with its counts" "$(cat "$T/ten.csv.err")" \
	grep -q "aggregated as recorded.* of its $allocs allocations are events here.*SHIMMER_HEAP_ROWS=all" \
	"$T/ten.csv.err"
"$SHIMMER" export "$T/both.db" --format chrome -o "$T/both.json" 2> "$T/both.json.err"
expect_empty "export of a store that kept every row (both) warns of nothing" "$(cat "$T/both.json.err")"
finish
