#!/bin/bash
# t_truth: the figures of time that the commands print, against the
# traced program's own clocks.  wl_clock (wl_clock.c) logs CLOCK_MONOTONIC
# (the clock of the store's instants) around everything it does, and its
# threads' and its process's CPU clocks:
#
#  - wall time (summary, table and JSON): at least main's own span, at
#    most the span this script measured around the program;
#  - the peak of each memory (summary and peak, table, CSV and JSON):
#    exactly the planted bytes on cuda:0 (host: the planted bytes and the
#    C library's few), its instant inside the logged window of the
#    allocation that made it, the bytes live at the end;
#  - live memory over time (export's chrome counters, the report's memory
#    chart): at every point, between two logged operations, the bytes
#    planted then; the peak among the points.  For a host heap aggregated
#    by the collector (SHIMMER_MALLOC=all's default) the timeline has the
#    resolution of the store's heap_timeline buckets (docs/usage.md), so a
#    point may show a value of its bucket's span;
#  - export csv: each planted block's alloc row, its bytes, when it was
#    made and freed;
#  - the report's headline: wall time, step time, peak device and host memory;
#  - the steps (summary's range statistics in table, CSV and JSON, the
#    report's step chart): each step's duration between the inner and the
#    outer readings around its push and pop;
#  - a CUDA function's time statistics (summary, table, CSV and JSON) and
#    the CPU time blocked in synchronizing calls: every call of the fake
#    runtime lasts at least FAKE_CUDA_DELAY_NS, and at most its logged call;
#  - CPU time (cpu_time, which bottlenecks reads): the spinning thread's
#    last reading is its CPU clock when it stopped spinning (it sleeps
#    after, and is read after), the threads' sum at most the process's
#    CPU clock at its end.
#
# Each run: exact mode with the host heap aggregated (the default), and
# with every heap event a row (SHIMMER_HEAP_ROWS=all).
. "$(dirname "$0")/lib.sh"

WL_CLOCK=$O/test/e2e/wl_clock
need "$SHIM" "$SHIMMERD" "$SHIMMER" "$WL_CLOCK"
DELAY=2000000 # ns: every call of the fake CUDA runtime lasts at least this
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

# record NAME [VAR=VALUE...]: wl_clock under the shim into $T/NAME.db, its
# log $T/NAME.log, the span measured around it $T/NAME.outer (ns).
record() {
	local name=$1 rc t0 t1
	shift
	rm -f "$T/$name.db" "$T/$name.log"
	start_collector "$T/$name.db" || { not_ok "$name: collector"; return 1; }
	t0=$(date +%s%N)
	env SHIMMER_MALLOC=all FAKE_CUDA_DELAY_NS=$DELAY "$@" LD_PRELOAD="$SHIM" SHIMMER_SOCKET="$SOCK" \
		WL_LOG="$T/$name.log" "$WL_CLOCK" > /dev/null 2> "$T/$name.err"
	rc=$?
	t1=$(date +%s%N)
	echo $((t1 - t0)) > "$T/$name.outer"
	stop_collector || not_ok "$name: collector exit status"
	check "$name: wl_clock runs traced" "exit $rc: $(head -c 300 "$T/$name.err")" [ $rc = 0 ]
}

# outputs NAME: every command's output the checks read, into $T/NAME.*
outputs() {
	local n=$1 db=$T/$1.db
	"$SHIMMER" summary "$db" --format json > "$T/$n.sum.json" 2> /dev/null
	"$SHIMMER" summary "$db" --format csv > "$T/$n.sum.csv" 2> /dev/null
	"$SHIMMER" summary "$db" > "$T/$n.sum.txt" 2> /dev/null
	"$SHIMMER" peak "$db" --format json > "$T/$n.peak.json" 2> /dev/null
	"$SHIMMER" peak "$db" --format csv > "$T/$n.peak.csv" 2> /dev/null
	"$SHIMMER" peak "$db" > "$T/$n.peak.txt" 2> /dev/null
	"$SHIMMER" export "$db" --format chrome -o "$T/$n.trace.json" 2> /dev/null
	"$SHIMMER" export "$db" --format csv -o "$T/$n.export.csv" 2> /dev/null
	"$SHIMMER" report "$db" -o "$T/$n.html" > /dev/null 2>&1
}

