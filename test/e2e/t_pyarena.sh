#!/bin/bash
# t_pyarena: pymalloc's arenas are host memory.  CPython keeps its objects
# of 512 bytes or less in arenas it maps itself (mmap, 1 MiB from 3.10 on,
# 256 KiB before), which no malloc hook sees; the shim records the arena
# allocator's maps and unmaps as pymalloc_arena_mmap and
# pymalloc_arena_munmap.  The truth is CPython's own count:
# sys._debugmallocstats() prints the arenas allocated in all, reclaimed and
# allocated now, and the arena size.  The workload prints it before and
# after the line that makes most of its objects, and at its end, where it
# leaves with os._exit (no finalization frees an arena after it).  It also
# maps regions of an arena's very shape with the mmap module (an
# extension: not the runtime's arena allocator), which must not count.
#
# For each CPython found (python3, Debian's /usr/bin/python3 with the
# runtime in the executable, pyenv's 3.9 (256 KiB arenas) to 3.13 with
# libpython3.X.so; one not found is a SKIP), in all mode with a row per
# allocation besides the aggregates (SHIMMER_HEAP_ROWS=both):
#  - function_counts: maps = arenas allocated total, unmaps = reclaimed,
#    their bytes that times the arena size, exactly;
#  - rows: one per arena, of the arena size, freed by an unmap exactly for
#    the reclaimed ones, live for the current ones; each with its native
#    stack, and those the line made carry that Python line (as many as
#    CPython's count rose across it);
# and for python3 alone:
#  - the host peak of the workload is at least 95% of the peak of the same
#    workload run with PYTHONMALLOC=malloc (each object its own malloc:
#    pymalloc's arenas hold the same objects, rounded up to their size
#    class, in pools that are partly empty), and at most the untraced
#    run's maximum resident set (the arenas' pages are written as pools
#    are handed out; the rest of the RSS is the interpreter's code);
#  - native sites name the code that needed memory, not CPython's
#    allocator (obmalloc.c);
#  - sample mode: the counters are exact as in all mode; each arena is
#    sampled with p = 1 - exp(-S/B) (S its size, B SHIMMER_SAMPLE_BYTES),
#    independently (the sampler is a Poisson process over bytes), and
#    weighs S/p: the estimates of the bytes mapped in all and live at the
#    end are within 4.5 standard deviations (S sqrt(N (1-p)/p) for N
#    arenas) of CPython's counts; the estimated peak is within 5 standard
#    deviations (Horvitz-Thompson's variance of the blocks sampled live at
#    it, sum(w^2 - w size)) plus 3% of the exact peak of the all-mode run
#    (another run of the same program: its hash seed fixed).
# Then what must not count: a C program's own maps of an arena's shape
# (none), a stand-in runtime's (libfakepy.so, which defines what the shim
# looks for) counted exactly, including those its constructor made before
# the shim's; mmap and munmap's failures and errno as glibc's, bare and
# traced.  A program that loads libpython with dlopen (by soname, and by
# path RTLD_LOCAL) after the shim started: counts exact.  Last, the
# readers say when host memory leaves the arenas out: an attached process
# (shimmer attach's probes are the malloc family's), a store recorded
# before they were.
. "$(dirname "$0")/lib.sh"

ANONMAPS=$O/test/e2e/anonmaps
PYEMBED=$O/test/e2e/pyembed
need "$SHIM" "$SHIMMERD" "$SHIMMER" "$ANONMAPS" "$PYEMBED"
export PYTHONHASHSEED=0
WLOG=$T/wlog # traced() sets WL_LOG

cat > "$T/wl.py" <<'PY'
import gc, mmap, os, sys
stats = sys._debugmallocstats
stats()
keep = [(i, "s%d" % i, [i]) for i in range(200000)]
stats()
del keep[:150000]
gc.collect()
anon = [mmap.mmap(-1, 1 << 20, flags=mmap.MAP_PRIVATE) for _ in range(3)]
anon += [mmap.mmap(-1, 256 << 10, flags=mmap.MAP_PRIVATE) for _ in range(3)]
shared = mmap.mmap(-1, 1 << 20)
del anon[0], anon[3]
more = ["t%d" % i * 3 for i in range(80000)]
end = os._exit
stats()
end(0)
PY
LINE=4 # the line that makes most objects

