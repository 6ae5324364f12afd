#!/bin/bash
# t_leaks: shimmer leaks, peak and temporary against leaky's planted call
# sites (leaky.c).  leaky logs every block it leaks (L), holds at its peak
# (K) and frees right away (X), each with the function, file and line of
# the allocating call; the reports, read after the process has exited,
# must name exactly those sites with those counts and bytes:
#
#  - SHIMMER_MALLOC=all: every leaked block is known, host and CUDA, so the
#    program's own rows of `leaks --format csv` are exactly the planted
#    sites (nothing else of leaky's code), with exact counts and bytes;
#  - the default sample mode: the CUDA sites are the same and exact, and
#    host rows, if any were sampled, are labelled as estimates;
#  - `peak`: at the peak of cuda:0 and of the host heap, the program's
#    live blocks are exactly the K blocks (by construction, see leaky.c);
#  - `temporary`: the X site, with every one of its blocks;
#  - the store copied to another directory (and read from another working
#    directory) gives the same report, frames resolved.
. "$(dirname "$0")/lib.sh"

need "$SHIM" "$SHIMMERD" "$SHIMMER" "$LEAKY"

# leaks_run MODE: runs leaky under the shim into $T/MODE.db, its log in
# $T/MODE.log, and loads the log into $T/MODE.check.
leaks_run() {
	local mode=$1 rc
	WLOG=$T/$mode.log
	start_collector "$T/$mode.db" || { not_ok "$mode: collector"; finish; }
	# A sample every 4 KiB on average: in sample mode some of leaky's
	# ~59 KB of host leaks are sampled, so host rows are there to check.
	SHIMMER_MALLOC=$mode SHIMMER_SAMPLE_BYTES=4096 traced "$LEAKY" 2> "$T/$mode.err"
	rc=$?
	stop_collector || not_ok "$mode: collector exit status"
	check "$mode: leaky ran" "exit $rc, stderr $(head -3 "$T/$mode.err")" test "$rc" = 0
	load_sites "$WLOG" "$T/$mode.check"
}

# report CMD DB OUT [OPTION...]: `shimmer CMD DB --format csv OPTION...`
# into OUT; 0 when it exits 0 with a header line.
report() {
	local cmd=$1 db=$2 out=$3
	shift 3
	"$SHIMMER" "$cmd" "$db" --format csv "$@" > "$out" 2> "$out.err" && [ -s "$out" ]
}

# csv_case CASE CMD DB CHECKDB TABLE [OPTION...]: runs the report, imports
# it as TABLE; not ok (and false) when the report fails or lacks a column a
# report of call sites has (pid, memory, count, bytes, frame).
csv_case() {
	local name=$1 cmd=$2 db=$3 cdb=$4 tab=$5 c
	shift 5
	if ! report "$cmd" "$db" "$T/$tab.csv" "$@"; then
		not_ok "$name" "shimmer $cmd failed: $(head -3 "$T/$tab.csv.err")"
		return 1
	fi
	import_csv "$cdb" "$tab" "$T/$tab.csv"
	for c in pid memory count bytes frame; do
		if ! has_column "$cdb" "$tab" "$c"; then
			not_ok "$name" "shimmer $cmd --format csv has no column $c; header: $(head -1 "$T/$tab.csv")"
			return 1
		fi
	done
}

# ---- all mode ----

leaks_run all
C=$T/all.check
if csv_case "all: leaks csv" leaks "$T/all.db" "$C" leaks; then
	ok "all: leaks csv"
	expect_empty "all: leaks name exactly the planted sites, exact counts and bytes" "$(sq "$C" "
$(site_diff leaks L 1)" 2>&1)"
	# The whole process: CUDA memory is only leaky's, so every CUDA row
	# is a planted one.
	expect_empty "all: no CUDA leak but the planted ones" "$(sq "$C" "
$(site_rows leaks L)
SELECT 'unplanted CUDA row:', pid, memory, count, bytes, frame FROM leaks
	WHERE memory <> 'host' AND CAST(pid AS INTEGER) IN (SELECT pid FROM site)
	AND frame NOT IN (SELECT frame FROM own_leaks WHERE site <> frame);
SELECT 'planted CUDA bytes', (SELECT sum(bytes) FROM site WHERE kind = 'L' AND dev <> 'host'),
	'reported', (SELECT sum(CAST(bytes AS INTEGER)) FROM leaks WHERE memory <> 'host')
	WHERE (SELECT sum(bytes) FROM site WHERE kind = 'L' AND dev <> 'host') IS NOT
	(SELECT sum(CAST(bytes AS INTEGER)) FROM leaks WHERE memory <> 'host');" 2>&1)"
	if has_column "$C" leaks space; then
		expect_empty "all: leaks space column" "$(sq "$C" "
