#!/bin/bash
# Exact mode counts what ordinary programs do (issue 13, item 14), each
# against the program's own source, and against valgrind where it counts
# the same thing:
#  - a C program whose library allocates in its constructor, before the
#    shim's, and a C++ program (libstdc++'s 72,704-byte pool is made before
#    the shim's constructor): every allocation, byte and free valgrind sees;
#  - a library opened with RTLD_DEEPBIND (found through the program's
#    RUNPATH, which the dlopen hook must keep working): its heap calls are
#    traced, one stderr line says the flag was cleared;
#  - addresses reused at once across threads (one arena, no thread cache):
#    every free paired with its own block, no false leak, on the rows and
#    in the aggregates computed at ingest from the same events (each block
#    a temporary: its thread's next heap call freed it);
#  - a release and the allocation that reuses its address, held open
#    inside the real allocator (liborder.so, preloaded behind the shim)
#    right where the shim numbers them: the free after the real free has
#    handed its address to another thread, the malloc before the real
#    malloc has got it; the race window of the last case, made certain:
#    each free paired with its own block, the one block kept reported as
#    the one kept, on the rows, in the aggregates and by shimmer leaks;
#  - a forked child that ends with _exit: recorded as exit, not disconnect;
#    a vfork child's _exit is not its parent's.
. "$(dirname "$0")/lib.sh"
# These checks count the rows of single events: all mode keeps one per heap
# event only when asked (t_heapagg checks that the aggregated answers,
# all mode's default, equal those rows).  run() asks for both: the reuse
# run's aggregates are held against its rows.
WL_HARD=$O/test/e2e/wl_hard
WL_EARLY=$O/test/e2e/wl_early
WL_CXX=$O/test/e2e/wl_cxx
LIBORDER=$O/test/e2e/liborder.so
WL_NOPIE=$O/test/e2e/wl_nopie
WL_OWNMALLOC=$O/test/e2e/wl_ownmalloc
need "$SHIM" "$SHIMMERD" "$WL_HARD" "$WL_EARLY" "$WL_CXX" "$LIBORDER" "$WL_NOPIE" "$WL_OWNMALLOC"

DB=$T/store.db
start_collector "$DB" || { not_ok "collector starts"; finish; }
run() { # run NAME CMD...: traced, all mode, a row per event and the
	# aggregates from the same events; BEHIND=LIB: LIB preloaded after
	# the shim (its malloc is the shim's real one)
	local name=$1
	shift
	SHIMMER_MALLOC=all SHIMMER_HEAP_ROWS=both LD_PRELOAD="$SHIM${BEHIND:+ $BEHIND}" \
		SHIMMER_SOCKET=$SOCK "$@" > "$T/$name.out" 2> "$T/$name.err"
	local rc=$?
	check "$name: exits 0" "status $rc; stderr: $(head -c 300 "$T/$name.err")" [ $rc = 0 ]
}
run early "$WL_EARLY"
run cxx "$WL_CXX"
run deepbind "$WL_HARD" deepbind libhard.so 100
GLIBC_TUNABLES=glibc.malloc.tcache_count=0 SHIMMER_LOSSLESS=1 run reuse "$WL_HARD" reuse 4 50000 64
ORDER_N=1000
SHIMMER_LOSSLESS=1 BEHIND=$LIBORDER run order "$WL_HARD" order $ORDER_N
run exits "$WL_HARD" exits
run nopie "$WL_NOPIE" 1000 4096
# reallocarray: glibc's calls realloc through the PLT, the shim's
SHIMMER_LOSSLESS=1 run rarray "$WL_HARD" reallocarray 2000
SHIMMER_MALLOC=sample SHIMMER_SAMPLE_BYTES=1 LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK \
	"$WL_HARD" reallocarray 1000 > "$T/rarray_s.out" 2> "$T/rarray_s.err"
rc=$?
check "reallocarray, sample mode: exits 0" "status $rc" [ $rc = 0 ]
SHIMMER_MALLOC=all LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK "$WL_OWNMALLOC" 1000 4096 \
	> "$T/own.out" 2> "$T/own.err"
rc=$?
check "an executable with its own malloc: exits 0" "status $rc" [ $rc = 0 ]
check "an executable with its own malloc: one line says the heap is not traced" \
	"stderr: $(head -c 400 "$T/own.err")" test "$(wc -l < "$T/own.err")" = 1 -a \
	"$(grep -c "malloc is the executable's, ahead of libshimmer.so: the heap is not traced" \
	"$T/own.err")" = 1
