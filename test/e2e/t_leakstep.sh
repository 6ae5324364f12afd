#!/bin/bash
# t_leakstep: the leak regression of `shimmer leaks` over training steps.
# leakstep (leakstep.c) runs STEPS "step" ranges (include/shimmer.h) and
# logs what each step left allocated through cudaMalloc, and where:
#
#  - grow: SZ_STEP bytes every step, from one call site.  The report's row
#    for that site (cuda:0) has every block, and its fit over the steps a
#    slope of SZ_STEP bytes per step (within 1 %) and a verdict that flags
#    it;
#  - plateau: a cache filled during the first 5 of 30 steps and kept to
#    the end (still allocated at exit), then flat.  Its row has every
#    cache block, and no row of the process is flagged.
#
# The slope's truth is the log: the bytes a step kept, the same every step.
. "$(dirname "$0")/lib.sh"

need "$SHIM" "$SHIMMERD" "$SHIMMER" "$LEAKSTEP"

STEPS=30
C=$T/check.db

# run MODE: leakstep MODE under the shim (default malloc mode: the CUDA
# figures are exact in every mode), its report imported as table MODE, its
# log as table S_MODE (pid, mode, step, kept, line).
run() {
	local mode=$1 rc
	WLOG=$T/$mode.log
	start_collector "$T/$mode.db" || { not_ok "$mode: collector"; finish; }
	LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK WL_LOG=$WLOG "$LEAKSTEP" "$mode" "$STEPS" 2> "$T/$mode.err"
	rc=$?
	stop_collector || not_ok "$mode: collector exit status"
	check "$mode: leakstep ran" "exit $rc, stderr $(head -3 "$T/$mode.err")" test "$rc" = 0
	sq "$C" "CREATE TABLE S_$mode (pid INTEGER, mode TEXT, step INTEGER, kept INTEGER, line INTEGER,
		t0 INTEGER, t1 INTEGER);"
	awk -F, '$1 == "S" { print $2 "," $3 "," $4 "," $5 "," $6 "," $7 "," $8 }' "$WLOG" > "$T/S_$mode.csv"
	sq "$C" ".mode csv" ".import $T/S_$mode.csv S_$mode"
	if ! "$SHIMMER" leaks "$T/$mode.db" --format csv > "$T/$mode.csv" 2> "$T/$mode.csv.err"; then
		not_ok "$mode: shimmer leaks csv" "$(head -3 "$T/$mode.csv.err")"
		return 1
	fi
	import_csv "$C" "$mode" "$T/$mode.csv"
}

# The fit's columns (docs/usage.md): slope_bytes_per_step, r2 and verdict
# (growing, ok, n/a); a flagged row is a growing one.
fit_columns() {
	local tab=$1 c
	for c in pid memory count bytes frame slope_bytes_per_step r2 verdict; do
		if ! has_column "$C" "$tab" "$c"; then
			not_ok "$tab: fit columns" "no column $c; header: $(head -1 "$T/$tab.csv")"
			return 1
		fi
	done
}
SLOPE=slope_bytes_per_step
flagged() { echo "(verdict = 'growing')"; }

# site_sql MODE: SQL defining exp (pid, n, bytes, per_step: the blocks the
# steps kept, as logged) and got (MODE's rows for their call site, frame
# "function (leakstep.c:LINE)", the file as a basename or a path, memory
# cuda:0), and listing how they differ: not one row, other counts or bytes.
site_sql() {
	local m=$1 line
	line=$(sq "$C" "SELECT DISTINCT line FROM S_$m WHERE kept > 0;")
	echo "CREATE TEMP VIEW exp AS SELECT pid, count(*) AS n, sum(kept) AS bytes,
	max(kept) AS per_step FROM S_$m WHERE kept > 0;
CREATE TEMP VIEW got AS SELECT * FROM $m WHERE memory = 'cuda:0'
	AND (frame GLOB '* (leakstep.c:$line)' OR frame GLOB '* (*/leakstep.c:$line)');
SELECT 'rows for the site:', (SELECT count(*) FROM got), 'frames:',
	(SELECT group_concat(frame, ' | ') FROM $m) WHERE (SELECT count(*) FROM got) <> 1;
SELECT 'logged', e.n, e.bytes, 'reported', g.count, g.bytes FROM exp e, got g
	WHERE CAST(g.pid AS INTEGER) <> e.pid OR CAST(g.count AS INTEGER) <> e.n
	OR CAST(g.bytes AS INTEGER) <> e.bytes;"
}

if run grow && fit_columns grow; then
	expect_empty "grow: the leaking site, every block, slope = bytes per step, flagged" "$(sq "$C" "
$(site_sql grow)
SELECT 'slope', g.$SLOPE, 'planted per step', e.per_step FROM exp e, got g
	WHERE abs(CAST(g.$SLOPE AS REAL) - e.per_step) > 0.01 * e.per_step;
SELECT 'verdict not flagged:', g.verdict, 'r2', g.r2 FROM got g WHERE NOT $(flagged);" 2>&1)"
	# the slope per second: least squares of the live bytes at the steps'
	# ends (the kept bytes so far) on their logged instants in seconds,
	# over the points fitted (the last ones, after the warm-up)
	got=$(python3 - "$T/S_grow.csv" "$T/grow.csv" <<'PY' 2>&1
import csv, sys
log = [l.rstrip("\n").split(",") for l in open(sys.argv[1])]
row = next(r for r in csv.DictReader(open(sys.argv[2])) if "leakstep.c" in r["frame"])
live, pts = 0, []
for f in log:
    live += int(f[3])
    pts.append(((int(f[5]) + int(f[6])) / 2e9, live))
pts = pts[len(pts) - int(row["points"]):]
mx = sum(t for t, _ in pts) / len(pts)
my = sum(y for _, y in pts) / len(pts)
slope = sum((t - mx) * (y - my) for t, y in pts) / sum((t - mx) ** 2 for t, _ in pts)
got = float(row["slope_bytes_per_s"])
if abs(got - slope) > 0.01 * slope:
    print("slope_bytes_per_s %s, the log's %.0f over %s points" % (row["slope_bytes_per_s"], slope, row["points"]))
PY
)
	expect_empty "grow: slope per second = the log's bytes over its instants (1%)" "$got"
fi

if run plateau && fit_columns plateau; then
	expect_empty "plateau: the cache site, every block, nothing flagged" "$(sq "$C" "
$(site_sql plateau)
SELECT 'flagged:', frame, memory, $SLOPE, r2, verdict FROM plateau WHERE $(flagged);" 2>&1)"
fi

# --steps naming the steps' range fits over them; naming one the process
# never closed (a typo) says so, where it read as a bare "no steps"; an
# empty name is a usage error (it fell back to the allocations unsaid).
"$SHIMMER" leaks "$T/grow.db" --steps step > "$T/steps.out" 2>&1
check "--steps step: fitted over the 'step' ranges" "$(head -3 "$T/steps.out")" \
	grep -q "growth fitted over .* 'step' ranges" "$T/steps.out"
"$SHIMMER" leaks "$T/grow.db" --steps stpe > "$T/steps.out" 2>&1
check "--steps stpe (no such range): the heading names it" "$(head -3 "$T/steps.out")" \
	grep -q "no 'stpe' range (--steps): growth fitted over the allocations" "$T/steps.out"
"$SHIMMER" leaks "$T/grow.db" --steps '' > "$T/steps.out" 2>&1
rc=$?
check "--steps '': usage error (2)" "exit $rc: $(head -3 "$T/steps.out")" [ $rc = 2 ]

finish
