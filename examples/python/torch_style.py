"""A PyTorch training script that runs on tmem unchanged: only the module
it imports differs (`--backend tmem`, the default, or `--backend torch`).

It classifies two interleaved spirals (NumPy-generated, seeded) with an MLP
built from nn.Sequential, nn.Linear, nn.ReLU and nn.Dropout, initialised by
nn.init, trained with nn.CrossEntropyLoss, AdamW, OneCycleLR and gradient
clipping over a DataLoader, evaluated under no_grad, and checkpointed with
save/load (model, optimizer and scheduler state) halfway, from which it
resumes: the everyday PyTorch API, as tmem's Python package provides it.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/torch_style.py
    /usr/bin/python3 examples/python/torch_style.py --backend torch   # the same script on PyTorch
"""
import argparse
import importlib
import math
import os
import tempfile

import numpy as np


def spirals(n, noise, rng):
    """n points of two spirals (labels 0 and 1), float32 [n, 2] and int64 [n]."""
    t = np.sqrt(rng.random(n)) * 3 * math.pi
    label = rng.integers(0, 2, n)
    r = t / (3 * math.pi) * 2
    angle = t + label * math.pi
    x = np.stack([r * np.cos(angle), r * np.sin(angle)], 1) + rng.normal(0, noise, (n, 2))
    return x.astype(np.float32), label.astype(np.int64)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default="tmem", choices=["tmem", "torch"], help="the module to train with")
    p.add_argument("--epochs", type=int, default=30, help="passes over the training set (default 30)")
    p.add_argument("--min-accuracy", type=float, default=0.0,
                   help="exit with an error when the test accuracy ends below this (a check for CI)")
    args = p.parse_args()
    try:
        lib = importlib.import_module(args.backend)
        importlib.import_module(args.backend + ".utils.data")
    except ImportError as e:
        print(f"{args.backend} is not installed ({e})")
        raise SystemExit(77) from None  # CTest's skip code
    nn, F, data = lib.nn, lib.nn.functional, lib.utils.data

    lib.manual_seed(0)
    rng = np.random.default_rng(0)
    train_x, train_y = spirals(2000, 0.05, rng)
    test_x, test_y = spirals(1000, 0.05, rng)
    train = data.TensorDataset(lib.tensor(train_x), lib.tensor(train_y))
    loader = data.DataLoader(train, batch_size=64, shuffle=True, drop_last=True)

    model = nn.Sequential(nn.Linear(2, 128), nn.ReLU(), nn.Dropout(0.1), nn.Linear(128, 128), nn.ReLU(),
                          nn.Linear(128, 2))
    for m in model.modules():
        if isinstance(m, nn.Linear):
            nn.init.kaiming_uniform_(m.weight, nonlinearity="relu")
            nn.init.zeros_(m.bias)
    loss_fn = nn.CrossEntropyLoss(label_smoothing=0.05)
    opt = lib.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-4)
    sched = lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=args.epochs * len(loader),
                                              cycle_momentum=False)

    def evaluate():
        model.eval()
        with lib.no_grad():
            logits = model(lib.tensor(test_x))
            accuracy = (logits.argmax(1) == lib.tensor(test_y)).float().mean().item()
            loss = F.cross_entropy(logits, lib.tensor(test_y)).item()
        model.train()
        return loss, accuracy

    checkpoint = os.path.join(tempfile.mkdtemp(), "spirals.pt")
    for epoch in range(args.epochs):
        if epoch == args.epochs // 2:  # save, then carry on from the loaded copy, as a resumed run would
            lib.save({"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
                      "epoch": epoch}, checkpoint)
            state = lib.load(checkpoint)
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["opt"])
            sched.load_state_dict(state["sched"])
        total, count = 0.0, 0
        for x, y in loader:
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            total, count = total + loss.item() * len(y), count + len(y)
        if epoch % 5 == 4 or epoch == args.epochs - 1:
            test_loss, accuracy = evaluate()
            print(f"epoch {epoch + 1:3d}  train loss {total / count:.4f}  test loss {test_loss:.4f}  "
                  f"test accuracy {accuracy:.1%}  lr {sched.get_last_lr()[0]:.2e}")
    _, accuracy = evaluate()
    print(f"{args.backend}: test accuracy {accuracy:.1%} after {args.epochs} epochs")
    if accuracy < args.min_accuracy:
        raise SystemExit(f"test accuracy {accuracy:.1%} is below --min-accuracy {args.min_accuracy:.1%}")


if __name__ == "__main__":
    main()
