#!/usr/bin/env bash
# tests/step_spread.py against closed forms: the relative standard deviation (sample standard
# deviation over the mean, in %) of the timed steps it finds in a calibration's results and in
# ddp_step.py's JSON, the steps' spread and the ranks' forward-pass imbalance of a replay, and
# one line with exit code 2 for a file that cannot be read; and ddp_step.py's job step from its
# ranks' steps.
# Usage: step_spread_test.sh REPO_ROOT
set -u
root=$1
python=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # expected, then step_spread.py's arguments
  local want=$1 got
  shift
  got=$("$python" "$root/tests/step_spread.py" "$@") || { echo "step_spread: $* failed"; fail=1; return; }
  if [[ $got != "$want" ]]; then
    echo "step_spread: $* gave $got, want $want"
    fail=1
  fi
}
# A calibration: two layers; the steps are the sums 3, 6 and 9 s (mean 6, sd 3: 50 %).
cat >"$tmp/cal.jsonl" <<'J'
{"kind":"dlcalibrate-results","provenance":{}}
{"op":"layer_forward","samples_s":[1,2,3]}
{"op":"layer_backward","samples_s":[2,4,6]}
{"kind":"dlcalibrate-trailer"}
J
check 50.000 "$tmp/cal.jsonl"
# A job's log: exchanging steps 1, 1, 1, 1 (0 %), no-exchange steps 2, 4 (mean 3, sd 1.414:
# 47.140 %), and another batch's line steps 1, 3 (mean 2, sd 1.414: 70.711 %).
cat >"$tmp/job.out" <<'J'
dlsim-launch: job 2_0 on node1 node2
{"kind": "pytorch-ddp-step", "batch_per_rank": 8, "step_times_s": [1, 1, 1, 1], "no_sync_step_times_s": [2, 4]}
{"kind": "pytorch-ddp-step", "batch_per_rank": 16, "step_times_s": [1, 3]}
J
check 47.140 --batch 8 "$tmp/job.out"
check 70.711 "$tmp/job.out"
# The largest over files; one timed step is no spread.
echo '{"kind": "pytorch-ddp-step", "batch_per_rank": 8, "step_times_s": [5]}' >"$tmp/one.json"
check 0.000 "$tmp/one.json"
check 50.000 --batch 8 "$tmp/job.out" "$tmp/cal.jsonl"
# A replay: steps median 2 s, stddev 0.2 s (10 %); the ranks' forward passes 45.455 % apart
# (dlvalidate replay's forward_imbalance, a fraction); on one rank only the steps count.
cat >"$tmp/replay.json" <<'J'
{"kind": "replay-measurement", "summary": {"step_time_s": {"median": 2, "stddev": 0.2},
 "forward_imbalance": 0.45455}}
J
check 45.455 "$tmp/replay.json"
cat >"$tmp/replay1.json" <<'J'
{"kind": "replay-measurement", "summary": {"step_time_s": {"median": 2, "stddev": 0.2},
 "forward_imbalance": 0}}
J
check 10.000 "$tmp/replay1.json"
# A file that is not there: one line naming it, exit code 2.
out=$("$python" "$root/tests/step_spread.py" "$tmp/missing.jsonl" 2>&1)
rc=$?
if [[ $rc -ne 2 || $out != "step_spread.py: $tmp/missing.jsonl: No such file or directory" ]]; then
  echo "step_spread: a missing file gave exit $rc and '$out'"
  fail=1
fi
# ddp_step.py's job step from every rank's (job_steps): ranks with no-exchange steps T = 1 s and
# T + X = 1.1 s and an exchange of E = 0.05 s. After a no-exchange step the faster rank waits
# out its lead too, T + 2X + E = 1.25 s, the slower T + X + E = 1.15 s: the job's exchange step
# is 1.15 s and its no-exchange step the ranks' mean, 1.05 s. Needs Debian's python3-torch
# (ddp_step.py imports it); without it the check is left out.
if "$python" -c 'import torch, torchvision' 2>/dev/null; then
  got=$(cd "$root/validate/torch" && "$python" -c '
import ddp_step
times, local = ddp_step.job_steps([([1.25, 1.25], [1.0, 1.0]), ([1.15, 1.15], [1.1, 1.1])])
print(" ".join(f"{v:.3f}" for v in times + local))') || got="failed"
  if [[ $got != "1.150 1.150 1.050 1.050" ]]; then
    echo "step_spread: ddp_step.job_steps gave '$got', want '1.150 1.150 1.050 1.050'"
    fail=1
  fi
fi
exit $fail
