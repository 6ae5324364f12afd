#!/bin/bash
# No collector listening: the traced program behaves exactly as untraced
# (same stdout, same exit status) and the shim says so in exactly one line
# on stderr.  The same for a collector that takes the connection and
# closes it without reading the events, as one of another wire version
# does: in `all` mode (lossless by default) the program used to wait for
# ring room for ever, reconnecting every 100 ms; in sample mode it ended
# with nothing stored and nothing said.
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

# A listener that reads each connection's first message (the HELLO) and
# closes it, counting connections: what a collector of another wire
# version does (it logs "rejecting a client before HELLO").
cat > "$T/refuse.py" <<'EOF'
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.bind(sys.argv[1])
s.listen(64)
n = 0
while True:
    c, _ = s.accept()
    c.recvmsg(65536, 64)
    c.close()
    n += 1
    with open(sys.argv[2] + ".tmp", "w") as f:
        f.write("%d\n" % n)
    os.replace(sys.argv[2] + ".tmp", sys.argv[2])
EOF
echo 0 > "$T/conns"
python3 "$T/refuse.py" "$T/refuse.sock" "$T/conns" &
refuser=$!
for _ in $(seq 50); do [ -S "$T/refuse.sock" ] && break; sleep 0.1; done
# 200,000 malloc/free pairs: far more records than a ring holds
WLOG=/dev/null "$WL" sample 200000 64 > "$T/out2" 2> "$T/err2"
rc0=$?
for mode in all sample; do
	before=$(cat "$T/conns")
	start=$(date +%s%N)
	timeout 60 env WLOG=/dev/null LD_PRELOAD="$SHIM" SHIMMER_SOCKET="$T/refuse.sock" \
		SHIMMER_MALLOC=$mode "$WL" sample 200000 64 > "$T/out3" 2> "$T/err3"
	rc1=$?
	ms=$((($(date +%s%N) - start) / 1000000))
	conns=$(($(cat "$T/conns") - before))
	check "refused, $mode mode: ends with the untraced exit status (in $ms ms)" \
		"untraced $rc0, traced $rc1 (124: still waiting after 60 s)" [ $rc0 = 0 -a $rc1 = 0 ]
	check "refused, $mode mode: stdout unchanged" "$(diff "$T/out2" "$T/out3")" \
		cmp -s "$T/out2" "$T/out3"
	check "refused, $mode mode: one line on stderr says so" "stderr was: $(head -5 "$T/err3")" \
		test "$(wc -l < "$T/err3")" = 1 -a \
		"$(grep -c 'closed the connection without reading' "$T/err3")" = 1
	# The HELLO, and no reconnect: only the heartbeat tells a refusal
	# from a collector that died before reading, and either is final.
	check "refused, $mode mode: connected once, no reconnecting" "$conns connections" \
		test "$conns" = 1
done
kill $refuser
wait $refuser 2> /dev/null
finish
