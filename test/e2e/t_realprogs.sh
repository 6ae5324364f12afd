#!/bin/bash
# t_realprogs: exact mode (SHIMMER_MALLOC=all) counts real programs' heaps
# as valgrind's memcheck does.  Three deterministic Debian programs, each
# on fixed input, none copying its environment into the heap (so the
# different variables the two tools set change nothing): sort (-S and
# --parallel fixed: its buffer is otherwise sized from the limits valgrind
# changes), ls -l of a directory with fixed names and times, mawk (gawk
# would copy the environment into ENVIRON).  Each runs under `shimmer run`
# and under valgrind --run-libc-freeres=no (glibc's exit-time frees would
# add frees the program never made), in the same environment otherwise.
#
# Compared exactly:
#  - heap_totals (allocs, alloc_bytes, frees, live_count, live_bytes)
#    against valgrind's "total heap usage: A allocs, F frees, B bytes
#    allocated" and "in use at exit: B bytes in N blocks";
#  - function_counts per function against the calls valgrind
#    --trace-malloc=yes lists (one line per call): malloc, calloc, free of
#    a block (free(NULL) is counted in no mode: docs/schema.md), and
#    realloc + reallocarray (valgrind 3.19 has no reallocarray of its own:
#    glibc's calls realloc, which valgrind lists);
#  - nothing dropped, the process ended by exit.
# The reallocarray double count fixed in b003bdc (the realloc inside glibc's
# reallocarray taken for a signal handler's call: counted as realloc too and
# dropped) left heap_totals right but fails the last two checks.
#
# free(NULL) frees nothing and neither mode counts it (heaptrack ignores
# it too): wl_early, run in sample and in all mode, frees NULL in its
# library's constructor (before the shim's), in main (sample mode's fast
# path), in an atexit handler and in a destructor, and frees 4 blocks: both
# modes count the same calls, free=4.  Sample mode counted the last three
# free(NULL) (free=7) where all mode counted none.
. "$(dirname "$0")/lib.sh"
WL_EARLY=$O/test/e2e/wl_early
need "$SHIMMER" "$SHIMMERD" "$SHIM" "$WL_EARLY"
if ! command -v valgrind > /dev/null; then
	not_ok "valgrind available" "valgrind not found in PATH ($PATH): install the Debian package valgrind" \
		"(.ci/install-deps does); this comparison cannot run without it"
	finish
fi

