#!/bin/bash
# t_incomplete: every reader says when what it reads is incomplete, on
# three stores of wl flood (heap calls, CUDA calls) made by `shimmer run`:
#  - whole: nothing lost, the collector alive to the end;
#  - lossy: 4 KiB rings in lossy mode, so that the rings drop events
#    (ring_full drops rows, the truth every line is checked against);
#  - cut: the collector SIGKILLed about 0.3 s into the run, wl flood still
#    running (its calls before stored, its call counters never: the
#    collector writes them about once a second), so that `shimmer run`
#    ends its row, and its parents', `collector_lost`.
# Checked:
#  - export chrome: one stderr line per process and loss (the lost events
#    with the store's count, the cut), and inside the trace, where a person
#    looking at the timeline sees it: a track "WARNING: ..." first in the
#    process, a slice over the process's life carrying the lost events'
#    sentence, an instant at the recorded end of a cut recording, the
#    process's label INCOMPLETE; the trace passes tef_check.py; the whole
#    store's trace and stderr have none of it;
#  - export csv: the same stderr lines; its columns unchanged;
#  - export --weight gpu-time: the same losses, in words of its lines;
#  - summary of the cut store: a heap function's count and bytes, which
#    nobody counted, are withheld ("-", empty, null: before, the timed
#    calls, a sample, were shown as the count), a CUDA function's count is
#    its calls stored (each a row), the process's calls_counted false;
#    summary --format csv says the losses on stderr;
#  - compare: under B's process the loss, its rows (events lost, recording
#    cut short) the store's, JSON's complete; --fail-if not judged on
#    figures the loss touches (exit 1, one line why), judged where not;
#  - report: one line per process and loss in the headline, above every
#    figure, chart and flame graph, and a card counting cut recordings;
#  - summary --by-rank (2 ranks of wl_ranks, rank 1 the straggler; copies
#    with a loss planted: a drops row, a collector_lost end): a line under
#    each incomplete rank; no straggler judged where a rank lost events
#    (its ranges among them: steps may not line up), judged where one was
#    cut (its steps whole up to the cut);
#  - shimmer run's screen: a line of processes folded together says how
#    many of them are incomplete.
. "$(dirname "$0")/lib.sh"
need "$SHIM" "$SHIMMERD" "$SHIMMER" "$WL"
PY=$(python_exe) || PY=python3
export SHIMMER_HEAP_ROWS=all WL_LOG=/dev/null

SHIMMER_MALLOC=all "$SHIMMER" run --db "$T/whole.db" -- "$WL" flood 3 100 > /dev/null 2> "$T/whole.err"
SHIMMER_MALLOC=all SHIMMER_LOSSLESS=0 SHIMMER_RING_KB=4 \
	"$SHIMMER" run --db "$T/lossy.db" -- "$WL" flood 50 2000 > /dev/null 2> "$T/lossy.err"
# (the collector: the shimmerd child of sh's parent, shimmer run; found
# with builtins, so that no other process is traced)
SHIMMER_MALLOC=all "$SHIMMER" run --db "$T/cut.db" -- sh -c '
	"$1" flood 40 2000 &
	sleep 0.3
	for d in /proc/[0-9]*; do
		read -r c < "$d/comm" 2> /dev/null && [ "$c" = shimmerd ] &&
		read -r _ _ _ pp _ < "$d/stat" && [ "$pp" = "$PPID" ] && kill -KILL "${d#/proc/}"
	done
	wait
	exit 5' sh "$WL" > /dev/null 2> "$T/cut.err"
