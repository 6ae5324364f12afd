#!/bin/bash
# t_leakloop: the leak regression without steps (a fit over the process's
# allocations), and what the memory commands say when events were lost.
# leakloop (leakloop.c) runs a plain C loop, no ranges, between two idle
# spells (the loop is a few percent of the process's life), and logs the
# leaking call's line:
#
#  - leak, default sample mode: the leaking site is flagged 'growing';
#  - churn (the same loop freeing everything): nothing of leakloop.c is
#    flagged; the two together fail when the verdict is inverted;
#  - leak, all mode, lossless ('exact'): every block, exact bytes, 'growing';
#  - churn, all mode with a 4 KiB ring and SHIMMER_LOSSLESS=0, so that events are
#    dropped: leaks, peak, temporary and summary each say so for the
#    process, and leaks gives no verdict ('n/a', withheld: events were
#    lost), since a lost free looks like a leak.
. "$(dirname "$0")/lib.sh"

LEAKLOOP=$O/test/e2e/leakloop
need "$SHIM" "$SHIMMERD" "$SHIMMER" "$LEAKLOOP"

C=$T/check.db
N=4000
IDLE_MS=300

# run NAME MODE [ENV...]: leakloop MODE under the shim with ENV; its leaks
# csv imported as table NAME, its log line as S_NAME (pid, mode, n, kept,
# line).
run() {
	local name=$1 mode=$2 rc
	shift 2
	WLOG=$T/$name.log
	start_collector "$T/$name.db" || { not_ok "$name: collector"; finish; }
	env "$@" LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK WL_LOG=$WLOG \
		"$LEAKLOOP" "$mode" $N 0 $IDLE_MS 2> "$T/$name.err"
	rc=$?
	stop_collector || not_ok "$name: collector exit status"
	check "$name: leakloop ran" "exit $rc, stderr $(head -3 "$T/$name.err")" test "$rc" = 0
	sq "$C" "CREATE TABLE S_$name (pid INTEGER, mode TEXT, n INTEGER, kept INTEGER,
		line INTEGER);"
	awk -F, '$1 == "S" { print $2 "," $3 "," $4 "," $5 "," $6 }' "$WLOG" > "$T/S_$name.csv"
	sq "$C" ".mode csv" ".import $T/S_$name.csv S_$name"
	if ! "$SHIMMER" leaks "$T/$name.db" --format csv > "$T/$name.csv" 2> "$T/$name.csv.err"; then
		not_ok "$name: shimmer leaks csv" "$(head -3 "$T/$name.csv.err")"
		return 1
	fi
	import_csv "$C" "$name" "$T/$name.csv" || { not_ok "$name: import the csv"; return 1; }
}

# site NAME: SQL selecting NAME's rows of leakloop.c's leaking line.
site() {
	echo "SELECT * FROM $1 WHERE (frame GLOB '* (leakloop.c:'
		|| (SELECT line FROM S_$1) || ')' OR frame GLOB '* (*/leakloop.c:'
		|| (SELECT line FROM S_$1) || ')') AND memory = 'host'"
}

if run sample leak; then
	expect_empty "sample: the leaking site, over the allocations, flagged growing" "$(sq "$C" "
SELECT 'rows:', count(*) FROM ($(site sample)) HAVING count(*) <> 1;
SELECT 'fit', fit, 'verdict', verdict, 'r2', r2, 'withheld', withheld FROM ($(site sample))
	WHERE fit <> 'time' OR verdict <> 'growing';
SELECT 'estimated bytes', bytes, 'leaked', (SELECT n * kept FROM S_sample)
	FROM ($(site sample)) WHERE CAST(bytes AS REAL) NOT BETWEEN
	0.4 * (SELECT n * kept FROM S_sample) AND 2.5 * (SELECT n * kept FROM S_sample);" 2>&1)"
fi

if run churn churn; then
	expect_empty "churn: nothing of the loop flagged" "$(sq "$C" "
SELECT 'flagged:', frame, verdict, r2 FROM churn WHERE verdict = 'growing'
	AND frame GLOB '*leakloop.c*';" 2>&1)"
fi

if run exact leak SHIMMER_MALLOC=all SHIMMER_LOSSLESS=1; then
	expect_empty "exact: every leaked block, exact bytes, growing" "$(sq "$C" "
