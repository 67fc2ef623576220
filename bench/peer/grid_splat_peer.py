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
import torch
import torch.nn.functional as F

from peer_common import median_time, parse_args, report


def splat(content, mu, sigma, D, H, W):
    zs = torch.linspace(-1, 1, D, device=mu.device)
    ys = torch.linspace(-1, 1, H, device=mu.device)
    xs = torch.linspace(-1, 1, W, device=mu.device)
    dx = (xs[None, :] - mu[:, 0:1]) ** 2  # [B, W]
    dy = (ys[None, :] - mu[:, 1:2]) ** 2  # [B, H]
    dz = (zs[None, :] - mu[:, 2:3]) ** 2  # [B, D]
    d2 = dz[:, :, None, None] + dy[:, None, :, None] + dx[:, None, None, :]  # [B, D, H, W]
    den = 2 * sigma * sigma + 1e-6
    w = torch.exp(-d2 / den[:, None, None, None])
    return content[:, :, None, None, None] * w[:, None]


def main():
    args = parse_args(__doc__.split("\n")[0], reps=200, warmup=20)
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

        us = median_time(read, args.reps, args.warmup, 1e6)
        print(f"grid_sample B={B} C={C} {G}^3 one point per item forward+backward: {us:.1f} us/iter")
        report(f"grid_sample/forward_backward/C:{C}/grid:{G}", us * 1e-3)
        us = median_time(write, args.reps, args.warmup, 1e6)
        print(f"gaussian_splat B={B} C={C} {G}^3 forward+backward: {us:.1f} us/iter")
        report(f"gaussian_splat/forward_backward/C:{C}/grid:{G}", us * 1e-3)


if __name__ == "__main__":
    main()
