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
expect_failure "--framework: unknown framework 'horovd'; did you mean 'horovod'" predict --model resnet50 --gpus 8 --framework horovd
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
expect_failure "layer_table_relu.yaml: node.gpu.layers: no layer of resnet50 in fp32 at 1 thread(s) is in the profile's layer table (a test)" predict --model resnet50 --gpus 1 --cluster "$fixtures/layer_table_relu.yaml"
expect_failure "need 32 free nodes" collective --gpus 64 --algo ps --ps-servers 32
expect_failure "unknown model 'googlenett'; did you mean 'googlenet'" model show googlenett
expect_failure "--batch: must be a positive integer, got -3" model show googlenet --batch -3
expect_failure "--batch: must be a positive integer, got 0" model show googlenet --batch 0
expect_failure "unknown precision 'fp8'" model show googlenet --precision fp8
expect_failure "model 'gpt2' has no parameter 'seqlen'; did you mean 'seq_len'" model show gpt2 --set seqlen=64
expect_failure "expected NAME=VALUE" model show gpt2 --set seq_len
expect_failure "--set: seq_len=long does not fit model 'gpt2': model/zoo/gpt2.yaml" model show gpt2 --set seq_len=long
expect_failure "--set: seq_len=0 does not fit model 'bert_base': " predict --model bert_base --gpus 8 --set seq_len=0
expect_failure "--set: seq_len=600 does not fit model 'bert_base': " predict --model bert_base --gpus 8 --set seq_len=600
expect_failure "--format" model show googlenet --format xml
expect_failure "no such file" model show ./missing.yaml

