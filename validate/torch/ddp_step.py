#!/usr/bin/python3
"""Training-step time of a real PyTorch DistributedDataParallel job on this machine's CPU.

What a user runs: torchvision's model, synthetic ImageNet-shaped data, cross-entropy loss, SGD
with momentum 0.9, DistributedDataParallel over the gloo backend (its default 25 MiB buckets,
gradients averaged and overlapped with backward), one process per rank started with
torch.multiprocessing, each with --threads intra-op threads. Warm-up steps first, then timed
steps; a rank's step is its wall clock from the start of its forward to the end of its
optimizer step (every rank waits for the others in the gradient all-reduce), and the job's
step the shortest of its ranks' (job_steps: a rank that began the step early waits longer).

Prints one JSON object: the configuration, the per-step times (s) and their mean, the
throughput of all ranks (samples/s), PyTorch's version and the CPU. Needs Debian's
python3-torch and python3-torchvision (run it with /usr/bin/python3 where another python3 comes
first on PATH). docs/validate.md, "PyTorch DDP on this machine".
"""

import argparse
import contextlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jpeg_folder  # noqa: E402

MODELS = {"alexnet": 224, "resnet18": 224, "resnet34": 224, "resnet50": 224, "vgg11": 224,
          "vgg16": 224, "googlenet": 224}


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def run(rank, args, init_method, queue, local_rank=0):
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed + rank)
    dist.init_process_group(args.backend, init_method=init_method, rank=rank,
                            world_size=args.ranks)
    device = torch.device("cpu")
    if args.device == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    kwargs = {"aux_logits": False, "init_weights": True} if args.model == "googlenet" else {}
    model = getattr(torchvision.models, args.model)(weights=None, **kwargs).train().to(device)
    if args.ranks > 1:
        model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[local_rank] if args.device == "cuda" else None,
            bucket_cap_mb=args.bucket_cap_mb)
        if args.fp16_compress:
            # Each bucket cast to float16 (and divided by the world size) for the all-reduce,
            # the result cast back into the bucket (PyTorch 1.8 on).
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            model.register_comm_hook(None, default_hooks.fp16_compress_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    side = MODELS[args.model]
    data = torch.randn(args.batch, 3, side, side, device=device)
    target = torch.randint(0, 1000, (args.batch,), device=device)
    # --data: each step first takes its batch from the rank's DataLoader (jpeg_folder.py), its
    # wait for the loader's workers counted in the step.
    batches = (jpeg_folder.loader(args.data, args.batch, args.workers, args.seed + rank, side)
               if args.data else None)
    times, local = [], []
    paired = args.paired and args.ranks > 1
    for i in range(args.warmup + args.steps * (2 if paired else 1)):
        # --paired: every other step under DDP's no_sync(), the same step without the gradient
        # exchange, so both kinds see the same machine at the same time.
        exchange = not paired or (i - args.warmup) % 2 == 0
        sync(args)
        t0 = time.perf_counter()
        if batches is not None:
            data, target = (t.to(device) for t in next(batches))
        opt.zero_grad(set_to_none=True)
        with contextlib.nullcontext() if exchange else model.no_sync():
            loss = loss_fn(model(data), target)
            loss.backward()
        opt.step()
        sync(args)
        if i >= args.warmup:
            (times if exchange else local).append(time.perf_counter() - t0)
    # Every rank's steps, to rank 0: a job's step is its slowest rank's (below).
    ranks_steps = [None] * args.ranks
    dist.all_gather_object(ranks_steps, (times, local))
    if rank == 0 and queue is not None:
        queue.put(ranks_steps)
    dist.barrier()
    return ranks_steps


def leave(code):
    """Ends a rank's process without PyTorch 1.13's teardown of DDP and gloo: freeing the
    Reducer frees the process group, whose destructor joins gloo's worker threads while holding
    the GIL, and a worker still freeing a tensor of the last collective waits for the GIL (both
    threads seen so in gdb on a rank that never exited, its job holding both nodes until Slurm's
    time limit). Everything a rank reports is written and flushed before this."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def spawned(rank, args, init_method, queue):
    """One rank started by torch.multiprocessing: it hands its steps over (rank 0 through the
    queue, a pipe written before put returns) and leaves."""
    run(rank, args, init_method, queue)
    leave(0)


def job_steps(ranks_steps):
    """The job's exchange steps and its no-exchange steps, from every rank's.

    In a step with the exchange every rank ends when the all-reduce does, so the ranks' times
    differ only by when each began. Under --paired a no-exchange step lets a faster rank run
    ahead; in the exchange step after it, that rank waits out its lead as well as the slower
    rank's slowness in that step: with no-exchange steps T and T + X, the faster rank times
    T + 2X + E where the slower one, like a job of exchange steps, times T + X + E. So each
    exchange step is the shortest of the ranks' (in an unpaired job they are alike), and each
    no-exchange step the ranks' mean, the step of one rank beside the others."""
    times = [min(step) for step in zip(*(t for t, _ in ranks_steps))]
    local = [sum(step) / len(step) for step in zip(*(l for _, l in ranks_steps))]
    return times, local


def sync(args):
    if args.device == "cuda":
        torch.cuda.synchronize()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, choices=sorted(MODELS))
    p.add_argument("--batch", type=int, default=8, help="samples per rank")
    p.add_argument("--ranks", type=int, default=1)
    p.add_argument("--threads", type=int, default=None,
                   help="intra-op threads per rank (default 1; with --launched, PyTorch's own)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="cuda: rank r runs on GPU LOCAL_RANK (with --launched)")
    p.add_argument("--bucket-cap-mb", type=float, default=25.0,
                   help="DistributedDataParallel's bucket_cap_mb (MiB; PyTorch's default 25)")
    p.add_argument("--backend", choices=("gloo", "nccl", "mpi"), default=None,
                   help="torch.distributed backend (default: nccl on cuda, gloo on cpu)")
    p.add_argument("--launched", action="store_true",
                   help="one rank of a job started by srun or torchrun: RANK, WORLD_SIZE, "
                        "LOCAL_RANK, MASTER_ADDR and MASTER_PORT come from the environment "
                        "(dlvalidate launch, docs/launch.md); rank 0 prints the JSON")
    p.add_argument("--fp16-compress", action="store_true",
                   help="register DDP's fp16_compress_hook: buckets travel as float16")
    p.add_argument("--data", default=None,
                   help="train on the JPEG images of this folder through a DataLoader per rank "
                        "(jpeg_folder.py), the batch's wait counted in the step; default: one "
                        "synthetic batch reused")
    p.add_argument("--workers", type=int, default=1,
                   help="DataLoader workers per rank with --data")
    p.add_argument("--paired", action="store_true",
                   help="with 2+ ranks, alternate each timed step with one under no_sync() (no "
                        "gradient exchange): --steps of each")
    args = p.parse_args()
    if args.threads is None:
        args.threads = 0 if args.launched else 1
    elif args.threads < 1:
        print("ddp_step.py: --threads must be at least 1", file=sys.stderr)
        return 2
    for name in ("batch", "ranks", "steps"):
        if getattr(args, name) < 1:
            print(f"ddp_step.py: --{name} must be at least 1", file=sys.stderr)
            return 2
    if args.warmup < 0:
        print("ddp_step.py: --warmup must not be negative", file=sys.stderr)
        return 2
    if args.workers < 0:
        print("ddp_step.py: --workers must not be negative", file=sys.stderr)
        return 2
    if args.data:
        try:
            images = len(jpeg_folder.image_files(args.data))
        except (ValueError, OSError) as e:
            print(f"ddp_step.py: --data: {e}", file=sys.stderr)
            return 2
        if images < args.batch:
            print(f"ddp_step.py: --data: {args.data}: {images} images, fewer than a batch of "
                  f"{args.batch}", file=sys.stderr)
            return 2
    if args.backend is None:
        args.backend = "nccl" if args.device == "cuda" else "gloo"
    if args.launched:
        try:
            rank = int(os.environ["RANK"])
            args.ranks = int(os.environ["WORLD_SIZE"])
            local_rank = int(os.environ.get("LOCAL_RANK", "0"))
            os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]
        except (KeyError, ValueError) as e:
            print(f"ddp_step.py: --launched needs RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT "
                  f"({e})", file=sys.stderr)
            return 2
        ranks_steps = run(rank, args, "env://", None, local_rank)
        if rank != 0:
            leave(0)
    else:
        ctx = mp.get_context("spawn")
        queue = ctx.SimpleQueue()
        with tempfile.TemporaryDirectory() as d:
            init_file = "file://" + os.path.join(d, "init")
            procs = [ctx.Process(target=spawned, args=(r, args, init_file, queue))
                     for r in range(args.ranks)]
            for proc in procs:
                proc.start()
            ranks_steps = queue.get()
            for proc in procs:
                proc.join()
            if any(proc.exitcode != 0 for proc in procs):
                print("ddp_step.py: a rank failed", file=sys.stderr)
                return 1
    times, local = job_steps(ranks_steps)
    mean = sum(times) / len(times)
    extra = {}
    if args.ranks > 1:
        extra = {"rank_step_times_s": [t for t, _ in ranks_steps]}
    if local:
        # The exchange's cost, measured pairwise: the no-exchange steps' median over the
        # exchange steps' median, both taken in the same processes, alternately (medians: one
        # step disturbed by the VM moves a mean of four by several per cent).
        extra.update({"rank_no_sync_step_times_s": [l for _, l in ranks_steps],
                      "no_sync_step_times_s": local, "no_sync_step_s": sum(local) / len(local),
                      "paired_efficiency": statistics.median(local) / statistics.median(times)})
    print(json.dumps({
        "kind": "pytorch-ddp-step", "model": args.model, "batch_per_rank": args.batch,
        "ranks": args.ranks, "threads_per_rank": args.threads or torch.get_num_threads(), "backend": args.backend,
        "bucket_cap_mb": args.bucket_cap_mb,
        "comm_hook": "fp16_compress_hook" if args.fp16_compress and args.ranks > 1 else None,
        "device": args.device,
        "data": os.path.abspath(args.data) if args.data else "synthetic",
        "loader_workers_per_rank": args.workers if args.data else None,
        "optimizer": "sgd momentum 0.9", "warmup_steps": args.warmup, "step_times_s": times,
        "step_s": mean, "samples_per_s": args.batch * args.ranks / mean,
        "torch": torch.__version__, "torchvision": torchvision.__version__, "cpu": cpu_model(),
        "cores": os.cpu_count(), **extra}))
    if args.launched:
        leave(0)  # rank 0 of a launched job still holds gloo's threads
    return 0


if __name__ == "__main__":
    sys.exit(main())
