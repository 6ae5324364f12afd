#!/bin/bash
# The service on the GPU machine (issue 14): shimmer installed (make
# install into OUTDIR/inst), shimmerd started as shimmerd.service starts
# it (no systemd there: the installed binary, --foreground, its
# configuration file), and traced processes that find it through that file
# (SHIMMER_SOCKET unset):
#  1. a 2-rank torchrun job (train.py --ddp, NCCL) makes one recording,
#     with both ranks and the launcher, and kernels from both ranks;
#  2. SHIMMER_START=after-range:step:W, SHIMMER_STOP=after-range:step:W+A
#     on the training loop records the kernels of steps W+1..W+A only:
#     per kernel name, exactly torch.profiler's over the same steps
#     (schedule wait=W, warmup=0, active=A).
# Prints rows of the short table (check, shimmer, oracle, PASS/FAIL) and
# exits non-zero if one fails.  Run by test/gpu/run-gpu-tests after `make`;
# (1) trains with DDP over NCCL with 2 GPUs (nvidia-h100-x2), both ranks on
# one GPU without a process group otherwise.
# Usage: test/gpu/service.sh [OUTDIR]
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:-${OUT:-/tmp/shimmer-gpu}}/service
rm -rf "$out"
mkdir -p "$out"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
if [ -d .gpudeps/root/usr/lib/x86_64-linux-gnu ]; then
	export LD_LIBRARY_PATH=$PWD/.gpudeps/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
failed=0
# sql DB QUERY: the rows, fields joined by |  (python's sqlite3: the GPU
# machine may lack the sqlite3 command)
sql() {
	python3 -c 'import sqlite3, sys
for r in sqlite3.connect(sys.argv[1]).execute(sys.argv[2]):
    print("|".join("" if v is None else str(v) for v in r))' "$1" "$2" 2>&1
}
row() { # CHECK SHIMMER ORACLE GOOD(0/1)
	printf '%-44s %14s %14s  %s\n' "$1" "$2" "$3" "$([ "$4" = 1 ] && echo PASS || echo FAIL)"
	[ "$4" = 1 ] || failed=$((failed + 1))
}

P=$out/inst
if ! make -s install PREFIX="$P/usr" SYSCONFDIR="$P/etc" >"$out/install.log" 2>&1; then
	row "service: make install" "failed" "-" 0
	exit 1
fi
conf=$P/etc/shimmer/shimmerd.conf
cat >"$conf" <<EOF
socket = $out/shimmer.sock
state-dir = $out/state
job-linger = 3s
EOF
"$P/usr/bin/shimmerd" --foreground --config "$conf" 2>"$out/shimmerd.log" &
dpid=$!
trap 'kill -TERM $dpid 2>/dev/null; wait $dpid 2>/dev/null' EXIT
for i in $(seq 100); do [ -S "$out/shimmer.sock" ] && break; sleep 0.05; done
traced() { env -u SHIMMER_SOCKET LD_PRELOAD="$P/usr/lib/libshimmer.so" SHIMMER_CONFIG="$conf" "$@"; }
ls_csv() { env -u SHIMMER_SOCKET SHIMMER_CONFIG="$conf" "$P/usr/bin/shimmer" ls --format csv | tail -n +2; }

# 1. torchrun, 2 ranks
# (every kernel recorded: sampling windows of a 20-step job can miss a
# rank's kernels; with one GPU, both ranks train on it without a process group: NCCL
# refuses two ranks on one device; the job's recording is the same)
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ "$ngpu" -ge 1 ]; then
	before=$(ls_csv | wc -l)
	ddp=(--ddp)
	[ "$ngpu" -ge 2 ] || ddp=()
	echo "   torchrun: $ngpu GPU(s), ${ddp[*]:-no process group}"
	SHIMMER_GPU=all traced torchrun --standalone --nproc-per-node 2 test/gpu/train.py "${ddp[@]}" --steps 20 \
		>"$out/ddp.out" 2>"$out/ddp.err"
	rc=$?
	sleep 4 # past job-linger: finished
	recs=$(ls_csv)
	new=$(( $(wc -l <<<"$recs") - before ))
	rec=$(head -1 <<<"$recs") # newest first
	db=$(cut -d, -f10 <<<"$rec")
	row "service: torchrun 2 ranks: recordings made" "$new" 1 "$([ $rc = 0 -a "$new" = 1 ] && echo 1)"
	row "service: torchrun: ranks in the recording" "$(cut -d, -f7 <<<"$rec")" 2 \
		"$([ "$(cut -d, -f7 <<<"$rec")" = 2 ] && echo 1)"
	launcher=$(sql "$db" "SELECT count(*) FROM processes WHERE rank IS NULL AND argv LIKE '%torchrun%'")
	row "service: torchrun: the launcher in it" "$launcher" ">=1" "$([ "${launcher:-0}" -ge 1 ] 2>/dev/null && echo 1)"
	k=$(sql "$db" "SELECT count(DISTINCT p.rank) FROM kernels k JOIN processes p USING (proc_id)")
	row "service: torchrun: ranks with kernels" "$k" 2 "$([ "$k" = 2 ] && echo 1)"
	echo "   recording: $rec"
	echo "   processes: $(sql "$db" "SELECT group_concat(pid || ':' || coalesce(rank, '-') || ':' || end_reason, ' ') FROM processes")"
else
	echo "service: torchrun 2 ranks: SKIP (no GPU)"
fi

# 2. after-range on the training loop, against torch.profiler's schedule
W=${WAIT_STEPS:-8} A=${ACTIVE_STEPS:-5}
run=(python3 test/gpu/train.py --steps 15 --warmup 3 --sync-steps)
SHIMMER_JOB=after-range SHIMMER_GPU=all SHIMMER_START=after-range:step:$W \
	SHIMMER_STOP=after-range:step:$((W + A)) traced "${run[@]}" >"$out/ar.out" 2>"$out/ar.err"
rc=$?
"${run[@]}" --profile "$out/ar_prof.json" --profile-wait "$W" --profile-active "$A" \
	>"$out/ar_prof.out" 2>"$out/ar_prof.err"
rc2=$?
sleep 4
db=$(ls_csv | awk -F, '$1 == "after-range" { print $10; exit }')
python3 - "$db" "$out/ar_prof.json" "$rc" "$rc2" >"$out/ar.check" <<'EOF'
import json, sqlite3, sys
db, prof, rc, rc2 = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ours = {}
if db:
    for name, n in sqlite3.connect(db).execute(
            "select name, count(*) from kernels_named group by 1"):
        ours[name] = n
theirs = {k: v[0] for k, v in json.load(open(prof)).items()} if rc2 == 0 else {}
diff = sorted(set(ours) | set(theirs), key=lambda n: -abs(ours.get(n, 0) - theirs.get(n, 0)))
bad = [n for n in diff if ours.get(n, 0) != theirs.get(n, 0)]
print(sum(ours.values()), sum(theirs.values()), len(bad), rc)
for n in bad[:5]:
    print(f"   count: shimmer {ours.get(n, 0)} torch {theirs.get(n, 0)}  {n[:90]}")
EOF
read -r ours theirs bad rc_run <"$out/ar.check"
row "service: after-range:step:$W..$((W + A)) kernels" "$ours" "$theirs" \
	"$([ "$rc_run" = 0 -a "${bad:-1}" = 0 -a "${ours:-0}" -gt 0 ] && echo 1)"
tail -n +2 "$out/ar.check"
echo "service: $failed FAILED" | sed 's/: 0 FAILED/: ALL PASS/'
[ "$failed" = 0 ]
