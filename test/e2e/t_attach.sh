#!/bin/bash
# t_attach: shimmer attach against wl_attach (wl_attach.c), a process that
# runs untraced and does what it is told on stdin, logging every call.  The
# test attaches between commands, so the log says exactly which calls fell
# inside the traced window (between its "mark in" and "mark out" lines):
#
#  (a) while attached our BPF programs are loaded; the store then holds
#      exactly the window's CUDA runtime calls (every field the shim
#      records), exact counts, the device allocations and frees, the driver
#      launches, and nothing from before or after; a block allocated before
#      the attach and freed inside it leaves a call and no allocation;
#  (b) heap: exact counts and bytes on the heap thread, a Poisson sample of
#      plausible size whose weights estimate the bytes within the shim's
#      tolerance (t_sample's), every sampled block's free;
#  (c) a leak planted after the attach is named by `shimmer leaks`, at its
#      function, exact on the device and estimated on the host;
#  (d) off-CPU: the time the sleeper thread spent in read() on its pipe is
#      there, attributed to read() called by wait_for_byte() called by
#      sleeper_main(), and the wait still open at the detach is marked open;
#  (e) the process never notices: its output and exit status are those of
#      an untraced run of the same commands, and after the detach none of
#      our BPF programs is loaded;
#  (f) the window (--for) ends the attach while the process lives on, and
#      a process exiting ends it by itself ('exit');
#  (g) without CAP_BPF/CAP_PERFMON: one line naming what is missing, no
#      store left behind, nothing attached;
#  (h) a SIGKILLed shimmer attach takes its collector along and leaves
#      nothing attached.
# Needs root (or CAP_BPF + CAP_PERFMON) and a kernel with BTF: without
# them every case is a SKIP with the reason.
. "$(dirname "$0")/lib.sh"

WLA=$O/test/e2e/wl_attach
need "$SHIMMER" "$SHIMMERD" "$WLA"

avail=$("$SHIMMERD" --check-attach 2>&1)
if [ $? != 0 ]; then
	echo "ok - $SCRIPT: attach # SKIP ${avail#attach: }"
	finish
fi
BPFTOOL=$(command -v bpftool || ls /usr/sbin/bpftool 2>/dev/null)

# ours: how many of our BPF programs (shm_*) are loaded on the machine.
ours() {
	if [ -z "$BPFTOOL" ]; then
		echo "no bpftool"
		return
	fi
	"$BPFTOOL" prog show 2>/dev/null | grep -c ' name shm_'
}


# wla_start NAME: wl_attach on a command pipe (fd 7), its log, stdout,
# stderr and exit status under $T/NAME.*; waits for "ready".
wla_start() { wla_run_in "$T" "$1"; }


# attach DB [OPTION...]: shimmer attach in the background (APID), waits
# until it says it is attached.
attach() {
	local db=$1
	shift
	"$SHIMMER" attach "$WPID" --db "$db" "$@" 2> "$T/$WNAME.attach" &
	APID=$!
	wait_line "$T/$WNAME.attach" '^shimmer: attached to' 30
}

# ---- (a)-(e): one window of commands ---------------------------------------
N=20000 SIZE=1000 S=65536
DB=$T/main.db
COMMANDS_BEFORE=("cuda 2" "heap 2000 1000" "driver 2" "wake")
COMMANDS_IN=("cuda 4" "cuda 5" "failures" "driver 3" "heap $N $SIZE" "heap 0 $SIZE" "leak"
	     "free-old" "wake" "wake" "wake")
COMMANDS_AFTER=("cuda 6" "driver 1" "heap 1000 1000" "wake")

wla_start main
for c in "${COMMANDS_BEFORE[@]}"; do wla $c; done
SHIMMER_SAMPLE_BYTES=$S attach "$DB" --heap
check "attached, and says what it probed" "$(cat "$T/main.attach")" \
	grep -q 'libcudart.so.13.*\|libc.so.6' "$T/main.attach"
