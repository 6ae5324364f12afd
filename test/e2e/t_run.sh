#!/bin/bash
# `shimmer run`: the program's stdout, stderr and exit status go through
# unchanged (a non-zero status, death by signal n as 128+n), the store gets
# the documented name, a summary goes to stderr, and `shimmer summary DB
# --format csv` counts the workload's cudaMalloc calls and bytes exactly.
. "$(dirname "$0")/lib.sh"
need "$SHIM" "$SHIMMERD" "$SHIMMER" "$WL"

N=5 SIZE=12345
all_in() { # FILE STRING...: every STRING occurs in FILE
	local f=$1 s
	shift
	for s in "$@"; do grep -qF -- "$s" "$f" || return 1; done
}
run_case() { # NAME EXIT_ARG EXPECTED_STATUS
	local name=$1 how=$2 want=$3 rc0 rc1 db=$T/$1.db
	WLOG=$T/$name.log
	("$WL" simple $N $SIZE "$how" > "$T/$name.out0" 2> "$T/$name.err0"; exit $?) 2> /dev/null
	rc0=$?
	(WL_LOG=$WLOG "$SHIMMER" run --db "$db" -- "$WL" simple $N $SIZE "$how" \
		> "$T/$name.out1" 2> "$T/$name.err1"; exit $?) 2> /dev/null
	rc1=$?
	check "$name: exit status $want, as untraced" "untraced $rc0, under shimmer run $rc1" \
		[ $rc0 = "$want" -a $rc1 = "$want" ]
	check "$name: stdout unchanged" "$(diff "$T/$name.out0" "$T/$name.out1" | head -5)" \
		cmp -s "$T/$name.out0" "$T/$name.out1"
	check "$name: program's stderr lines all there" "stderr: $(head -c 300 "$T/$name.err1")" \
		[ "$(grep -cxF -f "$T/$name.err0" "$T/$name.err1")" = "$(wc -l < "$T/$name.err0")" ]
	check "$name: summary on stderr names the store and cudaMalloc" \
		"stderr: $(head -c 600 "$T/$name.err1")" \
		all_in "$T/$name.err1" "$db" cudaMalloc
	grep -q "$db" "$T/$name.err1" || return
	local pid csv row
	pid=$(sed -n 's/^P,\([0-9]*\),.*/\1/p' "$WLOG")
	csv=$("$SHIMMER" summary "$db" --format csv 2>&1)
	check "$name: summary csv header" "got: $(head -1 <<< "$csv")" \
		grep -q '^pid,rank,event,count,bytes,total_ns,mean_ns,stddev_ns,min_ns,max_ns' <<< "$csv"
	row=$(awk -F, -v pid="$pid" '$1 == pid && $3 == "cudaMalloc" { print $4 "," $5 }' <<< "$csv")
	check "$name: csv has the $N cudaMalloc, $((N * SIZE)) bytes, of pid $pid" \
		"csv: $(head -5 <<< "$csv")" [ "$row" = "$N,$((N * SIZE))" ]
}
run_case ok 0 0
run_case status7 7 7
run_case signal sig15 143

