#!/bin/bash
# t_ranks: `shimmer summary --by-rank` and --rank on stores of 2 and 8
# ranks.  Each rank is a wl_ranks process (wl_ranks.c) with RANK set, as
# torchrun sets it, all writing one store; one of them (the planted
# straggler) sleeps longer in every step.  The truth is the ranks' logs:
# each step's duration measured around its range.
#
#  - the straggler line names the planted rank, and so do the step row's
#    slowest rank (JSON) and the table;
#  - the step row's min and max are the logged per-rank mean steps' (5%);
#  - with no straggler planted, no straggler is named;
#  - --rank R keeps only rank R's process (summary, and compare in both
#    stores); --pid one process (leaks).
. "$(dirname "$0")/lib.sh"

WL_RANKS=$O/test/e2e/wl_ranks
need "$SHIM" "$SHIMMERD" "$SHIMMER" "$WL_RANKS"

C=$T/check.db
STEPS=8
STEP_US=50000
EXTRA_US=60000

# ranks NAME N SLOW: N ranks, rank SLOW the straggler (-1: none), into
# $T/NAME.db; their logs as table L_NAME (pid, rank, step, t0, t1).
ranks() {
	local name=$1 n=$2 slow=$3 r pids=() rc=0
	WLOG=$T/$name.log
	start_collector "$T/$name.db" || { not_ok "$name: collector"; finish; }
	for ((r = 0; r < n; r++)); do
		RANK=$r LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK WL_LOG=$WLOG \
			"$WL_RANKS" $STEPS $STEP_US "$slow" $EXTRA_US 2>> "$T/$name.err" &
		pids+=($!)
	done
	for r in "${pids[@]}"; do
		wait "$r" || rc=$?
	done
	stop_collector || not_ok "$name: collector exit status"
	check "$name: $n ranks ran" "exit $rc, stderr $(head -3 "$T/$name.err")" test "$rc" = 0
	sq "$C" "CREATE TABLE L_$name (pid INTEGER, rank INTEGER, step INTEGER, t0 INTEGER,
		t1 INTEGER);"
	awk -F, '$1 == "S" { print $2 "," $3 "," $4 "," $5 "," $6 }' "$WLOG" > "$T/L_$name.csv"
	sq "$C" ".mode csv" ".import $T/L_$name.csv L_$name"
	"$SHIMMER" summary "$T/$name.db" --by-rank --format json > "$T/$name.json" \
		2> "$T/$name.json.err" || not_ok "$name: summary --by-rank json" "$(cat "$T/$name.json.err")"
	"$SHIMMER" summary "$T/$name.db" --by-rank > "$T/$name.txt" 2>&1 ||
		not_ok "$name: summary --by-rank" "$(head -5 "$T/$name.txt")"
}

