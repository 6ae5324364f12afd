#!/bin/bash
# t_unnamed: names that never reached the store.  The shim announces each
# name (a Python frame's function and file, a loaded object's path) once,
# waiting at most a millisecond for room on the collector's socket; under
# load it may give up, and the frame is stored without that name (NULL in
# python_frames_named, '?' in the commands), never with another's.  The
# commands that print stacks or call sites must say how many, in one line
# (JSON: unnamed_frames, unnamed_modules), and say nothing when all names
# came.  The failures are made to order with SHIMMER_TEST_WITHHOLD (the
# names that contain its text meet a full socket every time):
#  - Python (a script whose functions withheld_* allocate, some through
#    named ones): the frames that lie in withheld_*'s lines (the script
#    logs them, from its code objects) are exactly those stored without a
#    function, none without a file, none named otherwise; leaks, peak,
#    temporary, allocations, summary (table; JSON and CSV: allocations and
#    summary), compare, report and export --format folded say that count;
#  - a C program whose executable's path is withheld (leaky): its sites
#    read '?+0xOFFSET [name not recorded]' (before: '[file gone]', which
#    it was not), and leaks says 1 loaded object;
#  - the same runs without the knob: no such line, the counts 0.
. "$(dirname "$0")/lib.sh"
need "$SHIM" "$SHIMMERD" "$SHIMMER" "$LEAKY"
PY=$(python_exe) || {
	echo "ok - $SCRIPT: Python cases # SKIP no python3 here"
	PY=
}

cat > "$T/wl.py" <<'PY'
import sys
keep = []
log = open(sys.argv[1], "w")


def withheld_leak(n):
    keep.append(bytearray(300000 + n))
    keep.append([n] * (1000 + n))


def named_leak(n):
    keep.append(bytearray(400000 + n))


def withheld_outer(n):
    named_leak(n)
    keep.append(bytearray(500000 + n))


def temporary(n):
    return len(bytearray(600000 + n))


for i in range(4):
    withheld_leak(i)
    named_leak(i)
    withheld_outer(i)
    temporary(i)
# the lines of the withheld functions: first, last
for f in (withheld_leak, withheld_outer):
    lines = [l for _, _, l in f.__code__.co_lines() if l]
    log.write("W,%s,%d,%d\n" % (f.__name__, f.__code__.co_firstlineno, max(lines)))
log.close()
PY

# run NAME [VAR=VALUE...]: the script under shimmer run into $T/NAME.db.
run() {
	local name=$1
	shift
	env SHIMMER_MALLOC=all "$@" "$SHIMMER" run --db "$T/$name.db" -- "$PY" "$T/wl.py" \
		"$T/$name.log" > /dev/null 2> "$T/$name.err" ||
		not_ok "$name: the script runs traced" "$(tail -3 "$T/$name.err")"
}

# truth NAME: "FRAMES STACKS" of the frames in the withheld functions'
# lines (the script's own account), then the store's frames without a
# function or file, and of them those outside those lines or with a
# file missing (none expected).
truth() {
	"$PY" - "$T/$1.db" "$T/$1.log" "$T/wl.py" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
ranges = [(int(f[2]), int(f[3])) for f in (l.strip().split(",") for l in open(sys.argv[2]))
          if f[0] == "W"]
frames = db.execute("SELECT pystack_id, line, file, function FROM python_frames_named"
                    " WHERE NOT (file_id = 0 AND func_id = 0 AND line = 0)").fetchall()
mine = [(s, l, fn) for s, l, f, fn in frames if f == sys.argv[3] and
        any(a <= l <= b for a, b in ranges)]
unnamed = [(s, l, f, fn) for s, l, f, fn in frames if f is None or fn is None]
odd = [x for x in unnamed if x[2] is None or not any(a <= x[1] <= b for a, b in ranges)]
named_in = [x for x in mine if x[2] is not None]
print(len(mine), len({s for s, _, _ in mine}), len(unnamed), len({x[0] for x in unnamed}),
      len(odd) + len(named_in))
EOF
}

