#!/bin/bash
# t_report: `shimmer report` of a multi-process store (two ranks of a
# data-parallel loop with a planted straggler, a loop whose device memory
# grows, a loop with DataLoader-like workers), against a baseline store
# (--baseline: shimmer compare's rows), rendered in a real browser
# (headless Chromium, test/browser/report.mjs): the page loads with no
# console error and no network request, every section is there, every chart
# has drawn (Chart.js's chart object, data and painted pixels), the flame
# graphs have boxes, the findings and the per-rank table are there; a
# screenshot is written to $O/test/report.png for a person to look at.  And
# the file: self-contained, private, small; a clear error without the
# charting library.
. "$(dirname "$0")/lib.sh"

WL_BNECK=$O/test/e2e/wl_bneck
REPORT_MJS=$ROOT/test/browser/report.mjs
need "$SHIM" "$SHIMMERD" "$SHIMMER" "$WL_BNECK" "$FAKE_CUPTI"

DB=$T/multi.db
start_collector "$DB" || { not_ok "collector"; finish; }
head -c 4096 /dev/zero > "$T/barrier"
pids=()
for r in 0 1; do
	RANK=$r WORLD_SIZE=2 WL_BARRIER=$T/barrier SHIMMER_GPU=all FAKE_GPU_KERNEL_NS=1000000 \
		LD_PRELOAD="$SHIM" SHIMMER_SOCKET="$SOCK" CUDA_INJECTION64_PATH="$SHIM" \
		"$WL_BNECK" rank 30 1 3000 0 > /dev/null 2>> "$T/wl.err" &
	pids+=($!)
done
wait "${pids[@]}" || not_ok "a rank failed" "$(head -5 "$T/wl.err")"
SHIMMER_GPU=all FAKE_GPU_KERNEL_NS=1000000 LD_PRELOAD="$SHIM" SHIMMER_SOCKET="$SOCK" \
	CUDA_INJECTION64_PATH="$SHIM" SHIMMER_MALLOC=all WL_LOG=/dev/null \
	"$WL_BNECK" growth 30 > /dev/null 2>> "$T/wl.err"
SHIMMER_GPU=all FAKE_GPU_KERNEL_NS=1000000 LD_PRELOAD="$SHIM" SHIMMER_SOCKET="$SOCK" \
	CUDA_INJECTION64_PATH="$SHIM" WL_LOG=/dev/null \
	"$WL_BNECK" loading 60 2 > /dev/null 2>> "$T/wl.err"
stop_collector || not_ok "collector exit status"
procs=$(sqlite3 "$DB" "SELECT count(*) FROM processes")
check "the store has every process (2 ranks, growth, loading and 2 workers)" "processes $procs" \
	[ "$procs" = 6 ]

# a baseline: the growth loop alone, in a store of its own
BASE=$T/base.db
start_collector "$BASE" || { not_ok "collector"; finish; }
SHIMMER_GPU=all FAKE_GPU_KERNEL_NS=1000000 LD_PRELOAD="$SHIM" SHIMMER_SOCKET="$SOCK" \
	CUDA_INJECTION64_PATH="$SHIM" SHIMMER_MALLOC=all WL_LOG=/dev/null \
	"$WL_BNECK" clean 20 > /dev/null 2>> "$T/wl.err"
stop_collector || not_ok "collector exit status"

HTML=$T/report.html
"$SHIMMER" report "$DB" --baseline "$BASE" -o "$HTML" > "$T/report.out" 2> "$T/report.err"
rc=$?
check "report: exit 0, says where it wrote" "exit $rc: $(cat "$T/report.out" "$T/report.err")" \
	grep -q "wrote $HTML" "$T/report.out"
