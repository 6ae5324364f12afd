#!/bin/bash
# t_compare_sites: the call sites of `shimmer compare` (its `sites` rows and
# tables) on two runs of wl_sites (wl_sites.c: run b differs from run a at
# known sites), against the program's own per-site bookkeeping (its S
# lines: allocations, bytes, bytes at its memory's peak, bytes live at the
# end):
#
#  - exact mode (SHIMMER_MALLOC=all): every site of the program pairs by
#    name across the two processes, which ASLR loaded at different
#    addresses; each figure's A, B and difference are the logged ones,
#    host and cuda:0, `changed` exactly where they differ, a_only and
#    b_only in one run only; the planted ones, written out: grow +4 blocks,
#    peak_hold +1 block at the peak, held_longer's block at the peak only,
#    the unchanged sites 0 and not changed;
#  - the wrapper's two callers add up to one site; --callers 1 splits it;
#  - the table: per memory the differing sites with the 10 largest changes
#    of bytes allocated, at the peak and live at the end (held_longer, whose
#    change is the smallest, shown for its peak), then "N more differ" (N
#    from the CSV); JSON has the CSV's site rows;
#  - a stripped copy (sites named module+0xOFFSET): the same pairing;
#  - sample mode: host rows are estimates (CSV estimated, table ~), cuda:0
#    rows exact; a sampled site that moved by a third is not `changed`;
#  - --fail-if site_peak: exactly at the planted change, a site in one run
#    only against 0, a percentage refused.
. "$(dirname "$0")/lib.sh"

WL_SITES=$O/test/e2e/wl_sites
need "$SHIM" "$SHIMMERD" "$SHIMMER" "$WL_SITES"

C=$T/check.db

# record NAME MODE PROGRAM RUN: PROGRAM RUN under the shim with
# SHIMMER_MALLOC=MODE into $T/NAME.db, its log in $T/NAME.log.
record() {
	local name=$1 mode=$2 rc
	WLOG=$T/$name.log
	start_collector "$T/$name.db" || { not_ok "$name: collector"; finish; }
	SHIMMER_MALLOC=$mode SHIMMER_SAMPLE_BYTES=4096 traced "$3" "$4" 2> "$T/$name.err"
	rc=$?
	stop_collector || not_ok "$name: collector exit status"
	check "$name: ran" "exit $rc, stderr $(head -3 "$T/$name.err")" test "$rc" = 0
}

# load NAME RUN: $T/NAME.log's S lines into table S of $C as run RUN.
load() {
	awk -F, -v run="$2" '$1 == "S" { print run "," $0 }' "$T/$1.log" > "$T/$1.s.csv"
	sq "$C" "CREATE TABLE IF NOT EXISTS S (run TEXT, kind TEXT, pid INTEGER, func TEXT,
	line INTEGER, caller TEXT, caller_line INTEGER, memory TEXT, count INTEGER, bytes INTEGER,
	at_peak INTEGER, live INTEGER);" ".mode csv" ".import $T/$1.s.csv S"
}

# compare A B TABLE [OPTION...]: `shimmer compare` as CSV into TABLE of $C.
compare() {
	local a=$1 b=$2 tab=$3 rc
	shift 3
	"$SHIMMER" compare "$T/$a.db" "$T/$b.db" --format csv "$@" > "$T/$tab.csv" 2> "$T/$tab.err"
	rc=$?
	check "compare $a $b${*:+ $*} (csv): exit 0" "exit $rc: $(head -3 "$T/$tab.err")" test $rc = 0
	import_csv "$C" "$tab" "$T/$tab.csv"
}

