#!/bin/bash
# Faults (issue 13):
#  - the collector is SIGKILLed mid-ingest and a new one starts on the same
#    store: it passes integrity_check, every stored row is one the program
#    logged (what was committed is whole), the cut-off process is ended as
#    'collector_lost' (not left live forever) until it reconnects, and the
#    new collector stores a new program completely;
#  - killed while programs run on, restarted: they reconnect, their rows go
#    on, and stored + dropped (collector_lost) == produced, exactly;
#  - the disk fills (a 1 MiB tmpfs, as root): the collector exits 1 with
#    one clear line and the traced program is unaffected (test_store
#    checks the store after a full disk);
#  - the same under `shimmer run` (its private collector dies): the
#    program's status passes through, the store reads, and the process the
#    collector left live ends 'collector_lost', which the commands call a
#    recording cut short (before: "end: still running", no warning, leaks
#    verdicts given); when no process was stored, the warning blames the
#    collector, not LD_PRELOAD;
#  - `shimmer run`'s collector SIGKILLed: the live rows it left end
#    'collector_lost' and the status is noted, in one transaction: a store
#    that refuses the status write (a trigger, standing in for a disk that
#    fills between the two) keeps neither (before: the rows ended, the
#    status lost, one warning).
# (Descriptor exhaustion in the collector: t_hostile.)
. "$(dirname "$0")/lib.sh"
# Rows are compared with the workload's log, and a flood of rows fills a
# small disk: a row per event (the default `all` mode aggregates the heap).
export SHIMMER_HEAP_ROWS=all
need "$SHIM" "$SHIMMERD" "$WL"

# -- killed mid-ingest, restarted -------------------------------------------
DB=$T/killed.db
WLOG=$T/long.log
start_collector "$DB" || { not_ok "collector starts"; finish; }
FAKE_CUDA_DELAY_NS=100000 traced "$WL" long 500 > /dev/null 2> "$T/long.err" &
wpid=$!
for _ in $(seq 200); do
	n=$(grep -c '^C' "$WLOG" 2> /dev/null)
	[ "${n:-0}" -ge 200 ] && break
	sleep 0.05
done
{ kill -KILL "$CPID"; wait "$CPID"; } 2> /dev/null
CPID=
live=$(sq "$DB" "SELECT count(*) FROM processes WHERE end_reason IS NULL" 2>&1)
check "killed: its process left live in the store" "got $live" [ "$live" = 1 ]
start_collector "$DB" || { not_ok "collector restarts"; finish; }
wait $wpid
rc=$?
check "killed: program carries on and exits normally" "exit $rc: $(head -c 300 "$T/long.err")" [ $rc = 3 ]
check "restart: says what it ended" "log: $(tail -3 "$T/collector.log")" \
	grep -q "1 processes were live in .* ended as 'collector_lost'" "$T/collector.log"
WLOG=$T/after.log
traced "$WL" trace > /dev/null 2> "$T/after.err"
check "restart: a new program runs" "exit $?" true
check "restart: collector exits 0" "see its log" stop_collector
check_integrity "killed: store passes integrity_check" "$DB"
load_log "$T/long.log" "$T/long-check.db" "$DB"
got=$(q "SELECT p.end_reason, p.end_ns >= p.start_ns FROM s.processes p WHERE p.pid IN $PIDS")
check "killed: the cut-off process reconnected, its row ended at its exit" "got '$got'" \
	[ "$got" = "exit|1" ]
