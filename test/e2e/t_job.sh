#!/bin/bash
# One job, one recording (the service's state directory): 8 processes of a
# Slurm job started at once, one of which forks a child and one of which
# forks a child that execs, make one recording with every process, the
# right parents and 8 ranks, beside another job's running at the same time;
# a launcher's workers join the launcher's job whatever their own launcher
# variable says (torchrun's TORCHELASTIC_RUN_ID); without any key the
# process group is the job; SHIMMER_JOB names it; a job seen again after
# its recording was finished gets a new one.  Every count is checked
# against the workload's own log.
. "$(dirname "$0")/lib.sh"
need "$SHIM" "$SHIMMERD" "$SHIMMER" "$O/test/e2e/wl_job"
WLJ=$O/test/e2e/wl_job
SIZE=12347
STATE=$T/state
start_service "$STATE" --job-linger 400ms || { not_ok "collector starts"; finish; }

member() { # LOG SLURM_ID RANK N DIR [fork|exec]
	local log=$1 id=$2 rank=$3
	shift 3
	LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK SHIMMER_MALLOC=all SHIMMER_HEAP_ROWS=all SLURM_JOB_ID=$id RANK=$rank \
		WL_LOG=$log "$WLJ" member "$1" $SIZE "$2" ${3:-}
}
mkdir "$T/j1" "$T/j2"
pids=
for r in 0 1 2 3 4 5 6 7; do
	extra=
	[ $r = 0 ] && extra=fork
	[ $r = 1 ] && extra=exec
	member "$T/j1.log" 4242 $r 8 "$T/j1" $extra &
	pids="$pids $!"
done
for r in 0 1; do
	member "$T/j2.log" 4343 $r 2 "$T/j2" &
	pids="$pids $!"
done
rc=0
for p in $pids; do wait $p || rc=1; done
check "10 processes of two Slurm jobs exit 0" "see $T/j1.log" [ $rc = 0 ]
sleep 0.8 # past the linger: finished
recs=$(recordings)
n1=$(awk -F, '$1 == "slurm:4242"' <<< "$recs" | wc -l)
n2=$(awk -F, '$1 == "slurm:4343"' <<< "$recs" | wc -l)
check "one recording per job (slurm:4242, slurm:4343)" "$recs" [ "$n1" = 1 -a "$n2" = 1 ]
row=$(awk -F, '$1 == "slurm:4242" { print $6 "," $7 "," $9 }' <<< "$recs")
check "slurm:4242: 11 processes (8, a forked child, a child before and after exec), 8 ranks, done" \
	"$row" [ "$row" = "11,8,done" ]
