#!/bin/bash
# t_escape: names with control characters, from the places a traced
# program's user controls (wl_hostile.c): the executable's path and argv
# (ESC ] 0;x BEL, CR, LF, TAB, the C1 CSI as UTF-8, a byte that is not
# UTF-8, DEL, ';' and a space-then-digits ending), a thread's name, an NVTX
# range, a kernel, a call site's symbol and source file.  Every reader, in
# every format, run on the store of `shimmer run` (whose own summary on
# stderr is read too) and on a service's (ls, ctl status): text for people
# holds no control character (no byte below 0x20 but LF, no DEL, C1,
# separator or bidirectional character, valid UTF-8) and shows each name
# escaped by docs/usage.md's rules; every CSV parses to its header's column
# count; every JSON parses (the report's embedded data too); folded lines
# are "STACK COUNT" with the right frames (escape_check.py says how each is
# read).
. "$(dirname "$0")/lib.sh"

export SHIMMER_GPU=all SHIMMER_MALLOC=all
WLH=$O/test/e2e/wl_hostile
need "$SHIM" "$SHIMMERD" "$SHIMMER" "$WLH" "$FAKE_CUPTI"
CHECK=$(dirname "$0")/escape_check.py

H=$'\e]0;x\a|\r|\n|\t|\xc2\x9b|\xff|;|\x7f| 42'
# A copy at a hostile path, its assembly function renamed; the fake
# runtime where its RUNPATH ($ORIGIN/../fake_cudart) looks.
mkdir "$T/bin" "$T/out"
ln -s "$O/test/fake_cudart" "$T/fake_cudart"
EXE=$T/bin/wl$H
if ! objcopy --redefine-sym "hostile_sym=sym$H" "$WLH" "$EXE"; then
	not_ok "objcopy renames hostile_sym"
	finish
fi

DB=$T/h.db
CUDA_INJECTION64_PATH=$SHIM NVTX_INJECTION64_PATH=$SHIM \
	"$SHIMMER" run --db "$DB" -- "$EXE" "a$H" "b$H" > "$T/out/run.out" 2> "$T/out/run.err"
rc=$?
check "shimmer run: the workload exits 0" "exit $rc; $(head -c 600 "$T/out/run.err" | od -c | head)" \
	[ $rc = 0 ]

# The store holds every name as the program gave it (else the readers
# below have nothing hostile to show).
has() { [ "$(sq "$DB" "SELECT count(*) FROM $1 WHERE $2;")" -ge 1 ]; }
ESC="CAST(x'1b5d303b' AS TEXT)" # ESC ] 0 ;
check "store: the hostile executable, thread, range and kernel" \
	"$(sq "$DB" "SELECT exe FROM processes; SELECT name FROM threads;" | od -c | head)" \
	holds "has processes \"instr(exe, $ESC) > 0\" && has threads \"instr(name, char(27)) > 0\" &&
	has ranges_named \"instr(name, $ESC) > 0\" &&
	has kernels \"instr((SELECT text FROM strings s WHERE s.proc_id = kernels.proc_id
		AND s.id = kernels.name_id), $ESC) > 0\""

# out NAME KIND [NAMES...] -- COMMAND...: COMMAND exits 0, its stdout
# ($T/out/NAME) read as KIND shows each of NAMES, its stderr is text.
out() {
	local name=$1 kind=$2 names=() res rc
	shift 2
	while [ "$1" != "--" ]; do names+=("$1"); shift; done
	shift
	"$@" > "$T/out/$name" 2> "$T/out/$name.err"
	rc=$?
	# (the checker's own failure, a traceback, is a failure too)
	res=$([ $rc = 0 ] || echo "exit status $rc"
	      python3 "$CHECK" "$kind" "$T/out/$name" "${names[@]}" 2>&1
	      python3 "$CHECK" text "$T/out/$name.err" 2>&1)
	expect_empty "$name ($kind${names[*]:+, shows ${names[*]}})" "$res"
}

res=$(python3 "$CHECK" text "$T/out/run.err" exe arg range kern 2>&1)
expect_empty "shimmer run's summary on stderr (shows exe arg range kern)" "$res"