# fixed input: numbers, and a directory of 30 files and a subdirectory with
# one modification time long past (ls -l prints the year, not the time)
seq 1 3000 | awk '{ print ($1 * 7919) % 10007 }' > "$T/nums.txt"
mkdir "$T/d" "$T/d/sub"
for i in $(seq 1 30); do printf 'line %d\n' "$i" > "$T/d/f$i"; done
touch -h -d '2020-01-02 03:04:05' "$T"/d/* "$T/d"
cd "$T" || finish

# the same environment for both tools, besides what each adds
clean_env=(env -i PATH=/usr/bin:/bin LC_ALL=C TZ=UTC HOME="$T")
progs=(sort ls mawk)
declare -A cmd
cmd[sort]='sort -S 1M --parallel=1 nums.txt'
cmd[ls]='ls -l d'
cmd[mawk]="mawk '{ c[\$1 % 50]++ } END { for (k in c) n++; print n }' nums.txt"

for p in "${progs[@]}"; do
	eval "set -- ${cmd[$p]}"
	"${clean_env[@]}" SHIMMER_MALLOC=all "$SHIMMER" run --db "$T/$p.db" -- "$@" \
		> "$T/$p.s.out" 2> "$T/$p.s.err"
	rc=$?
	check "$p under shimmer run: exits 0" "status $rc; stderr: $(head -c 300 "$T/$p.s.err")" \
		[ $rc = 0 ]
	"${clean_env[@]}" valgrind --run-libc-freeres=no --trace-malloc=yes "$@" \
		> "$T/$p.v.out" 2> "$T/$p.v.err"
	rc=$?
	check "$p under valgrind: exits 0" "status $rc; stderr: $(tail -c 300 "$T/$p.v.err")" \
		[ $rc = 0 ]
	check "$p: the same output under both" "$(diff "$T/$p.s.out" "$T/$p.v.out" | head -5)" \
		cmp -s "$T/$p.s.out" "$T/$p.v.out"

	# valgrind: "allocs bytes frees live live_bytes"
	read -r va vf vb <<< "$(sed -n 's/.*total heap usage: \([0-9,]*\) allocs, \([0-9,]*\) frees, \([0-9,]*\) bytes.*/\1 \2 \3/p' \
		"$T/$p.v.err" | tr -d ,)"
	read -r vlb vlc <<< "$(sed -n 's/.*in use at exit: \([0-9,]*\) bytes in \([0-9,]*\) blocks.*/\1 \2/p' \
		"$T/$p.v.err" | tr -d ,)"
	vg="$va $vb $vf $vlc $vlb"
	got=$(sq -separator ' ' "$T/$p.db" "SELECT h.allocs, h.alloc_bytes, h.frees, h.live_count,
		h.live_bytes FROM processes p JOIN heap_totals h USING (proc_id)")
	check "$p: allocations, bytes, frees, blocks and bytes live at exit as valgrind counts ($vg)" \
		"shimmer: $got; valgrind: $vg" [ "$got" = "$vg" ]

	# valgrind's trace: a line "--PID-- name(args)[ = result]" per call
	vt=$(sed -n 's/^--[0-9]*-- \([a-z_]*\)(\(0x0)\)\{0,1\}.*/\1 \2/p' "$T/$p.v.err" |
		awk '$2 == "" { n[$1]++ } END { for (f in n) print f "=" n[f] }' | sort | paste -sd ' ')
	got=$(sq "$T/$p.db" "SELECT group_concat(x, ' ') FROM (SELECT replace(f.name, 'reallocarray',
		'realloc') || '=' || sum(c.count) AS x FROM function_counts c JOIN functions f USING (fn_id)
		WHERE c.count > 0 GROUP BY replace(f.name, 'reallocarray', 'realloc') ORDER BY 1)")
	check "$p: calls per function as valgrind lists them ($vt)" "shimmer: $got; valgrind: $vt" \
		[ "$got" = "$vt" ]
	got=$(sq -separator ' ' "$T/$p.db" "SELECT p.end_reason, p.malloc_mode, (SELECT coalesce(sum(d.events), 0)
		FROM drops d) FROM processes p")
	check "$p: one process, all mode, ended by exit, nothing dropped" "end_reason, mode, dropped: $got" \
		[ "$got" = "exit all 0" ]
done

cd "$ROOT" || finish
declare -A early
for m in sample all; do
	SHIMMER_MALLOC=$m "$SHIMMER" run --db "$T/early.$m.db" -- "$WL_EARLY" > "$T/early.out" \
		2> "$T/early.err"
	rc=$?
	check "wl_early, $m mode: exits 0" "status $rc; stderr: $(head -c 300 "$T/early.err")" [ $rc = 0 ]
	early[$m]=$(sq "$T/early.$m.db" "SELECT group_concat(x, ' ') FROM (SELECT f.name || '=' ||
		sum(c.count) AS x FROM function_counts c JOIN functions f USING (fn_id) WHERE c.count > 0
		GROUP BY f.name ORDER BY f.name)")
	check "wl_early, $m mode: 4 blocks freed counted, none of its 4 free(NULL)" \
		"counted: ${early[$m]}" [ "${early[$m]}" = "calloc=1 free=4 malloc=3 realloc=1" ]
done
check "wl_early: sample and all mode count the same calls" \
	"sample: ${early[sample]}; all: ${early[all]}" [ "${early[sample]}" = "${early[all]}" ]
finish
