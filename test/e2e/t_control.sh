#!/bin/bash
# Recording switched on and off without restarts, each window checked
# against the workload's own log (wl_job: every op is a malloc and a
# cudaMemset of SIZE bytes, logged with CLOCK_MONOTONIC times):
#  - SHIMMER_START/STOP=after-range:step:N (shimmer.h and NVTX ranges):
#    exactly the ops of the steps after the 3rd up to the 7th;
#  - SHIMMER_START=after:DUR and SHIMMER_DURATION: the steps inside the
#    window, the window where and as long as asked;
#  - SHIMMER_START=paused, then `shimmer ctl resume` and `pause` of a job
#    (a launcher, forked and exec'd workers): exactly the planted phase,
#    in every process;
#  - `shimmer ctl pause` acts in every one of 8 busy processes of a job
#    within 100 ms: nothing they did 100 ms after the command asked is
#    stored, although they went on (the log says so); `ctl window`;
#  - SHIMMER_CONTROL=0, and defaults from the service configuration file.
# t_nothread checks that none of it takes a thread of the shim's.
. "$(dirname "$0")/lib.sh"
need "$SHIM" "$SHIMMERD" "$SHIMMER" "$O/test/e2e/wl_job"
WLJ=$O/test/e2e/wl_job
SIZE=12347
STATE=$T/state
start_service "$STATE" --job-linger 300ms || { not_ok "collector starts"; finish; }

run() { # JOB LOG ARGS...: a traced wl_job of job JOB (SHIMMER_* from the caller)
	local job=$1 log=$2
	shift 2
	LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK SHIMMER_MALLOC=all SHIMMER_HEAP_ROWS=all SHIMMER_JOB=$job WL_LOG=$log \
		"$WLJ" "$@"
}
store_of() { # JOB: its newest recording's path
	recordings | awk -F, -v j="$1" '$1 == j { print $10; exit }'
}
mono() { python3 -c 'import time; print(time.monotonic_ns())'; }
# timed CMD...: prints CLOCK_MONOTONIC ns, then execs CMD in the same
# process (so the time is taken a few ms before CMD acts, not a process
# start and exit earlier).
timed() {
	python3 -c 'import os, sys, time; print(time.monotonic_ns(), flush=True); os.execv(sys.argv[1], sys.argv[1:])' "$@"
}
# ops_rows STORE: (pid, ns) of every stored op: the mallocs of SIZE bytes
# (the cudaMemsets are counted alike, by cuda_check).
ops_sql="SELECT p.pid, a.alloc_ns AS ns FROM allocations a JOIN processes p USING (proc_id)
	WHERE a.size = $SIZE AND a.space = 'host'"
cuda_check() { # STORE: pids whose cudaMemset count differs from their malloc count
	sq "$1" "SELECT pid, m, c FROM (SELECT p.pid,
	(SELECT count(*) FROM allocations a WHERE a.proc_id = p.proc_id AND a.size = $SIZE
		AND a.space = 'host') AS m,
	(SELECT count(*) FROM cuda_calls_named c WHERE c.proc_id = p.proc_id
		AND c.fn = 'cudaMemset' AND c.bytes = $SIZE) AS c
	FROM processes p) WHERE m <> c"
}
# lines TYPE TABLE COLUMNS: the log's TYPE lines as TABLE (seq, COLUMNS) of
# $CHECKDB (after load_log).
lines() {
	sq "$CHECKDB" "CREATE TABLE $2 (seq INTEGER, $3)"
	awk -F, -v ty="$1" '$1 == ty { sub(/^[^,]*/, NR); print }' "$WLOGF" > "$T/$2.csv"
	sq "$CHECKDB" ".mode csv" ".import $T/$2.csv $2"
}
marks() { # STORE NAME: the marker's times, one per line
	sq "$1" "SELECT m.ts_ns FROM markers m JOIN strings s ON s.proc_id = m.proc_id
		AND s.id = m.name_id WHERE s.text = '$2' ORDER BY m.ts_ns"
}

