# lib.sh: helpers for the end-to-end tests, sourced by test/e2e/t_*.sh.
#
# Each test script starts its own shimmerd on a private socket and store in
# a temporary directory, runs workloads under the shim, stops the collector
# and compares the store with the workloads' own logs (wlog.h), in SQL: the
# log is imported into a scratch database that attaches the store.
#
# Every case prints one line, "ok - SCRIPT: CASE" or "not ok - SCRIPT: CASE"
# followed by "#" lines saying why; test/run-tests counts them.  A script's
# exit status is non-zero when a case failed.
set -u

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
O=${O:-build}
case $O in /*) ;; *) O=$ROOT/$O ;; esac
SHIM=$O/lib/libshimmer.so
SHIMMERD=$O/bin/shimmerd
SHIMMER=$O/bin/shimmer
WL=$O/test/e2e/wl
WL_GPU=$O/test/e2e/wl_gpu
FAKE_CUPTI=$O/test/fake_cudart/libcupti.so.13
BADCLIENT=$O/test/e2e/badclient
SCRIPT=$(basename "$0" .sh)
T=$(mktemp -d "${TMPDIR:-/tmp}/shimmer-e2e.XXXXXX")
SOCK=$T/sock
CPID=
FAILED=0

cleanup() {
	[ -n "$CPID" ] && kill -KILL "$CPID" 2>/dev/null
	if [ "$FAILED" = 0 ] || [ -z "${SHIMMER_KEEP_TMP:-}" ]; then
		rm -rf "$T"
	else
		echo "# kept $T"
	fi
}
trap cleanup EXIT

ok() { echo "ok - $SCRIPT: $1"; }

# not_ok CASE [REASON...]
not_ok() {
	echo "not ok - $SCRIPT: $1"
	shift
	local l
	for l in "$@"; do printf '%s\n' "$l" | sed 's/^/#   /'; done
	FAILED=1
}

# check CASE REASON COMMAND...: ok when COMMAND succeeds.
check() {
	local name=$1 why=$2
	shift 2
	if "$@"; then ok "$name"; else not_ok "$name" "$why"; fi
}

# holds 'COND && COND ...': check's command for several conditions, all of
# them inside it (written bare after check, the ones after its first '&&'
# ran outside check, their failure unseen).
holds() { eval "$1"; }

# expect_empty CASE OUTPUT: ok when OUTPUT (rows of differences) is empty.
expect_empty() {
	if [ -z "$2" ]; then ok "$1"; else not_ok "$1" "$(printf '%s\n' "$2" | head -20)"; fi
}

finish() { exit "$FAILED"; }

need() {
	local f
	for f in "$@"; do
		if [ ! -x "$f" ] && [ ! -f "$f" ]; then
			not_ok "prerequisites" "missing $f (not built?)"
			finish
		fi
	done
}

# start_daemon ARGS...: shimmerd on $SOCK with ARGS, waits for its ready
# byte.  SHIMMERD_NOFILE=N: the collector runs with at most N descriptors.
# SHIMMERD_AS=USER (root only): as USER with CAP_CHOWN alone, as
# shimmerd.service runs it.
start_daemon() {
	local fifo=$T/ready.$RANDOM byte
	rm -f "$SOCK"
	mkfifo "$fifo"
	${SHIMMERD_AS:+setpriv --reuid=$SHIMMERD_AS --regid=$SHIMMERD_AS --clear-groups \
		--inh-caps=-all,+chown --ambient-caps=-all,+chown --bounding-set=-all,+chown} \
	${SHIMMERD_NOFILE:+prlimit --nofile=$SHIMMERD_NOFILE:$SHIMMERD_NOFILE} \
		"$SHIMMERD" --foreground --no-config --socket "$SOCK" "$@" --ready-fd 3 \
		3>"$fifo" 2>>"$T/collector.log" &
	CPID=$!
	byte=$(timeout 20 head -c1 "$fifo" | od -An -c)
	rm -f "$fifo"
	if [ -z "$byte" ]; then
		echo "# shimmerd did not become ready; its log:" >&2
		sed 's/^/#   /' "$T/collector.log" >&2
		return 1
	fi
}

# start_collector DB: one store for every process.
start_collector() { start_daemon --db "$1"; }

# start_service STATE [ARGS...]: recordings in the state directory STATE,
# as the service keeps them.
start_service() {
	local state=$1
	shift
	start_daemon --state-dir "$state" "$@"
}

# recordings [ARGS...]: `shimmer ls --format csv` without its header:
# job,user,host,start,duration,processes,ranks,size,state,path
recordings() {
	"$SHIMMER" ls --socket "$SOCK" --format csv "$@" | tail -n +2
}

# stop_collector: SIGTERM, then its exit status (0 expected).
stop_collector() {
	local rc=0
	[ -n "$CPID" ] || return 1
	kill -TERM "$CPID" 2>/dev/null
	wait "$CPID" || rc=$?
	CPID=
	return $rc
}

# traced ENVFILE-LESS: run "$@" under the shim, all heap calls traced, its
# log to $WLOG.  The variables are set on the command only (never on a
# helper such as env, which would be traced too).
traced() {
	LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK SHIMMER_MALLOC=${SHIMMER_MALLOC:-all} \
		WL_LOG=$WLOG "$@"
}

# wait_reconnected: waits for $pid_lossless and $pid_lossy (the programs
# of check_reconnected, their stderr in $T/rc.MODE.err) once a collector
# started again at $restarted (date +%s%N): each exits 0 and says
# nothing, the lossless one within 4.5 s (no stall on the dead collector).
wait_reconnected() {
	local rc rc_lossy rc_lossless ended ms mode
	wait "$pid_lossless"
	rc_lossless=$?
	ended=$(date +%s%N)
	wait "$pid_lossy"
	rc_lossy=$?
	for mode in lossy lossless; do
		eval "rc=\$rc_$mode"
		check "reconnect, $mode: the program exits 0 and says nothing" \
			"exit $rc; stderr: $(head -c 300 "$T/rc.$mode.err")" \
			holds '[ "$rc" = 0 ] && [ ! -s "$T/rc.$mode.err" ]'
	done
	ms=$(( (ended - restarted) / 1000000 ))
	check "reconnect, lossless: no stall on the dead collector (ended $ms ms after the restart)" \
		"$ms ms" [ $ms -lt 4500 ]
}

# check_reconnected DB N: the two programs of `wl_hard load 2 N keep K`
# (lossless and lossy) that lost their collector and reconnected to the
# next: one row each, continued and ended 'exit'; per process stored +
# dropped == produced, exactly, with drops counted as 'collector_lost'.
# Worker threads only: the main thread's calls include libc's frees of
# blocks allocated before tracing began.
check_reconnected() {
	local acct n bad
	# per process: lossless, pid, rows of it, end_reason, produced,
	# stored, dropped, of which collector_lost
	acct=$(sq -separator ' ' "$1" "SELECT p.lossless, p.pid,
	(SELECT count(*) FROM processes q WHERE q.pid = p.pid), p.end_reason,
	(SELECT coalesce(sum(c.count), 0) FROM function_counts c JOIN functions f USING (fn_id)
	 WHERE c.proc_id = p.proc_id AND f.family = 'heap' AND c.tid <> p.pid),
	(SELECT count(*) FROM allocations a WHERE a.proc_id = p.proc_id AND a.alloc_tid <> p.pid)
	+ (SELECT count(*) FROM allocations a WHERE a.proc_id = p.proc_id AND a.free_tid <> p.pid),
	(SELECT coalesce(sum(events), 0) FROM drops d WHERE d.proc_id = p.proc_id AND d.tid <> p.pid),
	(SELECT coalesce(sum(events), 0) FROM drops d WHERE d.proc_id = p.proc_id
	 AND d.reason = 'collector_lost')
	FROM processes p WHERE p.argv LIKE '%$2%' ORDER BY p.lossless")
	echo "# reconnect: lossless pid rows end produced stored dropped lost"
	sed 's/^/# /' <<< "$acct"
	n=$(printf '%s\n' "$acct" | awk '$3 == 1 && $4 == "exit"' | wc -l)
	check "reconnect: each program one row, continued and ended at its exit" "$acct" [ "$n" = 2 ]
	bad=$(printf '%s\n' "$acct" | awk '$6 + $7 != $5 || $5 != '$((2 * ($2 + 2)))' || $8 == 0')
	expect_empty "reconnect: stored + dropped == produced, the loss counted as collector_lost" "$bad"
}

# A collector that closes a small store compacts it (docs/schema.md), and
# holds it exclusively for that moment: a read then waits, as the shimmer
# commands do, instead of failing with "database is locked".
sq() { sqlite3 -batch -bail -cmd '.timeout 10000' "$@"; }

# load_log LOG CHECKDB STORE: the log's lines as tables P, T, A, F, C (each
# with seq, the line number) in CHECKDB, with the store attached as s.
load_log() {
	local log=$1 db=$2 store=$3 ty
	rm -f "$db"
	sq "$db" "
CREATE TABLE P (seq INTEGER, pid INTEGER, ppid INTEGER, img INTEGER);
CREATE TABLE T (seq INTEGER, pid INTEGER, tid INTEGER, worker INTEGER);
CREATE TABLE A (seq INTEGER, pid INTEGER, tid INTEGER, fn TEXT, ptr INTEGER, size INTEGER,
	space TEXT, device INTEGER, fam TEXT);
CREATE TABLE F (seq INTEGER, pid INTEGER, tid INTEGER, fn TEXT, ptr INTEGER, fam TEXT);
CREATE TABLE C (seq INTEGER, pid INTEGER, tid INTEGER, fn TEXT, ret INTEGER, device INTEGER,
	ptr INTEGER, bytes INTEGER, stream INTEGER, kind INTEGER, aux INTEGER, aux2 INTEGER,
	gx INTEGER, gy INTEGER, gz INTEGER, bx INTEGER, by INTEGER, bz INTEGER, ptsz INTEGER);"
	for ty in P T A F C; do
		awk -F, -v ty=$ty '$1 == ty { sub(/^[^,]*/, NR); print }' "$log" > "$T/$ty.csv"
		sq "$db" ".mode csv" ".import $T/$ty.csv $ty"
	done
	CHECKDB=$db
	STORE=$store
}

