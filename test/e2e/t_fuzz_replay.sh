#!/bin/bash
# Every fuzz input kept in the repository (test/fuzz/corpus/TARGET/: the
# seeds and each input that once made a target fail) replayed through its
# target as built here (under the sanitizers in `make asan`): the
# regression half of `make fuzz`.
. "$(dirname "$0")/lib.sh"
for t in message ring region demangle; do
	need "$O/test/fuzz/replay_$t"
	out=$("$O/test/fuzz/replay_$t" "$ROOT/test/fuzz/corpus/$t" 2>&1)
	rc=$?
	n=$(sed -n 's/^replayed //p' <<< "$out")
	check "$t: $n inputs replayed" "exit $rc: $(tail -5 <<< "$out")" [ $rc = 0 -a "${n:-0}" -gt 0 ]
done
finish