# ---- range triggers ----
for api in shimmer nvtx; do
	SHIMMER_START=after-range:step:3 SHIMMER_STOP=after-range:step:7 \
		run range-$api "$T/r-$api.log" steps 10 5 $SIZE $api 0
	rc=$?
	sleep 0.5
	S=$(store_of range-$api)
	load_log "$T/r-$api.log" "$T/r-$api.check" "$S"
	WLOGF=$T/r-$api.log lines S St "pid INTEGER, step INTEGER, t0 INTEGER, t1 INTEGER"
	got=$(q "SELECT count(*) FROM ($ops_sql) x")
	check "$api ranges, START=after-range:step:3, STOP=after-range:step:7: the 20 ops of steps 4-7" \
		"status $rc; stored $got" [ $rc = 0 -a "$got" = 20 ]
	expect_empty "$api ranges: every stored op lies in steps 4 to 7 (the log's times)" "$(q "
SELECT 'op at', x.ns, 'outside steps 4-7' FROM ($ops_sql) x WHERE NOT EXISTS (
	SELECT 1 FROM main.St s WHERE s.step BETWEEN 4 AND 7 AND x.ns BETWEEN s.t0 AND s.t1);")"
	expect_empty "$api ranges: as many cudaMemsets as mallocs" "$(cuda_check "$S")"
	check "$api ranges: one resume and one pause marker" \
		"$(marks "$S" shimmer.resume | wc -l) $(marks "$S" shimmer.pause | wc -l)" \
		[ "$(marks "$S" shimmer.resume | wc -l)$(marks "$S" shimmer.pause | wc -l)" = 11 ]
done

# ---- time triggers: after:300ms, then 300 ms of recording ----
SHIMMER_START=after:300ms SHIMMER_DURATION=300ms run timed "$T/timed.log" steps 45 2 $SIZE shimmer 20
sleep 0.5
S=$(store_of timed)
load_log "$T/timed.log" "$T/timed.check" "$S"
WLOGF=$T/timed.log lines S St "pid INTEGER, step INTEGER, t0 INTEGER, t1 INTEGER"
R=$(marks "$S" shimmer.resume) P=$(marks "$S" shimmer.pause)
start=$(sq "$S" "SELECT start_ns FROM processes")
check "after:300ms: recording began 300 ms (+- 20) after the process" "resume at +$(( (R - start) / 1000000 )) ms" \
	holds '[ -n "$R" ] && [ $(( R - start )) -ge 280000000 -a $(( R - start )) -le 320000000 ]'
check "SHIMMER_DURATION=300ms: and ended 300 ms (+- 20) later" "pause at +$(( (P - R) / 1000000 )) ms" \
	holds '[ -n "$P" ] && [ $(( P - R )) -ge 280000000 -a $(( P - R )) -le 320000000 ]'
expect_empty "after:300ms: the steps inside the window whole, none outside" "$(q "
SELECT 'step', s.step, 'stored', (SELECT count(*) FROM ($ops_sql) x WHERE x.ns BETWEEN s.t0 AND s.t1)
FROM main.St s WHERE (s.t0 > $R AND s.t1 < $P AND
	(SELECT count(*) FROM ($ops_sql) x WHERE x.ns BETWEEN s.t0 AND s.t1) <> 2)
	OR ((s.t1 < $R OR s.t0 > $P) AND
	(SELECT count(*) FROM ($ops_sql) x WHERE x.ns BETWEEN s.t0 AND s.t1) <> 0);
SELECT 'op outside every step at', x.ns FROM ($ops_sql) x WHERE NOT EXISTS (
	SELECT 1 FROM main.St s WHERE x.ns BETWEEN s.t0 AND s.t1);")"
# (a 300 ms window holds 15 steps 20 ms apart, 16 when it ends up to the
# daemon's 5 ms pass late, which the markers then say)
n=$(q "SELECT count(*) FROM main.St WHERE t0 > $R AND t1 < $P")
check "after:300ms: about 13 steps inside the window ($n)" "$n" [ "$n" -ge 8 -a "$n" -le 16 ]

