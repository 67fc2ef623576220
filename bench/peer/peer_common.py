"""Shared by the PyTorch peer scripts: command-line threads/reps/warmup and a
median timer."""
import argparse
import json
import statistics
import time

import torch


def parse_args(description, reps, warmup, add_arguments=None):
    """--threads (default 2), --reps, --warmup, --quick (a fifth of the
    repetitions, at least 3, and at most 2 warm-up calls: `tmem bench --quick`)
    and whatever add_arguments(parser) adds; sets torch's thread count."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=reps)
    ap.add_argument("--warmup", type=int, default=warmup)
    ap.add_argument("--quick", action="store_true")
    if add_arguments:
        add_arguments(ap)
    args = ap.parse_args()
    if args.quick:
        args.reps = max(3, args.reps // 5)
        args.warmup = min(2, args.warmup)
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


def report(name, ms):
    """Prints the line `tmem bench` reads: RESULT {"name": name, "ms": ms},
    name being the tmem benchmark's name (bench/*.cpp, without BM_)."""
    print("RESULT " + json.dumps({"name": name, "ms": ms}), flush=True)
