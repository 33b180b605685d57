"""interfaces-fidelity's loop table over measurements built by hand: a query's CPU and wall time on
each side, their ratios paired by round, and the verdicts against the 10% CPU target and the 2%
wall-time bound (issue 43)."""

from __future__ import annotations

import pytest

from pgpathbench.results.model import CaseResult, Measurement, StudyResult
from pgpathbench.studies.interfaces_fidelity.report import loop_figures, tables

QUERIES = 50_000


def case(tool: str, transport: str, cpu_ms: list[float], wall_ms: list[float], workload: str = "loop") -> CaseResult:
    rounds = [Measurement(round=r, session=1, started_at=None, ok=True, error=None, duration_s=w / 1000,
                          metrics={"cpu_ms": c, "duration_ms": w, "rows": QUERIES, "mode": "normal"})
              for r, (c, w) in enumerate(zip(cpu_ms, wall_ms), start=1)]
    dims = {"workload": workload, "tool": tool, "transport": transport, "pg": "15"}
    return CaseResult("interfaces-fidelity", f"{workload}:{tool}:{transport}:15", dims, 0, rounds)


def result(*cases: CaseResult) -> StudyResult:
    return StudyResult("interfaces-fidelity", list(cases), run=None)


def test_cpu_and_wall_a_query_and_their_ratios_paired_by_round():
    # pgbench's CPU drifts by round (a shared machine); the client's follows at 1.05x: the pairing
    # keeps the ratio at 1.05 whatever the drift, while the medians' ratio would not
    pgbench = [300.0 + 40 * r for r in range(10)]
    ref = case("reference", "unix", pgbench, [2000.0] * 10)
    libpq = case("libpq", "unix", [1.05 * c for c in pgbench], [2000.0 * 1.10] * 10)
    found = {(f.key.tool, f.measure): f for f in loop_figures(result(ref, libpq))}
    cpu, wall = found[("libpq", "CPU")], found[("libpq", "wall")]
    assert cpu.reference_us == pytest.approx((460 + 500) / 2 * 1000 / QUERIES)
    assert cpu.client_us == pytest.approx(1.05 * cpu.reference_us)
    assert (cpu.ratio.median, cpu.ratio.ci_low, cpu.ratio.ci_high) == pytest.approx((1.05, 1.05, 1.05))
    assert cpu.verdict == "met"                                # at or below 1.10
    assert (wall.reference_us, wall.client_us) == pytest.approx((40.0, 44.0))
    assert wall.ratio.median == pytest.approx(1.10) and wall.verdict == "missed"    # above 1.02


def test_verdicts_name_the_diagnostic_and_an_undecided_interval():
    ref = case("reference", "tcp", [400.0] * 10, [2000.0] * 10)
    spread = [0.95, 0.97, 0.99, 1.00, 1.01, 1.02, 1.03, 1.04, 1.05, 1.06]
    libpq = case("libpq", "tcp", [400 * s for s in spread], [2000 * s for s in spread])
    nochecksum = case("libpq-nochecksum", "tcp", [300.0] * 10, [1900.0] * 10)
    odbc = case("odbc", "tcp", [900.0] * 10, [2400.0] * 10)
    found = {(f.key.tool, f.measure): f.verdict for f in loop_figures(result(ref, libpq, nochecksum, odbc))}
    assert found[("libpq", "CPU")] == "met"                    # its interval tops out at 1.06
    assert found[("libpq", "wall")] == "undecided: median within, CI spans 1.02"
    assert found[("libpq-nochecksum", "CPU")] == "diagnostic: met"
    assert found[("odbc", "CPU")] == found[("odbc", "wall")] == "finding"


def test_only_the_loop_has_the_table_and_it_lists_both_measures():
    copy_ref = case("reference", "unix", [3000.0] * 6, [8000.0] * 6, workload="copy")
    copy_libpq = case("libpq", "unix", [4000.0] * 6, [7000.0] * 6, workload="copy")
    assert loop_figures(result(copy_ref, copy_libpq)) == []
    titles = [t.title for t in tables(result(copy_ref, copy_libpq))]
    assert not any("1-row loop" in t for t in titles)
    loop = [t for t in tables(result(case("reference", "unix", [300.0] * 6, [2000.0] * 6),
                                     case("libpq", "unix", [360.0] * 6, [2000.0] * 6)))
            if "1-row loop" in t.title]
    (table,) = loop
    rows = [dict(zip(table.columns, row)) for row in table.rows]
    assert [(r["Client"], r["Measure"], r["Bound"]) for r in rows] == [("libpq", "CPU", 1.10), ("libpq", "wall", 1.02)]
    assert rows[0]["Ratio"] == pytest.approx(1.2) and rows[0]["Verdict"] == "missed"
    assert rows[0]["pgbench us"] == pytest.approx(6.0) and rows[0]["Client us"] == pytest.approx(7.2)
