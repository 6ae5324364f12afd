#!/bin/bash
# Hostile clients beside a well-behaved one (issue 13): while test/e2e/
# badclient holds 1100 idle connections (as another user when we are root)
# against a collector limited to 256 descriptors, races memfd size and
# seals, spoofs pids and uids, forges reconnects, and floods valid strings (64 KiB ones, and
# names that demangle to gigabytes), the collector stays alive and nearly
# idle, refuses each bad client, and stores a traced program completely.
. "$(dirname "$0")/lib.sh"
# Rows are compared with the workload's log, and a flood of rows fills a
# small disk: a row per event (the default `all` mode aggregates the heap).
export SHIMMER_HEAP_ROWS=all
need "$SHIM" "$SHIMMERD" "$WL" "$BADCLIENT"

DB=$T/store.db
WLOG=$T/wl.log
chmod 711 "$T" # the socket (0666) is reachable by the other user
SHIMMERD_NOFILE=256 start_collector "$DB" || { not_ok "collector starts"; finish; }

if [ "$(id -u)" = 0 ]; then
	as_other() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
else
	as_other() { "$@"; }
fi
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$CPID/stat"; }

as_other "$BADCLIENT" "$SOCK" idle 1100 30 > "$T/idle.out" 2> "$T/idle.err" &
idle_pid=$!
for _ in $(seq 200); do grep -q '^held' "$T/idle.out" && break; sleep 0.05; done
held=$(sed -n 's/^held //p' "$T/idle.out")
check "idle: connections opened" "$(cat "$T/idle.out" "$T/idle.err")" [ "${held:-0}" -ge 1000 ]

t0=$(cpu_ticks)
sleep 2
t1=$(cpu_ticks)
ticks=$(getconf CLK_TCK)
check "idle: collector uses under 25% of a CPU with $held idle connections" \
	"$((t1 - t0)) ticks of $((2 * ticks)) in 2 s" [ $(((t1 - t0) * 100)) -lt $((2 * ticks * 25)) ]

FAKE_CUDA_DELAY_NS=1000000 traced "$WL" trace > /dev/null 2> "$T/wl.err" &
wpid=$!
"$BADCLIENT" "$SOCK" race 300 > "$T/race.out" 2>&1
rc=$?
check "race: 300 regions shrunk and sealed after HELLO, each refused" "$(tail -2 "$T/race.out")" [ $rc = 0 ]
"$BADCLIENT" "$SOCK" spoof > "$T/spoof.out" 2>&1
rc=$?
check "spoof: HELLOs claiming another pid or uid refused" "$(tail -2 "$T/spoof.out")" [ $rc = 0 ]
"$BADCLIENT" "$SOCK" reconnect > "$T/reconnect.out" 2>&1
rc=$?
check "reconnect: HELLOs resuming a row no collector lost, or of an earlier process, refused" \
	"$(tail -2 "$T/reconnect.out")" [ $rc = 0 ]
"$BADCLIENT" "$SOCK" flood 2 > "$T/flood.out" 2>&1
rc=$?
check "flood: 2 s of valid strings, client kept" "$(tail -2 "$T/flood.out")" [ $rc = 0 ]
for c in oversize corrupt; do
	"$BADCLIENT" "$SOCK" $c > "$T/bad-$c.out" 2>&1
	rc=$?
	check "$c: refused" "$(tail -2 "$T/bad-$c.out")" [ $rc = 0 ]
done
timeout 60 tail --pid=$wpid -f /dev/null
wait $wpid
rc=$?
check "good client traced meanwhile exits 0" "exit status $rc: $(head -c 300 "$T/wl.err")" [ $rc = 0 ]
served=
wl_pid=$(sed -n 's/^P,\([0-9]*\),.*/\1/p' "$WLOG" | head -1)
for _ in $(seq 100); do
	served=$(sq "$DB" "SELECT count(*) FROM processes WHERE pid = ${wl_pid:-0}
		AND end_reason = 'exit'" 2>/dev/null)
	[ "$served" = 1 ] && break
	sleep 0.05
done
check "good client served while the idle connections are still held" \
	"stored: '$served'; idle holder alive: $(kill -0 $idle_pid 2>&1 && echo yes)" \
	[ "$served" = 1 -a -d /proc/$idle_pid ]
check "collector survives" "it died; log: $(tail -5 "$T/collector.log")" kill -0 "$CPID"
kill "$idle_pid" 2> /dev/null
wait "$idle_pid" 2> /dev/null
check "collector says why it refused connections" "log: $(tail -5 "$T/collector.log")" \
	grep -q "connections refused\|closed without HELLO" "$T/collector.log"
check "collector exits 0 on SIGTERM" "see collector log" stop_collector

load_log "$WLOG" "$T/check.db" "$DB"
expect_empty "good client: processes and threads" "$(diff_procs exit)"
expect_empty "good client: CUDA calls" "$(diff_cuda)"
expect_empty "good client: allocations" "$(diff_allocs)"
expect_empty "good client: function_counts" "$(diff_counts)"
got=$(q "SELECT count(*) FROM s.processes WHERE uid <> (SELECT uid FROM s.processes p
	WHERE p.pid IN $PIDS) OR pid NOT IN (SELECT pid FROM s.processes)")
check "no row speaks for another process or user" "$got rows" [ "$got" = 0 ]
check_integrity "store passes integrity_check" "$DB"
finish
