#!/bin/bash
# CUDA graphs on a real GPU: a training step captured whole in one graph
# (test/gpu/graphs.py) and replayed, recorded by shimmer (every kernel, and
# sampled as by default) and by torch.profiler; prints a short table and
# exits non-zero when a check fails.  Usage: test/gpu/graphs.sh OUTDIR, with
# shimmer built (build/bin/shimmer; run-gpu-tests builds it and calls this).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:-${OUT:-/tmp/shimmer-gpu}}
mkdir -p "$out"
steps=${GRAPH_STEPS:-200}
py=(python3 test/gpu/graphs.py)

rm -f "$out"/graph_*.db*
SHIMMER_GPU=all build/bin/shimmer run --db "$out/graph_all.db" -- "${py[@]}" --steps "$steps" \
	>"$out/graph_all.json" 2>"$out/graph_all.stderr"
echo $? >"$out/graph_all.rc"
"${py[@]}" --steps "$steps" --profile "$out/graph_prof.json" >/dev/null 2>"$out/graph_prof.stderr"
SHIMMER_GPU=all build/bin/shimmer run --db "$out/graph_eager.db" -- "${py[@]}" --steps "$steps" \
	--eager >/dev/null 2>"$out/graph_eager.stderr"
# sampled (the default mode), windows of 20 ms every 200 ms over ~3 s of
# replays: CUPTI is detached between windows until the first graph launch,
# then attached for good with the kinds turned off between windows (the
# graph launched last in each left out); the graph was instantiated before
# any window
SHIMMER_GPU_WINDOW_MS=20 SHIMMER_GPU_PERIOD_MS=200 build/bin/shimmer run \
	--db "$out/graph_sampled.db" -- "${py[@]}" --steps "${GRAPH_SAMPLED_STEPS:-8000}" \
	>"$out/graph_sampled.json" 2>"$out/graph_sampled.stderr"
# the same after a pause of 1.5 s between the capture and the first replay
SHIMMER_GPU_WINDOW_MS=20 SHIMMER_GPU_PERIOD_MS=200 build/bin/shimmer run \
	--db "$out/graph_pause.db" -- "${py[@]}" --steps "${GRAPH_SAMPLED_STEPS:-8000}" --pause 1.5 \
	>"$out/graph_pause.json" 2>"$out/graph_pause.stderr"
echo $? >"$out/graph_pause.rc"
# every kernel recorded, the recording paused every 200 replays and resumed
# 200 later (shimmer_pause, shimmer_resume): 7 pauses
SHIMMER_GPU=all build/bin/shimmer run --db "$out/graph_toggle.db" -- "${py[@]}" --steps 3000 \
	--toggle 200 >"$out/graph_toggle.json" 2>"$out/graph_toggle.stderr"
# JAX: XLA's command buffers are CUDA graphs launched through the driver
# (cuGraphLaunch) only, after seconds of compiling
if python3 -c 'import jax' 2>/dev/null; then
	jx=(python3 test/gpu/jaxgraph.py --steps 3000)
	export XLA_PYTHON_CLIENT_PREALLOCATE=false
	SHIMMER_GPU=all build/bin/shimmer run --db "$out/graph_jax_all.db" -- "${jx[@]}" \
		>"$out/graph_jax_all.json" 2>"$out/graph_jax_all.stderr"
	SHIMMER_GPU_WINDOW_MS=20 SHIMMER_GPU_PERIOD_MS=200 build/bin/shimmer run \
		--db "$out/graph_jax.db" -- "${jx[@]}" >"$out/graph_jax.json" 2>"$out/graph_jax.stderr"
	echo $? >"$out/graph_jax.rc"
fi
build/bin/shimmer bottlenecks "$out/graph_all.db" --format json >"$out/graph_bneck.json" \
	2>"$out/graph_bneck.stderr"
build/bin/shimmer summary "$out/graph_all.db" >"$out/graph_summary.txt" 2>&1
build/bin/shimmer summary "$out/graph_sampled.db" --format json >"$out/graph_sampled_summary.json" \
	2>>"$out/graph_sampled.stderr"

python3 - "$out" "$steps" <<'PY'
import json, sqlite3, sys
out, steps = sys.argv[1], int(sys.argv[2])
sys.path.insert(0, "test/gpu")
from gpurows import failed, last_json, load
from gpurows import row as row44


def row(check, ours, oracle, good):
    row44(check, ours, oracle, good, width=52)


