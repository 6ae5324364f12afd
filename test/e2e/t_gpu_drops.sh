#!/bin/bash
# t_gpu_drops: activity records CUPTI loses are counted in `drops`, and so
# are records handed over without their end (FAKE_CUPTI_INCOMPLETE_EVERY=N
# in place of the drop knob, below).  The
# fake CUPTI loses every N-th record it writes (FAKE_CUPTI_DROP_EVERY=N,
# counting kernels, copies and memsets in the order written) and reports
# them through cuptiActivityGetNumDroppedRecords.  The independent truth is
# the workload's log: L records launched (K and Y lines), so the store must
# hold exactly L - L/N kernels and copies, and `drops` exactly L/N events;
# where a single thread launches, the kept records are known one by one.
#
# Attribution: CUPTI's losses are no thread's and no ring's, so they are
# stored with reason 'cupti' and tid 0.  The shim asks CUPTI for them when
# a buffer completes and once more at exit, so records lost with no buffer
# to complete (every record lost, or the last ones) are counted too.
. "$(dirname "$0")/lib.sh"

# Every kernel is recorded (GPU sampling, the default, would keep a sample).
export SHIMMER_GPU=all

need "$SHIM" "$SHIMMERD" "$WL_GPU" "$FAKE_CUPTI"

# run_drops CASE N [VAR=VALUE...] -- ARGS...: wl_gpu ARGS under the shim
# with FAKE_CUPTI_DROP_EVERY=N (0: unset) and the variables; checks the
# counts and the attribution of the drops.
run_drops() {
	local name=$1 every=$2 rc want="dropped = launched / $2"
	local -a vars=()
	shift 2
	while [ "$1" != -- ]; do vars+=("$1"); shift; done
	shift
	if [ "$every" = 0 ]; then
		want="nothing dropped"
	else
		vars+=("${DROP_KNOB:-FAKE_CUPTI_DROP_EVERY}=$every")
	fi
	DB=$T/$name.db
	WLOG=$T/$name.log
	start_collector "$DB" || { not_ok "$name: collector"; return; }
	env "${vars[@]}" LD_PRELOAD="$SHIM" SHIMMER_SOCKET="$SOCK" SHIMMER_MALLOC=all \
		WL_LOG="$WLOG" "$WL_GPU" "$@" > "$T/$name.out" 2> "$T/$name.err"
	rc=$?
	stop_collector || not_ok "$name: collector exit status"
	check "$name: workload exits 0" "exit status $rc; stderr: $(head -5 "$T/$name.err")" \
		[ "$rc" = 0 ]
	load_log "$WLOG" "$T/$name.check.db" "$DB"
	load_gpu_log "$WLOG"
	local views="CREATE TEMP VIEW logged AS SELECT pid, count(*) AS n FROM
	(SELECT pid FROM main.K UNION ALL SELECT pid FROM main.Y) GROUP BY pid;
CREATE TEMP VIEW stored AS SELECT p.pid, count(*) AS n FROM
	(SELECT proc_id FROM s.kernels UNION ALL SELECT proc_id FROM s.gpu_copies)
	JOIN s.processes p USING (proc_id) GROUP BY p.pid;
CREATE TEMP VIEW dropped AS SELECT p.pid, sum(d.events) AS n FROM s.drops d
	JOIN s.processes p USING (proc_id) GROUP BY p.pid;"
	expect_empty "$name: stored + dropped = launched, $want" "$(q "
$views
SELECT 'no GPU work logged' WHERE NOT EXISTS (SELECT 1 FROM logged);
SELECT 'pid', l.pid, 'launched', l.n, 'stored', coalesce(g.n, 0), 'dropped', coalesce(d.n, 0),
	'expected dropped', CASE WHEN $every THEN l.n / $every ELSE 0 END
	FROM logged l LEFT JOIN stored g USING (pid) LEFT JOIN dropped d USING (pid)
	WHERE coalesce(g.n, 0) + coalesce(d.n, 0) <> l.n
	OR coalesce(d.n, 0) <> CASE WHEN $every THEN l.n / $every ELSE 0 END;
SELECT 'no drop counted: L < N' FROM logged WHERE $every AND n < $every;")"
	[ "$every" = 0 ] && return
	# shimmer summary warns, and says what the lost records mean
	local n=$(q "SELECT sum(events) FROM s.drops") text
	text=$("$SHIMMER" summary "$DB" 2>&1 | grep 'WARNING: .* events were dropped (')
	check "$name: summary warns of the $n records CUPTI lost" "summary: $text" \
		grep -q "(cupti $n); .*the GPU's counts miss the records CUPTI lost" <<<"$text"
	expect_empty "$name: drops are reason 'cupti', tid 0" "$(q "
SELECT 'drop row', p.pid, d.tid, d.reason, d.events FROM s.drops d
	JOIN s.processes p USING (proc_id)
	WHERE p.pid IN $PIDS AND (d.reason <> 'cupti' OR d.tid <> 0);")"
}

