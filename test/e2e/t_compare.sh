#!/bin/bash
# t_compare: `shimmer compare` on runs of wl_ranks (wl_ranks.c: steps of a
# cudaMalloc, a kernel, a synchronization, a sleep) with planted
# differences, every kernel recorded (SHIMMER_GPU=all):
#
#  - base and big differ only in the size of each step's cudaMalloc (3x):
#    the rows marked changed are exactly cudaMalloc's bytes, cuda:0's peak
#    and its one call site's bytes allocated and at the peak, each 3x (not
#    a host site, sampled: one sampled in one run only, or by a sample
#    more, is within what sampling moves it by); the processes pair
#    although their argv differ;
#  - what two runs of one program differ by on a loaded machine (every
#    short call of a run slower alike, two slow steps of ten), planted
#    exactly in copies of base, is not marked changed; a real change of
#    those calls is;
#  - a run with an extra process: listed as in one run only;
#  - --fail-if exits 3 exactly when crossed: slow's steps are planted 60%
#    longer (+60%); thresholds just under and just over the measured change give
#    3 and 0; several conditions, one crossed, give 3; a condition on a
#    figure neither run has is an error (1), and so is any when no
#    process pairs, or on a figure a cut, unended or lossy process has
#    only in part; an amount in a unit of another kind, or an empty
#    --fail-if, is a usage error (2);
#  - a slow first step does not hide a median that moved.
. "$(dirname "$0")/lib.sh"

WL_RANKS=$O/test/e2e/wl_ranks
need "$SHIM" "$SHIMMERD" "$SHIMMER" "$WL_RANKS"

C=$T/check.db

# record NAME ARGS...: wl_ranks ARGS, every kernel recorded, into $T/NAME.db
record() {
	local name=$1 rc
	shift
	start_collector "$T/$name.db" || { not_ok "$name: collector"; finish; }
	# Kernels of a fixed 200 us (the fake's asynchronous GPU): a
	# synchronous fake kernel lasts as long as its call, which a loaded
	# machine under TSan stretched by half in one run of two.
	local t0 t1
	t0=$(date +%s%N)
	FAKE_GPU_KERNEL_NS=200000 SHIMMER_GPU=all LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK \
		WL_LOG=$T/$name.log "$@" 2> "$T/$name.err"
	rc=$?
	t1=$(date +%s%N)
	echo $((t1 - t0)) > "$T/$name.outer"
	stop_collector || not_ok "$name: collector exit status"
	check "$name: ran" "exit $rc, stderr $(head -3 "$T/$name.err")" test "$rc" = 0
}

record base "$WL_RANKS" 10 50000 -2 0
record big "$WL_RANKS" 10 50000 -2 0 3145728
record slow "$WL_RANKS" 10 50000 -1 30000
record extra /bin/sh -c "$WL_RANKS 10 50000 -2 0; /bin/true"

# The planted difference, and only it.
"$SHIMMER" compare "$T/base.db" "$T/big.db" --format csv > "$T/big.csv" 2> "$T/big.err"
rc=$?
check "base vs big: exit 0 (no condition)" "exit $rc: $(head -3 "$T/big.err")" test $rc = 0
import_csv "$C" big "$T/big.csv"
expect_empty "base vs big: changed are exactly cudaMalloc's bytes, cuda:0's peak and its site, 3x" \
	"$(sq "$C" "
CREATE TEMP VIEW planted AS SELECT rowid AS rid, * FROM big
	WHERE (section = 'api' AND name = 'cudaMalloc bytes')
	OR (section = 'memory' AND name = 'cuda:0 peak')
	OR (section = 'sites' AND memory = 'cuda:0' AND measure IN ('allocated', 'at_peak'));
SELECT 'changed, not planted:', section, name, measure, a, b FROM big WHERE changed = '1'
	AND rowid NOT IN (SELECT rid FROM planted);
SELECT 'planted, not changed or not 3x:', section, name, a, b, changed FROM planted
	WHERE changed <> '1' OR abs(CAST(ratio AS REAL) - 3) > 1e-9;
