#!/usr/bin/env bash
# Runs after every other test (the fixture cleanup of tests/CMakeLists.txt): no program of the
# suite replaced a device node by renaming a file over it, which as root would break every other
# program on the machine.
status=0
for d in /dev/null /dev/full /dev/zero; do
  if [ -e "$d" ] && [ ! -c "$d" ]; then
    echo "FAIL: $d is no longer a character device: $(stat -c '%F' "$d")"
    status=1
  fi
done
[ "$status" -eq 0 ] && echo "/dev/null, /dev/full and /dev/zero are character devices"
exit "$status"
