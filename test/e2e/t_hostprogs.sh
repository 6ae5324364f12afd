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
#  - proctitle: the shim kept SHIMMER_SOCKET as a pointer into the
#    environment's memory, which a program that sets its process title
#    writes over (Chromium's zygote, nginx, PostgreSQL): its fork children
#    said "collector not reached at  (Connection refused)" and went
#    untraced (6 such lines in a chromium --headless run); settings.c
#    keeps copies.
#  - ulimit: the shim's address space (the region, the stack tables: 250
#    MiB in sample mode, 450 MiB in all mode) counts against RLIMIT_AS: a
#    program that allocates 300 MiB under `ulimit -v 600000` failed under
#    the shim; now the shim stays out, in one line, when it would take
#    more than an eighth of the limit (init.c, room_for_us()).
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
			# the one line shimmer may add (docs/usage.md), once a
			# program image (ALLOW_N images)
			n=$(grep -c -- "$ALLOW" "$T/$name.$mode.prog_err")
			grep -v -- "$ALLOW" "$T/$name.$mode.prog_err" > "$T/$name.$mode.prog_err2"
			check "$name, $mode: standard error as bare, and shimmer's one line ${ALLOW_N:-1} time(s)" \
				"lines of shimmer's: $n; $(diff "$T/$name.bare.err" "$T/$name.$mode.prog_err2" | head -10)" \
				holds "[ $n = ${ALLOW_N:-1} ] && cmp -s '$T/$name.bare.err' '$T/$name.$mode.prog_err2'"
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

# ---- a process title written over the environment ----
same_as_bare proctitle 1 "$WL_HOST" proctitle
for mode in sample all; do
	got=$(sq -separator ' ' "$T/proctitle.$mode.db" "SELECT group_concat(c.end_reason || ':' ||
		(c.parent_proc_id = p.proc_id), ' ') FROM processes c, processes p
		WHERE p.parent_proc_id IS NULL AND c.proc_id <> p.proc_id ORDER BY c.proc_id")
	check "proctitle, $mode: the fork child traced, then the program it executes, under the parent" \
		"child rows (end:under parent): $got" [ "$got" = "exec:1 exit:1" ]
done

# ---- an address-space limit ----
ALLOW='^shimmer: RLIMIT_AS (ulimit -v) allows 585 MiB of address space' \
	same_as_bare ulimit 1 bash -c 'ulimit -v 600000 && exec "$0" alloc 300' "$WL_HOST"

# ---- what programs do to their own process ----
same_as_bare mallocapi 1 "$WL_HOST" mallocapi
same_as_bare cloexec 1 "$WL_HOST" closefrom cloexec
same_as_bare sigblock 1 "$WL_HOST" sigblock
same_as_bare threads 1 "$WL_HOST" threads 500
same_as_bare spawn 1 "$WL_HOST" spawn
same_as_bare selfexec 1 "$WL_HOST" selfexec 5
same_as_bare rlimit 1 "$WL_HOST" rlimit
same_as_bare prctl 1 "$WL_HOST" prctl
# the child of a program that cleared LD_PRELOAD is not traced, silently
same_as_bare unsetenv 1 "$WL_HOST" unsetenv
# a child that cannot reach the collector (seccomp refuses socket(2)):
# one line in the fork child, one in the program it executes
ALLOW='^shimmer: collector not reached at .* (Operation not permitted); not tracing' ALLOW_N=2 \
	same_as_bare seccomp 1 "$WL_HOST" seccomp
# a child that drops to another user (no setuid program): the collector's
# private socket is not its to reach (root only)
if [ "$(id -u)" = 0 ]; then
	ALLOW='^shimmer: collector not reached at .* (Permission denied); not tracing' ALLOW_N=2 \
		same_as_bare dropuid 1 "$WL_HOST" dropuid
fi

