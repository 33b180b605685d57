#!/usr/bin/env python3
"""Benchmark: how close the run's ETA after its first round comes to the time the rest really took.

Runs a study through the CLI as a user would, reads its progress lines as they come, and
compares the estimate of the line `round 1 done; the rest: about X` with the wall time from that
line to the run's last measurement. The target (issue 15): within 25%.

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
    estimate = t_estimate = t_last = None
    for line in proc.stderr:
        now = time.monotonic()
        m = re.search(r"round 1 done; the rest: about (\S+)", line)
        if m:
            estimate, t_estimate = seconds(m.group(1)), now
        if re.match(r"\[\d+/\d+\] round", line):
            t_last = now
    if proc.wait() != 0 or estimate is None or t_last is None:
        print("the run failed or printed no estimate", file=sys.stderr)
        return 1
    actual = t_last - t_estimate
    error = abs(estimate - actual) / actual
    print(f"estimate after round 1: {estimate:.0f} s; the rest took {actual:.1f} s; error {error:.0%} "
          f"({'OK' if error <= TARGET else 'FAIL'}: target within {TARGET:.0%})")
    return 0 if error <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