# Another allocator ahead of the shim (liborder.so's malloc and free; its
# calloc and realloc are the shim's): the program's heap calls reach the
# shim in part or not at all, so it is not traced, and said in one line.
# Recorded, a block from the shim's calloc freed through liborder.so's
# free would be a leak that is none, and malloc's blocks would be missing.
cp "$WL_EARLY" "$T/wl_ahead" # a name of its own in the store
LD_LIBRARY_PATH=$O/test/e2e SHIMMER_MALLOC=all LD_PRELOAD="$LIBORDER $SHIM" \
	SHIMMER_SOCKET=$SOCK "$T/wl_ahead" \
	> "$T/ahead.out" 2> "$T/ahead.err"
rc=$?
check "another allocator ahead: exits 0" "status $rc" [ $rc = 0 ]
check "another allocator ahead: one line on stderr names it" "stderr: $(head -c 400 "$T/ahead.err")" \
	test "$(grep -c 'malloc is .*liborder.so.s, ahead of libshimmer.so: the heap is not traced' \
	"$T/ahead.err")" = 1 -a "$(wc -l < "$T/ahead.err")" = 1
check "the shim first, liborder.so behind: no such line" "stderr: $(head -c 400 "$T/order.err")" \
	test "$(grep -c 'ahead of libshimmer.so' "$T/order.err")" = 0