rc=$?
lost=$(sq "$T/lossy.db" "SELECT coalesce(sum(events), 0) FROM drops WHERE reason = 'ring_full'")
wlcut=$(sq "$T/cut.db" "SELECT proc_id FROM processes WHERE exe LIKE '%/wl'
	AND end_reason = 'collector_lost'")
check "the stores: the lossy one lost events, the cut one's wl flood ended collector_lost" \
	"ring_full $lost; cut: exit $rc, wl's proc_id '$wlcut', rows: $(sq "$T/cut.db" "SELECT
	group_concat(exe || ' ' || coalesce(end_reason, 'live'), ', ') FROM processes")" \
	holds '[ "$lost" -gt 0 ] && [ $rc = 5 ] && [ -n "$wlcut" ]'

# warned DB ERR EFFECT CUT: ERR (a command's stderr on DB) has one line per
# process that lost events, with the store's count and reasons and EFFECT,
# one per process whose recording was cut, ending ": CUT", and no other;
# prints what differs.
warned() {
	"$PY" - "$@" <<'EOF_PY'
import re, sqlite3, sys
db, err, effect, cut = sys.argv[1:]
con = sqlite3.connect(db)
want = []
for proc_id, pid, reason in con.execute("SELECT proc_id, pid, end_reason FROM processes"):
    head = "shimmer: warning: pid %d (proc %d): " % (pid, proc_id)
    if reason == "collector_lost":
        want.append(head + "the collector was lost while this process ran: what it did after"
                    " the collector's last commit (the end recorded) was never stored, and how"
                    " much that was is not known: " + cut)
    drops = con.execute("SELECT reason, sum(events) FROM drops WHERE proc_id = ? AND reason NOT IN"
                        " ('stack_full', 'pystack_full', 'stack_collision') GROUP BY reason"
                        " HAVING sum(events) > 0 ORDER BY reason", (proc_id,)).fetchall()
    if drops:
        want.append(head + "%d events of this process were lost before the store (%s): %s;"
                    " SHIMMER_LOSSLESS=1 keeps every event"
                    % (sum(n for _, n in drops), ", ".join("%s %d" % d for d in drops), effect))
got = [l for l in open(err).read().splitlines() if "its host heap was aggregated" not in l]
for l in sorted(set(want) - set(got)):
    print("missing: " + l)
for l in sorted(set(got) - set(want)):
    print("not expected: " + l)
if len(got) != len(set(got)):
    print("a line twice")
EOF_PY
}

CHROME_LOST="they are missing from this trace, and its memory counters may be wrong either way (a lost free leaves a block live, a lost allocation hides one)"
CSV_LOST="they are missing from these rows (a lost free leaves an alloc row's end_ns empty, as a block never freed)"
GPU_LOST="lost kernels are missing and a kernel whose launch was lost is under (launch call not recorded): its gpu-time lines are lower bounds"

for s in whole lossy cut; do
	db=$T/$s.db
	"$SHIMMER" export "$db" -o "$T/$s.json" 2> "$T/$s.chrome.err"
	erc=$?
	expect_empty "chrome, $s: exit 0, stderr says each loss once, the trace passes tef_check.py" \
		"$([ $erc = 0 ] || echo "exit $erc")$(warned "$db" "$T/$s.chrome.err" "$CHROME_LOST" "this trace ends there")$("$PY" "$ROOT/test/e2e/tef_check.py" "$T/$s.json" 2>&1)"
	# Inside the trace: the same sentences on the warning track of each
	# incomplete process, and its label; nothing for a whole one.
	expect_empty "chrome, $s: the trace says each loss on a warning track first in its process, and in its label" \
		"$("$PY" - "$T/$s.json" "$db" "$T/$s.chrome.err" <<'EOF_PY'
import json, sqlite3, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
con = sqlite3.connect(sys.argv[2])
said = [l.split("): ", 1)[1] for l in open(sys.argv[3]).read().splitlines()
        if l.startswith("shimmer: warning: pid ") and "aggregated" not in l]
origin = con.execute("SELECT min(start_ns) FROM processes").fetchone()[0]
# (processes of one pid, before and after an exec, are told apart in the
# trace by a pid above Linux's: export.c)
shared = {p for p, in con.execute("SELECT pid FROM processes GROUP BY pid HAVING count(*) > 1")}
for pid, proc_id, reason, end in con.execute("SELECT pid, proc_id, end_reason, end_ns FROM processes"):
    pid = (1 << 22) + proc_id if pid in shared else pid
    lost = con.execute("SELECT coalesce(sum(events), 0) FROM drops WHERE proc_id = ? AND reason NOT IN"
                       " ('stack_full', 'pystack_full', 'stack_collision')", (proc_id,)).fetchone()[0]
    cut = reason == "collector_lost"
    mine = [e for e in ev if e["pid"] == pid]
    track = [e["tid"] for e in mine if e["ph"] == "M" and e["name"] == "thread_name"
             and e["args"]["name"].startswith("WARNING: ")]
    label = [e["args"]["labels"] for e in mine if e["ph"] == "M" and e["name"] == "process_labels"]
    warn = [e for e in mine if e.get("cat") == "warning"]
    if not (lost or cut):
        if track or warn or any("INCOMPLETE" in l for l in label):
            print("pid %d: whole, but %r %r %r" % (pid, track, warn, label))
        continue
    if len(track) != 1:
        print("pid %d: %d warning tracks" % (pid, len(track)))
        continue
    sort = [e["args"]["sort_index"] for e in mine if e["ph"] == "M" and e["name"] == "thread_sort_index"
            and e["tid"] == track[0]]
    others = [e["args"]["sort_index"] for e in mine if e["ph"] == "M" and e["name"] == "thread_sort_index"
              and e["tid"] != track[0]]
    if len(sort) != 1 or any(o <= sort[0] for o in others):
        print("pid %d: the warning track is not first (%r, others %r)" % (pid, sort, others))
    if any(e["tid"] != track[0] for e in warn):
        print("pid %d: warnings off the track" % pid)
    slices = [e for e in warn if e["ph"] == "X"]
    marks = [e for e in warn if e["ph"] == "i"]
    if lost:
        if len(slices) != 1 or slices[0]["name"] != "WARNING: %d events lost" % lost \
           or slices[0]["args"]["warning"] not in said or "%d events" % lost not in slices[0]["args"]["warning"]:
            print("pid %d: lost %d, slices %r" % (pid, lost, slices))
        if not any("INCOMPLETE: events were lost" in l for l in label):
            print("pid %d: label %r" % (pid, label))
    elif slices:
        print("pid %d: nothing lost, slices %r" % (pid, slices))
    if cut:
        if len(marks) != 1 or round(marks[0]["ts"] * 1000) + origin != end \
           or marks[0]["args"]["warning"] not in said:
            print("pid %d: cut at %d, marks %r" % (pid, end, marks))
        if not any("INCOMPLETE: the recording was cut short" in l for l in label):
            print("pid %d: label %r" % (pid, label))
    elif marks:
        print("pid %d: not cut, marks %r" % (pid, marks))
EOF_PY
)"
	"$SHIMMER" export "$db" --format csv -o "$T/$s.csv" 2> "$T/$s.csv.err"
	erc=$?
	expect_empty "csv, $s: exit 0, stderr says each loss once, the columns unchanged" \
		"$([ $erc = 0 ] || echo "exit $erc")$(warned "$db" "$T/$s.csv.err" "$CSV_LOST" "these rows end there")$(head -1 "$T/$s.csv" | grep -vx 'kind,name,pid,rank,tid,device,stream,begin_ns,end_ns,bytes,correlation')"
	"$SHIMMER" export "$db" --format folded --weight gpu-time > "$T/$s.gpu" 2> "$T/$s.gpu.err"
	erc=$?
	expect_empty "gpu-time, $s: exit 0, stderr says each loss once in words of its lines" \
		"$([ $erc = 0 ] || echo "exit $erc")$(warned "$db" "$T/$s.gpu.err" "$GPU_LOST" "its gpu-time lines stop there")"
