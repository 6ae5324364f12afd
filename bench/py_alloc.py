"""CPU ns per bytearray(600) (one malloc and one free: above pymalloc's
512 bytes) at a Python stack depth, measured inside the process with
process_time: what the shim's reading of the Python frames costs a host
allocation.  Usage: python3 bench/py_alloc.py N DEPTH (bench/py-heap-bench)."""
import sys
import time

N = int(sys.argv[1])
D = int(sys.argv[2])


def loop():
    t = time.process_time()
    for _ in range(N):
        bytearray(600)
    return time.process_time() - t


def deep(d):
    return deep(d - 1) if d > 0 else loop()


deep(2)  # warm
print("%.1f" % (deep(D) / N * 1e9))
