#!/bin/bash
# t_ctlattach: `shimmer ctl attach PID` through the shared daemon, started
# as t_service starts it (the user `shimmer`, a state directory of
# per-user recordings), against wl_attach (t_attach's workload) run by a
# user made here:
#  (a) a daemon with CAP_CHOWN only (the unit as shipped): one line naming
#      the missing capabilities, exit 1, nothing attached;
#  (b) with CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE (the drop-in of
#      docs/service.md): another user's request is refused in one line and
#      attaches nothing; the owner's attaches, and the recording, listed by
#      `shimmer ls` as the owner's and readable by them, holds exactly the
#      CUDA calls made between the attach and `shimmer ctl detach`, against
#      the workload's own log; after the detach none of our BPF programs is
#      loaded;
#  (c) root attaches to the user's process (--for 1s): the window ends it;
#  (d) the process's exit ends an attach ('exit'), and so does the
#      daemon's shutdown ('detach'); nothing stays loaded.
# Needs root, setpriv, useradd, systemd-sysusers and attach support
# (shimmerd --check-attach); else a SKIP with the reason.
. "$(dirname "$0")/lib.sh"
WLA=$O/test/e2e/wl_attach
need "$SHIMMER" "$SHIMMERD" "$WLA"

if [ "$(id -u)" != 0 ]; then
	ok "ctl attach # SKIP not root"
	finish
fi
avail=$("$SHIMMERD" --check-attach 2>&1)
if [ $? != 0 ]; then
	ok "ctl attach # SKIP ${avail#attach: }"
	finish
fi
for t in setpriv useradd systemd-sysusers sqlite3; do
	command -v $t > /dev/null || { not_ok "prerequisites" "$t missing (.ci/install-deps)"; finish; }
done
BPFTOOL=$(command -v bpftool || ls /usr/sbin/bpftool 2>/dev/null)
[ -n "$BPFTOOL" ] || { not_ok "prerequisites" "bpftool missing"; finish; }
ours() { "$BPFTOOL" prog show 2>/dev/null | grep -c ' name shm_'; }
# gone: true once none of our programs is loaded (the kernel frees them a
# grace period after their last reference).
gone() {
	local i
	for ((i = 0; i < 60; i++)); do [ "$(ours)" = 0 ] && return 0; sleep 0.05; done
	return 1
}
gone || { not_ok "prerequisites" "shm_* BPF programs loaded before the test: $(ours)"; finish; }

systemd-sysusers "$ROOT/dist/sysusers.d/shimmer.conf" > /dev/null 2>&1
getent passwd shimmer > /dev/null || { not_ok "prerequisites" "no user shimmer"; finish; }
UA=shimmer-ca-$$ UB=shimmer-cb-$$
users_cleanup() { userdel "$UA" 2> /dev/null; userdel "$UB" 2> /dev/null; cleanup; }
trap users_cleanup EXIT
useradd -M -N -s /bin/sh "$UA" && useradd -M -N -s /bin/sh "$UB" || { not_ok "useradd"; finish; }
as() { local u=$1; shift; setpriv --reuid="$u" --regid="$(id -g "$u")" --init-groups "$@"; }
chmod 711 "$T"
W=$T/w WDIR=$T/w
mkdir -m 777 "$W"

STATE=$T/state
install -d -o shimmer -g shimmer -m 711 "$STATE"
install -d -o shimmer -g shimmer -m 755 "$T/run"
SOCK=$T/run/sock
cat > "$T/shimmerd.conf" <<EOF
socket = $SOCK
state-dir = $STATE
job-linger = 300ms
EOF
# daemon CAPS: shimmerd as the unit runs it, as the user shimmer with the
# capabilities CAPS (setpriv's list, e.g. +chown).
daemon() {
	rm -f "$SOCK"
	setpriv --reuid=shimmer --regid=shimmer --clear-groups --inh-caps=-all,$1 \
		--ambient-caps=-all,$1 --bounding-set=-all,$1 \
		"$SHIMMERD" --config "$T/shimmerd.conf" --foreground 2>> "$T/collector.log" &
	CPID=$!
	for i in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
	[ -S "$SOCK" ] || { not_ok "the daemon starts" "$(tail -5 "$T/collector.log")"; finish; }
}