# Issue 13, items 12 and 14: how the command ended is stored and shown,
# and a normal run says nothing of the collector's own stopping.
ended() { sq "$T/$1.db" "SELECT end_reason || '|' || coalesce(end_signal, '-') || '|' ||
	coalesce(exit_status, '-') FROM processes WHERE proc_id = (SELECT max(proc_id) FROM processes)"; }
check "ok: stored as exit, status 0" "got $(ended ok)" [ "$(ended ok)" = "exit|-|0" ]
check "status7: stored as exit, status 7" "got $(ended status7)" [ "$(ended status7)" = "exit|-|7" ]
check "signal: stored as signal 15" "got $(ended signal)" [ "$(ended signal)" = "signal|15|-" ]
check "status7: shown" "stderr: $(tail -3 "$T/status7.err1")" grep -q ": exit status 7$" "$T/status7.err1"
check "signal: shown" "stderr: $(tail -3 "$T/signal.err1")" \
	grep -q ": killed by signal 15 (Terminated)$" "$T/signal.err1"
check "ok: summary says end: exit, and no collector chatter" "stderr: $(head -c 600 "$T/ok.err1")" \
	eval 'grep -q "end: exit" "$T/ok.err1" && ! grep -q "^shimmerd:" "$T/ok.err1"'

# A static binary: a hint instead of a bare "0 processes".
if printf 'int main(void) { return 0; }\n' | cc -static -x c -o "$T/static" - 2> /dev/null; then
	"$SHIMMER" run --db "$T/static.db" -- "$T/static" > /dev/null 2> "$T/static.err"
	check "static binary: hint" "stderr: $(cat "$T/static.err")" \
		grep -q "is statically linked: LD_PRELOAD cannot reach it" "$T/static.err"
	# Read, the empty store says so: leaks printed nothing, exit 0 (read
	# as "no leak"), summary a bare "0 processes".
	for c in leaks summary bottlenecks export; do
		"$SHIMMER" $c "$T/static.db" > /dev/null 2> "$T/static.$c.err"
		check "an empty store: $c says it holds no process" "stderr: $(cat "$T/static.$c.err")" \
			holds '[ "$(wc -l < "$T/static.$c.err")" = 1 ] &&
				grep -q "holds no process: nothing was traced into it" "$T/static.$c.err"'
	done
	# Into a store that holds another run's process: the hint all the
	# same (it counted every process of the store), and no process of
	# the other run in the summary.
	cp "$T/ok.db" "$T/ok2.db"
	"$SHIMMER" run --db "$T/ok2.db" -- "$T/static" > /dev/null 2> "$T/static2.err"
	check "static binary into a store of another run: hint, no other run's process" \
		"stderr: $(cat "$T/static2.err")" \
		holds 'grep -q "is statically linked" "$T/static2.err" &&
			! grep -q "^Process" "$T/static2.err"'
	# A static launcher's traced child, into that store: this run's,
	# though no traced process is its parent.
	printf '#include <unistd.h>\n#include <sys/wait.h>\nint main(void) { if (fork() == 0) {
		execl("/bin/true", "true", "launched", (char *)0); _exit(1); } wait(0); return 0; }\n' |
		cc -static -x c -o "$T/launcher" - 2> /dev/null
	"$SHIMMER" run --db "$T/ok2.db" -- "$T/launcher" > /dev/null 2> "$T/launcher.err"
	check "a static launcher into a store of another run: its traced child is summarised" \
		"stderr: $(cat "$T/launcher.err")" \
		holds '[ "$(grep -c "^Process" "$T/launcher.err")" = 1 ] &&
			grep -q "command: true launched" "$T/launcher.err" &&
			! grep -q "statically linked" "$T/launcher.err"'
else
	ok "static binary: hint # SKIP no static libc to link with"
fi

# A --db that holds earlier runs (or another run's at the same time): the
# summary is this run's processes alone.  It showed the store's longest
# first, another run's sleep above this run's program.
"$SHIMMER" run --db "$T/shared.db" -- sleep 0.3 > /dev/null 2>&1
"$SHIMMER" run --db "$T/shared.db" -- sh -c 'sleep 0.6; /bin/true' > /dev/null 2> "$T/sh1.err" &
sh1=$!
sleep 0.2
"$SHIMMER" run --db "$T/shared.db" -- /bin/true one > /dev/null 2> "$T/true.err"
wait $sh1
got=$(grep -c "^Process" "$T/true.err")
check "--db of other runs: the summary shows this run's one process" \
	"got $got: $(grep -A1 "^Process" "$T/true.err")" \
	holds '[ "$got" = 1 ] && grep -A1 "^Process" "$T/true.err" | grep -q "command: /bin/true one"'
got=$(grep "^Process" "$T/sh1.err" | sed 's/.*: //' | sort | tr '\n' ' ')
check "--db of other runs: the concurrent run's summary has its tree only (sh, sleep, true)" \
	"got $got" holds '[ "$(grep -c "^Process" "$T/sh1.err")" = 3 ] &&
		! grep -A1 "^Process" "$T/sh1.err" | grep -q "command: /bin/true one" &&
		! grep -A1 "^Process" "$T/sh1.err" | grep -q "command: sleep 0.3"'

# A SIGKILLed shimmer run takes its collector with it.
"$SHIMMER" run --db "$T/killed.db" -- sleep 30 > /dev/null 2>&1 &
runner=$!
collector=
for _ in $(seq 100); do
	collector=$(pgrep -P $runner -x shimmerd) && [ -e "$T/killed.db" ] && break
	sleep 0.05
