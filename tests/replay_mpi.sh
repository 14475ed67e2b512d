#!/bin/bash
# dlvalidate replay for real under Open MPI: 2 ranks on this machine (loopback TCP), a small
# CNN, each framework policy's exchange (Horovod fusion cycles, DDP buckets, TensorFlow's
# per-variable parameter servers). Checks what crosses the network against the model's
# gradients, the output files, and the bad inputs: ranks that disagree on the configuration
# (exit 2, one line naming the rank and setting, nothing written) and a rank killed mid-run
# (the job stops, nothing written).
#
#   tests/replay_mpi.sh DLVALIDATE SOURCE_DIR
set -euo pipefail
DLVALIDATE=$1 SRC=$2
MODEL=$SRC/tests/fixtures/validate/replay_small.yaml
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
MPI=(mpirun --oversubscribe --mca btl self,tcp)
fail() { echo "replay_mpi: $*" >&2; exit 1; }

# The CPU replay runs libtorch: a build without it (the sanitizer build) says so and skips.
if ! "$DLVALIDATE" replay --model "$MODEL" --batch 1 --steps 1 --warmup 0 \
  --json "$OUT/probe.json" --csv "$OUT/probe.csv" 2>"$OUT/probe.err"; then
  if grep -q "no libtorch" "$OUT/probe.err"; then
    echo "replay_mpi: skipped: $(cat "$OUT/probe.err")"
    exit 77
  fi
  cat "$OUT/probe.err" >&2
  fail "a one-rank replay failed"
fi

for fw in horovod pytorch-ddp tf-ps; do
  "${MPI[@]}" -np 2 "$DLVALIDATE" replay --model "$MODEL" --batch 4 --steps 3 --warmup 1 \
    --framework "$fw" --json "$OUT/$fw.json" --csv "$OUT/$fw.csv" 2>"$OUT/$fw.err"
  cat "$OUT/$fw.err"
  python3 - "$OUT/$fw.json" "$OUT/$fw.csv" "$fw" "$SRC" <<'PY'
import csv, json, sys
j = json.load(open(sys.argv[1]))
fw = sys.argv[3]
assert j["kind"] == "replay-measurement", j["kind"]
assert j["config"]["ranks"] == 2 and len(j["ranks"]) == 2, j["config"]
grad = j["model"]["gradient_bytes"]
# conv1, bn1, conv2, fc1, fc2: a weight and a bias each
assert j["model"]["gradient_tensors"] == 10, j["model"]
for r in j["ranks"]:
    assert len(r["step_s"]) == 3, r
    # Every gradient byte goes into the exchange once per step, whatever the grouping.
    assert r["exchanged_bytes_per_step"] == grad, (r["exchanged_bytes_per_step"], grad)
    colls = r["collectives_per_step"]
    if fw == "tf-ps":
        assert colls == 10, colls  # one exchange per variable
    elif fw == "pytorch-ddp":
        assert colls == 1, colls  # all 0.53 MiB fit DDP's 1 MiB first bucket
    else:
        assert 1 <= colls <= 10, colls
    assert all(s > 0 for s in r["step_s"])
    # The ring's point-to-point steps: on two ranks each sends half of every buffer in the
    # reduce-scatter and the other half in the all-gather, so all of it, in every timed step.
    if fw == "tf-ps":
        assert r["ring_sent_bytes"] == 0 and r["ring_send_rate_bytes_per_s"] is None, r
    else:
        assert r["ring_sent_bytes"] == 3 * grad, (r["ring_sent_bytes"], grad)
        assert r["ring_step_s"] > 0, r
        assert abs(r["ring_send_rate_bytes_per_s"] * r["ring_step_s"] - r["ring_sent_bytes"]) \
            <= 1e-9 * r["ring_sent_bytes"], r
s = j["summary"]
assert abs(s["samples_per_s"] - 2 * 4 / s["step_time_s"]["median"]) < 1e-6 * s["samples_per_s"]
rows = list(csv.DictReader(open(sys.argv[2])))
header = open(sys.argv[4] + "/validate/data/throughput.csv").readline().strip().split(",")
assert list(rows[0].keys()) == header, rows[0].keys()
assert len(rows) == 1 and rows[0]["num_gpus"] == "2" and rows[0]["batch_per_gpu"] == "4"
assert abs(float(rows[0]["value"]) - s["samples_per_s"]) < 1e-3, rows[0]["value"]
print(f"replay_mpi: {fw}: {colls} collectives of {grad:.0f} B per step, "
      f"step {s['step_time_s']['median'] * 1e3:.1f} ms median")
PY
done

# Ranks that disagree: rank 1 asks for another batch.
set +e
"${MPI[@]}" -np 1 "$DLVALIDATE" replay --model "$MODEL" --batch 4 --steps 1 --json "$OUT/bad.json" : \
  -np 1 "$DLVALIDATE" replay --model "$MODEL" --batch 8 --steps 1 --json "$OUT/bad.json" \
  >"$OUT/bad.log" 2>&1
rc=$?
set -e
[[ $rc -eq 2 ]] || { cat "$OUT/bad.log"; fail "disagreeing ranks: exit $rc, expected 2"; }
grep -q "ranks disagree on the configuration: rank 1 has batch_per_rank = 8 where rank 0 has 4" \
  "$OUT/bad.log" || { cat "$OUT/bad.log"; fail "disagreeing ranks: no line naming rank and setting"; }
[[ ! -e $OUT/bad.json ]] || fail "disagreeing ranks: an output file was written"

# A rank killed mid-run: mpirun ends the job; nothing is written.
set +e
"${MPI[@]}" -np 2 "$DLVALIDATE" replay --model "$MODEL" --batch 4 --steps 100000 --warmup 0 \
  --json "$OUT/killed.json" --csv "$OUT/killed.csv" >"$OUT/killed.log" 2>&1 &
job=$!
for _ in $(seq 100); do
  [[ $(pgrep -f "replay --model $MODEL --batch 4 --steps 100000" | wc -l) -ge 2 ]] && break
  sleep 0.1
done
sleep 2
victim=$(pgrep -f "replay --model $MODEL --batch 4 --steps 100000" | grep -v "^$job\$" | tail -1)
kill -9 "$victim"
wait "$job"
rc=$?
set -e
cat "$OUT/killed.log"
[[ $rc -ne 0 ]] || fail "killed rank: mpirun exited 0"
[[ ! -e $OUT/killed.json && ! -e $OUT/killed.csv ]] || fail "killed rank: an output file was written"
grep -q "exited on signal 9\|rank 1" "$OUT/killed.log" || fail "killed rank: no line naming the rank"
echo "replay_mpi: disagreeing ranks exit 2; a killed rank ends the job (exit $rc) with nothing written"
