#!/bin/bash
# t_cliargs: the command line's rules every command shares (tools/cli.c):
#  - "--" ends the options: a store named "-x.db" is read by every reader
#    after "--" (each exits 0 with what it reads of the store under its
#    plain name), compare takes one or both stores after it, and without
#    "--" the name is still an unknown option (exit 2); attach and ctl
#    take their operands after it (a pid, a verb) as operands.
. "$(dirname "$0")/lib.sh"
need "$SHIM" "$SHIMMERD" "$SHIMMER" "$LEAKY"

SHIMMER_MALLOC=all WL_LOG=/dev/null "$SHIMMER" run --db "$T/plain.db" -- "$LEAKY" \
	> /dev/null 2> "$T/run.err"
cp "$T/plain.db" "$T/-x.db"
cd "$T" || finish
for c in summary leaks peak temporary allocations bottlenecks; do
	"$SHIMMER" $c plain.db > "$T/$c.plain" 2>&1
	"$SHIMMER" $c -- -x.db > "$T/$c.dash" 2>&1
	rc=$?
	check "$c -- -x.db: the store read" "exit $rc; $(head -3 "$T/$c.dash")" \
		holds '[ $rc = 0 ] && diff <(sed "s/-x\.db/plain.db/g" "$T/$c.dash") "$T/$c.plain" > /dev/null'
	"$SHIMMER" $c -x.db > /dev/null 2> "$T/$c.err"
	rc=$?
	check "$c -x.db: still an unknown option" "exit $rc; $(cat "$T/$c.err")" \
		holds '[ $rc = 2 ] && grep -q "unknown option .-x\.db." "$T/$c.err"'
done
for c in report export; do
	"$SHIMMER" $c -o "$T/$c.out" -- -x.db > /dev/null 2>&1
	rc=$?
	check "$c -o FILE -- -x.db: written" "exit $rc" holds '[ $rc = 0 ] && [ -s "$T/$c.out" ]'
done
"$SHIMMER" compare -- -x.db plain.db > "$T/cmp.out" 2>&1
rc=$?
check "compare -- -x.db plain.db: both read" "exit $rc; $(head -4 "$T/cmp.out")" \
	holds '[ $rc = 0 ] && grep -q "^  A: -x\.db$" "$T/cmp.out"'
"$SHIMMER" compare plain.db -- -x.db > /dev/null 2>&1
rc=$?
check "compare plain.db -- -x.db: both read" "exit $rc" test $rc = 0
"$SHIMMER" attach -- -5 > /dev/null 2> "$T/att.err"
check "attach -- -5: an operand (not a process id), not an option" "$(cat "$T/att.err")" \
	grep -q "'-5' is not a process id" "$T/att.err"
"$SHIMMER" ctl --socket "$T/none" -- -v > /dev/null 2> "$T/ctl.err"
check "ctl -- -v: a verb, not an option" "$(cat "$T/ctl.err")" \
	grep -q "unknown verb '-v'" "$T/ctl.err"
finish