# Every quantity and count of predict/scale/compare, refused where it is parsed.
p=(predict --model resnet50 --gpus 8)
expect_failure "--fusion-threshold: '-1MiB' is negative" "${p[@]}" --fusion-threshold -1MiB
expect_failure "--fusion-threshold: 'nanMiB' is not a size" "${p[@]}" --fusion-threshold nanMiB
expect_failure "--fusion-threshold: '1e400MiB' is out of range" "${p[@]}" --fusion-threshold 1e400MiB
expect_failure "--fusion-threshold: unknown unit 'EiB' in '2EiB'" "${p[@]}" --fusion-threshold 2EiB
expect_failure "--fusion-threshold: '2e18B' is out of range for a size" "${p[@]}" --fusion-threshold 2e18B
expect_failure "--cycle-time: '-1ms' is negative" "${p[@]}" --cycle-time -1ms
expect_failure "--cache-capacity: 100 entries of a response cache that gather negotiation does not have" "${p[@]}" --negotiation gather --cache-capacity 100
expect_failure "--strategy: unknown collective algorithm 'rign'; did you mean 'ring'?" "${p[@]}" --strategy rign
expect_failure "--strategy: 'horovod+fp16+fp16': '+fp16' is given twice" compare --model resnet50 --gpus 8 --strategy ring,horovod+fp16+fp16
expect_failure "--algo: unknown collective algorithm 'rign'" collective --gpus 8 --bytes 1MiB --algo rign
expect_failure "--cycle-time: '1e9s' is out of range for a duration" "${p[@]}" --cycle-time 1e9s
expect_failure "--bucket-cap: must be positive" "${p[@]}" --framework pytorch-ddp --bucket-cap 0B
expect_failure "--bucket-cap: 'infMiB' is not a size" "${p[@]}" --framework pytorch-ddp --bucket-cap infMiB
expect_failure "--first-bucket: must be positive" "${p[@]}" --framework pytorch-ddp --first-bucket 0MiB
expect_failure "--iterations: Value 0 not in range" "${p[@]}" --iterations 0
expect_failure "--iterations: Value -3 not in range" "${p[@]}" --iterations -3
expect_failure "--iterations: Value 99999999999 not in range 1 to 1000" "${p[@]}" --iterations 99999999999
expect_failure "--iterations: Value 1001 not in range 1 to 1000" "${p[@]}" --iterations 1001
# Past the clock: the analytic engine, which runs no clock, refuses it as the DES does.
expect_failure "step: the simulated step would reach 1e+06 s, past the simulator's clock" "${p[@]}" --engine analytic --cycle-time 1e6s
expect_failure "--bytes: 1 EiB takes 1.7e+08 s here, past the 1e+06 s of any time dlsim reports" collective --gpus 8 --bytes 1152921504606846976B
expect_failure "--seed: must be an integer in 0..18446744073709551615, got '-1'" "${p[@]}" --seed -1
expect_failure "--seed" "${p[@]}" --seed x
expect_failure "--gpus-per-node: Value 0 not in range" "${p[@]}" --gpus-per-node 0
expect_failure "--gpus-per-node: Value -2 not in range" "${p[@]}" --gpus-per-node -2
expect_failure "--anchor-throughput: must be positive samples/s, got nan" "${p[@]}" --anchor-throughput nan
expect_failure "--anchor-throughput: must be positive samples/s, got inf" "${p[@]}" --anchor-throughput inf
expect_failure "--input-rate: must be positive samples/s per node, at most 1e+09, got 0" "${p[@]}" --input-rate 0
expect_failure "--input-rate: must be positive samples/s per node, at most 1e+09, got nan" "${p[@]}" --input-rate nan
expect_failure "--input-rate: 1e-05 samples/s per node makes a step of at least 1.28e+07 s (128 samples a node): 5 step(s) pass the simulator's clock" predict --model resnet50 --gpus 8 --input-rate 1e-5
expect_failure "--input-rate: must be positive samples/s per node, at most 1e+09, got -5" compare --model resnet50 --gpus 8 --strategy ring,ps --input-rate -5
expect_failure "--anchor-throughput: must be positive samples/s, got 0" "${p[@]}" --anchor-throughput 0
expect_failure "--anchor-throughput" "${p[@]}" --anchor-throughput 1e999
expect_failure "--gpu-speed: rank 8 is not in a job of 8 GPU(s)" predict --model resnet50 --gpus 8 --gpu-speed 8=0.5
expect_failure "--gpu-speed: rank 2's speed must be in [0.001, 4]" predict --model resnet50 --gpus 8 --gpu-speed 2=0
expect_failure "--gpu-speed: rank 0's speed must be in [0.001, 4] of its profile's, got 1e-300" predict --model resnet50 --gpus 8 --gpu-speed 0=1e-300
expect_failure "--anchor-throughput: must be positive samples/s, at least 0.001 and at most 1e+09, got 1e-300" predict --model resnet50 --gpus 8 --anchor-throughput 1e-300
expect_failure "--gpu-speed: rank 2's speed must be a number" predict --model resnet50 --gpus 8 --gpu-speed 2=nan
expect_failure "--gpu-speed: expected RANK=SPEED" predict --model resnet50 --gpus 8 --gpu-speed 0.5
expect_failure "--gpu-speed: rank 2 is given twice" predict --model resnet50 --gpus 8 --gpu-speed 2=0.5 --gpu-speed 2=0.7
expect_failure "--batch: must be a positive integer (at most 16777216) or 'max', got '0'" "${p[@]}" --batch 0
expect_failure "--batch: must be a positive integer (at most 16777216) or 'max', got '1e3'" "${p[@]}" --batch 1e3
expect_failure "--batch: must be a positive integer (at most 16777216) or 'max', got '99999999999999999999'" "${p[@]}" --batch 99999999999999999999
expect_failure "--ps-servers: Value 0 not in range" "${p[@]}" --framework tf-ps --ps-servers 0
expect_failure "--ps-servers: Value -1 not in range" "${p[@]}" --framework tf-ps --ps-servers -1
expect_failure "--ps-servers: Value 2.5 not in range" "${p[@]}" --framework tf-ps --ps-servers 2.5
expect_failure "--ps-placement: unknown placement 'remote'" "${p[@]}" --framework tf-ps --ps-placement remote
expect_failure "--partition: must be positive, got '0B'" "${p[@]}" --framework byteps --partition 0B
expect_failure "--partition: '-4MB' is negative" "${p[@]}" --framework byteps --partition -4MB
expect_failure "--partition: 'abc' is not a size" "${p[@]}" --framework byteps --partition abc
expect_failure "--partition: does not apply to framework 'horovod'" "${p[@]}" --framework horovod --partition 4MB
expect_failure "--strategy: byteps exchanges through parameter servers only, not 'ring'" "${p[@]}" --framework byteps --strategy ring
expect_failure "--ps-servers: 20 dedicated servers need 20 free nodes" predict --model resnet50 --gpus 16 --framework byteps --ps-servers 20
expect_failure "--ps-servers: does not apply to framework 'byteps on one node" predict --model resnet50 --gpus 4 --framework byteps --ps-servers 2
expect_failure "--ps-servers: Value 0 not in range" "${p[@]}" --framework byteps --ps-servers 0
expect_failure "Could not convert: --no-overlap = maybe" "${p[@]}" --no-overlap=maybe
expect_failure "--xla: does not apply to framework 'pytorch-ddp'" "${p[@]}" --framework pytorch-ddp --xla
expect_failure "--xla: does not apply to framework 'tf-ps'" "${p[@]}" --framework tf-ps --xla
expect_failure "Could not convert: --xla = maybe" "${p[@]}" --xla=maybe
expect_failure "--host-staging: Horovod allreduces in host memory with MPI, not NCCL: give --library mpi" "${p[@]}" --host-staging
expect_failure "--host-staging: does not apply to framework 'byteps'" "${p[@]}" --framework byteps --host-staging
expect_failure "--ps-device: unknown device 'tpu'" "${p[@]}" --framework tf-ps --ps-device tpu
expect_failure "--mode: unknown tf-ps mode 'bogus'" "${p[@]}" --framework tf-ps --mode bogus
expect_failure "--optimizer: unknown optimizer 'lamb'" "${p[@]}" --optimizer lamb
expect_failure "--set: expected NAME=VALUE, got '=3'" "${p[@]}" --set =3
expect_failure "model 'resnet50' has no parameter 'seq_len'" "${p[@]}" --set seq_len=64
expect_failure "--format: unknown format 'xml'" "${p[@]}" --format xml
expect_failure "--gpus: must be in 1..1048576, got 0" scale --model resnet50 --gpus 1,0
expect_failure "--gpus: an empty item in '1,,2'" scale --model resnet50 --gpus 1,,2
expect_failure "--gpus: an empty value" scale --model resnet50 --gpus ""
expect_failure "--gpus: range '8:2' runs backwards" scale --model resnet50 --gpus 8:2
expect_failure "--gpus: expected MIN:MAX or MIN:MAX:xF, got '1:8:2'" scale --model resnet50 --gpus 1:8:2
expect_failure "--gpus: step 'x1' must be xF with F >= 2 (e.g. x2)" scale --model resnet50 --gpus 1:8:x1
expect_failure "--strategy: an empty name in 'ring,,ps'" compare --model resnet50 --gpus 8 --strategy ring,,ps
expect_failure "--bytes: '0B': a size must be positive" collective --gpus 8 --bytes 0B
expect_failure "--bytes: 1 B holds less than one 4-byte element per rank for reducescatter on 8 GPUs (sizes are nccl-tests': the smallest here is 32 B)" collective --gpus 8 --op reducescatter --bytes 1B
expect_failure "--bytes: 2 B holds less than one 4-byte element per rank for allreduce on 8 GPUs" collective --gpus 8 --bytes 1B:2B
expect_failure "--bytes: '-1MiB' is negative" collective --gpus 8 --bytes -1MiB
expect_failure "--bytes: '0.4B' is below the smallest nonzero size (1 B)" collective --gpus 8 --bytes 0.4B:1KiB
expect_failure "--bytes: MAX is smaller than MIN" collective --gpus 8 --bytes 1MiB:1KiB
expect_failure "--bytes: step 'x1' must be xF with F > 1" collective --gpus 8 --bytes 1MiB:1GiB:x1
expect_failure "--bytes: step 'xnan' must be xF with F > 1" collective --gpus 8 --bytes 1MiB:1GiB:xnan
expect_failure "--bytes: more than 4096 sizes" collective --gpus 8 --bytes 1B:1TiB:x1.001
expect_failure "--root: rank 8 is not in 0..7" collective --gpus 8 --root 8 --op broadcast
expect_failure "--ps-servers: Value 0 not in range" collective --gpus 8 --algo ps --ps-servers 0
expect_failure "--ps-placement: unknown placement 'remote'" collective --gpus 8 --algo ps --ps-placement remote
expect_failure "--gpus-per-node: Value 0 not in range" collective --gpus 8 --gpus-per-node 0
expect_failure "--batch: must be at most 16777216, got 99999999999999" model show resnet50 --batch 99999999999999
expect_failure "--kind: gpus not in {gpu,node,network,library,cluster}" hardware list --kind gpus
# The collective library and its rails (docs/networks.md, "NCCL's choices").
expect_failure "--rails: 9 rails, but node 'dgx-a100' has 8 NICs" predict --model resnet50 --gpus 16 --cluster dgx-a100 --rails 9
expect_failure "--rails: 5 rails, but node 'dgx1-v100' has 4 NICs" collective --gpus 16 --cluster dgx1-v100 --rails 5
expect_failure "--rails: Value 0 not in range" collective --gpus 16 --cluster dgx-a100 --rails 0
expect_failure "unknown library preset 'nccl-2.12'; did you mean 'nccl', 'nccl-2.3' or 'nccl-1'?" predict --model resnet50 --gpus 8 --library nccl-2.12
expect_failure "unknown library preset 'nccl-2.99'" collective --gpus 8 --library nccl-2.99
expect_failure "--algo: 'tree' does not implement allreduce with mpi; algorithms that do: auto, hd, hierarchical, ps, ring" collective --gpus 8 --library mpi --algo tree
expect_failure "--algo: NCCL's 'nvls' cannot run allreduce here: NVLS needs Hopper GPUs" collective --gpus 16 --cluster dgx-a100 --algo nvls --bytes 1MiB
expect_failure "--gpus-per-thread: 8 GPUs do not split into threads of 3" collective --gpus 8 --gpus-per-thread 3
expect_failure "--gpus-per-thread: Value 0 not in range" collective --gpus 8 --gpus-per-thread 0
expect_failure "--mode: unknown tf-replicated mode 'nccl2' (nccl, copy)" predict --model resnet50 --gpus 4 --framework tf-replicated --mode nccl2
expect_failure "--ps-servers: does not apply to framework 'tf-replicated copy'" predict --model resnet50 --gpus 4 --framework tf-replicated --mode copy --ps-servers 2