# 2,000 short children, each a row under its parent, ended by its exit
same_as_bare forks 1 "$WL_HOST" forks 2000
for mode in sample all; do
	got=$(sq -separator ' ' "$T/forks.$mode.db" "SELECT count(*), sum(c.end_reason = 'exit'),
		sum(c.parent_proc_id = p.proc_id AND c.ppid = p.pid) FROM processes c, processes p
		WHERE p.parent_proc_id IS NULL AND c.proc_id <> p.proc_id")
	check "forks, $mode: 2,000 children stored, each ended by its exit, each under its parent" \
		"children, ended by exit, under the parent: $got" [ "$got" = "2000 2000 2000" ]
done

# ---- another allocator preloaded, behind the shim and ahead of it ----
# Debian's libjemalloc2 and libtcmalloc-minimal4, when installed.  Behind:
# traced as glibc's is.  Ahead: one line (docs/usage.md), the heap not
# traced, the rest as bare.
for lib in /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 /usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4; do
	n=$(basename "$lib" | cut -d. -f1)
	if [ ! -f "$lib" ]; then
		echo "ok - $SCRIPT: $n # SKIP not installed"
		continue
	fi
	for c in "threads 300" "forks 200" rawclone spawn; do
		# (set by a shell in front, not on shimmer itself, which may be
		# built with a sanitizer that must come first)
		same_as_bare "$n behind, ${c% *}" 1 bash -c \
			'LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD }$0" exec "$@"' "$lib" "$WL_HOST" $c
	done
	ALLOW="^shimmer: the program's malloc is $lib's, ahead of libshimmer.so" \
		same_as_bare "$n ahead" 1 bash -c 'LD_PRELOAD="$0 $LD_PRELOAD" exec "$1" threads 300' \
		"$lib" "$WL_HOST"
	got=$(sq "$T/$n ahead.all.db" "SELECT group_concat(malloc_mode) FROM processes WHERE exe LIKE '%/wl_host'")
	check "$n ahead: the heap not traced" "malloc_mode: $got" [ "$got" = off ]
done

# ---- real programs (each skipped when not installed) ----
# have PROG...: true when every PROG is on PATH, else a skip line.
have() {
	local p
	for p in "$@"; do
		if ! command -v "$p" > /dev/null; then
			echo "ok - $SCRIPT: $p # SKIP not installed"
			return 1
		fi
	done
}

mkdir "$T/proj" "$T/tree"
for i in 1 2 3 4 5 6; do printf 'int f%d(int x) { return x * %d; }\n' $i $i > "$T/proj/f$i.c"; done
printf '#include <stdio.h>\nint f1(int);\nint main(void) { printf("%%d\\n", f1(7)); return 0; }\n' \
	> "$T/proj/main.c"
printf 'prog: main.o f1.o f2.o f3.o f4.o f5.o f6.o\n\t$(CC) -o $@ $^\n%%.o: %%.c\n\t$(CC) -O2 -c -o $@ $<\n' \
	> "$T/proj/Makefile"
for i in $(seq 1 120); do seq 1 "$i" > "$T/tree/f$i.txt"; done
seq 1 100000 | awk '{ print ($1 * 7919) % 100003 }' > "$T/nums.txt"

have bash sort uniq && same_as_bare pipeline 1 bash -c \
	'seq 1 20000 | sort -n | uniq -c | sort -rn | head -3; (sleep 0.05 & wait); echo $((6 * 7))'
# job control: stop, continue and kill a background job (bash's notices,
# whose timing varies, go to a file; shimmer's lines there are counted)
have bash ps && same_as_bare jobs 1 bash -c 'exec 3>&2 2> jobs.err; set -m; sleep 5 & j=$!
	kill -STOP $j; until [ "$(ps -o stat= -p $j | cut -c1)" = T ]; do sleep 0.01; done
	echo stopped; kill -CONT $j; kill -TERM $j; wait $j; s=$?
	while [ $s = 147 ]; do wait $j; s=$?; done
	echo "status $s, shimmer lines $(grep -c "^shimmer" jobs.err)"'
have make cc && same_as_bare make 1 bash -c 'make -s -j4 -C proj && ./proj/prog && rm -f proj/*.o proj/prog'
if have git; then
	git init -q "$T/repo" && for i in 1 2 3 4 5; do
		echo "$i" > "$T/repo/f$i" && git -C "$T/repo" add "f$i" &&
			git -C "$T/repo" -c user.name=t -c user.email=t@t commit -qm "c$i"
	done
	same_as_bare git 1 bash -c 'rm -rf clone && git clone -q repo clone && git -C clone gc -q &&
		git -C clone log --format=%s | paste -sd " "'
fi
have tar xz && same_as_bare xz 1 bash -c 'tar -cf - tree | xz -T2 -c | xz -dc | tar -tf - | wc -l'
have tar zstd && same_as_bare zstd 1 bash -c 'tar -cf - tree | zstd -q -T2 -c | zstd -qdc | cksum'
have sqlite3 && same_as_bare sqlite3 1 sqlite3 ':memory:' 'create table t(a);
	with recursive c(x) as (select 1 union all select x + 1 from c where x < 20000)
	insert into t select x from c; select count(*), sum(a) from t; pragma integrity_check;'
have perl && same_as_bare perl 1 perl -e \
	'my %h; $h{$_ % 500} .= "x" for 1..50000; print scalar(keys %h), " ", length(join("", values %h)), "\n"'
have cc && same_as_bare cc 1 bash -c 'cc -O2 -o prog1 proj/f1.c proj/main.c && ./prog1'
have find xargs wc && same_as_bare xargs 1 bash -c \
	"find tree -name '*.txt' -print0 | xargs -0 -P4 -n10 cat | wc -l"
have sort && same_as_bare sort 1 sort -n --parallel=4 -S 10M -o sorted.txt nums.txt
if py=$(python_exe); then
	cat > "$T/mp.py" <<'PY'
import concurrent.futures as cf, multiprocessing as mp
def sq(x): return x * x
if __name__ == '__main__':
    for m in ('fork', 'spawn'):
        with mp.get_context(m).Pool(2) as p:
            print(m, sum(p.map(sq, range(100))))
    with cf.ThreadPoolExecutor(4) as ex:
        print('threads', sum(ex.map(sq, range(500))))
PY
	same_as_bare python 1 "$py" mp.py
else
	echo "ok - $SCRIPT: python3 # SKIP not installed"
fi
if have node; then
	echo 'let a = []; for (let i = 0; i < 100000; i++) a.push({i}); console.log(a.length,
		require("child_process").execFileSync("echo", ["child"]).toString().trim())' > "$T/t.js"
	same_as_bare node 1 node t.js
fi
if have chromium; then
	echo '<html><body><p id="p">-</p><script>document.getElementById("p").textContent =
		"js " + 6 * 7;</script></body></html>' > "$T/page.html"
	# its own stderr (dbus and GPU notices, varying) to a file, where
	# shimmer's lines are counted but the two documented ones, each once
	# in a process: its own allocator (PartitionAlloc, linked in), and a
	# child that closes every descriptor before it executes another
	same_as_bare chromium 1 bash -c 'chromium --headless --no-sandbox --disable-gpu \
		--user-data-dir="$PWD/chromium.$RANDOM" --dump-dom "file://$PWD/page.html" 2> chromium.err
		echo "status $?, other shimmer lines $(grep "^shimmer" chromium.err | grep -v \
		-e "^shimmer: the program.s malloc is the executable.s, ahead of libshimmer.so" \
		-e "^shimmer: the program closed or replaced descriptor" -c)"'
fi

finish
