#!/bin/bash
# t_cliargs: the command line's rules every command shares (tools/cli.c):
#  - "--" ends the options: a store named "-x.db" is read by every reader
#    after "--" (each exits 0 with what it reads of the store under its
#    plain name), compare takes one or both stores after it, and without
#    "--" the name is still an unknown option (exit 2); attach and ctl
#    take their operands after it (a pid, a verb) as operands.
#  - operands and options in any order: ctl's verbs attach and detach
#    after options or "--" too; one pid (a second, or ctl attach's --pid
#    after one, refused); an unknown option named as one after the pid.
#  - numbers (docs/usage.md, "Numbers, sizes and durations"): a count or
#    pid is decimal digits, hex and exponents refused with one line naming
#    the option and exit 2; a pid of a live process (attach, ctl,
#    shimmerd --attach) is below this kernel's pid_max, a recorded one
#    (--pid of every reader) 1 to 4194303; a duration is conf_duration's
#    in shimmer attach, shimmer ctl and shimmerd alike (1d accepted, 1e3
#    refused).
#  - a value forgotten ("--" where it goes, or none) and an unknown option
#    are one line and exit 2, in shimmer and shimmerd alike.
. "$(dirname "$0")/lib.sh"
need "$SHIM" "$SHIMMERD" "$SHIMMER" "$LEAKY"

SHIMMER_MALLOC=all WL_LOG=/dev/null "$SHIMMER" run --db "$T/plain.db" -- "$LEAKY" \
	> /dev/null 2> "$T/run.err"
cp "$T/plain.db" "$T/-x.db"
cd "$T" || finish
for c in summary leaks peak temporary allocations bottlenecks; do
	"$SHIMMER" $c plain.db > "$T/$c.plain" 2>&1
	"$SHIMMER" $c -- -x.db > "$T/$c.dash" 2>&1
	rc=$?
	check "$c -- -x.db: the store read" "exit $rc; $(head -3 "$T/$c.dash")" \
		holds '[ $rc = 0 ] && diff <(sed "s/-x\.db/plain.db/g" "$T/$c.dash") "$T/$c.plain" > /dev/null'
	"$SHIMMER" $c -x.db > /dev/null 2> "$T/$c.err"
	rc=$?
	check "$c -x.db: still an unknown option" "exit $rc; $(cat "$T/$c.err")" \
		holds '[ $rc = 2 ] && grep -q "unknown option .-x\.db." "$T/$c.err"'
done
for c in report export; do
	"$SHIMMER" $c -o "$T/$c.out" -- -x.db > /dev/null 2>&1
	rc=$?
	check "$c -o FILE -- -x.db: written" "exit $rc" holds '[ $rc = 0 ] && [ -s "$T/$c.out" ]'
done
# --pid or --rank that selects no process: the warning, exit 0, a file
# (export, report: an empty selection read, under make asan too)
for c in report export; do
	"$SHIMMER" $c -o "$T/$c.none" --pid 1 plain.db > /dev/null 2> "$T/$c.err"
	rc=$?
	check "$c --pid 1 (no such process): written, the warning" "exit $rc; $(cat "$T/$c.err")" \
		holds '[ $rc = 0 ] && [ -s "$T/$c.none" ] && grep -q "no process with pid 1" "$T/$c.err"'
done
"$SHIMMER" compare -- -x.db plain.db > "$T/cmp.out" 2>&1
rc=$?
check "compare -- -x.db plain.db: both read" "exit $rc; $(head -4 "$T/cmp.out")" \
	holds '[ $rc = 0 ] && grep -q "^  A: -x\.db$" "$T/cmp.out"'
"$SHIMMER" compare plain.db -- -x.db > /dev/null 2>&1
rc=$?
check "compare plain.db -- -x.db: both read" "exit $rc" test $rc = 0
"$SHIMMER" attach -- -5 > /dev/null 2> "$T/att.err"
check "attach -- -5: an operand (not a process id), not an option" "$(cat "$T/att.err")" \
	grep -q "'-5' is not a process id" "$T/att.err"
"$SHIMMER" ctl --socket "$T/none" -- -v > /dev/null 2> "$T/ctl.err"
check "ctl -- -v: a verb, not an option" "$(cat "$T/ctl.err")" \
	grep -q "unknown verb '-v'" "$T/ctl.err"

# A pid no process has: one that has just exited.
true & DEAD=$!
wait $DEAD
"$SHIMMER" attach "$DEAD" --for 1d > /dev/null 2> "$T/for1d.err"
rc=$?
check "attach --for 1d: a duration (parsing passes; no process $DEAD, exit 1)" \
	"exit $rc; $(cat "$T/for1d.err")" \
	holds '[ $rc = 1 ] && grep -q "no process $DEAD" "$T/for1d.err"'