# stats ERR N: CPython's Nth report in ERR: "total reclaimed current size"
stats() {
	awk -v n="$2" '/# arenas allocated total/ { k++ } k != n { next }
		/# arenas allocated total/ { t = $NF } /# arenas reclaimed/ { r = $NF }
		/# arenas allocated current/ { c = $NF }
		/arenas \* [0-9]+ bytes\/arena/ { s = $4 }
		END { if (t != "") print t, r, c, s }' "$1"
}

# counts DB: "maps map_bytes unmaps unmap_bytes" from function_counts
counts() {
	sq "$1" "SELECT coalesce(sum(CASE f.name WHEN 'pymalloc_arena_mmap' THEN c.count END), 0),
	coalesce(sum(CASE f.name WHEN 'pymalloc_arena_mmap' THEN c.bytes END), 0),
	coalesce(sum(CASE f.name WHEN 'pymalloc_arena_munmap' THEN c.count END), 0),
	coalesce(sum(CASE f.name WHEN 'pymalloc_arena_munmap' THEN c.bytes END), 0)
	FROM function_counts c JOIN functions f USING (fn_id);" | tr '|' ' '
}

# peak DB: "peak_bytes peak_at_ns" of the host memory (shimmer peak's csv)
peak() {
	"$SHIMMER" peak "$1" --format csv 2> /dev/null | awk -F, 'NR == 1 {
		for (i = 1; i <= NF; i++) col[$i] = i; next }
		$col["memory"] == "host" { printf "%.0f %s\n", $col["peak_bytes"], $col["peak_at_ns"]; exit }'
}

# run NAME PY MODE [VAR=VALUE...]: PY wl.py traced into $T/NAME.db, its
# stderr in $T/NAME.err; false when it failed
run() {
	local name=$1 py=$2 mode=$3
	shift 3
	rm -f "$T/$name.db"
	start_collector "$T/$name.db" || { not_ok "$name: collector starts"; return 1; }
	env "$@" LD_PRELOAD="$SHIM" SHIMMER_SOCKET="$SOCK" SHIMMER_MALLOC=$mode \
		SHIMMER_HEAP_ROWS=both "$py" "$T/wl.py" > "$T/$name.out" 2> "$T/$name.err"
	local rc=$?
	stop_collector || not_ok "$name: collector exit status"
	check "$name: the workload exits 0" "exit $rc: $(head -c 300 "$T/$name.err")" [ $rc = 0 ]
}

# exact NAME: the counters of $T/NAME.db against CPython's last report
exact() {
	local name=$1 t r c s got
	read -r t r c s < <(stats "$T/$name.err" 3)
	got=$(counts "$T/$name.db")
	check "$name: arenas mapped and unmapped counted exactly, bytes = count x $s (CPython: $t allocated, $r reclaimed)" \
		"counted (maps bytes unmaps bytes): $got; CPython's: $t $((t * s)) $r $((r * s))" \
		[ "$got" = "$t $((t * s)) $r $((r * s))" ]
}

