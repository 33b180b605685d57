"""The report's evidence tables (report/evidence.py) over measurements built by hand."""

from __future__ import annotations

from pgpathbench.report import evidence
from pgpathbench.results.model import CaseResult, Measurement, StudyResult


def measured(rnd: int, commits: int, wal_bytes: int) -> Measurement:
    servers = {"remote": {"database": {"xact_commit": commits, "xact_rollback": 0},
                          "wal": {"wal_bytes": wal_bytes}}}
    return Measurement(round=rnd, session=1, started_at=None, ok=True, error=None, duration_s=1.0,
                       metrics={}, evidence={"servers": servers})


def server_rows(rounds: int) -> list[list]:
    case = CaseResult("interfaces", "c", {}, 0,
                      [measured(r, 100_006, 0 if r > 1 else 215) for r in range(1, rounds + 1)])
    table = evidence.server_table(StudyResult("interfaces", [case], run=None))
    return [dict(zip(table.columns, row)) for row in table.rows]


def test_counters_print_as_counts_whatever_the_number_of_rounds():
    # the median of an odd number of rounds is an int, of an even number a float: both are counts
    for rounds in (3, 4):
        row = server_rows(rounds)[0]
        assert (row["xact_commit"], row["xact_rollback"], row["WAL bytes"]) == ("100,006", "0", "0"), rounds


def test_a_median_between_two_counts_keeps_its_half():
    row = server_rows(2)[0]
    assert row["WAL bytes"] == "107.5"
