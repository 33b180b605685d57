"""fdw-overhead's statement passes: what one transaction sends, from a short and a long pass."""

import pytest

from pgpathbench.studies.fdw_overhead.statements import metrics, per_transaction


def _pass(per_client: int, transactions: int, calls: int, fetch_calls: int = 0, fetch_rows: int = 0) -> dict:
    return {"per_client": per_client, "transactions": transactions, "calls": calls, "fetch_calls": fetch_calls,
            "fetch_rows": fetch_rows, "statements": []}


def test_what_every_run_sends_once_cancels_out():
    # 15 statements per run (session set-up, scale check: 3 FETCHes of a row), 5 per transaction (1 FETCH of a row)
    short, long = _pass(1, 2, 15 + 10, 3 + 2, 3 + 2), _pass(400, 800, 15 + 4000, 3 + 800, 3 + 800)
    record, why = per_transaction([short, long])
    assert why is None and record["passes"] == [short, long]
    assert metrics(record) == {"remote_statements_per_txn": 5.0, "remote_statements_per_run": 15.0,
                               "remote_rows_per_fetch": 1.0}


def test_rows_per_fetch_from_the_difference_of_the_fetches():
    # a scan fetched in batches of 100 per transaction; the run's own FETCH returns one row
    record, _ = per_transaction([_pass(1, 1, 8, 11, 1001), _pass(10, 10, 53, 101, 10001)])
    assert record["rows_per_fetch"] == pytest.approx(100.0) and record["per_txn"] == pytest.approx(5.0)


def test_no_figure_without_fetches_or_a_difference():
    record, why = per_transaction([_pass(1, 1, 8), _pass(10, 10, 53)])
    assert why is None and "remote_rows_per_fetch" not in metrics(record)
    assert per_transaction([_pass(1, 3, 8), _pass(2, 3, 12)]) == \
        (None, "the passes' transactions do not differ (3, 3)")
    record, why = per_transaction([_pass(1, 1, 0), _pass(5, 5, 0)])
    assert record is None and "counted no statement" in why