# ---- SHIMMER_START=paused, ctl resume and pause of a job ----
mkdir "$T/ph"
SHIMMER_START=paused run phased "$T/ph.log" launch 4 phases "$T/ph" 3 7 $SIZE &
LPID=$!
phase() { # N: let every process do phase N, wait until they did
	touch "$T/ph/go.$1"
	for i in $(seq 400); do
		[ "$(ls "$T/ph" | grep -c "^done\.$1\.")" -ge 4 ] && return 0
		sleep 0.025
	done
	return 1
}
phase 1
r1=$("$SHIMMER" ctl resume --job phased --socket "$SOCK" --format csv 2>&1)
rc1=$?
phase 2
r2=$("$SHIMMER" ctl pause --job phased --socket "$SOCK" --format csv 2>&1)
rc2=$?
phase 3
wait $LPID
rc=$?
check "ctl resume and pause: each reached the launcher and its 3 workers" "$r1 / $r2" \
	[ $rc1 = 0 -a $rc2 = 0 -a "$(tail -n +2 <<< "$r1" | wc -l)" = 4 -a "$(tail -n +2 <<< "$r2" | wc -l)" = 4 ]
sleep 0.5
S=$(store_of phased)
load_log "$T/ph.log" "$T/ph.check" "$S"
WLOGF=$T/ph.log lines Q Q "pid INTEGER, phase INTEGER, t0 INTEGER, t1 INTEGER"
check "4 processes did 3 phases" "$(q 'SELECT count(*) FROM main.Q')" \
	[ $rc = 0 -a "$(q 'SELECT count(DISTINCT pid) FROM main.Q WHERE phase = 3')" = 4 ]
expect_empty "each process: exactly the 7 ops of phase 2 stored" "$(q "
SELECT 'pid', q.pid, 'stored', (SELECT count(*) FROM ($ops_sql) x WHERE x.pid = q.pid)
FROM main.Q q WHERE q.phase = 2 AND (
	(SELECT count(*) FROM ($ops_sql) x WHERE x.pid = q.pid) <> 7 OR
	(SELECT count(*) FROM ($ops_sql) x WHERE x.pid = q.pid AND x.ns BETWEEN q.t0 AND q.t1) <> 7);")"
expect_empty "as many cudaMemsets as mallocs" "$(cuda_check "$S")"
expect_empty "no drops" "$(sq "$S" "SELECT 'dropped:', * FROM drops WHERE events > 0")"

# ---- ctl pause acts within 100 ms in each of 8 busy processes ----
SHIMMER_LOSSLESS=1 run busy "$T/busy.log" launch 8 busy 8 $SIZE &
LPID=$!
for i in $(seq 200); do
	[ "$("$SHIMMER" ctl status --job busy --socket "$SOCK" --format csv 2>/dev/null | tail -n +2 |
		wc -l)" = 8 ] && break
	sleep 0.025
done
sleep 0.5
out=$(timed "$SHIMMER" ctl pause --job busy --socket "$SOCK" --format csv 2>&1)
rc=$?
T1=$(mono)
T0=$(head -1 <<< "$out")
out=$(tail -n +2 <<< "$out")
sleep 0.5
out2=$(timed "$SHIMMER" ctl window 200ms --job busy --socket "$SOCK" --format csv 2>&1)
rc2=$?
T2=$(head -1 <<< "$out2")
out2=$(tail -n +2 <<< "$out2")
wait $LPID
sleep 0.5
S=$(store_of busy)
slowest=$(tail -n +2 <<< "$out" | awk -F, '{ if ($4 > m) m = $4 } END { print m + 0 }')
# The daemon's word (each process's own time of acting, against the
# daemon's time of asking): every one within 100 ms.
check "ctl pause: all 8 processes (launcher, forked and exec'd workers) acted within 100 ms of the daemon's command; the slowest after $((slowest / 1000)) us" \
	"status $rc: $out" [ $rc = 0 -a "$(tail -n +2 <<< "$out" | awk -F, '$4 != ""' | wc -l)" = 8 -a "$slowest" -le 100000000 ]
