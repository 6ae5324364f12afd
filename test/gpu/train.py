"""A small transformer training loop on synthetic data, for shimmer's GPU checks.

Fixed seed and step count; NVTX ranges around forward, backward and the
optimizer step.  At the end it prints one line of JSON with PyTorch's own
allocator counters, the oracle shimmer's cudaMalloc figures must equal.
"""
import argparse
import json
import time

import torch
import torch.nn as nn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=1000)
    args = ap.parse_args()

    torch.manual_seed(0)
    dev = torch.device("cuda")
    emb = nn.Embedding(args.vocab, args.dim)
    layer = nn.TransformerEncoderLayer(args.dim, nhead=8, dim_feedforward=4 * args.dim,
                                       batch_first=True)
    model = nn.Sequential(emb, nn.TransformerEncoder(layer, args.layers),
                          nn.Linear(args.dim, args.vocab)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator(device="cpu").manual_seed(1)
    data = torch.randint(0, args.vocab, (args.steps, args.batch, args.seq), generator=gen)

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for step in range(args.steps):
        x = data[step].to(dev, non_blocking=True)
        torch.cuda.nvtx.range_push("step")
        torch.cuda.nvtx.range_push("forward")
        out = model(x)
        loss = loss_fn(out.view(-1, args.vocab), x.view(-1))
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_push("backward")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_push("optimizer")
        opt.step()
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0

    stats = torch.cuda.memory_stats()
    print(json.dumps({
        "steps": args.steps,
        "loss": round(loss.item(), 4),
        "loop_s": round(wall, 4),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "num_device_alloc": stats["num_device_alloc"],
        "num_device_free": stats["num_device_free"],
    }), flush=True)


if __name__ == "__main__":
    main()