# q SQL: runs SQL on the check database with the store attached as s.
# SQLite's errors go to stdout too, so that a broken query fails the case
# that expected no rows.
q() {
	sq "$CHECKDB" "ATTACH '$STORE' AS s;" "$@" 2>&1
}

# The store's processes that belong to the log (by pid).
PIDS="(SELECT pid FROM main.P)"

# multiset_diff EXPECTED STORED COLS: SQL listing the rows (with their
# multiplicity n) that one view has and the other has not, both ways.
multiset_diff() {
	local e=$1 g=$2 c=$3
	echo "SELECT 'logged, not stored:', $c, n FROM (
	SELECT $c, count(*) AS n FROM $e GROUP BY $c EXCEPT
	SELECT $c, count(*) FROM $g GROUP BY $c) LIMIT 10;
SELECT 'stored, not logged:', $c, n FROM (
	SELECT $c, count(*) AS n FROM $g GROUP BY $c EXCEPT
	SELECT $c, count(*) FROM $e GROUP BY $c) LIMIT 10;"
}

# diff_cuda: rows differing between the logged and the stored CUDA calls
# (a multiset comparison of every field the wire format defines).
diff_cuda() {
	local cols="pid, tid, fn, ret, device, ptr, bytes, stream, kind, aux, aux2, gx, gy, gz, bx, by, bz, ptsz"
	q "
CREATE TEMP VIEW exp_cuda AS SELECT pid, tid, fn, ret, device, ptr, bytes, stream,
	CASE WHEN fn = 'cudaMemcpyPeerAsync' THEN -1 ELSE kind END AS kind, aux, aux2,
	gx, gy, gz, bx, by, bz, ptsz FROM main.C;
CREATE TEMP VIEW got_cuda AS SELECT p.pid, c.tid, f.name AS fn, c.ret,
	coalesce(c.device, -1) AS device, coalesce(c.ptr, 0) AS ptr,
	coalesce(c.bytes, 0) AS bytes, coalesce(c.stream, 0) AS stream,
	CASE WHEN f.name = 'cudaMemcpyPeerAsync' THEN -1 ELSE coalesce(c.copy_kind, 0) END AS kind,
	coalesce(c.aux, 0) AS aux, coalesce(c.aux2, 0) AS aux2,
	coalesce(c.grid_x, 0) AS gx, coalesce(c.grid_y, 0) AS gy, coalesce(c.grid_z, 0) AS gz,
	coalesce(c.block_x, 0) AS bx, coalesce(c.block_y, 0) AS by, coalesce(c.block_z, 0) AS bz,
	c.per_thread_stream AS ptsz
	FROM s.cuda_calls c JOIN s.functions f USING (fn_id) JOIN s.processes p USING (proc_id)
	WHERE p.pid IN $PIDS;
$(multiset_diff exp_cuda got_cuda "$cols")"
}

