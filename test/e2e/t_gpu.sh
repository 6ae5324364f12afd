#!/bin/bash
# t_gpu: CUPTI activity through the fake runtime and the fake CUPTI
# (test/fake_cupti): every kernel, copy, memset and synchronization
# wl_gpu logged is in the store as the GPU ran it, on the host's clock,
# linked to the API call and thread that launched it; a program that exits
# right after launching loses nothing; and the shim's gpu_status says why
# GPU records are missing when CUPTI is busy, absent or disabled, while the
# API-level CUDA calls stay complete.
. "$(dirname "$0")/lib.sh"

# These checks need every kernel: GPU sampling (the default) is
# t_gpu_sample's.
export SHIMMER_GPU=all

need "$SHIM" "$SHIMMERD" "$WL_GPU" "$WL" "$FAKE_CUPTI"

DELAY=2000000 # FAKE_CUDA_DELAY_NS: each kernel runs at least this long
TOL=500000    # clock comparisons with the workload's own CLOCK_MONOTONIC

# --- (a) kernels, copies, syncs (SHIMMER_GPU_SYNC=1) -----------------------
DB=$T/kernels.db
WLOG=$T/kernels.log
start_collector "$DB" || { not_ok "kernels: collector"; finish; }
SHIMMER_GPU_SYNC=1 CUDA_INJECTION64_PATH=$SHIM FAKE_CUDA_DELAY_NS=$DELAY traced "$WL_GPU" kernels \
	> "$T/kernels.out" 2> "$T/kernels.err"
rc=$?
stop_collector || not_ok "kernels: collector exit status"
check "kernels: workload exits 0" "exit status $rc; stderr: $(head -5 "$T/kernels.err")" \
	[ "$rc" = 0 ]
