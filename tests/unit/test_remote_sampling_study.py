"""remote-sampling without servers: value parsing, the matrix, plots and per-row fits from given measurements."""

import pytest

from pgpathbench.errors import UserError
from pgpathbench.studies.base import StudyOptions
from pgpathbench.studies.remote_sampling import RemoteSampling, parse_fraction, parse_rows, row_count

STUDY = RemoteSampling()


@pytest.mark.parametrize("raw, canon, n", [("10k", "10k", 10_000), ("1000000", "1M", 1_000_000),
                                           ("100M", "100M", 100_000_000), ("1500", "1500", 1500)])
def test_rows(raw, canon, n):
    assert parse_rows(raw) == canon and row_count(canon) == n


def test_fraction():
    assert parse_fraction("0.10") == "0.1" and parse_fraction("1") == "1"
    with pytest.raises(ValueError):
        parse_fraction("0")


def options(**dims):
    return StudyOptions(STUDY.name, "quick", 3, {}, {**STUDY.default_dims, **dims})


def test_matrix_keeps_each_test_to_its_own_dimensions():
    cases = STUDY.cases(options(rows=("10k",), fraction=("0.1", "1"), stats_target=("100",), latency=("0ms", "2ms")))
    sampling = [c for c in cases if c["test"] == "sampling"]
    analyze = [c for c in cases if c["test"] == "analyze"]
    # 4 methods x 2 fractions x (direct at 0ms + fdw at 0ms and 2ms)
    assert len(sampling) == 4 * 2 * 3
    assert all(c["analyze_sampling"] == "-" and c["stats_target"] == "-" for c in sampling)
    assert all(c["latency"] == "0ms" for c in sampling if c["access"] == "direct")
    # local once (direct), five foreign modes over two links
    assert len(analyze) == 1 + 5 * 2
    assert all(c["method"] == "-" and c["fraction"] == "-" for c in analyze)
    assert {c["access"] for c in analyze if c["analyze_sampling"] == "local"} == {"direct"}


def test_old_major_is_refused_for_analyze_sampling():
    with pytest.raises(UserError, match="^--pg: analyze_sampling"):
        STUDY.cases(options(pg=("15",)))
    assert STUDY.cases(options(pg=("15",), analyze_sampling=("local", "off")))


def measurement(round_no, access, method, fraction, ms, rows="10k", latency="0ms"):
    dims = {"test": "sampling", "rows": rows, "method": method, "fraction": fraction, "access": access,
            "analyze_sampling": "-", "stats_target": "-", "latency": latency, "pg": "17"}
    n = row_count(rows)
    sent = (n if method == "full" else int(n * float(fraction))) if access == "fdw" else 0
    return {"study": STUDY.name, "ok": True, "round": round_no, "dims": dims, "case_id": ":".join(dims.values()),
            "metrics": {"duration_ms": ms, "rows_transferred": sent, "rows_table": n}}


def test_per_row_transfer_cost_is_fitted_from_fdw_minus_direct():
    # Direct: 1 ms; FDW: 1 ms plus 2 us per row sent -> the fit must find 2 us per row.
    ms = []
    for r in (1, 2, 3):
        for f in ("0.1", "0.5", "1"):
            ms.append(measurement(r, "direct", "bernoulli", f, 1.0))
            ms.append(measurement(r, "fdw", "bernoulli", f, 1.0 + 0.002 * 10_000 * float(f)))
            for size, per_row in (("10k", 1e-4), ("100k", 1e-4)):
                ms.append(measurement(r, "direct", "random", f, 0.5 + per_row * row_count(size), rows=size))
    tables = STUDY.report({}, ms, [])
    per_row = next(t for t in tables if t.title.startswith("Per-row costs"))
    send = next(row for row in per_row.rows if row[1].startswith("send"))
    read = next(row for row in per_row.rows if row[1].startswith("read"))
    assert send[3] == pytest.approx(2.0) and read[3] == pytest.approx(0.1)
    plots = STUDY.plots({}, ms, [])
    assert [p.title.split(",")[0] for p in plots][:2] == ["Sampling 10k rows directly on the source",
                                                         "Sampling 10k rows through postgres_fdw (direct)"]
    fdw = plots[1].series["bernoulli"]
    assert [p.x for p in fdw] == [0.1, 0.5, 1.0] and fdw[-1].y == pytest.approx(21.0)
