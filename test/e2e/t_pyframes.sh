#!/bin/bash
# t_pyframes: Python frames of CUDA allocations, read without the GIL.
# The workload below calls cudaMalloc through ctypes, which releases the
# GIL around the call as PyTorch's bindings do around op dispatch; each
# allocation has its own size and the workload logs, per size, the frames
# it expects innermost first (qualified function and the line of each
# call, from inspect).  The store's python_frames_named must show them, for
# every CPython among 3.11, 3.12 and 3.13 found here (on PATH or under
# pyenv's root; one not installed is a SKIP case, counted as skipped): the
# main thread, a thread started by threading, a generator's frame and a
# non-ASCII name.
#
# Every allocation must be stored, so the workload runs lossless: in the
# default lossy mode the heap events of the interpreter's start
# (SHIMMER_MALLOC=all) can fill the main thread's ring faster than a slow
# collector (the ASan build) drains it, and the shim then drops, by design,
# the CUDA records that carry the frames.  A 4 KiB ring makes the ring full
# at the allocations in every run, not once in a while: the shim must wait
# there, and the drops table must stay empty.
. "$(dirname "$0")/lib.sh"

CUDART=$O/test/fake_cudart/libcudart.so.13
need "$SHIM" "$SHIMMERD" "$CUDART"

cat > "$T/wl.py" <<'PY'
import ctypes, inspect, sys, threading

ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
cuda = ctypes.CDLL(None)  # the global scope: the shim's cudaMalloc first
log = open(sys.argv[2], "w")
size = 1 << 20


def line(next=1):
    return inspect.currentframe().f_back.f_lineno + next


def alloc(chain):
    global size
    size += 1
    p = ctypes.c_void_p()
    chain = [("alloc", line())] + chain
    rc = cuda.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(size))
    assert rc == 0, rc
    cuda.cudaFree(p)
    for level, (func, ln) in enumerate(chain):
        log.write("%d,%d,%s,%s,%d\n" % (size, level, __file__, func, ln))


class Model:
    def step(self, chain):
        chain = [("Model.step", line())] + chain
        alloc(chain)


def gen(chain):
    chain = [("gen", line())] + chain
    yield alloc(chain)


def größe(chain):
    chain = [("größe", line())] + chain
    alloc(chain)


def worker():
    chain = [("worker", line())]
    alloc(chain)


def main(chain):
    chain = [("main", line())] + chain
    Model().step(chain)
    chain[0] = ("main", line())
    list(gen(chain))
    chain[0] = ("main", line())
    größe(chain)
    t = threading.Thread(target=worker)
    t.start()
    t.join()


def deep(n):
    if n:
        return deep(n - 1)
    p = ctypes.c_void_p()
    assert cuda.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(DEEP)) == 0
    cuda.cudaFree(p)


main([("<module>", line(0))])
DEEP = 3 << 20  # not logged: deeper than the stack depth, 40 frames left out
deep(40)
log.close()
PY

for v in 3.11 3.12 3.13; do
	if ! py=$(python_exe $v); then
		echo "ok - $SCRIPT: python$v # SKIP python$v not found"
		continue
	fi
	DB=$T/py$v.db
	WLOG=$T/py$v.log
	start_collector "$DB" || { not_ok "python$v: collector"; continue; }
	SHIMMER_LOSSLESS=1 SHIMMER_RING_KB=4 \
		traced "$py" "$T/wl.py" "$CUDART" "$T/py$v.exp" > "$T/py$v.out" 2>&1
	rc=$?
	stop_collector || not_ok "python$v: collector exit status"
	check "python$v: workload exits 0" "exit $rc: $(head -5 "$T/py$v.out")" [ "$rc" = 0 ]
	CHECKDB=$T/py$v.check.db
	STORE=$DB
	rm -f "$CHECKDB"
	sq "$CHECKDB" "CREATE TABLE E (size INTEGER, level INTEGER, file TEXT, function TEXT, line INTEGER);" \
		".mode csv" ".import $T/py$v.exp E"
	n=$(q "SELECT count(DISTINCT size) FROM main.E;")
	check "python$v: 4 allocations logged" "logged $n" [ "$n" = 4 ]
	expect_empty "python$v: nothing dropped" "$(q "SELECT 'dropped:', reason, events FROM s.drops;")"
	# Every logged frame at its level; the thread's frames go on into
	# threading's own, the others end at <module>.
	expect_empty "python$v: frames of each allocation, innermost first" "$(q "
CREATE TEMP VIEW got AS SELECT a.size, f.level, f.file, f.function, f.line
	FROM s.allocations a JOIN s.python_frames_named f
	ON f.proc_id = a.proc_id AND f.pystack_id = a.pystack_id
	WHERE a.space = 'device';
SELECT 'missing:', * FROM main.E EXCEPT SELECT 'missing:', * FROM got;
SELECT 'extra:', g.* FROM got g WHERE g.size IN (SELECT size FROM main.E
	WHERE function = '<module>') AND g.level > (SELECT max(level) FROM main.E e
	WHERE e.size = g.size);")"
	# A stack deeper than SHIMMER_STACK_DEPTH (32): its innermost 23
	# frames, the row of those left out (file, function NULL, line 0),
	# its outermost 8; python_frames_named has every row of python_frames
	# (up to schema 11 it lost the row left out).
	expect_empty "python$v: a deep stack, with the frames left out, in python_frames_named" "$(q "
CREATE TEMP VIEW deep AS SELECT f.* FROM s.allocations a JOIN s.python_frames_named f
	ON f.proc_id = a.proc_id AND f.pystack_id = a.pystack_id WHERE a.size = 3 << 20;
SELECT 'frames:', count(*), 'python_frames:', (SELECT count(*) FROM s.allocations a
	JOIN s.python_frames f ON f.proc_id = a.proc_id AND f.pystack_id = a.pystack_id
	WHERE a.size = 3 << 20) FROM deep HAVING count(*) <> 32 OR count(*) <> (SELECT count(*)
	FROM s.allocations a JOIN s.python_frames f ON f.proc_id = a.proc_id
	AND f.pystack_id = a.pystack_id WHERE a.size = 3 << 20);
SELECT 'left out at', level, file, function, line FROM deep
	WHERE (file IS NULL) <> (level = 23) OR (function IS NULL) <> (level = 23)
	OR (level = 23 AND (line <> 0 OR file_id <> 0 OR func_id <> 0));
SELECT 'not deep:', level, function FROM deep WHERE level < 23 AND function <> 'deep'
	OR level = 31 AND function <> '<module>';")"
done

finish
