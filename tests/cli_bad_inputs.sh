#!/usr/bin/env bash
# Every bad input must give exactly one error line naming the problem, exit code 2, and no
# output file. Usage: cli_bad_inputs.sh DLSIM BAD_INPUT_DIR
set -u
dlsim=$1
dir=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
checked=0

expect_failure() {  # expect_failure "substring" args...
  local want=$1
  shift
  local out="$tmp/out.json"
  rm -f "$out"
  "$dlsim" "$@" -o "$out" >"$tmp/stdout" 2>"$tmp/stderr"
  local rc=$?
  local lines
  lines=$(wc -l <"$tmp/stderr")
  checked=$((checked + 1))
  if [ "$rc" -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -qF -- "$want" "$tmp/stderr" ||
     [ -e "$out" ] || [ -s "$tmp/stdout" ]; then
    echo "FAIL: dlsim $* (exit $rc, $lines stderr lines, output file $( [ -e "$out" ] && echo present || echo absent))"
    echo "  wanted: $want"
    sed 's/^/  got:    /' "$tmp/stderr"
    failures=$((failures + 1))
  fi
}

for f in "$dir"/*.yaml; do
  want=$(sed -n '1s/^# expect: //p' "$f")
  expect_failure "$want" model show "$f" --format json
done
expect_failure "unknown model 'googlenett'; did you mean 'googlenet'" model show googlenett
expect_failure "--batch: must be a positive integer, got -3" model show googlenet --batch -3
expect_failure "--batch: must be a positive integer, got 0" model show googlenet --batch 0
expect_failure "unknown precision 'fp8'" model show googlenet --precision fp8
expect_failure "model 'gpt2' has no parameter 'seqlen'; did you mean 'seq_len'" model show gpt2 --set seqlen=64
expect_failure "expected NAME=VALUE" model show gpt2 --set seq_len
expect_failure "'layers[0].shape[0]': expected an integer, got 'long'" model show gpt2 --set seq_len=long
expect_failure "--format" model show googlenet --format xml
expect_failure "no such file" model show ./missing.yaml

echo "$((checked - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
