#!/bin/bash
# t_pytruth: shimmer's Python lines for host memory against an independent
# truth, CPython's own tracemalloc, on real programs: JSON of a large
# document, re, collections, a graph search and a dynamic program, csv,
# sqlite3, four threads running Python, generator pipelines and
# comprehensions, dataclasses, decorators, slots, properties, a `with`
# block, exceptions (one raised where the compiler put no line), the user's
# own recursion 60 deep and a library's 20, 40 and 600 deep, two modules of
# one base name, a module's import-time code, and a child made by os.fork().
#
# pytruth_wl.py runs them twice with PYTHONMALLOC=malloc (every object a
# malloc of its size): under shimmer in `all` mode, and under tracemalloc
# without shimmer (tracemalloc's own tables are allocated through the same
# malloc); never both in one process.  The blocks live at the end and
# allocated after a marker must agree (pytruth_check.py):
#
# - exactly, per innermost line, per whole stack (every frame's file and
#   line, cut as the shim cuts a deep one) and per call site as `leaks` and
#   `leaks --callers 2` name it, for every block of a size no CPython free
#   list holds;
# - exactly, per size and workload, for the sizes a free list may hold
#   (multiples of 8 up to 256): tracemalloc names a block taken again from a
#   free list by the line that took it, shimmer by the malloc that made it
#   (it sees no more), so such a block can move between lines;
# - every stored frame's function is a code object of its file with an
#   instruction on its line (tracemalloc has no function names);
# - in sample mode (SHIMMER_SAMPLE_BYTES=16384), each line's estimate is
#   within 5 standard deviations of tracemalloc's bytes.
#
# Left out, with the reason: blocks malloc'd by no CPython image (ld.so's
# dlopen of an extension, libc's buffers, libsqlite3's pages: tracemalloc
# sees only Python's allocator; shimmer names them by the Python line that
# ran, as it should); size 0 is 1 (CPython's malloc-backed allocator asks
# malloc(1)); tracemalloc.py's own lines.
#
# Run for every CPython among 3.11, 3.12 and 3.13 found here (a missing one
# is a SKIP).  Fails without c0260d2 (a library recursion 600 deep named by
# the library's frame), 8ab6d7c (the line -1 stored as 4294967295) and
# d6c7ffa (pa/util.py and pb/util.py one site).
. "$(dirname "$0")/lib.sh"

need "$SHIM" "$SHIMMERD" "$SHIMMER"
WLPY=$ROOT/test/e2e/pytruth_wl.py
CHECK=$ROOT/test/e2e/pytruth_check.py
SAMPLE_BYTES=16384

# The modules the workloads import, in a directory no run writes to (a
# directory's listing is cached by the importer: it must be the same in
# both runs).
D=$T/py
mkdir -p "$D/lib/site-packages" "$D/pa" "$D/pb"
cat > "$D/lib/site-packages/deeplib.py" <<'PY'
def down(n, keep):
    if n == 0:
        keep.append(bytearray(1001 + len(keep) % 7))
        return
    down(n - 1, keep)
PY
for p in pa pb; do
	: > "$D/$p/__init__.py"
	printf 'def make(keep, n):\n    keep.append(bytearray(n + 1))\n' > "$D/$p/util.py"
done
cat > "$D/lazymod.py" <<'PY'
TABLE = {"row%d" % i: [i] * (i % 9) for i in range(400)}


class Config:
    names = [str(i) * 3 for i in range(100)]


def helper():
    return TABLE
PY

# run_wl PY MODE OUT [VAR=VALUE...]: pytruth_wl.py in mode MODE (sh: under
# the shim, with the variables given; tm: tracemalloc), its snapshot to OUT
run_wl() {
	local py=$1 mode=$2 out=$3
	shift 3
	if [ "$mode" = sh ]; then
		env PYTHONMALLOC=malloc PYTHONHASHSEED=0 PYTHONDONTWRITEBYTECODE=1 PYTRUTH=sh \
			PYTRUTH_OUT="$out" PYTRUTH_DIR="$D" LD_PRELOAD="$SHIM" SHIMMER_SOCKET="$SOCK" \
			SHIMMER_LOSSLESS=1 "$@" "$py" "$WLPY"
	else
		env PYTHONMALLOC=malloc PYTHONHASHSEED=0 PYTHONDONTWRITEBYTECODE=1 PYTRUTH=tm \
			PYTRUTH_OUT="$out" PYTRUTH_DIR="$D" "$py" "$WLPY"
	fi
}

