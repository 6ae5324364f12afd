#!/bin/bash
# Two users, made for the test (issue 13; needs root, as CI is): the
# second can neither read the first's store nor write rows as the first's
# processes.
#  - u1's `shimmer run` store (0600) and a shared daemon's store cannot be
#    read by u2;
#  - against a shared daemon (run by root, socket 0666), u2 claims the pid
#    of u1's traced process, and then u1's uid: both refused, and the only
#    rows of u1's uid are u1's own process.
. "$(dirname "$0")/lib.sh"
need "$SHIM" "$SHIMMERD" "$SHIMMER" "$WL" "$BADCLIENT"

if [ "$(id -u)" != 0 ] || ! command -v useradd > /dev/null; then
	ok "two users # SKIP needs root and useradd"
	finish
fi
U1=shimmer-t1-$$ U2=shimmer-t2-$$
users_cleanup() { userdel "$U1" 2> /dev/null; userdel "$U2" 2> /dev/null; cleanup; }
trap users_cleanup EXIT
useradd -M -N -s /bin/sh "$U1" && useradd -M -N -s /bin/sh "$U2" ||
	{ not_ok "useradd"; finish; }
as() { local u=$1; shift; setpriv --reuid="$u" --regid="$(id -g "$u")" --init-groups "$@"; }
chmod 711 "$T"
mkdir -m 777 "$T/shared"

# u1's private store
(cd "$T/shared" && as "$U1" env WL_LOG=/dev/null "$SHIMMER" run --db u1.db -- \
	"$WL" simple 2 4096 0 > /dev/null 2> "$T/u1-run.err")
check "u1: shimmer run made its store" "$(tail -3 "$T/u1-run.err")" [ -s "$T/shared/u1.db" ]
out=$(as "$U2" "$SHIMMER" summary "$T/shared/u1.db" 2>&1)
rc=$?
check "u2 cannot read u1's store" "exit $rc: $out" \
	eval '[ $rc != 0 ] && grep -q "Permission denied\|unable to open\|cannot open" <<< "$out"'
out=$(as "$U2" cat "$T/shared/u1.db" 2>&1 > /dev/null)
check "u2 cannot read u1's store's bytes" "$out" [ -n "$out" ]

# a shared daemon
DB=$T/shared.db
start_collector "$DB" || { not_ok "collector starts"; finish; }
WLOG=$T/shared/u1.log
mkfifo "$T/shared/in"
chmod 666 "$T/shared/in"
as "$U1" env LD_PRELOAD="$SHIM" SHIMMER_SOCKET="$SOCK" SHIMMER_MALLOC=all WL_LOG="$WLOG" \
	"$WL" block < "$T/shared/in" > "$T/block.out" 2> "$T/block.err" &
bpid=$!
exec 7> "$T/shared/in"
for _ in $(seq 200); do grep -q ready "$T/block.out" 2> /dev/null && break; sleep 0.05; done
u1pid=$(sed -n 's/^P,\([0-9]*\),.*/\1/p' "$WLOG" | head -1)
check "u1's process traced by the shared daemon" "log: $(head -3 "$WLOG" 2> /dev/null)" [ -n "$u1pid" ]
# u2 claims u1's process, then u1's uid
out=$(as "$U2" "$BADCLIENT" "$SOCK" spoof "${u1pid:-1}" "$(id -u "$U1")" 2>&1)
rc=$?
check "u2's spoofed HELLOs refused" "$out" [ $rc = 0 ]
exec 7>&-
wait $bpid
check "collector exits 0" "see its log" stop_collector
u1uid=$(id -u "$U1")
got=$(sq "$DB" "SELECT count(*) FROM processes WHERE uid = $u1uid AND pid <> ${u1pid:-0}")
check "no row of u1's uid but u1's process" "$got other rows" [ "$got" = 0 ]
got=$(sq "$DB" "SELECT count(*) FROM processes WHERE pid = ${u1pid:-0} AND uid <> $u1uid")
check "no row claims u1's pid under another uid" "$got rows" [ "$got" = 0 ]
got=$(sq "$DB" "SELECT count(*) FROM processes WHERE pid = ${u1pid:-0} AND uid = $u1uid
	AND end_reason = 'exit'")
check "u1's process stored, ended as exit" "$got rows" [ "$got" = 1 ]
out=$(as "$U2" "$SHIMMER" summary "$DB" 2>&1)
check "u2 cannot read the shared store" "$out" eval '! grep -q "shimmer summary" <<< "$out"'
finish
