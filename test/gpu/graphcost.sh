#!/bin/bash
# What GPU sampling costs a process that replays CUDA graphs, and what it
# estimates: a PyTorch step captured whole in one graph (test/gpu/graphs.py)
# and a jitted JAX step (test/gpu/jaxgraph.py, XLA's command buffers),
# each run bare and under shimmer's default mode, alternated REPS times;
# the loop's own wall time (its JSON line) is compared.  Then each is
# sampled with windows 10 times as often (20 ms every 200 ms) and its
# estimate of the kernels is compared with the whole recording's count.
# Prints a short table; exits non-zero when a check fails.  Usage:
# test/gpu/graphcost.sh OUTDIR, with shimmer built.  MODES adds
# configurations: `all` (SHIMMER_GPU=all) or NAME=ENV[,ENV...] words.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:-${OUT:-/tmp/shimmer-gpu}}
mkdir -p "$out"
reps=${REPS:-3}
tsteps=${TORCH_STEPS:-6000}
jsteps=${JAX_STEPS:-30000}
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
have_jax=0
python3 -c 'import jax' 2>/dev/null && have_jax=1

modes=(bare default ${MODES:-})
run_one() { # MODE WORKLOAD REP
	local mode=$1 w=$2 rep=$3 envs=() cmd
	if [ "$w" = torch ]; then
		cmd=(python3 test/gpu/graphs.py --steps "$tsteps")
	else
		cmd=(python3 test/gpu/jaxgraph.py --steps "$jsteps")
	fi
	case $mode in
	bare) "${cmd[@]}" >"$out/cost_${w}_${mode}_$rep.json" 2>"$out/cost_${w}_${mode}_$rep.err"
	      return ;;
	default) ;;
	all) envs=(SHIMMER_GPU=all) ;;
	*=*) IFS=, read -ra envs <<<"${mode#*=}" ;;
	esac
	rm -f "$out/cost.db"*
	env "${envs[@]}" build/bin/shimmer run --db "$out/cost.db" -- "${cmd[@]}" \
		>"$out/cost_${w}_${mode%%=*}_$rep.json" 2>"$out/cost_${w}_${mode%%=*}_$rep.err"
}
works=(torch)
[ $have_jax = 1 ] && works+=(jax)
for rep in $(seq 1 "$reps"); do
	for w in "${works[@]}"; do
		for m in "${modes[@]}"; do
			run_one "$m" "$w" "$rep"
		done
	done
done

# the estimates, windows every 200 ms, against the whole recording
for w in "${works[@]}"; do
	if [ "$w" = torch ]; then
		cmd=(python3 test/gpu/graphs.py --steps 8000)
	else
		cmd=(python3 test/gpu/jaxgraph.py --steps "$jsteps")
	fi
	rm -f "$out/est_${w}_"*.db*
	SHIMMER_GPU=all build/bin/shimmer run --db "$out/est_${w}_all.db" -- "${cmd[@]}" \
		>/dev/null 2>"$out/est_${w}_all.err"
	SHIMMER_GPU_WINDOW_MS=20 SHIMMER_GPU_PERIOD_MS=200 build/bin/shimmer run \
		--db "$out/est_${w}_sampled.db" -- "${cmd[@]}" >"$out/est_${w}_sampled.json" \
		2>"$out/est_${w}_sampled.err"
	echo $? >"$out/est_${w}_sampled.rc"
done

python3 - "$out" "$reps" "${works[*]}" "${modes[*]}" <<'PY'
import json, sqlite3, statistics, sys
sys.path.insert(0, "test/gpu")
from gpurows import failed, last_json
from gpurows import row as row44


def row(check, ours, oracle, good):
    row44(check, ours, oracle, good, width=52)


out, reps, works, modes = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split()
modes = [m.split("=")[0] for m in modes]
print(f"{'loop wall time (s), ' + str(reps) + ' runs alternated':<44} {'runs':>30} {'median':>8} {'vs bare':>8}")
for w in works:
    base = None
    for m in modes:
        ts = [last_json(f"{out}/cost_{w}_{m}_{r}.json").get("loop_s") for r in range(1, reps + 1)]
        ok = [t for t in ts if t]
        med = statistics.median(ok) if ok else None
        if m == "bare":
            base = med
        rel = f"{(med / base - 1) * 100:+.1f}%" if med and base else "-"
        runs = " ".join(f"{t:.3f}" if t else "fail" for t in ts)
        print(f"{w + ': ' + m:<44} {runs:>30} {med or 0:>8.3f} {rel:>8}")
        if len(ok) != len(ts):
            row(f"{w} {m}: every run finished", len(ok), len(ts), False)
for w in works:
    a = sqlite3.connect(f"{out}/est_{w}_all.db")
    s = sqlite3.connect(f"{out}/est_{w}_sampled.db")
    truth = a.execute("SELECT count(*) FROM kernels").fetchone()[0]
    got = s.execute("SELECT count(*) FROM kernels").fetchone()[0]
    scale = s.execute("SELECT scale FROM gpu_sampling").fetchone()
    est = got * (scale[0] or 0) if scale and scale[0] else 0
    rc = open(f"{out}/est_{w}_sampled.rc").read().strip()
    row(f"{w} sampled (20 ms / 200 ms): ran to the end", f"rc {rc}", "rc 0", rc == "0")
    dev = (est - truth) / truth if truth else 1
    row(f"{w} sampled: kernels estimated (within 5%)", f"{est:.0f} ({dev * 100:+.1f}%)", truth,
        abs(dev) <= 0.05)
    amax = a.execute("SELECT max(end_ns - start_ns) FROM kernels WHERE graph_id IS NOT NULL").fetchone()[0] or 0
    smax = s.execute("SELECT max(end_ns - start_ns) FROM kernels WHERE graph_id IS NOT NULL").fetchone()[0] or 0
    row(f"{w} sampled: longest graph kernel (no false ends)", f"{smax / 1e3:.1f} us",
        f"<= 2x {amax / 1e3:.1f} us", 0 < smax <= 2 * amax)
    win = s.execute("SELECT count(*), coalesce(sum(whole), 0), coalesce(sum(end_ns - start_ns), 0)"
                    " FROM gpu_windows WHERE end_ns > start_ns").fetchone()
    lost = s.execute("SELECT coalesce(sum(events), 0) FROM drops").fetchone()[0]
    print(f"   {w}: {win[0]} windows ({win[1]} held), {win[2] / 1e6:.0f} ms traced, {got} kernels"
          f" recorded, {lost} events lost")
sys.exit(1 if failed else 0)
PY