# diff_allocs: the allocations table against the logged allocations, each
# paired with the first later release of the same block in its process.
# Host rows are matched by the sizes the workload used.
diff_allocs() {
	local cols="pid, tid, fn, ptr, size, space, dev, free_fn, free_tid"
	q "
CREATE TEMP VIEW exp_alloc AS SELECT a.pid, a.tid, a.fn, a.ptr, a.size, a.space,
	CASE WHEN a.space = 'device' THEN a.device ELSE NULL END AS dev,
	coalesce((SELECT f.fn FROM main.F f WHERE f.pid = a.pid AND f.ptr = a.ptr
		AND f.fam = a.fam AND f.seq > a.seq ORDER BY f.seq LIMIT 1), '-') AS free_fn,
	coalesce((SELECT f.tid FROM main.F f WHERE f.pid = a.pid AND f.ptr = a.ptr
		AND f.fam = a.fam AND f.seq > a.seq ORDER BY f.seq LIMIT 1), -1) AS free_tid
	FROM main.A a;
CREATE TEMP VIEW got_alloc AS SELECT p.pid, a.alloc_tid AS tid, fa.name AS fn, a.ptr, a.size,
	a.space, CASE WHEN a.space = 'device' THEN a.device ELSE NULL END AS dev,
	coalesce(ff.name, '-') AS free_fn, coalesce(a.free_tid, -1) AS free_tid
	FROM s.allocations a JOIN s.processes p USING (proc_id)
	JOIN s.functions fa ON fa.fn_id = a.alloc_fn LEFT JOIN s.functions ff ON ff.fn_id = a.free_fn
	WHERE p.pid IN $PIDS AND (a.space <> 'host' OR a.size IN
		(SELECT size FROM main.A x WHERE x.pid = p.pid AND x.fam = 'host'));
$(multiset_diff exp_alloc got_alloc "$cols")"
}

