#!/usr/bin/env python3
"""Benchmark of the tool's own cost, on the quick fdw-overhead demo.

Targets (issue 2): on a machine already set up, the quick demo finishes in under 3 minutes,
provisioning and loading take under 20 s, and the tool's own work between measurements
(bookkeeping, result writes, progress) adds under 1% to a run. Prints each figure beside its
target and exits 1 if one is missed. Also checks pgbench's own figures on an idle machine: its
latency average is clients x duration / TPS within 25% in every measurement without failed or
retried transactions, i.e. its clients were busy the whole run (with --clients 1,5 too: on a loaded
machine the test suite holds several clients only to the upper bound; issue 43).

    .venv/bin/python bench/tool_overhead.py [--workspace DIR] [--clients 1,5]
"""

from __future__ import annotations

import argparse
import sys

from benchlib import run_then_report


def idle_share(report: dict) -> float:
    """The largest share of a run pgbench's clients were not in a transaction: 1 - latency x TPS /
    (clients x 1000), over the measurements without failed or retried transactions (its absolute
    value: above 1 means the figures disagree the other way)."""
    shares = [abs(1 - m["metrics"]["latency_ms"] * m["metrics"]["tps"] / (m["metrics"]["clients"] * 1000))
              for m in report["measurements"] if m["ok"] and m["metrics"]["failures"] == 0
              and m["metrics"]["retries"] == 0]
    return max(shares, default=0.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workspace", help="pgpathbench workspace (default: the tool's default)")
    ap.add_argument("--clients", help="fdw-overhead's --clients (default: the quick preset's)")
    args = ap.parse_args()
    clients = ["--clients", args.clients] if args.clients else []
    done = run_then_report(["fdw-overhead", "--preset", "quick", *clients], args.workspace)
    if done is None:
        return 1
    wall, report = done
    s = report["run"]["summary"]["last_session"]
    checks = [
        ("quick demo, wall time", wall, 180.0, "s"),
        ("provisioning + loading", s["prepare_s"], 20.0, "s"),
        ("bookkeeping between measurements", 100 * s["bookkeeping_fraction"], 1.0, "% of measuring time"),
        ("pgbench's clients idle, the worst measurement", 100 * idle_share(report), 25.0, "% of the run"),
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