done

# --- summary: counts nobody counted -------------------------------------------
# On a loaded machine the collector may have written the counters before
# the kill: then they are removed, as if it had not (the store it would
# have left).
db=$T/cut.db
planted=
if [ -n "$wlcut" ] && [ "$(sq "$db" "SELECT count(*) FROM function_counts WHERE proc_id = $wlcut")" != 0 ]; then
	sq "$db" "DELETE FROM function_counts WHERE proc_id = $wlcut"
	planted=" (counters removed: the collector had written them)"
fi
read -r mallocs cudas <<< "$(sq -separator ' ' "$db" "SELECT
	(SELECT count(*) FROM allocations WHERE proc_id = ${wlcut:-0} AND alloc_fn =
		(SELECT fn_id FROM functions WHERE name = 'malloc')),
	(SELECT count(*) FROM cuda_calls WHERE proc_id = ${wlcut:-0} AND fn_id =
		(SELECT fn_id FROM functions WHERE name = 'cudaMalloc'))")"
"$SHIMMER" summary "$db" --format csv > "$T/sum.csv" 2> "$T/sum.err"
"$SHIMMER" summary "$db" --format json > "$T/sum.json" 2>> "$T/sum.err"
"$SHIMMER" summary "$db" > "$T/sum.txt" 2>> "$T/sum.err"
got=$("$PY" - "$T/sum.csv" "$T/sum.json" "$T/sum.txt" "$db" "${wlcut:-0}" "$cudas" 2>&1 <<'EOF_PY'
import csv, json, sqlite3, sys
csvf, jsonf, txtf, db, proc_id, cudas = sys.argv[1:]
proc_id, cudas = int(proc_id), int(cudas)
bad = []
rows = [r for r in csv.DictReader(open(csvf)) if r["proc_id"] == str(proc_id)]
by = {r["event"]: r for r in rows}
for fn in ("malloc", "free"):
    r = by.get(fn)
    if not r or r["count"] or r["bytes"] or r["total_ns"] or not int(r["timed"]):
        bad.append("csv %s: %r" % (fn, r))
r = by.get("cudaMalloc")
if not r or r["count"] != str(cudas) or r["bytes"] or r["timed"] != str(cudas) or not r["total_ns"]:
    bad.append("csv cudaMalloc (%d calls stored): %r" % (cudas, r))
p = [p for p in json.load(open(jsonf))["processes"] if p["proc_id"] == proc_id]
if len(p) != 1 or p[0]["calls_counted"] is not False:
    bad.append("json: calls_counted %r" % [x.get("calls_counted") for x in p])
else:
    f = {x["event"]: x for x in p[0]["functions"]}
    if f["malloc"]["count"] is not None or f["malloc"]["bytes"] is not None or \
       f["malloc"]["total_ns"] is not None or f["cudaMalloc"]["count"] != cudas:
        bad.append("json: %r %r" % (f["malloc"], f["cudaMalloc"]))
txt = open(txtf).read()
sec = txt[txt.index("/wl flood"):] if "/wl flood" in txt else ""
line = [l.split() for l in sec.splitlines() if l.split()[:1] == ["malloc"]]
if not line or line[0][1:3] != ["-", "-"]:
    bad.append("table: malloc %r" % line[:1])
if "- no count, bytes or heap total: the collector was lost before it stored this process's call counters" not in sec:
    bad.append("table: no note")
print("; ".join(bad))
EOF_PY
)
check "summary, cut before the first count write: heap counts and bytes withheld, CUDA counts its calls stored$planted" \
	"$got; malloc rows $mallocs, cudaMalloc rows $cudas; $(grep -A8 "/wl flood" "$T/sum.txt" | head -12)" \
	holds '[ -z "$got" ] && [ "${mallocs:-0}" -gt 0 ] && [ "${cudas:-0}" -gt 0 ]'
