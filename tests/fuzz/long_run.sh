#!/usr/bin/env bash
# The long fuzzing run of docs/reliability.md: every target of a -DDLSIM_FUZZ=ON build, one after
# the other, SECONDS each, from its seeds and the inputs found before; prints one table row per
# target (the seconds it really ran, executions, edges covered, features, corpus, findings; a
# target stops at its first finding). Findings land in OUT/artifacts/TARGET/ for a regression
# test (tests/fuzz/regressions/TARGET/).
# Usage: long_run.sh BUILD_DIR SECONDS OUT_DIR [TARGET...]   (default: every target)
set -uo pipefail
build=$1
seconds=$2
out=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
mkdir -p "$out"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
echo "| target | seconds | executions | exec/s | edges (cov) | features (ft) | corpus | findings |"
echo "|---|---|---|---|---|---|---|---|"
bins=("$build"/tests/fuzz/fuzz_*)
if [ $# -gt 0 ]; then
  bins=()
  for t in "$@"; do bins+=("$build/tests/fuzz/fuzz_$t"); done
fi
for bin in "${bins[@]}"; do
  t=$(basename "$bin")
  t=${t#fuzz_}
  mkdir -p "$out/corpus/$t" "$out/artifacts/$t"
  "$here/seeds.sh" "$t" "$src" "$out/seeds/$t" >/dev/null 2>&1
  dirs=("$out/corpus/$t" "$out/seeds/$t")
  [ -d "$here/regressions/$t" ] && dirs+=("$here/regressions/$t")
  start=$(date +%s)
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$out/artifacts/$t/" "${dirs[@]}" >"$out/$t.log" 2>&1
  rc=$?
  took=$(($(date +%s) - start))
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/$t.log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$out/$t.log")
  last=$(grep -E '^#[0-9]+' "$out/$t.log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$last")
  found=$(ls "$out/artifacts/$t" | wc -l)
  echo "| $t | $took | ${runs:-?} | ${rate:-?} | ${cov:-?} | ${ft:-?} | ${corp:-?} | $found (exit $rc) |"
done
