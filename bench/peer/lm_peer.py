#!/usr/bin/python3
"""tmem's transformer LM training step (bench/bench_lm.cpp: models/lm.h,
method base, MLP hidden 4d, dropout 0) in PyTorch, timed side by side.

Model: token embedding E[V, d] ~ N(0, 0.02^2), learned positions [T, d] ~
N(0, 0.02^2), pre-norm blocks
  x += out(attn(ln1(x)))   (one qkv Linear(d, 3d), causal, scale 1/sqrt(d/heads))
  x += fc2(gelu(fc1(ln2(x))))   (erf GELU)
a final LayerNorm, logits = h E^T (tied, no bias). Linear and LayerNorm keep
PyTorch's default initialisation, which is tmem's.
Step: forward, mean cross-entropy of the next token over B*T positions,
backward, clip_grad_norm_(1.0), AdamW(lr 3e-4, betas (0.9, 0.95), eps 1e-8,
weight decay 0.1 on every parameter), as bench_lm.

  /usr/bin/python3 bench/peer/lm_peer.py [--threads 2] [--seq 256]
prints ms per step (median of --reps after --warmup) and tokens/s, then
RESULT {name: "lm_step/seq:T", ms} for `tmem bench`.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from peer_common import median_time, parse_args, report


class Block(nn.Module):
    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def attention(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        s = q @ k.transpose(-2, -1) / math.sqrt(C // self.heads)
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        a = torch.softmax(s, -1) @ v
        return self.out(a.permute(0, 2, 1, 3).reshape(B, T, C))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class LM(nn.Module):
    def __init__(self, vocab, dim, layers, heads, seq, hidden):
        super().__init__()
        self.tok = nn.Parameter(torch.randn(vocab, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(seq, dim) * 0.02)
        self.blocks = nn.ModuleList(Block(dim, heads, hidden) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)

    def forward(self, tokens):
        x = self.tok[tokens] + self.pos[:tokens.shape[1]]
        for blk in self.blocks:
            x = blk(x)
        return self.ln_f(x) @ self.tok.t()


def add_arguments(ap):
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=16384)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)


def main():
    args = parse_args(__doc__.split("\n")[0], reps=10, warmup=2, add_arguments=add_arguments)
    torch.manual_seed(5)
    B, T, V = args.batch, args.seq, args.vocab
    model = LM(V, args.dim, args.layers, args.heads, T, 4 * args.dim)
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    tokens = torch.randint(V, (B, T + 1))
    inp, target = tokens[:, :T], tokens[:, 1:]

    def step():
        loss = F.cross_entropy(model(inp).reshape(B * T, V), target.reshape(B * T))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()

    ms = median_time(step, args.reps, args.warmup, 1e3)
    print(f"LM step d={args.dim} L={args.layers} H={args.heads} B={B} T={T} V={V} "
          f"({sum(p.numel() for p in params)} params): {ms:.1f} ms, {B * T / ms * 1e3:.0f} tokens/s")
    report(f"lm_step/seq:{T}", ms)


if __name__ == "__main__":
    main()
