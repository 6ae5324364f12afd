"""Per-operation cost of tracing on the GPU machine: tight loops of small
PyTorch ops that launch one kernel each, so the CPU's launch path is all
that is timed.  Prints one JSON line: median ns per op of each loop.

  python3 bench/gpu_ops.py [--ops N] [--chunks K] [--profile | --ab]

--profile runs the loops under torch.profiler with CUDA activities, for
comparison with the same loops under `shimmer run`.  --ab (under `shimmer
run`) alternates chunks recorded and paused through shimmer_pause() and
shimmer_resume(), and prints for each loop also "LOOP@paused": the cost of
recording split off inside one process, immune to the speed differences
between processes (the paused chunks still pay the hooks' branch).  Run it
with SHIMMER_GPU=all: under GPU sampling a resume opens no window, so the
recorded chunks would mostly go unrecorded.
"""
import argparse
import contextlib
import ctypes
import json
import statistics
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, default=2000)
    ap.add_argument("--chunks", type=int, default=15)
    how = ap.add_mutually_exclusive_group()
    how.add_argument("--profile", action="store_true")
    how.add_argument("--ab", action="store_true")
    args = ap.parse_args()
    shim = ctypes.CDLL(None)
    if args.ab and not hasattr(shim, "shimmer_pause"):
        ap.error("--ab needs the shim (run it under shimmer run)")
    dev = torch.device("cuda")
    a = torch.ones(1024, device=dev)
    b = torch.ones(1024, device=dev)
    m = torch.ones(64, 64, device=dev)
    loops = {
        # one kernel through the runtime API, no allocation
        "add_": lambda: a.add_(1e-9),
        # a kernel plus a caching-allocator block and a Python tensor object
        "add": lambda: torch.add(a, b),
        # cuBLAS: a kernel launched through the driver API
        "mm": lambda: torch.mm(m, m),
    }
    ctx = contextlib.nullcontext()
    if args.profile:
        ctx = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
    res = {}
    with ctx:
        t_end = time.perf_counter() + 1.0  # let the CPU's clock settle
        while time.perf_counter() < t_end:
            a.add_(1e-9)
        torch.cuda.synchronize()
        for name, op in loops.items():
            for _ in range(args.ops):  # warm up
                op()
            torch.cuda.synchronize()
            per = {name: [], name + "@paused": []}
            for i in range(args.chunks * (2 if args.ab else 1)):
                key = name
                if args.ab:
                    # alternate which comes first, so drift weighs on both
                    paused = (i % 2) ^ ((i // 2) % 2)
                    (shim.shimmer_pause if paused else shim.shimmer_resume)()
                    key += "@paused" if paused else ""
                    for _ in range(args.ops // 10):
                        op()
                    torch.cuda.synchronize()
                t0 = time.perf_counter_ns()
                for _ in range(args.ops):
                    op()
                torch.cuda.synchronize()
                per[key].append((time.perf_counter_ns() - t0) / args.ops)
            if args.ab:
                shim.shimmer_resume()
            for key, v in per.items():
                if v:
                    res[key] = round(statistics.median(v), 1)
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
