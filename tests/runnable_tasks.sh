# shellcheck shell=bash
# Sourced by the tests that time real work on this machine's shared cores (tests/torch_ddp.sh,
# tests/live_validation.sh, tests/slurm/launch_emulated.sh): when one misses its gate, other
# work running at that moment may have timed itself into the measurements.

# Prints how many tasks are runnable on the machine: the median of 10 samples of
# /proc/loadavg's run queue over 2 s (the calling shell, reading it with a builtin, is the one
# runnable task of a quiet machine).
runnable_tasks() {
  local samples=() queue
  for _ in $(seq 10); do
    read -r _ _ _ queue _ </proc/loadavg
    samples+=("${queue%/*}")
    sleep 0.2
  done
  printf '%s\n' "${samples[@]}" | sort -n | sed -n 5p
}
