#!/bin/bash
# t_views: the store as users query it (docs/schema.md).  Stores recorded
# from workloads whose truth is known: GPU work through the fakes
# (kernels, copies, syncs, NVTX ranges and a scale of them), the host
# heap in all mode with the rows beside the aggregates
# (SHIMMER_HEAP_ROWS=both), a Python loop, a program whose stacks fill
# the shim's table.  On them:
#  - every SQL example of docs/schema.md and README.md runs, in work
#    linear in the store's size (views_check.py: SQLite instructions
#    counted, not seconds);
#  - what the examples and views give agrees with the workloads' logs,
#    with the rows of the same events, and with what the shimmer commands
#    say of the same store (views_truth.py);
#  - the stores are private files that pass integrity_check, and a store
#    read while the collector writes it is one consistent snapshot.
. "$(dirname "$0")/lib.sh"

CUDART=$O/test/fake_cudart/libcudart.so.13
MANYSTACKS=$O/test/e2e/manystacks
need "$SHIM" "$SHIMMERD" "$SHIMMER" "$WL" "$WL_GPU" "$FAKE_CUPTI" "$CUDART" "$MANYSTACKS"
export SHIMMER_GPU=all
N=4000

# record NAME [VAR=VALUE...] -- CMD...: CMD traced into $T/NAME.db, its
# log in $T/NAME.log; the case fails when it or the collector does.
record() {
	local name=$1 rc
	shift
	local vars=()
	while [ "$1" != -- ]; do vars+=("$1"); shift; done
	shift
	WLOG=$T/$name.log
	start_collector "$T/$name.db" || { not_ok "$name: collector"; return 1; }
	env "${vars[@]}" LD_PRELOAD="$SHIM" SHIMMER_SOCKET="$SOCK" \
		SHIMMER_MALLOC="${SHIMMER_MALLOC:-all}" WL_LOG="$WLOG" "$@" > "$T/$name.out" 2>&1
	rc=$?
	stop_collector || { not_ok "$name: collector exit status"; return 1; }
	[ $rc = 0 ] || { not_ok "$name: exit status $rc" "$(head -5 "$T/$name.out")"; return 1; }
}

py=$(python_exe) || { not_ok "python3 found"; finish; }
cat > "$T/churn.py" <<'PY'
def churn():
    for i in range(20000):
        b = bytearray(100000 + i)
churn()
PY

record gpu SHIMMER_GPU_SYNC=1 CUDA_INJECTION64_PATH="$SHIM" FAKE_CUDA_DELAY_NS=200000 \
	-- "$WL_GPU" kernels
record nvtx CUDA_INJECTION64_PATH="$SHIM" NVTX_INJECTION64_PATH="$SHIM" -- "$WL_GPU" nvtx
record ranges SHIMMER_LOSSLESS=1 SHIMMER_HEAP_ROWS=both CUDA_INJECTION64_PATH="$SHIM" \
	NVTX_INJECTION64_PATH="$SHIM" -- "$WL_GPU" ranges $N
record heap SHIMMER_HEAP_ROWS=both -- "$WL" trace
record sample SHIMMER_MALLOC=sample -- "$WL" trace
record py -- "$py" "$T/churn.py"
record stacks -- "$MANYSTACKS" 16 keep
STORES="gpu nvtx ranges heap sample py stacks"

for s in $STORES; do
	res=$(sq "$T/$s.db" "PRAGMA integrity_check" 2>&1)
	perm=$(stat -c %a "$T/$s.db")
	check "$s: a private store (0600) that passes integrity_check" "mode $perm: $res" \
		holds '[ "$perm" = 600 ] && [ "$res" = ok ]'
done

# What `sqlite3 STORE .schema` shows a user: processes.end_reason's
# comment lists every value docs/schema.md defines (schema/001's comment
# was written before signal, detach and collector_lost: a crash read as
# 'disconnect').
got=$(sq "$T/gpu.db" ".schema processes")
expect_empty ".schema: processes.end_reason's values" "$(for v in exit signal exec disconnect \
	detach rejected shutdown collector_lost; do
	grep -q "'$v'" <<< "$got" || echo "'$v' not in .schema processes"
	grep -q "\`$v\` (" "$ROOT/docs/schema.md" || echo "'$v' not in docs/schema.md"; done)"

out=$(python3 "$ROOT/test/e2e/views_check.py" "$ROOT" $(for s in $STORES; do
	echo "$T/$s.db"; done) 2> "$T/examples.count")
expect_empty "every SQL example of the documentation runs, in linear work" "$out"
read -r nex nst < <(sed 's/[^0-9]\+/ /g' "$T/examples.count")
check "it ran them: $(cat "$T/examples.count")" "$(cat "$T/examples.count")" \
	holds '[ "${nex:-0}" -ge 25 ] && [ "${nst:-0}" = 7 ]'

