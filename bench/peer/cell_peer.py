#!/usr/bin/python3
"""The ConvLSTM3D cell composed from PyTorch ops, timed side by side with
tmem's fused convlstm3d_cell (bench/bench_memory.cpp).

z = cat(x, h); three depthwise conv3d (kernels (3,1,1), (1,3,1), (1,1,3),
groups=Cz, zero padding 1 along the axis, with bias); one 1x1x1 conv3d
Cz -> 4C with bias; i, f, o = sigmoid, g = tanh of the four C-channel chunks;
c' = f c + i g; h' = o tanh(c'). One iteration = forward, then
torch.autograd.backward((h', c'), (gh, gc)) into every input and weight for
fixed output gradients gh, gc, as bench_memory does with the op's backward.

Run with Debian's PyTorch: /usr/bin/python3 bench/peer/cell_peer.py
Prints milliseconds per iteration (median of --reps timed runs).
"""
import torch
import torch.nn.functional as F

from peer_common import median_time, parse_args, report


def make(B, C, G, seed=0):
    g = torch.Generator().manual_seed(seed)
    Cz = 2 * C

    def r(*shape, lo=-1.0, hi=1.0):
        return (torch.rand(*shape, generator=g) * (hi - lo) + lo).requires_grad_()

    x, h, c = r(B, C, G, G, G), r(B, C, G, G, G), r(B, C, G, G, G)
    w = {
        "dw_d": r(Cz, 1, 3, 1, 1), "dw_h": r(Cz, 1, 1, 3, 1), "dw_w": r(Cz, 1, 1, 1, 3),
        "db_d": r(Cz, lo=-0.5, hi=0.5), "db_h": r(Cz, lo=-0.5, hi=0.5),
        "db_w": r(Cz, lo=-0.5, hi=0.5),
        "pw": r(4 * C, Cz, 1, 1, 1, lo=-0.3, hi=0.3), "pb": r(4 * C, lo=-0.5, hi=0.5),
    }
    gh = torch.rand(B, C, G, G, G, generator=g) * 2 - 1
    gc = torch.rand(B, C, G, G, G, generator=g) * 2 - 1
    return x, h, c, w, gh, gc


def cell(x, h, c, w):
    Cz = x.shape[1] + h.shape[1]
    C = h.shape[1]
    z = torch.cat([x, h], 1)
    a = F.conv3d(z, w["dw_d"], w["db_d"], padding=(1, 0, 0), groups=Cz)
    a = F.conv3d(a, w["dw_h"], w["db_h"], padding=(0, 1, 0), groups=Cz)
    a = F.conv3d(a, w["dw_w"], w["db_w"], padding=(0, 0, 1), groups=Cz)
    p = F.conv3d(a, w["pw"], w["pb"])
    i = torch.sigmoid(p[:, 0:C])
    f = torch.sigmoid(p[:, C:2 * C])
    o = torch.sigmoid(p[:, 2 * C:3 * C])
    gg = torch.tanh(p[:, 3 * C:4 * C])
    c2 = f * c + i * gg
    return o * torch.tanh(c2), c2


def bench(B, C, G, reps, warmup):
    x, h, c, w, gh, gc = make(B, C, G)
    leaves = [x, h, c, *w.values()]

    def fwd():
        with torch.no_grad():
            cell(x, h, c, w)

    def fwd_bwd():
        for t in leaves:
            t.grad = None
        h2, c2 = cell(x, h, c, w)
        torch.autograd.backward((h2, c2), (gh, gc))

    return {name: median_time(fn, reps, warmup, 1e3)
            for name, fn in (("forward", fwd), ("forward_backward", fwd_bwd))}


def main():
    args = parse_args(__doc__.split("\n")[0], reps=20, warmup=3)
    for B, C, G in ((128, 16, 6), (128, 32, 8)):
        r = bench(B, C, G, args.reps, args.warmup)
        for name, ms in r.items():
            print(f"convlstm3d_cell B={B} C={C} {G}^3 {name}: {ms:.3f} ms/iter")
            report(f"convlstm3d_cell/{name}/C:{C}/grid:{G}", ms)


if __name__ == "__main__":
    main()
