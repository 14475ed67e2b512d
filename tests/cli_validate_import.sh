#!/usr/bin/env bash
# dlvalidate import and timeline: fixture logs to a CSV that `dlvalidate published` reads as it
# is, and a timeline's summary; then bad inputs, each one error line, exit code 2 and no output.
# Usage: cli_validate_import.sh DLVALIDATE REPO_ROOT
set -u
dlval=$1
root=$2
logs=$root/tests/fixtures/validate/logs
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# A log to a row, then the rows against predictions.
"$dlval" import "$logs/tf_cnn_benchmarks_1gpu.log" "$logs/tf_cnn_benchmarks_replicated_8gpu.log" \
  --source-id mylab --gpu P100-SXM2 --intra-node "NVLink(DGX-1)" -o "$tmp/mylab.csv" \
  2>"$tmp/import.err"
rc=$?
if [ "$rc" -ne 0 ] || [ "$(wc -l <"$tmp/mylab.csv")" -ne 3 ] ||
   [ "$(head -1 "$tmp/mylab.csv")" != "$(head -1 "$root/validate/data/throughput.csv" | tr -d '\r')" ]; then
  fail "dlvalidate import of two tf_cnn_benchmarks logs (exit $rc)"
  cat "$tmp/import.err"
fi
"$dlval" published --data "$tmp/mylab.csv" --cases "$logs/mylab_cases.yaml" -o "$tmp/report.md" \
  --json "$tmp/report.json" 2>"$tmp/published.err"
rc=$?
if [ "$rc" -ne 0 ] || ! grep -q '"gpus": 8' "$tmp/report.json" ||
   ! grep -q '"measured": 1701.32' "$tmp/report.json"; then
  fail "dlvalidate published on the imported CSV (exit $rc)"
  cat "$tmp/published.err"
fi

# A timeline without its closing bracket, summarized.
"$dlval" timeline "$logs/timeline_unclosed.json" -o "$tmp/timeline.md" --json "$tmp/timeline.json"
rc=$?
if [ "$rc" -ne 0 ] ||
   ! grep -qF '| NCCL_ALLREDUCE | activity | 4 | 1.860 | 0.930 | 0.500 |' "$tmp/timeline.md" ||
   ! grep -q '"open_at_end": 1' "$tmp/timeline.json"; then
  fail "dlvalidate timeline timeline_unclosed.json (exit $rc)"
fi

expect_failure() {  # expect_failure "substring" args... (-o and --json point into $tmp/bad)
  local want=$1
  shift
  rm -rf "$tmp/bad"
  mkdir "$tmp/bad"
  "$dlval" "$@" >"$tmp/stdout" 2>"$tmp/stderr"
  local rc=$?
  if [ "$rc" -ne 2 ] || [ "$(wc -l <"$tmp/stderr")" -ne 1 ] || ! grep -qF -- "$want" "$tmp/stderr" ||
     [ -n "$(ls -A "$tmp/bad")" ]; then
    fail "dlvalidate $* (exit $rc, output: $(ls -A "$tmp/bad"))"
    echo "  wanted: $want"
    sed 's/^/  got:    /' "$tmp/stderr"
  fi
}
out=(-o "$tmp/bad/out.csv")
expect_failure "tf_cnn_benchmarks_cut.log:34: no 'total images/sec' line" \
  import "$logs/tf_cnn_benchmarks_cut.log" "${out[@]}"
expect_failure "tf_cnn_benchmarks_cut.log:34:" \
  import "$logs/tf_cnn_benchmarks_1gpu.log" "$logs/tf_cnn_benchmarks_cut.log" "${out[@]}"
expect_failure "no 'Number of GPUs:' line" \
  import --format horovod "$logs/tf_cnn_benchmarks_1gpu.log" "${out[@]}"
expect_failure "--model: 'resnet5' is not a dlsim zoo model; did you mean 'resnet50'" \
  import --model resnet5 "$logs/tf_cnn_benchmarks_1gpu.log" "${out[@]}"
expect_failure "--nodes: 8 GPUs" \
  import --nodes 3 "$logs/tf_cnn_benchmarks_replicated_8gpu.log" "${out[@]}"
expect_failure "--format" import --format caffe "$logs/tf_cnn_benchmarks_1gpu.log" "${out[@]}"
expect_failure "none.log: cannot open the file" import "$logs/none.log" "${out[@]}"
expect_failure "logs: given twice (one log is one run; its row would count twice)" \
  import "$logs/tf_cnn_benchmarks_1gpu.log" "$logs/../logs/tf_cnn_benchmarks_1gpu.log" "${out[@]}"
expect_failure "tf_cnn_benchmarks_zero_total.log:39: total images/sec: '0' is not a positive rate" \
  import "$logs/tf_cnn_benchmarks_zero_total.log" "${out[@]}"

tl=(-o "$tmp/bad/t.md" --json "$tmp/bad/t.json")
expect_failure "timeline_truncated.json:8: the record that starts on this line is cut" \
  timeline "$logs/timeline_truncated.json" "${tl[@]}"
printf '[\n{"ph": "B", "name": "ALLREDUCE", "name": "X", "ts": 1200, "pid": 1}]' >"$tmp/dup_key.json"
expect_failure "dup_key.json:2: name: given twice in one record" timeline "$tmp/dup_key.json" "${tl[@]}"
printf '[\n{"ph": "B", "name": "", "ts": 1200, "pid": 1}]' >"$tmp/empty_name.json"
expect_failure "empty_name.json:2: name: is empty" timeline "$tmp/empty_name.json" "${tl[@]}"
printf '[\n{"ph": "B", "name": "ALLREDUCE", "ts": "1200", "pid": 1}]' >"$tmp/bad_type.json"
expect_failure "bad_type.json:2: ts: \"1200\" is not a number" \
  timeline "$tmp/bad_type.json" "${tl[@]}"
expect_failure "none.json: cannot open the file" timeline "$logs/none.json" "${tl[@]}"
printf '[\n{"ph": "B", "name": "ALLREDUCE", "ts": 1e300, "pid": 1}]' >"$tmp/far_ts.json"
expect_failure "far_ts.json:2: ts: 1e+300 us is not a time in a timeline (0 .. 1e+12 us)" \
  timeline "$tmp/far_ts.json" "${tl[@]}"
printf '[\n{"ph": "X", "name": "MEMCPY", "ts": 10, "dur": -3, "pid": 1}]' >"$tmp/neg_dur.json"
expect_failure "neg_dur.json:2: dur: -3 us is not a time in a timeline" timeline "$tmp/neg_dur.json" "${tl[@]}"
printf '[\n{"ph": "B", "name": "ALLREDUCE", "ts": 10, "pid": -1}]' >"$tmp/neg_pid.json"
expect_failure "neg_pid.json:2: pid: -1 is not a tensor's row (0 or more)" \
  timeline "$tmp/neg_pid.json" "${tl[@]}"
printf '[\n{"ph": "FOO", "name": "ALLREDUCE", "ts": 10, "pid": 1}]' >"$tmp/bad_ph.json"
expect_failure "bad_ph.json:2: ph: 'FOO' is not an event phase Horovod writes" \
  timeline "$tmp/bad_ph.json" "${tl[@]}"

[ "$failures" -eq 0 ] && echo "cli_validate_import: ok"
[ "$failures" -eq 0 ]