# Inputs that once crashed, hung or were silently ignored.
expect_failure "--bytes: an empty value" collective --gpus 8 --bytes ""
expect_failure "--bytes: expected SIZE, MIN:MAX or MIN:MAX:xFACTOR, got '1:2:x2:4'" collective --gpus 8 --bytes 1:2:x2:4
expect_failure "--bytes: '' is not a size" collective --gpus 8 --bytes 1KiB:
expect_failure "--bytes: '1.5B' is 1.5 B, not a whole number of bytes" collective --gpus 8 --bytes 1.5B
expect_failure "--partition: 1 B cuts gradient 'fc.weight' (8192000 B) into 8192000 partitions" predict --model resnet50 --gpus 8 --framework byteps --partition 1B
expect_failure "--ps-servers: 1048576 colocated servers on 2 worker node(s): at most 64 per node" collective --gpus 8 --algo ps --ps-servers 1048576 --ps-placement colocated
expect_failure "--ps-servers: applies to parameter servers, and horovod with strategy 'auto' has none" predict --model resnet50 --gpus 8 --ps-servers 4
expect_failure "--ps-servers: applies to --algo ps only, not 'auto'" collective --gpus 8 --ps-servers 4
expect_failure "--ps-sharding: unknown sharding 'bogus'" collective --gpus 8 --algo ps --ps-sharding bogus
expect_failure "--root: applies to broadcast and reduce only, not allreduce" collective --gpus 8 --root 3
expect_failure "--set: 'seq_len' is given twice" model show gpt2 --set seq_len=64 --set seq_len=128
expect_failure "--gpus: 2 GPUs appear twice in '1,2,2'" scale --model resnet50 --gpus 1,2,2
expect_failure "--gpus: an empty item in '1,2,'" scale --model resnet50 --gpus 1,2,
expect_failure "--gpus: '08' is not a whole number written in decimal digits (a leading zero)" scale --model resnet50 --gpus 1,08
expect_failure "--strategy: an empty name in 'ring,'" compare --model resnet50 --gpus 8 --strategy ring,
expect_failure "--cycle-time: '1e-20ms' is below the smallest nonzero duration" predict --model resnet50 --gpus 8 --cycle-time 1e-20ms
expect_failure "--anchor-throughput: must be positive samples/s, at least 0.001 and at most 1e+09" predict --model resnet50 --gpus 8 --anchor-throughput 1e308
expect_failure "--mode: an empty value" predict --model resnet50 --gpus 8 --mode ""
expect_failure "--cluster: unknown cluster preset 'dgx9'" predict --model resnet50 --gpus 8 --cluster dgx9
expect_failure "--network: network file 'no/such.yaml' not found" predict --model resnet50 --gpus 8 --network no/such.yaml
expect_failure "--strategy: NCCL's 'nvls' cannot run allreduce here: NVLS needs Hopper GPUs" predict --model resnet50 --gpus 16 --cluster dgx-a100 --strategy nvls
expect_failure "two of the outputs would be written to this one file" predict --model resnet50 --gpus 8 --trace "$tmp/out.json"
# The same file spelled two ways, relative to the working folder and not there yet.
mkdir -p "$tmp/rel"
(cd "$tmp/rel" && "$dlsim" predict --model resnet50 --gpus 8 -o ./same.txt --trace same.txt \
  >"$tmp/stdout" 2>"$tmp/stderr")
