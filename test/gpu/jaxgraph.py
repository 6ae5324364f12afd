"""A JAX training loop (a jitted MLP step: loss, gradients, SGD update) for
shimmer's CUDA graph checks (test/gpu/graphs.sh): XLA runs parts of a
compiled step as command buffers, i.e. CUDA graphs launched with the
driver's cuGraphLaunch, with no runtime call for shimmer to hook.

Prints one line of JSON at the end: the steps, the loop's wall time.
"""
import argparse
import json
import time

import jax
import jax.numpy as jnp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--layers", type=int, default=6)
    a = ap.parse_args()

    key = jax.random.PRNGKey(0)
    keys = jax.random.split(key, a.layers + 2)
    params = [jax.random.normal(k, (a.dim, a.dim)) * 0.02 for k in keys[:a.layers]]
    x = jax.random.normal(keys[-2], (128, a.dim))
    y = jax.random.normal(keys[-1], (128, a.dim))

    def loss(ps, x, y):
        h = x
        for w in ps:
            h = jax.nn.relu(h @ w)
        return jnp.mean((h - y) ** 2)

    @jax.jit
    def step(ps, x, y):
        g = jax.grad(loss)(ps, x, y)
        return [w - 1e-3 * gw for w, gw in zip(ps, g)]

    params = step(params, x, y)
    jax.block_until_ready(params)
    t0 = time.perf_counter()
    for _ in range(a.steps):
        params = step(params, x, y)
    jax.block_until_ready(params)
    print(json.dumps({"steps": a.steps, "loop_s": time.perf_counter() - t0}))


if __name__ == "__main__":
    main()
