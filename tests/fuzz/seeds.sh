#!/usr/bin/env bash
# Writes the seed corpus of one fuzz target into DIR, from the repository's own fixtures, zoo,
# presets and data (docs/reliability.md). Usage: seeds.sh TARGET SOURCE_DIR DIR
set -euo pipefail
target=$1
src=$2
dir=$3
mkdir -p "$dir"
copy() { for f in "$@"; do [ -f "$f" ] && cp "$f" "$dir/$(basename "$(dirname "$f")")_$(basename "$f")"; done; return 0; }
case $target in
  model_yaml) copy "$src"/model/zoo/*.yaml "$src"/tests/bad_inputs/*.yaml "$src"/examples/*.yaml ;;
  hardware)
    # Each preset as a file named f.yaml: its name must be its file's stem.
    for f in "$src"/hardware/presets/*/*.yaml "$src"/tests/bad_hardware/*.yaml "$src"/tests/hardware/*.yaml; do
      sed 's/^name: .*/name: f/' "$f" >"$dir/$(basename "$(dirname "$f")")_$(basename "$f")"
    done ;;
  cases) copy "$src"/validate/cases/*.yaml "$src"/tests/fixtures/validate/*.yaml ;;
  csv) copy "$src"/validate/data/*.csv "$src"/tests/fixtures/validate/*.csv ;;
  onnx)
    for t in test_Conv2d test_BatchNorm2d_eval test_MaxPool2d test_Linear test_AvgPool2d test_ReLU; do
      f=/usr/share/libonnx-testdata/data/pytorch-converted/$t/model.onnx
      [ -f "$f" ] && cp "$f" "$dir/$t.onnx"
    done ;;
  nccl_tests) copy "$src"/tests/fixtures/calibrate/nccl_tests_* "$src"/tests/fixtures/logs/nccl-tests/*/*.log ;;
  osu) copy "$src"/tests/fixtures/calibrate/osu_* "$src"/tests/fixtures/logs/osu/*/*.log ;;
  nccl_topo) copy "$src"/tests/fixtures/calibrate/nccl_topo_*.xml ;;
  results) copy "$src"/tests/fixtures/calibrate/*.jsonl ;;
  framework_logs) copy "$src"/tests/fixtures/validate/logs/*.log ;;
  timeline) copy "$src"/tests/fixtures/validate/logs/timeline_*.json ;;
  hostlist)
    i=0
    for h in 'node[001-064]' 'iris-[169-184]' 'a[1-2]b[3-4]' 'gpu[01-04,10],login1' 'n[0-9]' 'x' ''; do
      printf '%s' "$h" >"$dir/hostlist$((i++))"
    done ;;
  units)
    i=0
    for u in 16GiB 900GB/s 25Gbit/s 2.5us 15.7TFLOP/s 2GFLOP 1e-3s 0B '-1MiB' 1e400B; do
      printf '%s' "$u" >"$dir/units$((i++))"
    done ;;
  *) echo "seeds.sh: unknown target '$target'" >&2; exit 2 ;;
esac
[ -n "$(ls -A "$dir")" ] || { echo "seeds.sh: no seeds for $target" >&2; exit 2; }