def graph_rows(path):
    db = sqlite3.connect(path)
    launches = dict(db.execute(
        "SELECT a.correlation, a.proc_id FROM gpu_api a JOIN strings s ON s.proc_id = a.proc_id"
        " AND s.id = a.name_id WHERE s.text LIKE 'cudaGraphLaunch%' OR s.text LIKE 'cuGraphLaunch%'"))
    per = {}
    orphans = 0
    names = {}
    ns = 0
    for corr, name, dur in db.execute(
            "SELECT k.correlation, k.name, k.dur_ns FROM kernels_named k WHERE k.graph_id IS NOT NULL"):
        if corr not in launches:
            orphans += 1
        per[corr] = per.get(corr, 0) + 1
        r = names.setdefault(name, [0, 0])
        r[0] += 1
        r[1] += dur
        ns += dur
    return db, launches, per, orphans, names, ns

print(f"{'check':<52} {'shimmer':>12} {'oracle':>12}")
rc = int(open(f"{out}/graph_all.rc").read().strip() or 1)
row("graphs: the replay loop ran under shimmer", rc, 0, rc == 0)
prof = load(f"{out}/graph_prof.json")
db, launches, per, orphans, names, ns = graph_rows(f"{out}/graph_all.db")
row("graphs: cudaGraphLaunch calls recorded = replays", len(launches), steps, len(launches) == steps)
row("graphs: kernels not joined to a graph launch", orphans, 0, orphans == 0)
sizes = sorted(set(per.values()))
row("graphs: every launch ran the same kernels (per launch)", ",".join(map(str, sizes)) or "-",
    "one size", len(sizes) == 1)
tk = sum(v[0] for v in prof.values())
ok = {n: v[0] for n, v in names.items()} == {n: v[0] for n, v in prof.items()}
row("graphs: graph kernels by name = torch.profiler's", sum(v[0] for v in names.values()), tk,
    ok and tk > 0)
if not ok:
    for n in sorted(set(names) | set(prof)):
        a, b = names.get(n, [0])[0], prof.get(n, [0])[0]
        if a != b:
            print(f"   {a:>8} {b:>8}  {n[:90]}")
tt = sum(v[1] for v in prof.values())
dev = abs(ns - tt) / tt if tt else 1
row("graphs: graph kernels' GPU time within 5% of torch.profiler's",
    f"{ns / 1e6:.2f} ms", f"{tt / 1e6:.2f} ms", dev <= 0.05)
eager = sqlite3.connect(f"{out}/graph_eager.db")
ek = eager.execute("SELECT count(*) FROM kernels_named k WHERE EXISTS (SELECT 1 FROM ranges_named r"
                   " WHERE r.name = 'step' AND r.proc_id = k.proc_id AND k.launch_ns BETWEEN"
                   " r.start_ns AND r.end_ns)").fetchone()[0]
print(f"   kernels a step: {sizes[0] if sizes else '-'} replayed from the graph, {ek / steps:.1f}"
      " launched eagerly")
# the findings and the summary
bn = load(f"{out}/graph_bneck.json")
kinds = [f["kind"] for f in bn.get("findings", [])]
row("graphs: bottlenecks: not launch-bound", ",".join(kinds) or "none", "no launch_bound",
    bool(bn) and "launch_bound" not in kinds)
text = open(f"{out}/graph_summary.txt").read()
row("graphs: summary names the graphs' kernels", "launched by CUDA graphs" in text, True,
    "launched by CUDA graphs" in text)
# sampled
sdb, slaunch, sper, sorph, snames, sns = graph_rows(f"{out}/graph_sampled.db")
sj = last_json(f"{out}/graph_sampled.json")
sampled_steps = sj.get("steps", 0)
row("graphs sampled: the replays ran to the end (no crash)", sampled_steps,
    "steps", sampled_steps > 0)
pj = last_json(f"{out}/graph_pause.json")
prc = open(f"{out}/graph_pause.rc").read().strip()
row("graphs sampled, 1.5 s before the first replay: ran to the end", f"rc {prc}", "rc 0",
    prc == "0" and pj.get("steps", 0) > 0)
row("graphs sampled: kernels not joined to a graph launch", sorph, 0, sorph == 0)
ssizes = sorted(set(sper.values()))
row("graphs sampled: each recorded launch ran them all", ",".join(map(str, ssizes)) or "-",
    sizes[0] if sizes else "-", bool(sizes) and ssizes == sizes)
