#!/usr/bin/python3
"""Samples/s one node's input pipeline delivers: the data loaders of a training job alone.

What `dlsim predict --input-rate` takes (docs/simulator.md, "Input pipeline"): --ranks loader
processes at once, one per GPU (or CPU rank) of the node as a DistributedDataParallel job has
them, each a torch DataLoader with --workers worker processes over the JPEG folder --data
(jpeg_folder.py: PIL decoding, RandomResizedCrop(224), flip, normalize), batches of --batch.
After --warmup batches each rank times --batches more, all ranks starting together; the rate is
every rank's samples over the longest rank's time. No model runs.

--make-images N --size WxH writes N seeded JPEG images of that size (a smooth gradient with
noise, quality 90) into --data, which must not exist yet, and exits: a stand-in for a dataset
on a machine without one.

Prints one JSON object (the configuration, the rate, each rank's, PyTorch's version, the CPU).
Needs Debian's python3-torch, python3-torchvision and python3-pil (run it with /usr/bin/python3
where another python3 comes first on PATH).
"""

import argparse
import json
import os
import sys
import time

import torch
import torch.multiprocessing as mp
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jpeg_folder  # noqa: E402
from ddp_step import cpu_model  # noqa: E402


def make_images(folder, count, width, height, seed):
    """Seeded noise drawn at a quarter of the size and scaled up (bicubic), so that the files
    compress about as photographs do, not as white noise."""
    import numpy as np
    from PIL import Image
    os.makedirs(folder)
    rng = np.random.default_rng(seed)
    small = (max(4, width // 4), max(4, height // 4))
    for i in range(count):
        img = rng.integers(0, 256, size=(small[1], small[0], 3), dtype=np.uint8)
        big = Image.fromarray(img).resize((width, height), Image.BICUBIC)
        big.save(os.path.join(folder, f"image{i:05d}.jpg"), "JPEG", quality=90)


def rank_loop(rank, args, barrier, queue):
    """One loader process: ("ok", rank, samples, seconds), or ("error", rank, message) when its
    loader fails (an unreadable image), after which the others are stopped."""
    try:
        torch.set_num_threads(1)
        batches = jpeg_folder.loader(args.data, args.batch, args.workers, args.seed + rank)
        for _ in range(args.warmup):
            next(batches)
        barrier.wait(timeout=600)
        t0 = time.perf_counter()
        for _ in range(args.batches):
            next(batches)
        queue.put(("ok", rank, args.batches * args.batch, time.perf_counter() - t0))
    except Exception as e:  # reported by the parent as one line
        # A DataLoader worker's error carries the worker's traceback: its last line says it.
        lines = str(e).strip().splitlines()
        queue.put(("error", rank, lines[-1] if lines else type(e).__name__))


def collect(procs, barrier, queue):
    """Every rank's result; the first rank's error (or a rank that died without one) is
    returned as a message, the others let go from the barrier to end on their own."""
    import queue as queues
    results, error, heard = [], None, set()
    while len(heard) < len(procs):
        try:
            item = queue.get(timeout=1)
        except queues.Empty:
            dead = [r for r, p in enumerate(procs) if p.exitcode not in (None, 0) and r not in heard]
            if not dead:
                continue
            item = ("error", dead[0], f"exited with code {procs[dead[0]].exitcode}")
        heard.add(item[1])
        if item[0] == "error":
            if error is None:
                error = f"rank {item[1]}: {item[2]}"
                barrier.abort()
        else:
            results.append(item[1:])
    return (None, error) if error else (sorted(results), None)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True, help="folder of JPEG images (searched recursively)")
    p.add_argument("--ranks", type=int, default=1, help="loader processes at once (GPUs per node)")
    p.add_argument("--workers", type=int, default=1, help="DataLoader workers per rank")
    p.add_argument("--batch", type=int, default=8, help="samples per rank and batch")
    p.add_argument("--warmup", type=int, default=2, help="batches per rank before timing")
    p.add_argument("--batches", type=int, default=10, help="timed batches per rank")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--make-images", type=int, default=0, metavar="N",
                   help="write N JPEG images into --data (a new folder) and exit")
    p.add_argument("--size", default="500x375", metavar="WxH", help="size of --make-images")
    args = p.parse_args()
    if args.make_images:
        try:
            width, height = (int(v) for v in args.size.lower().split("x"))
        except ValueError:
            print(f"input_rate.py: --size: expected WxH (e.g. 500x375), got '{args.size}'",
                  file=sys.stderr)
            return 2
        if args.make_images < 1 or not (16 <= width <= 20000 and 16 <= height <= 20000):
            print("input_rate.py: --make-images must be at least 1 and --size 16..20000 a side",
                  file=sys.stderr)
            return 2
        if os.path.exists(args.data):
            print(f"input_rate.py: --data: {args.data} already exists", file=sys.stderr)
            return 2
        try:
            make_images(args.data, args.make_images, width, height, args.seed)
        except OSError as e:
            print(f"input_rate.py: --data: {e}", file=sys.stderr)
            return 2
        return 0
    for name in ("ranks", "batch", "batches"):
        if getattr(args, name) < 1:
            print(f"input_rate.py: --{name} must be at least 1", file=sys.stderr)
            return 2
    if args.workers < 0 or args.warmup < 0:
        print("input_rate.py: --workers and --warmup must not be negative", file=sys.stderr)
        return 2
    try:
        images = len(jpeg_folder.image_files(args.data))
        if images < args.batch:
            raise ValueError(f"{args.data}: {images} images, fewer than a batch of {args.batch}")
    except (ValueError, OSError) as e:
        print(f"input_rate.py: --data: {e}", file=sys.stderr)
        return 2
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(args.ranks)
    queue = ctx.Queue()
    procs = [ctx.Process(target=rank_loop, args=(r, args, barrier, queue))
             for r in range(args.ranks)]
    for proc in procs:
        proc.start()
    results, error = collect(procs, barrier, queue)
    for proc in procs:
        proc.join()
    if error:
        print(f"input_rate.py: --data {args.data}: {error}", file=sys.stderr)
        return 2
    samples = sum(n for _, n, _ in results)
    seconds = max(t for _, _, t in results)
    print(json.dumps({
        "data": os.path.abspath(args.data), "images": images, "ranks": args.ranks,
        "workers": args.workers, "batch": args.batch, "warmup": args.warmup,
        "batches": args.batches,
        "samples_per_s": samples / seconds,
        "rank_samples_per_s": [n / t for _, n, t in results],
        "torch": torch.__version__, "torchvision": torchvision.__version__, "cpu": cpu_model(),
    }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
