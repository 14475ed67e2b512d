#!/bin/bash
# ctest entry of the Slurm path: starts the local two-node cluster (tests/slurm/local_cluster.sh),
# runs tests/slurm/end_to_end.sh (dlcalibrate) and, with a dlvalidate, launch_end_to_end.sh
# against it, and stops the cluster again, whatever happened.
# Skipped (exit 77) where it cannot run: not root, or no network namespaces and no Slurm
# packages to install.
#
#   tests/slurm/ctest_slurm.sh path/to/dlcalibrate path/to/dlsim [path/to/dlvalidate]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DLCALIBRATE=${1:?usage: ctest_slurm.sh path/to/dlcalibrate path/to/dlsim}
DLSIM=${2:?usage: ctest_slurm.sh path/to/dlcalibrate path/to/dlsim}
DLVALIDATE=${3:-}

if [[ $(id -u) -ne 0 ]]; then
  echo "ctest_slurm: skipped: the local Slurm cluster needs root (munged, slurmd, netns)"
  exit 77
fi
if ! command -v slurmctld >/dev/null 2>&1 && ! command -v apt-get >/dev/null 2>&1; then
  echo "ctest_slurm: skipped: no Slurm and no apt-get to install it"
  exit 77
fi

trap '"$HERE/local_cluster.sh" stop >/dev/null 2>&1 || true' EXIT
"$HERE/local_cluster.sh" start
"$HERE/end_to_end.sh" "$DLCALIBRATE" "$DLSIM"
if [[ -n $DLVALIDATE ]]; then
  rc=0
  "$HERE/launch_end_to_end.sh" "$DLVALIDATE" || rc=$?
  # Without python3-torch the launch test skips; the calibration test above still counts.
  [[ $rc -eq 0 || $rc -eq 77 ]] || exit "$rc"
fi
