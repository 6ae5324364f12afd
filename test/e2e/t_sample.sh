#!/bin/bash
# Sample mode: the counters stay exact (every call, every byte) while only a
# byte-proportional sample of allocations becomes rows.  One worker thread
# makes N malloc(SIZE)+free pairs; with SHIMMER_SAMPLE_BYTES=S each block is
# sampled with probability about SIZE/S, so about N*SIZE/S rows (~303 here,
# standard deviation ~17): the bounds below are about 6 standard deviations.
. "$(dirname "$0")/lib.sh"
need "$SHIM" "$SHIMMERD" "$WL"

N=20000 SIZE=1000 S=65536
DB=$T/store.db
WLOG=$T/wl.log
start_collector "$DB" || { not_ok "collector starts"; finish; }
SHIMMER_MALLOC=sample SHIMMER_SAMPLE_BYTES=$S traced "$WL" sample $N $SIZE
rc=$?
check "workload exits 0" "exit status $rc" [ $rc = 0 ]
check "collector exits 0 on SIGTERM" "see collector log" stop_collector
load_log "$WLOG" "$T/check.db" "$DB"
TID=$(q "SELECT tid FROM main.T WHERE worker")
PROC="(SELECT proc_id FROM s.processes WHERE pid IN $PIDS)"

got=$(q "SELECT malloc_mode, sample_bytes FROM s.processes WHERE proc_id IN $PROC")
check "process is in sample mode" "got '$got'" [ "$got" = "sample|$S" ]
fc() {
	q "SELECT c.count, c.bytes FROM s.function_counts c JOIN s.functions f USING (fn_id)
		WHERE c.proc_id IN $PROC AND c.tid = $TID AND f.name = '$1'"
}
got=$(fc malloc)
check "function_counts exact: $N mallocs, $((N * SIZE)) bytes" "got '$got'" \
	[ "$got" = "$N|$((N * SIZE))" ]
got=$(fc free)
check "function_counts exact: $N frees" "got '$got'" [ "${got%%|*}" = "$N" ]
rows=$(q "SELECT count(*) FROM s.allocations WHERE proc_id IN $PROC AND alloc_tid = $TID")
check "sampled rows plausible for SHIMMER_SAMPLE_BYTES (200..420)" "got $rows rows" \
	[ "$rows" -ge 200 -a "$rows" -le 420 ]
