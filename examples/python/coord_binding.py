"""Trains the coord-binding Tensor Memory model from Python.

The training loop is written here, step for step the loop of the C++ trainer
(models/trainer.cpp: sample, forward, cross-entropy, backward, dump, clip,
AdamW), over the same C++ task, model and optimizer through the bindings;
every call that does real work (sampling, forward, backward, clipping, the
optimizer step) releases the GIL. With the same config and seed it computes
the same losses as `tmem train coord-binding --method tensor`.

It writes a gradient dump (the parameters' gradient summaries and each memory
layer's gate, write widths and coordinates, as `tmem train --dump-grads`
does), results.json (config, losses, accuracy, seconds per step) and, when
matplotlib is installed, loss.png.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/coord_binding.py --steps 300

The C++ trainer on the same config, for the per-step time:

    ./build/tools/tmem train coord-binding --method tensor --steps 300 --seed 42
"""
import argparse
import contextlib
import json
import os
import time

import numpy as np

import tmem
import tmem.nn as nn
import tmem.optim as optim
from tmem import models


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=2000, help="training steps (default 2000, as tmem train)")
    p.add_argument("--batch", type=int, default=128, help="sequences per step")
    p.add_argument("--seed", type=int, default=42, help="model Generator(seed), data Generator(seed + 1)")
    p.add_argument("--method", default="tensor", help="base, base_wide, slots or tensor")
    p.add_argument("--W", type=int, default=20, help="written keys")
    p.add_argument("--noise", type=float, default=0.05, help="query key noise")
    p.add_argument("--threads", type=int, default=0, help="OpenMP threads (0: all cores)")
    p.add_argument("--dump-every", type=int, default=100, help="steps between gradient dumps")
    p.add_argument("--out", default="runs/python-coord-binding", help="output folder")
    return p.parse_args()


def memory_internals(model, probe):
    """Each memory layer's gate, write widths and read/write coordinates of
    its last forward recorded by `probe`, as the C++ trainer dumps them."""
    layers = []
    for i, block in enumerate(model.backbone.blocks):
        mem = block.memory
        if mem is None:
            continue
        rec = probe.last(mem)
        layers.append({"layer": i,
                       "gate": float(1.0 / (1.0 + np.exp(-mem.gamma.item()))),
                       "write_sigma": tmem.tensor_summary("write_sigma", rec["sigma"]),
                       "read_coords": tmem.tensor_summary("read_coords", rec["mu_read"]),
                       "write_coords": tmem.tensor_summary("write_coords", rec["mu_write"])})
    return layers


def query_hits(logits, targets):
    """(correct, total) argmax predictions at the positions with a target."""
    pred = tmem.max(logits, -1).indices.numpy()
    t = targets.numpy()
    mask = t != -100
    return int((pred[mask] == t[mask]).sum()), int(mask.sum())


def evaluate(model, task, cfg):
    """Query accuracy on cfg.eval_batches batches of Generator(seed + 2), as
    the C++ trainer's final eval."""
    model.eval()
    gen = tmem.Generator(cfg.seed + 2)
    hit = total = 0
    with tmem.no_grad():
        for _ in range(cfg.eval_batches):
            batch = task.sample(cfg.batch, gen)
            h, n = query_hits(model(batch), batch.targets)
            hit, total = hit + h, total + n
    model.train()
    return hit / max(total, 1)


def main():
    args = parse_args()
    if args.threads > 0:
        tmem.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    cfg = models.TrainConfig({"task": "coord-binding", "method": args.method, "W": args.W, "noise": args.noise,
                              "steps": args.steps, "batch": args.batch, "seed": args.seed})
    task = models.make_task(cfg.task, cfg.task_cfg)
    model = models.DiagnosticModel(task, cfg.model, generator=tmem.Generator(cfg.seed))
    data_gen = tmem.Generator(cfg.seed + 1)
    params = model.parameters()
    named = model.named_parameters()
    # The C++ trainer's two groups (nn::weight_decay_groups): weight decay on
    # matrices only, none on biases, gains and memory gates.
    opt = optim.AdamW(optim.weight_decay_groups(params, cfg.weight_decay), lr=cfg.lr, betas=(0.9, 0.999), eps=1e-8)
    dump = tmem.GradDumpWriter(os.path.join(args.out, "grads.jsonl"))
    print(f"coord-binding W={args.W} noise={args.noise}: {args.method}, {model.num_parameters()} parameters, "
          f"{cfg.steps} steps at batch {cfg.batch}, {tmem.get_num_threads()} threads -> {args.out}")

    losses, recent = [], []
    start = time.perf_counter()
    for step in range(cfg.steps):
        batch = task.sample(cfg.batch, data_gen)
        dumping = step % args.dump_every == 0 or step + 1 == cfg.steps
        with nn.TensorMemoryProbe() if dumping else contextlib.nullcontext() as probe:
            logits = model(batch)
        loss = tmem.cross_entropy(logits.reshape(-1, task.classes()), batch.targets.reshape(-1))
        loss.backward()
        loss_v = loss.item()
        if dumping:
            grads = [(n, p.grad) for n, p in named if p.grad is not None]
            dump.write_step(step, loss_v, grads, extra={"memory": memory_internals(model, probe)})
        nn.clip_grad_norm_(params, cfg.clip)
        opt.step()
        opt.zero_grad()
        losses.append(loss_v)
        recent = (recent + [query_hits(logits, batch.targets)])[-100:]
        if (step + 1) % max(cfg.steps // 10, 1) == 0 or step + 1 == cfg.steps:
            acc = sum(h for h, _ in recent) / max(sum(n for _, n in recent), 1)
            per_step = (time.perf_counter() - start) / (step + 1)
            print(f"step {step + 1}/{cfg.steps}  loss {loss_v:.4f}  acc {100 * acc:5.1f}%  {per_step:.3f} s/step",
                  flush=True)
    seconds = time.perf_counter() - start

    eval_acc = evaluate(model, task, cfg)
    gates = models.memory_gates(model.backbone)
    print(f"eval accuracy {100 * eval_acc:.1f}%, memory gates {[round(g, 4) for g in gates]}, "
          f"{seconds / max(cfg.steps, 1):.4f} s/step over {cfg.steps} steps")
    series = tmem.summarize_grad_dump(tmem.read_grad_dump(os.path.join(args.out, "grads.jsonl")))
    flagged = [s.name for s in series if s.nan or s.inf or s.vanishing]
    print(f"gradient dump: {len(series)} tensors, {len(flagged)} with NaN/Inf or vanishing gradients {flagged}")

    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"config": cfg.to_dict(), "losses": losses, "eval_accuracy": eval_acc, "gates": gates,
                   "seconds": seconds, "seconds_per_step": seconds / max(cfg.steps, 1),
                   "threads": tmem.get_num_threads()}, f, indent=1)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no loss.png (Debian: apt-get install python3-matplotlib)")
        return
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(np.arange(1, len(losses) + 1), losses, lw=0.8)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.set_title(f"coord-binding, {args.method}")
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "loss.png"), dpi=120)
    print(f"wrote {os.path.join(args.out, 'loss.png')}")


if __name__ == "__main__":
    main()
