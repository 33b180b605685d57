#!/usr/bin/env python3
"""Benchmark of the tool's own cost, on the quick fdw-overhead demo.

Targets (issue 2): on a machine already set up, the quick demo finishes in under 3 minutes,
provisioning and loading take under 20 s, and the tool's own work between measurements
(bookkeeping, result writes, progress) adds under 1% to a run. Prints each figure beside its
target and exits 1 if one is missed.

    .venv/bin/python bench/tool_overhead.py [--workspace DIR]
"""

from __future__ import annotations

import argparse
import sys

from benchlib import run_then_report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workspace", help="pgpathbench workspace (default: the tool's default)")
    args = ap.parse_args()
    done = run_then_report(["fdw-overhead", "--preset", "quick"], args.workspace)
    if done is None:
        return 1
    wall, report = done
    s = report["run"]["summary"]["last_session"]
    checks = [
        ("quick demo, wall time", wall, 180.0, "s"),
        ("provisioning + loading", s["prepare_s"], 20.0, "s"),
        ("bookkeeping between measurements", 100 * s["bookkeeping_fraction"], 1.0, "% of measuring time"),
    ]
    print(f"run {report['run']['run_id']}: {len(report['measurements'])} measurements, "
          f"measuring {s['measure_s']:.1f} s, bookkeeping {s['bookkeeping_s'] * 1000:.0f} ms")
    ok = True
    for name, value, limit, unit in checks:
        good = value < limit
        ok &= good
        print(f"{'ok  ' if good else 'FAIL'} {name}: {value:.3f} {unit} (target < {limit:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