# want SITE: SQL for view want, the logged figures of both runs by memory,
# site (named by the SQL expression SITE over S) and measure, as the CSV
# has them: a, b (NULL when the run lacks the site), diff, changed, only.
want() {
	echo "DROP VIEW IF EXISTS e; DROP VIEW IF EXISTS ev; DROP VIEW IF EXISTS want;
CREATE TEMP VIEW e AS SELECT run, memory, $1 AS site, sum(count) AS count, sum(bytes) AS bytes,
	sum(at_peak) AS at_peak, sum(live) AS live FROM S GROUP BY run, memory, site;
CREATE TEMP VIEW ev AS
	SELECT run, memory, site, 'allocations' AS measure, count AS v FROM e
	UNION ALL SELECT run, memory, site, 'allocated', bytes FROM e
	UNION ALL SELECT run, memory, site, 'at_peak', at_peak FROM e
	UNION ALL SELECT run, memory, site, 'live_end', live FROM e;
CREATE TEMP VIEW want AS SELECT memory, site, measure, a, b,
	CASE WHEN a IS NULL OR b IS NULL THEN NULL ELSE b - a END AS diff,
	CASE WHEN a IS NULL OR b IS NULL OR a <> b THEN 1 ELSE 0 END AS changed,
	CASE WHEN a IS NULL THEN 'b' WHEN b IS NULL THEN 'a' ELSE '' END AS only
	FROM (SELECT k.memory, k.site, k.measure,
	(SELECT v FROM ev WHERE run = 'a' AND memory = k.memory AND site = k.site
		AND measure = k.measure) AS a,
	(SELECT v FROM ev WHERE run = 'b' AND memory = k.memory AND site = k.site
		AND measure = k.measure) AS b
	FROM (SELECT DISTINCT memory, site, measure FROM ev) k);"
}

# got TABLE WHERE: SQL for view got, TABLE's site rows that WHERE keeps, as
# want has them (numbers as numbers, an empty field NULL).
got() {
	echo "DROP VIEW IF EXISTS got; CREATE TEMP VIEW got AS SELECT memory, name AS site, measure,
	CAST(NULLIF(a, '') AS REAL) AS a, CAST(NULLIF(b, '') AS REAL) AS b,
	CAST(NULLIF(diff, '') AS REAL) AS diff, CAST(changed AS INTEGER) AS changed, only
	FROM $1 WHERE section = 'sites' AND ($2);"
}

SITE="func || ' (wl_sites.c:' || line || ')'"
OWN="name GLOB '*(wl_sites.c:*'"

# ---- exact mode ----

record a all "$WL_SITES" a
record b all "$WL_SITES" b
load a a
load b b
compare a b x
expect_empty "exact: every site of the program, host and cuda:0, as logged (A, B, diff, changed, only)" \
	"$(sq "$C" "$(want "$SITE") $(got x "$OWN")