# diff_procs END_REASON: logged processes without a matching stored one
# (pid, ppid, parent_proc_id, image, malloc mode, end_reason).
diff_procs() {
	q "
SELECT 'no stored process for', x.pid, x.ppid, x.img FROM main.P x WHERE NOT EXISTS (
	SELECT 1 FROM s.processes p WHERE p.pid = x.pid AND p.ppid = x.ppid
	AND p.malloc_mode = '${SHIMMER_MALLOC:-all}' AND p.end_reason = '$1'
	AND (p.argv LIKE '%exec-child%') = (x.img = 1)
	AND p.parent_proc_id IS (SELECT max(q.proc_id) FROM s.processes q WHERE q.pid = x.ppid));
SELECT 'no stored thread for', x.pid, x.tid FROM main.T x WHERE NOT EXISTS (
	SELECT 1 FROM s.threads t JOIN s.processes p USING (proc_id)
	WHERE p.pid = x.pid AND t.tid = x.tid);"
}

# diff_counts: function_counts against the log: CUDA counts for every
# thread (bytes for the functions that move or allocate bytes, in threads
# without failed calls); heap counts and bytes on worker threads.
diff_counts() {
	local bytefns="'cudaMalloc','cudaMallocHost','cudaHostAlloc','cudaMallocManaged',
		'cudaMallocAsync','cudaMallocFromPoolAsync','cudaMemcpy','cudaMemcpyAsync',
		'cudaMemcpyPeerAsync','cudaMemset','cudaMemsetAsync','malloc','calloc','realloc',
		'posix_memalign','aligned_alloc'"
	q "
CREATE TEMP VIEW failed AS SELECT DISTINCT pid, tid, fn FROM main.C WHERE ret <> 0;
CREATE TEMP VIEW exp_n AS
	SELECT pid, tid, fn, count(*) AS n, sum(bytes) AS b FROM main.C GROUP BY pid, tid, fn
	UNION ALL
	SELECT pid, tid, fn, count(*), sum(size) FROM main.A WHERE fam = 'host'
		AND (pid, tid) IN (SELECT pid, tid FROM main.T WHERE worker) GROUP BY pid, tid, fn
	UNION ALL
	SELECT pid, tid, fn, count(*), 0 FROM main.F WHERE fam = 'host' AND fn = 'free'
		AND (pid, tid) IN (SELECT pid, tid FROM main.T WHERE worker) GROUP BY pid, tid, fn;
CREATE TEMP VIEW got_n AS SELECT p.pid, c.tid, f.name AS fn, sum(c.count) AS n,
	sum(c.bytes) AS b FROM s.function_counts c JOIN s.functions f USING (fn_id)
	JOIN s.processes p USING (proc_id)
	WHERE p.pid IN $PIDS AND c.count > 0 AND (f.family = 'cuda'
		OR (p.pid, c.tid) IN (SELECT pid, tid FROM main.T WHERE worker))
	GROUP BY p.pid, c.tid, f.name;
CREATE TEMP VIEW exp_c AS SELECT pid, tid, fn, n, CASE WHEN fn IN ($bytefns) AND
	(pid, tid, fn) NOT IN failed THEN b ELSE -1 END AS b FROM exp_n;
CREATE TEMP VIEW got_c AS SELECT pid, tid, fn, n, CASE WHEN fn IN ($bytefns) AND
	(pid, tid, fn) NOT IN failed THEN b ELSE -1 END AS b FROM got_n;
SELECT 'logged (pid,tid,fn,count,bytes), not stored:', * FROM
	(SELECT * FROM exp_c EXCEPT SELECT * FROM got_c) LIMIT 10;
SELECT 'stored (pid,tid,fn,count,bytes), not logged:', * FROM
	(SELECT * FROM got_c EXCEPT SELECT * FROM exp_c) LIMIT 10;"
}

