#!/usr/bin/env bash
# Every bad input must give exactly one error line naming the problem, exit code 2, and no
# output file. Usage: cli_bad_inputs.sh DLSIM BAD_MODEL_DIR BAD_HARDWARE_DIR TEST_HARDWARE_DIR
set -u
dlsim=$1
dir=$2
hwdir=$3
fixtures=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
checked=0

expect_failure() {  # expect_failure "substring" args...
  local want=$1
  shift
  local out="$tmp/out.json"
  rm -f "$out"
  "$dlsim" "$@" -o "$out" >"$tmp/stdout" 2>"$tmp/stderr"
  local rc=$?
  local lines
  lines=$(wc -l <"$tmp/stderr")
  checked=$((checked + 1))
  if [ "$rc" -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -qF -- "$want" "$tmp/stderr" ||
     [ -e "$out" ] || [ -s "$tmp/stdout" ]; then
    echo "FAIL: dlsim $* (exit $rc, $lines stderr lines, output file $( [ -e "$out" ] && echo present || echo absent))"
    echo "  wanted: $want"
    sed 's/^/  got:    /' "$tmp/stderr"
    failures=$((failures + 1))
  fi
}

for f in "$dir"/*.yaml; do
  want=$(sed -n '1s/^# expect: //p' "$f")
  expect_failure "$want" model show "$f" --format json
done
for f in "$hwdir"/*.yaml; do
  want=$(sed -n '1s/^# expect: //p' "$f")
  expect_failure "$want" hardware show "$f" --format json
done
expect_failure "unknown hardware preset 'dgx1-v10'; did you mean 'dgx1-v100'" hardware show dgx1-v10
expect_failure "names a node and a cluster; say which with --kind" hardware show dgx1-p100
expect_failure "unknown cluster preset 'defualt'; did you mean 'default'" collective --gpus 8 --cluster defualt
expect_failure "--gpus: 65 GPUs requested, but cluster 'default' has at most 64" collective --gpus 65
expect_failure "--gpus: Value -4 not in range 1 to 1048576" collective --gpus -4
expect_failure "--bytes: '12' has no unit" collective --gpus 8 --bytes 12
expect_failure "--bytes: unknown unit 'GiBs'" collective --gpus 8 --bytes 1MiB:1GiBs
expect_failure "unknown collective algorithm 'rign'; did you mean 'ring'" collective --gpus 8 --algo rign
expect_failure "unknown operation 'allreduse'; did you mean 'allreduce'" collective --gpus 8 --op allreduse
expect_failure "'tree' does not implement alltoall" collective --gpus 8 --algo tree --op alltoall
expect_failure "--gpus: Value 0 not in range 1 to 1048576" predict --model googlenet --gpus 0
expect_failure "--gpus: 65 GPUs requested, but cluster 'default' has at most 64" predict --model googlenet --gpus 65
expect_failure "unknown model 'googlenett'" predict --model googlenett --gpus 8
expect_failure "unknown framework 'horovd'; did you mean 'horovod'" predict --model resnet50 --gpus 8 --framework horovd
expect_failure "unknown collective algorithm 'rign'; did you mean 'ring'" predict --model resnet50 --gpus 8 --strategy rign
expect_failure "--batch: batch 4096 needs" predict --model resnet50 --gpus 8 --batch 4096
expect_failure "--batch: must be a positive integer (at most 16777216) or 'max', got '-3'" predict --model resnet50 --gpus 8 --batch -3
expect_failure "--cycle-time: does not apply to framework 'pytorch-ddp'" predict --model resnet50 --gpus 8 --framework pytorch-ddp --cycle-time 5ms
expect_failure "--fusion-threshold: '64' has no unit" predict --model resnet50 --gpus 8 --fusion-threshold 64
expect_failure "tf-replicated runs inside one node" predict --model resnet50 --gpus 8 --framework tf-replicated
expect_failure "--engine: unknown engine 'fast'" predict --model resnet50 --gpus 8 --engine fast
expect_failure "--precision: unknown precision 'fp8'" predict --model resnet50 --gpus 8 --precision fp8
expect_failure "--anchor-throughput: must be positive" predict --model resnet50 --gpus 8 --anchor-throughput -5
expect_failure "--gpus: expected an integer, got 'x'" scale --model resnet50 --gpus 1,x
expect_failure "unknown collective algorithm 'pss'" compare --model resnet50 --gpus 8 --strategy ring,pss
expect_failure "hd allgather needs a power-of-two number of ranks, got 6" collective --gpus 6 --algo hd --op allgather
expect_failure "hierarchical allreduce needs the same number of GPUs on every node" collective --gpus 6 --algo hierarchical
expect_failure "--nodelist: host 'iris-185' is not in cluster 'default'" collective --gpus 8 --nodelist iris-[184-185]
expect_failure "--gpus-per-node: 5 GPUs per node, but node 'iris-169' has 4" collective --gpus 8 --gpus-per-node 5
expect_failure "node 'two-gpus': gpu0 cannot reach gpu1" collective --gpus 2 --cluster "$fixtures/unreachable.yaml"
expect_failure "need 32 free nodes" collective --gpus 64 --algo ps --ps-servers 32
expect_failure "unknown model 'googlenett'; did you mean 'googlenet'" model show googlenett
expect_failure "--batch: must be a positive integer, got -3" model show googlenet --batch -3
expect_failure "--batch: must be a positive integer, got 0" model show googlenet --batch 0
expect_failure "unknown precision 'fp8'" model show googlenet --precision fp8
expect_failure "model 'gpt2' has no parameter 'seqlen'; did you mean 'seq_len'" model show gpt2 --set seqlen=64
expect_failure "expected NAME=VALUE" model show gpt2 --set seq_len
expect_failure "'layers[0].shape[0]': expected an integer, got 'long'" model show gpt2 --set seq_len=long
expect_failure "--format" model show googlenet --format xml
expect_failure "no such file" model show ./missing.yaml

echo "$((checked - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