# A process id is one operand: a second one, or a --pid after it (ctl),
# is refused; an unknown option after it is named as one.
"$SHIMMER" attach "$DEAD" --hepa > /dev/null 2> "$T/att.err"
rc=$?
check "attach PID --hepa: an unknown option, whatever comes first" "exit $rc; $(cat "$T/att.err")" \
	holds '[ $rc = 2 ] && grep -q "unknown option .--hepa." "$T/att.err"'
"$SHIMMER" attach "$DEAD" -- 5 > /dev/null 2> "$T/att.err"
rc=$?
check "attach PID -- 5: one process at a time" "exit $rc; $(cat "$T/att.err")" \
	holds '[ $rc = 2 ] && grep -q "one process at a time ('"'5'"')" "$T/att.err"'
"$SHIMMER" ctl attach "$DEAD" --pid 1 --socket "$T/none" > /dev/null 2> "$T/ctl.err"
rc=$?
check "ctl attach PID --pid 1: one process at a time, not pid 1 instead" \
	"exit $rc; $(cat "$T/ctl.err")" \
	holds '[ $rc = 2 ] && grep -q "one process at a time" "$T/ctl.err"'
# The verb attach or detach wherever it comes, as every verb: after
# options (--socket, and attach's own) and after "--".
for args in "--socket $T/none attach $DEAD" "--socket=$T/none --heap --for 1s attach $DEAD" \
	"--socket $T/none -- detach $DEAD"; do
	"$SHIMMER" ctl $args > /dev/null 2> "$T/ctl.err"
	rc=$?
	check "ctl $args: the verb read (no daemon, exit 1)" "exit $rc; $(cat "$T/ctl.err")" \
		holds '[ $rc = 1 ] && grep -q "cannot reach shimmerd at $T/none" "$T/ctl.err"'
done
"$SHIMMER" ctl --format json attach "$DEAD" --socket "$T/none" > /dev/null 2> "$T/ctl.err"
rc=$?
check "ctl --format json attach PID: no option of attach's" "exit $rc; $(cat "$T/ctl.err")" \
	holds '[ $rc = 2 ] && grep -q "unknown option .--format." "$T/ctl.err"'
# number ARGS...: the one line of a refused number, exit 2, naming what.
number() {
	local what=$1 name=$2
	shift 2
	"$@" > "$T/num.out" 2> "$T/num.err"
	rc=$?
	check "$name: refused, exit 2, one line naming $what" "exit $rc; $(cat "$T/num.err")" \
		holds '[ $rc = 2 ] && [ $(wc -l < "$T/num.err") = 1 ] && grep -qF -- "$what" "$T/num.err" && [ ! -s "$T/num.out" ]'
}
number "--pid wants a process id (a whole decimal number, 1 to 4194303), not '0x10'" \
	"summary --pid 0x10" "$SHIMMER" summary --pid 0x10 plain.db
number "--pid wants a process id (a whole decimal number, 1 to 4194303), not '1e3'" \
	"leaks --pid=1e3" "$SHIMMER" leaks --pid=1e3 plain.db
number "--rank wants a whole decimal number >= 0, not '0x10'" "peak --rank 0x10" \
	"$SHIMMER" peak --rank 0x10 plain.db
# A recorded pid is below the largest pid_max any kernel allows (2^22),
# wherever the store was made: --pid 0 or 4194304 selected nothing, with a
# warning and exit 0, as if it could have been a process.
for c in summary leaks peak temporary allocations bottlenecks compare report export; do
	for p in 0 4194304 4294967296; do
		args=(plain.db)
		[ $c = compare ] && args=(plain.db plain.db)
		[ $c = report ] || [ $c = export ] && args=(-o "$T/$c.p" plain.db)
		number "--pid wants a process id (a whole decimal number, 1 to 4194303), not '$p'" \
			"$c --pid $p" "$SHIMMER" $c --pid $p "${args[@]}"
	done
done
number "--max-mb wants a decimal number >= 0 (2, 2.5), not '1e3'" "export --max-mb 1e3" \
	"$SHIMMER" export -o "$T/x.json" --max-mb 1e3 plain.db
# A live process's id is below this kernel's pid_max (it took any count to
# 2^31 - 1): attach, ctl's --pid and operands, shimmerd --attach.
PMAX=$(cat /proc/sys/kernel/pid_max)
LIVE="a whole decimal number, 1 to $((PMAX - 1)): below the kernel's pid_max"
number "'0x10' is not a process id ($LIVE)" "attach 0x10" "$SHIMMER" attach 0x10
number "'$PMAX' is not a process id ($LIVE)" "attach PID_MAX" "$SHIMMER" attach $PMAX
number "'$PMAX' is not a process id ($LIVE)" "ctl status --pid PID_MAX" \
	"$SHIMMER" ctl status --pid $PMAX --socket "$T/none"
number "'$PMAX' is not a process id ($LIVE)" "ctl detach PID_MAX" \
	"$SHIMMER" ctl detach $PMAX --socket "$T/none"