done
sleep 0.3
sleeper=$(pgrep -P $runner -x sleep)
kill -KILL $runner
wait $runner 2> /dev/null
for _ in $(seq 100); do [ -d "/proc/${collector:-0}" ] || break; sleep 0.05; done
check "SIGKILLed shimmer run: its collector ends too" "collector '${collector}' still there" \
	[ -n "$collector" -a ! -d "/proc/${collector:-0}" ]
[ -n "$sleeper" ] && kill -KILL $sleeper 2> /dev/null

check "shimmer --version" "$("$SHIMMER" --version 2>&1)" \
	grep -qE '^shimmer [0-9]+\.[0-9]+\.[0-9]+ \(wire format [0-9]+, reads store schema up to [0-9]+\)$' <<< "$("$SHIMMER" --version)"
check "shimmerd --version" "$("$SHIMMERD" --version 2>&1)" \
	grep -qE '^shimmerd [0-9.]+ \(wire format [0-9]+, store schema [0-9]+, systemd (yes|no)\)$' <<< "$("$SHIMMERD" --version)"
known=$(sed -n 's/^shimmerd .*store schema \([0-9]*\),.*/\1/p' <<< "$("$SHIMMERD" --version)")
check "shimmer and shimmerd know one schema version, the number of schema files" \
	"shimmerd $known, shimmer: $("$SHIMMER" --version)" \
	eval '[ "$known" = "$(ls "$ROOT"/schema/[0-9][0-9][0-9]_*.sql | wc -l)" ] &&
	      "$SHIMMER" --version | grep -q "up to $known)"'

# A store of a newer schema than the tools know (as a newer shimmerd
# leaves): every reader refuses it in one line, exit 1, nothing on stdout,
# and the file is left as it was.
cp "$T/ok.db" "$T/newer.db"
sq "$T/newer.db" "UPDATE meta SET value = '99' WHERE key = 'schema_version'"
sum0=$(md5sum < "$T/newer.db")
want="shimmer: error: store $T/newer.db has schema version 99; this shimmer reads up to $known: use a newer shimmer"
for cmd in summary leaks peak temporary allocations "export --format csv" \
	   "compare NEWER $T/ok.db" "compare $T/ok.db NEWER" bottlenecks \
	   "report NEWER -o $T/newer.html" "report $T/ok.db --baseline NEWER -o $T/newer.html"; do
	case $cmd in *NEWER*) set -- ${cmd//NEWER/$T/newer.db} ;;
	*) set -- $cmd; c=$1; shift; set -- "$c" "$T/newer.db" "$@" ;; esac
	"$SHIMMER" "$@" > "$T/newer.out" 2> "$T/newer.err"
	rc=$?
	check "newer store: $* refused in one line, exit 1, nothing on stdout" \
		"exit $rc, stdout $(head -c 200 "$T/newer.out"), stderr $(head -c 400 "$T/newer.err")" \
		eval '[ $rc = 1 ] && [ ! -s "$T/newer.out" ] && [ "$(cat "$T/newer.err")" = "$want" ]'
done
check "newer store: left as it was" "" [ "$(md5sum < "$T/newer.db")" = "$sum0" -a ! -e "$T/newer.html" ]

# A command line longer than HELLO carries (64 KiB with the path and host):
# stored cut at an argument's end, every stored argument whole, and marked
# (argv_bytes: the whole length, NULs between arguments counted); the
# summary's command line says so.  A short one: argv_bytes NULL.  2,000
# arguments of 500 bytes: the 64 KiB end falls inside one (before the fix
# the last stored argument was cut there, unmarked).
args=()
for i in $(seq 2000); do args+=("$(printf '%0500d' $i)"); done
"$SHIMMER" run --db "$T/long.db" -- /bin/true "${args[@]}" > /dev/null 2>&1
whole=$(( $(printf '%s\0' /bin/true "${args[@]}" | wc -c) - 1 ))
n=$(sq "$T/long.db" "SELECT json_array_length(argv) FROM processes")
bytes=$(sq "$T/long.db" "SELECT argv_bytes FROM processes")
stored=$(sq "$T/long.db" "SELECT value FROM processes, json_each(processes.argv)")
check "long argv: cut (fewer than 2,001 arguments) and marked with its whole length" \
	"stored $n arguments, argv_bytes $bytes, whole $whole" \
	[ "${n:-0}" -gt 100 -a "${n:-0}" -lt 2001 -a "$bytes" = "$whole" ]
