#!/bin/bash
# The e2e scripts' own checks: no `check NAME WHY COND && COND` whose
# conditions after the first run outside check, unseen when they fail
# (test/e2e/check_lint.py; lib.sh's holds '...' keeps a chain inside).
# 26 such checks had crept into 11 scripts before this test.
. "$(dirname "$0")/lib.sh"
dir=$(dirname "$0")
out=$(python3 "$dir/check_lint.py" "$dir"/*.sh 2>&1)
check "every check's conditions are inside it" "$out" [ -z "$out" ]
# and the lint finds one: a planted chain
printf 'check "planted" "why" \\\n\t[ 1 = 1 ] && [ 1 = 2 ]\n' > "$T/planted.sh"
out=$(python3 "$dir/check_lint.py" "$T/planted.sh" 2>&1)
check "the lint finds a planted chain" "$out" holds '[ -n "$out" ] && grep -q "planted.sh:1:" <<< "$out"'
finish
