"""Per-operation cost of tracing on the GPU machine: tight loops of small
PyTorch ops that launch one kernel each, so the CPU's launch path is all
that is timed.  Prints one JSON line: median ns per op of each loop.

  python3 bench/gpu_ops.py [--ops N] [--chunks K] [--profile]

--profile runs the loops under torch.profiler with CUDA activities, for
comparison with the same loops under `shimmer run`.
"""
import argparse
import contextlib
import json
import statistics
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, default=2000)
    ap.add_argument("--chunks", type=int, default=15)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
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
            per = []
            for _ in range(args.chunks):
                t0 = time.perf_counter_ns()
                for _ in range(args.ops):
                    op()
                torch.cuda.synchronize()
                per.append((time.perf_counter_ns() - t0) / args.ops)
            res[name] = round(statistics.median(per), 1)
    print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
