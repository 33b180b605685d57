#!/usr/bin/env python3
"""Does Citus spread TPC-H's Q1 over the cores? Q1 on the citus layout against the single layout,
regular tables, paired by round.

Runs `pgpathbench run file-fdw-tpch --layout single,citus --storage regular --queries 1` (default SF
1, 4 shards on one worker, 6 rounds) and prints the seconds of each layout (medians with their 95%
interval) and the ratio single / citus paired by round: the speed-up of one worker node running a
partial aggregate on each shard at once, against one PostgreSQL process aggregating every row
(parallel query off on both, as in the study). By hand on 2 cores at SF 1: 3.3 s single, 1.8 s
Citus (1.8x). Also prints each server's CPU in cores (the evidence): the worker's is what spreads.
Target: Q1's ratio on regular tables, its 95% interval above 1 (Citus faster); exits 1 otherwise.
`--storage regular,foreign --queries 1,6` measures more in the same run (interleaved rounds) and
prints each (query, storage) the same way.

    .venv/bin/python bench/citus_speed.py [--scale 1] [--repeat 6] [--partitions 4]
        [--storage regular] [--queries 1] [--workspace DIR]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from benchlib import run_then_report  # noqa: E402
from pgpathbench.report.evidence import server_cores, servers  # noqa: E402
from pgpathbench.results.model import RunResult  # noqa: E402
from pgpathbench.stats import ratio_summary, summarise  # noqa: E402

STUDY = "file-fdw-tpch"


def print_layouts(cases: dict, query: str, storage: str) -> float | None:
    """Each layout's seconds and server CPU for one query and storage; the paired ratio single / citus
    (None when either layout has no measurement)."""
    seconds = {la: {r: ms / 1000 for r, ms in c.values("duration_ms").items()} for la, c in cases.items()}
    print(f"  Q{query} {storage}:")
    for layout, values in seconds.items():
        if not values:
            print(f"    {layout:6} no measurement")
            continue
        s = summarise(list(values.values()))
        roles = {role for m in cases[layout].ok for role in servers(m)}
        cores = {role: statistics.median(v) for role in sorted(roles)
                 if (v := [c for m in cases[layout].ok if (c := server_cores(m, role)) is not None])}
        print(f"    {layout:6} {s.median:.3f} s {s.ci_text}  CPU, cores: "
              + ", ".join(f"{role} {c:.2f}" for role, c in cores.items()))
    r = ratio_summary(seconds.get("single", {}), seconds.get("citus", {}))
    if r is None:
        return None
    print(f"    single / citus, paired by round: {r.median:.2f}x {r.ci_text}  n={r.n}")
    return r.ci_low


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", default="1")
    ap.add_argument("--repeat", type=int, default=6)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--storage", default="regular", help="storages, comma-separated (regular always runs)")
    ap.add_argument("--queries", default="1", help="TPC-H query numbers, comma-separated (Q1 always runs)")
    ap.add_argument("--workspace", help="pgpathbench workspace (default: the tool's default)")
    args = ap.parse_args()
    storages = list(dict.fromkeys(["regular", *args.storage.split(",")]))
    queries = list(dict.fromkeys(["1", *args.queries.split(",")]))
    done = run_then_report([STUDY, "--layout", "single,citus", "--storage", ",".join(storages), "--queries",
                            ",".join(queries), "--scale", args.scale, "--partitions", str(args.partitions),
                            "--repeat", str(args.repeat)], args.workspace)
    if done is None:
        return 1
    wall, report = done
    run = RunResult.from_export(report)
    print(f"run {run.run_id}: SF {args.scale}, {args.partitions} shards on 1 worker, {args.repeat} rounds, "
          f"{wall:.0f} s in all")
    lows = {}
    for query in queries:
        for storage in storages:
            cases = {c["layout"]: c for c in run.study.cases
                     if c["storage"] == storage and c["queries"] == f"q{query}"}
            lows[query, storage] = print_layouts(cases, query, storage)
    low = lows["1", "regular"]
    faster = low is not None and low > 1
    print(f"target: Q1 regular, citus faster (the interval above 1): {'met' if faster else 'NOT met'}")
    return 0 if faster else 1


if __name__ == "__main__":
    sys.exit(main())