size=$(stat -c %s "$HTML" 2>/dev/null || echo 0)
check "report: one file under 10 MB" "$size bytes" [ "$size" -gt 0 -a "$size" -lt 10485760 ]
check "report: private (0600)" "mode $(stat -c %a "$HTML")" [ "$(stat -c %a "$HTML")" = 600 ]
# self-contained: no URL the page would load (links to the licence aside)
refs=$(grep -oE '(src|href)="(https?:)?//[^"]*"' "$HTML" | head -3)
expect_empty "report: no src or href to anything outside the file" "$refs"
check "report: Chart.js inlined, its licence named" "$(grep -c 'Chart.js' "$HTML")" \
	grep -q 'Chart.js v4.6.1' "$HTML"
grep -q 'MIT License' "$HTML" || not_ok "report: licences named in the footer"

if [ -f "$ROOT/test/browser/node_modules/playwright-core/package.json" ] && [ -x /usr/bin/chromium ] &&
	command -v node > /dev/null; then
	mkdir -p "$O/test"
	cp "$HTML" "$O/test/report.html"
	node "$REPORT_MJS" "$HTML" "$O/test/report.png" > "$T/view.json" 2> "$T/view.err"
	check "browser: the page loaded" "$(cat "$T/view.err" "$T/view.json" | head -c 600)" \
		[ -s "$T/view.json" ]
	v() {
		python3 - "$T/view.json" "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(eval(sys.argv[2]))
PY
	}
	vcheck() {
		local got
		got=$(v "$2" 2>&1)
		if [ "$got" = True ]; then ok "$1"; else not_ok "$1" "expected: $2" "view: $(head -c 1500 "$T/view.json")"; fi
	}
	vcheck "browser: no console or page error" 'd["errors"] == []'
	vcheck "browser: no network request" 'd["requests"] == []'
	vcheck "browser: every section" 'd["sections"] == ["headline", "findings", "steps", "kernels", "gpu", "memory", "sizes", "flame-peak", "flame-leaked", "flame-allocated", "ranks", "compare"]'
	for c in steps kernels sites gpu memory sizes; do
		vcheck "browser: chart $c drawn (Chart.js object, data, painted pixels)" \
			"d['charts']['$c']['drawn'] and d['charts']['$c']['points'] > 0 and d['charts']['$c']['painted']"
	done
	vcheck "browser: flame graphs have boxes" \
		'd["flames"].get("flame-peak-svg", 0) > 3 and d["flames"].get("flame-leaked-svg", 0) > 3 and d["flames"].get("flame-allocated-svg", 0) > 3'
	vcheck "browser: findings shown" 'd["findings"] >= 3'
	vcheck "browser: the per-rank table (2 ranks)" 'd["ranks_rows"] == 3'
	check "browser: a screenshot for a person" "$O/test/report.png" [ -s "$O/test/report.png" ]
else
	echo "ok - $SCRIPT: the report in a browser # SKIP no chromium, node or npm packages (.ci/install-deps)"
fi

# the size chart's data: shimmer allocations --histogram size's, bucket for
# bucket, for each memory it shows
"$SHIMMER" allocations "$DB" --histogram size --format csv > "$T/sizes.csv"
why=$(python3 - "$HTML" "$T/sizes.csv" <<'PY'
import csv, html, json, re, sys
page = open(sys.argv[1]).read()
m = re.search(r'<script type="application/json" id="shimmer-data">(.*?)</script>', page, re.S)
sizes = json.loads(m.group(1))["sizes"]
want = {}
for row in csv.DictReader(open(sys.argv[2])):
    if int(row["count"]) > 0:
        want.setdefault((row["pid"], row["memory"]), []).append(int(row["count"]))
assert sizes["sets"], "no memory in the chart"
for s in sizes["sets"]:
    pid, mem = re.match(r"pid (\d+) .* (\S+)$", s["label"]).groups()
    got = [round(c) for c in s["count"] if c > 0]
    assert got == want[(pid, mem)], (s["label"], got, want[(pid, mem)])
    assert len(s["count"]) == len(sizes["labels"]), s["label"]
print(len(sizes["sets"]))
PY
2>&1)
check "report: the size chart's counts are allocations --histogram size's ($why memories)" "$why" \
	holds '[ "$why" -gt 0 ] 2> /dev/null'