got=$(ours)
check "our BPF programs are loaded while attached" "bpftool prog show: $got named shm_*" \
	[ "$got" -ge 5 ]
wla mark in
for c in "${COMMANDS_IN[@]}"; do
	wla $c
	[ "$c" = wake ] && sleep 0.2
done
wla mark out
MAIN_PID=$WPID
kill -INT "$APID"
wait "$APID"
arc=$?
check "shimmer attach exits 0 after SIGINT" "exit status $arc: $(tail -3 "$T/main.attach")" \
	[ "$arc" = 0 ]
check "it prints the summary and the store" "$(tail -3 "$T/main.attach")" \
	grep -q "^store: $DB" "$T/main.attach"
# The kernel frees a program once its last reference goes, after a grace
# period: give it a second.
gone() {
	local i
	for ((i = 0; i < 40; i++)); do [ "$(ours)" = 0 ] && return; sleep 0.05; done
}
gone
got=$(ours)
check "after the detach none of our BPF programs is loaded" \
	"bpftool prog show: $got named shm_*" [ "$got" = 0 ]
for c in "${COMMANDS_AFTER[@]}"; do wla $c; done
wla exit 7

# The same commands untraced: the same output and exit status.
wla_start bare
for c in "${COMMANDS_BEFORE[@]}" "mark in" "${COMMANDS_IN[@]}" "mark out" \
	 "${COMMANDS_AFTER[@]}"; do wla $c; done
wla exit 7
check "the process's stdout is that of an untraced run" \
	"$(diff "$T/bare.out" "$T/main.out" | head -5)" cmp -s "$T/bare.out" "$T/main.out"
check "the process's exit status is its own (7)" "traced $(cat "$T/main.rc"), bare $(cat "$T/bare.rc")" \
	[ "$(cat "$T/main.rc")" = 7 -a "$(cat "$T/bare.rc")" = 7 ]
check "no stderr from the process" "$(head -3 "$T/main.err")" [ ! -s "$T/main.err" ]
check_integrity "store integrity_check" "$DB"

load_log "$T/main.log" "$T/check.db" "$DB"
# The window: the lines between the marks.
IN_LO=$(awk -F, '$1 == "M" && $3 == "in" { print NR; exit }' "$T/main.log")
IN_HI=$(awk -F, '$1 == "M" && $3 == "out" { print NR; exit }' "$T/main.log")
sq "$CHECKDB" "
CREATE TABLE D (seq INTEGER, pid INTEGER, tid INTEGER, fn TEXT, ret INTEGER);
CREATE TABLE L (seq INTEGER, pid INTEGER, tid INTEGER, fn TEXT, bytes INTEGER);
CREATE TABLE R (seq INTEGER, pid INTEGER, tid INTEGER, t0 INTEGER, t1 INTEGER);
CREATE TABLE C0 (seq INTEGER, pid INTEGER, tid INTEGER, fn TEXT, ret INTEGER, ptr INTEGER);"
for ty in D L R C0; do
	awk -F, -v ty=$ty '$1 == ty { sub(/^[^,]*/, NR); print }' "$T/main.log" > "$T/$ty.csv"
	sq "$CHECKDB" ".mode csv" ".import $T/$ty.csv $ty"
done
INWIN="seq > $IN_LO AND seq < $IN_HI"
PROC="(SELECT proc_id FROM s.processes WHERE pid = $MAIN_PID)"