# The log's word, independent of both: the processes went on, and nothing
# they did after the command returned (every process had acted) is stored.
load_log "$T/busy.log" "$T/busy.check" "$S"
WLOGF=$T/busy.log lines O O "pid INTEGER, t0 INTEGER, t1 INTEGER, n INTEGER"
check "8 busy processes logged ops" "$(q 'SELECT count(DISTINCT pid) FROM main.O')" \
	[ "$(q 'SELECT count(DISTINCT pid) FROM main.O')" = 8 ]
check "shimmer ctl pause returned $(( (T1 - T0) / 1000000 )) ms after it was started (at most 1 s)" \
	"T0 $T0 T1 $T1" [ $((T1 - T0)) -le 1000000000 ]
expect_empty "each went on after the pause (its log), and nothing it did between the command's return and the window is stored" "$(q "
SELECT 'pid', o.pid, 'no op logged between the pause and the window' FROM (SELECT DISTINCT pid FROM main.O) o
	WHERE NOT EXISTS (SELECT 1 FROM main.O x WHERE x.pid = o.pid AND x.t0 > $T1 AND x.t1 < $T2);
SELECT 'pid', x.pid, 'op stored', (x.ns - $T1) / 1000000, 'ms after the pause returned'
	FROM ($ops_sql) x WHERE x.ns > $T1 AND x.ns < $T2 LIMIT 10;")"
expect_empty "each process stored no op after its own pause marker (until the window)" "$(sq "$S" "
SELECT 'pid', p.pid, 'op after its pause marker' FROM processes p JOIN allocations a USING (proc_id)
	WHERE a.size = $SIZE AND a.space = 'host' AND a.alloc_ns < $T2 AND a.alloc_ns > (SELECT min(m.ts_ns)
	FROM markers m JOIN strings s ON s.proc_id = m.proc_id AND s.id = m.name_id
	WHERE m.proc_id = p.proc_id AND s.text = 'shimmer.pause') LIMIT 10;")"
check "ctl window 200ms: all 8 acted" "status $rc2: $out2" \
	[ $rc2 = 0 -a "$(tail -n +2 <<< "$out2" | awk -F, '$4 != ""' | wc -l)" = 8 ]
# Each process's window: from its own resume marker (when it acted) to its
# pause marker, which must be 200 ms later (+-20); ops stored in it, none
# after it (against the log: the processes went on), and every batch the
# log places inside it stored whole: the stored window is the one the
# process recorded.  The daemon keeps the deadline: the end is the moment
# it wrote the pause, so a window is as late as the daemon was busy
# elsewhere.  It meets every process's deadlines between any two drains
# and every 256 records (before: at each process's own turn in a pass,
# which made the 8 windows 233 to 350 ms under TSan on a loaded machine,
# one drain later each): the 8 windows end within 20 ms of each other.
# What is left is a daemon that does not get round at all: a store commit
# took up to 199 ms under TSan with the 2 cores loaded (5 to 40 ms
# usually; a few ms in the normal build), so under a sanitizer a window
# may end up to 100 ms late (the one such run seen: 33 ms) and the normal
# build keeps +-20.
late_ms=20
if ldd "$SHIMMERD" 2>/dev/null | grep -q 'lib[at]san'; then
	late_ms=100
fi
win="SELECT p.pid, (SELECT max(m.ts_ns) FROM s.markers m JOIN s.strings n ON n.proc_id = m.proc_id
	AND n.id = m.name_id WHERE m.proc_id = p.proc_id AND n.text = 'shimmer.resume') AS r,
	(SELECT max(m.ts_ns) FROM s.markers m JOIN s.strings n ON n.proc_id = m.proc_id
	AND n.id = m.name_id WHERE m.proc_id = p.proc_id AND n.text = 'shimmer.pause') AS e
	FROM s.processes p WHERE p.pid IN (SELECT pid FROM main.O) AND p.end_reason IS NOT 'exec'"
