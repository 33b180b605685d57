"""The latency distribution the reports give (report/evidence.py), from measurements as pgbench's
logs give them (issue 42): a fast case's sampled rounds have percentiles and no maximum, its
aggregate rounds a series and no distribution; a slow case's rounds every figure."""

import pytest

from pgpathbench.report.evidence import latency_table, quantile_plot
from pgpathbench.results.model import RunResult

SERIES = [{"t": 0, "tps": 900, "latency_ms": 1.1}, {"t": 1, "tps": 100, "latency_ms": None}]


def measurement(case_id, round_no, metrics, series=()):
    return {"study": "fdw-overhead", "case_id": case_id, "round": round_no, "ok": True, "dims": {},
            "metrics": {"tps": 1000, "latency_ms": 1.0, "transactions": 1000, **metrics}, "series": list(series)}


def sampled(p50, n):
    return {"latency_p50_ms": p50, "latency_p90_ms": p50 * 2, "latency_p95_ms": p50 * 3, "latency_p99_ms": p50 * 4,
            "latency_sample_n": n, "latency_log_rate": 0.1}


def result():
    every = {**sampled(0.5, 50), "latency_log_rate": 1.0, "latency_min_ms": 0.1, "latency_max_ms": 9.0}
    ms = [measurement("fast", 1, {}, SERIES), measurement("fast", 2, sampled(1.0, 98)),
          measurement("fast", 3, {}, SERIES), measurement("fast", 4, sampled(1.2, 102)),
          measurement("slow", 1, {}, SERIES), measurement("slow", 2, every), measurement("slow", 3, every)]
    run = {"run_id": "r", "studies": ["fdw-overhead"], "options": {"model_version": 3}}
    return RunResult.from_rows(run, [], ms, []).study


def test_the_table_gives_a_sampled_case_no_maximum_and_says_how_many_were_logged():
    table = latency_table(result())
    assert table.columns == ["case", "p50", "p90", "p95", "p99", "max", "p99 95% CI", "n", "logged"]
    rows = {r[0]: r for r in table.rows}
    assert rows["fast"][1:6] == pytest.approx([1.1, 2.2, 3.3, 4.4, None]) and rows["fast"][7:] == [2, "98-102"]
    assert rows["slow"][1:6] == [0.5, 1.0, 1.5, 2.0, 9.0] and rows["slow"][7:] == [2, "50"]
    assert any("a sampled case has none" in n for n in table.notes)


def test_the_quantile_plot_draws_no_maximum_it_does_not_have():
    series = quantile_plot(result()).series
    assert [p.x for p in series["fast"]] == ["p50", "p90", "p95", "p99"]
    assert [p.x for p in series["slow"]] == ["p50", "p90", "p95", "p99", "max"]
