#!/bin/bash
# t_pyheap: host allocations of a Python program are named by the Python
# line that made them.  The workload below leaks blocks with libc's malloc
# (through ctypes, as a C extension would) on known lines, each block a size
# of its own, and logs per block its pid, function, line and size: in the
# main thread, a method, a generator, a loop whose two lines alternate (the
# shim's per-thread memo of frames must not give one line the other's), a
# thread started by threading, and a child made by os.fork() after the
# parent ran the same function (the names cached by the parent must be
# announced again in the child), code objects compiled one after another
# where the last one died (the cached names must be the new code's), and
# a call into a library 40 frames deep (the site is the user's line, at the
# outer end of a stack deeper than the 32 frames kept).  `leaks` must show, per process, every
# logged line with the count and bytes of its blocks exactly, in `all` mode
# and in sample mode (blocks of 16 MiB: sampled with probability
# 1 - exp(-32)); `--native` names the same blocks by native frames instead,
# and `allocations` agrees.  Run for every CPython among 3.11, 3.12 and 3.13
# found here (on PATH or under pyenv's root; one not installed is a SKIP).
# Last, `compare` of two runs, one leaking a block more at one line: that
# line differs by exactly the block, the others pair by name and do not.
. "$(dirname "$0")/lib.sh"

need "$SHIM" "$SHIMMERD" "$SHIMMER"
WLOG=$T/wlog # traced() sets WL_LOG; the workload logs to its argument

# A library (by its path, as an installed package's) whose stack is deeper
# than the shim keeps: the site is the user's line at its outer end.
mkdir -p "$T/lib/site-packages"
cat > "$T/lib/site-packages/deeplib.py" <<'PY'
def down(n, size, malloc):
    return down(n - 1, size, malloc) if n else malloc(size)
PY

cat > "$T/wl.py" <<'PY'
import ctypes, inspect, os, sys, threading
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "lib", "site-packages"))
import deeplib

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
log = open(sys.argv[1], "w")
size = 16 << 20


def here():
    return inspect.currentframe().f_back.f_lineno


def note(func, line, file="wl.py"):
    log.write("%d,%s,%s,%d,%d\n" % (os.getpid(), func, file, line, size))
    log.flush()


def leak_a(n):
    global size
    for _ in range(n):
        size += 1; libc.malloc(size); note("leak_a", here())


class Model:
    def step(self):
        global size
        size += 1; libc.malloc(size); note("Model.step", here())


def gen(n):
    global size
    for _ in range(n):
        size += 1; yield libc.malloc(size); note("gen", here())


def alternate(n):
    global size
    for i in range(n):
        size += 1; libc.malloc(size); note("alternate", here())
        if i % 3 == 0:
            size += 1; libc.malloc(size); note("alternate", here())


def compiled(n):
    # Code objects that die at once: the next ones are made where they
    # were, with other names and lines.
    global size
    for i in range(n):
        src = "def f%d():\n    global size\n%s    size += 1; libc.malloc(size); " \
              "note('f%d', %d, 'gen%d.py')\nf%d()\n" % (i, "\n" * i, i, 3 + i, i, i)
        exec(compile(src, "gen%d.py" % i, "exec"), globals())
        del globals()["f%d" % i]


def deep_call(n):
    # 40 library frames below this one: more than the 32 kept
    global size
    for _ in range(n):
        size += 1; deeplib.down(40, size, libc.malloc); note("deep_call", here())


def worker():
    global size
    size += 1; libc.malloc(size); note("worker", here())


leak_a(3)
m = Model()
m.step()
m.step()
list(gen(4))
alternate(12)
compiled(8)
deep_call(3)
t = threading.Thread(target=worker)
t.start()
t.join()
log.flush()
if os.environ.get("PYHEAP_FORK", "1") == "1":
    pid = os.fork()
    if pid == 0:
        size += 1000
        leak_a(2)
        log.close()
        os._exit(0)
    os.waitpid(pid, 0)
if os.environ.get("PYHEAP_EXTRA") == "1":
    leak_a(1)  # run B of compare: one block more, the last
log.close()
PY

