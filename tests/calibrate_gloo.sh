#!/bin/bash
# dlcalibrate run gloo for real: two local processes all-reduce through PyTorch's c10d gloo over
# loopback TCP; every size is in the file with its wall and CPU time, show prints both, and fit
# turns them into the host's node and library.
# Skips (77) where the build has no gloo (no libtorch, or no libgloo-dev).
#
#   tests/calibrate_gloo.sh DLCALIBRATE
set -euo pipefail
DLCAL=$1
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
fail() { echo "calibrate_gloo: $*" >&2; exit 1; }

if ! "$DLCAL" run gloo --ranks 2 --cpu-cost -b 4KiB -e 1MiB -f 16 -n 3 -w 1 -o "$OUT/g.jsonl" \
  2>"$OUT/err"; then
  if grep -q "this build has no gloo" "$OUT/err"; then
    echo "calibrate_gloo: skipped: $(cat "$OUT/err")"
    exit 77
  fi
  cat "$OUT/err" >&2
  fail "run gloo failed"
fi
python3 - "$OUT/g.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()][1:]
recs = [r for r in recs if r.get("op") == "allreduce"]
sizes = [r["bytes"] for r in recs]
assert sizes == [4096.0, 65536.0, 1048576.0], sizes
for r in recs:
    assert r["backend"] == "gloo" and r["ranks"] == 2 and r["nodes"] == 1, r
    assert len(r["samples_s"]) == 3 and all(s > 0 for s in r["samples_s"]), r
    assert float(r["params"]["cpu_s_per_call"]) > 0, r
    assert float(r["params"]["s_per_call_beside_compute"]) > 0, r
PY
"$DLCAL" show "$OUT/g.jsonl" >"$OUT/show.txt"
grep -q "allreduce gloo ranks=2 nodes=1: CPU time per call" "$OUT/show.txt" ||
  fail "show prints no CPU table"
# fit makes the host's node and library of them: the ranks joined through the host at the
# measured rate, and the exchange's CPU time per call and per byte.
"$DLCAL" fit "$OUT/g.jsonl" -o "$OUT/host.yaml" >"$OUT/fit.txt" 2>&1 || fail "fit: $(cat "$OUT/fit.txt")"
for want in "  gpus: 2" "loopback: {bandwidth:" "- [gpu*, cpu0, loopback]" "extends: \"mpi\"" \
  "host_cpu: {per_call:"; do
  grep -qF -- "$want" "$OUT/host.yaml" || fail "the fitted profile lacks '$want'"
done
# Bad input: one line, exit 2, no file.
set +e
"$DLCAL" run gloo --ranks 1 -o "$OUT/bad.jsonl" 2>"$OUT/bad.err"
rc=$?
set -e
[[ $rc -eq 2 ]] || fail "--ranks 1 gave exit $rc"
grep -q -- "--ranks: must be in 2..64, got 1" "$OUT/bad.err" || fail "--ranks 1: $(cat "$OUT/bad.err")"
[[ ! -e $OUT/bad.jsonl ]] || fail "--ranks 1 wrote a file"
echo "calibrate_gloo: ok"
