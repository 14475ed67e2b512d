#!/usr/bin/env bash
# tests/step_spread.py against closed forms: the relative standard deviation (sample standard
# deviation over the mean, in %) of the timed steps it finds in a calibration's results and in
# ddp_step.py's JSON, the steps' spread and the ranks' forward-pass imbalance of a replay, and
# one line with exit code 2 for a file that cannot be read.
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
exit $fail
