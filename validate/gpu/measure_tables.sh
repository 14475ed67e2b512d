#!/usr/bin/env bash
# Layer tables and PyTorch's own steps on one CUDA GPU, back to back (docs/validate.md, "GPU
# measurements"): builds dlcalibrate against the python3 PyTorch's libtorch, then
#   1. validate/gpu/torch_step.py: torchvision's CNNs at batch 64 and Hugging Face's
#      BertForPreTraining at batch 16, in every precision asked for;
#   2. dlcalibrate run torch: dlsim's layer graph of the same models through libtorch on CUDA;
# and packs everything into OUT/tables.tar.gz (repacked after each phase, so a run cut short
# still returns what it measured). PyTorch's steps come first: they need no build.
#
# PyTorch's wheels bundle fmt's headers ahead of the system's on the include path: where their
# version differs from the fmt library found, set CXXFLAGS_EXTRA=-DFMT_HEADER_ONLY.
#
# usage: [SKIP_STEPS=1] [CXXFLAGS_EXTRA=...] measure_tables.sh OUT DEPS_DIR [PRECISIONS] [TABLE_PRECISIONS]
#   OUT               where the results go
#   DEPS_DIR          a folder of Debian 12 .deb files for the build's libraries (yaml-cpp, fmt,
#                     CLI11, Eigen, nlohmann-json, Boost.Graph) where the system has none; "-"
#                     to use the system's
#   PRECISIONS        torch_step.py's precisions (default fp32,tf32,amp,bf16)
#   TABLE_PRECISIONS  run torch's (default: the same)
set -euo pipefail
out=$1
debs=$2
[ "$debs" = "-" ] || debs=$(cd "$debs" && pwd)
precisions=${3:-fp32,tf32,amp,bf16}
table_precisions=${4:-$precisions}
here=$(cd "$(dirname "$0")/../.." && pwd)
cnns=resnet50,vgg16,googlenet,inception_v3,alexnet,resnet101
work=/tmp/dlsim-measure
mkdir -p "$out" "$work/tables"

pack() { tar -C "$work" -czf "$out/tables.tar.gz.part" tables && mv "$out/tables.tar.gz.part" "$out/tables.tar.gz"; }
stamp() { date -u +%Y-%m-%dT%H:%M:%SZ; }

echo "== $(stamp) machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit,clocks.max.sm,clocks.max.mem \
  --format=csv | tee "$work/tables/nvidia-smi.csv"
python3 -c 'import torch, torchvision; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "torchvision", torchvision.__version__)' \
  | tee "$work/tables/versions.txt"

echo "== $(stamp) PyTorch steps"
cd "$work/tables"
if [ "${SKIP_STEPS:-0}" != 1 ]; then
PYTHONUNBUFFERED=1 python3 "$here/validate/gpu/torch_step.py" --models "$cnns" --batch 64 \
  --precisions "$precisions" --steps 20 --warmup 5 --source-id torch-step \
  --csv torch_step_cnn.csv --json torch_step_cnn.json || echo "cnn steps failed"
pack
PYTHONUNBUFFERED=1 python3 "$here/validate/gpu/torch_step.py" --models bert_base,bert_base_sdpa \
  --batch 16 --precisions "$precisions" --steps 20 --warmup 5 --source-id torch-step \
  --csv torch_step_bert.csv --json torch_step_bert.json || echo "bert steps failed"
pack
fi

echo "== $(stamp) build"
prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
if [ "$debs" != "-" ]; then
  deps=/tmp/dlsim-deps
  mkdir -p "$deps"
  for f in "$debs"/*.deb; do dpkg -x "$f" "$deps"; done
  prefix="$deps/usr;$prefix"
  export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
build=/tmp/dlsim-build
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDLSIM_BUILD_TESTS=OFF \
  -DDLSIM_WITH_TORCH=ON -DDLSIM_WITH_CUDA=OFF -DDLSIM_WITH_MPI=OFF -DDLSIM_WITH_ONNX=OFF \
  "-DCMAKE_PREFIX_PATH=$prefix" ${CXXFLAGS_EXTRA:+"-DCMAKE_CXX_FLAGS=$CXXFLAGS_EXTRA"} > "$work/tables/cmake.log" 2>&1 || { tail -30 "$work/tables/cmake.log"; pack; exit 1; }
cmake --build "$build" --target dlcalibrate --parallel > "$work/tables/build.log" 2>&1 \
  || { tail -40 "$work/tables/build.log"; pack; exit 1; }
d="$build/calibrate/dlcalibrate"
cd "$work/tables"

echo "== $(stamp) layer tables"
for p in ${table_precisions//,/ }; do
  for m in ${cnns//,/ } bert_base; do
    b=64
    [ "$m" = bert_base ] && b=16
    "$d" run torch --model "$m" --batch "$b" --device cuda --precision "$p" -w 5 -n 20 \
      -o "gpu-$m-$p.jsonl" || echo "table $m $p failed"
  done
  pack
done
echo "== $(stamp) done"