# truth NAME: the checks, one line each: "ok<TAB>CASE" or "bad<TAB>CASE<TAB>WHY".
truth() {
	"$PY" - "$T/$1" <<'PY'
import csv, html, json, re, sqlite3, sys

base = sys.argv[1]
TOL = 500000        # ns: the workload's clock readings against the shim's
NOISE = 256 << 10   # bytes: the C library's own host blocks (dl-tls, ...)
out = []

def case(name, why):
    out.append("ok\t%s" % name if not why else "bad\t%s\t%s" % (name, why))

log = [l.rstrip("\n").split(",") for l in open(base + ".log")]
W = int(next(f[2] for f in log if f[0] == "W"))
E = next(f for f in log if f[0] == "E")
E_t, E_cpu = int(E[2]), int(E[3])
U = next(f for f in log if f[0] == "U")
U_tid, U_cpu = int(U[2]), int(U[3])
ops = {"host": [], "device": []}
for f in log:
    if f[0] == "M":
        ops[f[2]].append((int(f[4]), int(f[5]), int(f[6])))
steps = [tuple(int(x) for x in f[3:7]) for f in log if f[0] == "S"]
outer = int(open(base + ".outer").read())
db = sqlite3.connect(base + ".db")
start, end = db.execute("SELECT start_ns, end_ns FROM processes").fetchone()
pid = db.execute("SELECT pid FROM processes").fetchone()[0]
agg = db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'heap_totals'").fetchone()[0] \
    and db.execute("SELECT count(*) FROM heap_totals").fetchone()[0] > 0
# the aggregated timeline's widest bucket (0: the host heap is rows)
width = db.execute("SELECT coalesce(max(end_ns - start_ns), 0) FROM heap_timeline").fetchone()[0] \
    if agg else 0

UNITS = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9, "B": 1, "KiB": 1024, "MiB": 1 << 20,
         "GiB": 1 << 30}
def parse(text):
    m = re.fullmatch(r"~?([0-9.]+) ?([a-zA-Z]+)", text.strip())
    return float(m.group(1)) * UNITS[m.group(2)]

def same_shown(shown, exact):
    """A figure shown in 3 or 4 significant digits is the exact one."""
    v = parse(shown)
    return abs(v - exact) <= max(0.006 * exact, 1)

# --- wall time -------------------------------------------------------------
sj = json.load(open(base + ".sum.json"))["processes"][0]
wall = sj["wall_ns"]
case("wall: at least main's own span (%d ns), at most the span around it (%d ns); got %d ns"
     % (E_t - W, outer, wall),
     "" if E_t - W <= wall <= outer else "out of bounds")
txt = open(base + ".sum.txt").read()
m = re.search(r"wall: (\S+ \S+)", txt)
case("wall: the table shows JSON's wall_ns (%s)" % (m and m.group(1)),
     "" if m and same_shown(m.group(1), wall) else "table %r, json %d" % (m and m.group(1), wall))

# --- the peaks ---------------------------------------------------------------
def truth_at(space, t):
    """The planted live bytes of space at t: the value after the last
    operation over by then, and the values around each operation whose
    window holds t."""
    v, vals = 0, set()
    for t0, t1, live in ops[space]:
        if t < t0 - TOL:
            break
        if t <= t1 + TOL:
            vals |= {v, live}
        v = live
    return vals | {v}

mem_space = {"host": "host", "cuda:0": "device"}
planted_peak = {s: max(l for _, _, l in ops[s]) for s in ops}
peak_op = {s: next(o for o in ops[s] if o[2] == planted_peak[s]) for s in ops}
planted_end = {s: ops[s][-1][2] for s in ops}

def check_peak(where, mem, bytes_, at_ns, end_bytes=None):
    s = mem_space[mem]
    noise = NOISE if s == "host" else 0
    t0, t1, _ = peak_op[s]
    why = []
    if not planted_peak[s] <= bytes_ <= planted_peak[s] + noise:
        why.append("bytes %d, planted %d" % (bytes_, planted_peak[s]))
    if not t0 - TOL <= start + at_ns <= t1 + TOL:
        why.append("at %d ns after the start, the allocation made in [%d, %d]"
                   % (at_ns, t0 - start, t1 - start))
    if end_bytes is not None and not planted_end[s] <= end_bytes <= planted_end[s] + noise:
        why.append("live at the end %d, planted %d" % (end_bytes, planted_end[s]))
    case("%s: %s peak %d bytes at %d ns (planted %d, made in [%d, %d])"
         % (where, mem, bytes_, at_ns, planted_peak[s], t0 - start, t1 - start), "; ".join(why))

