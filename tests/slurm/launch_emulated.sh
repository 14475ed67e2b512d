#!/bin/bash
# Predict, launch, compare on an emulated cluster (docs/launch.md, "Predict, run, compare on this
# machine"): the two-node Slurm cluster of tests/slurm/local_cluster.sh with each node's link
# shaped at 1 and then 10 Gbit/s; at each rate, the cluster is calibrated (gloo's all-reduce
# between the two nodes, `dlcalibrate run gloo --store` under srun, and for each batch
# resnet18's layer table through libtorch right before its job), `dlcalibrate fit` writes the
# profile, and `dlvalidate launch` runs a real PyTorch DDP job (Debian's python3-torch, gloo,
# one rank per node), predicts it from that profile alone and writes the comparison. Run as
# root:
#
#   tests/slurm/launch_emulated.sh BUILD_DIR [OUT_DIR] [BATCHES]   (default OUT_DIR: a temporary
#       folder; BATCHES: 32,64)
#
# Starts the cluster (and stops it at the end) unless one is running already. The gate: median
# |error| <= 10 % over all runs. Writes OUT_DIR/comparison.md and BUILD_DIR/
# validation-summary-launch.txt. Exits 77 (skipped) without root, network namespaces or
# python3-torch, and when the gate is missed while other work runs on the machine (the two
# nodes share its cores, so the comparison would measure the other work) or while the runs'
# steps spread by more than SPREAD % (their median; the machine's own noise).
set -uo pipefail
BUILD=$(realpath "${1:?usage: launch_emulated.sh BUILD_DIR [OUT_DIR] [BATCHES]}")
OUT=${2:-}
BATCHES=${3:-32,64}
HERE=$(cd "$(dirname "$0")" && pwd)
DLCAL=$BUILD/calibrate/dlcalibrate
DLVAL=$BUILD/validate/dlvalidate
PYTHON=/usr/bin/python3
GATE=10
SPREAD=5
MODEL=resnet18
export SLURM_CONF=${DLSIM_SLURM_DIR:-/tmp/dlsim-slurm}/slurm.conf
say() { echo "launch_emulated: $*"; }

[[ $(id -u) -eq 0 ]] || { say "skipped: needs root (Slurm daemons, network namespaces)"; exit 77; }
"$PYTHON" -c 'import torch, torchvision' 2>/dev/null ||
  { say "skipped: $PYTHON cannot import torch and torchvision"; exit 77; }
[[ -x $DLCAL && -x $DLVAL ]] || { say "no dlcalibrate or dlvalidate under $BUILD"; exit 1; }
"$DLCAL" run gloo --help 2>&1 | grep -q -- --store ||
  { say "skipped: this dlcalibrate has no libtorch (run gloo, run torch)"; exit 77; }
[[ $BATCHES =~ ^[0-9]+(,[0-9]+)*$ ]] || { say "BATCHES must be like 32,64"; exit 2; }

started=0
if ! sinfo -h -p debug >/dev/null 2>&1; then
  "$HERE/local_cluster.sh" start >/dev/null || { say "the local Slurm cluster did not start"; exit 1; }
  started=1
fi
if [[ $(cat "${DLSIM_SLURM_DIR:-/tmp/dlsim-slurm}/mode") != netns ]]; then
  say "skipped: no network namespaces here, so no links to shape"
  ((started)) && "$HERE/local_cluster.sh" stop >/dev/null
  exit 77
fi
# The nodes see /tmp: results, stores and logs go there.
if [[ -z $OUT ]]; then OUT=$(mktemp -d /tmp/dlsim-launch-emu.XXXXXX); fi
mkdir -p "$OUT" && chmod 755 "$OUT"
cleanup() {
  "$HERE/local_cluster.sh" shape none >/dev/null 2>&1 || true
  ((started)) && "$HERE/local_cluster.sh" stop >/dev/null 2>&1
}
trap cleanup EXIT