check "long argv: cut at an argument's end, every stored argument whole" \
	"last stored: $(tail -1 <<< "$stored")" \
	[ "$stored" = "$(printf '%s\n' /bin/true "${args[@]:0:$((n - 1))}")" ]
kept=$(( $(printf '%s\0' /bin/true "${args[@]:0:$((n - 1))}" | wc -c) - 1 ))
out=$("$SHIMMER" summary "$T/long.db" 2>&1)
check "long argv: the summary's command says truncated, N of M bytes" \
	"got: $(grep command: <<< "$out" | tail -c 200)" \
	grep -q "^  command: /bin/true 0*1 .* \.\.\. (truncated: $kept of $whole bytes)$" <<< "$out"
check "long argv: summary JSON has argv_bytes" "" \
	grep -q "\"argv_bytes\": *$whole" <<< "$("$SHIMMER" summary "$T/long.db" --format json 2>&1)"
check "short argv: argv_bytes NULL" "got: $(sq "$T/ok.db" "SELECT quote(argv_bytes) FROM processes")" \
	[ "$(sq "$T/ok.db" "SELECT DISTINCT quote(argv_bytes) FROM processes")" = NULL ]

# Reading creates nothing beside the store, and works in a read-only
# directory (a read-only bind mount: root ignores directory modes).
mkdir "$T/ro"
cp "$T/ok.db" "$T/ro/"
"$SHIMMER" summary "$T/ro/ok.db" > /dev/null 2> "$T/ro.err"
check "reading a store leaves no -wal or -shm beside it" "files: $(ls "$T/ro")" \
	[ "$(ls "$T/ro")" = ok.db ]
if [ "$(id -u)" = 0 ] && unshare -m true 2> /dev/null; then
	out=$(unshare -m sh -c 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" &&
		"$2" summary "$1/ok.db"' sh "$T/ro" "$SHIMMER" 2>&1)
	check "reading a store in a read-only directory" "got: $(head -c 300 <<< "$out")" \
		grep -q "shimmer summary: 1 process" <<< "$out"
	# With a -wal beside it (a copy of a live store, or one whose
	# collector was killed) SQLite reads it through a -shm it must make
	# there: one line says so, not "not a shimmer store".
	mkdir "$T/rowal"
	cp "$T/ok.db" "$T/rowal/"
	python3 -c 'import os, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("PRAGMA journal_mode=WAL"); db.execute("PRAGMA wal_autocheckpoint=0")
db.execute("UPDATE meta SET value = value WHERE key = \"schema_version\""); db.commit()
os._exit(0)' "$T/rowal/ok.db"
	rm -f "$T/rowal/ok.db-shm"
	out=$(unshare -m sh -c 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" &&
		"$2" summary "$1/ok.db"' sh "$T/rowal" "$SHIMMER" 2>&1)
	check "a store with a -wal in a read-only directory: one line says why" \
		"files: $(ls "$T/rowal"); got: $(head -c 300 <<< "$out")" \
		holds '[ -e "$T/rowal/ok.db-wal" ] && [ "$(wc -l <<< "$out")" = 1 ] &&
			grep -q "it has a -wal file .* cannot open or create that file there" <<< "$out"'
else
	ok "reading a store in a read-only directory # SKIP needs root and unshare -m"
fi

# Closed, a small store is compacted (512-byte pages, one file).  A writer
# killed in the middle of a transaction in that mode (as in a compaction)
# leaves a hot journal: a reader must not read the torn file as immutable;
# it says what to do in one line, and reads the store whole after it.
check "shimmer run's store compacted at its close" \
	"page size $(sq "$T/ok.db" 'PRAGMA page_size'), files: $(ls "$T" | grep '^ok\.db')" \
	[ "$(sq "$T/ok.db" 'PRAGMA page_size')" = 512 -a "$(ls "$T" | grep -c '^ok\.db')" = 1 ]
cp "$T/ok.db" "$T/hot.db"
python3 - "$T/hot.db" <<'PY'
import os, sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute('PRAGMA cache_size = 2')  # spill: the file is written before the commit
db.execute('BEGIN')
db.execute('CREATE TABLE filler (x)')
db.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200)"
           " INSERT INTO filler SELECT zeroblob(900) FROM n")
