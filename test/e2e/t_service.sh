#!/bin/bash
# shimmerd as a system service, checked against the real consumers: `make
# install` and `make uninstall` (every file, and nothing left), the units
# through `systemd-analyze verify`, the man pages through `man --warnings`,
# the sysusers.d file through systemd-sysusers; then the daemon started as
# shimmerd.socket and shimmerd.service would start it: systemd-socket-activate
# (a real listening socket passed as LISTEN_FDS, the daemon exec'd at the
# first connection), as the user `shimmer` with CAP_CHOWN only, its
# readiness read from a real NOTIFY_SOCKET.  Two users created here each
# record a job: each lists, reads and commands only their own; the
# recordings are theirs (owner, mode) and unreadable to the other.
. "$(dirname "$0")/lib.sh"
need "$SHIM" "$SHIMMERD" "$SHIMMER" "$O/test/e2e/wl_job"
WLJ=$O/test/e2e/wl_job

if [ "$(id -u)" != 0 ]; then
	ok "service checks need root (users, capabilities) # SKIP not root"
	finish
fi
for t in systemd-analyze systemd-socket-activate systemd-sysusers setpriv useradd man python3; do
	command -v $t > /dev/null || { not_ok "prerequisites" "$t missing (.ci/install-deps)"; finish; }
done
chmod 711 "$T"

# ---- make install / uninstall ----
P=$T/inst
make -s -C "$ROOT" O="$O" install PREFIX="$P/usr" SYSCONFDIR="$P/etc" > "$T/install.out" 2>&1
rc=$?
check "make install" "status $rc: $(tail -5 "$T/install.out")" [ $rc = 0 ]
want="etc/shimmer/shimmerd.conf usr/bin/shimmer usr/bin/shimmerd usr/include/shimmer.h
usr/lib/libshimmer.so usr/lib/systemd/system/shimmerd.service
usr/lib/systemd/system/shimmerd.socket usr/lib/sysusers.d/shimmer.conf
usr/share/man/man1/shimmer.1 usr/share/man/man7/libshimmer.7 usr/share/man/man8/shimmerd.8
usr/share/shimmer/schema/001_core.sql usr/share/shimmer/systemd/attach.conf"
missing=
for f in $want; do [ -f "$P/$f" ] || missing="$missing $f"; done
expect_empty "make install: binaries, library, header, schema, man pages, units, sysusers, config" "$missing"
check "the unit runs the installed shimmerd" "$(grep ExecStart "$P/usr/lib/systemd/system/shimmerd.service")" \
	grep -qx "ExecStart=$P/usr/bin/shimmerd --foreground" "$P/usr/lib/systemd/system/shimmerd.service"
out=$(MANPATH=$P/usr/share/man systemd-analyze verify "$P/usr/lib/systemd/system/shimmerd.socket" \
	"$P/usr/lib/systemd/system/shimmerd.service" 2>&1)
rc=$?
check "units pass systemd-analyze verify, silently" "status $rc: $out" [ $rc = 0 -a -z "$out" ]
exposure() {
	systemd-analyze security --offline=yes "$P/usr/lib/systemd/system/shimmerd.service" 2>&1 |
		sed -n 's/.*exposure level for shimmerd.service: \([0-9.]*\).*/\1/p'
}
score=$(exposure)
check "shimmerd.service's exposure (systemd-analyze security) is under 2.0: $score" "score '$score'" \
	awk -v s="$score" 'BEGIN { exit !(s != "" && s < 2.0) }'
# The drop-in that lets the daemon attach (shimmer ctl attach), put where
# an administrator would: the unit and it still verify, silently.
D=$P/usr/lib/systemd/system/shimmerd.service.d
mkdir -p "$D"
cp "$P/usr/share/shimmer/systemd/attach.conf" "$D/"
out=$(MANPATH=$P/usr/share/man systemd-analyze verify "$P/usr/lib/systemd/system/shimmerd.socket" \
	"$P/usr/lib/systemd/system/shimmerd.service" 2>&1)
rc=$?
check "with the attach drop-in: units pass systemd-analyze verify, silently" "status $rc: $out" \
	[ $rc = 0 -a -z "$out" ]
score=$(exposure)
check "with the attach drop-in: exposure under 2.0: $score (1.3 when written)" "score '$score'" \
	awk -v s="$score" 'BEGIN { exit !(s != "" && s < 2.0) }'
