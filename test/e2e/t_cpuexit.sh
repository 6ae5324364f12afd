#!/bin/bash
# t_cpuexit: a process's CPU time when it ends before the collector reads
# it there.  wl_burn forks children one after the other; each burns 300 ms
# of CPU (half on a thread that ends first, half on its main thread) and
# ends at once, reaped by its parent at once (a pool worker, a torchrun
# worker): the collector's readings of /proc, every 100 ms, miss what ran
# after the last one (the thread's above all: it is gone from /proc before
# the process ends).  The truth is the parent's wait4() rusage of each
# child (user + system, in microseconds).  Checked, in the store's
# process_cpu (schema 14; on a store without it, the sum of the threads'
# last readings, what the store held before):
#  - a child that exits (exit(), _exit()): its CPU time within 10 ms below
#    the truth, never above it (+1 ms for wait4's rounding), its reading
#    final, user + system within 5 ms of it.  Before the shim said its CPU
#    time at exit, each lost 35 to 130 ms;
#  - a child that SIGKILLs itself says nothing: not final, its figure at
#    most the truth, read before its end;
#  - the parent, which exits: final;
#  - a store of schema 13 (the columns and the view dropped from a copy):
#    summary and bottlenecks still read it.
. "$(dirname "$0")/lib.sh"

WL_BURN=$O/test/e2e/wl_burn
need "$SHIM" "$SHIMMERD" "$SHIMMER" "$WL_BURN"
PY=$(python_exe) || PY=python3

DB=$T/burn.db
start_collector "$DB" || { not_ok "collector starts"; finish; }
WLOG=$T/burn.log
LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK WL_LOG=$WLOG "$WL_BURN" 6 300 mix > /dev/null 2> "$T/burn.err"
rc=$?
stop_collector || not_ok "collector exit status" "$(tail -5 "$T/collector.log")"
check "wl_burn runs traced" "exit $rc: $(head -c 300 "$T/burn.err")" [ $rc = 0 ]

# cpu_cases: one line per case, "ok<TAB>NAME" or "not ok<TAB>NAME<TAB>WHY".
cpu_cases() {
	"$PY" - "$DB" "$WLOG" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
MS = 1000000
truth = {}  # pid -> (how, ns)
for l in open(sys.argv[2]):
    f = l.rstrip("\n").split(",")
    if f[0] == "R":
        truth[int(f[1])] = (f[2], int(f[3]))
view = db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'process_cpu'").fetchone()[0]
rows = {}
for pid, end, proc_id in db.execute("SELECT pid, end_ns, proc_id FROM processes"):
    if view:
        cpu, user, sys_, final, read = db.execute(
            "SELECT cpu_ns, user_ns, sys_ns, final, read_ns FROM process_cpu WHERE proc_id = ?",
            (proc_id,)).fetchone()
    else:
        cpu, read = db.execute(
            "SELECT sum(c.cpu_ns), max(c.ts_ns) FROM cpu_time c WHERE c.proc_id = ?1 AND"
            " c.ts_ns = (SELECT max(ts_ns) FROM cpu_time d WHERE d.proc_id = ?1"
            " AND d.tid = c.tid)", (proc_id,)).fetchone()
        user = sys_ = final = None
    rows[pid] = (cpu, user, sys_, final, read, end)

def case(name, why):
    print("ok\t%s" % name if not why else "not ok\t%s\t%s" % (name, why))

def ms(ns):
    return "%.1f ms" % (ns / MS) if ns is not None else "none"

exited = [p for p in truth if truth[p][0] in ("exit", "_exit")]
killed = [p for p in truth if truth[p][0] == "kill"]
case("6 children recorded, each with its truth", "" if len(truth) == 6 and
     all(p in rows for p in truth) else "truth %r, processes %r" % (truth, sorted(rows)))
bad = []
for p in exited:
    cpu, user, sys_, final, read, end = rows.get(p, (None,) * 6)
    t = truth[p][1]
    if cpu is None or not t - 10 * MS <= cpu <= t + MS:
        bad.append("pid %d (%s): %s stored, %s by wait4 (%s)" % (
            p, truth[p][0], ms(cpu), ms(t), "short by " + ms(t - cpu) if cpu else "none"))
case("a child that exits: its CPU time within 10 ms of its parent's wait4 (%d children)"
     % len(exited), "; ".join(bad))
bad = []
for p in exited:
    cpu, user, sys_, final, read, end = rows.get(p, (None,) * 6)
    if final != 1 or user is None or sys_ is None or abs(user + sys_ - cpu) > 5 * MS:
        bad.append("pid %d: final %r, user %s + system %s against %s" % (
            p, final, ms(user), ms(sys_), ms(cpu)))
case("a child that exits: its reading final, user + system its total", "; ".join(bad))
bad = []
for p in killed:
    cpu, user, sys_, final, read, end = rows.get(p, (None,) * 6)
    t = truth[p][1]
    if final != 0 or (cpu is not None and cpu > t + MS) or user is not None or \
            (read is not None and read > end):
        bad.append("pid %d: final %r, %s stored (%s by wait4), read %s before its end" % (
            p, final, ms(cpu), ms(t), ms(end - read) if read is not None else "never"))
case("a child killed: not final, its figure at most the truth, read before its end",
     "; ".join(bad))
parent = [p for p in rows if p not in truth]
case("the parent, which exits: final", "" if len(parent) == 1 and
     rows[parent[0]][3] == 1 and rows[parent[0]][0] > 0 else "rows %r" %
     [rows[p] for p in parent])
PY
}
cpu_cases > "$T/cases" 2>&1 || not_ok "the checks ran" "$(tail -5 "$T/cases")"
while IFS=$'\t' read -r st name why; do
	if [ "$st" = ok ]; then ok "$name"; else not_ok "$name" "$why"; fi
done < "$T/cases"

# -- a store of schema 13: no exit readings, no view ---------------------------------------
cp "$DB" "$T/old.db"
sqlite3 "$T/old.db" "DROP VIEW process_cpu; ALTER TABLE processes DROP COLUMN exit_cpu_ns;
	ALTER TABLE processes DROP COLUMN exit_user_ns; ALTER TABLE processes DROP COLUMN exit_sys_ns;
	UPDATE meta SET value = '13' WHERE key = 'schema_version'" 2> "$T/old.err"
"$SHIMMER" summary --format json "$T/old.db" > "$T/old.json" 2>> "$T/old.err" &&
	"$SHIMMER" bottlenecks "$T/old.db" > /dev/null 2>> "$T/old.err"
rc=$?
check "a store of schema 13: summary and bottlenecks read it" \
	"exit $rc: $(head -5 "$T/old.err")" holds '[ $rc = 0 ] && [ -s "$T/old.json" ]'
finish
