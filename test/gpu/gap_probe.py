"""One kernel in fixed conditions, for comparing the tools that time it.

Launches torch._foreach_sqrt over the small transformer's parameters (AdamW's
kernel that torch.profiler and shimmer once disagreed on in train.py) queued
behind a busy matmul, after a GPU sleep kernel, and after set idle gaps.  Run
it under `shimmer run`, under torch.profiler (--profile FILE) and under ncu;
test/gpu/check.py compares the three per case (medians_of, ncu_medians), and
`gap_probe.py --report DB PROF` prints shimmer's and torch.profiler's.
"""
import argparse
import json
import sqlite3
import statistics
import time

CASES = ["queued", "after_sleep", "idle_10us", "idle_100us", "idle_300us", "idle_1000us"]
SLEEP_CYCLES = 200000  # torch.cuda._sleep: a GPU spin of ~0.1 ms that leaves the caches alone
REPS = 40


def run(profile):
    import torch
    import torch.nn as nn
    torch.manual_seed(0)
    dev = torch.device("cuda")
    layer = nn.TransformerEncoderLayer(256, nhead=8, dim_feedforward=1024, batch_first=True)
    model = nn.Sequential(nn.Embedding(1000, 256), nn.TransformerEncoder(layer, 4),
                          nn.Linear(256, 1000)).to(dev)
    sq = [p.detach().abs() + 1 for p in model.parameters()]
    big = torch.randn(3072, 3072, device=dev)
    prof = None
    if profile:
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
        prof.__enter__()
    order = []
    for _ in range(REPS):
        for case in CASES:
            torch.cuda.synchronize()
            if case == "queued":
                torch.mm(big, big)  # keeps the GPU busy while the next is queued
            elif case == "after_sleep":
                torch.cuda._sleep(SLEEP_CYCLES)
            else:
                until = time.perf_counter_ns() + int(case[5:-2]) * 1000
                while time.perf_counter_ns() < until:
                    pass
            torch._foreach_sqrt(sq)
            order.append(case)
    torch.cuda.synchronize()
    if prof is not None:
        prof.__exit__(None, None, None)
        durs = sorted((ev.time_range.start, ev.time_range.elapsed_us() * 1000)
                      for ev in prof.events()
                      if ev.device_type == torch.autograd.DeviceType.CUDA and "Sqrt" in ev.name)
        json.dump({"order": order, "ns": [d for _, d in durs]}, open(profile, "w"))
    print(json.dumps({"order": order}), flush=True)


def medians(order, ns):
    by = {}
    for case, d in zip(order, ns):
        by.setdefault(case, []).append(d)
    return {c: statistics.median(v) for c, v in by.items()}


def medians_of(db_paths, prof_paths):
    """Median kernel time per case over several runs: shimmer's (from its
    stores), torch.profiler's, the number of kernels each saw, and the
    number launched."""
    order, ours, theirs = [], [], []
    for db_path, prof_path in zip(db_paths, prof_paths):
        prof = json.load(open(prof_path))
        db = sqlite3.connect(db_path)
        seen = [r[0] for r in db.execute("select end_ns - start_ns from kernels_named "
                                         "where name like '%Sqrt%' order by start_ns")]
        if len(seen) != len(prof["order"]) or len(prof["ns"]) != len(prof["order"]):
            raise ValueError(f"{db_path}: {len(seen)} kernels, {prof_path}: "
                             f"{len(prof['ns'])}, launched {len(prof['order'])}")
        order += prof["order"]
        ours += seen
        theirs += prof["ns"]
    return medians(order, ours), medians(order, theirs), len(ours), len(theirs), len(order)


def ncu_medians(csv_path, order):
    """Median gpu__time_duration per case from `ncu --csv` of a bare run."""
    import csv
    # the probe's own stdout is mixed in: keep ncu's header and rows
    rows = [r for r in csv.reader(open(csv_path))
            if len(r) > 10 and (r[0] == "ID" or r[0].isdigit())]
    if not rows or rows[0][0] != "ID":
        raise ValueError(f"{csv_path}: no ncu table")
    value, unit = rows[0].index("Metric Value"), rows[0].index("Metric Unit")
    scale = {"ns": 1, "nsecond": 1, "us": 1e3, "usecond": 1e3}
    ns = [float(r[value].replace(",", "")) * scale[r[unit]] for r in rows[1:]]
    if len(ns) != len(order):
        raise ValueError(f"{csv_path}: {len(ns)} kernels, launched {len(order)}")
    return medians(order, ns)


def report(db_path, prof_path):
    a, b, n_a, n_b, n = medians_of([db_path], [prof_path])
    print(f"{'foreach_sqrt kernel':<20} {'shimmer ns':>11} {'torch ns':>11} {'diff':>7}")
    for c in CASES:
        print(f"{c:<20} {a.get(c, 0):>11.0f} {b.get(c, 0):>11.0f} "
              f"{(a.get(c, 0) / b.get(c, 1) - 1) * 100:>+6.2f}%")
    print(f"kernels: shimmer {n_a}, torch.profiler {n_b}, launched {n}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", metavar="FILE")
    ap.add_argument("--report", nargs=2, metavar=("DB", "PROF"))
    args = ap.parse_args()
    if args.report:
        report(*args.report)
    else:
        run(args.profile)
