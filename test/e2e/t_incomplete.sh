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
#    its calls stored (each a row), the process's calls_counted false.
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
finish
