#!/usr/bin/env python3
"""Single-GPU training-step throughput of torchvision models with PyTorch, on synthetic data.

A measurement path for the GPU when one is at hand (docs/validate.md, "GPU measurements"): the
same models as dlsim's zoo (torchvision definitions), the way tf_cnn_benchmarks and Horovod's
pytorch_synthetic_benchmark measure a step: forward, loss, backward and an SGD-momentum update on
one random batch that stays on the GPU, warm-up steps first, then timed steps between CUDA
events. fp32 runs without TF32 (cuDNN and cuBLAS in full fp32, as dlcalibrate's fp32 benchmarks
run); tf32 runs float32 with TF32 in cuBLAS and cuDNN; amp runs torch.autocast(float16) with a
gradient scaler; bf16 runs torch.autocast(bfloat16) without one. bert_base is Hugging Face's
BertForPreTraining (bert-base-uncased's configuration, random weights, 128 tokens, masked-LM
labels at every position and the next-sentence label), with its attention as dlsim's layer graph
has it ("eager": scores, softmax, dropout, context) or as PyTorch's fused kernel
(bert_base_sdpa). Each step's host time (the wall clock from the step's start until its last
call returns, before waiting for the GPU) is recorded beside its GPU time.

Writes rows with the columns of ../shared/validation/throughput.csv (one per model and
precision) that `dlvalidate published` reads, and a JSON file with every step time.
"""

import argparse
import csv
import datetime
import json
import statistics
import sys
import time

import torch
import torchvision

COLUMNS = ["source_id", "model", "task", "framework", "comm", "precision", "gpu", "num_gpus",
           "num_nodes", "gpus_per_node", "batch_per_gpu", "data", "intra_node", "inter_node",
           "value", "unit", "approx", "locator", "notes"]

# dlsim zoo name -> (torchvision constructor, keyword arguments, input side).
MODELS = {
    "alexnet": ("alexnet", {}, 224),
    "vgg16": ("vgg16", {}, 224),
    "resnet50": ("resnet50", {}, 224),
    "resnet101": ("resnet101", {}, 224),
    "googlenet": ("googlenet", {"aux_logits": False, "init_weights": True}, 224),
    "inception_v3": ("inception_v3", {"aux_logits": True, "init_weights": True}, 299),
}


BERT_TOKENS = 128


def bert(attention):
    import transformers  # only for bert_base
    config = transformers.BertConfig(attn_implementation=attention)
    return transformers.BertForPreTraining(config)


def step_times(name, batch, precision, steps, warmup):
    loss_fn = torch.nn.CrossEntropyLoss()
    if name.startswith("bert_base"):
        model = bert("sdpa" if name == "bert_base_sdpa" else "eager").cuda().train()
        ids = torch.randint(0, 30522, (batch, BERT_TOKENS), device="cuda")
        mlm = torch.randint(0, 30522, (batch, BERT_TOKENS), device="cuda")
        nsp = torch.randint(0, 2, (batch,), device="cuda")

        def loss_of():
            return model(input_ids=ids, labels=mlm, next_sentence_label=nsp).loss
    else:
        ctor, kwargs, side = MODELS[name]
        model = getattr(torchvision.models, ctor)(weights=None, **kwargs).cuda().train()
        data = torch.randn(batch, 3, side, side, device="cuda")
        target = torch.randint(0, 1000, (batch,), device="cuda")

        def loss_of():
            out = model(data)
            if isinstance(out, tuple):  # inception_v3's auxiliary classifier in training
                return loss_fn(out[0], target) + 0.4 * loss_fn(out[1], target)
            return loss_fn(out, target)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    autocast = precision in ("amp", "bf16")
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    scaler = torch.amp.GradScaler("cuda", enabled=precision == "amp")

    def one_step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=dtype, enabled=autocast):
            loss = loss_of()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    for _ in range(warmup):
        one_step()
    torch.cuda.synchronize()
    times, host = [], []
    for _ in range(steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        start.record()
        one_step()
        end.record()
        host.append(time.perf_counter() - t0)  # s
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000.0)  # s
    del model, opt
    torch.cuda.empty_cache()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return times, host


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="resnet50,vgg16,googlenet,inception_v3,alexnet,resnet101")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--precisions", default="fp32,amp")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--source-id", default="torch-step")
    p.add_argument("--gpu-name", default=None, help="the gpu column (default: the device's name)")
    p.add_argument("--csv", required=True)
    p.add_argument("--json", required=True)
    a = p.parse_args()

    if not torch.cuda.is_available():
        sys.exit("torch_step.py: error: no CUDA device")
    # Full fp32 (no TF32) so that fp32 means what dlcalibrate's fp32 benchmarks mean.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True  # cuDNN picks the fastest algorithm per shape
    props = torch.cuda.get_device_properties(0)
    gpu = a.gpu_name or props.name
    provenance = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "device": props.name, "multiprocessors": props.multi_processor_count,
        "memory_bytes": props.total_memory, "torch": torch.__version__,
        "torchvision": torchvision.__version__, "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(), "command": " ".join(sys.argv),
    }
    rows, runs = [], []
    for precision in a.precisions.split(","):
        for name in a.models.split(","):
            times, host = step_times(name, a.batch, precision, a.steps, a.warmup)
            med = statistics.median(times)
            runs.append({"model": name, "precision": precision, "batch": a.batch,
                         "step_s": times, "median_step_s": med, "host_s": host,
                         "median_host_s": statistics.median(host)})
            rows.append({
                "source_id": a.source_id, "model": name, "task": "train",
                "framework": f"pytorch {torch.__version__} (torchvision {torchvision.__version__})",
                "comm": "none", "precision": precision, "gpu": gpu, "num_gpus": 1,
                "num_nodes": 1, "gpus_per_node": 1, "batch_per_gpu": a.batch,
                "data": "synthetic", "intra_node": "none", "inter_node": "none",
                "value": f"{a.batch / med:.2f}",
                "unit": "samples/s" if name.startswith("bert") else "images/s", "approx": "no",
                "locator": f"median of {a.steps} steps after {a.warmup} warm-up",
                "notes": f"step {med * 1e3:.3f} ms median ({min(times) * 1e3:.3f}-"
                         f"{max(times) * 1e3:.3f} ms); CUDA {torch.version.cuda}, cuDNN "
                         f"{torch.backends.cudnn.version()}; {provenance['date']}"})
            print(f"{name} {precision} batch {a.batch}: {med * 1e3:.3f} ms/step, "
                  f"{a.batch / med:.1f} samples/s, host {statistics.median(host) * 1e3:.3f} "
                  f"ms/step", flush=True)
    with open(a.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    with open(a.json, "w") as f:
        json.dump({"kind": "torch-step-measurement", "provenance": provenance, "runs": runs}, f,
                  indent=2)


if __name__ == "__main__":
    main()