db.execute('UPDATE processes SET exe = zeroblob(900)')
os._exit(0)  # killed: no commit, no rollback
PY
out=$("$SHIMMER" summary "$T/hot.db" 2>&1)
check "hot journal: one clear line, no torn read" "got: $(head -c 400 <<< "$out")" \
	eval '[ -s "$T/hot.db-journal" ] && [ "$(wc -l <<< "$out")" = 1 ] &&
	grep -q "has a hot journal.*PRAGMA quick_check" <<< "$out"'
sqlite3 "$T/hot.db" 'PRAGMA quick_check' > /dev/null
check "hot journal rolled back: the recording reads whole" "$("$SHIMMER" summary "$T/hot.db" 2>&1 | head -3)" \
	eval 'cmp -s <("$SHIMMER" summary "$T/ok.db" 2>&1) <("$SHIMMER" summary "$T/hot.db" 2>&1)'

# Without --db: the documented name, ./shimmer-HOST-PID-YYYYmmdd-HHMMSS.db
mkdir "$T/cwd"
(cd "$T/cwd" && WL_LOG=/dev/null "$SHIMMER" run -- "$WL" simple 1 4096 0 > /dev/null 2> ../default.err)
made=$(cd "$T/cwd" && ls)
check "default store name shimmer-HOST-PID-YYYYmmdd-HHMMSS.db" "files made: $made" \
	grep -qxE "shimmer-$(hostname)-[0-9]+-[0-9]{8}-[0-9]{6}\.db" <<< "$(ls "$T/cwd" | grep -v -- '-wal$\|-shm$')"

# Defect 4 of issue 13: stores are private, and a file already at the
# default name (predictable: host, pid, time) is never reused.
mode() { stat -c %a "$1"; }
store=$(cd "$T/cwd" && ls | grep -v -- '-wal$\|-shm$' | head -1)
check "default store is private (0600)" "mode $(mode "$T/cwd/$store")" [ "$(mode "$T/cwd/$store")" = 600 ]
check "--db store is private (0600)" "mode $(mode "$T/ok.db")" [ "$(mode "$T/ok.db")" = 600 ]
if [ "$(id -u)" = 0 ] && unshare -pf true 2> /dev/null; then
	# In a new pid namespace `shimmer run` is pid 1 and its program pid 2,
	# so the default name is known but for the second: plant them all, for
	# the next two minutes (a loaded machine under ThreadSanitizer took
	# over ten seconds to start the program).
	mkdir "$T/planted"
	for i in $(seq 0 119); do
		echo planted > "$T/planted/shimmer-$(hostname)-2-$(date -d "+$i sec" +%Y%m%d-%H%M%S).db"
	done
	(cd "$T/planted" && WL_LOG=/dev/null unshare -pf "$SHIMMER" run -- "$WL" simple 1 4096 0 \
		> /dev/null 2> ../planted.err)
	rc=$?
	check "planted default name: refused, said so, program ran untraced" \
		"exit $rc; stderr: $(head -c 400 "$T/planted.err")" \
		grep -q "already exists: a store at a default name is never reused" "$T/planted.err"
	check "planted default name: every planted file untouched" "$(cat "$T"/planted/* | sort | uniq -c)" \
		[ "$(cat "$T"/planted/* | sort -u)" = planted -a "$(ls "$T/planted" | wc -l)" = 120 ]
else
	ok "planted default name # SKIP needs root and unshare -p"
fi

# The summary `shimmer run` prints fits a screen: a job that runs many
# processes (a shell running 40 short children, as a JAX job runs ptxas)
# gets at most 5 of them in full, the rest one line per executable, then
# the store and the commands to look further.
db=$T/many.db
("$SHIMMER" run --db "$db" -- /bin/sh -c \
	'i=0; while [ $i -lt 40 ]; do /bin/true; i=$((i + 1)); done; exec '"$WL"' simple 2 4096 0' \
	> /dev/null 2> "$T/many.err"; exit $?) 2> /dev/null