# load_gpu_log LOG: adds wl_gpu's lines (K, Y, S, R, M: see wl_gpu.c), each
# with seq, to $CHECKDB (after load_log), and DM (name, demangled): each
# logged kernel name as c++filt demangles it, NULL when it is not mangled.
load_gpu_log() {
	local log=$1 ty n d
	sq "$CHECKDB" "
CREATE TABLE K (seq INTEGER, pid INTEGER, tid INTEGER, name TEXT, domain TEXT, api TEXT,
	gx INTEGER, gy INTEGER, gz INTEGER, bx INTEGER, by INTEGER, bz INTEGER,
	stream INTEGER, smem INTEGER, t0 INTEGER, t1 INTEGER, range TEXT);
CREATE TABLE Y (seq INTEGER, pid INTEGER, tid INTEGER, op TEXT, bytes INTEGER, kind TEXT,
	value INTEGER, stream INTEGER, t0 INTEGER, t1 INTEGER);
CREATE TABLE S (seq INTEGER, pid INTEGER, tid INTEGER, type TEXT, stream INTEGER,
	t0 INTEGER, t1 INTEGER);
CREATE TABLE R (seq INTEGER, pid INTEGER, tid INTEGER, kind TEXT, domain TEXT, name TEXT,
	depth INTEGER, parent TEXT, t0 INTEGER, t1 INTEGER);
CREATE TABLE M (seq INTEGER, pid INTEGER, tid INTEGER, domain TEXT, name TEXT, t0 INTEGER);
CREATE TABLE DM (name TEXT, demangled TEXT);"
	for ty in K Y S R M; do
		awk -F, -v ty=$ty '$1 == ty { sub(/^[^,]*/, NR); print }' "$log" > "$T/$ty.csv"
		sq "$CHECKDB" ".mode csv" ".import $T/$ty.csv $ty"
	done
	: > "$T/DM.tsv"
	for n in $(sq "$CHECKDB" "SELECT DISTINCT name FROM K"); do
		d=$(printf '%s\n' "$n" | c++filt)
		[ "$d" = "$n" ] && d=
		printf '%s\t%s\n' "$n" "$d" >> "$T/DM.tsv"
	done
	sq "$CHECKDB" ".mode tabs" ".import $T/DM.tsv DM" \
		"UPDATE DM SET demangled = NULL WHERE demangled = '';"
}

