#!/usr/bin/env bash
# The input-pipeline tools on this machine (docs/validate.md, "The input pipeline on this
# machine"): validate/torch/input_rate.py measures what one node's data loaders deliver alone,
# ddp_step.py --data trains on the same JPEG folder, and `dlsim predict --input-rate` takes the
# measured rate. Checks that each runs and reports what it should, and that bad input gets one
# line and exit 2; the timings are printed, not gated (this VM's loaders run slower inside a
# training process than alone, docs/validate.md). Exits 77 (skipped) without Debian's
# python3-torch and python3-torchvision.
# Usage: input_pipeline.sh BUILD_DIR REPO_ROOT
set -u
build=$1
root=$2
dlsim=$build/simulator/dlsim
say() { echo "input_pipeline: $*"; }
# shellcheck source=tests/debian_python.sh
source "$root/tests/debian_python.sh"
require_modules input_pipeline "python3-torch python3-torchvision python3-pil" torch torchvision PIL
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
field() { "$python" -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
# One line naming the problem, exit 2.
refuses() {
  local want=$1
  shift
  "$python" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [[ $rc -ne 2 || $(wc -l <"$tmp/err") -ne 1 ]] || ! grep -qF -- "$want" "$tmp/err"; then
    say "FAIL: $* (exit $rc): wanted one line with '$want', got: $(cat "$tmp/err")"
    fail=1
  fi
}

rate=$root/validate/torch/input_rate.py
"$python" "$rate" --data "$tmp/images" --make-images 12 --size 640x480 ||
  { say "FAIL: --make-images"; exit 1; }
[[ $(find "$tmp/images" -type f | wc -l) -eq 12 ]] || { say "FAIL: 12 images were not written"; fail=1; }
"$python" "$rate" --data "$tmp/images" --batch 4 --warmup 1 --batches 3 --workers 1 \
  >"$tmp/rate.json" || { say "FAIL: input_rate.py"; exit 1; }
r=$(field "$tmp/rate.json" samples_per_s)
if ! "$python" -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)' "$r"; then
  say "FAIL: samples_per_s $r"
  fail=1
fi
say "loaders alone: $r samples/s (1 rank, 1 worker, batch 4, 640x480 JPEGs)"

mkdir "$tmp/empty"
refuses "no JPEG files" "$rate" --data "$tmp/empty"
refuses "fewer than a batch of 64" "$rate" --data "$tmp/images" --batch 64
refuses "already exists" "$rate" --data "$tmp/images" --make-images 2
refuses "--size: expected WxH" "$rate" --data "$tmp/new" --make-images 2 --size 640
refuses "not a folder" "$rate" --data "$tmp/no-such-folder"
cp -r "$tmp/images" "$tmp/damaged"
: >"$tmp/damaged/empty.jpg"
refuses "cannot identify image file '$tmp/damaged/empty.jpg'" "$rate" --data "$tmp/damaged" \
  --batch 13 --warmup 1 --batches 1 --ranks 2
refuses "--data: $tmp/empty: no JPEG files" "$root/validate/torch/ddp_step.py" --model resnet18 \
  --data "$tmp/empty"

"$python" "$root/validate/torch/ddp_step.py" --model resnet18 --batch 4 --warmup 1 --steps 2 \
  --data "$tmp/images" --workers 1 >"$tmp/job.json" || { say "FAIL: ddp_step.py --data"; exit 1; }
[[ $(field "$tmp/job.json" data) == "$tmp/images" ]] || { say "FAIL: the job names no data"; fail=1; }
say "training on them: $(field "$tmp/job.json" step_s) s a step"

# dlsim bounds the step by the measured rate: a rate a hundredth of it leaves a step of at least
# 4 samples / (rate / 100).
slow=$("$python" -c 'import sys; print(float(sys.argv[1]) / 100)' "$r")
"$dlsim" predict --model resnet18 --gpus 1 --batch 4 --input-rate "$slow" --format json \
  -o "$tmp/predict.json" || { say "FAIL: dlsim predict --input-rate"; exit 1; }
if ! "$python" - "$tmp/predict.json" "$slow" <<'PY'; then
import json, sys
d = json.load(open(sys.argv[1]))
least = 4 / float(sys.argv[2])
ok = abs(d["step_time_s"] - least) <= 1e-9 * least and d["input_wait_s"] > 0
sys.exit(0 if ok else 1)
PY
  say "FAIL: dlsim's step is not 4 samples over $slow samples/s"
  fail=1
fi
exit $fail