IFS=, read -ra batch_list <<<"$BATCHES"
rc=0
for rate in 1gbit 10gbit; do
  "$HERE/local_cluster.sh" shape "$rate" >/dev/null || exit 1
  say "links shaped at $rate: calibrating gloo between the nodes"
  rm -f "$OUT/gloo-$rate.jsonl" "$OUT/store-$rate"
  srun -p debug -N 2 -n 2 --ntasks-per-node=1 --time 10:00 \
    "$DLCAL" run gloo --store "$OUT/store-$rate" --cpu-cost -b 4B -e 64MiB \
    -o "$OUT/gloo-$rate.jsonl" >"$OUT/gloo-$rate.log" 2>&1 || { cat "$OUT/gloo-$rate.log"; exit 1; }
  for b in "${batch_list[@]}"; do
    # The layer table right before its job (the two nodes run this machine's CPU), so that the
    # machine's drift falls between runs, not between a prediction and its measurement. Two
    # tables are measured at once, one on each core: each rank of the job computes with the
    # other rank busy on the other core, and so does the table the fit takes (the second one
    # only keeps that core busy; tests/torch_ddp.sh does the same with a one-rank job).
    rm -f "$OUT/torch-$rate-$b.jsonl" "$OUT/torch-$rate-$b-beside.jsonl"
    "$DLCAL" run torch --model "$MODEL" --batch "$b" --threads 1 -w 2 -n 5 \
      -o "$OUT/torch-$rate-$b-beside.jsonl" 2>"$OUT/torch-$rate-$b-beside.log" &
    beside=$!
    "$DLCAL" run torch --model "$MODEL" --batch "$b" --threads 1 -w 2 -n 5 \
      -o "$OUT/torch-$rate-$b.jsonl" 2>"$OUT/torch-$rate-$b.log" ||
      { cat "$OUT/torch-$rate-$b.log"; exit 1; }
    wait "$beside" || { cat "$OUT/torch-$rate-$b-beside.log"; exit 1; }
    "$DLCAL" fit "$OUT/torch-$rate-$b.jsonl" "$OUT/gloo-$rate.jsonl" \
      -o "$OUT/emulated-$rate-$b.yaml" >"$OUT/fit-$rate-$b.log" 2>&1 ||
      { cat "$OUT/fit-$rate-$b.log"; exit 1; }
    say "launching $MODEL batch $b on 2 nodes at $rate"
    "$DLVAL" launch --framework pytorch-ddp --model "$MODEL" --nodes 2 --batch "$b" \
      --steps 4 --warmup 1 --threads 1 --python "$PYTHON" --partition debug --time 8:00 \
      --output-dir "$OUT/runs-$rate" --job-name "ddp-$rate" --submit --wait --poll 1 \
      --cluster "$OUT/emulated-$rate-$b.yaml" --source-id "emulated-$rate" \
      --results "$OUT/launched.csv" --cases-out "$OUT/cases-$rate-$b.yaml" \
      >"$OUT/launch-$rate-$b.txt" 2>"$OUT/launch-$rate-$b.log" ||
      { cat "$OUT/launch-$rate-$b.log"; rc=1; }
    cat "$OUT/launch-$rate-$b.txt"
  done
done

# Every run against its own rate's profile: the median over both rates. Each row also shows its
# spread (tests/step_spread.py): the larger relative standard deviation of the job's timed steps
# and of the calibration's behind its prediction. When the gate is missed and the runs' median
# spread is above SPREAD %, the machine's own noise is more than the gate can resolve
# (docs/validate.md, "Noisy machines"): exit 3, and the test skips.
summary=$("$PYTHON" - "$OUT" "$GATE" "$SPREAD" "$HERE/.." <<'PY'
import glob, os, re, statistics, sys
out, gate, limit = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
sys.path.insert(0, sys.argv[4])
from step_spread import file_spread
rows, errors, spreads = [], [], []
for path in sorted(glob.glob(os.path.join(out, "launch-*.txt"))):
    rate, batch = re.fullmatch(r"launch-(.*)-([0-9]+)\.txt", os.path.basename(path)).groups()
    files = [os.path.join(out, f"torch-{rate}-{batch}.jsonl")]
    files += glob.glob(os.path.join(out, f"runs-{rate}", "*.out"))
    spread = max(file_spread(f, int(batch)) for f in files if os.path.exists(f))
    for line in open(path):
        f = line.split()
        if len(f) == 7 and f[0] == "pytorch-ddp" and f[6] != "-":
            rows.append(f"| {rate} | {f[3]} | {f[2]} | {float(f[4]):.2f} | {float(f[5]):.2f} | {float(f[6]):+.1f} % | {spread:.1f} % |")
            errors.append(abs(float(f[6])))
            spreads.append(spread)
print("| link | batch per rank | ranks | measured (samples/s) | dlsim from the calibration (samples/s) | error | steps' spread |")
print("|---|--:|--:|--:|--:|--:|--:|")
print("\n".join(rows))
if errors:
    med, noise = statistics.median(errors), statistics.median(spreads)
    print(f"\nmedian |error| {med:.1f} % over {len(errors)} runs (gate {gate:g} %); median spread of "
          f"the steps {noise:.1f} % (above {limit:g} % the gate cannot be judged)")
    sys.exit(0 if med <= gate else 3 if noise > limit else 1)
print("\nno comparisons")
sys.exit(1)
PY
)
gate_rc=$?
((rc == 0)) && rc=$gate_rc
echo "$summary" | tee "$OUT/comparison.md"
{
  echo "PyTorch DDP launched through Slurm on two emulated nodes at 1 and 10 Gbit/s against the"
  echo "profile calibrated in the same run (tests/slurm/launch_emulated.sh): exit $rc"
  echo "$summary"
} >"$BUILD/validation-summary-launch.txt"
if ((rc == 3)); then
  say "skipped: the gate is missed while the steps spread by more than $SPREAD % (this machine's" \
    "own noise, more than the gate can resolve)" | tee -a "$BUILD/validation-summary-launch.txt"
  exit 77
fi
if ((rc != 0)); then
  # As tests/live_validation.sh: other runnable work on the machine (more than this script's
  # one task in /proc/loadavg's run queue, median of 10 samples over 2 s) means the comparison
  # measured it, not dlsim.
  # shellcheck source=tests/runnable_tasks.sh
  source "$HERE/../runnable_tasks.sh"
  busy=$(runnable_tasks)
  if [[ $busy -gt 1 ]]; then
    say "skipped: $busy tasks runnable besides this test; the gate needs a quiet machine" |
      tee -a "$BUILD/validation-summary-launch.txt"
    exit 77
  fi
fi
exit "$rc"
