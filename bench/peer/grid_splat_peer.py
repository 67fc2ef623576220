#!/usr/bin/python3
"""grid_sample (the memory read) and the Gaussian splat (the memory write)
composed in PyTorch, timed side by side with tmem's ops (bench/bench_memory.cpp).

grid_sample: F.grid_sample on a 5-D input [B, C, D, H, W] at one point per
batch item (grid [B, 1, 1, 1, 3]), trilinear, border padding,
align_corners=True; gradients for the input and the grid.

gaussian_splat: vol[b, c, z, y, x] = content[b, c] * exp(-|p - mu[b]|^2 /
(2 sigma[b]^2 + 1e-6)), p the cell centres of linspace(-1, 1) per axis
(x -> W, y -> H, z -> D); gradients for content, mu and sigma.

One iteration = forward, then torch.autograd.backward(out, grad) for a fixed
output gradient. Run with Debian's PyTorch:
  /usr/bin/python3 bench/peer/grid_splat_peer.py
Prints microseconds per iteration (median of --reps timed runs).
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F


def splat(content, mu, sigma, D, H, W):
    zs = torch.linspace(-1, 1, D)
    ys = torch.linspace(-1, 1, H)
    xs = torch.linspace(-1, 1, W)
    dx = (xs[None, :] - mu[:, 0:1]) ** 2  # [B, W]
    dy = (ys[None, :] - mu[:, 1:2]) ** 2  # [B, H]
    dz = (zs[None, :] - mu[:, 2:3]) ** 2  # [B, D]
    d2 = dz[:, :, None, None] + dy[:, None, :, None] + dx[:, None, None, :]  # [B, D, H, W]
    den = 2 * sigma * sigma + 1e-6
    w = torch.exp(-d2 / den[:, None, None, None])
    return content[:, :, None, None, None] * w[:, None]


def timed(fn, reps, warmup):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    g = torch.Generator().manual_seed(0)
    B = 128
    for C, G in ((16, 6), (32, 8)):
        vol = (torch.rand(B, C, G, G, G, generator=g) * 2 - 1).requires_grad_()
        grid = (torch.rand(B, 1, 1, 1, 3, generator=g) * 2 - 1).requires_grad_()
        gm = torch.rand(B, C, 1, 1, 1, generator=g) * 2 - 1

        def read():
            vol.grad = None
            grid.grad = None
            m = F.grid_sample(vol, grid, mode="bilinear", padding_mode="border",
                              align_corners=True)
            torch.autograd.backward(m, gm)

        content = (torch.rand(B, C, generator=g) * 2 - 1).requires_grad_()
        mu = (torch.rand(B, 3, generator=g) * 1.8 - 0.9).requires_grad_()
        sigma = (torch.rand(B, generator=g) * 0.4 + 0.1).requires_grad_()
        gv = torch.rand(B, C, G, G, G, generator=g) * 2 - 1

        def write():
            for t in (content, mu, sigma):
                t.grad = None
            v = splat(content, mu, sigma, G, G, G)
            torch.autograd.backward(v, gv)

        print(f"grid_sample B={B} C={C} {G}^3 one point per item forward+backward: "
              f"{timed(read, args.reps, args.warmup):.1f} us/iter")
        print(f"gaussian_splat B={B} C={C} {G}^3 forward+backward: "
              f"{timed(write, args.reps, args.warmup):.1f} us/iter")


if __name__ == "__main__":
    main()