# leaks_diff CSV: the logged blocks against the rows (pid, memory, count,
# bytes, frame) of the workload's functions (frame "func (wl.py:line)"),
# per pid: count and bytes.  The module's own lines also allocate (imports,
# the thread, the fork), and are left out: a logged block counted there
# shows as missing from its function's line.
leaks_diff() {
	local db=$T/check.db
	rm -f "$db"
	sq "$db" "CREATE TABLE E (pid INTEGER, func TEXT, file TEXT, line INTEGER, size INTEGER);" \
		".mode csv" ".import $T/exp.csv E"
	import_csv "$db" R "$1"
	sq "$db" "CREATE TEMP VIEW exp AS SELECT pid, func || ' (' || file || ':' || line || ')' AS frame,
	count(*) AS count, sum(size) AS bytes FROM E GROUP BY pid, func, file, line;
CREATE TEMP VIEW got AS SELECT CAST(pid AS INTEGER) AS pid, frame,
	CAST(count AS INTEGER) AS count, CAST(round(bytes) AS INTEGER) AS bytes
	FROM R WHERE memory = 'host' AND (frame GLOB '* (wl.py:*)' OR frame GLOB '* (gen*.py:*)')
	AND frame NOT GLOB '<module> *';
$(multiset_diff exp got "pid, frame, count, bytes")"
}

# host_bytes CSV: the sum of a leaks CSV's host bytes
host_bytes() {
	awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "bytes") b = i; next }
		$3 == "host" { s += $b } END { printf "%.0f\n", s }' "$1"
}

for v in 3.11 3.12 3.13; do
	if ! py=$(python_exe $v); then
		echo "ok - $SCRIPT: python$v # SKIP python$v not found"
		continue
	fi
	for mode in all sample; do
		DB=$T/py$v.$mode.db
		rm -f "$T/exp.csv"
		start_collector "$DB" || { not_ok "python$v $mode: collector"; continue; }
		SHIMMER_MALLOC=$mode SHIMMER_LOSSLESS=1 traced "$py" "$T/wl.py" "$T/exp.csv" \
			> "$T/out" 2>&1
		rc=$?
		stop_collector || not_ok "python$v $mode: collector exit status"
		n=$(wc -l < "$T/exp.csv")
		check "python$v $mode: workload exits 0, 39 blocks logged" \
			"exit $rc, $n blocks: $(head -5 "$T/out")" [ "$rc/$n" = 0/39 ]
		expect_empty "python$v $mode: nothing dropped" \
			"$(sq "$DB" "SELECT 'dropped:', reason, events FROM drops;")"
		"$SHIMMER" leaks "$DB" --format csv > "$T/leaks.csv" 2> "$T/leaks.err"
		check "python$v $mode: leaks exits 0" "$(cat "$T/leaks.err")" [ $? = 0 ]
		expect_empty "python$v $mode: leaks names each block's Python line, count and bytes exact" \
			"$(leaks_diff "$T/leaks.csv")"
		# allocations: the same blocks as its live_count and live_bytes
		"$SHIMMER" allocations "$DB" --format csv |
			awk -F, -v OFS=, 'NR == 1 || $6 > 0 { print $1, $3, $6, $7, $NF }' |
			sed '1s/.*/pid,memory,count,bytes,frame/' > "$T/alloc.csv"
		expect_empty "python$v $mode: allocations' blocks live at the end on the same lines" \
			"$(leaks_diff "$T/alloc.csv")"
		# deep_call's stack: the library's innermost frames, the gap, the
		# outermost ones (outer first in the folded format)
		"$SHIMMER" leaks "$DB" --format folded > "$T/leaks.folded"
		deep=$(grep -c ';<module> (wl.py:[0-9]*);deep_call (wl.py:[0-9]*);\(down (deeplib.py:2);\)\{6\}\.\.\.;\(down (deeplib.py:2);\)\{22\}down (deeplib.py:2) [0-9]*$' "$T/leaks.folded")
		check "python$v $mode: a stack deeper than kept: its outer frames, the gap, its inner ones" \
			"$deep lines; $(grep deeplib "$T/leaks.folded" | head -2)" [ "$deep" = 1 ]
		# --callers 2: each site and the two frames that called it (fewer
		# where the stack ends), as its whole stack has them; a site's name
		# is read from its innermost frames only (sites_python_site())
		"$SHIMMER" leaks "$DB" --format csv --callers 2 > "$T/callers.csv"
		sq ":memory:" ".mode csv" ".import $T/callers.csv C" ".mode list" \
			"SELECT frame FROM C WHERE memory = 'host';" > "$T/callers.txt"
		missing=$(while IFS= read -r fr; do
			# outer first, as the folded lines are; fewer than 3
			# frames only where the stack ends ("pid N;host;" then)
			f=$(printf '%s\n' "$fr" | awk -F' <- ' '{ s = $NF; for (i = NF - 1; i >= 1; i--) s = s ";" $i;
				print (NF < 3 ? "host;" : ";") s }')
			grep -qF -- "$f;" "$T/leaks.folded" || grep -qF -- "$f " "$T/leaks.folded" ||
				echo "$fr"
		done < "$T/callers.txt")
		n3=$(grep -c '^deep_call (wl\.py:[0-9]*) <- <module> (wl\.py:[0-9]*)$' "$T/callers.txt")
		check "python$v $mode: leaks --callers 2 names a site's callers as its stack has them" \
			"$(wc -l < "$T/callers.txt") sites, deep_call's $n3; not in a stack: $(echo "$missing" | head -3)" \
			holds '[ -z "$missing" ] && [ "$n3" = 1 ] && [ "$(wc -l < "$T/callers.txt")" -gt 10 ]'
		"$SHIMMER" leaks "$DB" --format csv --native > "$T/native.csv"
		nat=$(grep -c 'wl\.py:\|gen[0-9]*\.py:' "$T/native.csv")
		# every byte: exactly in all mode; in sample mode each row's
		# estimate is written rounded to a byte, so two groupings of
		# the same blocks may differ by half a byte a row
		nb=$(host_bytes "$T/native.csv") lb=$(host_bytes "$T/leaks.csv")
		rows=$(cat "$T/native.csv" "$T/leaks.csv" | grep -c '^[0-9]*,[0-9]*,host,')
		check "python$v $mode: --native names no Python line and keeps every byte" \
			"$nat rows name wl.py; bytes $nb against $lb ($rows rows)" \
			holds '[ "$nat" = 0 ] && awk -v a="$nb" -v b="$lb" -v r="$rows" -v m=$mode \
				"BEGIN { d = a - b; if (d < 0) d = -d; exit !(m == \"all\" ? d == 0 : d <= r / 2) }"'
	done