# diff_ranges: rows differing between the logged ranges (R) and the stored
# ones: thread, kind, domain ("-": NVTX's default), name, depth and the
# parent's name ("-": none).
diff_ranges() {
	local cols="pid, tid, kind, domain, name, depth, parent"
	q "
CREATE TEMP VIEW exp_r AS SELECT $cols FROM main.R;
CREATE TEMP VIEW got_r AS SELECT p.pid, r.tid, r.kind, coalesce(r.domain, '-') AS domain,
	r.name, r.depth, coalesce((SELECT x.name FROM s.ranges_named x
		WHERE x.id = r.parent_id), '-') AS parent
	FROM s.ranges_named r JOIN s.processes p USING (proc_id) WHERE p.pid IN $PIDS;
$(multiset_diff exp_r got_r "$cols")"
}

# gpu_status: the stored processes' (of the log) gpu_status, one per line.
gpu_status() {
	q "SELECT coalesce(gpu_status, 'NULL') FROM s.processes WHERE pid IN $PIDS ORDER BY proc_id;"
}

# check_integrity CASE DB: ok when SQLite's integrity_check of DB says ok.
check_integrity() {
	local res
	res=$(sq "$2" "PRAGMA integrity_check;" 2>&1)
	check "$1" "integrity_check: $(printf '%s\n' "$res" | head -5)" [ "$res" = ok ]
}

# ---- issue 4: call sites (leaky.c, leakstep.c) ----

LEAKY=$O/test/e2e/leaky
LEAKSTEP=$O/test/e2e/leakstep

# python_exe [VERSION]: the path of pythonVERSION's interpreter itself (not
# a launcher such as pyenv's shim, a shell script the shim would trace
# too), found on PATH or under pyenv's root; python3's without VERSION.
# Nothing (and false) when there is none.
python_exe() {
	local c py
	for c in "python${1:-3}" ${1:+"${PYENV_ROOT:-$HOME/.pyenv}/versions/$1".*/bin/python$1}; do
		py=$("$c" -c 'import sys; print(sys.executable)' 2> /dev/null) && [ -n "$py" ] &&
			echo "$py" && return 0
	done
	return 1
}

# import_csv DB TABLE FILE: FILE (RFC 4180, with a header line) as TABLE,
# its columns named by the header, every value TEXT.
import_csv() {
	sq "$1" "DROP TABLE IF EXISTS $2;" ".import --csv '$3' $2"
}

# has_column DB TABLE COLUMN: true when TABLE has COLUMN.
has_column() {
	[ "$(sq "$1" "SELECT count(*) FROM pragma_table_info('$2') WHERE name = '$3';")" = 1 ]
}

# load_sites LOG DB: leaky's lines (leaky.h: KIND,pid,func,file,line,bytes,
# space,fn) as table site in DB, with dev, the memory label the reports
# write (docs/usage.md): host (the heap), cuda:0 (device), pinned, managed:0
# (leaky uses device 0).
load_sites() {
	sq "$2" "DROP TABLE IF EXISTS site;
CREATE TABLE site (seq INTEGER, kind TEXT, pid INTEGER, func TEXT, file TEXT, line INTEGER,
	bytes INTEGER, space TEXT, fn TEXT, dev TEXT);"
	awk -F, '$1 == "L" || $1 == "K" || $1 == "X" { print NR "," $0 ",-" }' "$1" > "$T/site.csv"
	sq "$2" ".mode csv" ".import $T/site.csv site" \
		"UPDATE site SET dev = CASE space WHEN 'host' THEN 'host' WHEN 'device' THEN 'cuda:0'
		WHEN 'pinned' THEN 'pinned' ELSE 'managed:0' END;"
}

