#!/usr/bin/env bash
# The dlsim commands a user meets first produce the documented output.
# Usage: cli_smoke.sh DLSIM SOURCE_DIR
set -u
dlsim=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
checked=0
check() {  # check "description" command...
  local what=$1
  shift
  checked=$((checked + 1))
  if ! "$@"; then
    echo "FAIL: $what"
    failures=$((failures + 1))
  fi
}

"$dlsim" model list >"$tmp/list" 2>&1
check "model list names googlenet with its parameters" grep -qE '^googlenet +6624904 +1\.498' "$tmp/list"
check "model list has 15 models" test "$(grep -c '^[a-z]' "$tmp/list")" -eq 16

"$dlsim" model show googlenet --batch 32 --format json -o "$tmp/g.json"
check "json has params" grep -q '"params": 6624904' "$tmp/g.json"
check "json has the batch" grep -q '"batch": 32' "$tmp/g.json"
for key in name params forward_macs forward_flops backward_flops activation_bytes layers \
           output_shape context gradients; do
  check "json has $key" grep -q "\"$key\"" "$tmp/g.json"
done

"$dlsim" model show resnet50 --format csv >"$tmp/r.csv"
check "csv header" grep -q '^name,op,output_shape,params,forward_macs' "$tmp/r.csv"
check "csv has fc" grep -q '^fc,linear,1x1000,2049000,' "$tmp/r.csv"

"$dlsim" model show inception_v3 --set aux_logits=false >"$tmp/i.txt"
check "inception without aux" grep -qE '^total .* 23834568 ' "$tmp/i.txt"

"$dlsim" model show bert_base --set seq_len=512 --precision fp16 >"$tmp/b.txt"
check "bert at 512 tokens" grep -q 'input_ids .* 1x512 ' "$tmp/b.txt"

"$dlsim" model ops >"$tmp/ops"
check "ops lists conv2d" grep -q '^conv2d ' "$tmp/ops"

# The example in docs/model-format.md is a working model file.
awk '/^```yaml/{f=1;next}/^```/{if(f)exit}f' "$src/docs/model-format.md" >"$tmp/tiny.yaml"
"$dlsim" model show "$tmp/tiny.yaml" --set width=32 >"$tmp/tiny.txt"
check "docs example loads" grep -qE '^total +35 layers +76490 ' "$tmp/tiny.txt"

"$dlsim" hardware list >"$tmp/hw"
check "hardware list has the default cluster" grep -qE '^cluster +default ' "$tmp/hw"
"$dlsim" hardware show v100-sxm2-32gb >"$tmp/v100.txt"
check "extends resolved" grep -q 'capacity: 32 GiB' "$tmp/v100.txt"
"$dlsim" hardware show default --format json -o "$tmp/default.json"
check "cluster json has units in keys" grep -q '"bandwidth_bytes_per_s"' "$tmp/default.json"

"$dlsim" collective --gpus 8 --cluster dgx1-p100 --bytes 1MB:1GB:x2 >"$tmp/coll.txt"
check "collective prints one row per size" test "$(grep -c '^ ' "$tmp/coll.txt")" -eq 10
check "collective names the bottleneck" grep -q 'bound by' "$tmp/coll.txt"
"$dlsim" collective --gpus 64 --algo tree --bytes 8B --format csv >"$tmp/coll.csv"
check "collective csv" grep -q '^size_bytes,count_elements,time_us' "$tmp/coll.csv"
# nccl-tests' count column: each rank's share for reducescatter; sizes under one element per
# rank (8 and 16 B on 8 GPUs) are left out, and the table says so.
"$dlsim" collective --gpus 8 --op reducescatter --bytes 8B:1KiB --format csv >"$tmp/rs.csv"
check "reducescatter counts per rank" grep -q '^1024,32,' "$tmp/rs.csv"
check "reducescatter starts at one element per rank" grep -q '^32,1,' "$tmp/rs.csv"
check "reducescatter leaves out 8 and 16 B" test "$(grep -c '^[0-9]' "$tmp/rs.csv")" -eq 6
"$dlsim" collective --gpus 8 --op reducescatter --bytes 8B:1KiB >"$tmp/rs.txt"
check "the table names what it left out" grep -q '^# 2 size(s) from 8 B to 16 B left out' "$tmp/rs.txt"
"$dlsim" collective --gpus 16 --algo ps --ps-servers 2 --bytes 64MiB --format json >"$tmp/ps.json"
check "ps json" grep -q '"push gradients"' "$tmp/ps.json"

"$dlsim" predict --model googlenet --gpus 64 >"$tmp/predict.txt"
check "predict prints throughput and why" grep -q 'samples/s' "$tmp/predict.txt"
"$dlsim" predict --model resnet50 --gpus 8 --format json -o "$tmp/p.json" --trace "$tmp/trace.json"
check "predict json has units in keys" grep -q '"step_time_s"' "$tmp/p.json"
check "trace has Horovod's span names" grep -q 'NCCL_ALLREDUCE' "$tmp/trace.json"
check "trace names the nodes" grep -q '"process_name"' "$tmp/trace.json"
"$dlsim" scale --model resnet50 --gpus 1,2,4,8,16 --plot "$tmp/scale.svg" >"$tmp/scale.txt"
check "scale prints one row per count" test "$(grep -cE '^ +[0-9]+ ' "$tmp/scale.txt")" -eq 5
check "scale plot is svg" grep -q '<svg' "$tmp/scale.svg"
# A range doubles from MIN to MAX, as collective's --bytes; items mix with single counts.
"$dlsim" scale --model resnet50 --gpus 3,1:8,6:24:x4 --engine analytic --format csv >"$tmp/range.csv"
check "scale expands ranges" test "$(cut -d, -f2 "$tmp/range.csv" | tail -n +2 | tr '\n' ' ')" = "3 1 2 4 8 6 24 "
"$dlsim" compare --model vgg16 --gpus 16 --strategy ring,ps,hierarchical >"$tmp/compare.txt"
check "compare names a winner" grep -q ' wins: ' "$tmp/compare.txt"

"$dlsim" --version >"$tmp/v"
check "version" grep -q '^dlsim [0-9]' "$tmp/v"

echo "$((checked - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
