#!/bin/bash
# t_hostprogs: real programs, and programs that do odd things to their own
# process (wl_host.c), behave under `shimmer run` exactly as they do bare,
# in sample mode and in SHIMMER_MALLOC=all:
#  - the same exit status, the same standard output, the same standard
#    error up to shimmer run's own lines (its "shimmer: CMD: exit status"
#    line and the summary after it), and no line of the collector's;
#  - the store passes PRAGMA integrity_check, `shimmer summary` reads it
#    with nothing on stderr (no loss to report), no process was rejected,
#    and in all mode nothing was dropped (lossless by default);
#  - the processes stored are those that ran, each under its parent.
# Each run has a time limit; a program that is not installed is skipped.
#
# Defects it keeps fixed:
#  - unwfds: libunwind's address-checking pipe, made when the shim first
#    learnt a rule, took the program's lowest free descriptors (its first
#    files came out as 5 and 6, not 3 and 4), and once the program had
#    closed them and opened its own files there, libunwind read 4 bytes of
#    the program's file and wrote 4 bytes of stack into its other one
#    (preload/ownfds.h).
#  - rawclone: a child made by a raw clone(2), which runs no atfork
#    handler, wrote its records into its parent's ring: its 7,000 realloc
#    calls were counted as the parent's (10,100 for 3,100), and in all mode
#    the collector rejected the parent ("bad record", one line on the
#    program's stderr) and lost the rest of its recording (shim.h,
#    shim_live).
#  - closefrom, close_range: after the program closed every descriptor
#    above 2, libunwind made its pipe again (at 3 and 4, then at 960 and
#    961 once kept high), descriptors the program saw open; and its fork
#    child said a second time that tracing stopped, when it went on with
#    a connection of its own (preload/ownfds.c, conn.c's conn_close()).
. "$(dirname "$0")/lib.sh"
WL_HOST=$O/test/e2e/wl_host
need "$SHIMMER" "$SHIMMERD" "$SHIM" "$WL_HOST"
cd "$T" || finish
LIMIT=${HOSTPROGS_LIMIT:-60}

# run_one NAME MODE CMD...: CMD under shimmer run in MODE (sample | all),
# its store $T/NAME.MODE.db, outputs $T/NAME.MODE.{out,err,prog_err}, its
# status in RC.
run_one() {
	local name=$1 mode=$2
	shift 2
	SHIMMER_MALLOC=$mode timeout -k 5 "$LIMIT" "$SHIMMER" run --db "$T/$name.$mode.db" -- "$@" \
		> "$T/$name.$mode.out" 2> "$T/$name.$mode.err"
	RC=$?
	# the program's own lines: those before shimmer run's
	awk '/^shimmer: .*: (exit status|killed by signal) / { exit } { print }' \
		"$T/$name.$mode.err" > "$T/$name.$mode.prog_err"
}

# store_ok NAME MODE: the store is whole, summary reads it without a word
# of loss, nothing rejected, and in all mode nothing dropped.
store_ok() {
	local db=$T/$1.$2.db got
	check_integrity "$1, $2: the store passes integrity_check" "$db"
	"$SHIMMER" summary "$db" > "$T/$1.$2.sum" 2> "$T/$1.$2.sumerr"
	got="$? $(wc -c < "$T/$1.$2.sumerr")"
	check "$1, $2: shimmer summary reads the store and has nothing to warn of" \
		"status, stderr bytes: $got; stderr: $(head -c 400 "$T/$1.$2.sumerr")" \
		[ "$got" = "0 0" ]
	got=$(sq -separator ' ' "$db" "SELECT (SELECT count(*) FROM processes WHERE end_reason = 'rejected'),
		(SELECT coalesce(sum(events), 0) FROM drops), (SELECT count(*) FROM processes
		WHERE end_reason IS NULL)")
	if [ "$2" = all ]; then
		check "$1, $2: no process rejected, nothing dropped, none left open" \
			"rejected, dropped, open: $got" [ "$got" = "0 0 0" ]
	else
		check "$1, $2: no process rejected, none left open" "rejected, dropped, open: $got" \
			[ "${got% * *} ${got##* }" = "0 0" ]
	fi
}

# same_as_bare NAME DET CMD...: CMD bare, then under shimmer run in both
# modes; DET=1 when its standard output is deterministic.  ALLOW: a
# pattern of the one line shimmer may add to its standard error (once).
same_as_bare() {
	local name=$1 det=$2 brc mode n
	shift 2
	timeout -k 5 "$LIMIT" "$@" > "$T/$name.bare.out" 2> "$T/$name.bare.err"
	brc=$?
	for mode in sample all; do
		run_one "$name" "$mode" "$@"
		check "$name, $mode: exit status $brc, as bare" "status $RC; stderr: $(head -c 400 "$T/$name.$mode.err")" \
			[ "$RC" = "$brc" ]
		if [ "$det" = 1 ]; then
			check "$name, $mode: standard output as bare" \
				"$(diff "$T/$name.bare.out" "$T/$name.$mode.out" | head -10)" \
				cmp -s "$T/$name.bare.out" "$T/$name.$mode.out"
		fi
		if [ -n "${ALLOW:-}" ]; then
			# the one line shimmer may add (docs/usage.md), once
			n=$(grep -c -- "$ALLOW" "$T/$name.$mode.prog_err")
			grep -v -- "$ALLOW" "$T/$name.$mode.prog_err" > "$T/$name.$mode.prog_err2"
			check "$name, $mode: standard error as bare, and shimmer's one line once" \
				"lines of shimmer's: $n; $(diff "$T/$name.bare.err" "$T/$name.$mode.prog_err2" | head -10)" \
				holds "[ $n = 1 ] && cmp -s '$T/$name.bare.err' '$T/$name.$mode.prog_err2'"
		else
			check "$name, $mode: standard error as bare, nothing from shimmer before its summary" \
				"$(diff "$T/$name.bare.err" "$T/$name.$mode.prog_err" | head -10)" \
				cmp -s "$T/$name.bare.err" "$T/$name.$mode.prog_err"
		fi
		store_ok "$name" "$mode"
	done
}

# ---- libunwind's pipe ----
# Every allocation sampled (SHIMMER_SAMPLE_BYTES=1), so that sample mode
# learns the same rules as all mode.
SHIMMER_SAMPLE_BYTES=1 same_as_bare unwfds 1 "$WL_HOST" unwfds "$T"
check "unwfds: the program's first files are 3 and 4, and it reads back what it wrote" \
	"$(cat "$T/unwfds.bare.out")" \
	grep -qx 'first files at 3 and 4' "$T/unwfds.bare.out"

# ---- a raw clone(2): the child must not write into its parent's rings ----
same_as_bare rawclone 1 "$WL_HOST" rawclone
for mode in sample all; do
	got=$(sq "$T/rawclone.$mode.db" "SELECT sum(c.count) FROM function_counts c JOIN functions f
		USING (fn_id) JOIN processes p USING (proc_id) WHERE f.name = 'realloc'
		AND p.argv LIKE '%rawclone%'")
	check "rawclone, $mode: the parent's realloc calls are its own 3,100" "counted: $got" \
		[ "$got" = 3100 ]
done

# ---- every descriptor closed: one line, nothing reopened behind it ----
for how in closefrom close_range; do
	ALLOW='^shimmer: the program closed or replaced descriptor' \
		same_as_bare "$how" 1 "$WL_HOST" closefrom "$how"
done
ALLOW='^shimmer: the program closed or replaced descriptor' same_as_bare dup2 1 "$WL_HOST" dup2

finish
