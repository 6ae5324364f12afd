#!/bin/bash
# The service daemon SIGKILLed while a user's job runs on, and started
# again on the same state directory (issue 13, defect 11, in service mode),
# as the user `shimmer` with CAP_CHOWN only, as shimmerd.service runs it:
#  - the restart finishes the recording the dead daemon left, its live
#    processes ended 'collector_lost';
#  - the job's processes still running (lossy and lossless, 64 KiB rings)
#    say HELLO again, and the recording is opened again: each process one
#    row, continued and ended 'exit'; per process stored + dropped ==
#    produced, exactly, the loss counted as 'collector_lost'; the lossless
#    one does not stall;
#  - a later process of the job joins that recording; one that ended
#    before the restart stays 'collector_lost';
#  - while it is live again, the user reads it (its -wal and -shm are the
#    user's); `shimmer ls` lists it live, then finished again (one file)
#    once its last process ended;
#  - another user's reconnect HELLOs claiming a process of that recording
#    (its pid once it is free, start time, host and job) are refused, one
#    line each, and the recording is left as it was.
. "$(dirname "$0")/lib.sh"
WL_HARD=$O/test/e2e/wl_hard
need "$SHIM" "$SHIMMERD" "$SHIMMER" "$WL_HARD" "$BADCLIENT"

if [ "$(id -u)" != 0 ]; then
	ok "service restart checks need root (users, capabilities) # SKIP not root"
	finish
fi
for t in systemd-sysusers setpriv useradd; do
	command -v $t > /dev/null || { not_ok "prerequisites" "$t missing (.ci/install-deps)"; finish; }
done
chmod 711 "$T"
systemd-sysusers "$ROOT/dist/sysusers.d/shimmer.conf" > "$T/sysusers.out" 2>&1
for u in shrc-a shrc-b; do
	getent passwd $u > /dev/null || useradd -M -U -s /usr/sbin/nologin $u 2> /dev/null
done
getent passwd shimmer > /dev/null && getent passwd shrc-a > /dev/null &&
	getent passwd shrc-b > /dev/null ||
	{ not_ok "test users" "$(cat "$T/sysusers.out"): useradd failed"; finish; }
UA=$(id -u shrc-a)
as() { local u=$1; shift; setpriv --reuid=$u --regid=$u --init-groups "$@"; }

STATE=$T/state
install -d -o shimmer -g shimmer -m 711 "$STATE" "$T/run"
SOCK=$T/run/sock
export SHIMMERD_AS=shimmer
service() { start_service "$STATE" --job-linger 1s; }
# a traced wl_hard of shrc-a's in job `train`: OUT-NAME LOSSLESS ARGS...
job() {
	local name=$1 lossless=$2
	shift 2
	as shrc-a env LD_PRELOAD="$SHIM" SHIMMER_SOCKET="$SOCK" SHIMMER_JOB=train \
		SHIMMER_LOSSLESS=$lossless SHIMMER_RING_KB=64 SHIMMER_MALLOC=all \
		SHIMMER_HEAP_ROWS=all "$WL_HARD" "$@" > "$T/$name.out" 2> "$T/$name.err"
}
lsa() { as shrc-a "$SHIMMER" ls --socket "$SOCK" --format csv 2>&1 | tail -n +2; }

service || { not_ok "daemon starts"; finish; }
N=30000
job rc.lossy 0 load 2 $N keep 10000 &
pid_lossy=$!
job rc.lossless 1 load 2 $N keep 10000 &
pid_lossless=$!
# and one that ends (~0.8 s) before the daemon comes back
job gone 0 load 1 8000 keep 10000 &
pid_gone=$!
REC=
for _ in $(seq 200); do
	REC=$(ls "$STATE/recordings/$UA/"train-*.db 2> /dev/null | head -1)
	[ -n "$REC" ] && [ "$(sq "$REC" "SELECT count(DISTINCT proc_id) FROM allocations" 2> /dev/null)" = 3 ] &&
		break
	sleep 0.05
done
{ kill -KILL "$CPID"; wait "$CPID"; } 2> /dev/null
CPID=
check "the job's recording is made (and the daemon SIGKILLed mid-ingest)" "no recording in $STATE" \
	[ -n "$REC" ]
sleep 1.5
wait "$pid_gone"
rc=$?
check "no daemon back before exit: the program exits 0, one stderr line says what was lost" \
	"exit $rc; stderr: $(cat "$T/gone.err")" \
	holds '[ $rc = 0 ] && [ "$(wc -l < "$T/gone.err")" = 1 ] &&
	grep -q "^shimmer: the collector was lost and no other came back before exit" "$T/gone.err"'

# (the pids above are of the shells that run them)
pid_gone=$(sq "$REC" "SELECT pid FROM processes WHERE argv LIKE '%8000%'")
lines=$(wc -l < "$T/collector.log")
service || { not_ok "daemon restarts"; finish; }
restarted=$(date +%s%N)
check "restart: the recording left live is finished, its 3 processes ended 'collector_lost'" \
	"log: $(tail -n +$lines "$T/collector.log" | head -5)" \
	grep -q "$REC: 3 processes were live when the collector stopped" "$T/collector.log"
for _ in $(seq 200); do
	grep -q "recording $REC of uid $UA continued" "$T/collector.log" && break
	sleep 0.05
