#!/bin/bash
# t_histogram: `shimmer allocations --histogram size|lifetime` against
# independent truths.
#
#  1. Sizes = heaptrack's.  `heaptrack_print -H FILE` writes heaptrack's
#     allocation size histogram, one line per exact size: "SIZE COUNT".
#     Bucketed here by bit length (a bucket's first size 2^(bits - 1)),
#     with bytes SIZE x COUNT, it must equal shimmer's host histogram
#     bucket for bucket, counts and bytes, on heap_random (20,000 random
#     sizes up to 70,000 bytes, one in 16 a calloc) and leaky (malloc,
#     calloc, realloc, posix_memalign, the fake CUDA runtime's own
#     blocks), traced with SHIMMER_MALLOC=all and SHIMMER_HEAP_ROWS=both
#     and read both ways: from the collector's tables, and from the rows
#     (SHIMMER_MODEL_HEAP=rows).  The two processes are made alike:
#     heaptrack's preload library links libstdc++, whose start-up
#     allocates its exception pool (72,704 bytes), so shimmer's run
#     preloads libstdc++ too.  CUPTI stays on, as by default: the (fake)
#     driver's dlopen of the shim as its injection library allocates two
#     blocks that live to the end, and they are the shim's, not leaky's
#     (modules.c's dlopen), so leaky's histogram still equals heaptrack's.
#  2. Planted lifetimes: lifespan (lifespan.c) frees host and device
#     blocks after known sleeps, each phase in a lifetime bucket and a size
#     bucket of its own, and keeps some to the end; its plan is its log.
#     Each planted bucket holds exactly its phase's blocks (that no other
#     block of the process lies in those buckets is checked on the rows),
#     the blocks never freed are the "live at the end" row, and each
#     histogram adds up to the memory's rows.  Both stores of one run
#     (SHIMMER_HEAP_ROWS=both); phase C outlives the collector's row_ns
#     (1 s), so the aggregated store has it from its kept rows.
#     A store of before schema 9 (no heap_* tables) gives the same, from its
#     rows.
#  3. The default sample mode: cuda:0 exactly as planted, not estimated;
#     host figures estimated (~).
#  4. The command line: bad values and --sort with --histogram are one
#     usage line (exit 2); JSON parses and adds up.
. "$(dirname "$0")/lib.sh"
LIFESPAN=$O/test/e2e/lifespan
need "$SHIM" "$SHIMMERD" "$SHIMMER" "$LEAKY" "$LIFESPAN" "$O/bench/heap_random"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
STDCXX=libstdc++.so.6

# buckets CSV MEMORY: the buckets of `--histogram ... --format csv` that
# hold blocks, "LO COUNT BYTES" (LO "live" for the blocks never freed),
# by LO.
buckets() {
	awk -F, -v mem="$2" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
	$col["memory"] == mem && $col["count"] > 0 {
		lo = $col["live_at_end"] == 1 ? "live" : $col[col["lo_bytes"] ? "lo_bytes" : "lo_ns"]
		printf "%s %s %s\n", lo, $col["count"], $col["bytes"]
	}' "$1" | sort -k1,1
}

# ht_buckets HIST: heaptrack's size histogram the same way.
ht_buckets() {
	awk '{ b = 0; for (s = $1; s >= 1; s = int(s / 2)) b++
		lo = b ? 2 ^ (b - 1) : 0; c[lo] += $2; by[lo] += $1 * $2 }
	END { for (k in c) printf "%.0f %.0f %.0f\n", k, c[k], by[k] }' "$1" | sort -k1,1
}

# hist DB KIND NAME [ENV...]: `allocations --histogram KIND --format csv`
# into $T/NAME.csv (ENV: assignments for the command); 0 when it succeeds.
hist() {
	local db=$1 kind=$2 name=$3
	shift 3
	env "$@" "$SHIMMER" allocations "$db" --histogram "$kind" --format csv \
		> "$T/$name.csv" 2> "$T/$name.err" && [ -s "$T/$name.csv" ]
}

# ---- 1. sizes against heaptrack ----------------------------------------------
if ! command -v heaptrack > /dev/null || ! command -v heaptrack_print > /dev/null; then
	not_ok "heaptrack available" "heaptrack or heaptrack_print not found in PATH ($PATH):" \
		"install the Debian package heaptrack; this comparison cannot run without it"