number "--attach $PMAX is not a process id ($LIVE)" "shimmerd --attach PID_MAX" \
	"$SHIMMERD" --no-config --attach $PMAX --db "$T/d.db" --check-config
"$SHIMMER" ctl status --pid $((PMAX - 1)) --socket "$T/none" > /dev/null 2> "$T/ctl.err"
rc=$?
check "ctl status --pid PID_MAX-1: a process id (no daemon, exit 1)" "exit $rc; $(cat "$T/ctl.err")" \
	holds '[ $rc = 1 ] && grep -q "cannot reach shimmerd" "$T/ctl.err"'
number "--for wants a duration > 0 (a decimal number and ns, us, ms, s, m, h or d" \
	"attach --for 1e3" "$SHIMMER" attach "$DEAD" --for 1e3
# SHIMMER_SAMPLE_BYTES as the shim reads it (whole bytes): attach passed
# it on to shimmerd, whose --sample-bytes takes 512K, where the shim does not
number "SHIMMER_SAMPLE_BYTES wants a whole number of bytes from 1 to 2^40, as the shim reads it, not '512K'" \
	"attach with SHIMMER_SAMPLE_BYTES=512K" env SHIMMER_SAMPLE_BYTES=512K "$SHIMMER" attach "$DEAD" --heap
number "--for wants a duration > 0" "ctl attach --for 0x10" \
	"$SHIMMER" ctl attach "$DEAD" --for 0x10 --socket "$T/none"
number "window wants a duration > 0" "ctl window 1e3" \
	"$SHIMMER" ctl window 1e3 --pid "$DEAD" --socket "$T/none"
number "'1e3' is not a process id" "ctl detach 1e3" \
	"$SHIMMER" ctl detach 1e3 --socket "$T/none"
# ctl's --pid is a process id (it took any count up to 2^32-1, and 0 as
# no --pid at all)
number "'4294967295' is not a process id" "ctl status --pid 4294967295" \
	"$SHIMMER" ctl status --pid 4294967295 --socket "$T/none"
number "'0' is not a process id" "ctl pause --pid 0" \
	"$SHIMMER" ctl pause --pid 0 --socket "$T/none"
number "'2147483648' is not a process id" "ctl attach --pid 2147483648" \
	"$SHIMMER" ctl attach --pid 2147483648 --socket "$T/none"
# "--" where a value goes is a value forgotten: run made a store named "--"
(cd "$T" && "$SHIMMER" run --db -- true > "$T/dd.out" 2> "$T/dd.err")
rc=$?
check "run --db -- CMD: refused, exit 2, no store named --" "exit $rc; $(cat "$T/dd.err")" \
	holds '[ $rc = 2 ] && grep -q -- "--db needs a value" "$T/dd.err" && [ ! -e "$T/--" ]'
number "-o needs a value" "export -o -- STORE" "$SHIMMER" export -o -- plain.db
# shimmerd: the same for its options: a value forgotten ("--" or none) is
# one line and exit 2 (--db -- made a store named "--", --socket -- a
# socket), "--db=--" is taken as given; an unknown option is one line (it
# was getopt's and the whole usage).
for o in --db --socket --state-dir --config --max-age --attach --probes; do
	number "$o needs a value" "shimmerd $o --" \
		"$SHIMMERD" --no-config $o -- --check-config
	number "$o needs a value" "shimmerd ... $o (last)" "$SHIMMERD" --no-config $o
done
(cd "$T" && "$SHIMMERD" --no-config --db=-- --check-config > "$T/ddd.out" 2> "$T/ddd.err")
rc=$?
check "shimmerd --db=--: taken as given" "exit $rc; $(cat "$T/ddd.err")" \
	holds '[ $rc = 0 ] && grep -qx "db = $T/--" "$T/ddd.out"'
number "unknown option --bogus" "shimmerd --bogus" "$SHIMMERD" --no-config --bogus
number "unknown option -x" "shimmerd -x" "$SHIMMERD" --no-config -x
# shimmerd reads --for as shimmer attach does (shimmer attach passes it on).
"$SHIMMERD" --no-config --attach "$DEAD" --for 1d --db "$T/d.db" --check-config \
	> /dev/null 2> "$T/d1d.err"
rc=$?
check "shimmerd --for 1d: accepted (--check-config exits 0)" "exit $rc; $(cat "$T/d1d.err")" \
	test $rc = 0
number "--for 1e3 is not a duration > 0" "shimmerd --for 1e3" \
	"$SHIMMERD" --no-config --attach "$DEAD" --for 1e3 --db "$T/d.db" --check-config
number "--attach 0x10 is not a process id" "shimmerd --attach 0x10" \
	"$SHIMMERD" --no-config --attach 0x10 --db "$T/d.db" --check-config
number "--sample-bytes 1e3 is not a size" "shimmerd --sample-bytes 1e3" \
	"$SHIMMERD" --no-config --attach "$DEAD" --sample-bytes 1e3 --db "$T/d.db" --check-config
finish