done

# compare pairs the sites of two runs by Python line: B leaks one block
# more, the last, at leak_a's line; every other site of the workload's
# functions is the same in both (no fork: one process a run).
for v in 3.11 3.12 3.13; do
	cmp_py=$(python_exe $v) && break
done
if [ -z "$cmp_py" ]; then
	echo "ok - $SCRIPT: compare # SKIP no python 3.11 to 3.13"
else
	for run in a b; do
		rm -f "$T/exp.$run.csv"
		start_collector "$T/cmp.$run.db" || not_ok "compare: collector $run"
		PYHEAP_FORK=0 PYHEAP_EXTRA=$([ $run = b ] && echo 1) SHIMMER_LOSSLESS=1 \
			traced "$cmp_py" "$T/wl.py" "$T/exp.$run.csv" > "$T/out" 2>&1 ||
			not_ok "compare: run $run exits 0" "$(head -5 "$T/out")"
		stop_collector || not_ok "compare: collector $run exit status"
	done
	"$SHIMMER" compare "$T/cmp.a.db" "$T/cmp.b.db" --format csv > "$T/cmp.csv" 2> "$T/cmp.err"
	check "compare: exits 0" "$(cat "$T/cmp.err")" [ $? = 0 ]
	rm -f "$T/cmpcheck.db"
	sq "$T/cmpcheck.db" "CREATE TABLE E (pid INTEGER, func TEXT, file TEXT, line INTEGER, size INTEGER);" \
		".mode csv" ".import $T/exp.a.csv E"
	import_csv "$T/cmpcheck.db" X "$T/cmp.csv"
	extra=$(tail -n 1 "$T/exp.b.csv" | cut -d, -f5)
	got=$(sq -separator ' ' "$T/cmpcheck.db" "SELECT measure, a IS NOT NULL AND a <> '', diff, changed
		FROM X WHERE section = 'sites' AND memory = 'host' AND measure <> 'at_peak'
		AND name = (SELECT DISTINCT func || ' (' || file || ':' || line || ')' FROM E
			WHERE func = 'leak_a') ORDER BY measure;")
	check "compare: leak_a's line, paired by name: one block of $extra bytes more, allocated and live" \
		"$got" [ "$got" = "$(printf '%s\n' "allocated 1 $extra 1" 'allocations 1 1 1' "live_end 1 $extra 1")" ]
	got=$(sq -separator ' ' "$T/cmpcheck.db" "SELECT count(DISTINCT name), count(*), sum(diff = '0'),
		sum(changed = '0'), sum(only = '') FROM X WHERE section = 'sites' AND memory = 'host'
		AND measure <> 'at_peak' AND name IN (SELECT DISTINCT func || ' (' || file || ':' || line || ')'
			FROM E WHERE func <> 'leak_a');")
	check "compare: the other 14 lines of the workload's functions: paired, diff 0, not changed" \
		"sites, rows, diff 0, not changed, in both: $got" [ "$got" = "14 42 42 42 42" ]
fi
finish
