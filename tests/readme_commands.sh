#!/usr/bin/env bash
# Every command of the README's "What works now" block runs, in order, from a scratch folder that
# sees the repository's files (validate/, tests/, examples/), with the built programs on PATH.
# A command that exits non-zero fails the test. Usage: readme_commands.sh BUILD_DIR SOURCE_DIR
set -u
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export PATH="$build/simulator:$build/calibrate:$build/validate:$PATH"
# Open MPI refuses root unless told; CI runs as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for d in validate tests examples docs; do ln -s "$src/$d" "$tmp/$d"; done
cd "$tmp" || exit 1

# The block's lines; a trailing backslash continues a command, "  # ..." ends one.
mapfile -t commands < <(awk '
  /^## What works now/ { section = 1; next }
  section && /^```sh/ { inside = 1; next }
  inside && /^```/ { exit }
  inside {
    line = $0
    sub(/  +#.*$/, "", line)
    if (line ~ /\\$/) { sub(/\\$/, "", line); pending = pending line; next }
    print pending line
    pending = ""
  }' "$src/README.md")

[ "${#commands[@]}" -ge 20 ] || { echo "FAIL: found only ${#commands[@]} README commands"; exit 1; }
failures=0
for c in "${commands[@]}"; do
  [ -n "${c// /}" ] || continue
  if bash -c "$c" >"$tmp/out.txt" 2>&1; then
    echo "ok: $c"
  else
    echo "FAIL (exit $?): $c"
    tail -5 "$tmp/out.txt" | sed 's/^/  /'
    failures=$((failures + 1))
  fi
done
echo "${#commands[@]} README commands, $failures failed"
[ "$failures" -eq 0 ]