"$SHIMMER" summary "$T/gpu.db" --format csv > "$T/gpu_summary.csv" 2> "$T/err" &&
	"$SHIMMER" leaks "$T/heap.db" --format json > "$T/heap_leaks.json" 2>> "$T/err" &&
	"$SHIMMER" leaks "$T/stacks.db" --format json > "$T/stacks_leaks.json" 2>> "$T/err" &&
	"$SHIMMER" allocations "$T/py.db" --format csv > "$T/py_allocs.csv" 2>> "$T/err"
check "the commands read the stores" "$(head -3 "$T/err")" [ $? = 0 ]

# stack_frames as the commands render them: wl's _start (crt1.o, no
# DWARF) named without a line; libdw alone gave it main's unit's last row
# ('_start (wl.c:165)').
"$SHIMMER" leaks "$T/heap.db" --format folded > "$T/heap.folded" 2>> "$T/err"
expect_empty "leaks' stacks: _start has no source line" "$(grep -c '_start (' "$T/heap.folded" |
	grep -x 0 | sed 's/^/no _start frame: /'; grep -o '_start ([^)]*:[0-9]*)' "$T/heap.folded" |
	sort -u)"

python3 "$ROOT/test/e2e/views_truth.py" "$ROOT" gpu="$T/gpu.db" gpu_log="$T/gpu.log" \
	gpu_summary="$T/gpu_summary.csv" nvtx="$T/nvtx.db" nvtx_log="$T/nvtx.log" \
	ranges="$T/ranges.db" ranges_n=$N heap="$T/heap.db" heap_leaks="$T/heap_leaks.json" \
	py="$T/py.db" py_allocs="$T/py_allocs.csv" stacks="$T/stacks.db" \
	stacks_leaks="$T/stacks_leaks.json" > "$T/truth.out" 2> "$T/truth.ran"
rc=$?
check "views_truth.py runs" "exit $rc: $(grep -v '^ran ' "$T/truth.ran" | tail -5)" [ $rc = 0 ]
while IFS= read -r c; do
	expect_empty "$c" "$(awk -v c="$c" -F'|' '$1 == c { sub(/^[^|]*\|/, ""); print }' \
		"$T/truth.out")"
done < <(sed -n 's/^ran //p' "$T/truth.ran" | sort -u)
nc=$(grep -c '^ran ' "$T/truth.ran")
check "every check of views_truth.py ran ($nc)" "$(cat "$T/truth.ran")" [ "$nc" -ge 16 ]

# Read while written: a process in all mode for 15 s or more (wl flood:
# 700 rounds of 2000 malloc+free pairs, each round 20 ms apart), read
# every 50 ms, each read one transaction; the collector rewrites the
# aggregates of a live process every 10 s (final = 0), all of them in one
# commit, so every snapshot adds up: heap_sites to heap_totals, heap_sizes
# to the allocations.  And views answer on the live store (no readers'
# indexes).
start_collector "$T/live.db" || { not_ok "live: collector"; finish; }
LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK SHIMMER_MALLOC=all WL_LOG=/dev/null "$WL" flood 700 2000 \
	> /dev/null 2>&1 &
wpid=$!
out=$(python3 - "$T/live.db" "$wpid" <<'PY'
import os, sqlite3, sys, time
db, pid = sys.argv[1], int(sys.argv[2])
reads = snaps = 0
seen = set()
end = time.time() + 120
while time.time() < end:
    try:
        c = sqlite3.connect('file:%s?mode=ro' % db, uri=True, timeout=10)
        c.execute('BEGIN')
        for r in c.execute('''SELECT t.proc_id, t.final, t.allocs, t.peak_bytes,
                (SELECT sum(allocs) FROM heap_sites s WHERE s.proc_id = t.proc_id),
                (SELECT sum(peak_bytes) FROM heap_sites s WHERE s.proc_id = t.proc_id),
                (SELECT sum(count) FROM heap_sizes h WHERE h.proc_id = t.proc_id)
                FROM heap_totals t'''):
            seen.add(r[:3])
            if r[2] != r[4] or r[3] != r[5] or r[2] != r[6]:
                print('snapshot %s: totals allocs %d peak %d, sites %s %s, sizes %s' % (
                    r[:2], r[2], r[3], r[4], r[5], r[6]))
        c.execute('SELECT count(*) FROM kernels_in_ranges').fetchall()
        c.execute('COMMIT')
        c.close()
        reads += 1
    except sqlite3.OperationalError as e:
        print('read %d: %s' % (reads, e))
    try:
        # ended (a zombie until the shell waits for it), or gone
        if open('/proc/%d/stat' % pid).read().rsplit(')', 1)[1].split()[0] == 'Z':
            break
    except OSError:
        break
    time.sleep(0.05)
if not any(s[1] == 0 for s in seen):
    print('no snapshot of the live process read in %d reads' % reads)
PY
)
wait "$wpid"
rc=$?
stop_collector || not_ok "live: collector exit status"
expect_empty "live: every read while the collector writes is one consistent snapshot" \
	"$([ $rc = 0 ] || echo "heap_random exit $rc")$out"

finish
