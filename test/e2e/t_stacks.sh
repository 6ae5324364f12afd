#!/bin/bash
# The shim's table of distinct native call stacks (49,152 a process): a
# program with 2^15 distinct call paths gets every stack and no stderr
# line; one with 2^16 fills the table, says so in one line, and exactly
# the allocations of the call paths that found no room are "(no stack)"
# (each path allocates once, so 65,536 - 49,152 of them), while counts and
# bytes stay exact.
#
# The shim counts those refused captures in its event region; the store
# has them as a drops row 'stack_full' (not a lost event), equal to the
# 16,384 paths that found no room, also when the process is SIGKILLed
# after them.  Every command that names call sites then says so in one
# line per process (on stderr where stdout is a flame graph's input), and
# none does for the 2^15 run or for a run with
# SHIMMER_STACKS=off (where every allocation is "(no stack)" too, for
# another reason).  compare --fail-if site_peak is not evaluated where the
# refused allocations hold bytes at the peak.  The Python stacks' table
# (98,304) the same way: 2^17 Python call paths give pystack_full.
# (manystacks.c, the native workload; the Python one is below.)
. "$(dirname "$0")/lib.sh"
MANY=$O/test/e2e/manystacks
need "$SHIM" "$SHIMMERD" "$SHIMMER" "$MANY"

LINE="stack captures were refused because the shim's stack table was full: those allocations are shown as (no stack)"
full=49152

# refused DB: the store's refused native and Python stack captures, and
# whether any drop row counts as lost
refused() {
	sq "$1" "SELECT coalesce(sum(CASE WHEN reason = 'stack_full' THEN events END), 0),
		coalesce(sum(CASE WHEN reason = 'pystack_full' THEN events END), 0),
		coalesce(sum(CASE WHEN reason NOT IN ('stack_full', 'pystack_full') THEN events END), 0)
		FROM drops WHERE proc_id = 1" 2>&1
}

# says NAME DB WANT: each command that names call sites prints the line
# (WANT 1, with the count N=$4) or does not (WANT 0): in its table, JSON,
# CSV (a column; compare: a row), and on stderr beside folded lines and
# speedscope files, which stay clean
says() {
	local name=$1 db=$2 want=$3 n=${4:-} c out bad=
	for c in leaks peak temporary allocations summary; do
		out=$("$SHIMMER" $c "$db" 2>&1)
		if [ "$want" = 1 ]; then
			[ "$(grep -c "WARNING: $n $LINE" <<< "$out")" = 1 ] || bad="$bad $c"
		else
			! grep -q "stack captures were refused" <<< "$out" || bad="$bad $c"
		fi
		# JSON says the count too (0 when none)
		out=$("$SHIMMER" $c "$db" --format json 2>&1)
		grep -q "\"stack_captures_refused\":${n:-0}," <<< "$out" || bad="$bad $c(json)"
		# CSV in a column beside complete, on every row (leaks has none
		# where nothing leaked: its header then); the call site stays
		# the last column where it was (docs/usage.md)
		[ $c = summary ] && continue
		"$SHIMMER" $c "$db" --format csv > "$T/says.csv" 2>&1
		awk -F, -v n="${n:-0}" -v c=$c 'NR == 1 { for (i = 1; i <= NF; i++) {
				if ($i == "complete") done = i
				if ($i == "stack_captures_refused") k = i
				if ($i == "python_stack_captures_refused") py = i }
				if (k != done + 1 || py != k + 1 || (c != "leaks" && $NF != "frame")) bad = 1 }
			NR > 1 && ($k != n || $py != 0) { bad = 1 }
			END { exit bad || !k || !py || (NR < 2 && c != "leaks") }' "$T/says.csv" ||
			bad="$bad $c(csv)"
	done
	# compare's CSV: a row of its own, as the events lost have, against
	# the 2^15 run (none refused)
	out=$("$SHIMMER" compare "$T/m15.db" "$db" --format csv 2>&1)
	grep -q "^[0-9]*,[0-9]*,process,stacks refused (native),count,0,${n:-0},${n:-0}," <<< "$out" &&
		grep -q "^[0-9]*,[0-9]*,process,stacks refused (Python),count,0,0,0," <<< "$out" ||
		bad="$bad compare(csv)"
	# folded lines and speedscope (flame-graph input): stdout holds
	# nothing else, the line goes to stderr once (the weights that read
	# heap sites; gpu-time reads launches)
	for c in "leaks --format folded" "leaks --format folded --all-allocations" \
		"peak --format folded" "export --format folded" "export --format folded --weight leaked" \
		"export --format folded --weight peak" "export --format speedscope" \
		"export --format speedscope --weight all"; do
		"$SHIMMER" $c "$db" > "$T/says.out" 2> "$T/says.err"
		if [ "$want" = 1 ]; then
			[ "$(grep -c "^shimmer: warning: pid [0-9]* (proc 1): $n $LINE" "$T/says.err")" = 1 ] ||
				bad="$bad '$c'(stderr)"
		else
			! grep -q "stack captures were refused" "$T/says.err" || bad="$bad '$c'(stderr)"
		fi
		case $c in
		*speedscope*) python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$T/says.out" ;;
		*) ! grep -qv '^pid [0-9]*;[^ ].* [0-9][0-9]*$' "$T/says.out" ;;
		esac || bad="$bad '$c'(stdout: $(head -c 200 "$T/says.out"))"
	done
	"$SHIMMER" report "$db" -o "$T/r.html" > /dev/null 2>&1 || bad="$bad report(exit)"
	if [ "$want" = 1 ]; then
		grep -q "stacks-refused\">pid [0-9]*[^<]*: WARNING: $n $LINE" "$T/r.html" ||
			bad="$bad report"
	else
		! grep -q "stack captures were refused" "$T/r.html" || bad="$bad report"
	fi
	check "$name" "commands that got it wrong:$bad" test -z "$bad"
}

