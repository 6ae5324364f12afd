#!/bin/bash
# The shim's table of distinct native call stacks (49,152 a process): a
# program with 2^15 distinct call paths gets every stack and no stderr
# line; one with 2^16 fills the table, says so in one line, and exactly
# the allocations of the call paths that found no room are "(no stack)"
# (each path allocates once, so 65,536 - 49,152 of them), while counts and
# bytes stay exact.
. "$(dirname "$0")/lib.sh"
MANY=$O/test/e2e/manystacks
need "$SHIM" "$SHIMMERD" "$SHIMMER" "$MANY"

for bits in 15 16; do
	db=$T/m$bits.db
	SHIMMER_MALLOC=all "$SHIMMER" run --db "$db" -- "$MANY" $bits > /dev/null 2> "$T/m$bits.err"
	rc=$?
	check "$bits bits: runs traced" "exit $rc: $(head -3 "$T/m$bits.err")" [ "$rc" = 0 ]
	paths=$((1 << bits))
	# manystacks' leaf() allocates 24 bytes once per path
	got=$(sq "$db" "SELECT count(*), coalesce(sum(h.allocs), 0),
		coalesce(sum(CASE WHEN h.stack_id = 0 THEN h.allocs END), 0)
		FROM heap_sites h WHERE h.alloc_bytes = 24 * h.allocs AND h.proc_id = 1" 2>&1)
	lines=$(grep -c "table of distinct call stacks is full" "$T/m$bits.err")
	if [ $bits = 15 ]; then
		check "$bits bits: each of $paths paths its own stack, none without" "sites allocs nostack: $got" \
			test "$got" = "$paths|$paths|0"
		check "$bits bits: no stderr line" "$(cat "$T/m$bits.err")" test "$lines" = 0
	else
		full=49152
		stacks=$(sq "$db" "SELECT count(*) FROM stacks WHERE proc_id = 1")
		check "$bits bits: the table holds $full stacks" "stacks: $stacks" test "$stacks" = $full
		# the program allocates nowhere else: every stack is a path's
		check "$bits bits: the $((paths - full)) paths that found no room are (no stack), counts exact" \
			"sites allocs nostack: $got" test "$got" = "$((full + 1))|$paths|$((paths - full))"
		check "$bits bits: one stderr line says the table is full" "$(cat "$T/m$bits.err")" \
			test "$lines" = 1
	fi
done
finish
