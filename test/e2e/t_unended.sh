#!/bin/bash
# t_unended: what the readers say of a process they cannot see whole, on
# copies of one store of leaky (its end and its counters known):
#  - no end recorded (end_ns and end_reason NULL, as a store a live
#    service is writing, or a row that never ended): leaks and peak say
#    under the process that it had not ended when read (what is live is
#    live now, not leaked), in the table, JSON ("ended": false) and on
#    stderr for folded lines; leaks withholds every verdict (n/a, the
#    reason in "withheld"), which the whole store gives (ok);
#  - no call counters (function_counts of the process deleted, as a
#    recording cut before the collector's first count write): compare's
#    rows of figures only counters hold (api cudaMalloc bytes) say the
#    value is unknown on that side, not that the row is in one run only.
. "$(dirname "$0")/lib.sh"
need "$SHIM" "$SHIMMERD" "$SHIMMER" "$LEAKY"
PY=$(python_exe) || PY=python3

SHIMMER_MALLOC=all WL_LOG=/dev/null "$SHIMMER" run --db "$T/whole.db" -- "$LEAKY" \
	> /dev/null 2> "$T/run.err"
check "leaky ran" "$(cat "$T/run.err")" \
	test "$(sq "$T/whole.db" "SELECT count(*) FROM processes WHERE end_ns IS NOT NULL")" = 1
cp "$T/whole.db" "$T/open.db"
sq "$T/open.db" "UPDATE processes SET end_ns = NULL, end_reason = NULL"
cp "$T/whole.db" "$T/nocount.db"
sq "$T/nocount.db" "DELETE FROM function_counts"
note='this process had not ended when the store was read (no end recorded): its figures stop at its last event, and what is live there is live now, not leaked'

# --- leaks and peak of a process not ended ----------------------------------
"$SHIMMER" leaks "$T/whole.db" --format csv > "$T/whole.csv"
"$SHIMMER" leaks "$T/open.db" --format csv > "$T/open.csv"
check "leaks, whole: verdicts given" "$(cat "$T/whole.csv")" \
	holds '[ "$(cut -d, -f14 "$T/whole.csv" | grep -c "^ok$")" -gt 0 ]'
check "leaks, not ended: every verdict withheld, why" "$(cat "$T/open.csv")" \
	holds '[ "$(tail -n +2 "$T/open.csv" | wc -l)" -gt 0 ] &&
	[ "$(tail -n +2 "$T/open.csv" | cut -d, -f14,15 | sort -u)" = "n/a,the process had not ended when read" ]'
for cmd in leaks peak; do
	"$SHIMMER" $cmd "$T/whole.db" > "$T/$cmd.whole"
	"$SHIMMER" $cmd "$T/open.db" > "$T/$cmd.open"
	"$SHIMMER" $cmd "$T/open.db" --format json > "$T/$cmd.json"
	"$SHIMMER" $cmd "$T/open.db" --format folded 2> "$T/$cmd.ferr" > /dev/null
	check "$cmd, not ended: the note under the process" "$(head -4 "$T/$cmd.open")" \
		grep -qxF "  WARNING: $note" "$T/$cmd.open"
	check "$cmd, whole: no such note" "$(head -4 "$T/$cmd.whole")" \
		holds '! grep -q "had not ended" "$T/$cmd.whole"'
	check "$cmd, not ended: JSON ended false" "$(head -c 300 "$T/$cmd.json")" \
		holds '"$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(d[\"processes\"][0][\"ended\"] is not False)" "$T/$cmd.json"'
	check "$cmd --format folded, not ended: said on stderr" "$(cat "$T/$cmd.ferr")" \
		grep -q "^shimmer: warning: pid [0-9]* (proc 1): $note$" "$T/$cmd.ferr"
done

# --- compare with a side without counters -----------------------------------
mb=$(sq "$T/whole.db" "SELECT c.bytes FROM function_counts c JOIN functions f USING (fn_id)
	WHERE f.name = 'cudaMalloc'")
"$SHIMMER" compare "$T/whole.db" "$T/nocount.db" > "$T/cmp.out"
"$SHIMMER" compare "$T/nocount.db" "$T/whole.db" --format csv > "$T/cmp.csv"
check "compare, B without counters: cudaMalloc bytes unknown in B, not only in A" \
	"$(grep bytes "$T/cmp.out")" \
	holds 'grep -q "^  api cudaMalloc bytes  *[0-9.]* MiB  *?  *-  *-  *unknown in B (no call counters)$" "$T/cmp.out" &&
	! grep -q "only in" "$T/cmp.out"'
check "compare --format csv, A without counters: a empty, only empty, unknown a" \
	"$(grep "cudaMalloc bytes" "$T/cmp.csv")" \
	grep -q "^[0-9]*,[0-9]*,api,cudaMalloc bytes,bytes,,$mb,,,0,0,,,,a$" "$T/cmp.csv"
finish