# rows NAME PY: the arena rows of $T/NAME.db (all mode) against CPython's
rows() {
	local name=$1 db=$T/$1.db t r c s t1 t2 got want frames
	read -r t r c s < <(stats "$T/$name.err" 3)
	t1=$(stats "$T/$name.err" 1 | cut -d' ' -f1)
	t2=$(stats "$T/$name.err" 2 | cut -d' ' -f1)
	got=$(sq "$db" "SELECT count(*), sum(a.size = $s), sum(ff.name = 'pymalloc_arena_munmap'),
	sum(a.free_ns IS NULL), sum(a.stack_id IS NOT NULL)
	FROM allocations a JOIN functions fa ON fa.fn_id = a.alloc_fn
	LEFT JOIN functions ff ON ff.fn_id = a.free_fn WHERE fa.name = 'pymalloc_arena_mmap';")
	check "$name: a row per arena of $s bytes, freed by an unmap for the reclaimed, live for the current, each with its stack" \
		"rows, of the size, unmapped, live, with a stack: $got; CPython: $t allocated, $r reclaimed, $c current" \
		[ "$got" = "$t|$t|$r|$c|$t" ]
	# Python frames are read from CPython 3.11 to 3.13 (preload/pyframes.h)
	frames=$("$2" -c 'import sys; print(int((3, 11) <= sys.version_info[:2] <= (3, 13)))')
	if [ "$frames" != 1 ]; then
		echo "ok - $SCRIPT: $name: the arenas' Python line # SKIP no Python frames before 3.11"
		return
	fi
	got=$(sq "$db" "SELECT count(*) FROM allocations a JOIN functions fa ON fa.fn_id = a.alloc_fn
	JOIN python_frames_named y ON y.proc_id = a.proc_id AND y.pystack_id = a.pystack_id
	AND y.level = 0 WHERE fa.name = 'pymalloc_arena_mmap' AND y.file LIKE '%wl.py'
	AND y.line = $LINE;")
	want=$((t2 - t1))
	check "$name: the arenas line $LINE made carry it as their Python line ($want, CPython's count across it)" \
		"$got rows at wl.py:$LINE" [ "$got" = "$want" ]
}

pys=()
if py=$(python_exe); then
	pys+=("$py")
else
	echo "ok - $SCRIPT: python3 # SKIP python3 not found"
fi
main_py=${pys[0]:-}
if [ -x /usr/bin/python3 ] && [ "$(readlink -f /usr/bin/python3)" != "$(readlink -f "$main_py")" ]; then
	pys+=(/usr/bin/python3)
fi
for v in 3.9 3.10 3.12 3.13; do
	if py=$(python_exe $v); then
		[ "$(readlink -f "$py")" = "$(readlink -f "$main_py")" ] || pys+=("$py")
	else
		echo "ok - $SCRIPT: python$v # SKIP python$v not found"
	fi
done

n=0
for py in "${pys[@]}"; do
	name=all$n
	n=$((n + 1))
	echo "# $name: $py"
	run $name "$py" all || continue
	exact $name
	rows $name "$py"
done

if [ -n "$main_py" ]; then
	# the same program, each object its own malloc
	run malloc "$main_py" all PYTHONMALLOC=malloc
	read -r pm _ < <(peak "$T/malloc.db")
	read -r pa _ < <(peak "$T/all0.db")
	rss=$(python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)' "$main_py" "$T/wl.py")
	check "all: host peak $pa between 95% of PYTHONMALLOC=malloc's $pm and the untraced max RSS $rss" \
		"peak $pa, PYTHONMALLOC=malloc's $pm, max RSS $rss" \
		holds '[ -n "$pa" ] && [ -n "$pm" ] && [ $((pa * 100)) -ge $((pm * 95)) ] && [ "$pa" -le "$rss" ]'

	# native sites: what needed memory, never CPython's allocator
	"$SHIMMER" allocations "$T/all0.db" --native --format csv > "$T/native.csv" 2> /dev/null
	alloc=$(grep -c 'obmalloc\.c\|_PyObject_ArenaMmap\|_PyMem_ArenaAlloc\|_PyObject_Malloc\b' "$T/native.csv")
	check "all: no native site is CPython's allocator (obmalloc.c)" \
		"$(grep 'obmalloc\.c\|_PyObject_ArenaMmap\|_PyObject_Malloc\b' "$T/native.csv" | head -3)" \
		[ "$alloc" = 0 ]

	# sample mode
	run sample "$main_py" sample
	exact sample
	read -r t r c s < <(stats "$T/sample.err" 3)
	B=$(sq "$T/sample.db" "SELECT sample_bytes FROM processes LIMIT 1;")
	read -r ps pat < <(peak "$T/sample.db")
	got=$(sq "$T/sample.db" "SELECT
	coalesce(sum(a.weight), 0), coalesce(sum(CASE WHEN a.free_ns IS NULL THEN a.weight END), 0)
	FROM allocations a JOIN functions fa ON fa.fn_id = a.alloc_fn
	WHERE fa.name = 'pymalloc_arena_mmap' AND a.sampled = 1;
	SELECT coalesce(sum(a.weight * a.weight - a.weight * a.size), 0) FROM allocations a
	JOIN processes p USING (proc_id) WHERE a.space = 'host' AND a.sampled = 1
	AND a.alloc_ns <= p.start_ns + $pat AND (a.free_ns IS NULL OR a.free_ns > p.start_ns + $pat);" |
		tr '|\n' '  ')
	verdict=$(python3 - $t $c $s $B $pa $ps $got <<'PY'
import math, sys
t, c, s, b, exact_peak, peak = map(float, sys.argv[1:7])
est_all, est_live, var_peak = map(float, sys.argv[7:10])
p = 1 - math.exp(-s / b)
out = []
for what, n, est in (("mapped in all", t, est_all), ("live at the end", c, est_live)):
    sd = s * math.sqrt(n * (1 - p) / p)
    ok = abs(est - n * s) <= 4.5 * sd
    out.append("%s %s: estimate %.0f, CPython's %.0f, sd %.0f" %
               ("ok" if ok else "BAD", what, est, n * s, sd))
sd = math.sqrt(var_peak)
ok = abs(peak - exact_peak) <= 5 * sd + 0.03 * exact_peak
out.append("%s peak: estimate %.0f, all mode's %.0f, sd %.0f" %
           ("ok" if ok else "BAD", peak, exact_peak, sd))
print("\n".join(out))
PY
)
	check "sample: arena bytes mapped and live, and the host peak, within the sampling's bounds" \
		"$verdict" holds '! grep -q "^BAD" <<< "$verdict" && [ $(grep -c "^ok" <<< "$verdict") = 3 ]'
	echo "$verdict" | sed 's/^/# /'
fi

# ---- what is no arena -------------------------------------------------------
for mode in all sample; do
	DB=$T/c.$mode.db
	start_collector "$DB" || { not_ok "C program $mode: collector starts"; continue; }
	SHIMMER_MALLOC=$mode SHIMMER_HEAP_ROWS=both traced "$ANONMAPS" 20 5 2 4 \
		> "$T/c.$mode.out" 2> "$T/c.$mode.err"
	rc=$?
	stop_collector || not_ok "C program $mode: collector exit status"
	"$ANONMAPS" 20 5 2 4 > "$T/c.bare.out" 2>&1
	check "C program $mode: exits 0, and mmap's and munmap's results and errno are glibc's" \
		"exit $rc; $(diff "$T/c.bare.out" "$T/c.$mode.out" | head -5)" \
		holds '[ $rc = 0 ] && cmp -s "$T/c.bare.out" "$T/c.$mode.out"'
	# 40 maps of the program's own, none counted; the stand-in runtime's
	# 3 + 5 of 1 MiB (3 before the shim's constructor) and 1 + 2 unmaps,
	# not its 4 of 256 KiB
	got=$(counts "$DB")
	check "C program $mode: its own maps of an arena's shape are not counted, the runtime's are, exactly" \
		"counted: $got" [ "$got" = "8 $((8 << 20)) 3 $((3 << 20))" ]
done
site=$(sq "$T/c.all.db" "SELECT count(*) FROM allocations a JOIN functions fa ON fa.fn_id = a.alloc_fn
	WHERE fa.name = 'pymalloc_arena_mmap' AND a.stack_id IS NOT NULL;")
check "C program all: the runtime's arenas made after the constructor carry their stack" \
	"$site rows" [ "$site" = 5 ]

# ---- a runtime loaded with dlopen --------------------------------------------
if [ -n "$main_py" ]; then
	read -r libdir soname home < <("$main_py" -c 'import sys, sysconfig
print(sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME"), sys.prefix)')
	code='import sys, os
keep = [("e%d" % i, i) for i in range(100000)]
del keep[:60000]
end = os._exit
sys._debugmallocstats()
end(0)'
	if [ ! -f "$libdir/$soname" ]; then
		echo "ok - $SCRIPT: dlopen # SKIP no $libdir/$soname"
	else
		for how in "$soname global" "$libdir/$soname local"; do
			set -- $how
			start_collector "$T/e.db" || { not_ok "dlopen $2: collector starts"; continue; }
			LD_LIBRARY_PATH=$libdir PYTHONHOME=$home traced "$PYEMBED" "$1" "$code" $2 \
				> "$T/e.out" 2> "$T/e.err"
			rc=$?
			stop_collector || not_ok "dlopen $2: collector exit status"
			read -r t r c s < <(stats "$T/e.err" 1)
			got=$(counts "$T/e.db")
			check "dlopen($1, $2) after the start: arenas counted exactly ($t allocated, $r reclaimed)" \
				"exit $rc; counted $got; CPython's $t $((t * s)) $r $((r * s)); $(head -c 200 "$T/e.err")" \
				[ "$rc/$got" = "0/$t $((t * s)) $r $((r * s))" ]
			rm -f "$T/e.db"
		done
	fi
fi

# ---- readers: where the arenas are not in the store --------------------------
if [ -n "$main_py" ]; then
	# a store recorded before the arenas were: its functions name none
	cp "$T/all0.db" "$T/older.db"
	sq "$T/older.db" "DELETE FROM functions WHERE name LIKE 'pymalloc_arena_%';"
	out=$("$SHIMMER" peak "$T/older.db" 2>&1)
	check "an older store: peak says the host memory leaves the arenas out" "$(head -4 <<< "$out")" \
		grep -q "WARNING: this store was recorded before shimmer recorded pymalloc's arenas" <<< "$out"
	"$SHIMMER" compare "$T/older.db" "$T/all0.db" --fail-if 'peak_memory>+10%' \
		> "$T/cmp.out" 2> "$T/cmp.err"
	rc=$?
	check "an older store against one with the arenas: compare says so, and does not judge their memory (exit 1)" \
		"exit $rc; $(head -3 "$T/cmp.err")" \
		holds '[ $rc = 1 ] && grep -q "pid [0-9]* in A: this store was recorded before.*; not evaluated" "$T/cmp.err" &&
		       grep -q "WARNING: this store was recorded before" "$T/cmp.out"'
	out=$("$SHIMMER" summary "$T/all0.db" 2>&1; "$SHIMMER" peak "$T/all0.db" 2>&1)
	check "a store with the arenas: no such warning" "$(grep WARNING <<< "$out" | head -3)" \
		holds '! grep -q "recorded pymalloc.s arenas\|shimmer attach sees" <<< "$out"'
fi
avail=$("$SHIMMERD" --check-attach 2>&1)
if [ $? != 0 ] || [ -z "$main_py" ]; then
	echo "ok - $SCRIPT: attach # SKIP ${avail#attach: }"
else
	mkfifo "$T/att.in"
	"$main_py" -c 'import sys
print("ready", flush=True)
sys.stdin.readline()
keep = [str(i) * 3 for i in range(100000)]
print("done", flush=True)
sys.stdin.readline()' < "$T/att.in" > "$T/att.out" 2>&1 &
	APY=$!
	exec 7> "$T/att.in"
	wait_line "$T/att.out" '^ready$' || not_ok "attach: the program starts"
	"$SHIMMER" attach "$APY" --db "$T/att.db" --heap > "$T/att.log" 2>&1 &
	AP=$!
	wait_line "$T/att.log" '^shimmer: attached to' 30 || not_ok "attach: attaches"
	echo go >&7
	wait_line "$T/att.out" '^done$' || not_ok "attach: the program allocates"
	kill -INT "$AP"
	wait "$AP"
	echo end >&7
	exec 7>&-
	wait "$APY"
	out=$("$SHIMMER" peak "$T/att.db" 2>&1; "$SHIMMER" leaks "$T/att.db" --format csv 2>&1 > /dev/null)
	n=$(grep -c "shimmer attach sees the malloc family only" <<< "$out")
	check "attach: peak and leaks (csv, on stderr) say the host memory leaves the arenas out" \
		"$(head -5 <<< "$out")" [ "$n" = 2 ]
fi
finish
