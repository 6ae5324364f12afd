"""A training loop that leaks GPU memory, or not, for shimmer's leak checks.

--keep graph appends `loss` (with its autograd graph, which holds the step's
activations) to a list every step: device memory grows steadily.  --keep
item appends `loss.item()`: after the caching allocator's warm-up, memory
stays flat.  Each step runs inside an NVTX range "step".  At the end it
prints one line of JSON with PyTorch's own view: allocated and reserved
bytes after every step, their least-squares slopes per step after the
warm-up, and max_memory_reserved.
"""
import argparse
import json

import torch
import torch.nn as nn


def slope(ys):
    n = len(ys)
    xs = range(n)
    mx, my = (n - 1) / 2, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keep", choices=("graph", "item"), required=True)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=6)
    args = ap.parse_args()

    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                          nn.Linear(4096, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(512, 1024, device=dev)
    y = torch.randint(0, 10, (512,), device=dev)
    kept = []
    allocated, reserved = [], []
    for _ in range(args.steps):
        torch.cuda.nvtx.range_push("step")
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward(retain_graph=args.keep == "graph")
        opt.step()
        kept.append(loss if args.keep == "graph" else loss.item())
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        allocated.append(torch.cuda.memory_allocated())
        reserved.append(torch.cuda.memory_reserved())
    w = args.warmup
    print(json.dumps({
        "keep": args.keep,
        "steps": args.steps,
        "warmup": w,
        "allocated_slope": slope(allocated[w:]),
        "reserved_slope": slope(reserved[w:]),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "reserved_end": reserved[-1],
        "allocated": allocated,
        "reserved": reserved,
    }), flush=True)


if __name__ == "__main__":
    main()
