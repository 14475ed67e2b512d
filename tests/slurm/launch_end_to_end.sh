#!/bin/bash
# dlvalidate launch on a real Slurm cluster, end to end (docs/launch.md): a sweep of two runs on
# two nodes in one job array, a real PyTorch DDP job (Debian's python3-torch, gloo) and a
# Horovod job whose benchmark is not installed here. The PyTorch run must land as a
# throughput.csv row with its prediction; the other must give one line and exit 2 while the
# first is still collected. Needs the cluster of tests/slurm/local_cluster.sh (started first).
#
#   tests/slurm/launch_end_to_end.sh path/to/dlvalidate
set -euo pipefail
DLVALIDATE=$(realpath "${1:?usage: launch_end_to_end.sh path/to/dlvalidate}")
export SLURM_CONF=${SLURM_CONF:-${DLSIM_SLURM_DIR:-/tmp/dlsim-slurm}/slurm.conf}
PARTITION=${DLSIM_SLURM_PARTITION:-debug}
PYTHON=/usr/bin/python3 # Debian's python3-torch installs for Debian's own python3

fail() {
  echo "launch_end_to_end: FAIL: $*" >&2
  exit 1
}
step() { echo "launch_end_to_end: $*"; }

if ! "$PYTHON" -c 'import torch, torchvision' 2>/dev/null; then
  step "skipped: $PYTHON cannot import torch and torchvision"
  exit 77
fi
OUT=$(mktemp -d /tmp/dlsim-launch.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
chmod 755 "$OUT"

step "a sweep of pytorch-ddp and horovod-pytorch, resnet18 batch 8 on 2 nodes"
set +e
"$DLVALIDATE" launch --framework pytorch-ddp,horovod-pytorch --model resnet18 --nodes 2 \
  --batch 8 --steps 2 --warmup 1 --threads 1 --python "$PYTHON" --partition "$PARTITION" \
  --time 10:00 --output-dir "$OUT/runs" --submit --wait --poll 1 --cluster default \
  --results "$OUT/rows.csv" --cases-out "$OUT/cases.yaml" >"$OUT/stdout" 2>"$OUT/stderr"
rc=$?
set -e
cat "$OUT/stdout" "$OUT/stderr"
[[ $rc -eq 2 ]] || fail "exit code $rc, expected 2 (the Horovod run has no benchmark here)"
errors=$(grep -c '^dlvalidate: error: ' "$OUT/stderr" || true)
[[ $errors -eq 1 ]] || fail "expected one error line, got $errors"
# The Horovod run fails at its import; on a loaded machine srun may cancel the step first, and the
# log then says so ("no throughput: it was cancelled") instead of "no throughput line".
grep -q "^dlvalidate: error: job [0-9]*_1 .*no throughput" "$OUT/stderr" ||
  fail "the error line does not name the job and the missing throughput"
[[ -f $OUT/rows.csv ]] || fail "the PyTorch run's row was not written"
rows=$(($(wc -l <"$OUT/rows.csv") - 1))
[[ $rows -eq 1 ]] || fail "expected 1 row, got $rows"
"$PYTHON" - "$OUT/rows.csv" <<'PY' || fail "the row is wrong"
import csv, sys
(row,) = csv.DictReader(open(sys.argv[1]))
assert row["framework"] == "pytorch-ddp" and row["num_gpus"] == "2" and row["num_nodes"] == "2", row
assert row["model"] == "resnet18" and row["batch_per_gpu"] == "8" and row["unit"] == "samples/s", row
assert float(row["value"]) > 0, row
assert "Slurm job" in row["notes"], row
PY
grep -q "pytorch-ddp .* 2 .* 2 .* 8" "$OUT/stdout" || fail "no comparison line for the run"
step "the row is read back by dlvalidate published"
"$DLVALIDATE" published --data "$OUT/rows.csv" --cases "$OUT/cases.yaml" -o "$OUT/report.md" ||
  fail "dlvalidate published cannot read what launch wrote"
step "a run cancelled while it trains: --collect gives one line and exit 2, and writes nothing"
id=$("$DLVALIDATE" launch --framework pytorch-ddp --model resnet18 --nodes 2 --batch 8 \
  --steps 50 --warmup 1 --threads 1 --python "$PYTHON" --partition "$PARTITION" --time 10:00 \
  --output-dir "$OUT/cancel" --submit --parsable) || fail "the job was not submitted"
for _ in $(seq 120); do
  [[ $(squeue -h -j "$id" -o %T 2>/dev/null | head -n 1) == RUNNING ]] && break
  sleep 0.5
done
sleep 3
scancel "$id"
for _ in $(seq 120); do
  [[ -z $(squeue -h -j "$id" 2>/dev/null) ]] && break
  sleep 0.5
done
set +e
"$DLVALIDATE" launch --collect "$OUT/cancel/$id.launch.json" --results "$OUT/cancel.csv" \
  >"$OUT/stdout" 2>"$OUT/stderr"
rc=$?
set -e
cat "$OUT/stderr"
[[ $rc -eq 2 ]] || fail "exit code $rc for a cancelled run, expected 2"
[[ $(wc -l <"$OUT/stderr") -eq 1 ]] || fail "more than one line for the cancelled run"
grep -q "job ${id}_0: .*no throughput: it was cancelled" "$OUT/stderr" ||
  fail "the line does not say the run was cancelled"
[[ ! -e $OUT/cancel.csv ]] || fail "a results file was written for a cancelled run"
step "PASS"