SELECT 'rows:', count(*) FROM ($(site exact)) HAVING count(*) <> 1;
SELECT 'count', count, 'bytes', bytes, 'verdict', verdict, 'complete', complete
	FROM ($(site exact)) WHERE CAST(count AS INTEGER) <> (SELECT n FROM S_exact)
	OR CAST(bytes AS INTEGER) <> (SELECT n * kept FROM S_exact) OR verdict <> 'growing'
	OR complete <> '1';" 2>&1)"
fi

# The same leak cut short: 100 iterations, 400 KiB in all, in a few
# milliseconds: well above 1 MiB a second, but the heap never rose by the
# second's 1 MiB the threshold stands for.  Every program that builds its
# state and exits rises along a line (gcc's assembler: 284 KiB in 7 ms was
# "36.73 MiB a second", HIGH in bottlenecks).
N=100
if run short leak SHIMMER_MALLOC=all SHIMMER_LOSSLESS=1; then
	expect_empty "short: 400 KiB leaked in milliseconds: kept, exact, not growing" "$(sq "$C" "
SELECT 'rows:', count(*) FROM ($(site short)) HAVING count(*) <> 1;
SELECT 'bytes', bytes, 'verdict', verdict, 'per_s', slope_bytes_per_s FROM ($(site short))
	WHERE CAST(bytes AS INTEGER) <> (SELECT n * kept FROM S_short) OR verdict <> 'ok'
	OR CAST(slope_bytes_per_s AS REAL) < 1048576;" 2>&1)"
fi
N=4000

# Lost events: a ring of 4 KiB overflows in lossy all mode (all mode is
# lossless unless SHIMMER_LOSSLESS=0).
if run lossy churn SHIMMER_MALLOC=all SHIMMER_LOSSLESS=0 SHIMMER_RING_KB=4; then
	DB=$T/lossy.db
	lost=$(sqlite3 "$DB" "SELECT coalesce(sum(events), 0) FROM drops WHERE reason <> 'cupti'")
	check "lossy: events were lost (the test's premise)" "lost $lost" [ "$lost" -gt 0 ]
	expect_empty "lossy: leaks gives no verdict for the process, and says why" "$(sq "$C" "
SELECT 'verdict', verdict, withheld, complete, frame FROM lossy
	WHERE verdict <> 'n/a' OR withheld <> 'events were lost' OR complete <> '0';" 2>&1)"
	for cmd in leaks peak temporary summary; do
		out=$("$SHIMMER" "$cmd" "$DB" 2>&1)
		check "lossy: $cmd says events were lost" "$(printf '%s\n' "$out" | head -8)" \
			grep -q "WARNING: $lost events" <<< "$out"
	done
	out=$("$SHIMMER" peak "$DB" --format csv 2>&1)
	check "lossy: peak's rows say the process is incomplete" "$(printf '%s\n' "$out" | head -3)" \
		awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "complete") c = i }
			NR > 1 && $c != "0" { bad = 1 } END { exit bad || !c || NR < 2 }' <<< "$out"
	# folded lines (and speedscope) are a flame graph's input: the warning
	# goes to stderr, once, saying what the loss does to that weight
	for c in "leaks --format folded:may be wrong either way" \
		"leaks --format folded --all-allocations:are lower bounds" \
		"peak --format folded:may be wrong either way" "export --format folded:are lower bounds" \
		"export --format folded --weight peak:may be wrong either way" \
		"export --format speedscope --weight leaked:may be wrong either way"; do
		"$SHIMMER" ${c%%:*} "$DB" > "$T/fold.out" 2> "$T/fold.err"
		rc=$?
		check "lossy: ${c%%:*} says events were lost on stderr only" \
			"exit $rc; stderr: $(head -3 "$T/fold.err"); stdout: $(head -3 "$T/fold.out")" \
			holds '[ $rc = 0 ] && [ "$(grep -c "^shimmer: warning: pid [0-9]* (proc [0-9]*): $lost events of this process were lost before the store ([^)]*): .*bytes ${c#*:}; SHIMMER_LOSSLESS=1 keeps every event$" "$T/fold.err")" = 1 ] &&
			[ "$(wc -l < "$T/fold.err")" = 1 ] && ! grep -q "lost" "$T/fold.out"'
	done
fi
finish