extra=$(q "
CREATE TEMP VIEW got_c AS SELECT p.pid, c.tid, f.name AS fn, c.ret, coalesce(c.ptr, 0) AS ptr,
	coalesce(c.bytes, 0) AS bytes FROM s.cuda_calls c JOIN s.functions f USING (fn_id)
	JOIN s.processes p USING (proc_id) WHERE p.pid IN $PIDS;
SELECT count(*) FROM got_c;
SELECT 'stored, not logged:', * FROM (SELECT pid, tid, fn, ret, ptr, bytes FROM got_c EXCEPT
	SELECT pid, tid, fn, ret, ptr, bytes FROM main.C) LIMIT 5;")
n=$(head -1 <<< "$extra")
check "killed: what was committed is whole (every stored call was logged)" "$extra" \
	[ "$(wc -l <<< "$extra")" = 1 -a "${n:-0}" -gt 0 ]
load_log "$T/after.log" "$T/after-check.db" "$DB"
expect_empty "restart: the new program stored completely" "$(diff_procs exit)$(diff_cuda)$(diff_allocs)"

# kill_collector_at QUERY N: SIGKILLs the collector once QUERY on $DB
# gives N or more (10 s at most): mid-ingest, its programs running on.
kill_collector_at() {
	local n
	for _ in $(seq 200); do
		n=$(sq "$DB" "$1" 2> /dev/null)
		[ "${n:-0}" -ge "$2" ] && break
		sleep 0.05
	done
	{ kill -KILL "$CPID"; wait "$CPID"; } 2> /dev/null
	CPID=
}

# -- killed while programs run on: they reconnect ------------------------------
# Two programs (lossy and lossless, 64 KiB rings: they fill while no one
# reads) keep allocating while the collector is SIGKILLed and, 1.5 s later,
# a new one starts on the same store and socket: each says HELLO again,
# its row goes on and ends at its exit, and per process stored + dropped
# == produced, exactly (the dead collector's loss counted as
# 'collector_lost'); the lossless one does not stall on the dead collector.
WL_HARD=$O/test/e2e/wl_hard
need "$WL_HARD"
DB=$T/reconnect.db
N=30000
start_collector "$DB" || { not_ok "collector starts"; finish; }
for mode in lossy lossless; do
	SHIMMER_LOSSLESS=$([ $mode = lossless ] && echo 1 || echo 0) SHIMMER_RING_KB=64 \
		SHIMMER_MALLOC=all LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK \
		"$WL_HARD" load 2 $N keep 10000 > "$T/rc.$mode.out" 2> "$T/rc.$mode.err" &
	eval "pid_$mode=\$!"
done
# and one that ends (~0.8 s) before any collector comes back
SHIMMER_RING_KB=64 SHIMMER_MALLOC=all LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK \
	"$WL_HARD" load 1 8000 keep 10000 > "$T/rc.gone.out" 2> "$T/rc.gone.err" &
pid_gone=$!
kill_collector_at "SELECT count(DISTINCT proc_id) FROM allocations" 3
sleep 1.5
wait "$pid_gone"
rc=$?
good=0
[ $rc = 0 ] && [ "$(wc -l < "$T/rc.gone.err")" = 1 ] &&
	grep -q "^shimmer: the collector was lost and no other came back before exit: .* ([0-9]* events lost after it, [0-9]* KiB of records never read)" "$T/rc.gone.err" &&
	good=1
check "no collector back before exit: the program exits 0, one stderr line says what was lost" \
	"exit $rc; stderr: $(cat "$T/rc.gone.err")" [ $good = 1 ]
start_collector "$DB" || { not_ok "collector restarts"; finish; }
restarted=$(date +%s%N)
wait_reconnected
check "reconnect: collector exits 0" "see its log" stop_collector
check_integrity "reconnect: store passes integrity_check" "$DB"
check_reconnected "$DB" $N
got=$(sq "$DB" "SELECT end_reason FROM processes WHERE pid = $pid_gone")
check "no collector back before exit: its row ended as collector_lost" "got '$got'" \
	[ "$got" = collector_lost ]

# -- the collector that comes back keeps another store: refused, said -----------
# (as a restarted daemon does with a recording it finished): the program
# runs on, exits 0, and its one stderr line says the loss is not stored.
DB=$T/refused-a.db
start_collector "$DB" || { not_ok "collector starts"; finish; }
SHIMMER_RING_KB=64 SHIMMER_MALLOC=all LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK \
	"$WL_HARD" load 1 30000 keep 10000 > "$T/rf.out" 2> "$T/rf.err" &
pid_rf=$!
kill_collector_at "SELECT count(*) FROM allocations" 100
start_collector "$T/refused-b.db" || { not_ok "collector restarts"; finish; }
wait "$pid_rf"
rc=$?
good=0
[ $rc = 0 ] && [ "$(wc -l < "$T/rf.err")" = 1 ] &&
	grep -q "^shimmer: the collector was lost and the one that came back did not go on with this process" "$T/rf.err" &&
	good=1
check "refused reconnect: the program exits 0, one stderr line says the collector back did not go on" \
	"exit $rc; stderr: $(cat "$T/rf.err")" [ $good = 1 ]
check "refused reconnect: collector exits 0" "see its log" stop_collector
got=$(sq "$T/refused-b.db" "SELECT count(*) FROM processes WHERE pid = $pid_rf")
check "refused reconnect: no row of it in the other store" "got '$got'" [ "$got" = 0 ]

# -- disk full ------------------------------------------------------------------
if [ "$(id -u)" = 0 ] && unshare -m true 2> /dev/null; then
	mkdir "$T/small"
	WLOG=$T/full.log
	# In a mount namespace of its own, the collector writes to a 1 MiB tmpfs.
	fifo=$T/ready.full
	mkfifo "$fifo"
	unshare -m sh -c 'mount -t tmpfs -o size=1m tmpfs "$1" && exec "$2" --foreground \
		--socket "$3" --db "$1/full.db" --ready-fd 3 3> "$4"' sh "$T/small" "$SHIMMERD" \
		"$SOCK" "$fifo" 2> "$T/full.log.err" &
	CPID=$!
	timeout 20 head -c1 "$fifo" > /dev/null
	SHIMMER_MALLOC=all traced "$WL" flood 200 2000 > /dev/null 2> "$T/full.err"
	rc=$?
	check "disk full: the traced program is unaffected" "exit $rc" [ $rc = 0 ]
	for _ in $(seq 100); do kill -0 "$CPID" 2> /dev/null || break; sleep 0.05; done
	kill -TERM "$CPID" 2> /dev/null
	wait "$CPID"
	rc=$?
	CPID=
	check "disk full: collector exits 1" "exit $rc; log: $(tail -3 "$T/full.log.err")" [ $rc = 1 ]
	check "disk full: one clear line" "log: $(tail -3 "$T/full.log.err")" \
		grep -q "full" "$T/full.log.err"
	# shimmer run SIZE: `shimmer run` of wl flood with its store on a
	# tmpfs of SIZE; its stderr in $T/run-SIZE.err, the store copied to
	# $T/run-SIZE.db (the tmpfs goes with the namespace).
	run_full() {
		unshare -m sh -c 'mount -t tmpfs -o size=$1 tmpfs "$2" && \
			WL_LOG=/dev/null SHIMMER_MALLOC=all "$3" run --db "$2/full.db" -- \
			"$4" flood 100 2000 > /dev/null 2> "$5.err"; rc=$?; \
			for f in "$2"/full.db*; do cp "$f" "$5.db${f##*/full.db}"; done; exit $rc' \
			sh "$1" "$T/small" "$SHIMMER" "$WL" "$T/run-$1"
	}
	run_full 3m
	rc=$?
	check "disk full under shimmer run: the program's status, 0" "exit $rc" [ $rc = 0 ]
	got=$(sq "$T/run-3m.db" "SELECT end_reason || ' ' || coalesce(exit_status, '-')
		FROM processes")
	check "disk full under shimmer run: the process ended collector_lost, status kept" \
		"rows: '$got'; stderr: $(grep -v '^  ' "$T/run-3m.err" | head -c 600)" \
		[ "$got" = "collector_lost 0" ]
	out=$("$SHIMMER" summary "$T/run-3m.db" 2>&1)
	check "disk full under shimmer run: summary says the recording was cut short" \
		"summary: $(head -c 600 <<< "$out")" \
		grep -q "WARNING: the collector was lost while this process ran" <<< "$out"
	out=$("$SHIMMER" leaks "$T/run-3m.db" 2>&1)
	check "disk full under shimmer run: leaks says so, calls the process incomplete" \
		"leaks: $(head -c 600 <<< "$out")" \
		holds 'grep -q "WARNING: the collector was lost while this process ran" <<< "$out" &&
			"$SHIMMER" leaks "$T/run-3m.db" --format json | grep -q "\"complete\": *false"'
	run_full 300k
	rc=$?
	check "disk full before any process was stored: the program's status, 0" "exit $rc" \
		[ $rc = 0 ]
	check "disk full before any process was stored: the warning names the collector" \
		"stderr: $(grep -v '^  ' "$T/run-300k.err" | head -c 600)" \
		holds 'grep -q "the collector failed before it stored any process" "$T/run-300k.err" &&
			! grep -q "LD_PRELOAD" "$T/run-300k.err"'
else
	ok "disk full # SKIP needs root and unshare -m"
fi

# -- shimmer run's collector SIGKILLed --------------------------------------
# KILLRUN NAME SQL: `shimmer run` of a shell that runs SQL on the store
# (sqlite3 waits for the collector's lock), SIGKILLs its collector (the
# shimmerd child of its parent, shimmer run; found with builtins, so that
# no other process is traced) and exits 5.  The shell first sleeps (a row
# of its own, ended exit) 5 of the collector's commit periods (100 ms): the
# lock alone does not wait for the shell's row, and in one `make asan` on
# a loaded machine sqlite3 took it before the collector had stored that
# row (no rows at all).
killrun() {
	"$SHIMMER" run --db "$T/$1.db" -- sh -c '
		sleep 0.5
		sqlite3 -batch -cmd ".timeout 10000" "$1" "$2"
		for d in /proc/[0-9]*; do
			read -r c < "$d/comm" 2> /dev/null && [ "$c" = shimmerd ] &&
			read -r _ _ _ pp _ < "$d/stat" && [ "$pp" = "$PPID" ] && kill -KILL "${d#/proc/}"
		done
		exit 5' sh "$T/$1.db" "$2" > /dev/null 2> "$T/$1.err"
}
ends() { sq "$T/$1.db" "SELECT group_concat(coalesce(end_reason, 'live') || ' ' ||
	coalesce(exit_status, '-'), ',') FROM (SELECT * FROM processes ORDER BY proc_id)"; }
# (a trigger that never fires: the same processes as below; its write
# waits for the collector's commit of the shell's row)
killrun runkilled "CREATE TRIGGER never BEFORE UPDATE OF exit_status ON processes WHEN 0
	BEGIN SELECT RAISE(ABORT, 'never'); END"
rc=$?
got=$(ends runkilled)
# (sleep's row, then sqlite3's, whose end, or whole row, may die
# uncommitted with the collector: sqlite3 can take the lock between a
# commit and the collector's handling of its HELLO)
check "collector SIGKILLed under shimmer run: status 5, rows ended collector_lost, status noted" \
	"exit $rc, rows '$got', stderr: $(grep -v '^  ' "$T/runkilled.err" | head -c 400)" \
	holds '[ $rc = 5 ] && [[ $got =~ ^"collector_lost 5,exit -"(,(exit|collector_lost)" -")?$ ]]'
killrun refused "CREATE TRIGGER no_room BEFORE UPDATE OF exit_status ON processes
	BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END"
rc=$?
got=$(ends refused)
check "status write refused: neither it nor the ending of the live rows is kept, one warning" \
	"exit $rc, rows '$got', stderr: $(grep -v '^  ' "$T/refused.err" | head -c 400)" \
	holds '[ $rc = 5 ] && [ -n "$got" ] &&
		[ "$(grep -c "^shimmer: warning: cannot" "$T/refused.err")" = 1 ] &&
		! grep -q collector_lost <<< "$got" && ! grep -q " 5" <<< "$got"'
finish
