#!/bin/bash
# dlcalibrate's MPI benchmarks for real: 2 ranks on this machine over one Open MPI transport
# (vader = shared memory, tcp = the loopback TCP stack), then the fit of every series. Prints the
# per-size error of the fit and fails when one from 64 KiB up is over 10 % in two measurements.
# Then the profile: `dlcalibrate fit` of the results, and `dlsim predict` with it.
#
#   tests/calibrate_mpi.sh DLCALIBRATE DLSIM vader|tcp LARGEST
#
# The fits take each point's fastest sample (--statistic min): CI machines are shared, and other
# work only ever adds time.
set -euo pipefail
DLCALIBRATE=$1 DLSIM=$2 BTL=$3 LARGEST=$4
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# One measurement and its fit; sets `worst` (the largest fit error from 64 KiB up, %) and `rows`.
measure() {
  rm -f "$OUT/mpi.jsonl"
  mpirun -np 2 --oversubscribe --mca btl "self,$BTL" "$DLCALIBRATE" run mpi \
    -b 4B -e "$LARGEST" -f 2 -n 7 -w 2 --min-time 2ms -o "$OUT/mpi.jsonl"
  "$DLCALIBRATE" show "$OUT/mpi.jsonl" --min-bytes 64KiB --statistic min | tee "$OUT/show.txt"
  # Rows of the per-size tables: size time fit busbw error.
  worst=$(awk 'NF == 5 && $1 ~ /^[0-9]+$/ && $1 >= 65536 { e = $5 < 0 ? -$5 : $5; if (e > w) w = e }
    END { print w + 0 }' "$OUT/show.txt")
  rows=$(awk 'NF == 5 && $1 ~ /^[0-9]+$/ && $1 >= 65536' "$OUT/show.txt" | wc -l)
  echo "calibrate_mpi ($BTL): $rows sizes from 64 KiB up, worst fit error $worst %"
}
within() { awk -v w="$worst" 'BEGIN { exit !(w <= 10) }'; }

measure
[[ $rows -ge 20 ]] || { echo "calibrate_mpi: expected at least 20 fitted sizes, got $rows" >&2; exit 1; }
if ! within; then
  # A whole point can be slow in all of its samples when the VM stalls for a few milliseconds
  # (in one CI run, allreduce at 512 KiB took longer than at 1 MiB in all 7): that is the
  # measurement, not the fit, so the sweep is measured once more, and a second miss fails.
  echo "calibrate_mpi: worst fit error $worst % (over 10 %): measuring once more"
  measure
fi
if ! within; then
  # On a machine loaded beyond its cores, the two ranks lose their CPUs for whole samples: the
  # measurements then time the scheduler, and no fit is expected to follow them.
  load=$(cut -d' ' -f1 /proc/loadavg)
  if awk -v l="$load" -v n="$(nproc)" 'BEGIN { exit !(l > n) }'; then
    echo "calibrate_mpi: skipped: load average $load on $(nproc) cores; worst fit error $worst %"
    exit 77
  fi
  echo "calibrate_mpi: a fit misses its own measurement by $worst % (over 10 %), twice" >&2
  exit 1
fi

# The results become a profile dlsim reads (a CPU "device" and the measured link).
"$DLCALIBRATE" run cpu --ops copy,triad,gemm -b 64KiB -e 1MiB -n 3 -w 1 --max-flops 1GFLOP \
  -o "$OUT/cpu.jsonl" 2>/dev/null
"$DLCALIBRATE" fit "$OUT/cpu.jsonl" "$OUT/mpi.jsonl" --statistic min -o "$OUT/measured.yaml"
"$DLSIM" predict --model resnet18 --gpus 2 --cluster "$OUT/measured.yaml" --format json \
  -o "$OUT/predict.json"
grep -q '"throughput_samples_per_s"' "$OUT/predict.json"
echo "calibrate_mpi ($BTL): profile written and read by dlsim predict"

# --cpu-cost: the compute each allreduce takes from a busy thread on the rank's cores, with the
# cores the ranks were bound to (mpirun binds each of 2 ranks to a core of its own).
mpirun -np 2 --oversubscribe --mca btl "self,$BTL" "$DLCALIBRATE" run mpi --ops allreduce \
  --cpu-cost -b 1MiB -e 4MiB -f 4 -n 3 -w 1 -o "$OUT/cpu-cost.jsonl"
python3 - "$OUT/cpu-cost.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rows = [r for r in rows if r.get("op") == "allreduce"]
assert len(rows) == 2, rows
for r in rows:
    p = r["params"]
    # A call keeps the rank's core for part of its time at least: it costs some compute.
    assert float(p["cpu_s_per_call"]) > 0, p
    assert float(p["s_per_call_beside_compute"]) > 0, p
    assert int(p["rank_cores"]) >= 1 and int(p["ranks_per_node"]) == 2, p
print("calibrate_mpi: --cpu-cost:", ", ".join(
    f'{r["bytes"]:.0f} B {1e3 * float(r["params"]["cpu_s_per_call"]):.3f} ms' for r in rows))
PY