# --baseline: shimmer compare's rows, the changed ones marked
"$SHIMMER" compare "$BASE" "$DB" --format csv > "$T/cmp.csv"
nchanged=$(awk -F, 'NR > 1 && $11 == 1' "$T/cmp.csv" | wc -l)
got=$(grep -o '<tr class="changed">' "$HTML" | wc -l)
check "--baseline: the comparison's changed rows ($nchanged in shimmer compare)" "page $got" \
	[ "$nchanged" -gt 0 -a "$got" -gt 0 -a "$got" -le "$nchanged" ]
grep -q "A: the baseline, $BASE" "$HTML" || not_ok "--baseline: the page names the baseline"

# the findings of the page are those of shimmer bottlenecks
"$SHIMMER" bottlenecks "$DB" --format json > "$T/b.json"
n=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["findings"]))' "$T/b.json")
got=$(grep -o 'class="finding"' "$HTML" | wc -l)
check "report: the same findings as shimmer bottlenecks ($n)" "page $got" [ "$got" = "$n" ]

# --pid: one process's report
pid=$(sqlite3 "$DB" "SELECT pid FROM processes WHERE rank IS NULL AND parent_proc_id IS NULL LIMIT 1")
"$SHIMMER" report "$DB" --pid "$pid" -o "$T/one.html" > /dev/null 2>&1
check "--pid: the page names that process only" "$(grep -o 'pid [0-9]*' "$T/one.html" | sort -u | head)" \
	[ "$(grep -o 'pid [0-9]* ' "$T/one.html" | sort -u | wc -l)" = 1 ]

# -o -: the same page on standard output, no file named '-', no "wrote" line
(cd "$T" && "$SHIMMER" report "$DB" --pid "$pid" -o - > "$T/stdout.html" 2> "$T/stdout.err")
rc=$?
check "-o -: the page on standard output, as -o FILE writes it, no file '-'" \
	"exit $rc: $(head -c 300 "$T/stdout.err"); $(head -c 100 "$T/stdout.html")" \
	holds '[ $rc = 0 ] && [ ! -e "$T/-" ] && [ ! -s "$T/stdout.err" ] &&
	       diff <(sed "s/made [0-9: -]* UTC//" "$T/one.html") <(sed "s/made [0-9: -]* UTC//" "$T/stdout.html") > /dev/null'

# -o naming a store (the one read, the baseline, through a symlink, or any
# other SQLite file) is refused untouched: it was truncated and written
# with the page, exit 0, the recording gone.
cp "$BASE" "$T/other.db"
ln -s "$DB" "$T/link.db"
for o in "$DB" "$BASE" "$T/link.db" "$T/other.db"; do
	before=$(md5sum < "$o")
	"$SHIMMER" report "$DB" --baseline "$BASE" -o "$o" > /dev/null 2> "$T/clobber.err"
	rc=$?
	check "report -o $(basename "$o") (a store): refused (2) in one line, the file unchanged" \
		"exit $rc: $(cat "$T/clobber.err")" \
		holds '[ $rc = 2 ] && [ "$(wc -l < "$T/clobber.err")" = 1 ] &&
			[ "$(md5sum < "$o")" = "$before" ]'
done

# without the charting library: one clear line, exit 1 (unless an install
# left one in DATADIR, the second place looked at)
if [ -f /usr/local/share/shimmer/chart.umd.min.js ]; then
	ok "no charting library # SKIP an installed one is in /usr/local/share/shimmer"
else
	mkdir -p "$T/alone/bin"
	cp "$SHIMMER" "$T/alone/bin/shimmer"
	"$T/alone/bin/shimmer" report "$DB" -o "$T/none.html" > /dev/null 2> "$T/none.err"
	rc=$?
	check "no charting library: exit 1 with one line naming the file" "exit $rc: $(cat "$T/none.err")" \
		[ $rc = 1 -a "$(wc -l < "$T/none.err")" = 1 ]
	grep -q "charting library is missing: .*share/shimmer/chart.umd.min.js" "$T/none.err" ||
		not_ok "no charting library: the line names the file" "$(cat "$T/none.err")"
fi
finish
