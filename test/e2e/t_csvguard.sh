#!/bin/bash
# t_csvguard: no CSV shimmer writes holds a field that a spreadsheet runs
# as a formula (OWASP's CSV injection), whatever names the traced program
# chose.  For each character a formula starts with (=, +, -, @, TAB, CR),
# and for '= (a name that starts with ' then one of them), wl_hostile runs
# from a copy whose executable, allocating function (objcopy) and job key
# start with it; its store's thread, NVTX range and kernel names are then
# given the same start (SQL on the store).  Every CSV of every command
# (summary, --by-rank, leaks, peak, allocations, histograms, temporary,
# compare, export, ctl status, ls) is read by csvguard_check.py: such a
# field is quoted with a ' in front, numbers stay bare numbers, every name
# reads back whole.  And a negative figure stays a number: compare's diff
# of a process 1500 ns shorter is the bare field -1500.
. "$(dirname "$0")/lib.sh"

export SHIMMER_GPU=all SHIMMER_MALLOC=all
WLH=$O/test/e2e/wl_hostile
need "$SHIM" "$SHIMMERD" "$SHIMMER" "$WLH" "$FAKE_CUPTI"
CHECK=$(dirname "$0")/csvguard_check.py
S=$SHIMMER

mkdir "$T/bin" "$T/out"
ln -s "$O/test/fake_cudart" "$T/fake_cudart"
starts=('=' '+' '-' '@' $'\t' $'\r' "'=")

# csv NAME CMD... [-- NAMES...]: CMD exits 0 and its CSV holds.
csv() {
	local name=$1 cmd=() names=() res rc
	shift
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do cmd+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	names=("$@")
	"${cmd[@]}" > "$T/out/$name" 2> "$T/out/$name.err"
	rc=$?
	res=$([ $rc = 0 ] || echo "exit status $rc: $(head -c 300 "$T/out/$name.err")"
	      python3 "$CHECK" "$T/out/$name" "${names[@]}" 2>&1)
	expect_empty "$name: no formula a spreadsheet runs, the names read back" "$res"
}

for k in "${!starts[@]}"; do
	P=${starts[$k]}
	EXE=$T/bin/${P}wl$k
	DB=$T/$k.db
	if ! objcopy --redefine-sym "hostile_sym=${P}sym$k" "$WLH" "$EXE"; then
		not_ok "objcopy renames hostile_sym"
		finish
	fi
	CUDA_INJECTION64_PATH=$SHIM NVTX_INJECTION64_PATH=$SHIM \
		"$S" run --db "$DB" -- "$EXE" "${P}arg" > "$T/out/run$k.out" 2> "$T/out/run$k.err"
	rc=$?
	check "start $k: shimmer run: the workload exits 0" "exit $rc; $(head -c 300 "$T/out/run$k.err")" \
		[ $rc = 0 ]
	# The thread, range and kernel names (the ones with ESC in them).
	sq "$DB" "UPDATE strings SET text = CAST(x'$(printf %s "$P" | od -An -tx1 | tr -d ' \n')' AS TEXT)
			|| 'n$k' || text WHERE instr(text, char(27)) > 0;
		UPDATE threads SET name = CAST(x'$(printf %s "$P" | od -An -tx1 | tr -d ' \n')' AS TEXT)
			|| 'n$k' || name WHERE instr(name, char(27)) > 0;"
	n=$(sq "$DB" "SELECT count(*) FROM strings WHERE instr(text, char(27)) > 0 AND instr(text, 'n$k') > 0")
	check "start $k: the store's range, kernel and thread names start with it" "$n names" \
		[ "${n:-0}" -ge 3 ]
	sym="${P}sym$k"
	name="${P}n${k}"
	csv summary.$k.csv "$S" summary "$DB" --format csv -- "${name}range" "${name}kern"
	csv byrank.$k.csv "$S" summary "$DB" --by-rank --format csv
	for c in leaks peak allocations; do
		csv $c.$k.csv "$S" $c "$DB" --format csv -- "$sym"
	done
	csv temporary.$k.csv "$S" temporary "$DB" --format csv
	for h in size lifetime; do
		csv hist.$h.$k.csv "$S" allocations "$DB" --histogram $h --format csv
	done
	csv export.$k.csv "$S" export "$DB" --format csv -- "${name}range" "${name}kern"
	# B: the same store, its process 1500 ns shorter
	cp "$DB" "$T/b$k.db"
	sq "$T/b$k.db" "UPDATE processes SET end_ns = end_ns - 1500"
	csv compare.$k.csv "$S" compare "$DB" "$T/b$k.db" --format csv -- \
		"${name}range" "${name}kern" "'${name}range" "$sym"
	check "start $k: compare's negative diff is the bare number -1500" \
		"$(grep -a 'wall time' "$T/out/compare.$k.csv")" \
		grep -q '^[0-9]*,[0-9]*,process,wall time,ns,[0-9]*,[0-9]*,-1500,' "$T/out/compare.$k.csv"
done

# The service: a job key starting with each, in ctl status (while the
# programs run) and ls (after).
start_service "$T/state" || { not_ok "service starts"; finish; }
pids=()
for k in "${!starts[@]}"; do
	LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK SHIMMER_JOB="${starts[$k]}job$k" \
		CUDA_INJECTION64_PATH=$SHIM NVTX_INJECTION64_PATH=$SHIM \
		WL_LINGER_MS=20000 "$T/bin/${starts[$k]}wl$k" &
	pids+=($!)
done
for _ in $(seq 100); do
	[ "$("$S" ctl status --socket "$SOCK" --format csv 2> /dev/null | grep -c "job[0-9]")" \
		-ge ${#starts[@]} ] && break
	sleep 0.1
done
# (a job key keeps printable ASCII only: TAB and CR become '_')
jobs=()
for k in "${!starts[@]}"; do jobs+=("$(printf %s "${starts[$k]}" | tr '\t\r' __)job$k"); done
csv ctl.csv "$S" ctl status --socket "$SOCK" --format csv -- "${jobs[@]}"
kill -TERM "${pids[@]}"
wait "${pids[@]}"
csv ls.csv "$S" ls --socket "$SOCK" --format csv -- "${jobs[@]}"
stop_collector || not_ok "service exit status"

# The checker is no test that cannot fail: the same lines, unguarded.
printf 'name,n\n"=1+1",-3\n"x",4\n' > "$T/planted.csv"
res=$(python3 "$CHECK" "$T/planted.csv" "=1+1")
check "the checker finds an unguarded formula" "$res" grep -q "a quoted field a spreadsheet runs" <<< "$res"
finish