got=$(q "SELECT traced_by, end_reason, malloc_mode, sample_bytes, offcpu, gpu_status
	FROM s.processes WHERE pid = $MAIN_PID")
check "one attached process, ended by the detach, sampled heap, off-CPU traced" "got '$got'" \
	[ "$got" = "attach|detach|sample|$S|traced|attached" ]
# stack_collision: an event stored without its stack (a BPF stack map's
# bucket taken by another stack, now and then): not lost, and not counted
# as lost by the commands (test_model)
got=$(q "SELECT count(*) FROM s.drops WHERE proc_id IN $PROC AND events > 0
	AND reason <> 'stack_collision'")
check "nothing dropped" "$(q "SELECT * FROM s.drops")" [ "$got" = 0 ]

# (a) exactly the window's CUDA calls, every field (wl_cuda_body.h logs
# each as the shim records it).
cols="tid, fn, ret, device, ptr, bytes, stream, kind, aux, aux2, gx, gy, gz, bx, by, bz, ptsz"
expect_empty "CUDA calls: exactly those made between attach and detach" "$(q "
CREATE TEMP VIEW exp_cuda AS SELECT $cols FROM main.C WHERE $INWIN;
CREATE TEMP VIEW got_cuda AS SELECT c.tid, f.name AS fn, c.ret,
	coalesce(c.device, -1) AS device, coalesce(c.ptr, 0) AS ptr,
	coalesce(c.bytes, 0) AS bytes, coalesce(c.stream, 0) AS stream,
	coalesce(c.copy_kind, 0) AS kind, coalesce(c.aux, 0) AS aux, coalesce(c.aux2, 0) AS aux2,
	coalesce(c.grid_x, 0) AS gx, coalesce(c.grid_y, 0) AS gy, coalesce(c.grid_z, 0) AS gz,
	coalesce(c.block_x, 0) AS bx, coalesce(c.block_y, 0) AS by, coalesce(c.block_z, 0) AS bz,
	c.per_thread_stream AS ptsz
	FROM s.cuda_calls c JOIN s.functions f USING (fn_id)
	WHERE c.proc_id IN $PROC AND NOT (f.name = 'cudaFree' AND c.tid = $MAIN_PID);
$(multiset_diff exp_cuda got_cuda "$cols")")"
got=$(q "SELECT count(*) FROM s.cuda_calls c JOIN s.functions f USING (fn_id)
	WHERE c.proc_id IN $PROC AND f.name = 'cudaFree' AND c.tid = $MAIN_PID
	AND c.ptr = (SELECT ptr FROM main.C0) AND c.ret = 0")
check "the free of a block from before the attach: its call is stored" "$got rows" [ "$got" = 1 ]
got=$(q "SELECT count(*) FROM s.allocations WHERE proc_id IN $PROC
	AND ptr = (SELECT ptr FROM main.C0)")
check "... and no allocation row (its allocation was not seen)" "$got rows" [ "$got" = 0 ]
expect_empty "exact counts of the window's CUDA calls" "$(q "
CREATE TEMP VIEW exp_n AS SELECT tid, fn, count(*) AS n FROM main.C WHERE $INWIN
	GROUP BY tid, fn UNION ALL SELECT tid, fn, 1 FROM main.C0;
CREATE TEMP VIEW got_n AS SELECT c.tid, f.name AS fn, c.count AS n FROM s.function_counts c
	JOIN s.functions f USING (fn_id) WHERE c.proc_id IN $PROC AND f.family = 'cuda';
$(multiset_diff exp_n got_n "tid, fn, n")")"
expect_empty "device, pinned and managed allocations of the window, with their frees" "$(q "
CREATE TEMP VIEW exp_alloc AS SELECT a.tid, a.fn, a.ptr, a.size, a.space,
	coalesce((SELECT f.fn FROM main.F f WHERE f.ptr = a.ptr AND f.fam = 'cuda'
		AND f.seq > a.seq ORDER BY f.seq LIMIT 1), '-') AS free_fn
	FROM main.A a WHERE a.fam = 'cuda' AND $INWIN;
CREATE TEMP VIEW got_alloc AS SELECT a.alloc_tid AS tid, fa.name AS fn, a.ptr, a.size, a.space,
	coalesce(ff.name, '-') AS free_fn
	FROM s.allocations a JOIN s.functions fa ON fa.fn_id = a.alloc_fn
	LEFT JOIN s.functions ff ON ff.fn_id = a.free_fn
	WHERE a.proc_id IN $PROC AND a.space <> 'host';
$(multiset_diff exp_alloc got_alloc "tid, fn, ptr, size, space, free_fn")")"
expect_empty "driver launches of the window (gpu_api, driver domain)" "$(q "
CREATE TEMP VIEW exp_d AS SELECT tid, fn FROM main.D WHERE $INWIN;
CREATE TEMP VIEW got_d AS SELECT a.tid, n.text AS fn FROM s.gpu_api a
	JOIN s.strings n ON n.proc_id = a.proc_id AND n.id = a.name_id
	WHERE a.proc_id IN $PROC AND a.domain = 'driver';
$(multiset_diff exp_d got_d "tid, fn")")"

# (b) the heap thread: exact counts, a plausible sample, unbiased weights.
HT=$(awk -F, -v lo=$IN_LO -v hi=$IN_HI -v n=$N '$1 == "H" && NR > lo && NR < hi && $4 == n {
	print $3 }' "$T/main.log")
# A thread that makes no heap call of its own: glibc's thread exit calls
# free(NULL) for its TLS buffers through the PLT, which uprobes see; a
# free(NULL) is counted in no mode (the shim's neither: docs/schema.md),
# so none is (it counted 2).
H0=$(awk -F, -v lo=$IN_LO -v hi=$IN_HI '$1 == "H" && NR > lo && NR < hi && $4 == 0 {
	print $3 }' "$T/main.log")
fc() {
	q "SELECT c.count, c.bytes FROM s.function_counts c JOIN s.functions f USING (fn_id)
		WHERE c.proc_id IN $PROC AND c.tid = ${HT:-0} AND f.name = '$1'"
}
got=$(fc malloc)
check "heap: exact malloc count and bytes ($N, $((N * SIZE)))" "got '$got'" \
	[ "$got" = "$N|$((N * SIZE))" ]
base=$(q "SELECT coalesce(sum(c.count), 0) FROM s.function_counts c JOIN s.functions f
	USING (fn_id) WHERE c.proc_id IN $PROC AND c.tid = ${H0:-0} AND f.name = 'free'")
got=$(fc free)
check "heap: exact free count ($N; no free(NULL) of a thread's exit: $base)" "got '$got'" \
	holds '[ "${got%%|*}" = "$N" ] && [ "$base" = 0 ] && [ -n "$H0" ]'
rows=$(q "SELECT count(*) FROM s.allocations WHERE proc_id IN $PROC AND alloc_tid = ${HT:-0}")
check "heap: sampled rows plausible for SHIMMER_SAMPLE_BYTES=$S (200..420)" "got $rows" \
	[ "$rows" -ge 200 -a "$rows" -le 420 ]
bad=$(q "SELECT count(*) FROM s.allocations WHERE proc_id IN $PROC AND alloc_tid = ${HT:-0}
	AND (sampled <> 1 OR size <> $SIZE OR space <> 'host' OR stack_id IS NULL)")
check "heap: sampled rows flagged, of the right size, with a stack" "$bad are not" [ "$bad" = 0 ]
est=$(q "SELECT CAST(sum(weight) AS INTEGER) FROM s.allocations WHERE proc_id IN $PROC
	AND alloc_tid = ${HT:-0}")
check "heap: sum(weight) estimates the bytes allocated (+-40%)" \
	"estimate ${est:-none} for $((N * SIZE))" \
	[ "${est:-0}" -ge $((N * SIZE * 6 / 10)) -a "${est:-0}" -le $((N * SIZE * 14 / 10)) ]
freed=$(q "SELECT count(*) FROM s.allocations a JOIN s.functions f ON f.fn_id = a.free_fn
	WHERE a.proc_id IN $PROC AND a.alloc_tid = ${HT:-0} AND f.name = 'free'")
check "heap: every sampled block's free" "$freed of $rows" [ "$freed" = "$rows" ]

# (c) the planted leak, by function.
if "$SHIMMER" leaks "$DB" --format csv > "$T/leaks.csv" 2> "$T/leaks.err"; then
	import_csv "$CHECKDB" leaks "$T/leaks.csv"
	got=$(q "SELECT memory, count, bytes FROM main.leaks WHERE frame GLOB 'leak_device *'")
	check "leaks: leak_device named, exact (1 block, 7340033 bytes on cuda:0)" \
		"got '$got'; $(head -5 "$T/leaks.csv")" [ "$got" = "cuda:0|1|7340033" ]
	got=$(q "SELECT CAST(bytes AS INTEGER) FROM main.leaks WHERE frame GLOB 'leak_host *'
		AND memory = 'host'")
	check "leaks: leak_host named, its 32 MiB estimated within 5%" \
		"got '$got'; $(head -5 "$T/leaks.csv")" \
		[ "${got:-0}" -ge 31876710 -a "${got:-0}" -le 35232153 ]
	got=$(q "SELECT count(*) FROM main.leaks WHERE frame GLOB 'heap_loop *'
		OR frame GLOB 'wl_cuda_*'")
	check "leaks: nothing the window freed is called leaked" "$got rows" [ "$got" = 0 ]
else
	not_ok "leaks: shimmer leaks" "$(head -3 "$T/leaks.err")"
fi

# (d) off-CPU time of the sleeper, at its stack.
# read_stack DB PID LOG: the stack id of the sleeper's off-CPU waits at
# read() <- wait_for_byte <- sleeper_main (frames symbolized with
# addr2line: those of the executable by name, libc's as '?'); empty when
# there is none.  $T/sym.txt keeps what was seen.
read_stack() {
	local db=$1 pid=$2 st exe bias proc id names pc off fn line
	st=$(awk -F, '$1 == "R" { print $3; exit }' "$3")
	proc="(SELECT proc_id FROM processes WHERE pid = $pid)"
	exe=$(sq "$db" "SELECT exe FROM processes WHERE pid = $pid")
	bias=$(sq "$db" "SELECT m.bias FROM modules m JOIN strings p ON p.proc_id = m.proc_id
		AND p.id = m.path_id WHERE m.proc_id IN $proc AND p.text = '$exe'")
	sq "$db" "SELECT o.stack_id, group_concat(f.pc, ' ') FROM (SELECT DISTINCT stack_id
		FROM offcpu WHERE proc_id IN $proc AND tid = ${st:-0} AND state = 'sleep') o
		JOIN stack_frames f ON f.proc_id IN $proc AND f.stack_id = o.stack_id
		GROUP BY o.stack_id" > "$T/stacks.txt"
	: > "$T/sym.txt"
	while read -r line; do
		id=${line%%|*}
		names=
		for pc in ${line#*|}; do
			off=$((pc - ${bias:-0} - 1))
			if [ "$off" -gt 0 ] &&
			   fn=$(addr2line -f -e "$exe" "$(printf '0x%x' $off)" | head -1) &&
			   [ "$fn" != "??" ]; then
				names="$names;$fn"
			else
				names="$names;?"
			fi
		done
		echo "$id ${names#;}" >> "$T/sym.txt"
	done < "$T/stacks.txt"
	awk '$2 ~ /^\?;wait_for_byte;sleeper_main(;|$)/ { print $1; exit }' "$T/sym.txt"
}

ST=$(q "SELECT tid FROM main.R LIMIT 1")
READ_STACK=$(read_stack "$DB" "$MAIN_PID" "$T/main.log")
check "off-CPU: the sleeper's wait is at read() <- wait_for_byte <- sleeper_main" \
	"$(head -5 "$T/sym.txt")" [ -n "$READ_STACK" ]
# The waits logged inside the traced span: off-CPU time at that stack must
# cover them (the thread is off the CPU for all of a wait but the few
# microseconds around the switch).
SPAN=$(q "SELECT start_ns, end_ns FROM s.processes WHERE pid = $MAIN_PID")
S0=${SPAN%|*} S1=${SPAN#*|}
want=$(q "SELECT coalesce(sum(t1 - t0), 0) FROM main.R WHERE t0 > $S0 AND t1 < $S1")
have=$(q "SELECT coalesce(sum(min(o.end_ns, r.t1) - max(o.start_ns, r.t0)), 0)
	FROM main.R r JOIN s.offcpu o ON o.proc_id IN $PROC AND o.tid = r.tid
	AND o.stack_id = ${READ_STACK:-0} AND o.start_ns < r.t1 AND o.end_ns > r.t0
	WHERE r.t0 > $S0 AND r.t1 < $S1")
check "off-CPU: the waits in read() inside the window are there (>= 95% of $want ns)" \
	"off-CPU at that stack: $have ns" [ "$want" -gt 0 -a "$have" -ge $((want * 95 / 100)) ]
got=$(q "SELECT count(*) FROM s.offcpu WHERE proc_id IN $PROC AND tid = ${ST:-0} AND open = 1
	AND stack_id = ${READ_STACK:-0} AND end_ns = $S1")
check "off-CPU: the wait in progress at the detach ends there, marked open" "$got rows" \
	[ "$got" = 1 ]

# ---- (f) the window, and the process's exit -------------------------------
wla_start win
t0=$(date +%s%N)
attach "$T/win.db" --for 1s
wait "$APID"
arc=$?
t1=$(date +%s%N)
check "--for 1s: detaches by itself after about 1 s" "exit $arc after $(((t1 - t0) / 1000000)) ms" \
	[ "$arc" = 0 -a $((t1 - t0)) -ge 1000000000 -a $((t1 - t0)) -lt 6000000000 ]
# The span ends when the probes are out: the window, the 100 ms tick that
# notices it, and the detach (a few hundred ms on a loaded machine).
got=$(sq "$T/win.db" "SELECT end_reason, (end_ns - start_ns) / 100000000 FROM processes")
check "--for 1s: ended as 'detach', 1 s traced (1.0 to 2.5 s with the detach)" "got '$got'" \
	[ "${got%|*}" = detach -a "${got#*|}" -ge 10 -a "${got#*|}" -le 25 ]
wla cuda 8
wla exit 0
check "--for 1s: the process lives on and exits 0" "exit $(cat "$T/win.rc")" \
	[ "$(cat "$T/win.rc")" = 0 ]

wla_start quit
attach "$T/quit.db"
default_probes() {
	grep -q 'libcuda.so.1.*libcudart.so.13, off-CPU time; ' "$T/quit.attach" &&
		! grep -q 'libc.so' "$T/quit.attach"
}
check "by default: the CUDA runtime and driver, off-CPU time, not the malloc family" \
	"$(head -1 "$T/quit.attach")" default_probes
wla cuda 9
wla exit 3
wait "$APID"
arc=$?
check "the process exits: shimmer attach ends by itself, exit 0" "exit $arc" [ "$arc" = 0 ]
n=$(grep -c '^C,' "$T/quit.log")
got=$(sq "$T/quit.db" "SELECT end_reason, (SELECT count(*) FROM cuda_calls) FROM processes")
check "the process exits: ended as 'exit', its calls stored" "got '$got'" [ "$got" = "exit|$n" ]
check "the process exits: with its own status (3)" "exit $(cat "$T/quit.rc")" \
	[ "$(cat "$T/quit.rc")" = 3 ]
gone
got=$(ours)
check "the process exits: none of our BPF programs stays" "$got loaded" [ "$got" = 0 ]

# ---- (g) privileges -------------------------------------------------------
# one_line RC TEXT: exit status 1 and a single line of stderr that says TEXT
one_line() {
	[ "$1" = 1 ] && [ "$(wc -l < "$T/caps.err")" = 1 ] && grep -q "$2" "$T/caps.err"
}
if command -v setpriv > /dev/null; then
	wla_start caps
	for drop in "-bpf,-perfmon,-sys_admin:CAP_BPF and CAP_PERFMON are missing" \
		    "-bpf,-sys_admin:CAP_BPF is missing" "-perfmon,-sys_admin:CAP_PERFMON is missing"; do
		setpriv --inh-caps=-all --bounding-set="${drop%%:*}" \
			"$SHIMMER" attach "$WPID" --db "$T/caps.db" > "$T/caps.stdout" 2> "$T/caps.err"
		rc=$?
		check "without ${drop#*:}: exit 1 and one line that says so" \
			"exit $rc: $(cat "$T/caps.err")" one_line "$rc" "${drop#*:}"
		check "without ${drop#*:}: no store left" "$(ls "$T"/caps.db* 2>&1)" \
			[ ! -e "$T/caps.db" ]
	done
	wla cuda 10
	wla exit 0
	check "without capabilities: the process is untouched" "exit $(cat "$T/caps.rc")" \
		[ "$(cat "$T/caps.rc")" = 0 ]
else
	ok "privileges # SKIP no setpriv"
fi

# ---- (i) SHIMMER_OFFCPU=1 for a preloaded process --------------------------
# wla_run NAME [VAR=VALUE...] [COMMAND...]: wl_attach under shimmer run,
# run through `env VAR=VALUE... COMMAND...`, commands on fd 7 as for
# wla_start.
wla_run() {
	local name=$1
	shift
	wla_run_in "$T" "$name" env "$@" "$SHIMMER" run --db "$T/$name.db" --
}

wla_run pre SHIMMER_OFFCPU=1
for i in 1 2 3; do wla wake; sleep 0.2; done
wla exit 0
check "SHIMMER_OFFCPU=1: shimmer run exits 0" "exit $(cat "$T/pre.rc"): $(tail -3 "$T/pre.err")" \
	[ "$(cat "$T/pre.rc")" = 0 ]
got=$(sq "$T/pre.db" "SELECT traced_by, offcpu FROM processes WHERE pid = $WPID")
check "SHIMMER_OFFCPU=1: a preloaded process, off-CPU traced" "got '$got'" \
	[ "$got" = "preload|traced" ]
stack=$(read_stack "$T/pre.db" "$WPID" "$T/pre.log")
check "SHIMMER_OFFCPU=1: the sleeper's waits at read() <- wait_for_byte <- sleeper_main" \
	"$(head -5 "$T/sym.txt")" [ -n "$stack" ]
got=$(sq "$T/pre.db" "SELECT count(*) FROM offcpu o WHERE stack_id = ${stack:-0}
	AND stack_id < 2147483648")
check "SHIMMER_OFFCPU=1: its stack ids stay clear of the shim's (from 2^31)" "$got below" \
	[ "$got" = 0 ]
if command -v setpriv > /dev/null; then
	wla_run prenocap SHIMMER_OFFCPU=1 setpriv --inh-caps=-all --bounding-set=-bpf,-perfmon,-sys_admin
	wla cuda 12
	wla exit 0
	got=$(sq "$T/prenocap.db" "SELECT offcpu, offcpu_detail, (SELECT count(*) FROM cuda_calls)
		FROM processes WHERE pid = $WPID")
	unavailable() {
		[ "${got%%|*}" = unavailable ] && grep -q "CAP_BPF" <<< "$got" && [ "${got##*|}" -gt 0 ]
	}
	check "SHIMMER_OFFCPU=1 without CAP_BPF: the row says why, the run is traced" \
		"got '$got'" unavailable
fi

# ---- (h) shimmer attach killed ------------------------------------------
wla_start kill
attach "$T/kill.db"
kill -KILL "$APID"
wait "$APID" 2> /dev/null
for ((i = 0; i < 100; i++)); do [ "$(ours)" = 0 ] && break; sleep 0.05; done
gone
got=$(ours)
check "SIGKILLed shimmer attach: its collector detaches, nothing stays" "$got loaded" [ "$got" = 0 ]
got=$(sq "$T/kill.db" "SELECT end_reason FROM processes")
check "SIGKILLed shimmer attach: the row is ended ('detach')" "got '$got'" [ "$got" = detach ]
wla cuda 11
wla exit 0
check "SIGKILLed shimmer attach: the process is untouched" "exit $(cat "$T/kill.rc")" \
	[ "$(cat "$T/kill.rc")" = 0 ]
finish
