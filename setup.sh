#!/usr/bin/env bash
# Installs what dlsim needs from Debian 12 packages (as root, only what is missing) and builds
# it in Release mode into ./build. Environment:
#   DLSIM_BUILD_DIR  build directory (default: build)
#   DLSIM_WERROR     ON to treat compiler warnings as errors (CI sets it)
set -euo pipefail
cd "$(dirname "$0")"

packages=(
  build-essential cmake ninja-build git clang-format
  libeigen3-dev libboost-graph-dev nlohmann-json3-dev libyaml-cpp-dev doctest-dev
  libcli11-dev libfmt-dev libonnx-dev libonnx-testdata libprotobuf-dev protobuf-compiler
  libopenmpi-dev openmpi-bin
  slurm-wlm munge iproute2
  libtorch-dev libgloo-dev python3-torch python3-torchvision
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

build=${DLSIM_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DDLSIM_WERROR="${DLSIM_WERROR:-OFF}" >/dev/null
cmake --build "$build" --parallel
