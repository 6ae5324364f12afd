"""Does a kernel's GPU time depend on how long the GPU sat idle before it?

Launches torch._foreach_sqrt over the small transformer's parameters (the
kernel that torch.profiler and shimmer disagree on in train.py) after
controlled idle gaps, and once queued behind a busy kernel.  Run it under
`shimmer run` and under torch.profiler (--profile FILE); then
`gap_probe.py --report DB PROF` prints the median kernel time per case for both.
"""
import argparse
import json
import sqlite3
import statistics
import time

CASES = ["queued", "after_sleep", "idle_10us", "idle_100us", "idle_300us", "idle_1000us"]
SLEEP_CYCLES = 200000  # torch.cuda._sleep: a GPU spin of ~0.1 ms that leaves the caches alone
REPS = 40


def run(profile, events):
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
    order, timed = [], []
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
            if events and case in ("queued", "after_sleep"):
                ev = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                ev[0].record()
                torch._foreach_sqrt(sq)
                ev[1].record()
                timed.append((case, ev))
            else:
                torch._foreach_sqrt(sq)
            order.append(case)
    torch.cuda.synchronize()
    if prof is not None:
        prof.__exit__(None, None, None)
        durs = sorted((ev.time_range.start, ev.time_range.elapsed_us() * 1000)
                      for ev in prof.events()
                      if ev.device_type == torch.autograd.DeviceType.CUDA and "Sqrt" in ev.name)
        json.dump({"order": order, "ns": [d for _, d in durs]}, open(profile, "w"))
    ev_ns = {}
    for case, ev in timed:
        ev_ns.setdefault(case, []).append(ev[0].elapsed_time(ev[1]) * 1e6)
    print(json.dumps({"order": order, "events_ns": {c: statistics.median(v)
                                                     for c, v in ev_ns.items()}}), flush=True)


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
    ap.add_argument("--events", action="store_true",
                    help="also time the queued cases with CUDA events (a bare run)")
    args = ap.parse_args()
    if args.report:
        report(*args.report)
    else:
        run(args.profile, args.events)
