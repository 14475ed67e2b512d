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
expect_failure "osu_mbw_mr.txt:" -o r.jsonl import osu "$fx/osu_mbw_mr.txt"
expect_failure "truncated" -o r.jsonl import osu "$fx/osu_bw_truncated.txt"
expect_failure "no-such-file.txt" -o r.jsonl import osu "$fx/no-such-file.txt"
expect_failure "nccl_topo_bad_target.xml" -o node.yaml import nccl-topo "$fx/nccl_topo_bad_target.xml"
expect_failure "format_version: 99 is not the version" -o report.txt show "$fx/results_format_99.jsonl"
expect_failure "format_version: 99 is not the version" -o p.yaml fit "$fx/results_format_99.jsonl"
expect_failure "nothing to fit" -o p.yaml fit "$fx/results_one_allreduce.jsonl"
expect_failure "--output: the profile must be a .yaml file" -o p.txt fit "$fx/results_one_allreduce.jsonl"
expect_failure "unknown cluster preset 'defualt'" -o p.yaml fit "$fx/results_one_allreduce.jsonl" --base defualt
expect_failure "--statistic: 'mean' is not median or min" -o report.txt show "$fx/results_one_allreduce.jsonl" --statistic mean
expect_failure "'cpoy' is not a CPU benchmark; did you mean 'copy'" -o r.jsonl run cpu --ops cpoy
expect_failure "unknown" -o r.jsonl run cpu --model resnet5
expect_failure "--minbytes" -o r.jsonl run cpu -b -4KiB
expect_failure "--iters: must be at least 1" -o r.jsonl run cpu --iters 0
expect_failure "--partition" --script job.sbatch slurm --nodes 2 --partition "a'b; rm -rf /" --dry-run
expect_failure "--nodes" --script job.sbatch slurm --nodes 0 --dry-run

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

echo "$checked bad inputs checked, $failures failed"
[ "$failures" -eq 0 ]