$(site_rows leaks L)
SELECT 'site', site, 'logged space', (SELECT group_concat(DISTINCT e.space) FROM site e
	WHERE e.kind = 'L' AND e.func || '@' || e.file || ':' || e.line = o.site),
	'reported', l.space FROM own_leaks o JOIN leaks l ON l.frame = o.frame
	AND l.memory = o.dev WHERE l.space NOT IN (SELECT e.space FROM site e WHERE e.kind = 'L'
	AND e.func || '@' || e.file || ':' || e.line = o.site);" 2>&1)"
	fi
fi

if csv_case "all: peak csv" peak "$T/all.db" "$C" peak; then
	ok "all: peak csv"
	# Pinned and managed memory peak elsewhere (at the leaks): not K.
	expect_empty "all: peak holds exactly leaky's K blocks (host heap and cuda:0)" "$(sq "$C" "
$(site_diff peak K "dev IN ('host', 'cuda:0')")
SELECT 'cuda:0 peak_bytes', peak_bytes, 'K bytes', (SELECT sum(bytes) FROM site
	WHERE kind = 'K' AND dev = 'cuda:0') FROM peak WHERE memory = 'cuda:0'
	AND CAST(peak_bytes AS INTEGER) IS NOT (SELECT sum(bytes) FROM site
	WHERE kind = 'K' AND dev = 'cuda:0');
SELECT 'host peak_bytes', peak_bytes, '< K bytes', (SELECT sum(bytes) FROM site
	WHERE kind = 'K' AND dev = 'host') FROM peak WHERE memory = 'host'
	AND CAST(peak_bytes AS INTEGER) < (SELECT sum(bytes) FROM site
	WHERE kind = 'K' AND dev = 'host');" 2>&1)"
	# shimmer summary computes the same peaks on its own: they must agree.
	"$SHIMMER" summary "$T/all.db" --format json > "$T/summary.json" 2> "$T/summary.json.err"
	expect_empty "all: summary's peaks are peak's (bytes and instant, each memory)" "$(sq "$C" "
CREATE TEMP TABLE sj AS SELECT readfile('$T/summary.json') AS t;
CREATE TEMP VIEW from_summary AS SELECT p.value ->> 'pid' AS pid,
	k.value ->> 'memory' AS memory,
	k.value ->> 'peak_bytes' AS bytes, k.value ->> 'at_ns' AS at_ns
	FROM sj, json_each(sj.t, '\$.processes') p, json_each(p.value, '\$.peaks') k;
CREATE TEMP VIEW from_peak AS SELECT DISTINCT CAST(pid AS INTEGER) AS pid, memory,
	CAST(peak_bytes AS INTEGER) AS bytes, CAST(peak_at_ns AS INTEGER) AS at_ns FROM peak;
SELECT 'summary', * FROM (SELECT * FROM from_summary EXCEPT SELECT * FROM from_peak);
SELECT 'peak', * FROM (SELECT * FROM from_peak EXCEPT SELECT * FROM from_summary);
SELECT 'no peaks compared' WHERE (SELECT count(*) FROM from_peak) = 0;" 2>&1)"
	# pinned and managed memory: leaky's leaks are all there is at the end,
	# and their peak (the pinned block it kept a while is smaller)
	expect_empty "all: summary's pinned and managed:0 peak and live at the end are leaky's leaks" \
		"$(sq "$C" "
CREATE TEMP TABLE sj2 AS SELECT readfile('$T/summary.json') AS t;
CREATE TEMP VIEW exp AS SELECT dev AS memory, sum(bytes) AS peak, sum(bytes) AS live FROM site
	WHERE kind = 'L' AND dev IN ('pinned', 'managed:0') GROUP BY dev;
CREATE TEMP VIEW got AS SELECT k.value ->> 'memory' AS memory, k.value ->> 'peak_bytes' AS peak,
	k.value ->> 'live_end_bytes' AS live FROM sj2, json_each(sj2.t, '\$.processes') p,
	json_each(p.value, '\$.peaks') k WHERE p.value ->> 'pid' IN (SELECT pid FROM site)
	AND k.value ->> 'memory' IN ('pinned', 'managed:0');
$(multiset_diff exp got "memory, peak, live")" 2>&1)"
fi

# Temporary means freed within --max-lifetime-ms.  X blocks are freed
# right after their malloc; a limit of a minute keeps the case free of
# timing (a preempted thread) without letting in a block that is never
# freed.
if csv_case "all: temporary csv" temporary "$T/all.db" "$C" temp --max-lifetime-ms 60000; then
	ok "all: temporary csv"
	# Only the X site is required: leaky's other blocks live across other
	# calls (K, the kept ones) or never die (L), and L must not be here.
	expect_empty "all: temporary names the X site with all its blocks, no leak site" "$(sq "$C" "