done
check "a process of the job comes back: its recording is continued" \
	"log: $(tail -n +$lines "$T/collector.log" | head -8)" \
	grep -q "recording $REC of uid $UA continued" "$T/collector.log"
state=$(lsa | awk -F, -v p="$REC" '$10 == p { print $9 }')
check "shimmer ls lists the recording live again" "$(lsa)" [ "$state" = live ]
check "its -wal and -shm are shrc-a's: the user reads it while it is written" \
	"$(ls -l "$REC"* 2>&1)" \
	[ "$(stat -c %U "$REC-wal" 2> /dev/null)" = shrc-a -a "$(stat -c %U "$REC-shm" 2> /dev/null)" = shrc-a ]
out=$(as shrc-a "$SHIMMER" summary "$REC" --format csv 2>&1)
check "shrc-a reads the recording while it is live again (shimmer summary)" "$(head -3 <<< "$out")" \
	grep -q ',malloc,' <<< "$out"
# a later process of the job joins the recording
job later 0 load 1 777 keep 10
rc=$?
check "a later process of the job exits 0" "exit $rc: $(cat "$T/later.err")" [ $rc = 0 ]
wait_reconnected

# finished again once its last process left (job-linger 1 s)
for _ in $(seq 100); do
	[ "$(lsa | awk -F, -v p="$REC" '$10 == p { print $9 }')" = done ] && break
	sleep 0.05
done
recs=$(lsa)
row=$(awk -F, -v p="$REC" '$10 == p { print $1 "," $6 "," $9 }' <<< "$recs")
check "shimmer ls: one recording of the job, 4 processes, finished again" "$recs" \
	holds '[ "$row" = "train,4,done" ] && [ "$(wc -l <<< "$recs")" = 1 ]'
check "finished again: one file (no -wal, no -shm), still shrc-a's, 0660" "$(ls -l "$REC"* 2>&1)" \
	[ ! -e "$REC-wal" -a ! -e "$REC-shm" -a "$(stat -c '%U %a' "$REC")" = "shrc-a 660" ]
check_integrity "the continued recording passes integrity_check" "$REC"
check_reconnected "$REC" $N
got=$(sq "$REC" "SELECT end_reason FROM processes WHERE pid = $pid_gone")
check "the process that ended before the restart: its row stays collector_lost" "got '$got'" \
	[ "$got" = collector_lost ]
got=$(sq "$REC" "SELECT count(*) || ',' || min(end_reason) FROM processes WHERE argv LIKE '%777%'")
check "the later process of the job is in the continued recording, ended 'exit'" "got '$got'" \
	[ "$got" = "1,exit" ]

# ---- another user forges reconnects into it ----
# shrc-b takes the pid of the process that is gone (the kernel's next pid
# set just below it), then claims its start time, host and job; then the
# same with its own start time.  Both refused, one line each; the
# recording untouched.
gone_start=$(sq "$REC" "SELECT start_ns FROM processes WHERE pid = $pid_gone")
host=$(sq "$REC" "SELECT hostname FROM processes WHERE pid = $pid_gone")
sum0=$(md5sum < "$REC")
lines=$(wc -l < "$T/collector.log")
for i in 1 2 3 4 5; do
	echo $((pid_gone - 1)) > /proc/sys/kernel/ns_last_pid 2> /dev/null
	as shrc-b "$BADCLIENT" "$SOCK" reconnect-as "$gone_start" "$host" train > "$T/forge1.out" 2>&1
	rc1=$?
	[ "$(sed -n 's/^pid //p' "$T/forge1.out")" = "$pid_gone" ] && break
done
bpid1=$(sed -n 's/^pid //p' "$T/forge1.out")
echo "# forged with pid $bpid1 (the lost process's: $pid_gone)"
as shrc-b "$BADCLIENT" "$SOCK" reconnect-as 0 "$host" train > "$T/forge2.out" 2>&1
rc2=$?
bpid2=$(sed -n 's/^pid //p' "$T/forge2.out")
sleep 0.3
n1=$(tail -n +$((lines + 1)) "$T/collector.log" | grep -c "rejecting pid $bpid1:")
n2=$(tail -n +$((lines + 1)) "$T/collector.log" | grep -c "rejecting pid $bpid2:")
check "shrc-b's reconnect as the lost process's pid, start, host and job: refused, one line" \
	"exit $rc1: $(cat "$T/forge1.out"); log: $(tail -n +$((lines + 1)) "$T/collector.log")" \
	[ $rc1 = 0 -a "$n1" = 1 ]
check "shrc-b's reconnect with its own start time, the host and job: refused, one line" \
	"exit $rc2: $(cat "$T/forge2.out"); log: $(tail -n +$((lines + 1)) "$T/collector.log")" \
	[ $rc2 = 0 -a "$n2" = 1 ]
recs=$(lsa)
row=$(awk -F, -v p="$REC" '$10 == p { print $6 "," $9 }' <<< "$recs")
check "the recording left as it was: finished, 4 processes, the file unchanged" "$recs" \
	holds '[ "$row" = "4,done" ] && [ "$(md5sum < "$REC")" = "$sum0" ] && [ ! -e "$REC-wal" ]'
out=$(as shrc-b "$SHIMMER" ls --socket "$SOCK" --format csv 2>&1 | tail -n +2)
check "shrc-b has no recording" "$out" [ -z "$out" ]
check "the daemon exits 0 on SIGTERM" "see $T/collector.log" stop_collector
finish