else
	for prog in "heap_random:$O/bench/heap_random -n 20000 -s 70000 -r 7" "leaky:$LEAKY"; do
		name=${prog%%:*}
		# shellcheck disable=SC2206 # the program and its arguments
		cmd=(${prog#*:})
		rm -f "$T/ht.$name".*
		heaptrack -o "$T/ht.$name" "${cmd[@]}" > "$T/ht.$name.out" 2>&1
		rc=$?
		htfile=$(ls "$T/ht.$name".zst "$T/ht.$name".gz 2> /dev/null | head -1)
		if [ "$rc" != 0 ] || [ -z "$htfile" ] ||
			! heaptrack_print -f "$htfile" -H "$T/ht.$name.hist" > "$T/ht.$name.print" 2>&1 ||
			[ ! -s "$T/ht.$name.hist" ]; then
			not_ok "$name: heaptrack's size histogram" "heaptrack exit $rc: $(tail -3 "$T/ht.$name.out")" \
				"$(tail -3 "$T/ht.$name.print" 2> /dev/null)"
			continue
		fi
		ht_buckets "$T/ht.$name.hist" > "$T/ht.$name.b"
		start_collector "$T/$name.db" || { not_ok "$name: collector"; continue; }
		LD_PRELOAD="$SHIM $STDCXX" SHIMMER_SOCKET=$SOCK SHIMMER_MALLOC=all SHIMMER_HEAP_ROWS=both \
			"${cmd[@]}" > /dev/null 2> "$T/$name.run.err"
		rc=$?
		stop_collector || not_ok "$name: collector exit status"
		check "$name: runs traced" "exit $rc: $(head -c 300 "$T/$name.run.err")" [ "$rc" = 0 ]
		for how in aggregated rows; do
			if ! hist "$T/$name.db" size "$name.$how" SHIMMER_MODEL_HEAP="$how"; then
				not_ok "$name ($how): histogram" "$(head -3 "$T/$name.$how.err")"
				continue
			fi
			buckets "$T/$name.$how.csv" host > "$T/$name.$how.b"
			n=$(wc -l < "$T/ht.$name.b")
			expect_empty "$name ($how): host size histogram = heaptrack's, $n buckets, count and bytes" \
				"$(diff "$T/ht.$name.b" "$T/$name.$how.b" | head -10)"
		done
		n=$(awk '{ c += $2 } END { print c + 0 }' "$T/ht.$name.b")
		check "$name: not a comparison of a few blocks ($n allocations)" "$n" [ "$n" -gt 50 ]
	done
fi

# ---- 2. planted lifetimes, both stores -------------------------------------------
C=$T/check.db
# plan LOG TABLE: lifespan's Z lines as TABLE (pid, space, memory, phase,
# count, size, size_lo: the size's bucket, lo_ns, hi_ns) in $C.
plan() {
	awk -F, '$1 == "Z" { b = 0; for (s = $6; s >= 1; s = int(s / 2)) b++
		printf "%s,%s,%s,%s,%s,%s,%.0f,%s,%s\n", $2, $3, $3 == "host" ? "host" : "cuda:0",
		$4, $5, $6, 2 ^ (b - 1), $7, $8 }' "$1" > "$T/$2.csv"
	sq "$C" "DROP TABLE IF EXISTS $2; CREATE TABLE $2 (pid INTEGER, space TEXT, memory TEXT,
		phase TEXT, count INTEGER, size INTEGER, size_lo INTEGER, lo_ns INTEGER, hi_ns INTEGER);" \
		".mode csv" ".import $T/$2.csv $2"
}

