#!/usr/bin/python3
"""tmem's coord-binding diagnostic (docs/DESIGN.md §7 and §8) re-implemented in
PyTorch, method `base` or `tensor`, for timing and accuracy side by side with
`tmem train coord-binding` (models/tasks.cpp, diagnostic.cpp, transformer.cpp,
trainer.cpp; nn/tensor_memory.cpp, layers.cpp, linear.cpp, optim.cpp).

Task (W=20 writes, 4 queries, noise 0.05, batch 128): write tokens carry a key
k ~ U[-1,1]^3 and a value v in 0..31; each query token carries a written key
plus N(0, 0.05^2) noise clamped to [-1, 1] and id 32; its target is the value
of the written key nearest to it (writes have no target). The batches come
from torch's generator: the same distribution as tmem, not the same samples.

Model (as DiagnosticModel): Linear(3 -> 64)(key) + Embedding(33, 64)(id),
learned positions [256, 64] ~ N(0, 0.02^2), 2 pre-norm blocks
  x += attn(ln1(x))  (4 heads, one qkv Linear, causal, scale 1/sqrt(16))
  x += memory(ln_mem(x))          (tensor only)
  x += mlp(ln2(x))   (64 -> 256 -> 64, erf GELU)
then a final LayerNorm and the head Linear(64 -> 32). Linear, Embedding and
LayerNorm keep PyTorch's default initialisation, which is tmem's.

Tensor Memory (chunk 1, one (h, c) state [B, 16, 6, 6, 6] per layer, zero at
the start): w_t = write_proj(x_t); mu = tanh(coord(.)) shared by read and
write; for each token t in order, first the read
m_t = grid_sample(h, mu(x_t), trilinear, border, align_corners=True), then the
write v_t = splat(content(w_t), mu(w_t), (softplus(sigma(w_t)) + 1e-4) * 0.25)
(grid_splat_peer.splat) and the update (h, c) = cell(v_t, h, c)
(cell_peer.cell); out = sigmoid(gamma) * read_out(m). Initialisation: sigma's
bias 1.0, depthwise taps identity, depthwise biases 0, pointwise
Xavier-uniform, pointwise bias 0, gamma 0.

Training step (as train_diagnostic): a fresh batch, forward, cross entropy on
the query tokens (ignore_index -100), backward, clip_grad_norm_(1.0),
AdamW(lr 3e-4, betas (0.9, 0.999), eps 1e-8, weight decay 0.01 on every
parameter). Seeds as tmem: init seed, data seed + 1, eval seed + 2.

Run with Debian's PyTorch (OMP_WAIT_POLICY=passive, as for tmem):
  /usr/bin/python3 bench/peer/coord_peer.py --method tensor --time [--reps 20 --warmup 3]
      median ms per training step (data sampling included, as tmem's
      BM_coord_binding_step); last line RESULT {name, ms}, which `tmem bench`
      pairs with bench_memory's coord_binding_step/<method>
  python3 bench/peer/coord_peer.py --method tensor --time --device cuda
      the same on a GPU (the batches are sampled on the CPU and copied, as
      tmem does with --device cuda)
  /usr/bin/python3 bench/peer/coord_peer.py --method base --train --steps 2000 --seed 42
      progress every 100 steps (loss of that step, query accuracy over the
      last 100 steps), then query accuracy on 16 held-out batches of 128;
      last line RESULT {method, steps, seed, eval_accuracy (%), seconds}
"""
import json
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from cell_peer import cell
from grid_splat_peer import splat
from peer_common import median_time, parse_args, report

VALUES = 32      # value classes; id VALUES marks a query token
W, QUERIES, NOISE = 20, 4, 0.05
BATCH = 128
DIM, LAYERS, HEADS, MLP_RATIO = 64, 2, 4, 4
MAX_LEN = 256    # tmem's BackboneConfig.max_len
MEM_C, GRID, SIGMA_SCALE = 16, 6, 0.25
EVAL_BATCHES = 16


def sample(B, gen):
    """features [B, T, 3] float32, ids [B, T], targets [B, T] (-100 on writes)."""
    keys = torch.rand(B, W, 3, generator=gen, dtype=torch.float64) * 2 - 1
    vals = torch.randint(VALUES, (B, W), generator=gen)
    src = torch.randint(W, (B, QUERIES), generator=gen)
    q = torch.gather(keys, 1, src[..., None].expand(-1, -1, 3))
    q = (q + NOISE * torch.randn(B, QUERIES, 3, generator=gen, dtype=torch.float64)).clamp(-1, 1)
    nearest = ((q[:, :, None] - keys[:, None]) ** 2).sum(-1).argmin(-1)  # [B, QUERIES]
    features = torch.cat([keys, q], 1).float()
    ids = torch.cat([vals, torch.full((B, QUERIES), VALUES)], 1)
    targets = torch.cat([torch.full((B, W), -100), torch.gather(vals, 1, nearest)], 1)
    return features, ids, targets


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.out = nn.Linear(DIM, DIM)

    def forward(self, x):
        B, T, _ = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4)
        s = q @ k.transpose(-2, -1) / math.sqrt(DIM // HEADS)
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1),
                          float("-inf"))
        a = torch.softmax(s, -1) @ v
        return self.out(a.permute(0, 2, 1, 3).reshape(B, T, DIM))