$(site_diff temp X 1 "site <> frame")
SELECT 'leak site reported as temporary:', frame FROM own_temp WHERE EXISTS (
	SELECT 1 FROM site e WHERE e.kind = 'L' AND (frame = e.func || ' (' || e.file || ':' || e.line || ')'
	OR frame GLOB e.func || ' (*/' || e.file || ':' || e.line || ')'));" 2>&1)"
fi

# alloc_got COLUMN...: SQL for a view got of each site of view exp (func,
# file, line, dev) with the sums of those columns over its rows of the
# allocations report (table allocs): the rows of its memory, of a logged
# pid, whose frame names func at file:line (NULL sums when none does).
alloc_got() {
	local c sums=
	for c in "$@"; do
		sums="$sums, sum(CAST(a.$c AS INTEGER)) AS $c"
	done
	echo "CREATE TEMP VIEW got AS SELECT e.func, e.file, e.line, e.dev$sums
	FROM exp e LEFT JOIN allocs a ON a.memory = e.dev
	AND CAST(a.pid AS INTEGER) IN (SELECT pid FROM site)
	AND (a.frame = e.func || ' (' || e.file || ':' || e.line || ')'
		OR a.frame GLOB e.func || ' (*/' || e.file || ':' || e.line || ')')
	GROUP BY e.func, e.file, e.line, e.dev;"
}

# allocations: every logged block (leaked, held at the peak, temporary) at
# its site, count and bytes exact, the leaked ones live at the end and no
# other; by count, each memory's rows in order.
if csv_case "all: allocations csv" allocations "$T/all.db" "$C" allocs --sort count; then
	ok "all: allocations csv"
	expect_empty "all: allocations count every logged block at its site, live only the leaked" "$(sq "$C" "
CREATE TEMP VIEW exp AS SELECT func, file, line, dev, count(*) AS count, sum(bytes) AS bytes,
	sum(kind = 'L') AS live_count, sum(CASE kind WHEN 'L' THEN bytes ELSE 0 END) AS live_bytes
	FROM site GROUP BY func, file, line, dev;
$(alloc_got count bytes live_count live_bytes)
$(multiset_diff exp got "func, file, line, dev, count, bytes, live_count, live_bytes")
SELECT 'out of order:', a.memory, a.count, a.frame, 'after', b.count, b.frame
	FROM allocs a JOIN allocs b ON b.rowid = a.rowid - 1 AND a.memory = b.memory
	AND a.pid = b.pid WHERE CAST(a.count AS INTEGER) > CAST(b.count AS INTEGER);" 2>&1)"
fi
"$SHIMMER" allocations "$T/all.db" --sort size > /dev/null 2> "$T/sort.err"
rc=$?
check "all: allocations --sort size is a usage error, in one line" "exit $rc, $(cat "$T/sort.err")" \
	test "$rc" = 2 -a "$(wc -l < "$T/sort.err")" = 1

# --callers N names each site with N of its callers: the rows split by
# caller, so regrouped by their first frame they are the rows without it,
# count for count and byte for byte, in each of the three reports; and the
# loop's leak names main's line that called leak_malloc_loop().
callers_line=$(grep -n '^	leak_malloc_loop();' "$(dirname "$0")/leaky.c" | cut -d: -f1)
loop_line=$(grep -n 'NOTE("L", SZ_LOOP' "$(dirname "$0")/leaky.c" | cut -d: -f1)
for r in "leaks leaks" "peak peak" "temporary temp --max-lifetime-ms 60000" "allocations allocs"; do
	set -- $r
	cmd=$1 tab=$2
	shift 2
	if csv_case "all: $cmd --callers 2 csv" "$cmd" "$T/all.db" "$C" "${tab}_c2" --callers 2 "$@"; then
		expect_empty "all: $cmd --callers 2 regrouped by site equals $cmd" "$(sq "$C" "
CREATE TEMP VIEW c0 AS SELECT CAST(pid AS INTEGER) AS pid, memory, frame,
	sum(CAST(count AS INTEGER)) AS count, sum(CAST(bytes AS INTEGER)) AS bytes
	FROM $tab GROUP BY 1, 2, 3 HAVING bytes > 0;
CREATE TEMP VIEW c2 AS SELECT CAST(pid AS INTEGER) AS pid, memory,
	CASE WHEN instr(frame, ' <- ') > 0 THEN substr(frame, 1, instr(frame, ' <- ') - 1)
	ELSE frame END AS frame,
	sum(CAST(count AS INTEGER)) AS count, sum(CAST(bytes AS INTEGER)) AS bytes
	FROM ${tab}_c2 GROUP BY 1, 2, 3 HAVING bytes > 0;