check "collector exits 0 on SIGTERM" "see collector log" stop_collector
got=$(sq "$DB" "SELECT group_concat(malloc_mode, ' ') FROM processes WHERE exe LIKE '%/wl_ahead'
	OR exe LIKE '%/wl_ownmalloc'")
check "another allocator ahead, or the executable's own: stored with malloc off" "$got" \
	test "$got" = "off off"

# allocations, frees, bytes allocated of the process whose exe ends in $1
heap_of() {
	sq -separator ' ' "$DB" "SELECT count(a.ptr), count(a.free_ns), coalesce(sum(a.size), 0)
		FROM processes p LEFT JOIN allocations a USING (proc_id) WHERE p.exe LIKE '%/$1'"
}
# valgrind's "total heap usage: A allocs, F frees, B bytes allocated" as "A F B"
vg_usage() {
	valgrind "$@" 2>&1 >/dev/null | sed -n 's/.*total heap usage: \([0-9,]*\) allocs, \([0-9,]*\) frees, \([0-9,]*\) bytes.*/\1 \2 \3/p' | tr -d ,
}
got=$(heap_of wl_early)
check "C, allocations before the shim's constructor: 5 allocations, 5 frees, 25553 bytes" \
	"stored: $got" [ "$got" = "5 5 25553" ]
got=$(sq "$DB" "SELECT group_concat(x, ' ') FROM (SELECT f.name || '=' || sum(c.count) AS x
	FROM function_counts c JOIN functions f USING (fn_id) JOIN processes p USING (proc_id)
	WHERE p.exe LIKE '%/wl_early' AND c.count > 0 GROUP BY f.name ORDER BY f.name)")
check "C, before the constructor: every call counted" "counted: $got" \
	[ "$got" = "calloc=1 free=4 malloc=3 realloc=1" ]
got=$(heap_of wl_cxx)
check "C++: libstdc++'s pool and 10 new[]: 11 allocations, 73024 bytes, the pool kept" \
	"stored: $got" [ "$got" = "11 10 73024" ]
if command -v valgrind > /dev/null; then
	vg=$(vg_usage "$WL_EARLY")
	check "C: as valgrind counts ($vg)" "stored $(heap_of wl_early), valgrind $vg" \
		[ "$(heap_of wl_early)" = "$vg" ]
	read -r a f b <<< "$(vg_usage "$WL_CXX")"
	read -r ga gf gb <<< "$(heap_of wl_cxx)"
	# valgrind frees libstdc++'s pool at exit (__gnu_cxx::__freeres)
	check "C++: as valgrind counts ($a allocs, $b bytes)" "stored $ga $gf $gb, valgrind $a $f $b" \
		holds '[ "$ga $gb" = "$a $b" ] && [ "$gf" = $((f - 1)) ]'
else
	ok "C and C++: as valgrind counts # SKIP valgrind not installed"
fi

got=$(sq -separator ' ' "$DB" "SELECT count(*), count(free_ns) FROM allocations a
	JOIN processes p USING (proc_id) WHERE p.argv LIKE '%deepbind%' AND a.size = 4321")
check "RTLD_DEEPBIND library's heap calls traced: 100 allocations, 97 freed" "stored: $got" \
	[ "$got" = "100 97" ]
check "RTLD_DEEPBIND: one stderr line says the flag was cleared" "stderr: $(cat "$T/deepbind.err")" \
	holds '[ "$(grep -c '\''^shimmer'\'' "$T/deepbind.err")" = 1 ] && grep -q '\''RTLD_DEEPBIND'\'' "$T/deepbind.err"'
check "RTLD_DEEPBIND: the library was found through the program's RUNPATH" \
	"stdout: $(cat "$T/deepbind.out")" [ "$(cat "$T/deepbind.out")" = "kept 3" ]

got=$(sq -separator ' ' "$DB" "SELECT count(*), count(free_ns), sum(free_tid = alloc_tid)
	FROM allocations a JOIN processes p USING (proc_id) WHERE p.argv LIKE '%reuse%'
	AND a.size = 64 AND a.alloc_tid <> p.pid")
check "addresses reused across threads: 200000 blocks, each freed by its own thread" \
	"blocks, freed, freed by their thread: $got" [ "$got" = "200000 200000 200000" ]
# a thread's instants keep its calls' order, even when it moved to a CPU
# whose TSC is behind (before: a free 51 ns before its own malloc, on this
# VM under load: a negative lifetime, and the pair not temporary below)
got=$(sq "$DB" "SELECT count(*) FROM allocations a JOIN processes p USING (proc_id)
	WHERE p.argv LIKE '%reuse%' AND a.free_tid = a.alloc_tid AND a.free_ns < a.alloc_ns")
check "addresses reused across threads: no block freed by its thread before it began" \
	"$got such blocks" [ "$got" = 0 ]
# the aggregates pair as the rows do (before: by instants, a malloc stamped
# before another thread's free of its address took that free)
got=$(sq -separator ' ' "$DB" "SELECT h.live_count, (SELECT count(*) - count(free_ns)
	FROM allocations a WHERE a.proc_id = p.proc_id AND a.space = 'host'),
	(SELECT sum(s.allocs) || ' ' || sum(s.frees) || ' ' || sum(s.temp_count) FROM heap_sites s
	 WHERE s.proc_id = p.proc_id AND s.stack_id IN (SELECT a.stack_id FROM allocations a
	 WHERE a.proc_id = p.proc_id AND a.size = 64 AND a.alloc_tid <> p.pid))
	FROM processes p JOIN heap_totals h USING (proc_id) WHERE p.argv LIKE '%reuse%'")
check "addresses reused across threads, aggregated: live as the rows; 200000 blocks, freed, temporaries" \
	"live (aggregated, rows), the workers' site(s): blocks, freed, temporaries: $got" \
	[ "$got" = "${got%% *} ${got%% *} 200000 200000 200000" ]

# wl_hard order: worker a's blocks (2N + 2, all freed, each by a) and b's
# (2N + 2, the last kept), all at one address.  A release numbered after
# the real free (b's malloc has taken the address by then), or an
# allocation numbered before the real malloc (a's free comes after it),
# pairs a's free with b's block and b's with a's: blocks not freed by
# their own thread (in about half the quick rounds, in both slow ones: see
# wl_hard.c), b's kept block reported as a's.  b's block of the first
# slow round is no temporary (b's other heap calls wait for the collector
# before it is freed).
read -r opid ta tb <<< "$(sed -n 's/^pid \([0-9]*\) a \([0-9]*\) b \([0-9]*\) rounds.*/\1 \2 \3/p' "$T/order.out")"
n=$((2 * ORDER_N + 2))
got=$(sq -separator ' ' "$DB" "SELECT (SELECT count(DISTINCT a.ptr) FROM allocations a
	JOIN processes p USING (proc_id) WHERE p.pid = ${opid:-0} AND a.size = 3001),
	group_concat(x, ' ') FROM (SELECT a.alloc_tid || ':' || count(*) || ',' || count(a.free_ns)
	|| ',' || sum(a.free_tid = a.alloc_tid) AS x FROM allocations a JOIN processes p USING (proc_id)
	WHERE p.pid = ${opid:-0} AND a.size = 3001 GROUP BY a.alloc_tid ORDER BY a.alloc_tid = ${tb:-0})")
check "calls held open in the real allocator: one address; a's blocks, b's: each freed by its own thread, b's last kept" \
	"addresses, then per thread (a $ta, b $tb) tid:blocks,freed,freed by their thread: $got" \
	[ "$got" = "1 $ta:$n,$n,$n $tb:$n,$((n - 1)),$((n - 1))" ]
got=$(sq -separator ' ' "$DB" "SELECT group_concat(x, ' ') FROM (SELECT t.tid || ':' || sum(s.allocs)
	|| ',' || sum(s.frees) || ',' || sum(s.live_count) || ',' || sum(s.temp_count) AS x
	FROM heap_sites s JOIN processes p USING (proc_id) JOIN (SELECT DISTINCT a.proc_id, a.stack_id,
	a.alloc_tid AS tid FROM allocations a WHERE a.size = 3001) t USING (proc_id, stack_id)
	WHERE p.pid = ${opid:-0} GROUP BY t.tid ORDER BY t.tid = ${tb:-0})")
check "calls held open, aggregated: a's sites, b's: blocks, freed, kept, temporaries" \
	"per thread tid:blocks,freed,live,temporaries: $got" \
	[ "$got" = "$ta:$n,$n,0,$n $tb:$n,$((n - 1)),1,$((n - 2))" ]
got=$(sq -separator ' ' "$DB" "SELECT h.live_count, (SELECT count(*) - count(free_ns) FROM allocations a
	WHERE a.proc_id = p.proc_id AND a.space = 'host') FROM processes p JOIN heap_totals h
	USING (proc_id) WHERE p.pid = ${opid:-0}")
check "calls held open: live blocks aggregated as on the rows" "aggregated, rows: $got" \
	holds '[ -n "$got" ] && [ "${got% *}" = "${got#* }" ]'
"$SHIMMER" leaks "$DB" --pid "${opid:-0}" --format csv > "$T/order.csv" 2> "$T/order.csv.err"
got=$(grep ',host,[0-9]*,3001,' "$T/order.csv" | cut -d, -f4-7)
check "calls held open: shimmer leaks reports the one block kept, where b allocated it" \
	"leaks of 3001 bytes (count,bytes,estimated,frame): $got; stderr: $(head -c 300 "$T/order.csv.err")" \
	holds '[ "${got%% (*}" = "1,3001,0,order_b_alloc" ]'

child=$(sed -n 's/^child //p' "$T/exits.out")
got=$(sq "$DB" "SELECT end_reason FROM processes WHERE pid = ${child:-0}")
check "a child that ends with _exit: end_reason exit" "pid $child: '$got'" [ "$got" = exit ]
got=$(sq -separator ' ' "$DB" "SELECT p.end_reason, p.end_ns >= a.alloc_ns FROM processes p
	JOIN allocations a USING (proc_id) WHERE p.argv LIKE '%exits%' AND p.pid <> ${child:-0}
	AND a.size = 888")
check "a vfork child's _exit does not end its parent (which ends after its last malloc)" \
	"end_reason, ended after: $got" [ "$got" = "exit 1" ]
# A non-PIE program's canonical PLT slots for malloc and free (wl_nopie.c,
# and Debian's python3) are found first in a lookup, in the executable, and
# are no allocator: it is traced, every block.
check "non-PIE with malloc's address taken: traced, no line" "stderr: $(head -c 400 "$T/nopie.err")" \
	test ! -s "$T/nopie.err"
got=$(heap_of wl_nopie)
check "non-PIE with malloc's address taken: 1000 allocations, 500 frees, 4096000 bytes" "$got" \
	test "$got" = "1000 500 4096000"
# reallocarray(), malloc(SIZE_MAX), calloc whose product overflows: each
# call counted once, as itself (glibc's reallocarray calls realloc through
# the PLT: counted as a realloc too in sample mode, and in all mode taken
# for a signal handler's and counted as a dropped record); the refused
# requests add no bytes (they wrapped the 64-bit sums: calloc -1 B)
for run in "all 2000 rarray" "sample 1000 rarray_s"; do
	read -r mode n out <<< "$run"
	tid=$(sed -n 's/^tid \([0-9]*\) refused 1$/\1/p' "$T/$out.out")
	check "reallocarray, $mode mode: the refused requests failed as they should" \
		"stdout: $(cat "$T/$out.out")" test -n "$tid"
	got=$(sq "$DB" "SELECT group_concat(x, ' ') FROM (SELECT f.name || '=' || c.count || '/' || c.bytes
		AS x FROM function_counts c JOIN functions f USING (fn_id) JOIN processes p USING (proc_id)
		WHERE p.argv LIKE '%\"reallocarray\",\"$n\"%' AND c.tid = ${tid:-0} AND c.count > 0 ORDER BY f.name)")
	check "reallocarray, $mode mode: every call counted once, as itself, refused requests 0 bytes" \
		"counted (calls/bytes): $got" \
		[ "$got" = "calloc=1/0 free=$n/0 malloc=1/0 reallocarray=$((2 * n + 1))/$((800 * n))" ]
	got=$(sq -separator ' ' "$DB" "SELECT count(*), (SELECT coalesce(sum(d.events), 0) FROM drops d
		WHERE d.proc_id = p.proc_id) FROM processes p WHERE p.argv LIKE '%\"reallocarray\",\"$n\"%'")
	check "reallocarray, $mode mode: nothing dropped" "processes, dropped: $got" [ "$got" = "1 0" ]
	got=$(sq -separator ' ' "$DB" "SELECT count(*), count(free_ns), sum(size) FROM allocations a
		JOIN processes p USING (proc_id) WHERE p.argv LIKE '%\"reallocarray\",\"$n\"%' AND a.alloc_tid = ${tid:-0}")
	check "reallocarray, $mode mode: a block per call, each freed" "blocks, freed, bytes: $got" \
		[ "$got" = "$((2 * n)) $((2 * n)) $((800 * n))" ]
done
finish