rc=$?
checked=$((checked + 1))
if [ "$rc" -ne 2 ] || [ -e "$tmp/rel/same.txt" ] ||
   ! grep -qF "./same.txt: two of the outputs would be written to this one file" "$tmp/stderr"; then
  echo "FAIL: -o ./same.txt --trace same.txt (exit $rc): $(cat "$tmp/stderr")"
  failures=$((failures + 1))
fi
expect_failure "--gpus: '0x10' is not a whole number written in decimal digits" predict --model resnet50 --gpus 0x10
expect_failure "--anchor-throughput: '0x10' is not a number written in decimal digits" predict --model resnet50 --gpus 8 --anchor-throughput 0x10
expect_failure "--gpus: '010' is not a whole number written in decimal digits" predict --model resnet50 --gpus 010
mkdir -p "$tmp/cycle"
printf 'kind: cluster\nname: loop\nextends: ./loop.yaml\n' >"$tmp/cycle/loop.yaml"
expect_failure "extends: cycle: $tmp/cycle/loop.yaml -> $tmp/cycle/loop.yaml" predict --model resnet50 --gpus 8 --cluster "$tmp/cycle/loop.yaml"
mkdir -p "$tmp/slow"
printf 'kind: network\nname: slow\ndescription: one bit per second\nsource: tests\nextends: 10gbe\nport: {bandwidth: "10bit/s", latency: "1us"}\n' >"$tmp/slow/slow.yaml"
expect_failure "'port.bandwidth': '10bit/s' is below the smallest nonzero bandwidth (1000 B/s)" predict --model resnet50 --gpus 8 --network "$tmp/slow/slow.yaml"
printf 'kind: network\nname: slow2\ndescription: a latency of 11 days\nsource: tests\nextends: 10gbe\nport: {bandwidth: "10Gbit/s", latency: "1e6s"}\n' >"$tmp/slow/slow2.yaml"
expect_failure "step: the simulated step would reach" predict --model resnet50 --gpus 8 --network "$tmp/slow/slow2.yaml"
# Nesting past yaml-cpp's limit: named as such, not as yaml-cpp's "bad file".
python3 -c "print('kind: cluster\\nname: deep\\nnode: ' + '[' * 3000 + ']' * 3000)" >"$tmp/deep.yaml"
expect_failure "deep.yaml:3:" hardware show "$tmp/deep.yaml"
expect_failure "malformed YAML: nested more than 500 levels deep" hardware show "$tmp/deep.yaml"
printf 'name: bomb\ndescription: d\nsource: s\nparams:\n  a0: &a0 [1, 1]\n  a1: &a1 [*a0, *a0]\nlayers:\n  - {name: data, op: input, shape: [3]}\n' >"$tmp/slow/bomb.yaml"
expect_failure "'params.a0': a model parameter must be a single value" model show "$tmp/slow/bomb.yaml"

