#!/bin/bash
# dlcalibrate on a real Slurm cluster, end to end: submit the CPU calibration of two nodes and
# wait for it, collect the job's results into one file, and check that both nodes measured.
# Then the failures: a partition Slurm does not know, and a hostile partition name, must each
# give exit code 2 and one line. Needs the cluster of tests/slurm/local_cluster.sh (started
# first) or any Slurm with a partition `debug` of two nodes.
#
#   tests/slurm/end_to_end.sh [path/to/dlcalibrate]     (default: build/calibrate/dlcalibrate)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
DLCALIBRATE=$(realpath "${1:-$HERE/../../build/calibrate/dlcalibrate}")
export SLURM_CONF=${SLURM_CONF:-${DLSIM_SLURM_DIR:-/tmp/dlsim-slurm}/slurm.conf}
PARTITION=${DLSIM_SLURM_PARTITION:-debug}

fail() {
  echo "end_to_end: FAIL: $*" >&2
  exit 1
}
step() { echo "end_to_end: $*"; }

[[ -x $DLCALIBRATE ]] || fail "no dlcalibrate at $DLCALIBRATE (build it, or pass its path)"
sinfo -h -p "$PARTITION" >/dev/null 2>&1 ||
  fail "no Slurm cluster answers (SLURM_CONF=$SLURM_CONF): start one with $HERE/local_cluster.sh"

# The results directory must be visible to every node: on the local cluster all share /tmp.
OUT=$(mktemp -d /tmp/dlsim-e2e.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
chmod 755 "$OUT"

step "submitting the CPU calibration of 2 nodes (tiny sizes) and waiting for it"
# Tiny sweep: two array sizes, copy and triad, and the one small GEMM shape that fits.
job=$(timeout 180 "$DLCALIBRATE" slurm --nodes 2 --partition "$PARTITION" --time 00:05:00 \
  --output-dir "$OUT" --poll 1 --submit --wait \
  --cpu-args "--ops copy,triad,gemm -b 64KiB -e 128KiB -n 3 -w 1 --max-flops 0.5GFLOP") ||
  fail "dlcalibrate slurm --submit --wait failed (exit $?); job log: $(cat "$OUT"/slurm-*.out 2>/dev/null)"
[[ $job =~ ^[0-9]+$ ]] || fail "dlcalibrate slurm printed '$job', not a job id"
step "job $job completed"

for f in nodes.txt nccl-env.txt job.env job.sbatch; do
  [[ -f $OUT/$job/$f ]] || fail "the job did not write $job/$f"
done
[[ $(sort "$OUT/$job/nodes.txt" | tr '\n' ' ') == "node1 node2 " ]] ||
  fail "nodes.txt lists '$(tr '\n' ' ' <"$OUT/$job/nodes.txt")', not node1 node2"

step "collecting job $job"
"$DLCALIBRATE" collect "$job" --dir "$OUT" -o "$OUT/merged.jsonl" ||
  fail "dlcalibrate collect $job failed (exit $?)"
[[ -s $OUT/merged.jsonl ]] || fail "collect wrote no merged.jsonl"
header=$(head -n 1 "$OUT/merged.jsonl")
for node in node1 node2; do
  [[ $header == *\"$node\"* ]] || fail "the merged header's hosts leave out $node: $header"
  n=$(grep -c "\"host\":\"$node\"" "$OUT/merged.jsonl" || true)
  ((n > 0)) || fail "merged.jsonl has no records from $node"
  step "$n records from $node"
done
"$DLCALIBRATE" show "$OUT/merged.jsonl" >/dev/null || fail "dlcalibrate show cannot read merged.jsonl"

step "a partition Slurm does not know must be one error line and exit code 2"
set +e
err=$("$DLCALIBRATE" slurm --nodes 2 --partition nosuchpartition --time 00:05:00 \
  --output-dir "$OUT" --submit 2>&1 >/dev/null)
rc=$?
set -e
((rc == 2)) || fail "exit code $rc (want 2) for an unknown partition; it said: $err"
(($(wc -l <<<"$err") == 1)) || fail "more than one line for an unknown partition: $err"
[[ $err == *"sbatch refused the job"*[Pp]artition* ]] || fail "unclear message: $err"
step "ok: $err"

step "a hostile partition name must be refused before anything reaches a shell or sbatch"
set +e
err=$("$DLCALIBRATE" slurm --nodes 2 --partition "a'b; touch $OUT/pwned" --submit 2>&1 >/dev/null)
rc=$?
set -e
((rc == 2)) || fail "exit code $rc (want 2) for a hostile partition; it said: $err"
[[ $err == *"--partition:"* && ! -e $OUT/pwned ]] || fail "unclear message or side effect: $err"
step "ok: $err"

echo "end_to_end: PASS (job $job: both nodes measured and merged)"
