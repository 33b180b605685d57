#!/usr/bin/env python3
"""fdw-overhead's read-only TPS through postgres_fdw to the external server, direct against a 2 ms link.

tests/integration/test_links.py asserts what no load can undo: each transaction through the link
waits for two of its round trips at least. How far the TPS falls is a timing claim it no longer
asserts (beside another suite, at load 7-12, the direct path fell to 200 TPS in one round, 3.4x the
linked one's best): here, for an idle machine, the direct TPS over the linked, paired by round,
above 5 at the lower end of its 95% interval.

    .venv/bin/python bench/link_slowdown.py [--rounds 6] [--workspace DIR]
"""

from __future__ import annotations

import sys

from benchlib import by_case, rounds_run
from pgpathbench.stats import ratio_summary

TARGET = 5.0
DIRECT, LINKED = "ro:fdw_external:1:0ms:15:simple", "ro:fdw_external:1:2ms:15:simple"
# The test's run, its local case apart.
RUN = ["fdw-overhead", "--preset", "quick", "--workload", "ro", "--target", "fdw_external", "--clients", "1",
       "--latency", "0,2ms", "--duration", "1", "--evidence", "off"]


def main() -> int:
    report = rounds_run(__doc__, RUN)
    if report is None:
        return 1
    tps = by_case(report, "tps")
    r = ratio_summary(tps.get(DIRECT, {}), tps.get(LINKED, {}))
    if r is None:
        print("FAIL: the direct and the linked case were not both measured in a round")
        return 1
    ok = r.ci_low > TARGET
    print(f"{'ok  ' if ok else 'FAIL'} TPS direct / through the 2 ms link: {r.median:.2f}x {r.ci_text} "
          f"(n={r.n}, target > {TARGET} at the interval's lower end)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
