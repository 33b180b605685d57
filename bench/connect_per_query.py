#!/usr/bin/env python3
"""On the seed's own clock, the 1-row query x 50 connecting per query against connecting once.

Seed 003's duration is the client command's wall time, process start included. tests/integration/
test_interfaces.py asserts that connecting per query is far slower on the client's own clock and by
each connection's cost; this is the seed's-clock ratios it no longer asserts: on a busy machine the
once case's few milliseconds can grow by a scheduling delay of the same size (libpq's each/once
2.86x seen with two suites side by side, issue 43), so they are timing claims for an idle machine.
Targets: every libpq case's each/once duration, paired by round, above 4 at the lower end of its
95% interval (libpq's start is small beside 50 connections; JDBC's and psycopg's JVM or interpreter
start, ODBC's driver manager can outweigh them); the median of every interface's ratios above 3.

    .venv/bin/python bench/connect_per_query.py [--rounds 6] [--workspace DIR]
"""

from __future__ import annotations

import statistics
import sys

from benchlib import by_case, rounds_run
from pgpathbench.stats import ratio_summary

LIBPQ_TARGET, ALL_TARGET = 4.0, 3.0
# The test's 1-row matrix: every interface and method over every transport, at 50 iterations (the
# test runs 20: its claims are each connection's cost, these the ratios of the whole commands).
RUN = ["interfaces", "--preset", "quick", "--sqlstrat", "sql001:each,sql001:once",
       "--iterations", "50", "--output", "p-all:file", "--each-transports", "unix,tcp,remote",
       "--each-methods", "normal,single-row,cursor,copy"]


def main() -> int:
    report = rounds_run(__doc__, RUN)
    if report is None:
        return 1
    durations = by_case(report, "duration_ms")
    met, medians = True, []
    for case in sorted(c for c in durations if ":sql001:each:" in c):
        r = ratio_summary(durations[case], durations.get(case.replace(":sql001:each:", ":sql001:once:"), {}))
        if r is None:
            print(f"FAIL {case}: no connect-once case measured in the same rounds")
            met = False
            continue
        medians.append(r.median)
        ok = r.ci_low > LIBPQ_TARGET or not case.startswith("libpq:")
        met &= ok
        target = f", target > {LIBPQ_TARGET}" if case.startswith("libpq:") else ""
        print(f"{'ok  ' if ok else 'FAIL'} {case}: each/once {r.median:.2f}x {r.ci_text} (n={r.n}{target})")
    overall = statistics.median(medians) if medians else 0.0
    met &= overall > ALL_TARGET
    print(f"{'ok  ' if overall > ALL_TARGET else 'FAIL'} median of the {len(medians)} cases' ratios: {overall:.2f}x "
          f"(target > {ALL_TARGET})")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
