#!/bin/bash
# dlcalibrate on a real Slurm cluster, end to end: submit the CPU calibration of two nodes and
# wait for it, collect the job's results into one file, and check that both nodes measured.
# Then the failures: a partition Slurm does not know, and a hostile partition name, must each
# give exit code 2 and one line. Needs the cluster of tests/slurm/local_cluster.sh (started
# first) or any Slurm with a partition `debug` of two nodes.
#
#   tests/slurm/end_to_end.sh [path/to/dlcalibrate [path/to/dlsim]]
#   (defaults: build/calibrate/dlcalibrate, build/simulator/dlsim)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
DLCALIBRATE=$(realpath "${1:-$HERE/../../build/calibrate/dlcalibrate}")
# dlsim, to predict with the fitted profile: the second argument, or next to dlcalibrate's build.
DLCALIBRATE_DLSIM=$(realpath "${2:-$(dirname "$DLCALIBRATE")/../simulator/dlsim}")
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

# With MPI built in, the job also runs the MPI step across the two nodes (srun --mpi=pmix):
# point to point between node1 and node2 and an allreduce sweep.
mpi=()
if "$DLCALIBRATE" run mpi --help >/dev/null 2>&1 &&
  ! "$DLCALIBRATE" run mpi --help 2>&1 | grep -q "built without MPI"; then
  mpi=(--mpi --mpi-args "--ops p2p,allreduce -b 8B -e 1MiB -f 4 -n 3 -w 1")
fi

step "submitting the CPU${mpi:+ and MPI} calibration of 2 nodes (tiny sizes) and waiting for it"
# Tiny sweep: two array sizes, copy and triad, and the one small GEMM shape that fits.
job=$(timeout 180 "$DLCALIBRATE" slurm --nodes 2 --partition "$PARTITION" --time 00:05:00 \
  --output-dir "$OUT" --poll 1 --submit --wait "${mpi[@]}" \
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

if ((${#mpi[@]})); then
  n=$(grep -c '"op":"p2p_latency".*"nodes":2\|"nodes":2.*"op":"p2p_latency"' "$OUT/merged.jsonl" || true)
  ((n > 0)) || fail "no point-to-point latency between the two nodes in merged.jsonl"
  step "$n point-to-point latencies between node1 and node2"
  step "fitting the merged results into a profile and predicting with it"
  "$DLCALIBRATE" fit "$OUT/merged.jsonl" -o "$OUT/local.yaml" >"$OUT/fit.txt" ||
    fail "dlcalibrate fit failed: $(cat "$OUT/fit.txt")"
  grep -q "network latency:" "$OUT/fit.txt" || fail "the fit mapped no network latency: $(cat "$OUT/fit.txt")"
  grep -q "message_overhead:" "$OUT/local.yaml" || fail "the profile has no network section"
  "$DLCALIBRATE_DLSIM" predict --model resnet18 --gpus 2 --cluster "$OUT/local.yaml" >/dev/null ||
    fail "dlsim predict cannot use the fitted profile"
fi

step "a job killed on one node mid-sweep, then finished with --resume on the same nodes"
cpu_args="--ops copy,triad -b 64KiB -e 32MiB -n 5 -w 1"
killed=$(timeout 60 "$DLCALIBRATE" slurm --nodes 2 --partition "$PARTITION" --time 00:05:00 \
  --output-dir "$OUT" --submit --cpu-args "$cpu_args" 2>/dev/null) ||
  fail "could not submit the job to kill"
file=$OUT/$killed/cpu-node2.jsonl
for _ in $(seq 600); do
  [[ -f $file && $(wc -l <"$file") -ge 4 ]] && break
  sleep 0.1
done
[[ -f $file && $(wc -l <"$file") -ge 4 ]] || fail "job $killed wrote no records on node2 in 60 s"
pkill -9 -f "run cpu -o $file" || fail "no dlcalibrate on node2 to kill"
for _ in $(seq 300); do
  [[ -z $(squeue -h -j "$killed" 2>/dev/null) ]] && break
  sleep 0.2
done
before=$(grep -c '"op":' "$file" || true)
python3 - "$file" <<'PY' || fail "the killed node's results file holds an incomplete record"
import json, sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
assert lines[-1] == "", "the file does not end with a newline"
for line in lines[:-1]:
    json.loads(line)
PY
step "node2 was killed after $before complete records; resuming job $killed"
resumed=$(timeout 180 "$DLCALIBRATE" slurm --resume "$killed" --nodes 2 --partition "$PARTITION" \
  --time 00:05:00 --output-dir "$OUT" --poll 1 --submit --wait --cpu-args "$cpu_args") ||
  fail "dlcalibrate slurm --resume $killed failed (exit $?): $(cat "$OUT"/slurm-*.out 2>/dev/null | tail -5)"
n1=$(grep -c '"op":' "$OUT/$killed/cpu-node1.jsonl" || true)
n2=$(grep -c '"op":' "$file" || true)
dups=$(grep '"op":' "$file" | python3 -c '
import json, sys
keys = [(r["op"], r["bytes"], r.get("shape", "")) for r in map(json.loads, sys.stdin)]
print(len(keys) - len(set(keys)))')
((n2 == n1 && dups == 0)) ||
  fail "after the resume node2 has $n2 records ($dups repeated), node1 $n1"
grep -q "RESUMED_BY_JOB=$resumed" "$OUT/$killed/job.env" || fail "job.env does not name the resuming job"
"$DLCALIBRATE" collect "$killed" --dir "$OUT" -o "$OUT/merged-resumed.jsonl" >/dev/null ||
  fail "collect of the resumed job failed"
step "ok: job $resumed finished job $killed: node2 $before + $((n2 - before)) records, none twice"

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
