#!/usr/bin/env python3
"""Are the native clients the bottleneck of the interfaces study? (issue: the clients' fidelity)

Runs `pgpathbench run interfaces-fidelity` (default: the standard preset, t10m 1M rows and a
20000-query loop, 10 rounds) and prints, side by side from that one run on the same server and
table, each client's wall time over the reference tool's: its COPY against
`psql -c "COPY ... TO STDOUT" > /dev/null`, and its normal mode's 1-row loop on one connection
against pgbench running the same query from a -f script with the same number of transactions.
Ratios are paired by round, with their 95% interval. Target: libpq no more than 5% slower
than each reference; the other clients' ratios are findings; libpq-nochecksum (pgpb_libpq built
without the contract's checksum loop) shows what that checksum costs. For the loop it also
prints each side's CPU (user + sys) and wall time a query, the CPU ratio against its target
(libpq at most 10% above pgbench's) and the wall-time ratio against a 2% bound, each met,
missed or undecided by its interval. Exits 1 unless libpq meets the 5% target in all four and
the CPU target over each transport.

    .venv/bin/python bench/interfaces_fidelity.py [--preset quick|standard|paper] [--workspace DIR] [--repeat N]
        [--workload copy|loop] [--tool reference,libpq,...] [--transport unix|tcp]
    .venv/bin/python bench/interfaces_fidelity.py --preset paper --workload loop --tool reference,libpq,libpq-nochecksum --repeat 40
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from benchlib import run_then_report  # noqa: E402
from pgpathbench.results.model import RunResult  # noqa: E402
from pgpathbench.studies.interfaces_fidelity.report import loop_figures, pairs  # noqa: E402
from pgpathbench.studies.interfaces_fidelity.spec import LOOP_CPU_TARGET, LOOP_WALL_BOUND, TARGET, verdict  # noqa: E402

STUDY = "interfaces-fidelity"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="standard", choices=("quick", "standard", "paper"))
    ap.add_argument("--repeat", type=int, help="rounds (default: the preset's)")
    ap.add_argument("--workspace", help="pgpathbench workspace (default: the tool's default)")
    ap.add_argument("--workload", choices=("copy", "loop"), help="one workload only (default: both)")
    ap.add_argument("--tool", help="the study's --tool (default: every client; the ratios need reference)")
    ap.add_argument("--transport", help="the study's --transport: unix, tcp or both (default: both)")
    args = ap.parse_args()
    extra = [f"--{name}={value}" for name, value in (("repeat", args.repeat), ("workload", args.workload),
                                                       ("tool", args.tool), ("transport", args.transport))
             if value]
    done = run_then_report([STUDY, "--preset", args.preset, *extra], args.workspace)
    if done is None:
        return 1
    wall, report = done
    run = RunResult.from_export(report)
    facts = run.environment.setup_of(STUDY)
    print(f"run {run.run_id} ({args.preset}: t10m {facts['rows']:,} rows = {facts['copy_bytes'] / 1e6:.0f} MB "
          f"of COPY text, loop x {facts['iterations']:,}), {wall:.0f} s")
    ok = True
    for key, client, _, r in pairs(run.study):
        said = verdict(key.tool, r)
        if key.tool == "libpq" and said != "met":
            ok = False
        mode = next(iter(client.raw("mode").values()), "")
        reference = "psql COPY" if key.workload == "copy" else "pgbench -f"
        print(f"{'    ' if key.tool != 'libpq' else ('ok  ' if said == 'met' else 'MISS')} "
              f"{key.workload:4} {key.transport:4} {key.tool:16} ({mode:6}) / {reference:10}: {r.median:.3f} "
              f"{r.ci_text}  n={r.n}  {said}")
    print(f"target: libpq at most {TARGET - 1:.0%} slower than each reference (95% interval at or below {TARGET})")
    return 0 if print_loop(run) and ok else 1


def print_loop(run: RunResult) -> bool:
    """The loop's CPU and wall time a query beside pgbench's; True when libpq meets the CPU target."""
    ok = True
    for f in loop_figures(run.study):
        if f.key.tool == "libpq" and f.measure == "CPU" and f.verdict != "met":
            ok = False
        print(f"     loop {f.key.transport:4} {f.key.tool:16} {f.measure:4} a query: pgbench {f.reference_us:.2f} us, "
              f"client {f.client_us:.2f} us: {f.ratio.median:.3f} {f.ratio.ci_text}  n={f.ratio.n}  "
              f"<= {f.bound}: {f.verdict}")
    print(f"loop: libpq's CPU a query at most {LOOP_CPU_TARGET - 1:.0%} above pgbench's (target), its wall time "
          f"within {LOOP_WALL_BOUND - 1:.0%} (reported: decided when the interval lies on one side)")
    return ok


if __name__ == "__main__":
    sys.exit(main())
