"""A small transformer training loop on synthetic data, for shimmer's GPU checks.

Fixed seed and step count; NVTX ranges "step" > "forward", "backward",
"optimizer".  The first --warmup steps are not timed.  At the end it prints
one line of JSON with the timed loop's wall time and PyTorch's own allocator
counters (the oracle for shimmer's cudaMalloc figures).

--ab BLOCK (under `shimmer run`) alternates blocks of BLOCK timed steps
recorded and paused, and adds to the JSON the mean time per step of each:
the cost of recording read inside one process, free of the speed
differences between processes (a paused block still pays the hooks' branch).

--item reads the loss on the CPU at every step (loss.item(), a
synchronization: the line marked ITEM below), the pattern shimmer
bottlenecks' sync rule names.  --tiny N replaces the model's step with N
tiny element-wise operations on a small tensor (launch-bound: each kernel
runs shorter than the call that launches it).

--profile FILE runs all steps under torch.profiler with CUDA activities and
writes, per kernel name, the count and total GPU time it saw (the oracle for
shimmer's kernel table; a separate process, since only one CUPTI client
can own a process).  With --profile-wait W --profile-active A, only the
steps W+1 to W+A (counting from 1, warm-up included) are profiled
(torch.profiler's schedule: wait=W, warmup=0, active=A), the steps shimmer
records with SHIMMER_START=after-range:step:W and
SHIMMER_STOP=after-range:step:W+A; --sync-steps ends every step with a
synchronize, so that no kernel of one step runs in the next.

--ddp (under torchrun) trains with DistributedDataParallel over NCCL, one
GPU per rank (LOCAL_RANK).
"""
import argparse
import contextlib
import ctypes
import json
import os
import statistics
import time

import torch
import torch.nn as nn