class TensorMemory(nn.Module):
    def __init__(self):
        super().__init__()
        self.write_proj = nn.Linear(DIM, DIM)  # chunk 1: Linear(K * d -> d) with K = 1
        self.coord = nn.Linear(DIM, 3)
        self.read_out = nn.Linear(MEM_C, DIM)
        self.content = nn.Linear(DIM, MEM_C)
        self.sigma = nn.Linear(DIM, 1)
        nn.init.constant_(self.sigma.bias, 1.0)
        cz = 2 * MEM_C

        def identity_taps(shape):
            t = torch.zeros(cz, 1, *shape)
            t.view(cz, 3)[:, 1] = 1.0
            return nn.Parameter(t)

        pw = torch.empty(4 * MEM_C, cz, 1, 1, 1)
        nn.init.xavier_uniform_(pw)
        self.cell = nn.ParameterDict({
            "dw_d": identity_taps((3, 1, 1)), "dw_h": identity_taps((1, 3, 1)),
            "dw_w": identity_taps((1, 1, 3)),
            "db_d": nn.Parameter(torch.zeros(cz)), "db_h": nn.Parameter(torch.zeros(cz)),
            "db_w": nn.Parameter(torch.zeros(cz)),
            "pw": nn.Parameter(pw), "pb": nn.Parameter(torch.zeros(4 * MEM_C)),
        })
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        B, N, _ = x.shape
        w = self.write_proj(x)
        mu_r = torch.tanh(self.coord(x))
        mu_w = torch.tanh(self.coord(w))
        cont = self.content(w)
        sig = (F.softplus(self.sigma(w)) + 1e-4) * SIGMA_SCALE  # [B, N, 1]
        h = torch.zeros(B, MEM_C, GRID, GRID, GRID, device=x.device)
        c = torch.zeros_like(h)
        reads = []
        for t in range(N):  # read before write
            m = F.grid_sample(h, mu_r[:, t].reshape(B, 1, 1, 1, 3), mode="bilinear",
                              padding_mode="border", align_corners=True)
            reads.append(m.reshape(B, MEM_C))
            v = splat(cont[:, t], mu_w[:, t], sig[:, t, 0], GRID, GRID, GRID)
            h, c = cell(v, h, c, self.cell)
        return torch.sigmoid(self.gamma) * self.read_out(torch.stack(reads, 1))