# Outputs of one command appear together or not at all: an output that cannot be written (a
# missing folder) leaves no trace file or plot behind.
for cmd in "predict --model resnet50 --gpus 8 --trace $tmp/side.json" \
  "scale --model resnet50 --gpus 1,2 --engine analytic --plot $tmp/side.json"; do
  rm -f "$tmp/side.json"
  # shellcheck disable=SC2086
  "$dlsim" $cmd -o "$tmp/missing/out.txt" >"$tmp/stdout" 2>"$tmp/stderr"
  rc=$?
  checked=$((checked + 1))
  if [ "$rc" -ne 2 ] || [ -e "$tmp/side.json" ] || [ "$(wc -l <"$tmp/stderr")" -ne 1 ]; then
    echo "FAIL: dlsim $cmd -o missing/out.txt left a file or exited $rc"
    failures=$((failures + 1))
  fi
done
# A control byte from the input reaches the error line escaped, so the message stays one line.
mkdir -p "$tmp/ctl"
printf 'kind: network\nname: ib-edr\nextends: ib-edr\n"swi\\ntch_latency": "0.1us"\n' >"$tmp/ctl/ib-edr.yaml"
expect_failure "unknown key 'swi\\ntch_latency'" hardware show "$tmp/ctl/ib-edr.yaml"

echo "$((checked - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
