#!/bin/bash
# No collector listening: the traced program behaves exactly as untraced
# (same stdout, same exit status) and the shim says so in exactly one line
# on stderr.
. "$(dirname "$0")/lib.sh"
need "$SHIM" "$WL"

WLOG=/dev/null
"$WL" simple 3 4096 5 > "$T/out0" 2> "$T/err0"
rc0=$?
LD_PRELOAD=$SHIM SHIMMER_SOCKET=$T/no-such-socket SHIMMER_MALLOC=all \
	"$WL" simple 3 4096 5 > "$T/out1" 2> "$T/err1"
rc1=$?
check "exit status unchanged" "untraced $rc0, traced $rc1" [ $rc0 = 5 -a $rc1 = 5 ]
check "stdout unchanged" "$(diff "$T/out0" "$T/out1")" cmp -s "$T/out0" "$T/out1"
extra=$(grep -vxF -f "$T/err0" "$T/err1" | wc -l)
added=$(($(wc -l < "$T/err1") - $(wc -l < "$T/err0")))
check "exactly one warning line on stderr" "stderr was: $(cat "$T/err1")" [ "$extra" = 1 -a "$added" = 1 ]
finish