am = ns / max(1, sum(names[n][0] for n in names))
smax = sdb.execute("SELECT max(dur_ns) FROM kernels_named WHERE graph_id IS NOT NULL").fetchone()[0] or 0
smean = sns / max(1, sum(v[0] for v in snames.values()))
row("graphs sampled: mean kernel time within 10% of the whole run's", f"{smean / 1e3:.2f} us",
    f"{am / 1e3:.2f} us", abs(smean - am) <= 0.10 * am)
amax = db.execute("SELECT max(dur_ns) FROM kernels_named WHERE graph_id IS NOT NULL").fetchone()[0] or 0
row("graphs sampled: longest kernel (no false ends)", f"{smax / 1e3:.1f} us",
    f"<= 2x {amax / 1e3:.1f} us", smax <= 2 * amax)
# graphs launched through the runtime: sampled on, no window held open
sw, sh = sdb.execute("SELECT count(*), coalesce(sum(whole), 0) FROM gpu_windows"
                     " WHERE end_ns > start_ns").fetchone()
row("graphs sampled: windows held open (still sampled)", f"{sh} of {sw}", "0 of >= 10",
    sh == 0 and sw >= 10)
tdb = sqlite3.connect(f"{out}/graph_toggle.db")
tmax = tdb.execute("SELECT max(dur_ns) FROM kernels_named WHERE graph_id IS NOT NULL").fetchone()[0] or 0
pauses = tdb.execute("SELECT count(*) FROM markers m JOIN strings s ON s.proc_id = m.proc_id"
                     " AND s.id = m.name_id WHERE s.text = 'shimmer.pause'").fetchone()[0]
lost = tdb.execute("SELECT coalesce(sum(events), 0) FROM drops WHERE reason = 'cupti'").fetchone()[0]
row("graphs paused: longest kernel stored (no false ends)", f"{tmax / 1e3:.1f} us",
    f"<= 2x {amax / 1e3:.1f} us", 0 < tmax <= 2 * amax)
per = sizes[0] if sizes else 0
# whole graph launches, one a pause at most (none where the last graph had
# ended before the pause: the replay loop keeps the GPU busy, so each had)
row("graphs paused: kernels counted lost = last graph a pause", lost, f"{pauses} x {per}",
    pauses == 7 and per > 0 and 0 < lost <= pauses * per and lost % per == 0)
summ = load(f"{out}/graph_sampled_summary.json")
est = None
for p in summ.get("processes", []):
    g = p.get("gpu") or {}
    if g.get("graph_kernels") is not None:
        est = g["graph_kernels"]
truth = sampled_steps * (sizes[0] if sizes else 0)
good = est is not None and truth and abs(est - truth) <= 0.25 * truth
row("graphs sampled: graph kernels estimated within 25%", f"~{est:.0f}" if est else "-", truth, good)
import os
if os.path.exists(f"{out}/graph_jax.rc"):
    jall = sqlite3.connect(f"{out}/graph_jax_all.db")
    jk, jg, jmax = jall.execute("SELECT count(*), count(graph_id), max(CASE WHEN graph_id IS NOT NULL"
                                " THEN dur_ns END) FROM kernels_named").fetchone()
    jdb = sqlite3.connect(f"{out}/graph_jax.db")
    jrc = open(f"{out}/graph_jax.rc").read().strip()
    sk, sg, smx = jdb.execute("SELECT count(*), count(graph_id), max(CASE WHEN graph_id IS NOT NULL"
                              " THEN dur_ns END) FROM kernels_named").fetchone()
    jscale = jdb.execute("SELECT scale FROM gpu_sampling").fetchone()
    row("jax (cuGraphLaunch only): whole run's kernels from graphs", f"{jg} of {jk}", "> 0", jg > 0)
    row("jax sampled: ran to the end", f"rc {jrc}", "rc 0", jrc == "0")
    row("jax sampled: longest graph kernel (no false ends)", f"{(smx or 0) / 1e3:.1f} us",
        f"<= 2x {(jmax or 0) / 1e3:.1f} us", 0 < (smx or 0) <= 2 * (jmax or 0))
    jh = jdb.execute("SELECT coalesce(sum(whole), 0) FROM gpu_windows").fetchone()[0]
    row("jax sampled: a window held open (driver-only graphs)", jh, 1, jh == 1)
    est = sk * (jscale[0] or 0) if jscale else 0
    row("jax sampled: kernels estimated within 25% of the whole run's", f"~{est:.0f}", jk,
        jk > 0 and abs(est - jk) <= 0.25 * jk)
else:
    print("jax: not installed, not checked")
print("graphs: " + ("ALL PASS" if not failed else "FAILED: " + "; ".join(failed)))
sys.exit(1 if failed else 0)
PY