if [ -n "$PY" ]; then
	run withheld SHIMMER_TEST_WITHHOLD=withheld_
	run plain
	read -r want wstacks got gstacks odd <<< "$(truth withheld)"
	check "the withheld functions' frames, and only they, are stored without a function" \
		"in their lines: $want frames in $wstacks stacks; stored unnamed: $got in $gstacks; other or misnamed: $odd" \
		holds '[ "${want:-0}" -gt 0 ] && [ "$want" = "$got" ] && [ "$wstacks" = "$gstacks" ] && [ "$odd" = 0 ]'
	LINE="WARNING: $want Python frames (in $wstacks stacks) have no name: the shim could not announce it"
	# said NAME CMD...: the output of shimmer CMD on NAME.db (stdout and
	# stderr), into $T/NAME.CMD1.out
	said() {
		local name=$1 cmd=$2
		shift 2
		"$SHIMMER" "$cmd" "$@" "$T/$name.db" > "$T/$name.$cmd.out" 2>&1
	}
	for cmd in leaks peak temporary allocations summary; do
		said withheld "$cmd"
		check "$cmd: one line with the count ($want frames, $wstacks stacks)" \
			"$(grep -c 'have no name' "$T/withheld.$cmd.out") lines: $(grep 'no name' "$T/withheld.$cmd.out" | head -2)" \
			holds '[ "$(grep -c "have no name" "$T/withheld.$cmd.out")" = 1 ] && grep -qF "$LINE" "$T/withheld.$cmd.out"'
		said plain "$cmd"
		check "$cmd: nothing said when every name came" \
			"$(grep 'no name' "$T/plain.$cmd.out" | head -2)" \
			holds '! grep -q "no name" "$T/plain.$cmd.out"'
	done
	check "allocations: a withheld function's site reads '?', the script's line kept" \
		"$(grep 'wl.py' "$T/withheld.allocations.out" | head -5)" \
		grep -q '  ? (wl.py:[0-9]*)$' "$T/withheld.allocations.out"
	for cmd in allocations summary leaks; do
		for name in withheld plain; do
			"$SHIMMER" "$cmd" --format json "$T/$name.db" > "$T/$name.$cmd.json" 2> /dev/null
		done
		got=$("$PY" -c 'import json, sys
for f in sys.argv[1:]:
    p = [p for p in json.load(open(f))["processes"] if "python" in (p.get("exe") or "")]
    print(",".join("%s/%s" % (x.get("unnamed_frames"), x.get("unnamed_modules")) for x in p), end=" ")' \
			"$T/withheld.$cmd.json" "$T/plain.$cmd.json")
		check "$cmd --format json: unnamed_frames $want, 0 without the knob" "got $got" \
			[ "$got" = "$want/0 0/0 " ]
	done
	"$SHIMMER" allocations --format csv "$T/withheld.db" > /dev/null 2> "$T/withheld.csv.err"
	check "allocations --format csv: the line on stderr" "$(cat "$T/withheld.csv.err")" \
		grep -qF "$want Python frames (in $wstacks stacks) have no name" "$T/withheld.csv.err"
	"$SHIMMER" export --format folded "$T/withheld.db" > /dev/null 2> "$T/withheld.fold.err"
	"$SHIMMER" export --format folded "$T/plain.db" > /dev/null 2> "$T/plain.fold.err"
	check "export --format folded: the line on stderr, none without the knob" \
		"$(cat "$T/withheld.fold.err" "$T/plain.fold.err" | head -5)" \
		holds 'grep -qF "$want Python frames (in $wstacks stacks) have no name" "$T/withheld.fold.err" && ! grep -q "no name" "$T/plain.fold.err"'
	"$SHIMMER" compare "$T/plain.db" "$T/withheld.db" > "$T/cmp.out" 2>&1
	check "compare: the line under the store that has them" "$(grep 'no name' "$T/cmp.out")" \
		holds '[ "$(grep -c "have no name" "$T/cmp.out")" = 1 ] && grep -qF "$want Python frames" "$T/cmp.out"'
	if "$SHIMMER" report "$T/withheld.db" -o "$T/withheld.html" > /dev/null 2> "$T/report.err"; then
		"$SHIMMER" report "$T/plain.db" -o "$T/plain.html" > /dev/null 2>> "$T/report.err"
		check "report: the line, none without the knob" "$(head -3 "$T/report.err")" \
			holds 'grep -qF "$want Python frames (in $wstacks stacks) have no name" "$T/withheld.html" && ! grep -q "have no name" "$T/plain.html"'
	elif grep -q "charting library" "$T/report.err"; then
		ok "report: the line # SKIP $(head -1 "$T/report.err")"
	else
		not_ok "report runs" "$(head -3 "$T/report.err")"
	fi
fi

# -- a loaded object's path withheld: the executable's -------------------------------------
for name in leaky_withheld leaky_plain; do
	knob=
	[ $name = leaky_withheld ] && knob=SHIMMER_TEST_WITHHOLD=leaky
	env SHIMMER_MALLOC=all WL_LOG=/dev/null $knob "$SHIMMER" run --db "$T/$name.db" -- "$LEAKY" \
		> /dev/null 2> "$T/$name.err" || true
	"$SHIMMER" leaks "$T/$name.db" > "$T/$name.out" 2>&1
done
n=$(sq "$T/leaky_withheld.db" "SELECT count(*) FROM modules d WHERE NOT EXISTS (SELECT 1 FROM
	strings s WHERE s.proc_id = d.proc_id AND s.id = d.path_id)")
check "leaky with its path withheld: 1 object unnamed in the store, said by leaks" \
	"store: $n; $(grep -c 'have no name' "$T/leaky_withheld.out") lines: $(grep 'no name' "$T/leaky_withheld.out")" \
	holds '[ "$n" = 1 ] && [ "$(grep -c "the native frames of 1 loaded object have no name" "$T/leaky_withheld.out")" = 1 ]'
check "leaky with its path withheld: its sites read [name not recorded], not [file gone]" \
	"$(grep 'leaky\|?+0x' "$T/leaky_withheld.out" | head -4)" \
	holds 'grep -q "?+0x[0-9a-f]* \[name not recorded\]" "$T/leaky_withheld.out" && ! grep -q "file gone" "$T/leaky_withheld.out"'
check "leaky, every name there: nothing said" "$(grep 'no name' "$T/leaky_plain.out")" \
	holds '! grep -q "no name" "$T/leaky_plain.out" && grep -q "leaky.c:" "$T/leaky_plain.out"'
finish
