#!/usr/bin/env bash
# dlcalibrate run gpu on this machine, with or without a GPU.
#   - No GPU (nvidia-smi absent or listing none, and no /proc/driver/nvidia/gpus): `run gpu` must
#     give exactly one error line saying there is no usable CUDA GPU, exit code 2, and create no
#     results file.
#   - A GPU: a small real sweep (copy, launch, and gemm at resnet18's shapes) must write records
#     of each op on backend cuda that `dlcalibrate show` reads back.
# Usage: calibrate_gpu.sh DLCALIBRATE
set -u
dlcal=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out="$tmp/gpu.jsonl"

has_gpu() {
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    return 0
  fi
  compgen -G '/proc/driver/nvidia/gpus/*' >/dev/null
}

if ! has_gpu; then
  "$dlcal" run gpu -o "$out" >"$tmp/stdout" 2>"$tmp/stderr"
  rc=$?
  lines=$(wc -l <"$tmp/stderr")
  if [ "$rc" -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -qF "no usable CUDA GPU" "$tmp/stderr" ||
    [ -e "$out" ]; then
    echo "FAIL: dlcalibrate run gpu without a GPU (exit $rc, $lines stderr lines, output" \
      "$([ -e "$out" ] && echo present || echo absent))"
    sed 's/^/  got: /' "$tmp/stderr"
    exit 1
  fi
  echo "calibrate_gpu: no GPU here; run gpu says so in one line and exits 2:"
  cat "$tmp/stderr"
  exit 0
fi

nvidia-smi -L 2>/dev/null || true
if ! "$dlcal" run gpu --ops copy,launch,gemm --model resnet18 -n 2 -w 1 -b 1MiB -e 64MiB \
  -o "$out"; then
  echo "FAIL: dlcalibrate run gpu exited $? on a machine with a GPU"
  exit 1
fi
for op in copy launch gemm; do
  n=$(grep -cE "\"op\": ?\"$op\"" "$out")
  if [ "$n" -lt 1 ]; then
    echo "FAIL: no $op record in $out"
    exit 1
  fi
  echo "calibrate_gpu: $n $op record(s)"
done
if ! grep -qE '"backend": ?"cuda"' "$out"; then
  echo "FAIL: no record on backend cuda"
  exit 1
fi
"$dlcal" show "$out" >"$tmp/show.txt" || { echo "FAIL: dlcalibrate show cannot read $out"; exit 1; }
echo "calibrate_gpu: records written and read back"