got=$("$SHIMMER" summary "$T/whole.db" --format json | "$PY" -c '
import json, sys
for p in json.load(sys.stdin)["processes"]:
    if p["exe"].endswith("/wl"):
        f = {x["event"]: x for x in p["functions"]}
        print(p["calls_counted"], f["malloc"]["count"], f["malloc"]["bytes"])')
want=$(sq "$T/whole.db" "SELECT 'True', sum(c.count), sum(c.bytes) FROM function_counts c
	JOIN functions f USING (fn_id) JOIN processes p USING (proc_id)
	WHERE f.name = 'malloc' AND p.exe LIKE '%/wl'" | tr '|' ' ')
check "summary, whole store: the counters' counts" "got '$got', the store's '$want'" \
	[ "$got" = "$want" ]
for s in whole lossy cut; do
	"$SHIMMER" summary "$T/$s.db" --format csv > /dev/null 2> "$T/$s.sumcsv.err"
	expect_empty "summary --format csv, $s: stderr says each loss once (its rows have no room)" \
		"$(warned "$T/$s.db" "$T/$s.sumcsv.err" "the time statistics of its rows miss them (its counts and bytes too where a thread found no ring: no_slot), and its GPU rows the records CUPTI lost" "its rows stop there")"
done

# --- compare: said under the process, --fail-if withheld ----------------------
# (each store's wl is paired with whole's by its executable)
cmp_case() {
	local name=$1 b=$2 want=$3 line=$4
	shift 4
	"$SHIMMER" compare "$T/whole.db" "$T/$b.db" "$@" > "$T/cmp.out" 2> "$T/cmp.err"
	rc=$?
	"$SHIMMER" compare "$T/whole.db" "$T/$b.db" --format csv > "$T/cmp.csv" 2> /dev/null
	"$SHIMMER" compare "$T/whole.db" "$T/$b.db" --format json > "$T/cmp.json" 2> /dev/null
	got=$("$PY" - "$T/cmp.csv" "$T/cmp.json" "$T/$b.db" 2>&1 <<'EOF_PY'
import csv, json, sqlite3, sys
rows = list(csv.DictReader(open(sys.argv[1])))
con = sqlite3.connect(sys.argv[3])
pair = json.load(open(sys.argv[2]))["pairs"][0]
proc = pair["b"]["proc_id"]
lost = con.execute("SELECT coalesce(sum(events), 0) FROM drops WHERE proc_id = ? AND reason NOT IN"
                   " ('stack_full', 'pystack_full', 'stack_collision', 'cupti')", (proc,)).fetchone()[0]
cut = con.execute("SELECT end_reason = 'collector_lost' FROM processes WHERE proc_id = ?",
                  (proc,)).fetchone()[0]
def row(name):
    r = [x for x in rows if x["section"] == "process" and x["name"] == name]
    return (float(r[0]["a"]), float(r[0]["b"])) if len(r) == 1 else None
bad = []
if row("events lost (host)") != (0, lost):
    bad.append("events lost (host) %r, the store's %d" % (row("events lost (host)"), lost))
if row("recording cut short (1: yes)") != (0, cut):
    bad.append("recording cut short %r, the store's %d" % (row("recording cut short (1: yes)"), cut))
if pair["a"]["complete"] is not True or pair["b"]["complete"] is not (not lost and not cut):
    bad.append("complete: a %r, b %r" % (pair["a"]["complete"], pair["b"]["complete"]))
print("; ".join(bad))
EOF_PY
)
	check "compare, $name" "exit $rc; $got; stdout: $(grep -B1 -A2 "^  b: pid" "$T/cmp.out"; tail -3 "$T/cmp.out"); stderr: $(cat "$T/cmp.err")" \
		holds '[ $rc = $want ] && [ -z "$got" ] && { [ -z "$line" ] ||
		grep -A3 "^  b: pid" "$T/cmp.out" | grep -q "^    WARNING: $line"; } &&
		{ [ -n "$line" ] || ! grep -q "WARNING" "$T/cmp.out"; }'
}
cmp_case "whole against itself: nothing said, --fail-if judged" whole 0 "" \
	--fail-if 'peak_memory>+1000%' --fail-if 'wall_time>+100000%'
grep -q "^ok: peak_memory>+1000%" "$T/cmp.out" || not_ok "compare, whole: peak_memory judged ok" "$(cat "$T/cmp.out")"
cmp_case "lossy B: the lost events under it, peak_memory not judged (exit 1), wall_time judged" lossy 1 \
	"$lost events of this process were lost before the store (ring_full $lost): its figures below miss them" \
	--fail-if 'peak_memory>+1000%' --fail-if 'wall_time>+100000%'
check "compare, lossy B: which condition, and why, in one line" "$(cat "$T/cmp.err"; tail -3 "$T/cmp.out")" \
	holds '[ "$(wc -l < "$T/cmp.err")" = 1 ] &&
	grep -q "^shimmer: error: --fail-if peak_memory>+1000%: pid [0-9]* in B: it lost $lost events before the store: its figures miss them; not evaluated$" "$T/cmp.err" &&
	grep -q "^not evaluated: peak_memory>+1000%" "$T/cmp.out" && grep -q "^ok: wall_time>+100000%" "$T/cmp.out"'
cmp_case "cut B: the cut under it, even wall_time not judged (exit 1)" cut 1 \
	"the collector was lost while this process ran: .*: its figures below stop there" \
	--fail-if 'wall_time>+100000%'
check "compare, cut B: not evaluated, one line why" "$(cat "$T/cmp.err"; tail -2 "$T/cmp.out")" \
	holds 'grep -q "^shimmer: error: --fail-if wall_time>+100000%: pid [0-9]* in B: its recording was cut short (the collector was lost): its figures stop there; not evaluated$" "$T/cmp.err" &&
	grep -q "^not evaluated: wall_time>+100000%" "$T/cmp.out"'

# --- report: a line per process and loss above its figures -------------------
for s in whole lossy cut; do
	"$SHIMMER" report "$T/$s.db" -o "$T/$s.html" > /dev/null 2> "$T/$s.report.err"
	erc=$?
	got=$("$PY" - "$T/$s.html" "$T/$s.db" 2>&1 <<'EOF_PY'
import html, re, sqlite3, sys
page = open(sys.argv[1]).read()
con = sqlite3.connect(sys.argv[2])
head = re.search(r'<section id="headline">.*?</section>', page, re.S).group(0)
notes = [html.unescape(n) for n in re.findall(r'<p class="note incomplete">(.*?)</p>', page, re.S)]
want, cut = [], 0
for pid, proc_id, reason in con.execute("SELECT pid, proc_id, end_reason FROM processes"):
    lost = con.execute("SELECT coalesce(sum(events), 0) FROM drops WHERE proc_id = ? AND reason NOT IN"
                       " ('stack_full', 'pystack_full', 'stack_collision')", (proc_id,)).fetchone()[0]
    if reason == "collector_lost":
        cut += 1
        want.append(("pid %d " % pid, "WARNING: the collector was lost while this process ran"))
    if lost:
        want.append(("pid %d " % pid, "WARNING: %d events of this process were lost before the store" % lost))
bad = []
for who, what in want:
    if sum(n.startswith(who) and what in n for n in notes) != 1:
        bad.append("no note %s...: %s" % (who, what))
if len(notes) != len(want):
    bad.append("%d notes, %d losses" % (len(notes), len(want)))
if any(n not in head for n in re.findall(r'<p class="note incomplete">.*?</p>', page, re.S)):
    bad.append("a note outside the headline")
card = re.search(r'<div class="v">(\d+)</div><div class="l">recordings cut short', head)
if (int(card.group(1)) if card else 0) != cut:
    bad.append("cut card %r, %d cut" % (card and card.group(1), cut))
print("; ".join(bad))
EOF_PY
)
	check "report, $s: each loss in one line above its figures, the cut recordings counted" \
		"exit $erc; $got" holds '[ $erc = 0 ] && [ -z "$got" ]'
done

# --- summary --by-rank: said per rank, the straggler withheld where steps may not line up
WL_RANKS=$O/test/e2e/wl_ranks
need "$WL_RANKS"
start_collector "$T/ranks.db" || { not_ok "ranks: collector"; finish; }
rpids=()
for r in 0 1; do
	RANK=$r LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK "$WL_RANKS" 4 20000 1 60000 2>> "$T/ranks.err" &
	rpids+=($!)
done
wait "${rpids[@]}"
stop_collector || not_ok "ranks: collector exit status"
# planted: rank 0's process lost events (a drops row, as the collector
# writes one), or rank 1's recording was cut short
cp "$T/ranks.db" "$T/rlossy.db"
sq "$T/rlossy.db" "INSERT INTO drops (proc_id, tid, reason, events) SELECT proc_id, pid, 'ring_full', 7
	FROM processes WHERE rank = 0"
cp "$T/ranks.db" "$T/rcut.db"
sq "$T/rcut.db" "UPDATE processes SET end_reason = 'collector_lost' WHERE rank = 1"
for s in ranks rlossy rcut; do
	"$SHIMMER" summary "$T/$s.db" --by-rank > "$T/$s.txt" 2>&1
	"$SHIMMER" summary "$T/$s.db" --by-rank --format json > "$T/$s.json" 2>&1
done
check "by-rank, whole: the straggler (rank 1) named, nothing said" "$(cat "$T/ranks.txt")" \
	holds 'grep -q "^Straggler: rank 1 was the slowest" "$T/ranks.txt" && ! grep -q WARNING "$T/ranks.txt" &&
	[ "$(sq "$T/ranks.db" "SELECT json_array_length(readfile('"'$T/ranks.json'"'), '"'\$.incomplete'"')")" = 0 ]'
check "by-rank, rank 0 lost events: said under it, the straggler not judged" "$(cat "$T/rlossy.txt")" \
	holds 'grep -A1 "^rank 0 (pid [0-9]*):" "$T/rlossy.txt" | grep -q "^  WARNING: 7 events of this process were lost before the store (ring_full 7): its rank.s totals below miss them" &&
	grep -q "^Straggler: not judged: rank 0 (pid [0-9]*) lost 7 events before the store, ranges among them" "$T/rlossy.txt" &&
	[ "$(sq "$T/rlossy.db" "SELECT readfile('"'$T/rlossy.json'"') ->> '"'\$.incomplete[0].dropped_events'"',
		readfile('"'$T/rlossy.json'"') ->> '"'\$.straggler.rank'"' IS NULL,
		readfile('"'$T/rlossy.json'"') ->> '"'\$.straggler.withheld'"' IS NOT NULL")" = "7|1|1" ]'
check "by-rank, rank 1 cut short: said under it, the straggler still judged on the steps both have" "$(cat "$T/rcut.txt")" \
	holds 'grep -A1 "^rank 1 (pid [0-9]*):" "$T/rcut.txt" | grep -q "^  WARNING: the collector was lost while this process ran: .*: its rank.s totals below stop there" &&
	grep -q "^Straggler: rank 1 was the slowest" "$T/rcut.txt"'

# --- shimmer run's screen: the processes it folds into one line --------------
# 7 sleeps and their shell cut short by the collector's kill: 5 processes
# in full, each with its warning, the rest folded, their line saying how
# many of them are incomplete (the store's count of those folded).
"$SHIMMER" run --db "$T/many.db" -- sh -c '
	for i in 1 2 3 4 5 6 7; do sleep 1 & done
	sleep 0.3
	for d in /proc/[0-9]*; do
		read -r c < "$d/comm" 2> /dev/null && [ "$c" = shimmerd ] &&
		read -r _ _ _ pp _ < "$d/stat" && [ "$pp" = "$PPID" ] && kill -KILL "${d#/proc/}"
	done
	wait' > /dev/null 2> "$T/many.err"
got=$("$PY" - "$T/many.err" "$T/many.db" 2>&1 <<'EOF_PY'
import re, sqlite3, sys
out = open(sys.argv[1]).read()
con = sqlite3.connect(sys.argv[2])
# (pid and executable: a forked shell and the sleep it exec'd share a pid)
shown = {(int(p), e) for p, e in re.findall(r"^Process (\d+) .*?: (\S+)$", out, re.M)}
folded = {}
for pid, exe, reason in con.execute("SELECT pid, exe, end_reason FROM processes"):
    if (pid, exe) in shown:
        continue
    base = exe.rsplit("/", 1)[-1]
    n, bad = folded.get(base, (0, 0))
    folded[base] = (n + 1, bad + (reason == "collector_lost"))
lines = dict(re.findall(r"^  (\S+) (x\d+, .*)$", out, re.M))
bad = []
if not any(b for _, b in folded.values()):
    bad.append("no incomplete process folded: %r" % folded)
for base, (n, b) in folded.items():
    l = lines.get(base, "")
    w = "; WARNING: %d of them incomplete (events lost, or the recording cut short" % b
    if not l.startswith("x%d, " % n) or (w in l) != (b > 0) or (b == 0 and "WARNING" in l):
        bad.append("%s: %d folded, %d incomplete: %r" % (base, n, b, l))
print("; ".join(bad))
EOF_PY
)
check "shimmer run's screen: the folded processes' line says how many of them are incomplete" \
	"$got; $(grep -A3 "more process" "$T/many.err")" test -z "$got"
finish
