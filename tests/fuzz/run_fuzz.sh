#!/usr/bin/env bash
# One fuzz target: in the regression mode (any build) it runs the seeds and every input that a
# fuzzer found (tests/fuzz/regressions/TARGET/) once each; in the fuzz mode (a libFuzzer build)
# it fuzzes for SECONDS from the seeds. Crash inputs land in DLSIM_FUZZ_ARTIFACTS (default: a
# scratch folder, printed).
# Usage: run_fuzz.sh regress|fuzz BINARY TARGET SOURCE_DIR [SECONDS]
set -uo pipefail
mode=$1
bin=$2
target=$3
src=$4
seconds=${5:-5}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$here/seeds.sh" "$target" "$src" "$tmp/seeds" || exit 1
regress=$here/regressions/$target
dirs=("$tmp/seeds")
[ -d "$regress" ] && dirs+=("$regress")
# Leaks of a process that exits at once are not findings; everything else is.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
if [ "$mode" = regress ]; then
  files=()
  for d in "${dirs[@]}"; do
    for f in "$d"/*; do [ -f "$f" ] && files+=("$f"); done
  done
  "$bin" "${files[@]}"
  exit $?
fi
artifacts=${DLSIM_FUZZ_ARTIFACTS:-$tmp/artifacts}
mkdir -p "$artifacts" "$tmp/corpus"
# libFuzzer's report of an input past the memory limit first prints a heap profile, which stops
# every thread through ptrace; where ptrace is refused (containers) that report never ends. The
# bound turns such a hang into a finding with its cause instead of the test's timeout.
bound=$((seconds + 240))
timeout -k 10 "$bound" "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$artifacts/" "$tmp/corpus" "${dirs[@]}" 2>"$tmp/log"
rc=$?
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
  echo "fuzz $target: the fuzzer did not end within $bound s; its last lines:"
  grep -v '^#' "$tmp/log" | tail -5
  echo "(an out-of-memory report that hung: find the input with" \
    "'$bin -rss_limit_mb=0 -malloc_limit_mb=256 -timeout=10 CORPUS', which names it)"
fi
grep -E '^(stat::|Done|INFO: (Loaded|seed corpus))|#[0-9]+.*DONE' "$tmp/log" | tail -8
if [ "$rc" -ne 0 ]; then
  echo "fuzz $target: finding (exit $rc); inputs in $artifacts:"
  ls "$artifacts"
  grep -E 'ERROR|SUMMARY|terminate|what\(\)' "$tmp/log" | head -10
  [ -z "${DLSIM_FUZZ_ARTIFACTS:-}" ] && cp -r "$artifacts" "/tmp/dlsim-fuzz-$target-$$" &&
    echo "(copied to /tmp/dlsim-fuzz-$target-$$)"
fi
exit "$rc"
