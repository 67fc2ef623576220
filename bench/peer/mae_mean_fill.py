"""Reference point for the MAE table of docs/RESULTS.md: the composite PSNR
(dB, pixels in [0, 1], over every pixel of the 10,000 test images) when every
masked 4x4 patch is filled with the mean training image's pixels instead of a
prediction. The masks have tmem's counts (masked = 49 - floor(49 (1 - ratio)))
but are drawn by numpy, so they are not tmem's masks.

    /usr/bin/python3 bench/peer/mae_mean_fill.py [--data-dir DIR]
"""
import argparse
import gzip

import numpy as np


def load_images(path):
    with gzip.open(path) as f:
        raw = f.read()
    return np.frombuffer(raw, np.uint8, offset=16).reshape(-1, 28, 28).astype(np.float64) / 255


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    train = load_images(f"{args.data_dir}/train-images-idx3-ubyte.gz")
    test = load_images(f"{args.data_dir}/t10k-images-idx3-ubyte.gz")
    mean = train.mean(0)
    rng = np.random.default_rng(args.seed)
    for ratio in (0.25, 0.5, 0.75):
        masked = 49 - int(49 * (1 - ratio))
        comp = test.copy()
        for b in range(len(test)):
            for n in rng.permutation(49)[:masked]:
                r, c = divmod(int(n), 7)
                comp[b, 4 * r:4 * r + 4, 4 * c:4 * c + 4] = mean[4 * r:4 * r + 4, 4 * c:4 * c + 4]
        mse = ((comp - test) ** 2).mean()
        print(f"mask {ratio:.2f}: {masked} of 49 patches filled with the mean image, "
              f"composite PSNR {10 * np.log10(1 / mse):.2f} dB")


if __name__ == "__main__":
    main()
