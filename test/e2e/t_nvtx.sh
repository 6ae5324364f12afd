#!/bin/bash
# t_nvtx: NVTX through its injection hook (NVTX_INJECTION64_PATH): wl_gpu
# nvtx's ranges (nested push/pop, a domain with a registered string and
# attributes, a start/end range ended on another thread) and marker are
# stored exactly as the workload logged them, and kernels_in_ranges puts
# each kernel in the innermost push range open when it was launched.
. "$(dirname "$0")/lib.sh"

# These checks need every kernel: GPU sampling (the default) is
# t_gpu_sample's.
export SHIMMER_GPU=all

need "$SHIM" "$SHIMMERD" "$WL_GPU" "$FAKE_CUPTI"

TOL=500000 # clock comparisons with the workload's own CLOCK_MONOTONIC
DB=$T/nvtx.db
WLOG=$T/nvtx.log
start_collector "$DB" || { not_ok "collector"; finish; }
CUDA_INJECTION64_PATH=$SHIM NVTX_INJECTION64_PATH=$SHIM traced "$WL_GPU" nvtx \
	> "$T/out" 2> "$T/err"
rc=$?
stop_collector || not_ok "collector exit status"
check "workload exits 0" "exit status $rc; stderr: $(head -5 "$T/err")" [ "$rc" = 0 ]
load_log "$WLOG" "$T/check.db" "$DB"
load_gpu_log "$WLOG"

expect_empty "ranges: names, domains, depth, parent, thread" "$(diff_ranges)"

# Each range opened and closed inside the workload's readings around the calls.
expect_empty "ranges: start < end, on the host's clock" "$(q "
SELECT 'range', r.name, r.start_ns, r.end_ns, 'logged', x.t0, x.t1
	FROM s.ranges_named r JOIN s.processes p USING (proc_id)
	JOIN main.R x ON x.pid = p.pid AND x.name = r.name
	WHERE r.end_ns IS NULL OR r.start_ns >= r.end_ns
	OR r.start_ns < x.t0 - $TOL OR r.end_ns > x.t1 + $TOL LIMIT 5;")"

# Nesting as written: a push range lies inside its parent of the same
# domain (NVTX pops per domain: wl_gpu's "lib" outlives its parent "mid").
expect_empty "ranges: nested inside their parents" "$(q "
SELECT 'range', r.name, 'not inside', x.name FROM s.ranges_named r JOIN s.ranges_named x
	ON x.id = r.parent_id WHERE r.domain_id = x.domain_id AND (r.start_ns < x.start_ns
	OR r.end_ns > x.end_ns OR r.tid <> x.tid OR r.depth <> x.depth + 1);
SELECT 'no range outlives its parent' WHERE NOT EXISTS (SELECT 1 FROM s.ranges r
	JOIN s.ranges x ON x.id = r.parent_id WHERE r.end_ns > x.end_ns);")"

expect_empty "marker" "$(q "
CREATE TEMP VIEW exp_m AS SELECT pid, tid, domain, name FROM main.M;
CREATE TEMP VIEW got_m AS SELECT p.pid, m.tid, coalesce(d.text, '-') AS domain, n.text AS name
	FROM s.markers m JOIN s.processes p USING (proc_id)
	JOIN s.strings n ON n.proc_id = m.proc_id AND n.id = m.name_id
	LEFT JOIN s.strings d ON d.proc_id = m.proc_id AND d.id = m.domain_id
	WHERE p.pid IN $PIDS;
$(multiset_diff exp_m got_m "pid, tid, domain, name")
SELECT 'marker before the call:', m.ts_ns, x.t0 FROM s.markers m JOIN main.M x
	WHERE m.ts_ns < x.t0 - $TOL;")"

expect_empty "kernels_in_ranges: each kernel in its innermost range" "$(q "
CREATE TEMP VIEW exp_kr AS SELECT pid, tid, bx, range FROM main.K;
CREATE TEMP VIEW got_kr AS SELECT p.pid, coalesce(k.launch_tid, -1) AS tid, k.block_x AS bx,
	coalesce((SELECT r.name FROM s.ranges_named r WHERE r.id = k.range_id), '-') AS range
	FROM s.kernels_in_ranges k JOIN s.processes p USING (proc_id) WHERE p.pid IN $PIDS;
$(multiset_diff exp_kr got_kr "pid, tid, bx, range")")"

# --- kernels_in_ranges at scale: N steps, each a range around a launch,
# then a launch outside it.  Linear work, counted in SQLite's virtual
# machine instructions (its progress handler: the same on any machine,
# whatever the load): the view of schema 11 searched every earlier range
# of the thread for each kernel, 160,000,000 instructions at N = 4000
# against 1,400,000 (and 2.6e9, 52 s, at N = 16000).
N=4000
DB=$T/ranges.db
WLOG=$T/ranges.log
start_collector "$DB" || { not_ok "ranges $N: collector"; finish; }
SHIMMER_LOSSLESS=1 CUDA_INJECTION64_PATH=$SHIM NVTX_INJECTION64_PATH=$SHIM traced "$WL_GPU" ranges $N \
	> "$T/out" 2> "$T/err"
rc=$?
stop_collector || not_ok "ranges $N: collector exit status"
check "ranges $N: workload exits 0" "exit status $rc; stderr: $(head -5 "$T/err")" [ "$rc" = 0 ]
out=$(python3 - "$DB" $N <<'PY'
import sqlite3, sys
db, n = sys.argv[1], int(sys.argv[2])
c = sqlite3.connect('file:%s?mode=ro' % db, uri=True)
steps = [0]
def tick():
    steps[0] += 1
    return 0
c.set_progress_handler(tick, 1000)
got = c.execute("""SELECT count(*), sum(k.block_x IN (64, 65) AND r.name = 'step'),
	sum(k.block_x IN (66, 67) AND k.range_id IS NULL)
	FROM kernels_in_ranges k LEFT JOIN ranges_named r ON r.id = k.range_id""").fetchone()
want = (2 * n, n, n)
if got != want:
    print('kernels, in a step, outside: %s, expected %s' % (got, want))
if steps[0] * 1000 > 1000 * 2 * n:
    print('%d instructions for %d kernels: more than 1000 a kernel' % (steps[0] * 1000, 2 * n))
PY
)
expect_empty "kernels_in_ranges: $((2 * N)) kernels and $N ranges in linear time" "$out"

finish
