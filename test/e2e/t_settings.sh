#!/bin/bash
# A careful new user's mistakes (issue 13, item 12):
#  - every SHIMMER_* setting given a value the shim cannot use gets one
#    stderr line naming the variable, the value and what is used instead,
#    and what is used is what the store shows (malloc mode, ring size);
#    good values and empty ones say nothing;
#  - on a machine without an NVIDIA driver, the real CUPTI's bare
#    CUPTI_ERROR_UNKNOWN is said in words: no GPU or driver found;
#  - make without the CUDA toolkit's headers stops with one line naming
#    CUDA_HOME.
. "$(dirname "$0")/lib.sh"
need "$SHIM" "$SHIMMERD" "$WL"

DB=$T/store.db
start_collector "$DB" || { not_ok "collector starts"; finish; }
# VAR=VALUE|what the line must say it uses instead
cases='SHIMMER_MALLOC=al|is not sample, all or off; using sample
SHIMMER_GPU=x|is not sample or all; using sample
SHIMMER_RING_KB=100|is not a power of two; using 128
SHIMMER_RING_KB=abc|is not a number; using 256
SHIMMER_RING_KB=1|is outside [4, 65536]; using 4
SHIMMER_SAMPLE_BYTES=-5|is not a number; using 524288
SHIMMER_SAMPLE_BYTES=0|is outside [1, 1099511627776]; using 1
SHIMMER_MAX_THREADS=5000|is outside [1, 4096]; using 4096
SHIMMER_STACKS=of|is not 1 or 0 (on or off); using 1
SHIMMER_STACK_DEPTH=500|is outside [1, 128]; using 128
SHIMMER_LOSSLESS=maybe|is not 1 or 0 (on or off); using 0
SHIMMER_DEBUG=2|is not 1 or 0 (on or off); using 0
SHIMMER_CUPTI=no way|is not 1 or 0 (on or off); using 1
SHIMMER_GPU_WINDOW_MS=20ms|is not a number; using 20
SHIMMER_GPU_PERIOD_MS=0|is outside [1, 86400000]; using 1
SHIMMER_GPU_DETACH=yes please|is not 1 or 0 (on or off); using 1
SHIMMER_GPU_SYNC=sometimes|is not 1 or 0 (on or off); using 0
SHIMMER_NVTX=-1|is not 1 or 0 (on or off); using 1
SHIMMER_DISABLE=perhaps|is not 1 or 0; using 1'
i=0
while IFS='|' read -r setting says; do
	i=$((i + 1))
	var=${setting%%=*} val=${setting#*=}
	env "$var=$val" LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK \
		"$WL" simple 0 0 0 > "$T/s$i.out" 2> "$T/s$i.err"
	grep -v '^wl: ' "$T/s$i.err" > "$T/s$i.shim"
	# SHIMMER_GPU_PERIOD_MS=1 is not longer than the window: a second line
	[ "$var" = SHIMMER_GPU_PERIOD_MS ] && sed -i '/is not shorter than/d' "$T/s$i.shim"
	check "$setting: one line naming it and what is used" "stderr: $(cat "$T/s$i.shim")" \
		holds '[ "$(wc -l < "$T/s$i.shim")" = 1 ] && grep -qF "shimmer: $var=$val $says" "$T/s$i.shim"'
done <<< "$cases"
for setting in SHIMMER_MALLOC=all SHIMMER_RING_KB=64 SHIMMER_STACKS=off SHIMMER_LOSSLESS=1 \
	SHIMMER_GPU= SHIMMER_CUPTI=0 SHIMMER_DEBUG=0; do
	env "$setting" LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK "$WL" simple 0 0 0 \
		> /dev/null 2> "$T/good.err"
	check "$setting: nothing said" "stderr: $(grep -v '^wl: ' "$T/good.err")" \
		[ -z "$(grep -v '^wl: ' "$T/good.err")" ]
done
check "collector exits 0 on SIGTERM" "see collector log" stop_collector
got=$(sq "$DB" "SELECT malloc_mode FROM processes WHERE argv LIKE '%simple%' ORDER BY proc_id LIMIT 1")
check "SHIMMER_MALLOC=al: traced in sample mode, as the line says" "stored '$got'" [ "$got" = sample ]

# -- no GPU, no driver: the real CUPTI ------------------------------------
cupti=$(ls /usr/local/cuda/lib64/libcupti.so* /usr/local/cuda/extras/CUPTI/lib64/libcupti.so* \
	2>/dev/null | head -1)
if [ -e /proc/driver/nvidia ] || [ -e /dev/nvidiactl ] || [ -e /dev/dxg ]; then
	ok "no driver: said in words # SKIP this machine has an NVIDIA driver"
elif [ -z "$cupti" ]; then
	ok "no driver: said in words # SKIP no libcupti under /usr/local/cuda"
else
	# wl with its fake runtime but without the fake CUPTI beside it, so
	# that the shim loads the toolkit's
	mkdir -p "$T/nogpu/bin" "$T/nogpu/fake_cudart"
	cp "$WL" "$T/nogpu/bin/"
	cp "$O/test/fake_cudart/libcudart.so.13" "$T/nogpu/fake_cudart/"
	DB=$T/nogpu.db
	start_collector "$DB" || { not_ok "collector starts"; finish; }
	SHIMMER_GPU=all CUDA_HOME=/usr/local/cuda LD_PRELOAD=$SHIM SHIMMER_SOCKET=$SOCK \
		"$T/nogpu/bin/wl" simple 1 4096 0 > /dev/null 2> "$T/nogpu.err"
	check "collector exits 0 on SIGTERM" "see collector log" stop_collector
	check "no driver: one line says no GPU or driver was found" "stderr: $(grep -v '^wl: ' "$T/nogpu.err")" \
		holds '[ "$(grep -c '\''^shimmer'\'' "$T/nogpu.err")" = 1 ] && \
		grep -q '\''GPU activity not traced: no GPU or NVIDIA driver found'\'' "$T/nogpu.err"'
	got=$(sq "$DB" "SELECT gpu_status_detail FROM processes" 2>&1)
	check "no driver: the store says so too" "stored: $got" \
		grep -q 'no GPU or NVIDIA driver found' <<< "$got"
fi

# -- building without the CUDA toolkit ------------------------------------
# A user's own make: not a sub-make of the `make -j2 test` that may run this
# (its jobserver, which this script does not pass on, would add make's
# "jobserver unavailable" line to the one checked).
out=$(env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$ROOT" --no-print-directory \
	O="$T/nocuda" CUDA_HOME=/nonexistent 2>&1)
rc=$?
check "make CUDA_HOME=/nonexistent: stops with one line naming CUDA_HOME" "status $rc: $out" \
	holds '[ $rc != 0 ] && [ "$(printf '\''%s\n'\'' "$out" | wc -l)" = 1 ] && grep -q '\''CUDA_HOME'\'' <<< "$out"'
check "make CUDA_HOME=/nonexistent: built nothing" "$(ls "$T/nocuda" 2>&1)" [ ! -e "$T/nocuda" ]
finish