WLOG=$T/life.log
start_collector "$T/life.db" || { not_ok "lifespan: collector"; finish; }
SHIMMER_HEAP_ROWS=both traced "$LIFESPAN" 2> "$T/life.err"
rc=$?
stop_collector || not_ok "lifespan: collector exit status"
check "lifespan (all): runs" "exit $rc: $(head -c 300 "$T/life.err")" [ "$rc" = 0 ]
plan "$WLOG" plan
np=$(sq "$C" "SELECT count(*) FROM plan")
check "lifespan logged its plan ($np lines)" "$np" [ "$np" = 8 ]
# the premises, on the rows (the store kept every one): each planted block
# lived within its bucket, and no other block of the process did
bad=$(sq "$C" "ATTACH '$T/life.db' AS s;
SELECT 'planted', p.memory, p.phase, a.free_ns - a.alloc_ns FROM s.allocations a
	JOIN s.processes q USING (proc_id) JOIN plan p ON p.pid = q.pid AND p.space = a.space
	AND p.size = a.size
	WHERE (p.lo_ns < 0 AND a.free_ns IS NOT NULL) OR (p.lo_ns >= 0 AND (a.free_ns IS NULL
	OR a.free_ns - a.alloc_ns NOT BETWEEN p.lo_ns AND p.hi_ns)) LIMIT 5;
SELECT 'other', a.space, a.size, a.free_ns - a.alloc_ns FROM s.allocations a
	WHERE a.free_ns - a.alloc_ns >= (SELECT min(lo_ns) FROM plan WHERE lo_ns >= 0)
	AND NOT EXISTS (SELECT 1 FROM plan p WHERE p.space = a.space AND p.size = a.size) LIMIT 5;")
expect_empty "lifespan: each planted block lived in its bucket, no other block that long" "$bad"

# life_checks HOW: the lifetime and size histograms read HOW (aggregated,
# rows) against the plan and the rows.
life_checks() {
	local how=$1
	if ! hist "$T/life.db" lifetime "life.$how" SHIMMER_MODEL_HEAP="$how" ||
		! hist "$T/life.db" size "size.$how" SHIMMER_MODEL_HEAP="$how"; then
		not_ok "lifespan ($how): histograms" "$(head -3 "$T/life.$how.err" "$T/size.$how.err")"
		return
	fi
	import_csv "$C" "life_$how" "$T/life.$how.csv"
	import_csv "$C" "size_$how" "$T/size.$how.csv"
	# the planted lifetime buckets: exactly the phase's blocks
	expect_empty "lifespan ($how): each planted lifetime bucket holds its blocks, host and cuda:0" \
		"$(sq "$C" "
CREATE TEMP VIEW exp AS SELECT memory, lo_ns, count, count * size AS bytes FROM plan WHERE lo_ns >= 0;
CREATE TEMP VIEW got AS SELECT memory, CAST(lo_ns AS INTEGER) AS lo_ns, CAST(count AS INTEGER) AS count,
	CAST(bytes AS INTEGER) AS bytes FROM life_$how
	WHERE CAST(lo_ns AS INTEGER) IN (SELECT lo_ns FROM plan WHERE lo_ns >= 0);
$(multiset_diff exp got "memory, lo_ns, count, bytes")" 2>&1)"
	# live at the end: the planted blocks never freed and the process's
	# others (the rows with no free), no more
	expect_empty "lifespan ($how): live at the end = the planted blocks never freed + the others" \
		"$(sq "$C" "ATTACH '$T/life.db' AS s;
CREATE TEMP VIEW exp AS SELECT memory, sum(count) AS count, sum(bytes) AS bytes FROM (
	SELECT memory, count, count * size AS bytes FROM plan WHERE lo_ns < 0
	UNION ALL SELECT CASE a.space WHEN 'host' THEN 'host' ELSE 'cuda:0' END, 1, a.size
	FROM s.allocations a WHERE a.free_ns IS NULL
	AND NOT EXISTS (SELECT 1 FROM plan p WHERE p.space = a.space AND p.size = a.size))
	GROUP BY memory;
CREATE TEMP VIEW got AS SELECT memory, CAST(count AS INTEGER) AS count,
	CAST(bytes AS INTEGER) AS bytes FROM life_$how WHERE live_at_end = '1';
$(multiset_diff exp got "memory, count, bytes")" 2>&1)"
	# the planted size buckets: the phase's blocks and the others of that size
	expect_empty "lifespan ($how): each planted size bucket holds its blocks (and the others there)" \
		"$(sq "$C" "ATTACH '$T/life.db' AS s;
CREATE TEMP VIEW exp AS SELECT p.memory, p.size_lo, p.count + (SELECT count(*) FROM s.allocations a
	WHERE a.space = p.space AND a.size >= p.size_lo AND a.size < 2 * p.size_lo AND a.size != p.size)
	AS count FROM plan p;
CREATE TEMP VIEW got AS SELECT memory, CAST(lo_bytes AS INTEGER) AS size_lo,
	CAST(count AS INTEGER) AS count FROM size_$how
	WHERE (memory, CAST(lo_bytes AS INTEGER)) IN (SELECT memory, size_lo FROM plan);
$(multiset_diff exp got "memory, size_lo, count")" 2>&1)"
	# temporary within 100 ms: phase A's blocks alone (B's live 268 ms or
	# more), on the allocating lines of lifespan.c's main (its warm-up
	# block is on a line of its own), their median lifetime in
	# the planted bucket
	if env SHIMMER_MODEL_HEAP="$how" "$SHIMMER" temporary "$T/life.db" --max-lifetime-ms 100 \
		--format csv > "$T/temp.$how.csv" 2> "$T/temp.$how.err"; then
		import_csv "$C" "temp_$how" "$T/temp.$how.csv"
		expect_empty "lifespan ($how): temporary (100 ms): phase A's count and bytes, its median lifetime in the planted bucket" \
			"$(sq "$C" "
CREATE TEMP VIEW exp AS SELECT memory, count, count * size AS bytes, 1 AS inside FROM plan
	WHERE phase = 'A';
CREATE TEMP VIEW got AS SELECT t.memory, CAST(t.count AS INTEGER) AS count,
	CAST(t.bytes AS INTEGER) AS bytes, CAST(t.median_lifetime_ns AS REAL) BETWEEN p.lo_ns AND p.hi_ns
	AS inside FROM temp_$how t JOIN plan p ON p.memory = t.memory AND p.phase = 'A'
	WHERE t.frame GLOB 'main (*lifespan.c:*';
$(multiset_diff exp got "memory, count, bytes, inside")
SELECT 'median', memory, median_lifetime_ns, frame FROM temp_$how WHERE frame GLOB 'main (*lifespan.c:*'
	AND EXISTS (SELECT * FROM exp EXCEPT SELECT * FROM got UNION ALL
	SELECT * FROM got EXCEPT SELECT * FROM exp);" 2>&1)"
	else
		not_ok "lifespan ($how): temporary" "$(head -3 "$T/temp.$how.err")"
	fi
	# every histogram adds up to its memory's rows
	expect_empty "lifespan ($how): each histogram adds up to the memory's allocations" \
		"$(sq "$C" "ATTACH '$T/life.db' AS s;
CREATE TEMP VIEW exp AS SELECT CASE space WHEN 'host' THEN 'host' ELSE 'cuda:0' END AS memory,
	count(*) AS count, sum(size) AS bytes FROM s.allocations GROUP BY 1;
CREATE TEMP VIEW got AS SELECT memory, sum(CAST(count AS INTEGER)) AS count,
	sum(CAST(bytes AS INTEGER)) AS bytes FROM life_$how GROUP BY memory
	UNION ALL SELECT memory, sum(CAST(count AS INTEGER)), sum(CAST(bytes AS INTEGER))
	FROM size_$how GROUP BY memory;
CREATE TEMP VIEW exp2 AS SELECT * FROM exp UNION ALL SELECT * FROM exp;
$(multiset_diff exp2 got "memory, count, bytes")" 2>&1)"
}
life_checks aggregated
life_checks rows
agg=$(sq "$C" "ATTACH '$T/life.db' AS s; SELECT count(*) FROM s.heap_totals")
check "lifespan: the host heap was aggregated" "heap_totals: $agg rows" [ "$agg" = 1 ]
expect_empty "lifespan: the aggregated and the rows' histograms are the same" \
	"$(diff "$T/life.aggregated.csv" "$T/life.rows.csv"; diff "$T/size.aggregated.csv" "$T/size.rows.csv")"

# a store of before schema 9 (no heap_* tables: a row per allocation), as
# this one would have been: the same histograms, from its rows
cp "$T/life.db" "$T/old.db"
sq "$T/old.db" "DROP VIEW heap_sizes; DROP VIEW heap_lifetimes; DROP TABLE heap_totals;
	DROP TABLE heap_sites; DROP TABLE heap_histograms; DROP TABLE heap_timeline;
	DROP TABLE heap_calls; DROP TABLE heap_points; DROP TABLE heap_steps; DROP TABLE heap_series;
	UPDATE meta SET value = '8' WHERE key = 'schema_version';"
if hist "$T/old.db" lifetime life.old && hist "$T/old.db" size size.old; then
	expect_empty "a store before schema 9: the same histograms, from its rows" \
		"$(diff "$T/life.old.csv" "$T/life.rows.csv"; diff "$T/size.old.csv" "$T/size.rows.csv")"
else
	not_ok "a store before schema 9: histograms" "$(head -3 "$T/life.old.err" "$T/size.old.err")"
fi

# ---- 3. sample mode -----------------------------------------------------------------
WLOG=$T/sample.log
start_collector "$T/sample.db" || { not_ok "sample: collector"; finish; }
SHIMMER_MALLOC=sample SHIMMER_SAMPLE_BYTES=4096 traced "$LIFESPAN" 2> "$T/sample.err"
rc=$?
stop_collector || not_ok "sample: collector exit status"
check "lifespan (sample): runs" "exit $rc: $(head -c 300 "$T/sample.err")" [ "$rc" = 0 ]
plan "$WLOG" splan
if hist "$T/sample.db" lifetime s.life && hist "$T/sample.db" size s.size; then
	import_csv "$C" s_life "$T/s.life.csv"
	import_csv "$C" s_size "$T/s.size.csv"
	expect_empty "sample: cuda:0 lifetimes exactly as planted, not estimated" "$(sq "$C" "
CREATE TEMP VIEW exp AS SELECT CASE WHEN lo_ns < 0 THEN 'live' ELSE lo_ns END AS lo, count,
	count * size AS bytes, '0' AS estimated FROM splan WHERE memory = 'cuda:0';
CREATE TEMP VIEW got AS SELECT CASE live_at_end WHEN '1' THEN 'live' ELSE CAST(lo_ns AS INTEGER) END
	AS lo, CAST(count AS INTEGER) AS count, CAST(bytes AS INTEGER) AS bytes, estimated FROM s_life
	WHERE memory = 'cuda:0' AND CAST(count AS INTEGER) > 0;
$(multiset_diff exp got "lo, count, bytes, estimated")" 2>&1)"
	expect_empty "sample: cuda:0 sizes exactly as planted, not estimated" "$(sq "$C" "
CREATE TEMP VIEW exp AS SELECT size_lo, count, count * size AS bytes, '0' AS estimated
	FROM splan WHERE memory = 'cuda:0';
CREATE TEMP VIEW got AS SELECT CAST(lo_bytes AS INTEGER) AS size_lo, CAST(count AS INTEGER) AS count,
	CAST(bytes AS INTEGER) AS bytes, estimated FROM s_size WHERE memory = 'cuda:0' AND CAST(count AS INTEGER) > 0;
$(multiset_diff exp got "size_lo, count, bytes, estimated")" 2>&1)"
	bad=$(sq "$C" "SELECT 'lifetime', count(*) FROM s_life WHERE memory = 'host' AND estimated != '1'
		UNION ALL SELECT 'size', count(*) FROM s_size WHERE memory = 'host' AND estimated != '1'")
	n=$(sq "$C" "SELECT count(*) FROM s_life WHERE memory = 'host'")
	check "sample: host rows there ($n) and all estimated" "$bad" \
		holds '[ "$n" -gt 0 ] && [ "$bad" = "$(printf "lifetime|0\nsize|0")" ]'
	"$SHIMMER" allocations "$T/sample.db" --histogram lifetime > "$T/s.table" 2>&1
	check "sample: the table marks host figures ~ and says why, cuda:0's not" "$(cat "$T/s.table")" \
		holds 'grep -q "^  host: ~[0-9]* allocations" "$T/s.table" &&
		grep -q "^  cuda:0: [0-9]* allocations" "$T/s.table" &&
		grep -q "~: estimated from sampled allocations" "$T/s.table"'
else
	not_ok "sample: histograms" "$(head -3 "$T/s.life.err" "$T/s.size.err")"
fi

# ---- 4. the command line and JSON ------------------------------------------------------
for bad in "--histogram" "--histogram sizes" "--histogram size --sort count" \
	"--callers 2 --histogram lifetime"; do
	# shellcheck disable=SC2086 # the options
	"$SHIMMER" allocations "$T/life.db" $bad > "$T/bad.out" 2> "$T/bad.err"
	rc=$?
	check "usage: allocations $bad: one line, exit 2" "exit $rc: $(cat "$T/bad.err")" \
		holds '[ $rc = 2 ] && [ "$(wc -l < "$T/bad.err")" = 1 ] && [ ! -s "$T/bad.out" ]'
done
"$SHIMMER" allocations "$T/life.db" --histogram lifetime --format json > "$T/life.json" 2>&1
why=$($PY -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["histogram"] == "lifetime", d["histogram"]
mems = d["processes"][0]["memories"]
assert [m["memory"] for m in mems] == ["host", "cuda:0"], mems
for m in mems:
    b = m["buckets"]
    assert sum(x["count"] for x in b) == m["count"], m["memory"]
    assert abs(sum(x["count_share"] for x in b) - 1) < 1e-5, m["memory"]
    live = [x for x in b if x["live_at_end"]]
    assert len(live) == 1 and live[-1] is b[-1] and b[-1]["lo_ns"] is None, b[-1]
' "$T/life.json" 2>&1)
check "json: parses, each memory's buckets add up, live at the end last" "$why" [ -z "$why" ]
finish