# site_rows REPORT KIND: SQL for a view of the rows of table REPORT (a
# report's csv: pid, memory, count, bytes, frame) that belong to the
# program's own code, as (site, dev, count, bytes): site is "func@file:line"
# when frame names a call site of KIND in table site ("func (file:line)",
# the file as a basename or a path ending in it), else the frame itself.
# A row belongs to the program when it is in a logged pid and its frame
# names one of leaky's files or starts with one of its functions.
site_rows() {
	local r=$1 kind=$2
	echo "CREATE TEMP VIEW own_$r AS SELECT CAST(r.pid AS INTEGER) AS pid, r.memory AS dev,
	CAST(r.count AS INTEGER) AS count, CAST(r.bytes AS INTEGER) AS bytes, r.frame,
	coalesce((SELECT e.func || '@' || e.file || ':' || e.line FROM site e
		WHERE e.kind = '$kind' AND (r.frame = e.func || ' (' || e.file || ':' || e.line || ')'
		OR r.frame GLOB e.func || ' (*/' || e.file || ':' || e.line || ')') LIMIT 1),
		r.frame) AS site
	FROM $r r WHERE CAST(r.pid AS INTEGER) IN (SELECT pid FROM site)
	AND (r.frame GLOB '*leaky.c:*' OR r.frame GLOB '*leaky_lib.c:*'
		OR r.frame GLOB '*leaky.h:*' OR r.frame GLOB 'main *' OR r.frame GLOB 'leak_*'
		OR r.frame GLOB 'lib_*' OR r.frame GLOB 'peak_hold *' OR r.frame GLOB 'temporaries *'
		OR r.frame GLOB 'kept_then_freed *' OR r.frame GLOB 'must*' OR r.frame GLOB 'note *'
		OR r.frame GLOB 'touch *');"
}

# site_diff REPORT KIND WHERE [GOT_WHERE]: SQL listing the differences
# between the logged blocks of KIND and the program's own rows of REPORT
# (site_rows), both restricted to WHERE (on dev), the rows also to
# GOT_WHERE, by call site and memory, as (site, dev, count, bytes).
site_diff() {
	echo "$(site_rows "$1" "$2")
CREATE TEMP VIEW exp AS SELECT func || '@' || file || ':' || line AS site, dev,
	count(*) AS count, sum(bytes) AS bytes FROM site WHERE kind = '$2' AND ($3)
	GROUP BY func, file, line, dev;
CREATE TEMP VIEW got AS SELECT site, dev, count, bytes FROM own_$1 WHERE ($3) AND (${4:-1});
$(multiset_diff exp got "site, dev, count, bytes")"
}

# wait_line FILE PATTERN [SECONDS]: true once FILE holds a line matching.
wait_line() {
	local i
	for ((i = 0; i < ${3:-20} * 20; i++)); do
		grep -q -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}

# wla_run_in DIR NAME [PREFIX...]: wl_attach ($WLA) run by PREFIX (none,
# or e.g. a switch to another user) on a command pipe (fd 7), its log,
# stdout, stderr and exit status under DIR/NAME.*; waits for "ready"; its
# pid in WPID, NAME in WNAME.  The pipe is 666 for a PREFIX of another user.
wla_run_in() {
	local dir=$1 name=$2
	shift 2
	WNAME=$name
	DONE=0
	rm -f "$dir/$name.cmd"
	mkfifo -m 666 "$dir/$name.cmd"
	(export WL_LOG="$dir/$name.log"
	 "$@" "$WLA" < "$dir/$name.cmd" > "$dir/$name.out" 2> "$dir/$name.err"
	 echo $? > "$dir/$name.rc") &
	exec 7> "$dir/$name.cmd"
	wait_line "$dir/$name.out" '^ready$' || { not_ok "$name: workload starts"; finish; }
	WPID=$(awk -F, '$1 == "P" { print $2; exit }' "$dir/$name.log")
}

# wla CMD...: one command to the wl_attach that the script started (t_attach,
# t_ctlattach), waited for (its "done" line); its command pipe is fd 7, its
# files $WDIR/$WNAME.* (WDIR: $T unless set).
wla() {
	local i dir=${WDIR:-$T}
	echo "$*" >&7
	if [ "$1" = exit ]; then
		exec 7>&-
		wait_line "$dir/$WNAME.rc" . || not_ok "$WNAME: exits"
		return
	fi
	DONE=$((DONE + 1))
	for ((i = 0; i < 600; i++)); do
		[ "$(grep -c ' done$' "$dir/$WNAME.out")" -ge $DONE ] && return
		sleep 0.05
	done
	not_ok "$WNAME: command '$*' answered"
}