# wla_start NAME: wl_attach as user UA on a command pipe (fd 7); waits for
# "ready"; its pid in WPID.
wla_start() { wla_run_in "$W" "$1" as "$UA"; }
# ctl USER ARGS...: shimmer ctl as USER (root: -), stdout in $T/ctl.out,
# stderr in $T/ctl.err, the exit status in RC.
ctl() {
	local u=$1
	shift
	if [ "$u" = - ]; then
		"$SHIMMER" ctl "$@" --socket "$SOCK" > "$T/ctl.out" 2> "$T/ctl.err"
	else
		as "$u" "$SHIMMER" ctl "$@" --socket "$SOCK" > "$T/ctl.out" 2> "$T/ctl.err"
	fi
	RC=$?
}
# refused TEXT: exit 1, nothing on stdout, one line on stderr saying TEXT.
refused() {
	[ "$RC" = 1 ] && [ ! -s "$T/ctl.out" ] && [ "$(wc -l < "$T/ctl.err")" = 1 ] &&
		grep -q -- "$1" "$T/ctl.err"
}
# recording USER KEY: the path of USER's recording of job KEY (shimmer ls).
recording() {
	as "$1" "$SHIMMER" ls --socket "$SOCK" --format csv 2> /dev/null |
		awk -F, -v k="$2" '$1 == k { print $10; exit }'
}

# ---- (a) the unit as shipped: CAP_CHOWN only ------------------------------
daemon +chown
wla_start main
ctl "$UA" attach "$WPID"
check "a daemon without CAP_BPF/CAP_PERFMON: exit 1, one line naming both" \
	"exit $RC: $(cat "$T/ctl.err")" refused "CAP_BPF and CAP_PERFMON are missing"
check "... and nothing is attached" "$(ours) shm_* programs" [ "$(ours)" = 0 ]
kill -TERM $CPID
wait $CPID
CPID=

# ---- (b) with the drop-in's capabilities ----------------------------------
daemon +chown,+bpf,+perfmon,+sys_ptrace
wla cuda 1
ctl "$UB" attach "$WPID"
check "another user may not attach: exit 1, one line ('not yours')" \
	"exit $RC: $(cat "$T/ctl.err") $(cat "$T/ctl.out")" refused "pid $WPID is not yours"
check "... and nothing is attached" "$(ours) shm_* programs" [ "$(ours)" = 0 ]
ctl "$UB" detach "$WPID"
check "nor detach it" "exit $RC: $(cat "$T/ctl.err")" refused "is not attached"
ctl "$UA" attach "$WPID"
check "the owner attaches: exit 0, what was attached" "exit $RC: $(cat "$T/ctl.out" "$T/ctl.err")" \
	grep -q "^attached to $WPID: .*libcudart.*job attach:$WPID" "$T/ctl.out"
check "our BPF programs are loaded while attached" "$(ours) shm_* programs" [ "$(ours)" -ge 3 ]
ctl "$UA" attach "$WPID"
check "a second attach to the same process: one line" "exit $RC: $(cat "$T/ctl.err")" \
	refused "attached already"
wla mark in
wla cuda 4
wla failures
wla cuda 5
wla mark out
ctl "$UA" detach "$WPID"
check "the owner detaches: exit 0" "exit $RC: $(cat "$T/ctl.out" "$T/ctl.err")" \
	grep -q "^detached from $WPID" "$T/ctl.out"
check "after the detach none of our BPF programs is loaded" "$(ours) shm_* programs" gone
wla cuda 6
sleep 0.6 # past job-linger: the recording is finished
REC=$(recording "$UA" "attach:$WPID")
check "shimmer ls lists the recording to its owner" "$(as "$UA" "$SHIMMER" ls --socket "$SOCK" 2>&1)" \
	[ -n "$REC" ]
check "... not to the other user" "$(as "$UB" "$SHIMMER" ls --socket "$SOCK" 2>&1)" \
	[ -z "$(recording "$UB" "attach:$WPID")" ]
check "the recording is the owner's (uid, 0660) in recordings/UID" "$(stat -c '%U %a %n' "$REC" 2>&1)" \
	[ "$(stat -c '%U %a' "$REC")" = "$UA 660" -a "$(dirname "$REC")" = "$STATE/recordings/$(id -u "$UA")" ]
as "$UA" sqlite3 -readonly "$REC" "SELECT 1" > /dev/null 2>&1
check "the owner reads it" "sqlite3 as $UA failed" [ $? = 0 ]
cp "$REC" "$T/main.db"
load_log "$W/main.log" "$T/check.db" "$T/main.db"
IN_LO=$(awk -F, '$1 == "M" && $3 == "in" { print NR; exit }' "$W/main.log")
IN_HI=$(awk -F, '$1 == "M" && $3 == "out" { print NR; exit }' "$W/main.log")
INWIN="seq > $IN_LO AND seq < $IN_HI"
got=$(q "SELECT pid, uid, traced_by, end_reason FROM s.processes")
check "one attached process, the user's, ended by the detach" "got '$got'" \
	[ "$got" = "$WPID|$(id -u "$UA")|attach|detach" ]
