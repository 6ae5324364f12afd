#!/bin/bash
# t_docs: what the binaries and a store offer a user is documented
# (test/e2e/docs_check.py): every option of each command's --help is in its
# synopsis in docs/usage.md and the other way round, every SHIMMER_*
# variable the shim or the shimmer command reads is in README.md (or
# usage.md), every table and view of a store is in docs/schema.md with
# each table's columns.  Then a planted drift is found: the checker is no
# test that cannot fail.
. "$(dirname "$0")/lib.sh"
need "$SHIM" "$SHIMMERD" "$SHIMMER"

"$SHIMMER" run --db "$T/s.db" -- /bin/true > /dev/null 2> "$T/run.err"
rc=$?
check "a store to read (shimmer run -- /bin/true)" "exit $rc: $(head -c 300 "$T/run.err")" \
	holds '[ $rc = 0 ] && [ -s "$T/s.db" ]'

# docs ROOT: the checker's lines on stdout, its counts in $T/counts
docs() { python3 "$ROOT/test/e2e/docs_check.py" "$1" "$SHIMMER" "$SHIM" "$T/s.db" 2> "$T/counts"; }

out=$(docs "$ROOT")
expect_empty "the documentation names every option, variable, table, view and column" "$out"
read -r opts vars tvars tables cols < <(sed 's/[^0-9]\+/ /g' "$T/counts")
check "it read them all: $(cat "$T/counts")" "$(cat "$T/counts")" \
	holds '[ "${opts:-0}" -ge 60 ] && [ "${vars:-0}" -ge 20 ] && [ "${tvars:-0}" -ge 3 ] &&
	       [ "${tables:-0}" -ge 40 ] && [ "${cols:-0}" -ge 250 ]'

# planted: an option gone from a synopsis, a variable from README's table,
# a column from schema.md
mkdir -p "$T/root/docs"
sed 's/ \[--native\]$//' "$ROOT/docs/usage.md" > "$T/root/docs/usage.md"
grep -v '^| `SHIMMER_NVTX`' "$ROOT/README.md" > "$T/root/README.md"
sed 's/^| late_steps |.*//' "$ROOT/docs/schema.md" > "$T/root/docs/schema.md"
out=$(docs "$T/root")
check "it finds a planted drift of each kind" "$out" \
	holds 'grep -q "shimmer peak --help has --native" <<< "$out" &&
	       grep -q "SHIMMER_NVTX" <<< "$out" && grep -q "heap_totals.*late_steps" <<< "$out"'
finish
