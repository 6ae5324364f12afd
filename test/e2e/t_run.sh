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

# Without --db: the documented name, ./shimmer-HOST-PID-YYYYmmdd-HHMMSS.db
mkdir "$T/cwd"
(cd "$T/cwd" && WL_LOG=/dev/null "$SHIMMER" run -- "$WL" simple 1 4096 0 > /dev/null 2> ../default.err)
made=$(cd "$T/cwd" && ls)
check "default store name shimmer-HOST-PID-YYYYmmdd-HHMMSS.db" "files made: $made" \
	grep -qxE "shimmer-$(hostname)-[0-9]+-[0-9]{8}-[0-9]{6}\.db" <<< "$(ls "$T/cwd" | grep -v -- '-wal$\|-shm$')"

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
full=$("$SHIMMER" summary "$db" | grep -c '^Process ')
check "many: shimmer summary DB still prints every process" "$full of $procs" \
	[ "$full" = "$procs" ]
finish
