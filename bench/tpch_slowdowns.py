#!/usr/bin/env python3
"""Does Q6 slow down through file_fdw more than Q1 does (seed 002), and by how much? Their slowdowns
(foreign / regular) paired by round, then Q6's over Q1's paired by round.

Runs `pgpathbench run file-fdw-tpch --preset quick --layout single --queries 1,6 --repeat N` (SF 0.01)
and prints each query's slowdown (median, 95% interval) and the factor Q6 / Q1 with its interval.
The seed's PostgreSQL column: 11.76 / 1.707 = 6.9x at SF 10. Until 2026-12-01 the integration test
asserted a factor above 1.5 at SF 0.01 with 6 rounds; it failed once, at 1.47x (4.54 / 3.08), and moved
here. Target: the factor's 95% interval above 1 (the seed's direction); exits 1 otherwise.

    .venv/bin/python bench/tpch_slowdowns.py [--rounds 12] [--workspace DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from benchlib import by_case, rounds_run  # noqa: E402
from pgpathbench.stats import ratio_summary, summarise  # noqa: E402

SEED_FACTOR = 11.76 / 1.707


def main() -> int:
    report = rounds_run(__doc__, ["file-fdw-tpch", "--preset", "quick", "--layout", "single",
                                  "--queries", "1,6"])
    if report is None:
        return 1
    ms = by_case(report, "duration_ms")
    slowdown = {}   # query -> round -> foreign / regular
    for q in ("q1", "q6"):
        foreign, regular = ms.get(f"{q}:foreign:single:15", {}), ms.get(f"{q}:regular:single:15", {})
        slowdown[q] = {r: foreign[r] / regular[r] for r in foreign.keys() & regular.keys() if regular[r]}
        s = summarise(list(slowdown[q].values()))
        print(f"  {q.upper()} slowdown through file_fdw: {s.median:.2f}x {s.ci_text}  n={s.n}")
    factor = ratio_summary(slowdown["q6"], slowdown["q1"])
    if factor is None:
        print("no round measured both queries on both storages")
        return 1
    print(f"  Q6 / Q1, paired by round: {factor.median:.2f}x {factor.ci_text}  n={factor.n} "
          f"(the seed's: {SEED_FACTOR:.1f}x at SF 10)")
    met = factor.ci_low > 1
    print(f"target: Q6 slows down more than Q1 (the interval above 1): {'met' if met else 'NOT met'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
