#!/usr/bin/python3
"""The spread of the timed steps behind a measurement on this machine's shared cores.

Used by the tests that compare a real job with dlsim's prediction from a calibration taken on the
same machine (tests/torch_ddp.sh, tests/slurm/launch_emulated.sh; docs/validate.md, "Noisy
machines"): a row whose steps spread by more than the gate can resolve cannot fail it.

    step_spread.py [--batch B] FILE...

prints the largest relative standard deviation (%) of the timed steps found in the files:
- dlcalibrate results (`run torch` records with samples_s): each timed step is the sum over
  every record of its sample of that step (`run torch` times whole steps, layer by layer);
- ddp_step.py's JSON line (alone or in a job's log): its step_times_s and, with --paired,
  no_sync_step_times_s, each kind on its own. With --batch, only the lines of that batch per
  rank;
- dlvalidate replay's JSON (kind replay-measurement): its steps' standard deviation over their
  median, and the ranks' imbalance it reports (summary.forward_imbalance: how much longer the
  slowest rank's forward pass takes than the fastest's). Every rank runs the same forward pass,
  and no exchange runs during it, so an imbalance is a core that gave its rank less time (other
  work, or the host taking it).

Prints 0 where a file has fewer than two timed steps. Exits 2 naming the file when one cannot be
read.
"""

import argparse
import json
import statistics
import sys


def relative_sd(times):
    """Relative standard deviation of `times` (%), 0 for fewer than two."""
    if len(times) < 2:
        return 0.0
    return 100 * statistics.stdev(times) / statistics.mean(times)


def replay_spreads(replay):
    """(steps' spread, ranks' imbalance) of a dlvalidate replay's JSON document, both in %."""
    summary = replay.get("summary", {})
    steps = summary.get("step_time_s", {})
    median = steps.get("median", 0)
    step_spread = 100 * steps.get("stddev", 0) / median if median > 0 else 0.0
    return step_spread, 100 * summary.get("forward_imbalance", 0.0)


def read_replay(path):
    """dlvalidate replay's JSON document in `path`, or None where the file is something else."""
    with open(path) as f:
        text = f.read()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        return None
    return doc if isinstance(doc, dict) and doc.get("kind") == "replay-measurement" else None


def file_spread(path, batch):
    """The largest spread of the timed steps in one file (%)."""
    calibration = None
    spreads = [0.0]
    if path.endswith(".json"):
        replay = read_replay(path)
        if replay is not None:
            return max(replay_spreads(replay))
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            if r.get("kind") == "pytorch-ddp-step":
                if batch is not None and r.get("batch_per_rank") != batch:
                    continue
                for key in ("step_times_s", "no_sync_step_times_s"):
                    spreads.append(relative_sd(r.get(key, [])))
            elif r.get("samples_s"):
                s = r["samples_s"]
                calibration = list(s) if calibration is None else [
                    a + b for a, b in zip(calibration, s)]
    if calibration:
        spreads.append(relative_sd(calibration))
    return max(spreads)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=None,
                   help="only ddp_step.py lines of this batch per rank")
    p.add_argument("files", nargs="+")
    args = p.parse_args()
    worst = 0.0
    for path in args.files:
        try:
            worst = max(worst, file_spread(path, args.batch))
        except OSError as e:
            print(f"step_spread.py: {path}: {e.strerror}", file=sys.stderr)
            return 2
    print(f"{worst:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
