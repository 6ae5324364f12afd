#!/bin/bash
# In `all` mode one heap call in 8 per thread, on average, is timed: the
# summary's Timed column and the statistics over it.  The calls to time
# must be a fair draw whatever the program's rhythm.  One thread making
# N malloc(SIZE)+free pairs (wl sample) calls malloc and free in strict
# alternation: every 8th call was always a free, so the free was timed
# N/4 times and the worker's malloc never (the summary's malloc mean came
# from a few start-up calls of another thread).  Each function must have
# about N/8 timed calls (a random gap of 1 to 15 calls: bounds far wider
# than its spread, far narrower than N/4 or 0).
. "$(dirname "$0")/lib.sh"
need "$SHIM" "$SHIMMERD" "$WL"

N=40000 SIZE=200
DB=$T/store.db
WLOG=$T/wl.log
start_collector "$DB" || { not_ok "collector starts"; finish; }
SHIMMER_MALLOC=all traced "$WL" sample $N $SIZE
rc=$?
check "workload exits 0" "exit status $rc" [ $rc = 0 ]
check "collector exits 0 on SIGTERM" "see collector log" stop_collector

"$SHIMMER" summary "$DB" --format csv > "$T/summary.csv" 2> "$T/summary.err"
# pid,rank,event,count,bytes,total_ns,mean_ns,stddev_ns,min_ns,max_ns,timed,...
for fn in malloc free; do
	got=$(awk -F, -v fn=$fn '$3 == fn { print $4, $11 }' "$T/summary.csv")
	read -r count timed <<< "$got"
	check "$fn: every call counted" "count '$count', want at least $N" \
		holds '[ "${count:-0}" -ge $N ]'
	check "$fn: about 1 call in 8 timed (count/8 = $((${count:-0} / 8)))" \
		"timed '$timed' of '$count'" \
		holds '[ "${timed:-0}" -ge $((N / 12)) ] && [ "${timed:-0}" -le $((N / 6)) ]'
done
finish
