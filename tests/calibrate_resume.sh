#!/usr/bin/env bash
# dlcalibrate run, killed with SIGKILL mid-sweep: the results file holds only complete records
# (each a single write(2) of a whole line, synced), and --resume finishes the sweep without
# measuring any point twice; a second --resume then has nothing left to measure. For `run cpu`
# and for `run mpi` under mpirun (2 ranks; rank 0 writes).
# Usage: calibrate_resume.sh DLCALIBRATE
set -u
dlcal=$1
tmp=$(mktemp -d)
trap 'pkill -9 -f "$tmp/" 2>/dev/null; rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# Every line is a whole JSON record and the file ends with a newline.
whole_records() {
  python3 - "$1" <<'PY'
import json, sys
text = open(sys.argv[1], encoding="utf-8").read()
assert text.endswith("\n"), "no newline at the end"
for line in text.splitlines():
    json.loads(line)
PY
}
records() { grep -c '"op":' "$1" || true; }
repeated() {
  grep '"op":' "$1" | python3 -c '
import json, sys
keys = [(r["op"], r["backend"], r["ranks"], r["bytes"], r.get("shape", "")) for r in map(json.loads, sys.stdin)]
print(len(keys) - len(set(keys)))'
}

# kill_then_resume NAME LAUNCH... : starts LAUNCH -o FILE in the background, kills every process
# writing FILE once it holds 3 records, then resumes twice.
kill_then_resume() {
  local name=$1
  shift
  local file=$tmp/$name.jsonl
  "$@" -o "$file" >"$tmp/$name.log" 2>&1 &
  local launcher=$!
  for _ in $(seq 600); do
    [[ -f $file && $(records "$file") -ge 3 ]] && break
    sleep 0.05
  done
  if ! [[ -f $file && $(records "$file") -ge 3 ]]; then
    fail "$name: no 3 records in 30 s: $(tail -3 "$tmp/$name.log")"
    return
  fi
  pkill -9 -f -- "-o $file" || fail "$name: nothing to kill"
  wait "$launcher" 2>/dev/null
  local before
  before=$(records "$file")
  whole_records "$file" || fail "$name: an incomplete record after SIGKILL"
  "$@" -o "$file" --resume >"$tmp/$name.resume.log" 2>&1 ||
    fail "$name: --resume failed: $(tail -3 "$tmp/$name.resume.log")"
  grep -q "($before already there)" "$tmp/$name.resume.log" ||
    fail "$name: the resume did not skip the $before records: $(tail -1 "$tmp/$name.resume.log")"
  "$@" -o "$file" --resume >"$tmp/$name.again.log" 2>&1 || fail "$name: the second --resume failed"
  grep -q "^dlcalibrate: 0 points measured" "$tmp/$name.again.log" ||
    fail "$name: the sweep was not complete after one resume: $(tail -1 "$tmp/$name.again.log")"
  [[ $(repeated "$file") -eq 0 ]] || fail "$name: a point was measured twice"
  whole_records "$file" || fail "$name: an incomplete record after the resume"
  echo "$name: killed after $before records; --resume measured $(($(records "$file") - before)) more, none twice"
}

kill_then_resume cpu "$dlcal" run cpu --ops copy,triad -b 64KiB -e 64MiB -n 5 -w 1
if "$dlcal" run mpi --help >/dev/null 2>&1 && command -v mpirun >/dev/null; then
  kill_then_resume mpi mpirun -np 2 --bind-to none "$dlcal" run mpi --ops p2p,allreduce \
    -b 8B -e 8MiB -n 5 -w 1
else
  echo "mpi: skipped (no MPI in this build)"
fi
echo "$failures failed"
[ "$failures" -eq 0 ]