load_log "$WLOG" "$T/kernels.check.db" "$DB"
load_gpu_log "$WLOG"
# the diffs below compare against this log: it must hold each kind
logged=$(q "SELECT (SELECT count(*) FROM main.K) > 0 AND (SELECT count(*) FROM main.Y) > 0
	AND (SELECT count(*) FROM main.S) > 0")
check "kernels: log has kernels, copies and syncs" "log: $logged" [ "$logged" = 1 ]

st=$(gpu_status)
check "kernels: gpu_status active" "gpu_status: $st" [ "$st" = active ]

# Every launch, with its exact name, geometry, stream (CUPTI's stream id:
# the fake's handle, 7 for the default stream) and shared memory, linked to
# the API call (domain and name) and thread that made it.
cols="pid, tid, name, domain, api, gx, gy, gz, bx, by, bz, stream, smem"
expect_empty "kernels: every launch stored, linked to its call and thread" "$(q "
CREATE TEMP VIEW exp_k AS SELECT pid, tid, name, domain, api, gx, gy, gz, bx, by, bz,
	CASE WHEN stream = 0 THEN 7 ELSE stream END AS stream, smem FROM main.K;
CREATE TEMP VIEW got_k AS SELECT p.pid, coalesce(k.launch_tid, -1) AS tid, k.mangled AS name,
	coalesce(k.launch_domain, '-') AS domain, coalesce(k.launch_api, '-') AS api,
	k.grid_x AS gx, k.grid_y AS gy, k.grid_z AS gz, k.block_x AS bx, k.block_y AS by,
	k.block_z AS bz, k.stream, k.dynamic_smem AS smem
	FROM s.kernels_named k JOIN s.processes p USING (proc_id) WHERE p.pid IN $PIDS;
$(multiset_diff exp_k got_k "$cols")
SELECT 'kernels stored', (SELECT count(*) FROM s.kernels), 'rows in kernels_named',
	(SELECT count(*) FROM s.kernels_named)
	WHERE (SELECT count(*) FROM s.kernels) <> (SELECT count(*) FROM s.kernels_named);")"

expect_empty "kernels: demangled names (c++filt's)" "$(q "
SELECT 'name', s.text, 'demangled', s.demangled, 'c++filt', d.demangled
	FROM s.kernels k JOIN s.strings s ON s.proc_id = k.proc_id AND s.id = k.name_id
	JOIN main.DM d ON d.name = s.text WHERE s.demangled IS NOT d.demangled
	GROUP BY s.text LIMIT 5;
SELECT 'kernel name not logged:', s.text FROM s.kernels k
	JOIN s.strings s ON s.proc_id = k.proc_id AND s.id = k.name_id
	WHERE s.text NOT IN (SELECT name FROM main.DM) LIMIT 5;")"

expect_empty "kernels: each lasts at least the fake delay" "$(q "
SELECT 'kernel', name, 'dur_ns', dur_ns FROM s.kernels_named WHERE dur_ns < $DELAY LIMIT 5;")"

# A stream runs its work one operation after another: wl_gpu's two worker
# threads launch, copy and memset on the default stream at the same time,
# each call lasting the delay, so a fake that ran each call's work during
# its own call, whatever the stream was running, overlaps them (what made
# t_export's trace fail tef_check.py under load).
expect_empty "kernels: a stream's kernels, copies and memsets never overlap" "$(q "
CREATE TEMP VIEW ops AS
	SELECT 'kernel' AS what, k.id, k.proc_id, k.device, k.stream, k.start_ns, k.end_ns,
		a.tid FROM s.kernels k LEFT JOIN s.gpu_api a USING (proc_id, correlation)
	UNION ALL SELECT c.op, c.id, c.proc_id, c.device, c.stream, c.start_ns, c.end_ns, a.tid
		FROM s.gpu_copies c LEFT JOIN s.gpu_api a USING (proc_id, correlation);
SELECT 'fewer than 3 threads working on the default stream:', count(DISTINCT tid) FROM ops
	WHERE stream = 7 HAVING count(DISTINCT tid) < 3;
SELECT 'on stream', a.stream, a.what, a.start_ns, a.end_ns, 'overlaps', b.what, b.start_ns,
	b.end_ns FROM ops a JOIN ops b ON a.proc_id = b.proc_id AND a.device = b.device
	AND a.stream IS b.stream AND (a.start_ns, a.what, a.id) < (b.start_ns, b.what, b.id)
	AND b.start_ns < a.end_ns LIMIT 5;")"

# The host's clock: a kernel runs inside the call that launched it (the
# workload read CLOCK_MONOTONIC around the call), after the API call
# record's start and before the process's end.
expect_empty "kernels: on the host's clock, inside the launching call" "$(q "
SELECT 'kernel outside every matching logged call:', k.mangled, k.start_ns, k.end_ns
	FROM s.kernels_named k JOIN s.processes p USING (proc_id)
	WHERE p.pid IN $PIDS AND NOT EXISTS (SELECT 1 FROM main.K x
		WHERE x.pid = p.pid AND x.tid = k.launch_tid AND x.name = k.mangled
		AND x.gx = k.grid_x AND x.bx = k.block_x
		AND k.start_ns >= x.t0 - $TOL AND k.end_ns <= x.t1 + $TOL) LIMIT 5;
SELECT 'kernel before its launch call or after the process end:', k.mangled, k.start_ns,
	k.launch_ns, p.end_ns FROM s.kernels_named k JOIN s.processes p USING (proc_id)
	WHERE k.launch_ns IS NULL OR k.start_ns < k.launch_ns OR k.end_ns > p.end_ns LIMIT 5;")"

# Copies and memsets, exact (bytes, kind, value, stream), linked to their thread.
expect_empty "kernels: memcpy and memset exact" "$(q "
CREATE TEMP VIEW exp_y AS SELECT pid, tid, op, bytes,
	CASE WHEN op = 'memcpy' THEN kind ELSE '-' END AS kind,
	CASE WHEN op = 'memset' THEN value ELSE 0 END AS value,
	CASE WHEN stream = 0 THEN 7 ELSE stream END AS stream FROM main.Y;
CREATE TEMP VIEW got_y AS SELECT p.pid, coalesce(a.tid, -1) AS tid, c.op, c.bytes,
	CASE WHEN c.op = 'memcpy' THEN coalesce(c.copy_kind, 'NULL') ELSE '-' END AS kind,
	CASE WHEN c.op = 'memset' THEN coalesce(c.value, -1) ELSE 0 END AS value, c.stream
	FROM s.gpu_copies c JOIN s.processes p USING (proc_id)
	LEFT JOIN s.gpu_api a ON a.proc_id = c.proc_id AND a.correlation = c.correlation
	WHERE p.pid IN $PIDS;
$(multiset_diff exp_y got_y "pid, tid, op, bytes, kind, value, stream")")"

expect_empty "kernels: synchronizations" "$(q "
CREATE TEMP VIEW exp_s AS SELECT pid, type,
	CASE WHEN type = 'stream' THEN stream ELSE -1 END AS stream FROM main.S;
CREATE TEMP VIEW got_s AS SELECT p.pid, g.type,
	CASE WHEN g.type = 'stream' THEN g.stream ELSE -1 END AS stream
	FROM s.gpu_syncs g JOIN s.processes p USING (proc_id) WHERE p.pid IN $PIDS;
$(multiset_diff exp_s got_s "pid, type, stream")")"

check_integrity "kernels: store integrity" "$DB"

# --- (f) shimmer summary lists the kernels with the log's counts -----------
"$SHIMMER" summary "$DB" --format csv > "$T/summary.csv" 2> "$T/summary.err"
rc=$?
if [ "$rc" != 0 ]; then
	not_ok "summary: kernels in csv" "shimmer summary exit status $rc: $(head -3 "$T/summary.err")"
else
	# The csv's header names the columns (names with commas are quoted):
	# kernel rows are kind "kernel", named as demangled (or as CUPTI gave
	# them, when not mangled).
	sq "$CHECKDB" ".import --csv $T/summary.csv SUM" 2>&1
	expect_empty "summary: kernels in csv with the log's counts" "$(q "
CREATE TEMP VIEW exp_sum AS SELECT coalesce(d.demangled, k.name) AS event, count(*) AS n
	FROM main.K k JOIN main.DM d USING (name) GROUP BY k.name;
CREATE TEMP VIEW got_sum AS SELECT event, CAST(count AS INTEGER) AS n FROM main.SUM
	WHERE kind = 'kernel';
SELECT 'logged, not in summary:', * FROM (SELECT * FROM exp_sum EXCEPT SELECT * FROM got_sum);
SELECT 'in summary, not logged:', * FROM (SELECT * FROM got_sum EXCEPT SELECT * FROM exp_sum);")"
fi

# --- (a2) by default, no synchronization records; everything else stays --
DB=$T/nosync.db
WLOG=$T/nosync.log
start_collector "$DB" || { not_ok "no sync records: collector"; finish; }
CUDA_INJECTION64_PATH=$SHIM traced "$WL_GPU" kernels > /dev/null 2>&1
rc=$?
stop_collector || not_ok "no sync records: collector exit status"
load_log "$WLOG" "$T/nosync.check.db" "$DB"
load_gpu_log "$WLOG"
bad=$(q "
SELECT 'log has no syncs' WHERE (SELECT count(*) FROM main.S) = 0;
SELECT 'gpu_syncs rows', count(*) FROM s.gpu_syncs HAVING count(*) > 0;
SELECT 'kernels stored', (SELECT count(*) FROM s.kernels), 'logged', (SELECT count(*) FROM main.K)
	WHERE (SELECT count(*) FROM s.kernels) <> (SELECT count(*) FROM main.K);
SELECT 'copies stored', (SELECT count(*) FROM s.gpu_copies), 'logged', (SELECT count(*) FROM main.Y)
	WHERE (SELECT count(*) FROM s.gpu_copies) <> (SELECT count(*) FROM main.Y);")
[ $rc = 0 ] || bad="exit status $rc $bad"
expect_empty "no sync records by default; kernels and copies complete" "$bad"

# --- (b) exit right after launching: the flush at exit keeps every kernel --
# Once through the driver's injection hook, once without it (the shim starts
# CUPTI at the first CUDA call), and once paced over several flush periods,
# so that buffers the shim recycled are handed to CUPTI again: the fake
# aborts if one of them is not all zero, as the shim promised.
for how in injected first-call paced; do
	DB=$T/short-$how.db
	WLOG=$T/short-$how.log
	start_collector "$DB" || { not_ok "short ($how): collector"; continue; }
	if [ $how = injected ]; then
		CUDA_INJECTION64_PATH=$SHIM traced "$WL_GPU" short 25 > /dev/null 2>&1
	elif [ $how = paced ]; then
		CUDA_INJECTION64_PATH=$SHIM traced "$WL_GPU" short 30 25000 > /dev/null 2>&1
	else
		traced "$WL_GPU" short 25 > /dev/null 2>&1
	fi
	rc=$?
	stop_collector || not_ok "short ($how): collector exit status"
	load_log "$WLOG" "$T/short-$how.check.db" "$DB"
	load_gpu_log "$WLOG"
	st=$(gpu_status)
	expect_empty "short ($how): all kernels of a process that exits at once" "$( [ $rc = 0 ] ||
		echo "exit status $rc"; [ "$st" = active ] || echo "gpu_status $st"
		[ "$(q 'SELECT count(*) FROM main.K')" -gt 0 ] || echo "log has no kernels"; q "
CREATE TEMP VIEW exp_k AS SELECT pid, tid, name, gx FROM main.K;
CREATE TEMP VIEW got_k AS SELECT p.pid, coalesce(k.launch_tid, -1) AS tid, k.mangled AS name,
	k.grid_x AS gx FROM s.kernels_named k JOIN s.processes p USING (proc_id)
	WHERE p.pid IN $PIDS;
$(multiset_diff exp_k got_k "pid, tid, name, gx")")"
done

# --- (c) CUPTI busy, absent, disabled: the API-level calls still complete --
# run_status CASE EXPECTED [VAR=VALUE...]: wl long 2 under the shim with
# the variables; gpu_status must be EXPECTED and cuda_calls the log's.
run_status() {
	local name=$1 want=$2 rc st
	shift 2
	DB=$T/$name.db
	WLOG=$T/$name.log
	start_collector "$DB" || { not_ok "$name: collector"; return; }
	env "$@" LD_PRELOAD="$SHIM" SHIMMER_SOCKET="$SOCK" SHIMMER_MALLOC=all WL_LOG="$WLOG" \
		"$WL_RUN" long 2 > "$T/$name.out" 2> "$T/$name.err"
	rc=$?
	stop_collector || not_ok "$name: collector exit status"
	load_log "$WLOG" "$T/$name.check.db" "$DB"
	st=$(gpu_status)
	check "$name: gpu_status $want" "gpu_status: $st; exit status $rc (3 expected)" \
		test "$st" = "$want" -a "$rc" = 3
	expect_empty "$name: cuda_calls complete" "$(diff_cuda)"
}

WL_RUN=$WL
run_status busy busy CUDA_INJECTION64_PATH="$SHIM" FAKE_CUPTI_BUSY=1
n=$(grep -c . "$T/busy.err")
check "busy: exactly one line on stderr" "stderr has $n lines: $(head -3 "$T/busy.err")" \
	test "$n" = 1 -a -z "$(tail -c1 "$T/busy.err")"

run_status disabled disabled CUDA_INJECTION64_PATH="$SHIM" SHIMMER_CUPTI=0
line=$("$SHIMMER" summary "$DB" | grep 'GPU activity:')
check "disabled: summary says why once" "$line" \
	test "$line" = "  GPU activity: NOT traced: disabled by SHIMMER_CUPTI=0; kernels, copies and GPU busy time are unknown, not zero"

# No CUPTI anywhere: the workload and a copy of the fake runtime without the
# fake CUPTI beside it, CUDA_HOME pointing nowhere, and /usr/local/cuda
# hidden (a private mount namespace) when it holds a real libcupti.
mkdir -p "$T/nocupti/bin" "$T/nocupti/fake_cudart" "$T/empty"
cp "$WL" "$T/nocupti/bin/wl"
cp "$O/test/fake_cudart/libcudart.so.13" "$T/nocupti/fake_cudart/"
WL_RUN=$T/nocupti/bin/wl
real_cupti=
for f in /usr/local/cuda/extras/CUPTI/lib64/libcupti.so* /usr/local/cuda/lib64/libcupti.so* \
	/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so*; do
	[ -e "$f" ] && real_cupti=$f
done
if [ -z "$real_cupti" ]; then
	run_status no_cupti no_cupti CUDA_HOME="$T/nowhere"
elif unshare -m true 2> /dev/null; then
	run_status no_cupti no_cupti CUDA_HOME="$T/nowhere" \
		unshare -m sh -c 'mount --bind "$0" /usr/local/cuda && exec env "$@"' "$T/empty"
else
	echo "ok - $SCRIPT: no_cupti # SKIP $real_cupti exists and cannot be hidden here"
fi

finish