n=$(q "SELECT count(*) FROM main.C WHERE $INWIN")
cols="tid, fn, ret, device, ptr, bytes, stream, kind, aux, aux2, gx, gy, gz, bx, by, bz, ptsz"
expect_empty "exactly the $n CUDA calls made between attach and detach, every field" "$(q "
CREATE TEMP VIEW exp_cuda AS SELECT $cols FROM main.C WHERE $INWIN;
CREATE TEMP VIEW got_cuda AS SELECT c.tid, f.name AS fn, c.ret,
	coalesce(c.device, -1) AS device, coalesce(c.ptr, 0) AS ptr,
	coalesce(c.bytes, 0) AS bytes, coalesce(c.stream, 0) AS stream,
	coalesce(c.copy_kind, 0) AS kind, coalesce(c.aux, 0) AS aux, coalesce(c.aux2, 0) AS aux2,
	coalesce(c.grid_x, 0) AS gx, coalesce(c.grid_y, 0) AS gy, coalesce(c.grid_z, 0) AS gz,
	coalesce(c.block_x, 0) AS bx, coalesce(c.block_y, 0) AS by, coalesce(c.block_z, 0) AS bz,
	c.per_thread_stream AS ptsz
	FROM s.cuda_calls c JOIN s.functions f USING (fn_id);
$(multiset_diff exp_cuda got_cuda "$cols")")"
expect_empty "exact counts of the window's CUDA calls" "$(q "
CREATE TEMP VIEW exp_n AS SELECT tid, fn, count(*) AS n FROM main.C WHERE $INWIN GROUP BY tid, fn;
CREATE TEMP VIEW got_n AS SELECT c.tid, f.name AS fn, c.count AS n FROM s.function_counts c
	JOIN s.functions f USING (fn_id) WHERE f.family = 'cuda';
$(multiset_diff exp_n got_n "tid, fn, n")")"
check "the window's calls are there at all" "$n calls logged" [ "$n" -gt 10 ]

# ---- (c) root, with a window ----------------------------------------------
t0=$(date +%s%N)
ctl - attach "$WPID" --for 1s
check "root attaches to the user's process (--for 1s)" "exit $RC: $(cat "$T/ctl.out" "$T/ctl.err")" \
	[ "$RC" = 0 ]
gone
t1=$(date +%s%N)
check "--for 1s: detached by itself after about a second" \
	"$(((t1 - t0) / 1000000)) ms, $(ours) programs loaded" \
	[ "$(ours)" = 0 -a $((t1 - t0)) -ge 1000000000 -a $((t1 - t0)) -lt 6000000000 ]

# ---- (d) the process exits; the daemon stops ------------------------------
ctl "$UA" attach "$WPID"
check "attached again" "exit $RC: $(cat "$T/ctl.err")" [ "$RC" = 0 ]
wla cuda 7
wla exit 3
check "the process exits: nothing stays loaded" "$(ours) shm_* programs" gone
check "... with its own exit status" "$(cat "$W/main.rc")" [ "$(cat "$W/main.rc")" = 3 ]
EXITED=$WPID
wla_start last
ctl "$UA" attach "$WPID"
check "attached to a second process" "exit $RC: $(cat "$T/ctl.err")" [ "$RC" = 0 ]
kill -TERM $CPID
wait $CPID
rc=$?
CPID=
check "the daemon stops (status 0): nothing stays loaded" "status $rc, $(ours) programs" \
	eval '[ $rc = 0 ] && gone'
wla exit 0
check "the process is untouched" "$(cat "$W/last.rc")" [ "$(cat "$W/last.rc")" = 0 ]
daemon +chown
sleep 0.3
# The newest recording of each job, its newest row (the window's attach may
# share a recording with the next one, within job-linger).
got=$(for k in "attach:$EXITED" "attach:$WPID"; do
	sqlite3 "$(recording "$UA" "$k")" \
		"SELECT end_reason FROM processes ORDER BY start_ns DESC LIMIT 1"
done | tr '\n' ' ')
check "the rows end as 'exit' (the process's exit) and 'detach' (the daemon's stop)" \
	"got '$got'" [ "$got" = "exit detach " ]
stop_collector
finish
