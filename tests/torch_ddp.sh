#!/usr/bin/env bash
# A real PyTorch DistributedDataParallel job on this machine against dlsim's prediction from a
# libtorch calibration alone, no anchor (docs/validate.md, "PyTorch DDP on this machine"). For
# each model and batch (8, 16): `dlcalibrate run torch`, `dlcalibrate fit` with this host's gloo
# exchange and memory copies (`run gloo`, `run cpu --ops copy`, measured once), `dlsim predict
# --gpus 1` and `--gpus 2` on the fitted profile, against validate/torch/ddp_step.py measuring
# the real step (one thread per rank; 2 warm-up and 4 timed steps each; the one-rank job runs
# beside the calibration, see measure(); on 2 ranks the efficiency is measured pairwise, see
# step() below). A model whose step misses by more
# than 10 %, or whose 2-rank scaling efficiency misses by more than 10 points, is measured once
# more (calibration and job), and fails when it misses again; writes the table to
# build/validation-summary-torch.txt. Exits 77 (skipped) without Debian's python3-torch
# and python3-torchvision, without libtorch in the build, when a miss comes with other work
# running (the measurements then time that work too), or when every row that misses comes from
# a job or a calibration whose own steps spread by more than `spread_limit`.
# Usage: torch_ddp.sh BUILD_DIR REPO_ROOT [MODEL ...] (default: resnet18 alexnet)
set -u
build=$1
root=$2
shift 2
models=("$@")
# resnet50 (batch 8 takes 18 s a step here, about 5 minutes in all) is run by hand:
# tests/torch_ddp.sh build . resnet50 (figures in docs/validate.md).
[[ ${#models[@]} -gt 0 ]] || models=(resnet18 alexnet)
dlsim=$build/simulator/dlsim
dlcal=$build/calibrate/dlcalibrate
say() { echo "torch_ddp: $*"; }
# shellcheck source=tests/debian_python.sh
source "$root/tests/debian_python.sh"
require_modules torch_ddp "python3-torch python3-torchvision" torch torchvision
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
limit=10
# The 2-rank efficiency is gated at 10 points: the paired measurement repeats within about +-5
# points on this VM (docs/validate.md), so a tighter gate would test the VM; 10 still catches a
# model without the exchange's CPU cost (99 % predicted against 86-93 % measured).
points=10
# The relative standard deviation (%) of timed steps above which a row cannot be judged against
# the gate: the larger of the job's and of the calibration's behind its prediction
# (tests/step_spread.py). With 4 or 5 timed steps, 5 % puts each mean's standard error near 2.5 %;
# beyond that a 10 % miss can be the VM alone. On a busy host one run's resnet18 steps at batch
# 8 took 826 to 1,509 ms (21 %; docs/validate.md, "Noisy machines").
spread_limit=5
fail=0
noisy=0
rows=()
# The exchange between two ranks of this host and its memory copies, measured once: gloo's
# all-reduce between two processes (with their CPU time per call) and a copy sweep.
if ! "$dlcal" run gloo --ranks 2 --cpu-cost -o "$tmp/gloo.jsonl" >"$tmp/gloo.log" 2>&1; then
  if grep -q "has no gloo" "$tmp/gloo.log"; then
    say "skipped: $(cat "$tmp/gloo.log")"
    exit 77
  fi
  cat "$tmp/gloo.log"
  exit 1
fi
# The copy sweep reaches arrays past this VM's caches (its rate settles from about 64 MiB per
# array): DDP copies every gradient into its bucket and back while backward's activations fill
# the caches, and alexnet's largest gradient is 151 MB.
"$dlcal" run cpu --ops copy -b 1MiB -e 256MiB -o "$tmp/copy.jsonl" >"$tmp/copy.log" 2>&1 ||
  { cat "$tmp/copy.log"; exit 1; }
# The real step of model $2 at batch $3 on $1 ranks: its mean step time (s), on 2 ranks the
# paired efficiency (ddp_step.py --paired: steps without the gradient exchange, under
# no_sync(), alternate with the exchanging ones in the same processes, so that the VM's drift,
# which moves whole runs by several per cent, falls on both alike), and the steps' spread
# (tests/step_spread.py: the larger relative standard deviation, %, of either kind's steps).
step() {
  local out=$tmp/job-$1.json spread
  "$python" "$root/validate/torch/ddp_step.py" --model "$2" --batch "$3" --ranks "$1" \
    --warmup 2 --steps 4 --threads 1 --paired >"$out" || return 1
  spread=$("$python" "$root/tests/step_spread.py" "$out") || return 1
  "$python" -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d["step_s"], d.get("paired_efficiency", 1), sys.argv[2])' "$out" "$spread"
}
# dlsim's step (s) on profile $1 for model $2, batch $3, $4 ranks.
predict() {
  "$dlsim" predict --cluster "$1" --model "$2" --batch "$3" --gpus "$4" \
    --framework pytorch-ddp --format json |
    "$python" -c 'import json, sys; print(json.load(sys.stdin)["step_time_s"])'
}
# One model: calibrate, fit, then predict and measure each batch on 1 and 2 ranks; appends its
# rows to `model_rows` and returns 1 when a step misses by more than the limit or the 2-rank
# efficiency by more than $points points, 2 when every such miss comes from a job or a
# calibration whose steps spread by more than $spread_limit %, 0 when nothing misses.
measure() {
  local m=$1 b m1 m2 eff s1 s2 sc p1 p2 cal row miss=0 verdict
  model_rows=()
  for b in 8 16; do
    # The calibration and the one-rank job run at the same time, one on each core: this VM's
    # speed moves by 10-30 % from one minute to the next (docs/validate.md), more than the gate,
    # and what moves it falls on both alike. Each then runs with the other core busy, as a rank
    # of the two-rank job that follows does.
    "$dlcal" run torch --model "$m" --batch "$b" --threads 1 -w 2 -n 5 \
      -o "$tmp/$m-$b.jsonl" 2>"$tmp/$m.log" &
    cal=$!
    read -r m1 _ s1 < <(step 1 "$m" "$b")
    if ! wait "$cal"; then
      if grep -q "no libtorch" "$tmp/$m.log"; then
        say "skipped: $(cat "$tmp/$m.log")"
        exit 77
      fi
      cat "$tmp/$m.log"
      exit 1
    fi
    [[ -n $m1 ]] || { say "ddp_step.py failed for $m batch $b"; exit 1; }
    sc=$("$python" "$root/tests/step_spread.py" "$tmp/$m-$b.jsonl") || exit 1
    "$dlcal" fit "$tmp/$m-$b.jsonl" "$tmp/gloo.jsonl" "$tmp/copy.jsonl" -o "$tmp/$m$b.yaml" \
      >"$tmp/$m.fit" 2>&1 || { cat "$tmp/$m.fit"; exit 1; }
    read -r m2 eff s2 < <(step 2 "$m" "$b") && [[ -n $m2 ]] ||
      { say "ddp_step.py failed for $m batch $b, 2 ranks"; exit 1; }
    p1=$(predict "$tmp/$m$b.yaml" "$m" "$b" 1) || { say "dlsim predict failed for $m batch $b"; exit 1; }
    p2=$(predict "$tmp/$m$b.yaml" "$m" "$b" 2) || { say "dlsim predict failed for $m batch $b"; exit 1; }
    verdict=0
    row=$("$python" -c "m1, m2, p1, p2, f, sc = $m1, $m2, $p1, $p2, 100 * $eff, $sc
s1, s2 = max($s1, sc), max($s2, sc)
e1, e2 = 100 * (p1 / m1 - 1), 100 * (p2 / m2 - 1)
g = 100 * p1 / p2
print(f'| $m | $b | 1 | {m1 * 1e3:.1f} ms | {s1:.1f} % | {p1 * 1e3:.1f} ms | {e1:+.1f} % | |')
print(f'| $m | $b | 2 | {m2 * 1e3:.1f} ms | {s2:.1f} % | {p2 * 1e3:.1f} ms | {e2:+.1f} % | {f:.1f} % / {g:.1f} % ({g - f:+.1f}) |')
misses = [s for s, bad in ((s1, abs(e1) > $limit), (s2, abs(e2) > $limit or abs(g - f) > $points)) if bad]
raise SystemExit(0 if not misses else 2 if min(misses) > $spread_limit else 1)") || verdict=$?
    # A miss judged on steady steps outranks one that only noisy steps could explain.
    if [[ $verdict -eq 1 || ($verdict -eq 2 && $miss -eq 0) ]]; then miss=$verdict; fi
    model_rows+=("$row")
    rm -f "$tmp/$m-$b.jsonl"
  done
  return $miss
}
for m in "${models[@]}"; do
  if ! measure "$m"; then
    # This machine's speed drifts by several per cent between runs (docs/validate.md): a miss is
    # measured once more, calibration and job alike, and the second measurement counts.
    say "$m: ${model_rows[*]}; measuring again"
    measure "$m"
    case $? in
      1) fail=1 ;;
      2) noisy=1 ;;
    esac
  fi
  rows+=("${model_rows[@]}")
done
{
  echo "PyTorch DDP (gloo, 1 thread per rank) on this machine against dlsim from the libtorch"
  echo "and gloo calibration alone (tests/torch_ddp.sh; gate: every |error| <= $limit %, the"
  echo "2-rank efficiency within $points points; a row whose job or calibration steps spread by"
  echo "more than $spread_limit % (relative standard deviation, the larger shown) cannot fail it):"
  echo "| model | batch | ranks | measured step | steps' spread | dlsim | error | efficiency measured / dlsim |"
  echo "|---|--:|--:|--:|--:|--:|--:|--:|"
  printf '%s\n' "${rows[@]}"
} | tee "$build/validation-summary-torch.txt"
if [[ $fail -ne 0 ]]; then
  # Other work running now (runnable tasks besides this script, sampled over 2 s) timed itself
  # into the measurements: skip rather than blame the model.
  # shellcheck source=tests/runnable_tasks.sh
  source "$root/tests/runnable_tasks.sh"
  busy=$(runnable_tasks)
  if [[ $busy -gt 1 ]]; then
    say "skipped: $busy tasks runnable besides this test; the comparison needs a quiet machine"
    exit 77
  fi
  say "a prediction misses by more than $limit % or $points points of efficiency" |
    tee -a "$build/validation-summary-torch.txt"
  exit 1
fi
if [[ $noisy -ne 0 ]]; then
  say "skipped: every row that misses comes from a job or calibration whose steps spread by more than" \
    "$spread_limit % (this machine's own noise, more than the gate can resolve)" |
    tee -a "$build/validation-summary-torch.txt"
  exit 77
fi
say "every prediction within $limit %, every efficiency within $points points"