expect_empty "ctl window 200ms: each process recorded 200 ms (-20, +$late_ms), the 8 within 20 ms of each other, stored ops in it and none after, every batch logged in it stored" "$(q "
SELECT 'pid', w.pid, 'window of', (w.e - w.r) / 1000000, 'ms' FROM ($win) w
	WHERE w.r IS NULL OR w.e IS NULL OR w.e - w.r NOT BETWEEN 180000000 AND $((200 + late_ms))000000;
SELECT 'windows from', min(w.e - w.r) / 1000000, 'to', max(w.e - w.r) / 1000000, 'ms' FROM ($win) w
	HAVING max(w.e - w.r) - min(w.e - w.r) > 20000000;
SELECT 'pid', o.pid, 'batch logged in its window at', (o.t0 - w.r) / 1000000, 'ms:', (SELECT count(*)
	FROM ($ops_sql) x WHERE x.pid = o.pid AND x.ns BETWEEN o.t0 AND o.t1), 'of 10 ops stored'
	FROM main.O o JOIN ($win) w ON w.pid = o.pid WHERE o.t0 > w.r AND o.t1 < w.e AND (SELECT count(*)
	FROM ($ops_sql) x WHERE x.pid = o.pid AND x.ns BETWEEN o.t0 AND o.t1) <> 10;
SELECT 'pid', w.pid, 'stored nothing in its window' FROM ($win) w WHERE NOT EXISTS (
	SELECT 1 FROM ($ops_sql) x WHERE x.pid = w.pid AND x.ns BETWEEN w.r AND w.e);
SELECT 'pid', w.pid, 'no op logged after its window' FROM ($win) w WHERE NOT EXISTS (
	SELECT 1 FROM main.O o WHERE o.pid = w.pid AND o.t0 > w.e);
SELECT 'pid', x.pid, 'op stored', (x.ns - w.e) / 1000000, 'ms after its window closed'
	FROM ($ops_sql) x JOIN ($win) w ON w.pid = x.pid WHERE x.ns > w.e LIMIT 10;")"

state_of() { # JOB: the state ctl status gives its (first) process, once it has one
	local st i
	for i in $(seq 100); do
		st=$("$SHIMMER" ctl status --job "$1" --socket "$SOCK" --format csv 2>/dev/null |
			awk -F, 'NR == 2 { print $5 }')
		[ -n "$st" ] && break
		sleep 0.025
	done
	echo "$st"
}

# ---- SHIMMER_CONTROL=0 ----
SHIMMER_CONTROL=0 run noctl "" busy 1.5 $SIZE &
LPID=$!
st=$(state_of noctl)
out=$("$SHIMMER" ctl pause --job noctl --socket "$SOCK" 2>&1)
rc=$?
wait $LPID
check "SHIMMER_CONTROL=0: ctl says the process takes no commands, status 1" "state '$st'; status $rc: $out" \
	holds '[ "$st" = "recording (no control)" -a $rc = 1 ] && grep -q '\''takes no commands'\'' <<< "$out"'

# ---- defaults from the service configuration ----
cat > "$T/service.conf" <<EOF
socket = $SOCK
SHIMMER_START = paused
SHIMMER_MALLOC = al
EOF
env -u SHIMMER_SOCKET LD_PRELOAD=$SHIM SHIMMER_CONFIG="$T/service.conf" SHIMMER_JOB=conf WL_LOG= \
	"$WLJ" busy 1 $SIZE 2> "$T/conf.err" &
LPID=$!
st=$(state_of conf)
wait $LPID
check "without SHIMMER_SOCKET the shim takes the socket and SHIMMER_START=paused from the configuration" \
	"state '$st'" [ "$st" = paused ]
check "a bad value in the configuration is one line naming the file" "$(cat "$T/conf.err")" \
	grep -q "SHIMMER_MALLOC=al (in $T/service.conf) is not" "$T/conf.err"
check "collector exits 0 on SIGTERM" "see $T/collector.log" stop_collector
finish
