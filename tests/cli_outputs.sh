#!/usr/bin/env bash
# Every output of the three programs, to each kind of target (common/output.hpp): a device node
# is written through and never replaced (/dev/null stays a character device, also as root), a
# full device is one error line and exit 2, a symbolic link is followed, a FIFO is written
# through, and a failed run leaves no file.
# Usage: cli_outputs.sh DLSIM DLCALIBRATE DLVALIDATE SOURCE_DIR
set -u
dlsim=$1
dlcal=$2
dlval=$3
src=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
checked=0
check() {  # check "description" command...
  local what=$1
  shift
  checked=$((checked + 1))
  if ! "$@"; then
    echo "FAIL: $what"
    failures=$((failures + 1))
  fi
}
devices_intact() { [ -c /dev/null ] && [ -c /dev/full ]; }
# One line on stderr naming WANT, exit 2: expect_error WANT command...
expect_error() {
  local want=$1
  shift
  "$@" >"$tmp/stdout" 2>"$tmp/stderr"
  local rc=$?
  checked=$((checked + 1))
  if [ "$rc" -ne 2 ] || [ "$(wc -l <"$tmp/stderr")" -ne 1 ] || ! grep -qF -- "$want" "$tmp/stderr"; then
    echo "FAIL: $* (exit $rc) wanted one line with: $want"
    sed 's/^/  got: /' "$tmp/stderr"
    failures=$((failures + 1))
  fi
}

fx=$src/tests/fixtures/calibrate
data=$src/validate/data

# /dev/null as every output file.
check "predict -o /dev/null" "$dlsim" predict --model resnet50 --gpus 8 --format json -o /dev/null
check "predict --trace /dev/null" "$dlsim" predict --model resnet50 --gpus 8 --trace /dev/null -o /dev/null
check "scale --plot /dev/null" "$dlsim" scale --model resnet50 --gpus 1,2 --plot /dev/null -o /dev/null
check "model show -o /dev/null" "$dlsim" model show googlenet -o /dev/null
check "collective -o /dev/null" "$dlsim" collective --gpus 8 --bytes 1MiB -o /dev/null
check "hardware show -o /dev/null" "$dlsim" hardware show default -o /dev/null
check "dlcalibrate import -o /dev/null" "$dlcal" import osu "$fx/osu_bw.txt" -o /dev/null
check "dlcalibrate show -o /dev/null" "$dlcal" show "$fx/results_one_allreduce.jsonl" -o /dev/null
check "dlvalidate published -o /dev/null" "$dlval" published --data "$data/throughput.csv" \
  --cases "$src/validate/cases/dle_pyt_rn50_2103.yaml" -o /dev/null --json /dev/null --html /dev/null
check "/dev/null and /dev/full are still character devices" devices_intact

# A full device: one line naming it, exit 2, the device left as it was.
expect_error "/dev/full: writing failed" "$dlsim" predict --model resnet50 --gpus 8 -o /dev/full
expect_error "/dev/full: writing failed" "$dlsim" predict --model resnet50 --gpus 8 --trace /dev/full -o "$tmp/p.txt"
check "a failed trace leaves no result" test ! -e "$tmp/p.txt"
expect_error "/dev/full: writing failed" "$dlsim" scale --model resnet50 --gpus 1,2 --plot /dev/full
expect_error "/dev/full: writing failed" "$dlcal" import osu "$fx/osu_bw.txt" -o /dev/full
expect_error "/dev/full: writing failed" "$dlval" published --data "$data/throughput.csv" \
  --cases "$src/validate/cases/dle_pyt_rn50_2103.yaml" -o /dev/full
expect_error "standard output: writing failed" sh -c "exec \"$dlsim\" model list >/dev/full"
check "/dev/full is still a character device" devices_intact

# A directory and a missing folder.
expect_error "is a directory" "$dlsim" predict --model resnet50 --gpus 8 -o "$tmp"
expect_error "the folder $tmp/no does not exist" "$dlsim" predict --model resnet50 --gpus 8 -o "$tmp/no/such.json"
# A file on a file system that takes no new file: the output replaces files by renaming.
if [ -f /proc/version ]; then
  expect_error "/proc/version: cannot replace it: no new file can be made beside it in /proc" \
    "$dlsim" predict --model resnet50 --gpus 8 -o /proc/version
fi

# A symbolic link is followed: the link stays, its target holds the output.
echo old >"$tmp/target.json"
ln -s target.json "$tmp/link.json"
check "predict through a symlink" "$dlsim" predict --model resnet50 --gpus 8 --format json -o "$tmp/link.json"
check "the link is still a link" test -L "$tmp/link.json"
check "its target holds the JSON" grep -q '"step_time_s"' "$tmp/target.json"

# A FIFO is written through to its reader.
mkfifo "$tmp/pipe"
cat "$tmp/pipe" >"$tmp/from_pipe" &
reader=$!
check "predict into a FIFO" "$dlsim" predict --model resnet50 --gpus 8 --format csv -o "$tmp/pipe"
wait "$reader"
check "the reader got the CSV" grep -q '^model,gpus' "$tmp/from_pipe"
check "the FIFO is still a FIFO" test -p "$tmp/pipe"

# An existing file keeps its permissions.
echo old >"$tmp/mode.txt"
chmod 640 "$tmp/mode.txt"
check "predict over a 0640 file" "$dlsim" predict --model resnet50 --gpus 8 -o "$tmp/mode.txt"
check "it is still 0640" test "$(stat -c %a "$tmp/mode.txt")" = 640
check "no temporary file is left" test "$(ls -A "$tmp" | grep -c '^\.')" -eq 0

echo "$((checked - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
