#!/usr/bin/env bash
# dlvalidate published: the shipped cases against the published data with the CI gate (median
# <= 10 %, P90 <= 20 % per data set), printing the summary; then bad inputs, each one error line,
# exit code 2 and no report written.
# Usage: cli_validate.sh DLVALIDATE REPO_ROOT
set -u
dlval=$1
root=$2
fx=$root/tests/fixtures/validate
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

"$dlval" published --data "$root/validate/data/throughput.csv" \
  --data "$root/validate/data/scaling_claims.csv" \
  --cases "$root/validate/cases/tfbench2017.yaml" --cases "$root/validate/cases/horovod_docs.yaml" \
  --max-median-error 10 --max-p90-error 20 -o "$tmp/report.md" --json "$tmp/report.json"
rc=$?
if [ "$rc" -ne 0 ] || [ ! -s "$tmp/report.md" ] || ! grep -q '"p90_abs_error"' "$tmp/report.json"; then
  echo "FAIL: the published validation (exit $rc)"
  failures=$((failures + 1))
fi

expect_failure() {  # expect_failure "substring" args...
  local want=$1
  shift
  rm -f "$tmp/bad.md"
  "$dlval" published "$@" -o "$tmp/bad.md" >"$tmp/stdout" 2>"$tmp/stderr"
  local rc=$?
  if [ "$rc" -ne 2 ] || [ "$(wc -l <"$tmp/stderr")" -ne 1 ] || ! grep -qF -- "$want" "$tmp/stderr" ||
     [ -e "$tmp/bad.md" ]; then
    echo "FAIL: dlvalidate published $* (exit $rc)"
    echo "  wanted: $want"
    sed 's/^/  got:    /' "$tmp/stderr"
    failures=$((failures + 1))
  fi
}
tp=$root/validate/data/throughput.csv
tf=$root/validate/cases/tfbench2017.yaml
expect_failure "missing_columns/throughput.csv: value: missing column" \
  --data "$fx/missing_columns/throughput.csv" --cases "$fx/no_match.yaml"
expect_failure "cut_row.csv:2: 4 fields where the header has 19" --data "$fx/cut_row.csv" --cases "$tf"
expect_failure "matches no row of" --data "$tp" --cases "$fx/no_match.yaml"
expect_failure "unknown key 'framwork'; did you mean 'framework'" --data "$tp" --cases "$fx/typo.yaml"
expect_failure "no --data file named 'throughput'" --data "$root/validate/data/scaling_claims.csv" \
  --cases "$tf"
expect_failure "cannot open the file" --data "$tmp/none.csv" --cases "$tf"

[ "$failures" -eq 0 ] && echo "cli_validate: ok"
[ "$failures" -eq 0 ]
