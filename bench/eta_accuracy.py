#!/usr/bin/env python3
"""Benchmark: how close the run's ETA after its first round comes to the time the rest really took.

Runs a study through the CLI as a user would, reads its progress lines as they come, and
compares the estimate of each line `round N done; the rest: about X` with the wall time from
that line to the last such line (the end of the last round, its probes included). The target
(issue 15): within 25% after round 1; the later rounds' errors are printed too.

    .venv/bin/python bench/eta_accuracy.py [--workspace DIR] [-- RUN ARGS...]
    default run: fdw-overhead --preset quick --duration 3 --repeat 4 --target local,fdw_local,fdw_external
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time

TARGET = 0.25
DEFAULT = ["fdw-overhead", "--preset", "quick", "--duration", "3", "--repeat", "4",
           "--target", "local,fdw_local,fdw_external"]


def seconds(text: str) -> float:
    """'1h02m' or '3m07s' as seconds."""
    m = re.fullmatch(r"(?:(\d+)h)?(\d+)m(?:(\d+)s)?", text)
    if not m:
        raise ValueError(text)
    h, mins, s = (int(g or 0) for g in m.groups())
    return h * 3600 + mins * 60 + s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workspace")
    ap.add_argument("run", nargs="*", help="the run's arguments (after --)")
    args = ap.parse_args()
    cmd = [sys.executable, "-m", "pgpathbench.cli", "run", *(args.run or DEFAULT),
           *(["--workspace", args.workspace] if args.workspace else [])]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    estimates = []       # (round, estimate s, when)
    for line in proc.stderr:
        m = re.search(r"round (\d+) done; the rest: about (\S+)", line)
        if m:
            estimates.append((int(m.group(1)), seconds(m.group(2)), time.monotonic()))
    if proc.wait() != 0 or len(estimates) < 2 or estimates[0][0] != 1:
        print("the run failed or printed fewer than two rounds' estimates", file=sys.stderr)
        return 1
    end = estimates[-1][2]
    errors = {}
    for round_no, estimate, when in estimates[:-1]:
        actual = end - when
        errors[round_no] = (estimate - actual) / actual
        print(f"after round {round_no}: estimate {estimate:.0f} s; the rest took {actual:.1f} s; "
              f"error {errors[round_no]:+.0%}")
    ok = abs(errors[1]) <= TARGET
    print(f"after round 1: {'OK' if ok else 'FAIL'} (target within {TARGET:.0%})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
