#!/usr/bin/python3
"""Causal scaled dot-product attention in PyTorch (1.13 has no fused CPU
kernel: softmax(q k^T / sqrt(Dh) + causal mask) v, PyTorch's math path), timed
side by side with tmem's fused op (bench/bench_memory.cpp BM_attention).

Shapes: q, k, v [B=1, H=4, T, Dh=64] for T = 1024 and 4096. One iteration =
forward, then torch.autograd.backward(out, grad) for a fixed output
gradient (gradients of q, k and v). Run with Debian's PyTorch:
  /usr/bin/python3 bench/peer/attention_peer.py
Prints milliseconds per iteration (median of --reps timed runs).
"""
import math

import torch

from peer_common import median_time, parse_args, report


def attention(q, k, v, mask):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1) @ v


def main():
    args = parse_args(__doc__.split("\n")[0], reps=10, warmup=2)
    g = torch.Generator().manual_seed(0)
    B, H, Dh = 1, 4, 64
    for T in (1024, 4096):
        q, k, v = ((torch.rand(B, H, T, Dh, generator=g) * 2 - 1).requires_grad_() for _ in range(3))
        go = torch.rand(B, H, T, Dh, generator=g) * 2 - 1
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)

        def step():
            for t in (q, k, v):
                t.grad = None
            torch.autograd.backward(attention(q, k, v, mask), go)

        ms = median_time(step, args.reps, args.warmup, 1e3)
        print(f"causal attention B={B} H={H} T={T} Dh={Dh} forward+backward: {ms:.1f} ms/iter")
        report(f"attention/T:{T}", ms)


if __name__ == "__main__":
    main()
