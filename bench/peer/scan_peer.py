#!/usr/bin/python3
"""Mamba's selective scan in PyTorch (a Python loop over T, as the Mamba
repository's reference selective_scan_ref), timed side by side with
tmem's fused selective_scan (bench/bench_memory.cpp BM_selective_scan).

Shapes: u, delta [B, T, E], A [E, N], Bm, Cm [B, T, N], D [E], h0 [B, E, N]
for (B, T, E, N) = (64, 96, 64, 32) and (8, 1024, 256, 16). One iteration =
forward, then torch.autograd.backward((y, h_out), (gy, gh)): every input
gradient. Run with Debian's PyTorch:
  /usr/bin/python3 bench/peer/scan_peer.py
Prints milliseconds per iteration (median of --reps timed runs).
"""
import torch

from peer_common import median_time, parse_args, report


def selective_scan(u, delta, A, Bm, Cm, D, h0):
    """h[t] = exp(delta A) h[t-1] + delta Bm u, y = sum_n Cm h + D u (Mamba,
    Algorithm 2). The loop of Mamba's selective_scan_ref, with the per-step
    inputs taken by unbind (whose backward stacks once) and exp(delta A)
    formed per step: indexing [B, T, E, N] tensors per step, as the reference
    does, costs a zero-filled [B, T, E, N] gradient per step in backward
    (92 s for the first shape on one thread)."""
    h, ys = h0, []
    for u_t, d_t, b_t, c_t in zip(u.unbind(1), delta.unbind(1), Bm.unbind(1), Cm.unbind(1)):
        h = torch.exp(d_t.unsqueeze(-1) * A) * h + (d_t * u_t).unsqueeze(-1) * b_t.unsqueeze(1)
        ys.append((h * c_t.unsqueeze(1)).sum(-1))
    return torch.stack(ys, 1) + D * u, h


def main():
    args = parse_args(__doc__.split("\n")[0], reps=10, warmup=2)
    g = torch.Generator().manual_seed(0)

    def rand(*shape, lo=-1.0, hi=1.0):
        return (torch.rand(*shape, generator=g) * (hi - lo) + lo).requires_grad_()

    for B, T, E, N in ((64, 96, 64, 32), (8, 1024, 256, 16)):
        inputs = (rand(B, T, E), rand(B, T, E, lo=0.01, hi=0.2), rand(E, N, lo=-2, hi=-0.1), rand(B, T, N),
                  rand(B, T, N), rand(E), rand(B, E, N))
        gy, gh = torch.rand(B, T, E, generator=g) * 2 - 1, torch.rand(B, E, N, generator=g) * 2 - 1

        def step():
            for t in inputs:
                t.grad = None
            torch.autograd.backward(selective_scan(*inputs), (gy, gh))

        ms = median_time(step, args.reps, args.warmup, 1e3)
        print(f"selective scan B={B} T={T} E={E} N={N} forward+backward: {ms:.1f} ms/iter")
        report(f"selective_scan/B:{B}/T:{T}/E:{E}/N:{N}", ms)


if __name__ == "__main__":
    main()