rm -r "$D"
bad=
for m in "$P"/usr/share/man/man*/*; do
	w=$(MANPATH=$P/usr/share/man man --warnings -l "$m" 2>&1 > /dev/null)
	[ -z "$w" ] || bad="$bad $(basename "$m"): $w"
done
expect_empty "man pages render without warnings (man --warnings)" "$bad"
printf '# edited\n' >> "$P/etc/shimmer/shimmerd.conf"
make -s -C "$ROOT" O="$O" install PREFIX="$P/usr" SYSCONFDIR="$P/etc" > /dev/null 2>&1
check "make install keeps an edited configuration" "$(tail -2 "$P/etc/shimmer/shimmerd.conf")" \
	grep -q '^# edited$' "$P/etc/shimmer/shimmerd.conf"
make -s -C "$ROOT" O="$O" uninstall PREFIX="$P/usr" SYSCONFDIR="$P/etc" > "$T/uninstall.out" 2>&1
left=$(cd "$P" && find . -type f | sort | tr '\n' ' ')
check "make uninstall removes every file but the edited configuration" "left: $left" \
	[ "$left" = "./etc/shimmer/shimmerd.conf " ]
make -s -C "$ROOT" O="$O" install PREFIX="$P/usr" SYSCONFDIR="$P/etc" > /dev/null 2>&1
cp "$ROOT/dist/shimmerd.conf" "$P/etc/shimmer/shimmerd.conf"
make -s -C "$ROOT" O="$O" uninstall PREFIX="$P/usr" SYSCONFDIR="$P/etc" > /dev/null 2>&1
left=$(cd "$P" && find . -type f | wc -l)
check "make uninstall of an unedited install leaves no file" "$left files left" [ "$left" = 0 ]

# ---- the configuration file: every key a flag, flags win, bad lines named ----
printf '# node\nmax-age = 7d\nmax-size = 500M\nSHIMMER_START = paused\n' > "$T/good.conf"
out=$("$SHIMMERD" --config "$T/good.conf" --max-age 1h --check-config 2>&1)
check "--check-config: the file's keys, a flag over the file, the shim's defaults" "$out" \
	holds 'grep -qx '\''max-age = 1h'\'' <<< "$out" && grep -qx '\''max-size = 500M'\'' <<< "$out" &&
	grep -qx '\''SHIMMER_START=paused'\'' <<< "$out"'
printf 'max-age = 7d\nbogus = 1\n' > "$T/bad.conf"
out=$("$SHIMMERD" --config "$T/bad.conf" --check-config 2>&1)
rc=$?
check "an unknown key: one line naming the file and line, exit 2" "status $rc: $out" \
	holds '[ $rc = 2 ] && grep -q "$T/bad.conf:2: unknown key bogus" <<< "$out"'
printf 'max-size = lots\n' > "$T/bad.conf"
out=$("$SHIMMERD" --config "$T/bad.conf" --check-config 2>&1)
rc=$?
check "a bad value: one line naming the file and line, exit 2" "status $rc: $out" \
	holds '[ $rc = 2 ] && grep -q "$T/bad.conf:1: max-size = lots is not a size" <<< "$out"'

# ---- the daemon's user, through the sysusers.d file ----
systemd-sysusers "$ROOT/dist/sysusers.d/shimmer.conf" > "$T/sysusers.out" 2>&1
check "systemd-sysusers makes the user shimmer" "$(cat "$T/sysusers.out"; getent passwd shimmer)" \
	getent passwd shimmer
for u in shsvc-a shsvc-b; do
	getent passwd $u > /dev/null || useradd -M -U -s /usr/sbin/nologin $u 2> /dev/null
done
getent passwd shsvc-a > /dev/null && getent passwd shsvc-b > /dev/null ||
	{ not_ok "test users" "useradd failed"; finish; }
UA=$(id -u shsvc-a) UB=$(id -u shsvc-b)
as() { local u=$1; shift; setpriv --reuid=$u --regid=$u --init-groups "$@"; }

# ---- the daemon as the units start it ----
STATE=$T/state
mkdir -p "$T/etc"
install -d -o shimmer -g shimmer -m 711 "$STATE"
cat > "$T/etc/shimmerd.conf" <<EOF
# as /etc/shimmer/shimmerd.conf would be
socket = $SOCK
state-dir = $STATE
job-linger = 300ms
max-age = 30d
max-size = 1G
EOF
cat > "$T/notify.py" <<'EOF'
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
import os
os.chmod(sys.argv[1], 0o666)
s.settimeout(float(sys.argv[2]))
try:
    while True:
        m = s.recv(4096).decode()
        print(m.replace("\n", " | "), flush=True)
except socket.timeout:
    pass
EOF
python3 "$T/notify.py" "$T/notify" 20 > "$T/notify.out" &
NPID=$!
for i in $(seq 50); do [ -S "$T/notify" ] && break; sleep 0.05; done
systemd-socket-activate --seqpacket -l "$SOCK" -E NOTIFY_SOCKET="$T/notify" \
	setpriv --reuid=shimmer --regid=shimmer --clear-groups --inh-caps=-all,+chown \
	--ambient-caps=-all,+chown --bounding-set=-all,+chown \
	"$SHIMMERD" --config "$T/etc/shimmerd.conf" --foreground 2> "$T/collector.log" &
CPID=$!
for i in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
chmod 666 "$SOCK" # shimmerd.socket's SocketMode=0666
sleep 0.3
check "socket activation: no daemon before the first connection" "notify: $(cat "$T/notify.out")" \
	[ ! -s "$T/notify.out" ]
"$SHIMMERD" --version > "$T/version"
check "shimmerd built with libsystemd" "$(cat "$T/version")" grep -q 'systemd yes' "$T/version"
# The first connection starts it; the answer comes once it is up.
as shsvc-a "$SHIMMER" ls --socket "$SOCK" > "$T/ls0" 2>&1
rc=$?
check "the first connection (shimmer ls) is answered by the activated daemon" \
	"status $rc: $(cat "$T/ls0"); log: $(head -5 "$T/collector.log")" [ $rc = 0 ]
for i in $(seq 100); do grep -q READY=1 "$T/notify.out" && break; sleep 0.05; done
check "READY=1 through NOTIFY_SOCKET" "notify: $(cat "$T/notify.out")" grep -q 'READY=1' "$T/notify.out"
check "the daemon took the socket from systemd (LISTEN_FDS)" "log: $(cat "$T/collector.log")" \
	grep -q 'socket activation' "$T/collector.log"
check "the daemon runs as shimmer, with CAP_CHOWN only" \
	"$(ps -o user=,pid= -p $CPID; grep Cap /proc/$CPID/status)" \
	[ "$(ps -o user= -p $CPID)" = shimmer -a "$(awk '/^CapEff/ { print $2 }' /proc/$CPID/status)" = 0000000000000001 ]

# ---- two users, each a job ----
run_as() { # USER JOB LOG ARGS...: a traced wl_job of USER, job JOB
	local u=$1 job=$2 log=$3
	shift 3
	as $u env LD_PRELOAD="$SHIM" SHIMMER_SOCKET="$SOCK" SHIMMER_JOB=$job SHIMMER_MALLOC=all SHIMMER_HEAP_ROWS=all \
		WL_LOG= "$WLJ" "$@" > "$log" 2>&1
}
run_as shsvc-a job-a "$T/a1.out" steps 3 5 12347 shimmer 0 &
A1=$!
run_as shsvc-b job-b "$T/b1.out" steps 3 5 12347 shimmer 0 &
B1=$!
wait $A1 $B1
sleep 0.8 # past job-linger: both recordings done
lsv() { as $1 "$SHIMMER" ls --socket "$SOCK" --format csv 2>&1; }
la=$(lsv shsvc-a) lb=$(lsv shsvc-b) lr=$("$SHIMMER" ls --socket "$SOCK" --format csv 2>&1)
check "shsvc-a lists its own recording only" "$la" \
	[ "$(tail -n +2 <<< "$la" | cut -d, -f1,2,6,9 | tr '\n' ' ')" = "job-a,shsvc-a,1,done " ]
check "shsvc-b lists its own recording only" "$lb" \
	[ "$(tail -n +2 <<< "$lb" | cut -d, -f1,2 | tr '\n' ' ')" = "job-b,shsvc-b " ]
check "root lists both" "$lr" [ "$(tail -n +2 <<< "$lr" | cut -d, -f1 | sort | tr '\n' ' ')" = "job-a job-b " ]
PA=$(tail -n +2 <<< "$la" | cut -d, -f10) PB=$(tail -n +2 <<< "$lb" | cut -d, -f10)
check "a's recording: under $STATE/recordings/$UA, owned by shsvc-a, group shimmer, 0660" \
	"$(stat -c '%U %G %a %n' "$PA" 2>&1)" \
	[ "$(stat -c '%U %G %a' "$PA")" = "shsvc-a shimmer 660" -a "$(dirname "$PA")" = "$STATE/recordings/$UA" ]
check "finished recordings are one file (no -wal, no -shm)" "$(ls "$(dirname "$PA")")" \
	[ -f "$PA" -a ! -e "$PA-wal" -a ! -e "$PA-shm" ]
out=$(as shsvc-a "$SHIMMER" summary "$PA" --format csv 2>&1)
check "shsvc-a reads its recording (shimmer summary)" "$(head -3 <<< "$out")" \
	grep -q ',malloc,' <<< "$out"
check "shsvc-a's recording holds its 15 mallocs of 12347 bytes" \
	"$(sqlite3 "$PA" 'SELECT count(*) FROM allocations WHERE size = 12347 AND space = '"'"'host'"'"'')" \
	[ "$(sqlite3 "$PA" 'SELECT count(*) FROM allocations WHERE size = 12347 AND space = '"'"'host'"'"'')" = 15 ]
out=$(as shsvc-b "$SHIMMER" summary "$PA" 2>&1)
rc=$?
check "shsvc-b cannot read a's recording (shimmer summary)" "status $rc: $out" \
	[ -f "$PA" -a $rc != 0 ]
out=$(as shsvc-b cat "$PA" 2>&1 > /dev/null)
check "shsvc-b cannot read a's file at all" "$out" grep -q 'Permission denied' <<< "$out"
out=$(as shsvc-b ls "$STATE/recordings/$UA" 2>&1)
check "shsvc-b cannot list a's recordings" "$out" grep -q 'Permission denied' <<< "$out"
out=$(as shsvc-a ls "$STATE/recordings" 2>&1)
check "nobody lists the recordings directory" "$out" \
	holds '[ -d "$STATE/recordings/$UA" ] && grep -q '\''Permission denied'\'' <<< "$out"'

# ---- control is the owner's (or root's) ----
run_as shsvc-a job-a2 "$T/a2.out" busy 4 12347 &
A2=$!
for i in $(seq 100); do
	PIDA=$(as shsvc-a "$SHIMMER" ctl status --socket "$SOCK" --format csv 2>/dev/null |
		awk -F, '$3 == "job-a2" { print $1 }')
	[ -n "$PIDA" ] && break
	sleep 0.05
done
check "shsvc-a sees its running process in ctl status" "pid '$PIDA'" [ -n "$PIDA" ]
out=$(as shsvc-b "$SHIMMER" ctl status --socket "$SOCK" --format csv 2>&1)
check "shsvc-b does not see it" "$out" \
	[ -n "$PIDA" -a "$(head -1 <<< "$out" | cut -d, -f1)" = pid -a "$(tail -n +2 <<< "$out" | wc -l)" = 0 ]
out=$(as shsvc-b "$SHIMMER" ctl pause --pid "$PIDA" --socket "$SOCK" 2>&1)
rc=$?
check "shsvc-b may not pause a's process (--pid)" "status $rc: $out" \
	holds '[ $rc = 1 ] && grep -q "is not yours" <<< "$out"'
out=$(as shsvc-b "$SHIMMER" ctl pause --job job-a2 --socket "$SOCK" 2>&1)
rc=$?
check "shsvc-b may not pause a's job (--job)" "status $rc: $out" \
	holds '[ -n "$PIDA" -a $rc = 1 ] && grep -q "no traced process of yours" <<< "$out"'
st=$(as shsvc-a "$SHIMMER" ctl status --socket "$SOCK" --format csv 2>&1 | awk -F, '$3 == "job-a2" { print $5 }')
check "a's process still records" "state '$st'" [ "$st" = recording ]
out=$(as shsvc-a "$SHIMMER" ctl pause --job job-a2 --socket "$SOCK" 2>&1)
rc=$?
st=$(as shsvc-a "$SHIMMER" ctl status --socket "$SOCK" --format csv 2>&1 | awk -F, '$3 == "job-a2" { print $5 }')
check "shsvc-a pauses its own job" "status $rc: $out; state '$st'" [ $rc = 0 -a "$st" = paused ]
out=$("$SHIMMER" ctl resume --pid "$PIDA" --socket "$SOCK" 2>&1)
rc=$?
st=$(as shsvc-a "$SHIMMER" ctl status --socket "$SOCK" --format csv 2>&1 | awk -F, '$3 == "job-a2" { print $5 }')
check "root resumes it" "status $rc: $out; state '$st'" [ $rc = 0 -a "$st" = recording ]
wait $A2

# ---- stopping ----
kill -TERM $CPID
wait $CPID
rc=$?
CPID=
check "the daemon stops on SIGTERM with status 0" "status $rc; log: $(tail -5 "$T/collector.log")" [ $rc = 0 ]
wait $NPID
check "STOPPING=1 through NOTIFY_SOCKET" "notify: $(cat "$T/notify.out")" grep -q 'STOPPING=1' "$T/notify.out"
check "the socket is systemd's: the daemon left it in place" "$(ls -la "$SOCK" 2>&1)" [ -S "$SOCK" ]
finish