# by_rank NAME N SLOW: the checks of a run with SLOW planted.
by_rank() {
	local name=$1 n=$2 slow=$3
	expect_empty "$name: the steps across $n ranks: slowest rank, min and max" "$(sq "$C" "
CREATE TEMP TABLE j AS SELECT readfile('$T/$name.json') AS t;
CREATE TEMP VIEW step_row AS SELECT e.value ->> 'ranks' AS ranks,
	e.value ->> 'slowest_rank' AS slowest, e.value ->> 'min_ns' AS min_ns,
	e.value ->> 'max_ns' AS max_ns FROM j, json_each(j.t, '\$.events') e
	WHERE e.value ->> 'kind' = 'step';
CREATE TEMP VIEW logged AS SELECT rank, avg(t1 - t0) AS mean FROM L_$name GROUP BY rank;
SELECT 'ranks in the json', (SELECT t ->> '\$.ranks' FROM j) WHERE (SELECT t ->> '\$.ranks' FROM j) <> $n;
SELECT 'step rows:', count(*) FROM step_row HAVING count(*) <> 1;
SELECT 'step ranks', ranks FROM step_row WHERE ranks <> $n;
SELECT 'slowest', slowest, 'planted', $slow FROM step_row WHERE $slow >= 0 AND slowest <> $slow;
SELECT 'min', min_ns, 'logged', (SELECT min(mean) FROM logged) FROM step_row
	WHERE abs(min_ns - (SELECT min(mean) FROM logged)) > 0.05 * (SELECT min(mean) FROM logged);
SELECT 'max', max_ns, 'logged', (SELECT max(mean) FROM logged) FROM step_row
	WHERE abs(max_ns - (SELECT max(mean) FROM logged)) > 0.05 * (SELECT max(mean) FROM logged);" 2>&1)"
	# every rank's mean step, the median, the imbalance and the
	# straggler's figures against the logs (a step inside its readings)
	expect_empty "$name: each rank's mean step, the median, imbalance and the straggler's figures as logged" \
		"$(python3 - "$T/$name.json" "$WLOG" "$slow" <<'PY' 2>&1
import json, statistics, sys
TOL = 500000
d = json.load(open(sys.argv[1]))
slow = int(sys.argv[3])
steps = {}
for l in open(sys.argv[2]):
    f = l.rstrip("\n").split(",")
    if f[0] == "S":
        steps.setdefault(int(f[2]), {})[int(f[3])] = int(f[5]) - int(f[4])
mean = {r: statistics.mean(v.values()) for r, v in steps.items()}
ranks = sorted(mean)
bad = []
e = next(x for x in d["events"] if x["kind"] == "step")
for r, got in zip(ranks, e["by_rank_ns"]):
    if not mean[r] - TOL <= got <= mean[r]:
        bad.append("rank %d: mean step %d, logged %.0f" % (r, got, mean[r]))
got = [e["by_rank_ns"][i] for i in range(len(ranks))]
med = statistics.median(got)
if abs(e["median_ns"] - med) > 1 or not statistics.median(mean.values()) - TOL <= e["median_ns"] <= statistics.median(mean.values()):
    bad.append("median %r, of the ranks %r, logged %r" % (e["median_ns"], med, statistics.median(mean.values())))
if abs(e["imbalance"] - (e["max_ns"] - e["median_ns"]) / e["median_ns"]) > 1e-6:
    bad.append("imbalance %r" % e["imbalance"])
st = d["straggler"]
if slow >= 0:
    n = min(len(v) for v in steps.values())
    won = sum(1 for k in range(n) if max(ranks, key=lambda r: steps[r][k]) == slow)
    if st.get("steps") != n or st.get("slowest_steps") != won:
        bad.append("straggler: slowest in %r of %r steps, logged %d of %d" % (st.get("slowest_steps"), st.get("steps"), won, n))
    if not mean[slow] - TOL <= st.get("mean_step_ns", -1) <= mean[slow]:
        bad.append("straggler mean step %r, logged %.0f" % (st.get("mean_step_ns"), mean[slow]))
    if abs(st.get("median_rank_step_ns", -1) - e["median_ns"]) > 1:
        bad.append("straggler's median rank step %r, the step row's median %r" % (st.get("median_rank_step_ns"), e["median_ns"]))
print("\n".join(bad))
PY
)"
	if [ "$slow" -ge 0 ]; then
		check "$name: the straggler named (json)" "$(cat "$T/$name.json" | head -c 300)" \
			test "$(sq "$C" "SELECT readfile('$T/$name.json') ->> '\$.straggler.rank';")" = "$slow"
		check "$name: the straggler named (table)" "$(tail -3 "$T/$name.txt")" \
			grep -q "^Straggler: rank $slow was the slowest in" "$T/$name.txt"
	else
		check "$name: no straggler named" "$(tail -3 "$T/$name.txt")" \
			grep -q "^No straggler" "$T/$name.txt"
	fi
}

ranks two 2 1
by_rank two 2 1
ranks eight 8 5
by_rank eight 8 5
ranks even 8 -1
by_rank even 8 -1

# --rank keeps one rank's process; --pid one process.
"$SHIMMER" summary "$T/eight.db" --rank 3 --format json > "$T/rank3.json" 2>&1
got=$(sq "$C" "SELECT json_array_length(readfile('$T/rank3.json'), '\$.processes') || ' ' ||
	json_extract(readfile('$T/rank3.json'), '\$.processes[0].rank');" 2>&1)
check "--rank 3: one process, of rank 3" "got $got: $(head -c 200 "$T/rank3.json")" \
	test "$got" = "1 3"
"$SHIMMER" compare "$T/eight.db" "$T/two.db" --rank 1 --format json > "$T/cmp1.json" 2>&1
got=$(sq "$C" "SELECT json_array_length(readfile('$T/cmp1.json'), '\$.pairs') || ' ' ||
	json_extract(readfile('$T/cmp1.json'), '\$.pairs[0].a.rank') || ' ' ||
	json_extract(readfile('$T/cmp1.json'), '\$.pairs[0].matched_by') || ' ' ||
	json_array_length(readfile('$T/cmp1.json'), '\$.only');" 2>&1)
check "compare --rank 1: rank 1 of each store, paired by rank" "got $got" \
	test "$got" = "1 1 rank 0"
pid=$(sq "$C" "SELECT pid FROM L_eight WHERE rank = 6 LIMIT 1;")
out=$("$SHIMMER" leaks "$T/eight.db" --pid "$pid" --format csv 2>&1)
check "--pid: leaks reads one process" "$(printf '%s\n' "$out" | head -3)" \
	test -z "$(printf '%s\n' "$out" | awk -F, -v p="$pid" 'NR > 1 && $1 != p')"
finish