SELECT 'planted rows:', count(*) FROM planted HAVING count(*) <> 4;
SELECT 'kernel rows:', count(*) FROM big WHERE section = 'kernel' HAVING count(*) <> 1;" 2>&1)"
"$SHIMMER" compare "$T/base.db" "$T/big.db" > "$T/big.txt" 2>&1
check "base vs big: the table marks the planted rows" "$(grep changed "$T/big.txt")" \
	test "$(grep -c ' changed$' "$T/big.txt")" = 2

# What two runs of one program differ by on a loaded machine, planted
# exactly in copies of base (it once made the check above flaky): every
# cudaMalloc call 1.7x slower in B (the machine's state moves each short
# call of a run alike: ten calls of ~17 us, 170 us against 289 us, a
# change no spread within a run tells from a real one), and two of the
# ten steps 20 ms slower (the p90 of ten rests on those two).  No row may
# be marked changed.  Then a real change of the same calls, 300 us more
# each (3 ms in all, above a thousandth of the run): marked changed.
# plant NAME SQL: a copy of base as $T/NAME.db, each cudaMalloc call and
# step of it given a set duration (by its rank k in time: 15 us + k % 5 us,
# 50 ms + k % 3 tenths of a ms), then SQL run on it (c: the cudaMalloc
# calls)
plant() {
	local db=$T/$1.db
	rm -f "$db"
	sq "$T/base.db" ".backup '$db'" && sq "$db" "
CREATE TEMP VIEW c AS SELECT id FROM cuda_calls WHERE fn_id = (SELECT fn_id FROM functions
	WHERE name = 'cudaMalloc');
UPDATE cuda_calls SET end_ns = start_ns + 15000 + 1000 * ((SELECT count(*) FROM cuda_calls x
	WHERE x.fn_id = cuda_calls.fn_id AND x.start_ns < cuda_calls.start_ns) % 5)
	WHERE id IN (SELECT id FROM c);
UPDATE ranges SET end_ns = start_ns + 50000000 + 100000 * ((SELECT count(*) FROM ranges x
	WHERE x.depth = 0 AND x.start_ns < ranges.start_ns) % 3) WHERE depth = 0;
$2"
}
plant quiet ""
plant noisy "UPDATE cuda_calls SET end_ns = start_ns + (end_ns - start_ns) * 17 / 10
	WHERE id IN (SELECT id FROM c);
UPDATE ranges SET end_ns = end_ns + 20000000 WHERE id IN
	(SELECT id FROM ranges WHERE depth = 0 ORDER BY start_ns LIMIT 2 OFFSET 3);"
plant slower "UPDATE cuda_calls SET end_ns = end_ns + 300000 WHERE id IN (SELECT id FROM c);"
for b in noisy slower; do
	"$SHIMMER" compare "$T/quiet.db" "$T/$b.db" --format csv > "$T/$b.csv" 2> "$T/$b.err"
	import_csv "$C" "$b" "$T/$b.csv"
done
changed() { # TABLE: its rows marked changed, "section name a b; ..."
	sq "$C" "SELECT group_concat(section || ' ' || name || ' ' || a || ' ' || b, '; ') FROM $1
		WHERE changed = '1'" 2>&1
}
got=$(changed noisy)
planted=$(sq "$C" "SELECT group_concat(f, '; ') FROM (SELECT name || ' ' || a || ' ' || b AS f
	FROM noisy WHERE (section = 'api' AND name = 'cudaMalloc')
	OR (section = 'steps' AND name LIKE '% p90') ORDER BY section)" 2>&1)
check "quiet vs noisy: cudaMalloc 1.7x and two slow steps of ten are not changed" \
	"changed: $got; planted: $planted; $(head -3 "$T/noisy.err")" test -z "$got"
check "quiet vs noisy: the planted figures are what they were made" "$planted" \
	test "$planted" = "cudaMalloc 170000 289000; 'step' p90 50200000 70010000"
