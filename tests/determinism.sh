#!/usr/bin/env bash
# Same inputs, same outputs: every output file of dlsim, dlcalibrate fit/show and dlvalidate
# published, made twice in two scratch folders, is byte for byte the same.
# Usage: determinism.sh DLSIM DLCALIBRATE DLVALIDATE SOURCE_DIR
set -u
dlsim=$1
dlcal=$2
dlval=$3
src=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fx=$src/tests/fixtures/calibrate

run_all() {  # run_all DIR
  local d=$1
  mkdir -p "$d/svg"
  (
    cd "$d" || exit 1
    "$dlsim" predict --model resnet50 --gpus 64 --format json -o predict.json --trace trace.json
    "$dlsim" predict --model googlenet --gpus 64 -o predict.txt
    "$dlsim" predict --model vgg16 --gpus 16 --framework tf-ps --format csv -o predict.csv
    "$dlsim" scale --model resnet101 --gpus 1,2,4,8,16 --plot scale.svg -o scale.txt
    "$dlsim" compare --model vgg16 --gpus 32 --strategy ring,tree,ps --format json -o compare.json
    "$dlsim" collective --gpus 16 --cluster dgx1-v100 --bytes 8B:1GiB --format json -o coll.json
    "$dlsim" model show bert_base --format json -o model.json
    "$dlsim" hardware show default --format json -o hw.json
    "$dlcal" import nccl-tests "$fx/nccl_tests_allreduce_2x4.txt" -o nccl.jsonl
    "$dlcal" show "$fx/results_one_allreduce.jsonl" -o show.txt
    "$dlval" published --data "$src/validate/data/throughput.csv" \
      --data "$src/validate/data/scaling_claims.csv" \
      --cases "$src/validate/cases/dle_pyt_rn50_2103.yaml" --cases "$src/validate/cases/horovod_docs.yaml" \
      -o report.md --json report.json --html report.html --svg-dir svg
  ) >"$d.log" 2>&1 || { echo "FAIL: a command failed in $d"; cat "$d.log"; exit 1; }
}

run_all "$tmp/a"
run_all "$tmp/b"
failures=0
files=0
while IFS= read -r f; do
  files=$((files + 1))
  if ! cmp -s "$tmp/a/$f" "$tmp/b/$f"; then
    echo "FAIL: $f differs between two runs"
    diff "$tmp/a/$f" "$tmp/b/$f" | head -5
    failures=$((failures + 1))
  fi
done < <(cd "$tmp/a" && find . -type f | sort)
echo "$files output files compared, $failures differ"
[ "$files" -ge 15 ] && [ "$failures" -eq 0 ]