for bits in 15 16; do
	db=$T/m$bits.db
	SHIMMER_MALLOC=all "$SHIMMER" run --db "$db" -- "$MANY" $bits > /dev/null 2> "$T/m$bits.err"
	rc=$?
	check "$bits bits: runs traced" "exit $rc: $(head -3 "$T/m$bits.err")" [ "$rc" = 0 ]
	paths=$((1 << bits))
	# manystacks' leaf() allocates 24 bytes once per path
	got=$(sq "$db" "SELECT count(*), coalesce(sum(h.allocs), 0),
		coalesce(sum(CASE WHEN h.stack_id = 0 THEN h.allocs END), 0)
		FROM heap_sites h WHERE h.alloc_bytes = 24 * h.allocs AND h.proc_id = 1" 2>&1)
	lines=$(grep -c "table of distinct call stacks is full" "$T/m$bits.err")
	if [ $bits = 15 ]; then
		check "$bits bits: each of $paths paths its own stack, none without" "sites allocs nostack: $got" \
			test "$got" = "$paths|$paths|0"
		check "$bits bits: no stderr line" "$(cat "$T/m$bits.err")" test "$lines" = 0
		check "$bits bits: the store records no refused capture" "stack_full pystack_full lost: $(refused "$db")" \
			test "$(refused "$db")" = "0|0|0"
		says "$bits bits: no command says the table was full" "$db" 0
	else
		stacks=$(sq "$db" "SELECT count(*) FROM stacks WHERE proc_id = 1")
		check "$bits bits: the table holds $full stacks" "stacks: $stacks" test "$stacks" = $full
		# the program allocates nowhere else: every stack is a path's
		check "$bits bits: the $((paths - full)) paths that found no room are (no stack), counts exact" \
			"sites allocs nostack: $got" test "$got" = "$((full + 1))|$paths|$((paths - full))"
		check "$bits bits: one stderr line says the table is full" "$(cat "$T/m$bits.err")" \
			test "$lines" = 1
		# one refused capture per allocation without a stack, of any size
		nostack=$(sq "$db" "SELECT coalesce(sum(allocs), 0) FROM heap_sites
			WHERE proc_id = 1 AND stack_id = 0")
		check "$bits bits: the store records $((paths - full)) refused captures, as many as (no stack) allocations, none lost" \
			"stack_full pystack_full lost: $(refused "$db"); (no stack) allocations $nostack" \
			test "$(refused "$db")|$nostack" = "$((paths - full))|0|0|$((paths - full))"
		says "$bits bits: each command says $((paths - full)) captures were refused" "$db" 1 \
			$((paths - full))
	fi
done

# compare: the line under the process whose table was full.  site_peak,
# which pairs sites by name, is evaluated where no byte at the peak lacks
# its site (manystacks frees each block at once: its peak is one block of
# the first path), and not evaluated (exit 1), never ok or FAIL, where
# some do (keep: every block is live at the peak, 16,384 of them (no stack))
# Which blocks are live at the peak is the run's: one block of the first
# path here, but under ASan another (no stack) block is live with it, and
# then not evaluating is the answer; peak's own rows say which applies.
out=$("$SHIMMER" compare "$T/m15.db" "$T/m16.db" --fail-if 'site_peak>+1KiB' 2>&1)
rc=$?
unsited=$("$SHIMMER" peak "$T/m16.db" --format csv | awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "bytes") b = i }
	$3 == "host" && $NF == "(no stack)" { s += $b } END { print s + 0 }')
if [ "$unsited" = 0 ]; then
	want_rc=0 want_fail_if='^ok: site_peak>+1KiB'
else
	want_rc=1 want_fail_if='site_peak>+1KiB: the shim.s stack table was full in B'
fi
check "compare: the line under B's process only; site_peak evaluated iff no byte at the peak lacks its site ($unsited)" \
	"exit $rc: $out" \
	holds '[ $rc = $want_rc ] && [ "$(grep -c "stack captures were refused" <<< "$out")" = 1 ] &&
	grep -A1 "^  b: pid" <<< "$out" | grep -q "^    WARNING: 16384 $LINE" &&
	grep -q "$want_fail_if" <<< "$out"'
out=$("$SHIMMER" compare "$T/m15.db" "$T/m15.db" --fail-if 'site_peak>+1KiB' 2>&1)
rc=$?
check "compare: the 2^15 run against itself: no line, site_peak evaluated" "exit $rc: $out" \
	holds '[ $rc = 0 ] && ! grep -q "stack captures were refused" <<< "$out" &&
	grep -q "^ok: site_peak>+1KiB" <<< "$out"'
for bits in 15 16; do
	SHIMMER_MALLOC=all "$SHIMMER" run --db "$T/k$bits.db" -- "$MANY" $bits keep > /dev/null \
		2> "$T/k$bits.err"
done
for ab in "k15 k16 B" "k16 k15 A"; do
	read -r a b side <<< "$ab"
	out=$("$SHIMMER" compare "$T/$a.db" "$T/$b.db" --fail-if 'site_peak>+1KiB' 2>&1)
	rc=$?
	check "compare: 16384 blocks (no stack) at the peak in $side: site_peak not evaluated (exit 1)" \
		"exit $rc: $out" \
		holds '[ $rc = 1 ] && [ "$(grep -c "WARNING: 16384 $LINE" <<< "$out")" = 1 ] &&
		grep -q "site_peak>+1KiB: the shim.s stack table was full in $side" <<< "$out" &&
		grep -q "^not evaluated: site_peak>+1KiB" <<< "$out" && ! grep -q "^ok: " <<< "$out" &&
		! grep -q "^FAIL: " <<< "$out"'
done

# The memory findings that name call sites (memory_growth, heap_churn) say
# in their coverage that captures were refused, in the text and JSON of
# bottlenecks and in the report's findings, exactly when some were: keep
# makes memory_growth (leaf's live bytes rise), churn makes heap_churn
# (main's loop, stored before the table fills), each with 2^15 paths (the
# finding, no sentence) and 2^16 (the sentence, with the store's count).
# findings_say NAME DB KIND: bottlenecks and the report on DB have one KIND
# finding, whose coverage has the sentence with DB's stack_full count, and
# no other line of theirs says captures were refused; with none refused,
# none says it.
findings_say() {
	local name=$1 db=$2 kind=$3 n got
	n=$(sq "$db" "SELECT coalesce(sum(events), 0) FROM drops WHERE proc_id = 1
		AND reason = 'stack_full'" 2>&1)
	"$SHIMMER" bottlenecks "$db" > "$T/$name.txt" 2>&1
	"$SHIMMER" bottlenecks "$db" --format json > "$T/$name.json" 2>&1
	"$SHIMMER" report "$db" -o "$T/$name.html" > /dev/null 2>&1
	got=$(python3 - "$T/$name" "$kind" "$([ "$n" = 0 ] || echo "$n $LINE")" <<'EOF_PY'
import html, json, re, sys
base, kind, want = sys.argv[1:]
bad = []

def judge(where, covs, rest):
    """covs: the coverage of each KIND finding; rest: all else said."""
    if len(covs) != 1:
        bad.append("%s: %d %s findings" % (where, len(covs), kind))
    elif want and want not in " ".join(covs[0].split()):
        bad.append("%s: the coverage lacks the sentence: %s" % (where, covs[0]))
    said = sum(c.count("captures were refused") for c in covs) + rest.count("captures were refused")
    if said != (1 if want else 0) * len(covs):
        bad.append("%s: says captures were refused %d times" % (where, said))

text = open(base + ".txt").read()
covs, rest = [], ""
for block in re.split(r"\n(?=\[(?:HIGH|MEDIUM|LOW)\] )", text):
    m = re.search(r"\n  coverage  (.*?)\n  advice ", block, re.S)
    if re.match(r"\[\w+\] %s:" % kind, block) and m:
        covs.append(m.group(1))
        block = block.replace(m.group(1), "")
    rest += block
judge("text", covs, rest)
d = json.load(open(base + ".json"))
mine = [x for x in d["findings"] if x["kind"] == kind]
judge("json", [x["coverage"] for x in mine],
      json.dumps([x for x in d["findings"] if x["kind"] != kind] + [d["withheld"]]) +
      json.dumps([dict(x, coverage="") for x in mine]))
page = open(base + ".html").read()
sec = re.search(r'<section id="findings">.*?</section>', page, re.S)
covs = re.findall(r'<div class="finding" data-kind="%s".*?<dt>coverage</dt><dd>(.*?)</dd>' % kind,
                  sec.group(0) if sec else "", re.S)
judge("report", [html.unescape(c) for c in covs],
      re.sub(r"<dt>coverage</dt><dd>.*?</dd>", "",
             html.unescape(sec.group(0)) if sec else "", flags=re.S))
print("; ".join(bad))
EOF_PY
)
	check "$name" "stack_full $n: ${got:-no output}; $(head -c 600 "$T/$name.txt")" test -z "$got"
}
findings_say "memory_growth, 2^15 paths: the finding, no word of refused captures" "$T/k15.db" \
	memory_growth
findings_say "memory_growth, 2^16 paths: its coverage says 16384 captures were refused" \
	"$T/k16.db" memory_growth
# (under ThreadSanitizer the traced loop runs under the rule's 100,000
# allocations a second, as in t_bottlenecks)
if ldd "$SHIMMERD" 2> /dev/null | grep -q libtsan; then
	ok "heap_churn: its coverage says captures were refused iff they were # SKIP ThreadSanitizer build: the traced loop runs under the rule's 100,000 allocations a second"
else
	for bits in 15 16; do
		SHIMMER_MALLOC=all "$SHIMMER" run --db "$T/c$bits.db" -- "$MANY" $bits churn \
			> /dev/null 2> "$T/c$bits.err"
	done
	findings_say "heap_churn, 2^15 paths: the finding, no word of refused captures" "$T/c15.db" \
		heap_churn
	findings_say "heap_churn, 2^16 paths: its coverage says the store's count of refused captures" \
		"$T/c16.db" heap_churn
fi

# Killed after the table filled: the count is in the region, not in a
# message at exit.
db=$T/kill.db
SHIMMER_MALLOC=all "$SHIMMER" run --db "$db" -- "$MANY" 16 kill > /dev/null 2> "$T/kill.err"
end=$(sq "$db" "SELECT end_reason FROM processes WHERE proc_id = 1" 2>&1)
check "SIGKILLed after the table filled: the 16384 refused captures are stored" \
	"end $end; stack_full pystack_full lost: $(refused "$db")" \
	test "$end|$(refused "$db")" = "signal|16384|0|0"

# The Python stacks' table (98,304 a process): 2^17 distinct Python call
# paths, each allocating once through ctypes from leaf(), in all mode.
# Each allocation of leaf() is named by its Python line, or, its capture
# refused, by its native site: the store's pystack_full is exactly the
# paths that found no room, and the commands say so.
if ! PY=$(python_exe); then
	ok "Python stacks: the refused captures stored and said # SKIP no python3"
else
	cat > "$T/many.py" <<'EOF_PY'
import ctypes, sys
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
malloc, free = libc.malloc, libc.free


def leaf():
    free(malloc(24))


# Two functions alike but for their names (as in manystacks.c): each
# level's frame says which bit it took.
def zero(b, k):
    if k == 0:
        leaf()
    elif b & 1:
        one(b >> 1, k - 1)
    else:
        zero(b >> 1, k - 1)


def one(b, k):
    if k == 0:
        leaf()
    elif b & 1:
        one(b >> 1, k - 1)
    else:
        zero(b >> 1, k - 1)


for b in range(1 << int(sys.argv[1])):
    zero(b, int(sys.argv[1]))
EOF_PY
	db=$T/py.db
	SHIMMER_MALLOC=all "$SHIMMER" run --db "$db" -- "$PY" "$T/many.py" 17 > /dev/null 2> "$T/py.err"
	named=$("$SHIMMER" allocations "$db" --format json 2>&1 | python3 -c '
import json, sys
for p in json.load(sys.stdin)["processes"]:
    for s in p["sites"]:
        if s["frame"] == "leaf (many.py:10)":
            print(p["proc_id"], s["count"], p["python_stack_captures_refused"])')
	read -r proc leafs said <<< "$named"
	got=$(sq "$db" "SELECT coalesce(sum(events), 0) FROM drops WHERE proc_id = ${proc:-0}
		AND reason = 'pystack_full'" 2>&1)
	check "Python stacks: pystack_full is the $((1 << 17)) paths less those named by leaf's line" \
		"proc leaf-line refused(json): $named; pystack_full $got; $(head -3 "$T/py.err")" \
		holds '[ -n "$leafs" ] && [ "$got" = $(((1 << 17) - ${leafs:-0})) ] && [ "$said" = "$got" ] &&
		[ "$got" -ge $(((1 << 17) - 98304)) ]'
	out=$("$SHIMMER" leaks "$db" 2>&1; "$SHIMMER" allocations "$db" 2>&1)
	check "Python stacks: leaks and allocations say it in one line each" \
		"$(grep -B1 -A1 "stack captures" <<< "$out" | head -20)" \
		test "$(grep -c "WARNING: $got Python stack captures were refused because the shim's Python stack table was full: those allocations are shown at their native site, not their Python line" <<< "$out")" = 2
fi

# Stacks off: every allocation is (no stack), and no command blames a
# full table.
db=$T/off.db
SHIMMER_STACKS=off SHIMMER_MALLOC=all "$SHIMMER" run --db "$db" -- "$MANY" 16 > /dev/null \
	2> "$T/off.err"
got=$(sq "$db" "SELECT coalesce(sum(allocs), 0) FROM heap_sites WHERE proc_id = 1 AND stack_id = 0
	AND alloc_bytes = 24 * allocs" 2>&1)
check "stacks off: every path's allocation is (no stack), no refused capture recorded" \
	"(no stack) allocations $got; stack_full pystack_full lost: $(refused "$db")" \
	test "$got|$(refused "$db")" = "65536|0|0|0"
says "stacks off: no command says the table was full" "$db" 0

# GPU time by launching line (export --weight gpu-time, folded and
# speedscope): manystacks launches 4 kernels (grid 100 to 103) from
# before(), whose stack is stored, then fills the table with its paths
# and launches 12 (grid 200 to 211) from after(), whose captures the full
# table refuses at 2^16: those are (no stack).  stderr says the refusal
# once, with the share of the process's GPU time on its (no stack) lines:
# the stored durations of the kernels of grid 200 on over all of its
# kernels (the workload's own mark of which launches came after), to the
# ns; stdout holds the lines alone.  At 2^15 nothing is refused:
# after()'s line holds those kernels, and nothing is said.
CUDART=$O/test/fake_cudart/libcudart.so.13
LAUNCHED="the launches among them are shown as (no stack) unless a Python line names them; their GPU time is exact"
for bits in 15 16; do
	db=$T/g$bits.db
	SHIMMER_GPU=all FAKE_CUDA_DELAY_NS=1000000 CUDA_INJECTION64_PATH=$SHIM SHIMMER_MALLOC=all \
		"$SHIMMER" run --db "$db" -- "$MANY" $bits launch "$CUDART" > /dev/null 2> "$T/g$bits.err"
	rc=$?
	read -r after all n nk <<< "$(sq -separator ' ' "$db" "SELECT
		coalesce(sum(CASE WHEN k.grid_x >= 200 THEN k.end_ns - k.start_ns END), 0),
		coalesce(sum(k.end_ns - k.start_ns), 0), (SELECT coalesce(sum(events), 0) FROM drops
		WHERE proc_id = 1 AND reason = 'stack_full'), count(*) FROM kernels k" 2>&1)"
	"$SHIMMER" export "$db" --format folded --weight gpu-time > "$T/g$bits.folded" 2> "$T/g$bits.ferr"
	frc=$?
	nostack=$(awk '/^pid [0-9]*;cuda:0;\(no stack\) / { s += $NF } END { print s + 0 }' "$T/g$bits.folded")
	afterline=$(awk '/;after \(manystacks.c:[0-9]*\);launch_one \(manystacks.c:[0-9]*\) [0-9]*$/ { s += $NF }
		END { print s + 0 }' "$T/g$bits.folded")
	share=$(awk -v a="$after" -v t="$all" 'BEGIN { printf "%.1f", (t > 0 ? 100 * a / t : 0) }')
	want="^shimmer: warning: pid [0-9]* (proc 1): $n stack captures were refused because the shim's stack table was full: $LAUNCHED; those the native table refused are among its (no stack) lines: $share% of its GPU time ($after of $all ns)\$"
	if [ $bits = 16 ]; then
		check "gpu-time, 2^16 paths: after()'s launches (no stack), one stderr line with their share of the GPU time" \
			"run $rc, export $frc; $nk kernels, after/all $after/$all ns, stack_full $n; (no stack) line $nostack, after() line $afterline; stderr: $(cat "$T/g$bits.ferr")" \
			holds '[ $rc = 0 ] && [ $frc = 0 ] && [ "$nk" = 16 ] && [ "$after" -gt 0 ] && [ "$all" -gt "$after" ] &&
			[ "$nostack" = "$after" ] && [ "$afterline" = 0 ] &&
			[ "$(grep -c "captures were refused" "$T/g$bits.ferr")" = 1 ] &&
			grep -q "$want" "$T/g$bits.ferr" &&
			! grep -qv "^pid [0-9]*;cuda:0;[^ ].* [0-9][0-9]*$" "$T/g$bits.folded"'
		for w in gpu-time all; do
			"$SHIMMER" export "$db" --format speedscope --weight $w > "$T/g.ss" 2> "$T/g.sserr"
			check "gpu-time, 2^16 paths: speedscope --weight $w says it once too" \
				"exit $?; stderr: $(cat "$T/g.sserr")" \
				holds '[ "$(grep -c "$LAUNCHED" "$T/g.sserr")" = 1 ] && grep -q "$want" "$T/g.sserr" &&
				python3 -c "import json, sys; json.load(open(sys.argv[1]))" "$T/g.ss"'
		done
	else
		check "gpu-time, 2^15 paths: after()'s launches on their line, nothing said" \
			"run $rc, export $frc; $nk kernels, after/all $after/$all ns, stack_full $n; (no stack) line $nostack, after() line $afterline; stderr: $(cat "$T/g$bits.ferr")" \
			holds '[ $rc = 0 ] && [ $frc = 0 ] && [ "$n" = 0 ] && [ "$nk" = 16 ] &&
			[ "$nostack" = 0 ] && [ "$afterline" = "$after" ] && [ ! -s "$T/g$bits.ferr" ]'
	fi
done
finish
