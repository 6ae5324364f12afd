"""A PyTorch training loop for shimmer attach's GPU check (run-gpu-tests).

It trains a small transformer for --warmup steps untraced, prints "ready"
with its pid and waits for the file GO (the runner attaches meanwhile), then
empties the caching allocator (so the steps that follow must cudaMalloc
again), trains --steps steps at growing batch sizes (new segments), prints
one line of JSON with PyTorch's own allocator counters over those steps (the
cudaMalloc oracle: calls, frees, bytes reserved), and waits for the file
QUIT before exiting, so that the detach happens while it still runs.
"""
import argparse
import json
import os
import time

import torch
import torch.nn as nn


def wait_for(path):
    while not os.path.exists(path):
        time.sleep(0.05)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--go", required=True)
    ap.add_argument("--quit", required=True)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()

    torch.manual_seed(0)
    dev = torch.device("cuda")
    dim, vocab = 256, 1000
    layer = nn.TransformerEncoderLayer(dim, nhead=8, dim_feedforward=4 * dim, batch_first=True)
    model = nn.Sequential(nn.Embedding(vocab, dim), nn.TransformerEncoder(layer, 4),
                          nn.Linear(dim, vocab)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()

    def step(batch):
        x = torch.randint(0, vocab, (batch, 128), device=dev)
        loss = loss_fn(model(x).view(-1, vocab), x.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    for _ in range(args.warmup):
        step(16)
    torch.cuda.synchronize()
    print(json.dumps({"ready": os.getpid()}), flush=True)
    wait_for(args.go)

    # Before empty_cache: its cudaFree calls are made while attached too.
    before = torch.cuda.memory_stats()
    torch.cuda.empty_cache()
    for i in range(args.steps):
        loss = step(16 + 4 * i)
    torch.cuda.synchronize()
    after = torch.cuda.memory_stats()
    print(json.dumps({
        "num_device_alloc": after["num_device_alloc"] - before["num_device_alloc"],
        "num_device_free": after["num_device_free"] - before["num_device_free"],
        "reserved_bytes_allocated": after["reserved_bytes.all.allocated"]
        - before["reserved_bytes.all.allocated"],
        "loss": round(loss.item(), 4),
    }), flush=True)
    wait_for(args.quit)


if __name__ == "__main__":
    main()