# exact_short CASE N: a wl_gpu short run launched kernel i with grid_x i
# (1..n) on one thread, so the N-th, 2N-th, ... kernels are the lost ones.
exact_short() {
	local every=$2
	expect_empty "$1: exactly the N-th kernels lost" "$(q "
CREATE TEMP VIEW exp_k AS SELECT pid, gx FROM main.K WHERE gx % $every <> 0;
CREATE TEMP VIEW got_k AS SELECT p.pid, k.grid_x AS gx FROM s.kernels k
	JOIN s.processes p USING (proc_id) WHERE p.pid IN $PIDS;
$(multiset_diff exp_k got_k "pid, gx")")"
}

# Three threads launching kernels, copies and memsets: 32 records.
run_drops kernels 5 CUDA_INJECTION64_PATH="$SHIM" -- kernels

# Exit right after the last launch: the flush at exit counts the drops.
run_drops short 4 -- short 25
exact_short short 4

# Paced over several flush periods: the converter counts them as it goes.
run_drops paced 4 CUDA_INJECTION64_PATH="$SHIM" -- short 30 25000
exact_short paced 4

# Every record lost (L mod N = 0, and no buffer ever completes): counted at
# exit.
run_drops all-lost 1 -- short 24

# Records handed over before their work ended (CUPTI's forced flush at
# exit): counted as lost, none stored without its end.
DROP_KNOB=FAKE_CUPTI_INCOMPLETE_EVERY run_drops incomplete 4 -- short 25
exact_short incomplete 4
expect_empty "incomplete: no record stored without its end" "$(sq "$T/incomplete.db" "
SELECT 'kernel', id, start_ns, end_ns FROM kernels WHERE end_ns = 0 OR end_ns < start_ns;
SELECT 'copy', id, start_ns, end_ns FROM gpu_copies WHERE end_ns = 0 OR end_ns < start_ns;")"

# The same for synchronization records (SHIMMER_GPU_SYNC=1): every third
# record of any kind comes without its end; stored + lost = written,
# counting kernels, copies, memsets and syncs, and no sync stored without
# its end.
DB=$T/sync-incomplete.db
WLOG=$T/sync-incomplete.log
start_collector "$DB" || not_ok "sync-incomplete: collector"
SHIMMER_GPU_SYNC=1 FAKE_CUPTI_INCOMPLETE_EVERY=3 CUDA_INJECTION64_PATH="$SHIM" \
	LD_PRELOAD="$SHIM" SHIMMER_SOCKET="$SOCK" WL_LOG="$WLOG" "$WL_GPU" kernels \
	> "$T/sync-incomplete.out" 2> "$T/sync-incomplete.err"
rc=$?
stop_collector || not_ok "sync-incomplete: collector exit status"
check "sync-incomplete: workload exits 0" "exit status $rc" [ "$rc" = 0 ]
load_log "$WLOG" "$T/sync-incomplete.check.db" "$DB"
load_gpu_log "$WLOG"
expect_empty "sync-incomplete: stored + lost = written, a third lost" "$(q "
CREATE TEMP VIEW written AS SELECT (SELECT count(*) FROM main.K) + (SELECT count(*) FROM main.Y)
	+ (SELECT count(*) FROM main.S) AS n;
CREATE TEMP VIEW kept AS SELECT (SELECT count(*) FROM s.kernels) + (SELECT count(*) FROM s.gpu_copies)
	+ (SELECT count(*) FROM s.gpu_syncs) AS n;
CREATE TEMP VIEW lost AS SELECT coalesce(sum(events), 0) AS n FROM s.drops WHERE reason = 'cupti';
SELECT 'no syncs logged' WHERE (SELECT count(*) FROM main.S) < 3;
SELECT 'written', w.n, 'stored', k.n, 'lost', l.n FROM written w, kept k, lost l
	WHERE k.n + l.n <> w.n OR l.n <> w.n / 3;")"
expect_empty "sync-incomplete: no sync stored without its end" "$(q "
SELECT 'sync', id, start_ns, end_ns FROM s.gpu_syncs WHERE end_ns = 0 OR end_ns < start_ns;
SELECT 'no sync stored' WHERE NOT EXISTS (SELECT 1 FROM s.gpu_syncs);")"

# Knob unset: nothing is lost.
run_drops kernels-unset 0 CUDA_INJECTION64_PATH="$SHIM" -- kernels
run_drops short-unset 0 -- short 25

finish