for k in sj["peaks"]:
    check_peak("summary json", k["memory"], k["peak_bytes"], k["at_ns"], k["live_end_bytes"])
    row = re.search(r"^  %s +(\S+ \S+) +(\S+ \S+) +(\S+ \S+)" % re.escape(k["memory"]), txt, re.M)
    case("summary table: %s's Peak, At and Live at end are JSON's" % k["memory"],
         "" if row and same_shown(row.group(1), k["peak_bytes"]) and
         same_shown(row.group(2), k["at_ns"]) and same_shown(row.group(3), k["live_end_bytes"])
         else "row %r" % (row and row.group(0)))
for p in json.load(open(base + ".peak.json"))["processes"]:
    for k in p["peaks"]:
        check_peak("peak json", k["memory"], k["peak_bytes"], k["peak_at_ns"])
seen = set()
for r in csv.DictReader(open(base + ".peak.csv")):
    if r["memory"] not in seen:
        seen.add(r["memory"])
        check_peak("peak csv", r["memory"], int(r["peak_bytes"]), int(r["peak_at_ns"]))
case("peak and summary: both memories", "" if len(seen) == 2 and len(sj["peaks"]) == 2
     else "peak csv %s, summary %d" % (sorted(seen), len(sj["peaks"])))

# --- live memory over time ----------------------------------------------------
def check_series(where, mem, points, rel=0.0):
    """points: (ns since the start, bytes); each one a planted value at its
    instant (host: within its bucket's span when aggregated)."""
    s = mem_space[mem]
    noise = NOISE if s == "host" else 0
    w = width if s == "host" else 0
    bad = []
    for t, v in points:
        t += start
        ok = set()
        for u in range(int(t - w), int(t + w) + 1, max(1, w // 64) if w else 1):
            ok |= truth_at(s, u)
        ok |= truth_at(s, t + w)
        if not any(x - rel * x - 1 <= v <= x + noise + rel * x + 1 for x in ok):
            bad.append("%.3f ms: %d (planted %s)" % ((t - start) / 1e6, v, sorted(ok)))
    top = max(v for _, v in points) if points else -1
    if not planted_peak[s] * (1 - rel) - 1 <= top <= (planted_peak[s] + noise) * (1 + rel) + 1:
        bad.append("highest point %d, planted peak %d" % (top, planted_peak[s]))
    # the peak first shown at its instant, even where buckets are coarse
    first = min((t for t, v in points if v == top), default=None)
    if first is None or not peak_op[s][0] - TOL <= start + first <= peak_op[s][1] + TOL:
        bad.append("the peak first at %s ms, made in [%.3f, %.3f] ms" % (
            first is not None and "%.3f" % (first / 1e6), (peak_op[s][0] - start) / 1e6,
            (peak_op[s][1] - start) / 1e6))
    case("%s: %s, %d points, each the planted live bytes of its instant, the peak among them,"
         " first at its instant" % (where, mem, len(points)), "; ".join(bad[:4]))

trace = json.load(open(base + ".trace.json"))["traceEvents"]
origin = db.execute("SELECT min(start_ns) FROM processes").fetchone()[0]
for mem in ("host", "cuda:0"):
    pts = [(round(e["ts"] * 1000) + origin - start, e["args"]["bytes"]) for e in trace
           if e["ph"] == "C" and e["pid"] == pid and e["name"] == "memory " + mem]
    check_series("export chrome", mem, pts)
# export csv: each planted block a row of its bytes, made and freed inside
# the logged operations (an aggregated host heap keeps rows only for the
# blocks never freed or that lived past a second: D alone here)
rows = [r for r in csv.DictReader(open(base + ".export.csv")) if r["kind"] == "alloc" and
        int(r["pid"]) == pid]
for space, dev in (("host", "-1"), ("device", "0")):
    prev, blocks = 0, []
    for t0, t1, live in ops[space]:
        if live > prev:
            blocks.append([live - prev, t0, t1, None])
        else:
            b = next(b for b in blocks if b[0] == prev - live and b[3] is None)
            b[3] = (t0, t1)
        prev = live
    bad = []
    for size, t0, t1, freed in blocks:
        if space == "host" and agg and freed:
            continue
        got = [r for r in rows if r["device"] == dev and int(r["bytes"]) == size]
        ok = len(got) == 1 and t0 - TOL <= int(got[0]["begin_ns"]) + origin <= t1 + TOL and (
            got[0]["end_ns"] == "" if freed is None else
            got[0]["end_ns"] != "" and freed[0] - TOL <= int(got[0]["end_ns"]) + origin <= freed[1] + TOL)
        if not ok:
            bad.append("%d bytes made in [%d, %d], freed %s: rows %r" % (
                size, t0 - origin, t1 - origin, freed and [x - origin for x in freed], got))
    case("export csv: %s: each planted block one alloc row, its bytes, made and freed when logged"
         % space, "; ".join(bad))
page = open(base + ".html").read()
data = json.loads(re.search(r'<script type="application/json" id="shimmer-data">(.*?)</script>',
                            page, re.S).group(1))
for m in data["memory"]:
    mem = m["label"].split()[-1]
    # seconds and bytes in 6 significant digits
    check_series("report memory chart", mem,
                 [(round(t * 1e9) + origin - start, v) for t, v in m["points"]], rel=1e-5)

# --- the report's headline -------------------------------------------------------
cards = dict((html.unescape(l), html.unescape(v)) for v, l in re.findall(
    r'<div class="card"><div class="v">(.*?)</div><div class="l">(.*?)(?:<br>.*?)?</div></div>', page))
lo = sorted(tc - tb for ta, tb, tc, td in steps)
hi = sorted(td - ta for ta, tb, tc, td in steps)
want = {"wall time (longest process)": (E_t - W, outer),
        "step time": (lo[len(lo) // 2] - TOL, hi[len(hi) // 2] + TOL),
        "peak device memory": (planted_peak["device"], planted_peak["device"]),
        "peak host memory": (planted_peak["host"], planted_peak["host"] + NOISE)}
bad = []
for k, (a, b) in want.items():
    v = cards.get(k)
    # shown in 3 or 4 significant digits
    if v is None or not a * 0.994 <= parse(v) <= b * 1.006:
        bad.append("%s: %r, truth in [%d, %d]" % (k, v, a, b))
case("report headline: wall time, step time (median), peak device and host memory as logged",
     "; ".join(bad))

# --- the steps -----------------------------------------------------------------
lo = [tc - tb for ta, tb, tc, td in steps]
hi = [td - ta for ta, tb, tc, td in steps]
def within(v, a, b):
    return a - TOL <= v <= b + TOL
r = next((x for x in sj["gpu"]["ranges"] if x["name"] == "shimmer:step"), None)
if r is None:
    case("summary json: the step range", "no range shimmer:step")
else:
    why = []
    if r["count"] != len(steps) or r["open"] != 0:
        why.append("count %d open %d" % (r["count"], r["open"]))
    for key, a, b in (("total_ns", sum(lo), sum(hi)), ("min_ns", min(lo), min(hi)),
                      ("max_ns", max(lo), max(hi)), ("mean_ns", sum(lo) / len(lo), sum(hi) / len(hi))):
        if not within(r[key], a, b):
            why.append("%s %d not in [%d, %d]" % (key, r[key], a, b))
    case("summary json: steps: count, total, mean, min, max within the logged readings",
         "; ".join(why))
    row = next((x for x in csv.DictReader(open(base + ".sum.csv")) if x["kind"] == "range"), None)
    case("summary csv: the range row is JSON's", "" if row and all(
        float(row[k]) == r[k] for k in ("count", "total_ns", "mean_ns", "min_ns", "max_ns")) and
        abs(float(row["wall_share"]) - r["total_ns"] / wall) < 1e-6 else "csv %r json %r" % (row, r))
    tr = re.search(r"^ +(\d+) +(\d+) +(\S+ \S+) +(\S+ \S+) +(\S+ \S+) +(\S+ \S+) +(\S+ \S+)  shimmer:step$",
                   txt, re.M)
    case("summary table: the range row is JSON's", "" if tr and int(tr.group(1)) == r["count"] and
         all(same_shown(tr.group(i), r[k]) for i, k in ((3, "total_ns"), (4, "mean_ns"),
                                                         (6, "min_ns"), (7, "max_ns")))
         else "row %r" % (tr and tr.group(0)))
chart = next((s["points"] for s in data["steps"]), [])
bad = ["step %d: %d ns, logged in [%d, %d]" % (k, ns, lo[k], hi[k]) for k, ns in chart
       if not within(ns, lo[k], hi[k])]
case("report step chart: %d steps, each as long as logged" % len(chart),
     "; ".join(bad[:3]) if chart and len(chart) == len(steps) else "points %r" % chart)

# --- the synchronizing calls ----------------------------------------------------
DELAY = 2000000
syncs = [(int(f[3]), int(f[4])) for f in log if f[0] == "Y"]
fn = next((x for x in sj["functions"] if x["event"] == "cudaDeviceSynchronize"), None)
span = [t1 - t0 for t0, t1 in syncs]
why = []
if not fn or fn["count"] != len(syncs) or fn["timed"] != len(syncs) or fn["estimated"]:
    why.append("row %r" % fn)
else:
    for key, a, b in (("total_ns", DELAY * len(syncs), sum(span)), ("min_ns", DELAY, min(span)),
                      ("max_ns", DELAY, max(span)), ("mean_ns", DELAY, sum(span) / len(span))):
        if not a <= fn[key] <= b + TOL:
            why.append("%s %d not in [%d, %d]" % (key, fn[key], a, b))
    if abs(fn["wall_share"] - fn["total_ns"] / wall) > 1e-6:
        why.append("wall_share %r" % fn["wall_share"])
case("summary json: cudaDeviceSynchronize: %d calls, each at least the fake's delay, at most"
     " its logged call" % len(syncs), "; ".join(why))
sync = sj["gpu"]["sync"]
case("summary json: CPU blocked in synchronizing calls is cudaDeviceSynchronize's total",
     "" if fn and sync["total_ns"] == fn["total_ns"] and sync["count"] == fn["count"] and
     not sync["estimated"] else "sync %r" % sync)
row = next((x for x in csv.DictReader(open(base + ".sum.csv")) if x["event"] == "cudaDeviceSynchronize"), None)
case("summary csv: cudaDeviceSynchronize's row is JSON's", "" if fn and row and all(
    float(row[k]) == fn[k] for k in ("count", "total_ns", "mean_ns", "min_ns", "max_ns", "timed"))
    else "csv %r" % row)
tr = re.search(r"^  cudaDeviceSynchronize +(\d+) +(\S+ \S+) +(\d+) +(\S+ \S+) +(\S+ \S+) +(\S+ \S+) +(\S+ \S+) +(\S+ \S+)", txt, re.M)
case("summary table: cudaDeviceSynchronize's row is JSON's", "" if fn and tr and
     int(tr.group(1)) == fn["count"] and all(same_shown(tr.group(i), fn[k]) for i, k in
     ((4, "total_ns"), (5, "mean_ns"), (7, "min_ns"), (8, "max_ns"))) else "row %r" % (tr and tr.group(0)))

# --- CPU time --------------------------------------------------------------------
rows = db.execute("SELECT tid, ts_ns, cpu_ns FROM cpu_time ORDER BY tid, ts_ns").fetchall()
last = {}
for tid, ts, cpu in rows:
    last[tid] = (ts, cpu)
spin = last.get(U_tid)
case("cpu_time: the spinning thread's last reading (%s) is its CPU clock after the spin (%d ns)"
     % (spin and spin[1], U_cpu),
     "" if spin and U_cpu - 10000000 <= spin[1] <= U_cpu + 20000000 else "readings %r" % last)
total = sum(c for _, c in last.values())
case("cpu_time: the threads' last readings add up to at most the process's CPU clock at its end"
     " (%d of %d ns)" % (total, E_cpu),
     "" if U_cpu - 10000000 <= total <= E_cpu + 10000000 else "over")
print("\n".join(out))
PY
}

# report_truth NAME: truth's lines as cases.
report_truth() {
	local st name why
	truth "$1" > "$T/$1.truth" 2>&1 || { not_ok "$1: checks ran" "$(tail -5 "$T/$1.truth")"; return; }
	while IFS=$'\t' read -r st name why; do
		if [ "$st" = ok ]; then ok "$1: $name"; else not_ok "$1: $name" "$why"; fi
	done < "$T/$1.truth"
}

record agg
outputs agg
report_truth agg
record rows SHIMMER_HEAP_ROWS=all
outputs rows
report_truth rows
finish
