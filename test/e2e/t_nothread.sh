#!/bin/bash
# The shim creates no thread of its own: a traced single-threaded program
# stays single-threaded (its /proc/self/status, /proc/PID/task, and
# unshare(CLONE_NEWUSER), which the kernel refuses with EINVAL to a
# multi-threaded process), with time triggers planned and commands sent,
# in a fork child too; the collector keeps the deadlines and writes the
# control block, which the hooks apply (wl_job alone: a malloc a
# millisecond, logged).  And a command is in force in a process that makes
# no call at all (stopped): what it does once it goes on is recorded as
# the command said.
. "$(dirname "$0")/lib.sh"
need "$SHIM" "$SHIMMERD" "$SHIMMER" "$O/test/e2e/wl_job"
WLJ=$O/test/e2e/wl_job
SIZE=23459
start_service "$T/state" --job-linger 300ms || { not_ok "collector starts"; finish; }

spawn() { # JOB LOG ARGS...: a traced wl_job of job JOB in the background, $! its pid
	local job=$1 log=$2
	shift 2
	LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK SHIMMER_MALLOC=all SHIMMER_HEAP_ROWS=all SHIMMER_JOB=$job WL_LOG=$log \
		exec "$WLJ" "$@" &
}
store_of() { recordings | awk -F, -v j="$1" '$1 == j { print $10; exit }'; }
marks() { # STORE NAME: the marker's times
	sq "$1" "SELECT m.ts_ns FROM markers m JOIN strings s ON s.proc_id = m.proc_id
		AND s.id = m.name_id WHERE s.text = '$2' ORDER BY m.ts_ns"
}
# alone_checks NAME LOG TASKS: both processes single-threaded all along
alone_checks() {
	local name=$1 log=$2 tasks=$3
	check "$name: /proc/PID/task of the running process holds one thread" "tasks: '$tasks'" \
		[ "$tasks" = 1 ]
	check "$name: the process and its fork child each say Threads: 1 and unshare(CLONE_NEWUSER) succeeds" \
		"$(grep '^T,' "$log")" \
		[ "$(grep -c '^T,[0-9]*,1,0$' "$log")" = 2 ]
}
# tasks_of PID: the number of its threads, read from outside while it runs
tasks_of() { sleep 0.1; ls "/proc/$1/task" 2>/dev/null | wc -l; }

# ---- recording at once, a command while it runs ----
spawn plain "$T/plain.log" alone 400 $SIZE
P=$!
tasks=$(tasks_of $P)
out=$("$SHIMMER" ctl pause --pid $P --socket "$SOCK" --format csv 2>&1)
rc=$?
wait $P
alone_checks "SHIMMER_START=now, then ctl pause" "$T/plain.log" "$tasks"
check "ctl pause of the single-threaded process: in force" "status $rc: $out" \
	[ $rc = 0 -a "$(tail -n +2 <<< "$out" | awk -F, '$4 != ""' | wc -l)" = 1 ]

# ---- time triggers: after:150ms, recording for 200ms ----
SHIMMER_START=after:150ms SHIMMER_DURATION=200ms spawn timed "$T/timed.log" alone 600 $SIZE
P=$!
tasks=$(tasks_of $P)
wait $P
rc=$?
alone_checks "SHIMMER_START=after:150ms SHIMMER_DURATION=200ms" "$T/timed.log" "$tasks"
# The collector stores the markers at its next commit: on a loaded
# machine later than half a second after the exit (explore3's full run).
for _ in $(seq 100); do
	S=$(store_of timed)
	R=$(marks "$S" shimmer.resume 2> /dev/null) E=$(marks "$S" shimmer.pause 2> /dev/null)
	[ -n "$R" ] && [ -n "$E" ] && break
	sleep 0.1
done
start=$(sq "$S" "SELECT start_ns FROM processes WHERE end_reason IS NOT 'exec' ORDER BY proc_id LIMIT 1")
check "after:150ms without a thread: recording began 150 ms (+- 20) after the process, ended 200 ms (+- 20) later" \
	"status $rc; resume at +$(( (R - start) / 1000000 )) ms, pause $(( (E - R) / 1000000 )) ms later" \
	holds '[ -n "$R" ] && [ -n "$E" ] && [ $(( R - start )) -ge 130000000 -a $(( R - start )) -le 170000000 \
	-a $(( E - R )) -ge 180000000 -a $(( E - R )) -le 220000000 ]'
# The log's mallocs (t: just after each returned) against the stored ones:
# inside the window every one, outside none (1 ms of slack at the edges).
inside=$(awk -F, -v r="$R" -v e="$E" '$1 == "H" && $3 > r + 1000000 && $3 < e - 1000000' "$T/timed.log" | wc -l)
edges=$(awk -F, -v r="$R" -v e="$E" '$1 == "H" && $3 >= r && $3 <= e + 1000000' "$T/timed.log" | wc -l)
stored=$(sq "$S" "SELECT count(*) FROM allocations WHERE size = $SIZE AND space = 'host'")
outside=$(sq "$S" "SELECT count(*) FROM allocations WHERE size = $SIZE AND space = 'host'
	AND (alloc_ns < $R OR alloc_ns > $E)")
check "after:150ms: the mallocs of the window stored ($inside to $edges by the log), none outside the markers" \
	"stored $stored, $outside outside" \
	[ "$stored" -ge "$inside" -a "$stored" -le "$edges" -a "$inside" -ge 100 -a "$outside" = 0 ]

# ---- a stopped process: the command is in force without it ----
spawn stopped "$T/stopped.log" busy 1.2 $SIZE
P=$!
sleep 0.4
kill -STOP $P
out=$("$SHIMMER" ctl pause --pid $P --socket "$SOCK" --format csv 2>&1)
rc=$?
T1=$(python3 -c 'import time; print(time.monotonic_ns())')
st=$("$SHIMMER" ctl status --pid $P --socket "$SOCK" --format csv 2>/dev/null | awk -F, 'NR == 2 { print $5 }')
kill -CONT $P
wait $P
sleep 0.5
check "ctl pause of a stopped process: in force at once (status 0), ctl status says paused" \
	"status $rc: $out; state '$st'" [ $rc = 0 -a "$st" = paused ]
S=$(store_of stopped)
after=$(awk -F, -v t="$T1" '$1 == "O" && $3 > t' "$T/stopped.log" | wc -l)
stored=$(sq "$S" "SELECT count(*) FROM allocations WHERE size = $SIZE AND space = 'host' AND alloc_ns > $T1")
check "the stopped process went on ($after batches logged after the command) and nothing of it is stored" \
	"stored after the command: $stored" [ "$after" -ge 5 -a "$stored" = 0 ]
check "collector exits 0 on SIGTERM" "see $T/collector.log" stop_collector
finish