$(multiset_diff want got "memory, site, measure, a, b, diff, changed, only")" 2>&1)"
got=$(sq "$C" "SELECT count(DISTINCT memory || name) FROM x WHERE section = 'sites' AND $OWN;
	SELECT count(DISTINCT memory) FROM x WHERE section = 'sites' AND $OWN;")
check "exact: the program's 23 sites (host and cuda:0) are compared" "$got" \
	test "$got" = "$(printf '23\n2')"
# The planted differences, written out (wl_sites.c's constants).
got=$(sq -separator ' ' "$C" "SELECT measure, a, b, diff, changed FROM x
	WHERE section = 'sites' AND name GLOB 'grow (wl_sites.c:*' ORDER BY measure;")
check "exact: grow: +4 blocks, +20012 bytes allocated and live, 0 at the peak" "$got" \
	test "$got" = "$(printf '%s\n' 'allocated 20012 40024 20012 1' 'allocations 4 8 4 1' \
		'at_peak 0 0 0 0' 'live_end 20012 40024 20012 1')"
got=$(sq -separator ' ' "$C" "SELECT measure, diff, changed FROM x
	WHERE section = 'sites' AND name GLOB 'peak_hold (wl_sites.c:*' ORDER BY measure;")
check "exact: peak_hold: one more 4 MiB block, at the peak too" "$got" \
	test "$got" = "$(printf '%s\n' 'allocated 4194315 1' 'allocations 1 1' 'at_peak 4194315 1' \
		'live_end 0 0')"
got=$(sq -separator ' ' "$C" "SELECT measure, diff, changed FROM x
	WHERE section = 'sites' AND name GLOB 'held_longer (wl_sites.c:*' ORDER BY measure;")
check "exact: held_longer: its block at the peak in run b only" "$got" \
	test "$got" = "$(printf '%s\n' 'allocated 0 0' 'allocations 0 0' 'at_peak 2003 1' 'live_end 0 0')"
got=$(sq -separator ' ' "$C" "SELECT count(*), sum(CAST(diff AS REAL) = 0), sum(changed = '0'),
	sum(CAST(a AS REAL) > 0) FROM x WHERE section = 'sites' AND (name GLOB 'same_held (*'
	OR name GLOB 'same_temp (*' OR name IN (SELECT $SITE FROM S WHERE memory = 'cuda:0'
	AND count = 1));")
check "exact: the unchanged sites (same_held, same_temp, two cudaMalloc): diff 0, not changed" \
	"rows, diff 0, not changed, nonzero: $got" test "$got" = "16 16 16 13"
got=$(sq -separator '|' "$C" "SELECT name, only, a, b, diff, changed FROM x WHERE section = 'sites'
	AND measure = 'allocated' AND only <> '' AND $OWN ORDER BY name;")
exp=$(sq "$C" "SELECT $SITE || '|a|524297|||1' FROM S WHERE func = 'a_only';
	SELECT $SITE || '|b||1048583||1' FROM S WHERE func = 'b_only';")
check "exact: a_only and b_only are listed as in one run only" "$got" test "$got" = "$exp"
# ASLR: the two processes loaded the program at different addresses, so a
# pairing by address would have failed.
bias() {
	sq "$T/$1.db" "SELECT m.bias FROM modules m JOIN strings s ON s.proc_id = m.proc_id
	AND s.id = m.path_id WHERE s.text GLOB '*/wl_sites';"
}
if [ "$(cat /proc/sys/kernel/randomize_va_space 2>/dev/null)" = 0 ]; then
	echo "ok - $SCRIPT: exact: the runs loaded at different addresses # SKIP ASLR is off"
else
	check "exact: the runs loaded the program at different addresses (ASLR)" \
		"bias $(bias a) and $(bias b)" holds '[ -n "$(bias a)" ] && [ "$(bias a)" != "$(bias b)" ]'
fi

# The wrapper: its callers add up to one site; --callers 1 splits it.
got=$(sq -separator ' ' "$C" "SELECT a, b, diff FROM x WHERE section = 'sites'
	AND measure = 'allocations' AND name GLOB 'wrap (wl_sites.c:*';")
check "exact: the wrapper's callers add up to one site (3 and 5 blocks)" "$got" test "$got" = "3 5 2"
compare a b callers --callers 1
expect_empty "--callers 1: the wrapper's site split by caller, as logged" \
	"$(sq "$C" "$(want "$SITE || ' <- ' || caller || ' (wl_sites.c:' || caller_line || ')'")
DELETE FROM S WHERE caller = '';
$(got callers "name GLOB 'wrap (wl_sites.c:*'")
$(multiset_diff want got "memory, site, measure, a, b, diff, changed, only")
SELECT 'rows:', count(*) FROM got HAVING count(*) <> 8;" 2>&1)"
# (S lost its other sites: load them again.)
sq "$C" "DELETE FROM S;"
load a a
load b b

# The table: per memory, the differing sites of the three rankings, then
# how many more differ.
"$SHIMMER" compare "$T/a.db" "$T/b.db" > "$T/x.txt" 2>&1
# table_check MEMORY: empty when the table's MEMORY sites are those the
# CSV's rows rank first, and its counts are the CSV's.
table_check() {
	local mem=$1 block want_n ndiff nsites name
	block=$(awk -v h="  call sites, $mem:" 'index($0, h) == 1 { on = 1 } on && $0 == "" { exit }
		on { print }' "$T/x.txt")
	sq "$C" "DROP VIEW IF EXISTS ranked; CREATE VIEW ranked AS SELECT name, max(changed = '1') AS differs,
	sum(CASE WHEN measure = 'allocated' THEN coalesce(CAST(NULLIF(b, '') AS REAL), 0)
		- coalesce(CAST(NULLIF(a, '') AS REAL), 0) END) AS d_alloc,
	sum(CASE WHEN measure = 'at_peak' THEN coalesce(CAST(NULLIF(b, '') AS REAL), 0)
		- coalesce(CAST(NULLIF(a, '') AS REAL), 0) END) AS d_peak,
	sum(CASE WHEN measure = 'live_end' THEN coalesce(CAST(NULLIF(b, '') AS REAL), 0)
		- coalesce(CAST(NULLIF(a, '') AS REAL), 0) END) AS d_live
	FROM x WHERE section = 'sites' AND memory = '$mem' GROUP BY name;
	DROP TABLE IF EXISTS shown; CREATE TABLE shown AS
	SELECT name FROM (SELECT name FROM ranked WHERE differs AND d_alloc <> 0
		ORDER BY abs(d_alloc) DESC, name LIMIT 10)
	UNION SELECT name FROM (SELECT name FROM ranked WHERE differs AND d_peak <> 0
		ORDER BY abs(d_peak) DESC, name LIMIT 10)
	UNION SELECT name FROM (SELECT name FROM ranked WHERE differs AND d_live <> 0
		ORDER BY abs(d_live) DESC, name LIMIT 10);"
	want_n=$(sq "$C" "SELECT count(*) FROM shown;")
	ndiff=$(sq "$C" "SELECT count(*) FROM ranked WHERE differs;")
	nsites=$(sq "$C" "SELECT count(*) FROM ranked;")
	printf '%s\n' "$block" | grep -q "^  call sites, $mem: $ndiff of $nsites differ" ||
		echo "heading: not '$ndiff of $nsites differ': $(printf '%s\n' "$block" | head -1)"
	[ "$(printf '%s\n' "$block" | tail -n +3 | grep -vc ' more differ')" = "$want_n" ] ||
		echo "site lines: not $want_n: $block"
	while IFS= read -r name; do
		printf '%s\n' "$block" | grep -qF -- " $name" ||
			echo "not shown: $name"
	done < <(sq "$C" "SELECT name FROM shown;")
	if [ "$ndiff" -gt "$want_n" ]; then
		printf '%s\n' "$block" | grep -q "^    $((ndiff - want_n)) more differs\?: --format csv or json lists every site$" ||
			echo "no line '$((ndiff - want_n)) more differ': $(printf '%s\n' "$block" | tail -1)"
	elif printf '%s\n' "$block" | grep -q ' more differ'; then
		echo "a 'more differ' line with nothing more: $block"
	fi
}
expect_empty "table: host: the largest changes, then 'N more differ' (N from the CSV)" \
	"$(table_check host)"
got=$(sq "$C" "SELECT count(*) FROM ranked WHERE differs;")
check "table: host: more sites differ than the table shows (the cut is tested)" \
	"$got differ, $(sq "$C" "SELECT count(*) FROM shown;") shown" \
	test "$got" -gt "$(sq "$C" "SELECT count(*) FROM shown;")"
expect_empty "table: cuda:0: the one site that differs" "$(table_check cuda:0)"
check "table: peak_hold's line: +1 block, +4 MiB allocated and at the peak, 0 live" \
	"$(grep 'peak_hold (' "$T/x.txt")" \
	holds 'grep -qE "^ +\+1 +\+4\.00 MiB +\+4\.00 MiB +\+0 B +peak_hold \(" "$T/x.txt"'
check "table: held_longer's line: its change at the peak" "$(grep 'held_longer (' "$T/x.txt")" \
	holds 'grep -qE "^ +\+0 +\+0 B +\+1\.96 KiB +\+0 B +held_longer \(" "$T/x.txt"'
check "table: b_only's line says only in B" "$(grep 'b_only (' "$T/x.txt")" \
	holds 'grep -qE "^ +\+1 +\+1\.00 MiB +\+1\.00 MiB +\+1\.00 MiB +only in B +b_only \(" "$T/x.txt"'
"$SHIMMER" compare "$T/a.db" "$T/b.db" --format json > "$T/x.json" 2> "$T/x.json.err"
got=$(sq "$C" "SELECT count(*) FROM json_each(readfile('$T/x.json'), '\$.pairs[0].rows') r
	WHERE r.value ->> 'section' = 'sites';
	SELECT count(*) FROM x WHERE section = 'sites';
	SELECT r.value ->> 'diff' FROM json_each(readfile('$T/x.json'), '\$.pairs[0].rows') r
	WHERE r.value ->> 'memory' = 'host' AND r.value ->> 'measure' = 'live_end'
	AND r.value ->> 'name' GLOB 'grow (*';" 2>&1)
check "json: every site row of the CSV (grow's live_end +20012)" "json, csv, diff: $got" \
	holds '[ "$(echo $got | cut -d" " -f1)" = "$(echo $got | cut -d" " -f2)" ] &&
		[ "$(echo $got | cut -d" " -f2)" -gt 80 ] && [ "$(echo $got | cut -d" " -f3)" = 20012 ]'

# --fail-if site_peak
failif() { # EXPECTED CONDITION [NAMED]
	local want=$1 cond=$2 named=${3:-} rc
	"$SHIMMER" compare "$T/a.db" "$T/b.db" --fail-if "$cond" > "$T/f.out" 2>&1
	rc=$?
	check "--fail-if $cond: exit $want${named:+, names $named}" \
		"exit $rc: $(grep -E 'FAIL|ok:|error' "$T/f.out")" \
		holds '[ $rc = "$want" ] && { [ -z "$named" ] || grep -qF "FAIL: $cond: $named" "$T/f.out"; }'
}
failif 3 "site_peak>=+4194315" "host peak_hold (wl_sites.c:"
failif 0 "site_peak>+4194315"
failif 3 "site_peak[cuda:0]>+3MiB" "cuda:0 device (wl_sites.c:"
failif 0 "site_peak[cuda:0]>+3145729"
failif 3 "site_peak[host]>+1MiB" "host b_only (wl_sites.c:"
failif 1 "site_peak[pinned]>+1MiB"
failif 2 "site_peak>+10%"

# ---- a stripped copy: sites named module+0xOFFSET ----

mkdir -p "$T/strip/e2e"
ln -s "$O/test/fake_cudart" "$T/strip/fake_cudart"
strip -o "$T/strip/e2e/wl_sites" "$WL_SITES"
record sa all "$T/strip/e2e/wl_sites" a
record sb all "$T/strip/e2e/wl_sites" b
compare sa sb stripped
got=$(sq -separator ' ' "$C" "SELECT count(DISTINCT name), count(DISTINCT CASE WHEN only <> ''
	THEN name END) FROM stripped WHERE section = 'sites' AND name GLOB 'wl_sites+0x*';")
check "stripped: the program's 23 sites as wl_sites+0xOFFSET, 2 in one run only" "$got" \
	test "$got" = "23 2"
expect_empty "stripped: the same figures as the symbolized runs, site for site" "$(sq "$C" "
CREATE TEMP VIEW sym AS SELECT memory, measure, a, b, diff, changed, only FROM x
	WHERE section = 'sites' AND $OWN;
CREATE TEMP VIEW bare AS SELECT memory, measure, a, b, diff, changed, only FROM stripped
	WHERE section = 'sites' AND name GLOB 'wl_sites+0x*';
$(multiset_diff sym bare "memory, measure, a, b, diff, changed, only")" 2>&1)"

# ---- sample mode ----

record pa sample "$WL_SITES" a
record pb sample "$WL_SITES" b
sq "$C" "DELETE FROM S;"
load pa a
load pb b
compare pa pb sampled
got=$(sq -separator ' ' "$C" "SELECT memory, count(*), sum(estimated = '1') FROM sampled
	WHERE section = 'sites' GROUP BY memory ORDER BY memory;")
check "sample: every host site row is an estimate, no cuda:0 row is" "memory rows estimated: $got" \
	holds '[ "$(echo "$got" | grep -c "^cuda:0 [0-9]* 0$")" = 1 ] &&
		echo "$got" | grep -qE "^host ([0-9]+) \1$"'
expect_empty "sample: the cuda:0 sites as logged, exactly" "$(sq "$C" "$(want "$SITE")
$(got sampled "$OWN AND memory = 'cuda:0'")
DELETE FROM S WHERE memory <> 'cuda:0';
$(multiset_diff want got "memory, site, measure, a, b, diff, changed, only")" 2>&1)"
got=$(sq -separator ' ' "$C" "SELECT measure, changed, printf('%.2f', ratio) FROM sampled
	WHERE section = 'sites' AND name GLOB 'peak_hold (*' AND measure IN ('allocated', 'at_peak')
	ORDER BY measure;")
check "sample: peak_hold's estimate, a third more, is not changed (estimates: by half)" "$got" \
	test "$got" = "$(printf '%s\n' 'allocated 0 1.33' 'at_peak 0 1.33')"
"$SHIMMER" compare "$T/pa.db" "$T/pb.db" > "$T/p.txt" 2>&1
check "sample: the table marks the host estimates ~" "$(grep -E 'b_only|~:' "$T/p.txt")" \
	holds 'grep -qE "^ +~\+1 +~\+1\.00 MiB +~\+1\.00 MiB +~\+1\.00 MiB +only in B +b_only \(" "$T/p.txt" &&
		grep -q "~: estimated from sampled allocations" "$T/p.txt"'

# ---- sampling's own noise ----
# Run A takes no sample (a period of 2^40 bytes); run B the default (512
# KiB).  Line 2 allocates 600 KiB in 4 KiB blocks: B samples it a time or
# two, each sample of weight 512 KiB, and A never: a site in B only, by
# sampling alone, no change (it was "changed").  Line 3's 10 MiB block is
# kept for sure at that period (no sampling variance): in B only, changed.
cat > "$T/noise.py" <<'PY'
import sys
small = [bytearray(4096) for _ in range(150)]
big = bytearray(10 << 20)
PY
SHIMMER_SAMPLE_BYTES=1099511627776 "$SHIMMER" run --db "$T/na.db" -- python3 "$T/noise.py" \
	> /dev/null 2>&1
# B's premise: line 2 sampled at least once (69% of runs)
for try in 1 2 3 4 5 6 7 8; do
	rm -f "$T/nb.db"
	"$SHIMMER" run --db "$T/nb.db" -- python3 "$T/noise.py" > /dev/null 2>&1
	"$SHIMMER" allocations "$T/nb.db" --format csv | grep -q 'noise.py:2)' && break
done
check "noise: run B sampled line 2 (the premise; $try runs)" \
	"$("$SHIMMER" allocations "$T/nb.db" | grep noise.py)" \
	holds '"$SHIMMER" allocations "$T/nb.db" --format csv | grep -q "noise.py:2)"'
compare na nb noise
got=$(sq -separator ' ' "$C" "SELECT substr(name, instr(name, 'noise.py:')), measure, changed, only
	FROM noise WHERE section = 'sites' AND name GLOB '*noise.py:[23])*' ORDER BY name, measure;")
check "noise: line 2, sampled in B only, is no change; line 3's 10 MiB in B only is" "$got" \
	holds 'echo "$got" | grep -q "^noise.py:2) allocated 0 b$" &&
		! echo "$got" | grep -q "^noise.py:2) .* 1 b$" &&
		echo "$got" | grep -q "^noise.py:3) allocated 1 b$"'
finish