bad=$(q "SELECT count(*) FROM s.allocations WHERE proc_id IN $PROC AND alloc_tid = $TID
	AND (sampled <> 1 OR size <> $SIZE OR space <> 'host')")
check "sampled rows are flagged, of the right size" "$bad rows are not" [ "$bad" = 0 ]
est=$(q "SELECT CAST(sum(weight) AS INTEGER) FROM s.allocations WHERE proc_id IN $PROC
	AND alloc_tid = $TID")
check "sum(weight) estimates the bytes allocated (+-40%)" "estimate ${est:-none} for $((N * SIZE))" \
	[ "${est:-0}" -ge $((N * SIZE * 6 / 10)) -a "${est:-0}" -le $((N * SIZE * 14 / 10)) ]
unfreed=$(q "SELECT count(*) FROM s.allocations a JOIN s.functions f ON f.fn_id = a.free_fn
	WHERE a.proc_id IN $PROC AND a.alloc_tid = $TID AND f.name = 'free' AND a.free_tid = $TID")
check "the frees of sampled blocks are recorded" "$unfreed of $rows rows freed" [ "$unfreed" = "$rows" ]

# temporary and allocations estimate the pairs: N blocks of SIZE bytes, all
# freed at once, on one line of wl.c, within 5 standard deviations of the
# sampling (see below: 29% here)
"$SHIMMER" temporary "$DB" --format json > "$T/pairs.temp.json" 2> /dev/null
"$SHIMMER" allocations "$DB" --format json > "$T/pairs.alloc.json" 2> /dev/null
got=$(python3 - "$T/pairs" $N $SIZE $S <<'PY' 2>&1
import json, math, sys
base, n, size, s = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
p = 1 - math.exp(-size / s)
k = 5 * math.sqrt((1 - p) / (n * p))
bad = []
for c, keys in (("temp", ("count", "bytes")), ("alloc", ("count", "bytes"))):
    rows = [r for r in json.load(open("%s.%s.json" % (base, c)))["processes"][0]["sites"]
            if "wl.c:" in r["frame"] and r["memory"] == "host"]
    if len(rows) != 1 or not rows[0]["estimated"]:
        bad.append("%s: the site's rows %r" % (c, rows))
        continue
    for key, truth in zip(keys, (n, n * size)):
        if not truth * (1 - k) <= rows[0][key] <= truth * (1 + k):
            bad.append("%s %s: %s, exact %d (bound +-%.0f%%)" % (c, key, rows[0][key], truth, 100 * k))
    if c == "alloc" and rows[0]["live_count"] != 0:
        bad.append("alloc live_count %r, all were freed" % rows[0]["live_count"])
print("\n".join(bad))
PY
)
expect_empty "pairs: temporary's and allocations' estimates within 5 standard deviations of the exact count and bytes" "$got"

# The commands' estimates against the exact figures: wl burst makes NB
# blocks of SB bytes, never freed, on one line of wl.c; each is sampled
# with probability p = 1 - exp(-SB/SS) and weighs SB/p, so the estimated
# bytes have a relative standard deviation of sqrt((1 - p) / (NB p)), 2.9%
# here: every command's estimate of that site's count and bytes, at the
# end and at the peak, must lie within 5 of them (14%) of NB and NB x SB.
# The process's other blocks (the C library's) are few and small.
NB=100000 SB=200 SS=16384
start_collector "$T/burst.db" || { not_ok "collector starts"; finish; }
SHIMMER_MALLOC=sample SHIMMER_SAMPLE_BYTES=$SS WL_LOG=/dev/null LD_PRELOAD=$SHIM \
	SHIMMER_SOCKET=$SOCK "$WL" burst $NB $SB
check "burst: exits 0" "exit status $?" [ $? = 0 ]
check "burst: collector exits 0 on SIGTERM" "see collector log" stop_collector
for c in leaks peak allocations summary temporary; do
	for f in json table; do
		"$SHIMMER" $c "$T/burst.db" --format $f > "$T/burst.$c.$f" 2> /dev/null
	done
done
"$SHIMMER" allocations "$T/burst.db" --histogram size --format json > "$T/burst.hist.json"
got=$(python3 - "$T/burst" $NB $SB $SS <<'PY'
import json, math, re, sys
base, n, size, s = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
p = 1 - math.exp(-size / s)
k = 5 * math.sqrt((1 - p) / (n * p))
bad = []
def near(what, v, truth, est=True, slack=0):
    if not truth * (1 - k) <= v <= truth * (1 + k) + slack:
        bad.append("%s: %s, exact %d (bound +-%.0f%%)" % (what, v, truth, 100 * k))
def site(rows):
    return [r for r in rows if "wl.c:" in r["frame"] and r.get("memory", "host") == "host"]
load = lambda c: json.load(open("%s.%s.json" % (base, c)))["processes"][0]
for c, count, bytes_ in (("leaks", "count", "bytes"), ("allocations", "count", "bytes"),
                         ("allocations", "live_count", "live_bytes")):
    r = site(load(c)["sites"])
    if len(r) != 1 or not r[0]["estimated"]:
        bad.append("%s: the site's rows %r" % (c, r))
        continue
    near("%s %s" % (c, count), r[0][count], n)
    near("%s %s" % (c, bytes_), r[0][bytes_], n * size)
pk = next(m for m in load("peak")["peaks"] if m["memory"] == "host")
near("peak peak_bytes", pk["peak_bytes"], n * size, slack=4 * s)
r = site(pk["sites"])
if len(r) == 1:
    near("peak site count", r[0]["count"], n)
    near("peak site bytes", r[0]["bytes"], n * size)
else:
    bad.append("peak: the site's rows %r" % r)
sm = next(m for m in load("summary")["peaks"] if m["memory"] == "host")
near("summary peak_bytes", sm["peak_bytes"], n * size, slack=4 * s)
near("summary live_end_bytes", sm["live_end_bytes"], n * size, slack=4 * s)
if not sm["estimated"] or not pk["estimated"]:
    bad.append("summary or peak: host not marked estimated")
hm = next(m for m in load("hist")["memories"] if m["memory"] == "host")
b = next(b for b in hm["buckets"] if b["lo_bytes"] <= size <= b["hi_bytes"])
near("histogram bucket count", b["count"], n)
near("histogram bucket bytes", b["bytes"], n * size)
# the tables mark every estimate ~, the counts too
for c, nest in (("leaks", 2), ("peak", 2), ("allocations", 4)):
    line = next((l for l in open("%s.%s.table" % (base, c)) if "wl.c:" in l), "")
    cells = re.findall(r"~?[0-9][0-9.]*(?: [KMGT]?i?B)?", line.split("heap_loop")[0])[:nest]
    if len(cells) < nest or not all(x.startswith("~") for x in cells):
        bad.append("%s table: an estimate without ~: %r" % (c, line.strip()))
print("\n".join(bad))
PY
2>&1)
expect_empty "burst: every command's estimate within 5 standard deviations of the exact count and bytes, marked ~" "$got"
finish
