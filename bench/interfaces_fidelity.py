#!/usr/bin/env python3
"""Are the native clients the bottleneck of the interfaces study? (issue: the clients' fidelity)

Runs `pgpathbench run interfaces-fidelity` (default: the standard preset, t10m 1M rows and a
20000-query loop, 10 rounds) and prints, side by side from that one run on the same server and
table, each client's wall time over the reference tool's: its COPY against
`psql -c "COPY ... TO STDOUT" > /dev/null`, and its normal mode's 1-row loop on one connection
against pgbench running the same query from a -f script with the same number of transactions.
Ratios are paired by round, with their 95% interval. Target: libpq no more than 5% slower
than each reference; the other clients' ratios are findings; libpq-nochecksum (pgpb_libpq built
without the contract's checksum loop) shows what that checksum costs. Exits 1 unless libpq meets
the target in all four.

    .venv/bin/python bench/interfaces_fidelity.py [--preset quick|standard|paper] [--workspace DIR] [--repeat N]
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from benchlib import run_then_report  # noqa: E402
from pgpathbench.stats import ratio_summary  # noqa: E402
from pgpathbench.studies.interfaces_fidelity import DIAGNOSTIC, TARGET, target_verdict  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="standard", choices=("quick", "standard", "paper"))
    ap.add_argument("--repeat", type=int, help="rounds (default: the preset's)")
    ap.add_argument("--workspace", help="pgpathbench workspace (default: the tool's default)")
    args = ap.parse_args()
    extra = ["--repeat", str(args.repeat)] if args.repeat else []
    done = run_then_report(["interfaces-fidelity", "--preset", args.preset, *extra], args.workspace)
    if done is None:
        return 1
    wall, report = done
    series: dict[tuple, dict[int, float]] = defaultdict(dict)
    modes = {}
    for m in report["measurements"]:
        if m["ok"]:
            d = m["dims"]
            key = (d["pg"], d["workload"], d["transport"], d["tool"])
            series[key][m["round"]] = m["metrics"]["duration_s"]
            modes[key] = m["metrics"].get("mode", "")
    env = next(v for k, v in report["run"]["environment"]["sessions"][-1].items()
               if k.startswith("interfaces_fidelity_pg"))
    print(f"run {report['run']['run_id']} ({args.preset}: t10m {env['rows']:,} rows = {env['copy_bytes'] / 1e6:.0f} MB "
          f"of COPY text, loop x {env['iterations']:,}), {wall:.0f} s")
    ok = True
    for key in sorted(series):
        pg, workload, transport, tool = key
        ref = series.get((pg, workload, transport, "reference"))
        if tool == "reference" or not ref:
            continue
        r = ratio_summary(series[key], ref)
        verdict = target_verdict(r) if tool == "libpq" else \
            "diagnostic: what the checksum costs" if tool == DIAGNOSTIC else "finding"
        if tool == "libpq" and verdict != "met":
            ok = False
        reference = "psql COPY" if workload == "copy" else "pgbench -f"
        print(f"{'    ' if tool != 'libpq' else ('ok  ' if verdict == 'met' else 'MISS')} "
              f"{workload:4} {transport:4} {tool:16} ({modes[key]:6}) / {reference:10}: {r.median:.3f} "
              f"{r.ci_text}  n={r.n}  {verdict}")
    print(f"target: libpq at most {TARGET - 1:.0%} slower than each reference (95% interval at or below {TARGET})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
