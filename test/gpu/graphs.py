"""A training step captured whole in one CUDA graph, replayed, for shimmer's
GPU checks of graph launches (test/gpu/graphs.sh).

The model (an MLP of --layers Linear+ReLU of --dim, MSE loss, SGD) is
warmed up on a side stream, then one step (forward, backward, optimizer)
is captured with torch.cuda.graph, as PyTorch's "whole network capture"
does; the timed loop replays it --steps times inside NVTX ranges "step".
--toggle N pauses recording (shimmer_pause, through ctypes) every N steps
and resumes it N steps later.
--eager runs the same steps without the graph; --pause S sleeps S seconds
between the capture and the first replay (under sampling, CUPTI is then
detached and attached again while the graph exists, never launched).

--profile FILE runs the replays under torch.profiler (CUDA activities) and
writes, per kernel name, the count and total GPU time it saw.  The last
line printed is JSON: the replays made, the loop's wall time.
"""
import argparse
import json
import time

import torch
import torch.nn as nn

from train import kernel_table  # test/gpu/train.py: torch.profiler's kernels by name


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--eager", action="store_true")
    ap.add_argument("--pause", type=float, default=0)
    ap.add_argument("--toggle", type=int, default=0)
    ap.add_argument("--profile")
    a = ap.parse_args()

    torch.manual_seed(0)
    dev = torch.device("cuda")
    layers = []
    for _ in range(a.layers):
        layers += [nn.Linear(a.dim, a.dim), nn.ReLU()]
    model = nn.Sequential(*layers).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = nn.MSELoss()
    x = torch.randn(a.batch, a.dim, device=dev)
    y = torch.randn(a.batch, a.dim, device=dev)

    def step():
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    # warm-up on a side stream, as capture requires
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(s)
    g = None
    if not a.eager:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            step()
    torch.cuda.synchronize()
    if a.pause:
        time.sleep(a.pause)

    lib = None
    if a.toggle:
        import ctypes
        lib = ctypes.CDLL(None)

    def loop():
        for i in range(a.steps):
            if lib is not None and i and i % a.toggle == 0:
                (lib.shimmer_pause if (i // a.toggle) % 2 else lib.shimmer_resume)()
            torch.cuda.nvtx.range_push("step")
            if g is not None:
                g.replay()
            else:
                step()
            torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()

    t0 = time.perf_counter()
    if a.profile:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            loop()
        json.dump(kernel_table(prof), open(a.profile, "w"))
    else:
        loop()
    print(json.dumps({"replays": 0 if a.eager else a.steps, "steps": a.steps,
                      "loop_s": time.perf_counter() - t0}))


if __name__ == "__main__":
    main()
