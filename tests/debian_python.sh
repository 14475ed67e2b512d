# Sourced by the tests that run Debian's PyTorch. Debian's python3-torch installs for Debian's
# own python3, which may not be the first python3 on PATH.
# shellcheck shell=bash
python=/usr/bin/python3
# require_modules TEST "PACKAGES" MODULE...: exits 77 (skipped) unless $python imports every
# MODULE, naming the Debian PACKAGES that provide them.
require_modules() {
  local test=$1 packages=$2
  shift 2
  local list
  list=$(IFS=,; echo "$*")
  if ! "$python" -c "import $list" 2>/dev/null; then
    echo "$test: skipped: $python cannot import $list (apt-get install $packages)"
    exit 77
  fi
}
