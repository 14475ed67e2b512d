#!/usr/bin/env bash
# dlcalibrate: every bad input gives exactly one error line naming the problem, exit code 2, and
# no output file. Usage: cli_calibrate_bad_inputs.sh DLCALIBRATE FIXTURES
set -u
dlcal=$1
fx=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
checked=0

expect_failure() {  # expect_failure "substring" OUTPUT_FLAG OUTPUT_NAME args...
  local want=$1 flag=$2 name=$3
  shift 3
  local out="$tmp/$name"
  rm -f "$out"
  "$dlcal" "$@" "$flag" "$out" >"$tmp/stdout" 2>"$tmp/stderr"
  local rc=$?
  local lines
  lines=$(wc -l <"$tmp/stderr")
  checked=$((checked + 1))
  if [ "$rc" -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -qF -- "$want" "$tmp/stderr" || [ -e "$out" ]; then
    echo "FAIL: dlcalibrate $* (exit $rc, $lines stderr lines, output $([ -e "$out" ] && echo present || echo absent))"
    echo "  wanted: $want"
    sed 's/^/  got:    /' "$tmp/stderr"
    failures=$((failures + 1))
  fi
}

expect_failure "nccl_tests_truncated.txt:" -o r.jsonl import nccl-tests "$fx/nccl_tests_truncated.txt"
expect_failure "truncated" -o r.jsonl import nccl-tests "$fx/nccl_tests_truncated.json"
expect_failure "not nccl-tests output" -o r.jsonl import nccl-tests "$fx/osu_latency.txt"
# A line far longer than any benchmark prints (it overflowed the readers' patterns' stack).
{ cat "$fx/osu_allreduce.txt"; head -c 30000 /dev/zero | tr '\0' 1; echo; } >"$tmp/long.txt"
expect_failure "long.txt:27: a line of 30000 characters" -o r.jsonl import osu "$tmp/long.txt"
expect_failure "long.txt:27: a line of 30000 characters" -o r.jsonl import nccl-tests "$tmp/long.txt"
expect_failure "nccl_tests_garbled_size.txt:23: size: '-512' is not a whole number of bytes" -o r.jsonl import nccl-tests "$fx/nccl_tests_garbled_size.txt"
expect_failure "osu_latency_garbled_size.txt:14: size: '5x12' is not a whole number of bytes" -o r.jsonl import osu "$fx/osu_latency_garbled_size.txt"
# Times no results file may hold (1 ps .. 1e6 s): refused on import, not left for `show`.
sed '20s/ 31\.81 / 1e30 /' "$fx/nccl_tests_allreduce_2x4.txt" >"$tmp/forever.txt"
expect_failure "forever.txt:20: time: 1e+30 us is not a time a results file holds" -o r.jsonl import nccl-tests "$tmp/forever.txt"
sed '5s/^1 /0 /' "$fx/osu_latency.txt" >"$tmp/repeated.txt"
expect_failure "repeated.txt:5: size: 0 B after 0 B: OSU prints a test's sizes once each, in ascending order" -o r.jsonl import osu "$tmp/repeated.txt"
sed '4s/1\.62/1e-30/' "$fx/osu_latency.txt" >"$tmp/instant.txt"
expect_failure "instant.txt:4: latency: 1e-30 us is not a time a results file holds" -o r.jsonl import osu "$tmp/instant.txt"
expect_failure "nccl_tests_extra_column.txt:23: the row has 14 columns where the header has 13" -o r.jsonl import nccl-tests "$fx/nccl_tests_extra_column.txt"
expect_failure "osu_gather.txt:2: OSU test 'MPI Gather Latency Test' is not imported" -o r.jsonl import osu "$fx/osu_gather.txt"
expect_failure "nccl_tests_undecided_op.txt:10: cannot tell which collective this table measured (the log names no *_perf binary and its columns fit allgather, alltoall): give --op with one of" -o r.jsonl import nccl-tests "$fx/nccl_tests_undecided_op.txt"
# A garbled rank or node count in an OSU log is an error at its line, not a run on one node.
sed '3s/4/x/' "$fx/osu_allreduce.txt" >"$tmp/osu_nodes_x.txt"
expect_failure "osu_nodes_x.txt:3: nodes: 'x' is not a count" -o r.jsonl import osu "$tmp/osu_nodes_x.txt"
sed '2s/16/16.5/' "$fx/osu_allreduce.txt" >"$tmp/osu_ranks_frac.txt"
expect_failure "osu_ranks_frac.txt:2: ranks: '16.5' is not a count" -o r.jsonl import osu "$tmp/osu_ranks_frac.txt" --ranks 16
# nccl-tests' count column gives the row's size with its type.
sed '20s/     2     float/     3     float/' "$fx/nccl_tests_allreduce_2x4.txt" >"$tmp/nccl_count.txt"
expect_failure "nccl_count.txt:20: count: 3 element(s) of float make 12 B, not the row's 8 B" -o r.jsonl import nccl-tests "$tmp/nccl_count.txt"
# The params of a libtorch layer table's records (dlcalibrate run torch), refused where read.
torch_table="$fx/../../../hardware/measured/h100-2026-11-27/h100-alexnet-fp32.jsonl"
sed '2s/"batch":"64"/"batch":"abc"/' "$torch_table" >"$tmp/batch_abc.jsonl"
expect_failure "batch_abc.jsonl:2: params.batch: 'abc' is not a batch size (a whole number in 1..2^24)" -o p.yaml fit "$tmp/batch_abc.jsonl"
sed '2s/"threads":"1"/"threads":"0"/' "$torch_table" >"$tmp/threads0.jsonl"
expect_failure "threads0.jsonl:2: params.threads: '0' is not a thread count" -o p.yaml fit "$tmp/threads0.jsonl"
sed '44s/"tensors":"16"/"tensors":"0"/' "$torch_table" >"$tmp/tensors0.jsonl"
expect_failure "tensors0.jsonl:44: params.tensors: '0' is not a count of tensors" -o p.yaml fit "$tmp/tensors0.jsonl"
sed '2s/"precision":"fp32"/"precision":"fp8"/' "$torch_table" >"$tmp/fp8.jsonl"
expect_failure "fp8.jsonl:2: params.precision: unknown precision 'fp8'" -o p.txt show "$tmp/fp8.jsonl"
expect_failure "--op: unknown operation 'allredcue'" -o r.jsonl import nccl-tests "$fx/nccl_tests_undecided_op.txt" --op allredcue
expect_failure "--op: the log names all_reduce_perf (allreduce), not broadcast" -o r.jsonl import nccl-tests "$fx/nccl_tests_allreduce_2x4.txt" --op broadcast
expect_failure "--ranks: the log says 8 ranks (its '#  Rank' device lines), not 4" -o r.jsonl import nccl-tests "$fx/nccl_tests_allreduce_2x4.txt" --ranks 4
expect_failure "--ranks: Value 0 not in range" -o r.jsonl import osu "$fx/osu_allreduce.txt" --ranks 0
expect_failure "the run failed in this row: Test CUDA failure common.cu:389" -o r.jsonl import nccl-tests "$fx/../logs/nccl-tests/nccltests_issue355_alltoall_h800_2node_failed.log"
expect_failure "the number of ranks is not in the file (OSU does not print it): give --ranks N" -o r.jsonl import osu "$fx/../logs/osu/ompi_issue9761_osu_alltoall_v5_7_crash.log"
expect_failure "truncated" -o r.jsonl import osu "$fx/osu_bw_truncated.txt"
sed 's/^4   *6.80   *6.19/4   6.80   7.19/' "$fx/osu_allreduce.txt" >"$tmp/osu_min_above_avg.txt"
expect_failure "osu_min_above_avg.txt:6: latency: the row's min 7.19 / average 6.8 / max 7.69 us are out of order" -o r.jsonl import osu "$tmp/osu_min_above_avg.txt"
sed 's/7.69        1000$/7.69        0/' "$fx/osu_allreduce.txt" >"$tmp/osu_no_iterations.txt"
expect_failure "osu_no_iterations.txt:6: Iterations: '0' is not a count of at least 1" -o r.jsonl import osu "$tmp/osu_no_iterations.txt"
expect_failure "no-such-file.txt" -o r.jsonl import osu "$fx/no-such-file.txt"
expect_failure "nccl_topo_bad_target.xml" -o node.yaml import nccl-topo "$fx/nccl_topo_bad_target.xml"
sed '0,/speed="200000"/s//speed="-5"/' "$fx/nccl_topo_dgx_a100.xml" >"$tmp/topo_negative_speed.xml"
expect_failure "topo_negative_speed.xml: <net name=\"mlx5_2\">: speed -5 Mb/s is negative" -o node.yaml import nccl-topo "$tmp/topo_negative_speed.xml"
sed '0,/<gpu dev="2"/s//<gpu dev="0"/' "$fx/nccl_topo_dgx_a100.xml" >"$tmp/topo_dup_gpu.xml"
expect_failure "topo_dup_gpu.xml: <pci busid=\"0000:07:00.0\"> <gpu>: dev 0 is also the GPU at 0000:47:00.0" -o node.yaml import nccl-topo "$tmp/topo_dup_gpu.xml"
sed '0,/name="mlx5_3" dev="3"/s//name="mlx5_3" dev="2"/' "$fx/nccl_topo_dgx_a100.xml" >"$tmp/topo_dup_nic.xml"
expect_failure "topo_dup_nic.xml: <net name=\"mlx5_3\">: dev 2 is also <net name=\"mlx5_2\">" -o node.yaml import nccl-topo "$tmp/topo_dup_nic.xml"
sed '0,/link_speed="16.0 GT\/s PCIe"/s//link_speed="999 GT\/s PCIe"/' "$fx/nccl_topo_dgx_a100.xml" >"$tmp/topo_fast_link.xml"
expect_failure "topo_fast_link.xml: <pci busid=\"0000:41:00.0\">: link_speed=\"999 GT/s PCIe\" is past PCIe 6.0's 64 GT/s" -o node.yaml import nccl-topo "$tmp/topo_fast_link.xml"
sed '21{h;d};22G' "$fx/nccl_tests_allreduce_2x4.txt" >"$tmp/nccl_tests_descending.txt"
expect_failure "nccl_tests_descending.txt:22: size: 32 B after 128 B: nccl-tests prints a table's sizes in ascending order" -o r.jsonl import nccl-tests "$tmp/nccl_tests_descending.txt"
sed '0,/link_width="16"/s//link_width="x16"/' "$fx/nccl_topo_dgx_a100.xml" >"$tmp/topo_bad_width.xml"
expect_failure "topo_bad_width.xml: <pci busid=\"0000:41:00.0\">: link_width=\"x16\" is not a PCIe lane count (0-32)" -o node.yaml import nccl-topo "$tmp/topo_bad_width.xml"
expect_failure "format_version: 99 is not the version" -o report.txt show "$fx/results_format_99.jsonl"
sed '1s/"format_version":1,//' "$fx/results_one_allreduce.jsonl" >"$tmp/results_no_version.jsonl"
expect_failure "results_no_version.jsonl:1: format_version: missing or not a whole number in the header" -o report.txt show "$tmp/results_no_version.jsonl"
sed '2s/"bytes":8,/"bytes":8,"dtype":"flaot32",/' "$fx/results_one_allreduce.jsonl" >"$tmp/results_bad_dtype.jsonl"
expect_failure "results_bad_dtype.jsonl:2: dtype: unknown element type 'flaot32'; did you mean 'float32'?" -o report.txt show "$tmp/results_bad_dtype.jsonl"
sed 's/# Datatype: MPI_FLOAT./# Datatype: MPI_WCHAR./' "$fx/osu_allreduce.txt" >"$tmp/osu_bad_datatype.txt"
expect_failure "osu_bad_datatype.txt:4: Datatype: 'MPI_WCHAR' is not an MPI datatype the import knows" -o r.jsonl import osu "$tmp/osu_bad_datatype.txt"
sed 's/# Number of processes: 16/# Number of processes: 0/' "$fx/osu_allreduce.txt" >"$tmp/osu_zero_ranks.txt"
expect_failure "osu_zero_ranks.txt:2: ranks: '0' is not a count of at least 1" -o r.jsonl import osu "$tmp/osu_zero_ranks.txt"
expect_failure "format_version: 99 is not the version" -o p.yaml fit "$fx/results_format_99.jsonl"
expect_failure "results_one_allreduce.jsonl: nothing to fit" -o p.yaml fit "$fx/results_one_allreduce.jsonl"
expect_failure "results_one_allreduce.jsonl: RESULTS: given twice" -o p.yaml fit "$fx/results_one_allreduce.jsonl" "$fx/../calibrate/results_one_allreduce.jsonl"
expect_failure "results_duplicate_key.jsonl:2: ranks: given twice in one record" -o p.yaml fit "$fx/results_duplicate_key.jsonl"
expect_failure "results_string_sample.jsonl:2: samples_s[1]: has the wrong type (string: \"x\")" -o p.yaml fit "$fx/results_string_sample.jsonl"
expect_failure "--base: unknown cluster preset 'nosuch'" -o p.yaml fit --base nosuch "$fx/results_one_allreduce.jsonl"
expect_failure "--output: the profile must be a .yaml file" -o p.txt fit "$fx/results_one_allreduce.jsonl"
expect_failure "unknown cluster preset 'defualt'" -o p.yaml fit "$fx/results_one_allreduce.jsonl" --base defualt
expect_failure "--statistic: 'mean' is not median or min" -o report.txt show "$fx/results_one_allreduce.jsonl" --statistic mean
expect_failure "'cpoy' is not a CPU benchmark; did you mean 'copy'" -o r.jsonl run cpu --ops cpoy
expect_failure "unknown" -o r.jsonl run cpu --model resnet5
expect_failure "--minbytes" -o r.jsonl run cpu -b -4KiB
expect_failure "--iters: must be at least 1" -o r.jsonl run cpu --iters 0
expect_failure "--batch: '0' is not a batch size in 1..65536" -o r.jsonl run torch --batch 8,0
expect_failure "--batch: 'x' is not a batch size" -o r.jsonl run torch --batch x
expect_failure "--threads: must be in 1..4096, got 0" -o r.jsonl run torch --threads 0
expect_failure "--iters: must be at least 1, got 0" -o r.jsonl run torch -n 0
expect_failure "unknown" -o r.jsonl run torch --model resnet5
expect_failure "--device: 'gpu' is not cpu or cuda" -o r.jsonl run torch --device gpu
expect_failure "--precision: 'fp8' is not fp32, tf32, amp or bf16" -o r.jsonl run torch --precision fp8
expect_failure "--precision: amp runs on a CUDA device only (--device cuda)" -o r.jsonl run torch --precision amp
expect_failure "--precision: tf32 runs on a CUDA device only (--device cuda)" -o r.jsonl run torch --precision tf32
expect_failure "--precision: bf16 runs on a CUDA device only (--device cuda)" -o r.jsonl run torch --precision bf16
# run gloo as one rank of a launched job: the rank and rank count come from the launcher (a
# build without gloo refuses every run gloo with its own one line, checked by calibrate.gloo).
unset SLURM_PROCID SLURM_NTASKS RANK WORLD_SIZE
probe=$("$dlcal" run gloo --store "$tmp/store" -o "$tmp/probe.jsonl" 2>&1 || true)
if [[ $probe != *"this build has no gloo"* ]]; then
  expect_failure "--store: needs the launcher's SLURM_PROCID and SLURM_NTASKS" -o r.jsonl run gloo --store "$tmp/store"
  export RANK=3 WORLD_SIZE=2
  expect_failure "--store: rank 3 of 2: needs 2..64 ranks" -o r.jsonl run gloo --store "$tmp/store"
  unset RANK WORLD_SIZE
fi
expect_failure "--partition" --script job.sbatch slurm --nodes 2 --partition "a'b; rm -rf /" --dry-run
expect_failure "--nodes" --script job.sbatch slurm --nodes 0 --dry-run
expect_failure "--array: '3-0': the range 3-0 counts down" --script job.sbatch slurm --nodes 2 --array 3-0 --dry-run
expect_failure "--array: '0-7:0': the step of 0-7:0 must be at least 1" --script job.sbatch slurm --nodes 2 --array 0-7:0 --dry-run
expect_failure "--gpus-per-node: must be in 0..1024 (got 99999)" --script job.sbatch slurm --nodes 2 --gpus-per-node 99999 --dry-run
expect_failure "results_negative_time.jsonl:2: samples_s: every sample must be a positive time" -o p.yaml fit "$fx/results_negative_time.jsonl"
expect_failure "results_negative_bytes.jsonl:2: bytes: must be in 0 .. 2^60 B, got -8" -o r.txt show "$fx/results_negative_bytes.jsonl"
sed 's/"bytes":8,/"bytes":8.5,/' "$fx/results_one_allreduce.jsonl" >"$tmp/results_half_byte.jsonl"
expect_failure "results_half_byte.jsonl:2: bytes: 8.5 is not a whole number of bytes" -o r.txt show "$tmp/results_half_byte.jsonl"
# A derived value that disagrees with the samples (an edited median) would be ignored on reading.
sed 's/"samples_s":\[1e-6\]}/"samples_s":[1e-6],"time_s":{"min":1e-6,"median":5e-6,"max":1e-6}}/' \
  "$fx/results_one_allreduce.jsonl" >"$tmp/results_edited_median.jsonl"
expect_failure "results_edited_median.jsonl:2: time_s.median: 5e-06 s is not what samples_s gives (1e-06 s)" -o r.txt show "$tmp/results_edited_median.jsonl"
sed 's/"samples_s":\[1e-6\]}/"samples_s":[1e-6],"busbw_bytes_per_s":1e12}/' \
  "$fx/results_one_allreduce.jsonl" >"$tmp/results_edited_busbw.jsonl"
expect_failure "results_edited_busbw.jsonl:2: busbw_bytes_per_s: 1e+12 B/s is not what samples_s gives (8e+06 B/s)" -o r.txt show "$tmp/results_edited_busbw.jsonl"
expect_failure "results_negative_flops.jsonl:2: flops: must be in 0 .. 1e24 FLOP, got -5" -o r.txt show "$fx/results_negative_flops.jsonl"
expect_failure "results_infinite_time.jsonl:2: not a JSON record (number overflow parsing '1e400')" -o r.txt show "$fx/results_infinite_time.jsonl"
expect_failure "results_zero_ranks.jsonl:2: ranks: must be at least 1" -o r.txt show "$fx/results_zero_ranks.jsonl"
expect_failure "results_typo_key.jsonl:2: sampels: unknown key" -o r.txt show "$fx/results_typo_key.jsonl"
expect_failure "load_average_before: must be a non-negative load average, got -3" -o r.txt show "$fx/results_negative_load.jsonl"
expect_failure "--min-bytes: '-1B' is negative" -o r.txt show "$fx/results_one_allreduce.jsonl" --min-bytes -1B
expect_failure "--min-bytes: '1e400B' is out of range" -o p.yaml fit "$fx/results_one_allreduce.jsonl" --min-bytes 1e400B
expect_failure "--conv-layers: must be at least 1" -o r.jsonl run cpu --ops conv_fwd --conv-layers 0
expect_failure "--stepfactor: must be above 1" -o r.jsonl run cpu --ops copy -f nan
expect_failure "--warmup: must not be negative" -o r.jsonl run cpu --ops copy -w -1
expect_failure "--batch: must be positive, got 0" -o r.jsonl run cpu --ops gemm --batch 0
expect_failure "--max-flops: must be positive" -o r.jsonl run cpu --ops gemm --max-flops 0FLOP
expect_failure "--min-time: '1e9s' is out of range for a duration" -o r.jsonl run cpu --ops copy --min-time 1e9s
expect_failure "--minbytes: must be positive" -o r.jsonl run cpu --ops copy -b 0B
expect_failure "--maxbytes: 1 KiB is below --minbytes 64 KiB" -o r.jsonl run cpu --ops copy -e 1KiB
expect_failure "--poll: must be a finite number in [0.01, 86400], got '0'" --script job.sbatch slurm --nodes 2 --poll 0 --submit --wait
expect_failure "--gpus-per-node: must be in 0..1024 (got -1)" --script job.sbatch slurm --nodes 2 --gpus-per-node -1 --dry-run
expect_failure "--time: '-5' is not a Slurm time limit" --script job.sbatch slurm --nodes 2 --time -5 --dry-run
expect_failure "--array: '1-;rm' is not a valid job array range" --script job.sbatch slurm --nodes 2 --array "1-;rm" --dry-run
expect_failure "--job-name: 'a b\$(x)' is not a valid job name" --script job.sbatch slurm --nodes 2 --job-name 'a b$(x)' --dry-run
expect_failure "--output-dir: '/tmp/a b' is not a valid directory" --script job.sbatch slurm --nodes 2 --output-dir '/tmp/a b' --dry-run
expect_failure "--resume: no " --script job.sbatch slurm --nodes 2 --resume 12345 --output-dir "$tmp" --dry-run
expect_failure "--resume: '12;x' is not a Slurm job id" --script job.sbatch slurm --nodes 2 --resume "12;x" --dry-run
: >"$tmp/empty.txt"
expect_failure "the file is empty" -o r.jsonl import nccl-tests "$tmp/empty.txt"
expect_failure "no '# OSU ... Test' header line" -o r.jsonl import osu "$tmp/empty.txt"
# A device is not a log: /dev/zero would be read without end.
expect_failure "/dev/null: is a device, not a file" -o r.jsonl import nccl-tests /dev/null
expect_failure "/dev/zero: is a device, not a file" -o r.jsonl import osu /dev/zero

# A row whose result failed nccl-tests' check (-c 1, the #wrong column) is not a measurement.
sed '21s/0.00    0.00       0    32.05/0.00    0.00       3    32.05/' "$fx/nccl_tests_allreduce_2x4.txt" >"$tmp/nccl_wrong.txt"
expect_failure "nccl_wrong.txt:21: #wrong: 3 elements failed nccl-tests' check" -o r.jsonl import nccl-tests "$tmp/nccl_wrong.txt"
# nccl-tests -J JSON: a size that is not a whole number of bytes, a thread count that would wrap.
python3 - "$fx/nccl_tests_reducescatter.json" "$tmp" <<'PY'
import json, sys
for name, where, key, value in [("neg", "results", "size", -8), ("frac", "results", "size", 1.5),
                                ("threads", "config", "nthreads", 1e10)]:
    d = json.load(open(sys.argv[1]))
    (d[where][0] if where == "results" else d[where])[key] = value
    json.dump(d, open(f"{sys.argv[2]}/nccl_json_{name}.json", "w"))
PY
expect_failure "nccl_json_neg.json: results[0].size: '-8' is not a whole number of bytes" -o r.jsonl import nccl-tests "$tmp/nccl_json_neg.json"
expect_failure "nccl_json_frac.json: results[0].size: '1.5' is not a whole number of bytes" -o r.jsonl import nccl-tests "$tmp/nccl_json_frac.json"
expect_failure "config.nthreads: must be a whole number in 1..1048576, got 10000000000" -o r.jsonl import nccl-tests "$tmp/nccl_json_threads.json"

# An existing results file is not overwritten without --resume (and stays as it was).
cp "$fx/results_one_allreduce.jsonl" "$tmp/existing.jsonl"
"$dlcal" run cpu --ops copy -o "$tmp/existing.jsonl" >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
checked=$((checked + 1))
if [ "$rc" -ne 2 ] || [ "$(wc -l <"$tmp/stderr")" -ne 1 ] ||
   ! cmp -s "$fx/results_one_allreduce.jsonl" "$tmp/existing.jsonl"; then
  echo "FAIL: run cpu over an existing results file (exit $rc)"
  failures=$((failures + 1))
fi

# A series left with fewer than two sizes by --min-bytes is named, not dropped in silence.
checked=$((checked + 1))
if ! "$dlcal" show "$fx/results_one_allreduce.jsonl" --min-bytes 1TiB 2>&1 |
     grep -qF "allreduce mpi ranks=2 nodes=1: no fit, 0 of its 1 size(s) at or above --min-bytes 1 TiB"; then
  echo "FAIL: show --min-bytes 1TiB does not name the series it cannot fit"
  failures=$((failures + 1))
fi

echo "$checked bad inputs checked, $failures failed"
[ "$failures" -eq 0 ]
