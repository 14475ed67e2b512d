#!/bin/bash
# ctest entry of the Slurm path: starts the local two-node cluster (tests/slurm/local_cluster.sh),
# runs tests/slurm/end_to_end.sh against it and stops the cluster again, whatever happened.
# Skipped (exit 77) where it cannot run: not root, or no network namespaces and no Slurm
# packages to install.
#
#   tests/slurm/ctest_slurm.sh path/to/dlcalibrate path/to/dlsim
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DLCALIBRATE=${1:?usage: ctest_slurm.sh path/to/dlcalibrate path/to/dlsim}
DLSIM=${2:?usage: ctest_slurm.sh path/to/dlcalibrate path/to/dlsim}

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