def kernel_table(prof):
    """Per kernel name: [count, total ns], from torch.profiler's CUDA events."""
    table = {}
    events = prof.events()
    # CPU-side annotations (record_function, optimizer steps) also show up
    # on the GPU timeline as user annotations: they are not kernels.
    cpu_names = {ev.name for ev in events if ev.device_type != torch.autograd.DeviceType.CUDA}
    for ev in events:
        if ev.device_type != torch.autograd.DeviceType.CUDA:
            continue
        name = ev.name
        if (name in cpu_names or getattr(ev, "is_user_annotation", False)
                or name.startswith("Memcpy") or name.startswith("Memset")):
            continue
        row = table.setdefault(name, [0, 0])
        row[0] += 1
        row[1] += int(round(ev.time_range.elapsed_us() * 1000))
    return table


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=1000)
    ap.add_argument("--profile", metavar="FILE")
    ap.add_argument("--item", action="store_true",
                    help="read the loss on the CPU every step (loss.item(): a sync)")
    ap.add_argument("--tiny", type=int, default=0, metavar="N",
                    help="each step: N tiny element-wise ops instead of the model")
    ap.add_argument("--profile-wait", type=int, default=None, metavar="W")
    ap.add_argument("--profile-active", type=int, default=None, metavar="A")
    ap.add_argument("--sync-steps", action="store_true")
    ap.add_argument("--ddp", action="store_true")
    ap.add_argument("--slow-rank", type=int, default=-1, metavar="R",
                    help="the process of rank R ($RANK, as torchrun sets it) sleeps 30 ms "
                         "in every step: a planted straggler for summary --by-rank")
    ap.add_argument("--ab", type=int, metavar="BLOCK",
                    help="under the shim: alternate blocks of BLOCK timed steps recorded and "
                         "paused (shimmer_pause/resume) and report the mean time per step "
                         "of each, so the cost of recording is read inside one process")
    ap.add_argument("--profile-cpu", action="store_true",
                    help="profile CPU ops too (the usual torch.profiler setting, and the "
                         "overhead benchmark's); kernels alone perturb the GPU timeline less")
    args = ap.parse_args()

    torch.manual_seed(0)
    dev = torch.device("cuda")
    if args.ddp:
        import torch.distributed as dist
        dev = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", device_id=dev)
    emb = nn.Embedding(args.vocab, args.dim)
    layer = nn.TransformerEncoderLayer(args.dim, nhead=8, dim_feedforward=4 * args.dim,
                                       batch_first=True)
    model = nn.Sequential(emb, nn.TransformerEncoder(layer, args.layers),
                          nn.Linear(args.dim, args.vocab)).to(dev)
    if args.ddp:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev.index])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator(device="cpu").manual_seed(1)
    total = args.warmup + args.steps
    data = torch.randint(0, args.vocab, (total, args.batch, args.seq), generator=gen)
    nvtx = torch.cuda.nvtx

    prof = None
    ctx = contextlib.nullcontext()
    if args.profile:
        act = torch.profiler.ProfilerActivity
        sched = None
        if args.profile_wait is not None:
            sched = torch.profiler.schedule(wait=args.profile_wait, warmup=0,
                                            active=args.profile_active, repeat=1)
        prof = torch.profiler.profile(
            activities=[act.CPU, act.CUDA] if args.profile_cpu else [act.CUDA],
            schedule=sched)
        ctx = prof

    shim = ctypes.CDLL(None)
    if args.ab is not None and not hasattr(shim, "shimmer_pause"):
        ap.error("--ab needs the shim (run it under shimmer run)")
    if args.ab is not None and (args.ab <= 0 or args.steps <= 0 or args.steps % (2 * args.ab)):
        ap.error("--ab BLOCK: BLOCK > 0, --steps a positive multiple of 2 x BLOCK")
    blocks = {"recorded": [], "paused": []}
    cpu = {"recorded": [], "paused": []}  # this thread's CPU time, s/step
    pairs = []  # (recorded, paused): blocks 2k and 2k+1, one of each

    def ab_block(step):
        """At a block boundary: the block that ended, timed; the next one
        recorded or paused (alternating which comes first, so drift weighs
        on both)."""
        nonlocal t_block, c_block, state
        i = (step - args.warmup) // args.ab
        # also before the first block: the warm-up's queued work is no block's
        torch.cuda.synchronize()
        if step > args.warmup:
            blocks[state].append((time.perf_counter() - t_block) / args.ab)
            cpu[state].append((time.thread_time() - c_block) / args.ab)
            if i % 2 == 0:
                pairs.append((blocks["recorded"][-1], blocks["paused"][-1]))
        if step == total:
            shim.shimmer_resume()
            return
        state = "paused" if (i % 2) ^ ((i // 2) % 2) else "recorded"
        (shim.shimmer_pause if state == "paused" else shim.shimmer_resume)()
        t_block, c_block = time.perf_counter(), time.thread_time()

    slow = args.slow_rank >= 0 and int(os.environ.get("RANK", "-1")) == args.slow_rank
    t_block, c_block, state = 0.0, 0.0, "recorded"
    step_starts = []
    losses = []
    small = torch.ones(1024, device=dev)
    loss = torch.zeros((), device=dev)
    torch.cuda.synchronize()
    with ctx:
        for step in range(total):
            if args.ab and step >= args.warmup and (step - args.warmup) % args.ab == 0:
                ab_block(step)
            if step == args.warmup:
                torch.cuda.synchronize()
                t0 = time.perf_counter()
            step_starts.append(time.perf_counter())
            x = data[step].to(dev, non_blocking=True)
            nvtx.range_push("step")
            if args.tiny:
                for _ in range(args.tiny):
                    small.mul_(1.0001).add_(0.0001)  # TINY
                nvtx.range_pop()
                continue
            nvtx.range_push("forward")
            out = model(x)
            loss = loss_fn(out.view(-1, args.vocab), x.view(-1))
            nvtx.range_pop()
            nvtx.range_push("backward")
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nvtx.range_pop()
            nvtx.range_push("optimizer")
            opt.step()
            nvtx.range_pop()
            if args.item:
                losses.append(loss.item())  # ITEM
            if args.sync_steps:
                torch.cuda.synchronize()
            if slow:
                torch.cuda.synchronize()
                time.sleep(0.03)
            nvtx.range_pop()
            if prof is not None and args.profile_wait is not None:
                prof.step()
        if args.ab:
            ab_block(total)
        torch.cuda.synchronize()
        loop_s = time.perf_counter() - t0

    if prof is not None:
        with open(args.profile, "w") as f:
            json.dump(kernel_table(prof), f)

    stats = torch.cuda.memory_stats()
    ab = {}
    if args.ab:
        # Means, not medians: under GPU sampling only some recorded blocks
        # hold a window, and a median would leave those out.
        rec, pau = statistics.fmean(blocks["recorded"]), statistics.fmean(blocks["paused"])
        # Neighbouring blocks see the same machine: the spread of their
        # differences gives the figure's uncertainty (95%, normal).
        diff = [r - p for r, p in pairs]
        half = 1.96 * statistics.stdev(diff) / len(diff) ** 0.5 if len(diff) > 1 else float("nan")
        ab = {"ab": {"block": args.ab, "blocks": len(blocks["recorded"]) + len(blocks["paused"]),
                     "recorded_s_per_step": round(rec, 7), "paused_s_per_step": round(pau, 7),
                     "added": round(rec / pau - 1, 5), "added_ci95": round(half / pau, 5),
                     "cpu_added": round(statistics.fmean(cpu["recorded"]) /
                                        statistics.fmean(cpu["paused"]) - 1, 5)}}
    # Timed steps, each from its start to the next one's (the last timed
    # step has no next): quartiles in ms, a figure slow moments move less.
    steps_ms = sorted((b - a) * 1e3 for a, b in zip(step_starts[args.warmup:],
                                                     step_starts[args.warmup + 1:]))
    q = statistics.quantiles(steps_ms, n=4) if len(steps_ms) > 1 else []
    if args.ddp:
        dist.destroy_process_group()
    print(json.dumps({
        **ab,
        "step_ms_quartiles": [round(v, 4) for v in q],
        "steps": args.steps,
        "warmup": args.warmup,
        "loss": round(loss.item(), 4),
        "loop_s": round(loop_s, 5),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "num_device_alloc": stats["num_device_alloc"],
        "num_device_free": stats["num_device_free"],
    }), flush=True)


if __name__ == "__main__":
    main()