S=$SHIMMER
out summary.table text exe arg range kern -- "$S" summary "$DB"
out summary.csv csv range kern -- "$S" summary "$DB" --format csv
out summary.json json exe range kern -- "$S" summary "$DB" --format json
out summary.full.table text kern -- "$S" summary "$DB" --full-names
out byrank.table text -- "$S" summary "$DB" --by-rank
out byrank.csv csv -- "$S" summary "$DB" --by-rank --format csv
out byrank.json json -- "$S" summary "$DB" --by-rank --format json
for c in leaks peak allocations; do
	out $c.table text exe sym -- "$S" $c "$DB"
	out $c.csv csv sym -- "$S" $c "$DB" --format csv
	out $c.json json exe sym -- "$S" $c "$DB" --format json
	out $c.callers.table text sym -- "$S" $c "$DB" --callers 3
done
out leaks.folded folded -- "$S" leaks "$DB" --format folded
out leaks.all.folded folded -- "$S" leaks "$DB" --format folded --all-allocations
out peak.folded folded -- "$S" peak "$DB" --format folded
out temporary.table text exe -- "$S" temporary "$DB"
out temporary.csv csv -- "$S" temporary "$DB" --format csv
out temporary.json json exe -- "$S" temporary "$DB" --format json
for h in size lifetime; do
	out hist.$h.table text exe -- "$S" allocations "$DB" --histogram $h
	out hist.$h.csv csv -- "$S" allocations "$DB" --histogram $h --format csv
	out hist.$h.json json exe -- "$S" allocations "$DB" --histogram $h --format json
done
out compare.table text arg -- "$S" compare "$DB" "$DB"
out compare.csv csv -- "$S" compare "$DB" "$DB" --format csv
out compare.json json exe -- "$S" compare "$DB" "$DB" --format json
out bottlenecks.table text exe kern -- "$S" bottlenecks "$DB"
out bottlenecks.json json exe kern -- "$S" bottlenecks "$DB" --format json
out export.chrome json exe thread range kern -- "$S" export "$DB" --format chrome
out export.csv csv kern range -- "$S" export "$DB" --format csv
for w in allocated leaked peak; do
	out export.$w.folded folded -- "$S" export "$DB" --format folded --weight $w
done
out export.gpu.folded text -- "$S" export "$DB" --format folded --weight gpu-time
check "export --weight gpu-time: each line 'pid P;cuda:D;STACK NS'" \
	"$(head -c 400 "$T/out/export.gpu.folded")" \
	holds '[ -s "$T/out/export.gpu.folded" ] &&
	! grep -qvE "^pid [0-9]+;cuda:[0-9]+;[^;]+(;[^;]+)* [0-9]+\$" "$T/out/export.gpu.folded"'
out export.speedscope json -- "$S" export "$DB" --format speedscope --weight all
out report.msg text -- "$S" report "$DB" -o "$T/out/report.html"
res=$(python3 "$CHECK" html "$T/out/report.html" exe kern 2>&1)
expect_empty "report.html (html, shows exe kern)" "$res"

# An error naming a hostile path: one line, escaped.
"$S" summary "$T/bin/no$H.db" > /dev/null 2> "$T/out/error.err"
res=$(python3 "$CHECK" text "$T/out/error.err" 2>&1)
check "an error naming a hostile path is one escaped line" "$res$(od -c "$T/out/error.err" | head -5)" \
	holds '[ -z "$res" ] && [ "$(wc -l < "$T/out/error.err")" = 1 ] &&
	grep -qF "no\x1b]0;x\x07|\r|\n|" "$T/out/error.err"'

# The service: ctl status while the program runs (it lingers until
# killed), ls after.
start_service "$T/state" || { not_ok "service starts"; finish; }
LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK CUDA_INJECTION64_PATH=$SHIM NVTX_INJECTION64_PATH=$SHIM \
	WL_LINGER_MS=20000 "$EXE" "a$H" &
wpid=$!
for _ in $(seq 50); do
	"$S" ctl status --socket "$SOCK" --format csv 2> /dev/null | grep -q "^$wpid," && break
	sleep 0.1
done
out ctl.table text exe -- "$S" ctl status --socket "$SOCK"
out ctl.csv csv exe -- "$S" ctl status --socket "$SOCK" --format csv
out ctl.json json exe -- "$S" ctl status --socket "$SOCK" --format json
kill -TERM $wpid
wait $wpid
out ls.table text -- "$S" ls --socket "$SOCK"
out ls.csv csv -- "$S" ls --socket "$SOCK" --format csv
out ls.json json -- "$S" ls --socket "$SOCK" --format json
stop_collector || not_ok "service exit status"

finish