got=$(changed slower)
check "quiet vs slower: cudaMalloc 300 us slower a call, and only it, is changed" \
	"changed: $got; $(head -3 "$T/slower.err")" test "$got" = "api cudaMalloc 170000 3170000"

# In one run only.
"$SHIMMER" compare "$T/base.db" "$T/extra.db" --format json > "$T/extra.json" 2> "$T/extra.err"
got=$(sq "$C" "SELECT group_concat(o.value ->> 'run' || ':' || (o.value ->> 'exe'), ' ')
	FROM json_each(readfile('$T/extra.json'), '\$.only') o;" 2>&1)
check "base vs extra: the shell and true are in B only" "only: $got" \
	test "$got" = "b:/usr/bin/dash b:/usr/bin/true" -o "$got" = "b:/bin/dash b:/bin/true" \
	-o "$(printf '%s' "$got" | grep -c 'b:.*true')" = 1
got=$(sq "$C" "SELECT json_array_length(readfile('$T/extra.json'), '\$.pairs');")
check "base vs extra: wl_ranks paired" "pairs $got" test "$got" = 1

# --fail-if: exactly when crossed.
failif() { # EXPECTED A B CONDITION...
	local want=$1 a=$2 b=$3 rc args=()
	shift 3
	for c in "$@"; do args+=(--fail-if "$c"); done
	"$SHIMMER" compare "$T/$a.db" "$T/$b.db" "${args[@]}" > "$T/f.out" 2>&1
	rc=$?
	check "$a vs $b --fail-if $*: exit $want" "exit $rc: $(tail -4 "$T/f.out")" test $rc = "$want"
}
"$SHIMMER" compare "$T/base.db" "$T/slow.db" --format csv > "$T/slow.csv" 2>&1
import_csv "$C" slow "$T/slow.csv"
change=$(sq "$C" "SELECT printf('%.3f', 100.0 * (CAST(b AS REAL) - a) / a) FROM slow
	WHERE section = 'steps' AND name LIKE '%mean';")
check "base vs slow: the planted step change (+60%) is measured (25% to 120%)" "change $change%" \
	awk -v c="$change" 'BEGIN { exit !(c > 25 && c < 120) }'
# Each run's figures against its own log (wl_ranks's readings just outside
# each step range, and the span around the program), and Diff and Ratio
# against those: the steps' count, mean, median and p90 (interpolated
# between the order statistics, as compare's), the range's total, the wall.
got=$(python3 - "$T/slow.csv" "$T/base" "$T/slow" <<'PY' 2>&1
import csv, sys
TOL = 500000
rows = {(r["section"], r["name"]): r for r in csv.DictReader(open(sys.argv[1]))}
bad = []
def steps(base):
    d = [int(f[5]) - int(f[4]) for f in (l.rstrip("\n").split(",") for l in open(base + ".log"))
         if f[0] == "S"]
    t = [(int(f[4]), int(f[5])) for f in (l.rstrip("\n").split(",") for l in open(base + ".log"))
         if f[0] == "S"]
    return sorted(d), t[-1][1] - t[0][0], int(open(base + ".outer").read())
def pct(v, q):
    x = q * (len(v) - 1)
    i = int(x)
    return v[i] + (v[min(i + 1, len(v) - 1)] - v[i]) * (x - i)
for side, base in (("a", sys.argv[2]), ("b", sys.argv[3])):
    d, inner, outer = steps(base)
    want = {("steps", "'step' count"): (len(d), len(d)),
            ("steps", "'step' mean"): (sum(d) / len(d) - TOL, sum(d) / len(d)),
            ("steps", "'step' median"): (pct(d, 0.5) - TOL, pct(d, 0.5)),
            ("steps", "'step' p90"): (pct(d, 0.9) - TOL, pct(d, 0.9)),
            ("range", "shimmer:step"): (sum(d) - len(d) * TOL, sum(d)),
            ("process", "wall time"): (inner, outer)}
    for k, (lo, hi) in want.items():
        r = rows.get(k)
        if r is None or not lo <= float(r[side]) <= hi + 1:
            bad.append("%s %s: %s, logged [%.0f, %.0f]" % (side, k, r and r[side], lo, hi))
for k, r in rows.items():
    a, b = float(r["a"] or "nan"), float(r["b"] or "nan")
    if r["a"] and r["b"] and abs(float(r["diff"]) - (b - a)) > 1e-6 * max(1, abs(b)):
        bad.append("%s: diff %s, b - a %r" % (k, r["diff"], b - a))
    if r["ratio"] and a and abs(float(r["ratio"]) - b / a) > 1e-9 * abs(b / a):
        bad.append("%s: ratio %s, b / a %r" % (k, r["ratio"], b / a))
print("\n".join(bad))
PY
)
expect_empty "base vs slow: each run's steps, range and wall as logged; Diff = B - A, Ratio = B / A" "$got"
under=$(awk -v c="$change" 'BEGIN { printf "%.3f", c - 1 }')
over=$(awk -v c="$change" 'BEGIN { printf "%.3f", c + 1 }')
failif 3 base slow "step_time>+5%"
failif 3 base slow "step_time>+$under%"
failif 0 base slow "step_time>+$over%"
failif 0 base slow "step_time<-5%"
failif 3 base slow "kernel_time>+50%" "wall_time>+20%"
failif 0 base big "step_time>+30%,kernel_time>+50%"
failif 3 base big "step_time>+30%,peak_memory>+10%"
failif 3 base big "peak_memory[cuda:0]>=+200%"
failif 0 base big "peak_memory[cuda:0]>+200%"
failif 3 base big "api_time<+1000%,peak_memory>+1MiB"
failif 1 base big "peak_memory[cuda:7]>+10%"
# A slow first step (warm-up: 300 ms against steps of 20 and 32 ms) makes
# the means' difference insignificant; the median moved 60% with every
# other step and is marked changed (the test on means once decided the
# median too: a GPU run doubled its steps and was told nothing changed).
# (Steps of 5 and 8 ms measured x1.19 under load: a loaded machine wakes a
# sleeper a few ms late, which shrinks the ratio of short sleeps.)
record short "$WL_RANKS" 10 20000 -2 0
record warm "$WL_RANKS" 10 20000 -1 12000 1048576 300000
"$SHIMMER" compare "$T/short.db" "$T/warm.db" --format csv > "$T/warm.csv" 2>&1
import_csv "$C" warm "$T/warm.csv"
got=$(sq "$C" "SELECT name || ' ' || printf('%.2f', ratio) || ' ' || changed FROM warm
	WHERE section = 'steps' AND name LIKE '%median';")
check "short vs warm: the step median (x1.6) is marked changed despite the first step" "$got" \
	awk -v r="$(echo "$got" | awk '{ print $(NF - 1) }')" -v c="$(echo "$got" | awk '{ print $NF }')" \
	'BEGIN { exit !(r > 1.3 && r < 2.2 && c == 1) }'
"$SHIMMER" compare "$T/base.db" "$T/big.db" --fail-if "speed>+5%" > /dev/null 2>&1
rc=$?
check "an unknown metric is a usage error (2)" "exit $rc" test $rc = 2
# An amount in a unit of another kind than the metric's, or without one,
# was read as another amount (+5GiB as 5.4 s, +5 as 5 ns, +1ms of a
# share that nothing crosses); an empty --fail-if guarded nothing; one
# over 511 characters was cut where it fell (+100MiB read as +100 bytes,
# which big's 3x peak crosses); an exponent (+1e3ms) was read by strtod
# though amounts are decimal (docs/usage.md, "Numbers, sizes and durations").
for bad in "wall_time>+5GiB" "wall_time>+5" "leaked_bytes>+5ms" "gpu_busy>+1ms" \
	"peak_memory[]>+1%" "step_time>+0x10ms" "step_time>+1e3ms" "peak_memory>+1E9" \
	"" " , " \
	"wall_time>+50%,$(printf '%480s' '')peak_memory>+100MiB"; do
	"$SHIMMER" compare "$T/base.db" "$T/big.db" --fail-if "$bad" > "$T/f.out" 2>&1
	rc=$?
	check "--fail-if '${bad:0:40}': a usage error (2), one line" \
		"exit $rc: $(head -3 "$T/f.out")" \
		holds '[ $rc = 2 ] && [ "$(wc -l < "$T/f.out")" = 1 ]'
done
failif 0 base big "wall_time>+10s" "leaked_bytes>0" "peak_memory>+1GiB"
# A process whose figures are partial supports no verdict: cut short by a
# lost collector, never ended, or with events lost (heap, call and range
# figures; the wall time needs no event).  Copies of big planted so; each
# condition crossed (3) or passed (0) on big itself.
cp "$T/big.db" "$T/bigcut.db"
sq "$T/bigcut.db" "UPDATE processes SET end_reason = 'collector_lost'"
cp "$T/big.db" "$T/bigopen.db"
sq "$T/bigopen.db" "UPDATE processes SET end_ns = NULL, end_reason = NULL"
cp "$T/big.db" "$T/biglost.db"
sq "$T/biglost.db" "INSERT INTO drops SELECT proc_id, pid, 'ring_full', 100 FROM processes"
failif 3 base big "peak_memory>+10%"
failif 0 base big "wall_time>+1000%"
failif 1 base bigcut "wall_time>+1000%"
check "cut: the process says so, and the condition why it is not evaluated" "$(cat "$T/f.out")" \
	holds 'grep -q "WARNING: the collector was lost while this process ran" "$T/f.out" &&
		grep -q "pid [0-9]* in B: its recording was cut short .*; not evaluated" "$T/f.out"'
failif 1 base bigopen "peak_memory>+10%"
check "no end recorded: the condition says why it is not evaluated" "$(cat "$T/f.out")" \
	grep -q "pid [0-9]* in B: no end recorded .*; not evaluated" "$T/f.out"
failif 1 base biglost "peak_memory>+10%"
failif 0 base biglost "wall_time>+1000%"
# No pair (B ran another executable, or was not traced) is no pass: each
# condition is not evaluated, exit 1.
record other /bin/true
failif 1 base other "wall_time>+5%"
check "no pair: one error line says so" "$(cat "$T/f.out")" \
	grep -q "error: --fail-if: no process of A pairs with one of B" "$T/f.out"

# A shell running 20 short programs around a half-second sleep: their
# pairs, of which nothing but the wall time changed (a millisecond each,
# under 1% of the longest's), fold into one line in the table (a Python
# started by pyenv made 79 pairs, a thousand lines before the
# interpreter's); CSV and JSON keep every pair.
for r in qa qb; do
	"$SHIMMER" run --db "$T/$r.db" -- /bin/sh -c \
		'for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do /bin/true; done; sleep 0.5' \
		> /dev/null 2>&1
done
"$SHIMMER" compare "$T/qa.db" "$T/qb.db" > "$T/q.txt" 2>&1
rc=$?
check "short pairs: folded into one line naming them" \
	"exit $rc; $(grep -c '^  a: ' "$T/q.txt") pairs in full; $(grep 'more pair' "$T/q.txt")" \
	holds '[ $rc = 0 ] && [ "$(grep -c "^  a: " "$T/q.txt")" -le 3 ] &&
		grep -qE "^[0-9]+ more pairs of short processes .* nothing changed but the wall time: .*true x(19|20)" "$T/q.txt"'
n=$("$SHIMMER" compare "$T/qa.db" "$T/qb.db" --format json |
	python3 -c 'import json, sys; print(len(json.load(sys.stdin)["pairs"]))')
check "short pairs: JSON keeps every pair" "$n pairs" [ "$n" -ge 21 ]
finish
