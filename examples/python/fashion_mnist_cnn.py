"""A small CNN on Fashion-MNIST, written as a PyTorch script that runs
unchanged on tmem or on torch (`--backend torch`): Conv2d, BatchNorm2d,
ReLU, MaxPool2d, Flatten and Linear in an nn.Sequential, AdamW with
CosineAnnealingLR over a DataLoader, evaluation under no_grad.

The images come from Debian's dataset-fashion-mnist package
(/usr/share/datasets/fashion-mnist; tools/setup.sh installs it), read here
with NumPy.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/fashion_mnist_cnn.py
    /usr/bin/python3 examples/python/fashion_mnist_cnn.py --backend torch
"""
import argparse
import gzip
import importlib
import os
import time

import numpy as np

FOLDER = "/usr/share/datasets/fashion-mnist"


def read_idx(name):
    """An IDX file of the dataset as a NumPy array (big-endian header: magic, then one size per dim)."""
    with gzip.open(os.path.join(FOLDER, name), "rb") as f:
        data = f.read()
    dims = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims))
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default="tmem", choices=["tmem", "torch"], help="the module to train with")
    p.add_argument("--steps", type=int, default=1000, help="training steps at batch 64 (default 1000)")
    p.add_argument("--train-images", type=int, default=60000, help="how many training images to draw from")
    p.add_argument("--test-images", type=int, default=10000, help="how many test images to evaluate")
    p.add_argument("--min-accuracy", type=float, default=0.0,
                   help="exit with an error when the test accuracy ends below this (a check for CI)")
    args = p.parse_args()
    try:
        lib = importlib.import_module(args.backend)
        importlib.import_module(args.backend + ".utils.data")
    except ImportError as e:
        print(f"{args.backend} is not installed ({e})")
        raise SystemExit(77) from None  # CTest's skip code
    if not os.path.isdir(FOLDER):
        print(f"{FOLDER} is missing: install Debian's dataset-fashion-mnist (tools/setup.sh does)")
        raise SystemExit(77)
    nn, data = lib.nn, lib.utils.data

    def images(name, count):
        x = read_idx(name)[:count].astype(np.float32) / 255.0
        return lib.tensor((x - 0.286) / 0.353).reshape(-1, 1, 28, 28)

    lib.manual_seed(0)
    train = data.TensorDataset(images("train-images-idx3-ubyte.gz", args.train_images),
                               lib.tensor(read_idx("train-labels-idx1-ubyte.gz")[:args.train_images].astype(np.int64)))
    test_x = images("t10k-images-idx3-ubyte.gz", args.test_images)
    test_y = lib.tensor(read_idx("t10k-labels-idx1-ubyte.gz")[:args.test_images].astype(np.int64))
    loader = data.DataLoader(train, batch_size=64, shuffle=True, drop_last=True)

    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
    opt = lib.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-4)
    sched = lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.steps)
    loss_fn = nn.CrossEntropyLoss()

    start, step = time.time(), 0
    while step < args.steps:
        for x, y in loader:
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            if step % 100 == 0 or step == args.steps:
                print(f"step {step:5d}  loss {loss.item():.4f}  {(time.time() - start) / step * 1000:.0f} ms/step")
            if step == args.steps:
                break
    model.eval()
    correct = 0
    with lib.no_grad():
        for i in range(0, len(test_y), 500):
            correct += (model(test_x[i:i + 500]).argmax(1) == test_y[i:i + 500]).sum().item()
    accuracy = correct / len(test_y)
    print(f"{args.backend}: test accuracy {accuracy:.1%} on {len(test_y)} images after {args.steps} steps "
          f"({time.time() - start:.0f} s)")
    if accuracy < args.min_accuracy:
        raise SystemExit(f"test accuracy {accuracy:.1%} is below --min-accuracy {args.min_accuracy:.1%}")


if __name__ == "__main__":
    main()
