#!/bin/bash
# t_wide: a table's columns stay in line when names hold characters a
# terminal shows wider or narrower than one column: East Asian wide
# characters and emoji (two), combining marks (none).  wl_hostile's store
# (fake CUDA: one NVTX range, one kernel) has its range named 训练步骤😀
# and its kernel cafe + U+0301 (SQL on the store); `shimmer compare` of the
# store with itself shows them in its Figure column, left-aligned and
# padded, with the A, B, Diff and Ratio columns after it.  Every line of
# that table must take the same columns, as Python's unicodedata counts
# them (East Asian Width W or F: two, a combining or format character:
# none), under LC_ALL=C and C.UTF-8 alike (the width is not the locale's).
. "$(dirname "$0")/lib.sh"

export SHIMMER_GPU=all SHIMMER_MALLOC=all
WLH=$O/test/e2e/wl_hostile
need "$SHIM" "$SHIMMERD" "$SHIMMER" "$WLH" "$FAKE_CUPTI"

DB=$T/w.db
CUDA_INJECTION64_PATH=$SHIM NVTX_INJECTION64_PATH=$SHIM \
	"$SHIMMER" run --db "$DB" -- "$WLH" > "$T/run.out" 2> "$T/run.err"
rc=$?
check "shimmer run: the workload exits 0" "exit $rc; $(head -c 300 "$T/run.err")" [ $rc = 0 ]
sq "$DB" "UPDATE strings SET text = '训练步骤😀' WHERE text LIKE 'range%';
	UPDATE strings SET text = 'cafe' || char(769) WHERE text LIKE 'kern%';"

# The rows of compare's table: from its heading line to the blank line.
for loc in C C.UTF-8; do
	LC_ALL=$loc "$SHIMMER" compare "$DB" "$DB" > "$T/cmp.$loc" 2> "$T/cmp.$loc.err"
	rc=$?
	res=$([ $rc = 0 ] || echo "exit status $rc: $(head -c 300 "$T/cmp.$loc.err")"
	python3 - "$T/cmp.$loc" <<'EOF' 2>&1
import sys, unicodedata

def width(s):
    w = 0
    for ch in s:
        if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
            continue
        w += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return w

lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
start = next((i for i, l in enumerate(lines) if l.lstrip().startswith("Figure")), None)
if start is None:
    sys.exit("no table")
rows = []
for l in lines[start:]:
    if not l.strip():
        break
    rows.append(l)
want = ["训练步骤😀", "cafe\u0301"]
for name in want:
    if not any(name in r for r in rows):
        print("no row names %r" % name)
widths = {width(r) for r in rows}
if len(widths) != 1:
    for r in rows:
        if width(r) != width(rows[0]):
            print("%d columns, the heading %d: %r" % (width(r), width(rows[0]), r))
EOF
)
	expect_empty "LC_ALL=$loc: every line of compare's table takes the same columns" "$res"
done
finish