for v in 3.11 3.12 3.13; do
	if ! py=$(python_exe $v); then
		echo "ok - $SCRIPT: python$v # SKIP python$v not found"
		continue
	fi
	for mode in all sample; do
		start_collector "$T/$v.$mode.db" || { not_ok "python$v $mode: collector"; continue; }
		run_wl "$py" sh "$T/$v.tm" SHIMMER_MALLOC=$mode SHIMMER_SAMPLE_BYTES=$SAMPLE_BYTES \
			> "$T/$v.$mode.out" 2>&1
		rc=$?
		stop_collector || not_ok "python$v $mode: collector exit status"
		check "python$v $mode: the workloads exit 0 under the shim" \
			"exit $rc: $(head -5 "$T/$v.$mode.out")" [ "$rc" = 0 ]
		"$SHIMMER" leaks "$T/$v.$mode.db" --format csv > "$T/$v.$mode.leaks.csv" 2> "$T/err"
		check "python$v $mode: leaks exits 0" "$(cat "$T/err")" [ $? = 0 ]
	done
	"$SHIMMER" leaks "$T/$v.all.db" --format csv --callers 2 > "$T/$v.callers.csv"
	run_wl "$py" tm "$T/$v.tm" > "$T/$v.tm.out" 2>&1
	rc=$?
	check "python$v: the workloads exit 0 under tracemalloc, a snapshot written" \
		"exit $rc: $(head -5 "$T/$v.tm.out")" holds '[ "$rc" = 0 ] && [ -s "$T/$v.tm" ] && [ -s "$T/$v.tm.child" ]'
	"$py" "$CHECK" "python$v" "$WLPY" "$T/$v.all.db" "$T/$v.tm" "$T/$v.all.leaks.csv" \
		"$T/$v.callers.csv" "$T/$v.sample.db" "$T/$v.sample.leaks.csv" $SAMPLE_BYTES \
		> "$T/$v.check" 2>&1
	rc=$?
	cat "$T/$v.check"
	[ "$rc" = 0 ] || grep -q '^not ok' "$T/$v.check" || not_ok "python$v: pytruth_check.py exit $rc"
	grep -q '^not ok' "$T/$v.check" && FAILED=1
	last=$v
done

# compare names a file alike in both stores: a run from another directory
# with pa/util.py alone (no other util.py) against the workloads' run,
# which has pb/util.py too: pa's line pairs, pb's is only in the second.
if [ -n "${last:-}" ]; then
	mkdir -p "$T/py2/pa"
	cp "$D/pa/__init__.py" "$D/pa/util.py" "$T/py2/pa/"
	start_collector "$T/one.db" || not_ok "compare: collector"
	LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK SHIMMER_MALLOC=all "$(python_exe "$last")" -c \
		"import sys; sys.path.insert(0, '$T/py2'); import pa.util; k = []; pa.util.make(k, 3000)"
	stop_collector || not_ok "compare: collector exit status"
	"$SHIMMER" compare "$T/one.db" "$T/$last.all.db" --format csv > "$T/cmp.csv" 2> "$T/err"
	check "compare: exits 0" "$(cat "$T/err")" [ $? = 0 ]
	got=$(awk -F, '$3 == "sites" && $4 ~ /^make \((pa|pb)\/util\.py:2\)$/ && $NF == "" &&
		$(NF - 1) == "live_end" { print $4, ($6 != ""), ($7 != "") }' "$T/cmp.csv" | sort)
	check "compare: pa/util.py's line paired across directories, pb/util.py's only in B" "$got" \
		[ "$got" = "$(printf '%s\n' 'make (pa/util.py:2) 1 1' 'make (pb/util.py:2) 0 1')" ]
fi
finish
