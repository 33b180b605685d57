"""summary(): per-measurement figures from an evidence record written by hand."""

import pytest

from pgpathbench.evidence import summary
from pgpathbench.evidence.snapshots import statement_totals

DATA = {
    "servers": {
        "source": {
            "statements": [
                {"query": "FETCH 100 FROM c1", "calls": 30, "rows": 2950, "exec_ms": 4.0, "database": "src"},
                {"query": "DECLARE c1 CURSOR FOR SELECT a FROM t", "calls": 10, "rows": 0, "exec_ms": 1.0,
                 "database": "src"},
                {"query": "  fetch 50 FROM c2", "calls": 10, "rows": 50, "exec_ms": 0.5, "database": "other"},
            ],
            "cpu_ms": {"user": 120.0, "system": 30.0},
            "evictions": {"dealloc": 0},
        },
        "external": {
            "statements": [{"query": "SELECT * FROM ft", "calls": 5, "rows": 500, "exec_ms": 9.0, "database": "ext"}],
            "evictions": {"dealloc": 0},
        },
        "remote": {"cpu_ms": {"user": 0.0, "system": 10.0}},
    },
    "missing": {"remote.statements": "pg_stat_statements is not installed", "external.cpu_ms": "x"},
}
for server in DATA["servers"].values():   # as collect.py stores them: the top list and every statement's totals
    if "statements" in server:
        server["statement_totals"] = statement_totals(server["statements"])


def test_figures_per_role():
    got = summary(DATA, transactions=10)
    assert got["remote_statements"] == {"source": 50, "external": 5}
    assert got["statements_per_txn"] == {"source": 5.0, "external": 0.5}
    # FETCH statements only, whatever the case: (2950 + 50) / (30 + 10)
    assert got["rows_per_call"] == {"source": pytest.approx(75.0)}
    assert got["server_cpu_ms"] == {"source": 150.0, "remote": 10.0}


def test_without_transactions_no_per_txn_figure():
    got = summary(DATA, None)
    assert "statements_per_txn" not in got
    assert summary(DATA, 0).keys() == got.keys()


def test_empty_record():
    assert summary({"servers": {}, "missing": {}}, 3) == {
        "remote_statements": {}, "rows_per_call": {}, "server_cpu_ms": {}, "statements_per_txn": {}}


def test_no_totals_when_entries_were_evicted():
    evicted = {"servers": {"source": {**DATA["servers"]["source"], "evictions": {"dealloc": 3}}}}
    assert summary(evicted, 10)["remote_statements"] == {}
