"""Shared by the PyTorch peer scripts: command-line threads/reps/warmup and a
median timer."""
import argparse
import statistics
import time

import torch


def parse_args(description, reps, warmup):
    """--threads (default 2), --reps, --warmup; sets torch's thread count."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=reps)
    ap.add_argument("--warmup", type=int, default=warmup)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    return args


def median_time(fn, reps, warmup, scale):
    """Median wall time of fn() over reps calls after warmup calls, times scale
    (1e3 for ms, 1e6 for us)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * scale)
    return statistics.median(times)