class Block(nn.Module):
    def __init__(self, method):
        super().__init__()
        self.ln1 = nn.LayerNorm(DIM)
        self.attn = Attention()
        if method == "tensor":
            self.ln_mem = nn.LayerNorm(DIM)
            self.memory = TensorMemory()
        else:
            self.memory = None
        self.ln2 = nn.LayerNorm(DIM)
        self.fc1 = nn.Linear(DIM, MLP_RATIO * DIM)
        self.fc2 = nn.Linear(MLP_RATIO * DIM, DIM)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        if self.memory is not None:
            x = x + self.memory(self.ln_mem(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class CoordModel(nn.Module):
    def __init__(self, method):
        super().__init__()
        self.input_proj = nn.Linear(3, DIM)
        self.id_emb = nn.Embedding(VALUES + 1, DIM)
        self.pos = nn.Parameter(torch.randn(MAX_LEN, DIM) * 0.02)
        self.blocks = nn.ModuleList(Block(method) for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VALUES)

    def forward(self, features, ids):
        x = self.input_proj(features) + self.id_emb(ids)
        x = x + self.pos[:x.shape[1]]
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln_f(x))


class Trainer:
    """The model, its optimizer and the data generator, seeded as tmem."""

    def __init__(self, method, seed, device="cpu"):
        torch.manual_seed(seed)
        self.device = torch.device(device)
        self.model = CoordModel(method).to(self.device)
        self.params = list(self.model.parameters())
        self.opt = torch.optim.AdamW(self.params, lr=3e-4, betas=(0.9, 0.999), eps=1e-8,
                                     weight_decay=0.01)
        self.data_gen = torch.Generator().manual_seed(seed + 1)
        self.eval_gen = torch.Generator().manual_seed(seed + 2)

    def batch(self, gen):
        """A batch sampled on the CPU from gen, on the model's device."""
        return (t.to(self.device) for t in sample(BATCH, gen))

    def step(self):
        """One training step on a fresh batch: (loss, query hits, queries)."""
        features, ids, targets = self.batch(self.data_gen)
        logits = self.model(features, ids)
        loss = F.cross_entropy(logits.reshape(-1, VALUES), targets.reshape(-1))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(self.params, 1.0)
        self.opt.step()
        return loss.item(), *hits(logits, targets)

    @torch.no_grad()
    def evaluate(self):
        """Query accuracy (%) on EVAL_BATCHES held-out batches."""
        self.model.eval()
        h = n = 0
        for _ in range(EVAL_BATCHES):
            features, ids, targets = self.batch(self.eval_gen)
            a, b = hits(self.model(features, ids), targets)
            h, n = h + a, n + b
        self.model.train()
        return 100.0 * h / n


def hits(logits, targets):
    mask = targets != -100
    return int((logits.argmax(-1)[mask] == targets[mask]).sum()), int(mask.sum())


def save_checkpoint(tr, path, step, recent, seconds):
    """Everything a resumed run needs to continue as if uninterrupted, written
    to a temporary file and renamed so a kill leaves the previous one whole."""
    state = {"step": step, "recent": recent, "seconds": seconds,
             "model": tr.model.state_dict(), "opt": tr.opt.state_dict(),
             "data_gen": tr.data_gen.get_state(), "eval_gen": tr.eval_gen.get_state(),
             "torch_rng": torch.get_rng_state()}
    torch.save(state, path + ".tmp")
    os.replace(path + ".tmp", path)


def load_checkpoint(tr, path):
    """(step, recent, seconds) of the checkpoint at path, its state loaded."""
    state = torch.load(path)
    tr.model.load_state_dict(state["model"])
    tr.opt.load_state_dict(state["opt"])
    tr.data_gen.set_state(state["data_gen"])
    tr.eval_gen.set_state(state["eval_gen"])
    torch.set_rng_state(state["torch_rng"])
    print(f"resumed from {path} at step {state['step']}", flush=True)
    return state["step"], state["recent"], state["seconds"]


def train(tr, args):
    recent = []  # (hits, queries) of the last 100 steps
    start, before = 0, 0.0  # steps and seconds of the run before a resume
    if args.checkpoint and os.path.exists(args.checkpoint):
        start, recent, before = load_checkpoint(tr, args.checkpoint)
    t0 = time.perf_counter()
    for step in range(start + 1, args.steps + 1):
        loss, h, n = tr.step()
        recent = recent[-99:] + [(h, n)]
        if step % 100 == 0 or step == args.steps:
            acc = 100.0 * sum(a for a, _ in recent) / sum(b for _, b in recent)
            secs = before + time.perf_counter() - t0
            print(f"step {step}/{args.steps}  loss {loss:.4f}  acc {acc:5.1f}%  "
                  f"{secs / step:.3f} s/step", flush=True)
            if args.checkpoint:
                save_checkpoint(tr, args.checkpoint, step, recent, secs)
    seconds = before + time.perf_counter() - t0
    acc = tr.evaluate()
    print(f"{args.method}: eval accuracy {acc:.1f}% ({EVAL_BATCHES} batches of {BATCH}), "
          f"{seconds:.1f} s")
    return {"method": args.method, "steps": args.steps, "seed": args.seed,
            "eval_accuracy": acc, "seconds": seconds}


def add_arguments(ap):
    ap.add_argument("--method", choices=("base", "tensor"), required=True)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--time", action="store_true", help="median ms per training step")
    mode.add_argument("--train", action="store_true", help="train, then evaluate")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    ap.add_argument("--checkpoint", metavar="FILE",
                    help="with --train: save the run every 100 steps to FILE and resume "
                         "from it when it exists")


def main():
    args = parse_args(__doc__.split("\n")[0], reps=20, warmup=3, add_arguments=add_arguments)
    tr = Trainer(args.method, args.seed, args.device)
    params = sum(p.numel() for p in tr.params)
    print(f"coord-binding {args.method}: {params} params", flush=True)
    if args.train:
        print("RESULT " + json.dumps(train(tr, args)))
    else:
        ms = median_time(tr.step, args.reps, args.warmup, 1e3)
        where = f"{args.threads} threads" if tr.device.type == "cpu" else str(tr.device)
        print(f"coord-binding {args.method} training step (batch {BATCH}), "
              f"{where}: {ms:.1f} ms (median of {args.reps})")
        report(f"coord_binding_step/{args.method}", ms)


if __name__ == "__main__":
    main()