$(multiset_diff c0 c2 "pid, memory, frame, count, bytes")
SELECT 'a site with more than 2 callers:', frame FROM ${tab}_c2
	WHERE length(frame) - length(replace(frame, ' <- ', '')) > 2 * length(' <- ');
SELECT 'no row has a caller' WHERE NOT EXISTS (SELECT 1 FROM ${tab}_c2 WHERE frame LIKE '% <- %');" 2>&1)"
	fi
done
expect_empty "all: leaks --callers 2 names main's call of the leaking function" "$(sq "$C" "
SELECT 'expected a row', 'leak_malloc_loop (leaky.c:$loop_line) <- main (leaky.c:$callers_line) <- *'
	WHERE NOT EXISTS (SELECT 1 FROM leaks_c2 WHERE memory = 'host' AND frame GLOB
	'leak_malloc_loop (*leaky.c:$loop_line) <- main (*leaky.c:$callers_line) <- *');" 2>&1)"
"$SHIMMER" leaks "$T/all.db" --callers 65 > /dev/null 2> "$T/callers.err"
rc=$?
check "all: --callers 65 is a usage error, in one line" "exit $rc, $(cat "$T/callers.err")" \
	test "$rc" = 2 -a "$(wc -l < "$T/callers.err")" = 1

# The store moved to another directory (with a WAL file, if the collector
# left one), read from another working directory.
mkdir -p "$T/moved/deeper"
for f in "$T/all.db" "$T/all.db-wal"; do
	[ -e "$f" ] && mv "$f" "$T/moved/deeper/copy.db${f#"$T/all.db"}"
done
if (cd "$T/moved" && "$SHIMMER" leaks deeper/copy.db --format csv > "$T/moved.csv" 2> "$T/moved.err"); then
	check "moved store: the same leaks report" \
		"diff (original < > moved): $(diff "$T/leaks.csv" "$T/moved.csv" | head -10)" \
		cmp -s "$T/leaks.csv" "$T/moved.csv"
	import_csv "$C" moved "$T/moved.csv"
	expect_empty "moved store: planted sites resolved" "$(sq "$C" "
$(site_diff moved L 1)" 2>&1)"
else
	not_ok "moved store: the same leaks report" "$(head -3 "$T/moved.err")"
fi

# ---- sample mode (the default) ----

leaks_run sample
C=$T/sample.check
if csv_case "sample: leaks csv" leaks "$T/sample.db" "$C" leaks; then
	ok "sample: leaks csv"
	expect_empty "sample: CUDA sites exact" "$(sq "$C" "
$(site_diff leaks L "dev <> 'host'")" 2>&1)"
	# How a row says it is an estimate: an `estimated` column (1/true) or
	# an `exact` one (0/false), whichever the report has.
	if has_column "$C" leaks estimated; then
		est="estimated IN ('1', 'true', 'yes')"
	elif has_column "$C" leaks exact; then
		est="exact IN ('0', 'false', 'no')"
	else
		est=
	fi
	if [ -z "$est" ]; then
		not_ok "sample: host rows labelled estimates, CUDA rows exact" \
			"no estimated/exact column; header: $(head -1 "$T/leaks.csv")"
	else
		expect_empty "sample: host rows labelled estimates, CUDA rows exact" "$(sq "$C" "
SELECT 'host row not an estimate:', frame FROM leaks WHERE memory = 'host' AND NOT ($est);
SELECT 'CUDA row an estimate:', frame FROM leaks WHERE memory <> 'host' AND ($est);" 2>&1)"
	fi
fi
if csv_case "sample: allocations csv" allocations "$T/sample.db" "$C" allocs; then
	ok "sample: allocations csv"
	# CUDA memory is never sampled: its sites are leaky's logged blocks,
	# exact; host rows are estimates.
	expect_empty "sample: allocations: CUDA sites exact, host rows estimates" "$(sq "$C" "
CREATE TEMP VIEW exp AS SELECT func, file, line, dev, count(*) AS count, sum(bytes) AS bytes
	FROM site WHERE dev <> 'host' GROUP BY func, file, line, dev;
$(alloc_got count bytes)
$(multiset_diff exp got "func, file, line, dev, count, bytes")
SELECT 'host row not an estimate:', frame FROM allocs WHERE memory = 'host' AND estimated <> '1';
SELECT 'CUDA row an estimate:', frame FROM allocs WHERE memory <> 'host' AND estimated <> '0';
SELECT 'no host row' WHERE NOT EXISTS (SELECT 1 FROM allocs WHERE memory = 'host');" 2>&1)"
fi

finish