row=$(awk -F, '$1 == "slurm:4343" { print $6 "," $7 }' <<< "$recs")
check "slurm:4343: 2 processes, 2 ranks" "$row" [ "$row" = "2,2" ]
S1=$(awk -F, '$1 == "slurm:4242" { print $10 }' <<< "$recs")
S2=$(awk -F, '$1 == "slurm:4343" { print $10 }' <<< "$recs")
tree() { # LOG STORE: the logged processes against the stored ones
	load_log "$1" "$T/check.db" "$2"
	q "
SELECT 'logged, not stored:', pid, img FROM main.P x WHERE NOT EXISTS (
	SELECT 1 FROM s.processes p WHERE p.pid = x.pid AND p.ppid = x.ppid
	AND (p.argv LIKE '%\"child\"%') = (x.img = 1));
SELECT 'stored, not logged:', pid FROM s.processes WHERE pid NOT IN (SELECT pid FROM main.P);
SELECT 'parent of', p.pid, 'is not its logged parent' FROM s.processes p
	WHERE p.pid IN (SELECT pid FROM main.P WHERE ppid IN (SELECT pid FROM main.P))
	AND coalesce((SELECT q.pid FROM s.processes q WHERE q.proc_id = p.parent_proc_id), -1) <> p.ppid;
SELECT 'mallocs of $SIZE in', p.pid, ':', count(a.id) FROM s.processes p
	LEFT JOIN s.allocations a ON a.proc_id = p.proc_id AND a.size = $SIZE AND a.space = 'host'
	WHERE p.argv NOT LIKE '%\"exec\"%' OR p.end_reason <> 'exec'
	GROUP BY p.proc_id HAVING count(a.id) <> 10;"
}
expect_empty "slurm:4242: every logged process stored, with its parent, 10 mallocs each" "$(tree "$T/j1.log" "$S1")"
expect_empty "slurm:4343: the same, none of the other job's" "$(tree "$T/j2.log" "$S2")"
x=$(sq "$S1" "SELECT count(*) FROM processes WHERE end_reason = 'exec' AND pid IN
	(SELECT pid FROM processes GROUP BY pid HAVING count(*) = 2)")
check "the exec'd child: its first image ended 'exec', its second follows under the same pid" "$x" [ "$x" = 1 ]
x=$(sq "$S1" "SELECT value FROM meta WHERE key = 'job'")
check "the store says its job (meta.job)" "$x" [ "$x" = "slurm:4242" ]
check_integrity "slurm:4242 store integrity" "$S1"

# torchrun's shape: a launcher without a key (its process group is the
# job) whose workers carry TORCHELASTIC_RUN_ID: one recording, the
# launcher's.
setsid bash -c 'echo $$ > "$1"; shift; exec "$@"' _ "$T/pgid" \
	env LD_PRELOAD="$SHIM" SHIMMER_SOCKET="$SOCK" SHIMMER_MALLOC=all SHIMMER_HEAP_ROWS=all WL_LOG="$T/l.log" \
	WLJ_WORKER_ENV=TORCHELASTIC_RUN_ID=run-77 "$WLJ" launch 4 child $SIZE
rc=$?
PG=$(cat "$T/pgid")
sleep 0.8
recs=$(recordings)
row=$(awk -F, -v k="pgid:$PG" '$1 == k { print $6 }' <<< "$recs")
check "launcher and workers: one recording, keyed by the launcher's process group (pgid:$PG)" \
	"status $rc; $recs" [ $rc = 0 -a "$row" = 6 ]
check "no recording for the workers' own TORCHELASTIC_RUN_ID" "$recs" \
	[ -z "$(grep '^torchelastic:' <<< "$recs")" ]

# Unrelated processes with one SHIMMER_JOB: one recording.
mkdir "$T/n"
pids=
for r in 0 1 2; do
	LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK SHIMMER_JOB="my job" RANK=$r WL_LOG= \
		"$WLJ" member 3 $SIZE "$T/n" &
	pids="$pids $!"
done
wait $pids
sleep 0.8
recs=$(recordings)
row=$(awk -F, '$1 == "my_job" { print $6 "," $7 }' <<< "$recs")
check "SHIMMER_JOB='my job': one recording of 3 processes (key my_job)" "$recs" [ "$row" = "3,3" ]
# The same key after the recording was finished: a new recording.
LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK SHIMMER_JOB="my job" WL_LOG= "$WLJ" child $SIZE
sleep 0.8
n=$(recordings | awk -F, '$1 == "my_job"' | wc -l)
check "a job key seen again after its recording finished starts a new one" "$(recordings)" [ "$n" = 2 ]

# ls's start, duration and size against the clock around a program of known
# length (wl_job alone: 400 ms of heap calls, then a fork) and the file
t0=$(date +%s%N)
LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK SHIMMER_JOB=timed WL_LOG= "$WLJ" alone 400 $SIZE
t1=$(date +%s%N)
sleep 0.8 # past the linger: finished
row=$(recordings | awk -F, '$1 == "timed"')
IFS=, read -r _ _ _ start dur _ _ size state path <<< "$row"
real=$(stat -c %s "$path" 2> /dev/null)
check "ls: start within the program's run, duration at least its 400 ms and at most the run, size the file's ($row; run $(((t1 - t0) / 1000000)) ms, file $real bytes)" \
	"$row" holds '[ "$state" = done ] && [ "$start" -ge "$t0" ] && [ "$start" -le "$t1" ] &&
		[ "$dur" -ge 400000000 ] && [ "$dur" -le $((t1 - t0)) ] && [ "$size" = "$real" ]'
check "collector exits 0 on SIGTERM" "see $T/collector.log" stop_collector
finish