procs=$(sqlite3 "$db" "SELECT count(*) FROM processes")
check "many: the store has every process (the test's premise)" "processes $procs" [ "$procs" -ge 41 ]
full=$(grep -c '^Process ' "$T/many.err")
check "many: at most 5 processes in full" "$full in full" [ "$full" -le 5 ]
check "many: the rest one line per executable" "$(grep -A3 'more process' "$T/many.err")" \
	grep -qE '^  true x[0-9]+, [0-9.]+ [mun]?s total$' "$T/many.err"
check "many: the process that did CUDA work comes first" "$(grep -m2 '^Process ' "$T/many.err")" \
	grep -q "^Process .*: $WL\$" <<< "$(grep -m1 '^Process ' "$T/many.err")"
lines=$(grep -cv '^shimmerd: ' "$T/many.err")
check "many: fits a screen (at most 80 lines)" "$lines lines" [ "$lines" -le 80 ]
check "many: names the store and the next commands" "$(tail -4 "$T/many.err")" \
	all_in "$T/many.err" "store: $db" "shimmer summary $db"
# each command it suggests runs on that store as written (the output
# files named in $T)
bad=
for c in bottlenecks report export summary leaks; do
	line=$(grep -m1 "shimmer $c $db" "$T/many.err") || { bad="$bad $c(not named)"; continue; }
	args=$(sed "s|.*shimmer $c $db||; s|  *(.*||; s| | .*||; s|trace.json|$T/trace.json|" <<< "$line")
	[ "$c" = report ] && args="-o $T/look.html"
	# shellcheck disable=SC2086
	(cd "$T" && "$SHIMMER" $c "$db" $args > /dev/null 2> "$T/look.err") || bad="$bad $c(exit $?: $(head -c 200 "$T/look.err"))"
done
check "many: every command it suggests runs on the store" "failed:$bad" [ -z "$bad" ]
full=$("$SHIMMER" summary "$db" | grep -c '^Process ')
check "many: shimmer summary DB still prints every process" "$full of $procs" \
	[ "$full" = "$procs" ]
# The memory commands' tables name the processes with nothing to show in
# one line at the end, not 40 empty headings; JSON keeps every process.
for c in "peak:no heap or device memory recorded" "leaks:nothing live at the end nor growing" \
	"allocations:no allocation recorded" "temporary:no temporary allocation" \
	"allocations --histogram size:no allocation recorded"; do
	# shellcheck disable=SC2086
	"$SHIMMER" ${c%%:*} "$db" > "$T/quiet.out" 2> "$T/quiet.err"
	rc=$?
	heads=$(grep -c '^pid ' "$T/quiet.out")
	check "many: ${c%%:*}: the quiet processes in one line" \
		"exit $rc, $heads headings; $(grep 'more process' "$T/quiet.out")" \
		holds '[ $rc = 0 ] && [ $heads -le 3 ] && grep -qE "^[0-9]+ more processes with ${c#*:}: .*true x(4[0-9]|[5-9][0-9])" "$T/quiet.out"'
	# shellcheck disable=SC2086
	n=$("$SHIMMER" ${c%%:*} "$db" --format json | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["processes"]))')
	check "many: ${c%%:*} --format json: every process" "$n of $procs" [ "$n" = "$procs" ]
done
# bash's children are forks that allocate, then exec /bin/true: each
# fork's row ends at the exec, which is no later than the next image's
# start (the collector used to end it when it noticed the old socket
# close, often after its successor had started, even ended: 500 forks
# summed to 207 s of wall time in a run of 1.4 s).
db=$T/execs.db
("$SHIMMER" run --db "$db" -- bash -c 'for i in $(seq 40); do /bin/true; done' \
	> /dev/null 2> "$T/execs.err"; exit $?) 2> /dev/null
execs=$(sq "$db" "SELECT count(*) FROM processes WHERE end_reason = 'exec'")
late=$(sq "$db" "SELECT count(*) || ' ' || coalesce(max(a.end_ns - b.start_ns), 0)
	FROM processes a JOIN processes b ON b.pid = a.pid AND b.proc_id = (SELECT
	min(proc_id) FROM processes WHERE pid = a.pid AND proc_id > a.proc_id)
	WHERE a.end_reason = 'exec' AND a.end_ns > b.start_ns")
check "execs: each exec'd image ends by its successor's start" \
	"$execs exec rows; late (count, most ns): $late" [ "$execs" -ge 40 -a "$late" = "0 0" ]
finish
