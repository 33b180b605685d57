"""Report tables: the evidence tables over measurements built by hand, the run table over a
stored run (docs/runs)."""

from __future__ import annotations

from pathlib import Path

from pgpathbench.report import assemble, evidence
from pgpathbench.results import exported
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


def test_the_run_table_names_every_client_the_run_used():
    # an interfaces run records its clients' versions, not pgbench's: all of them are shown
    stored = Path(__file__).resolve().parents[2] / "docs" / "runs" / "20261125-222014-d776.json.gz"
    rows = dict(assemble.run_table(exported.read(str(stored))).rows)
    assert rows["clients and tools"] == ("jdbc client: pgjdbc 42.7.14 (Java 17.0.15+6-Debian-1deb12u1); "
                                         "libpq client: libpq 15.18; "
                                         "odbc client: psqlODBC 13.02.0000 (unixODBC DM 03.52.0002.0003)")
