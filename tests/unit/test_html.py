"""The HTML report and its SVG charts, built from Table and Plot specs alone (no servers)."""

import re
from datetime import datetime, timezone

import pytest

from pgpathbench.report import Plot, Point, Table
from pgpathbench.report import html
from pgpathbench.report import svg as svg_module
from pgpathbench.report.assemble import StudySection
from pgpathbench.results.model import RunResult

EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//|url\(\s*["']?\s*(?:https?:)?//|@import""", re.I)


def bar_plot(log_y=False) -> Plot:
    return Plot("TPS by target", "workload · clients", "Throughput, transactions/s", "bar", {
        "local": [Point("RO · 1 client", 24000, 12000, 40000), Point("RW · 1 client", 2300, 1500, 2600)],
        "FDW_local": [Point("RO · 1 client", 2700, 2600, 3700), ("RW · 1 client", 560, 400, 930)],
        "FDW_external": [Point("RO · 1 client", 4000)],            # no interval: no error bar
    }, log_y=log_y, notes=["Error bars: 95% CI of the median."])


def test_bar_chart_has_one_bar_per_point_error_bars_and_labels():
    svg = svg_module.svg_plot(bar_plot())
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert svg.count('class="bar"') == 5
    assert svg.count('class="errorbar"') == 4
    assert svg.count('class="legend-item"') == 3
    labels = re.findall(r'class="axis-label"[^>]*>([^<]*)<', svg)
    assert labels == ["Throughput, transactions/s", "workload · clients"]
    assert "RO · 1 client" in svg and "RW · 1 client" in svg
    # linear axis from 0 with round ticks up to at least the highest interval (40,000)
    ticks = re.findall(r'class="tick" x="[^"]*" y="[^"]*" text-anchor="end">([^<]*)<', svg)
    assert ticks[0] == "0" and ticks[-1] in ("40,000", "50,000")
    assert "xmlns" not in svg and "<script" not in svg


def test_log_axis_ticks_are_decades_and_said():
    svg = svg_module.svg_plot(bar_plot(log_y=True))
    ticks = re.findall(r'text-anchor="end">([^<]*)<', svg)
    assert ticks == ["100", "1,000", "10,000", "100,000"]
    assert "(log scale)" in svg


def test_line_chart_with_numeric_x():
    plot = Plot("TPS against RTT", "Measured round-trip time, ms", "Throughput, transactions/s", "line", {
        "RO · 1 client": [Point(0.02, 4000, 3000, 6000), Point(2.4, 80, 76, 80.5), Point(5.5, 34, 33, 35)],
        "RW · 1 client": [Point(0.02, 800, 700, 1100), Point(2.4, 35, 33, 36), Point(5.5, 15, 15, 15.5)],
    }, log_y=True)
    svg = svg_module.svg_plot(plot)
    assert svg.count("<polyline") == 2
    assert svg.count('class="point"') == 6 and svg.count('class="errorbar"') == 6
    x_ticks = re.findall(r'y="[^"]*" text-anchor="middle">([0-9.,]+)<', svg)
    assert x_ticks[:3] == ["0", "1", "2"] and x_ticks[-1] == "6"
    assert "Measured round-trip time, ms" in svg and "Throughput, transactions/s (log scale)" in svg


def test_categorical_scatter_with_reference_line():
    plot = Plot("Ratio B / A", "case", "Ratio of tps, B / A", "scatter",
                {"tps": [Point("ro:local:1", 1.02, 0.97, 1.08), Point("ro:fdw_local:1", 0.8, 0.7, 0.9)]},
                log_y=True, ref_y=1.0)
    svg = svg_module.svg_plot(plot)
    assert svg.count('class="point"') == 2 and svg.count('class="errorbar"') == 2
    assert svg.count('class="ref"') == 1 and 'class="bar"' not in svg


@pytest.mark.parametrize("lo, hi, ticks", [
    (0, 1, [0, 0.2, 0.4, 0.6, 0.8, 1.0]),
    (0, 43000, [0, 10000, 20000, 30000, 40000, 50000]),
    (0.3, 0.9, [0.2, 0.4, 0.6, 0.8, 1.0]),       # step: 0.6/5 = 0.12 -> 0.2; from floor, to ceil
    (5, 5, [4.4, 4.6, 4.8, 5.0, 5.2, 5.4, 5.6]),  # one value: +-10%, then step 1/5 -> 0.2
])
def test_linear_ticks(lo, hi, ticks):
    assert svg_module.linear_ticks(lo, hi) == pytest.approx(ticks)


def test_log_ticks_and_tick_text():
    assert svg_module.log_ticks(13, 45000)[0] == [10, 100, 1000, 10000, 100000]
    majors, minors = svg_module.log_ticks(0.3, 8)                # two decades: 2 and 5 labelled too
    assert majors == pytest.approx([0.1, 0.2, 0.5, 1, 2, 5, 10])
    assert [svg_module.tick_text(v) for v in (0.01, 0.5, 1000, 100000)] == ["0.01", "0.5", "1,000", "100,000"]
    assert [svg_module.tick_text(v, 2.5) for v in (0, 2.5, 7.5)] == ["0", "2.5", "7.5"]


def test_table_html_escapes_and_aligns():
    t = Table("TPS <x>", ["Bench", "Median", "Published mean"], [["RO.local", 24408.0, 11512.79], ["A&B", None, 1.5]],
              ["note & more"])
    out = html.table_html(t)
    assert "TPS &lt;x&gt;" in out and "A&amp;B" in out and "note &amp; more" in out
    assert '<td class="num">24,408</td>' in out and '<td class="num pub">11,513</td>' in out
    assert "—" in out


RUN = {
    "run_id": "20260101-000000-abcd", "studies": ["fdw-overhead"], "preset": "quick", "status": "finished",
    "seed": 7, "started_at": datetime(2026, 1, 1, tzinfo=timezone.utc),
    "finished_at": datetime(2026, 1, 1, 0, 1, 30, tzinfo=timezone.utc),
    "options": {"studies": [{"study": "fdw-overhead", "preset": "quick", "repeat": 3,
                             "params": {"scale": 1, "duration": 2, "isolation": "repeatable-read"},
                             "dims": {"workload": ["ro"], "target": ["local", "fdw_local"]}}],
                "pg_bindir": "/usr/lib/postgresql/15/bin"},
    "environment": {"sessions": [{
        "cpu_model": "Test CPU 9000", "cores": 2, "memory_bytes": 8 * 2 ** 30, "kernel": "6.1", "host": "h",
        "pgbench": "pgbench (PostgreSQL) 15.18",
        "servers": {"source": {"version": "PostgreSQL 15.18 on x86_64", "settings": {"shared_buffers": "16384",
                                                                                    "max_connections": "100"}},
                    "external": {"version": "PostgreSQL 15.18 on x86_64", "settings": {"shared_buffers": "32768"}}},
        "links": {"source_0ms": {"kind": "direct", "latency_ms": 0, "jitter_ms": 0, "bandwidth_kbit": None}},
    }]},
}
MEASUREMENTS = [
    {"study": "fdw-overhead", "case_id": "ro:local:1", "round": 1, "session": 1, "ok": True, "error": None,
     "started_at": datetime(2026, 1, 1, tzinfo=timezone.utc), "dims": {}, "metrics": {"tps": 1.0}},
    {"study": "fdw-overhead", "case_id": "ro:fdw_local:1", "round": 2, "session": 1, "ok": False,
     "error": "pgbench exit 1: connection refused", "started_at": datetime(2026, 1, 1, tzinfo=timezone.utc),
     "dims": {}, "metrics": {}},
]


def test_run_page_is_self_contained_and_complete():
    section = StudySection("fdw-overhead", "pgbench through a local table vs postgres_fdw",
                                [Table("TPS", ["Bench", "Median"], [["RO.local", 24408.0]])], [bar_plot()])
    probe = {"link": "source_0ms", "round": 1, "phase": "before", "session": 1, "rtt_median_ms": 0.02,
             "round_trips": 100}
    run = RunResult.from_rows({**RUN, "studies": ["fdw-overhead"]}, [], MEASUREMENTS, [probe])
    page = html.runs_page([(run, [section], [])])
    assert page.startswith("<!DOCTYPE html>")
    assert not EXTERNAL.search(page), EXTERNAL.search(page)
    assert "http://" not in page and "https://" not in page
    assert "<script" not in page and "<link" not in page and "<img" not in page
    for text in ("20260101-000000-abcd", "TPS by target", "24,408", "Test CPU 9000", "8.0 GiB",
                 "PostgreSQL 15.18 on x86_64", "shared_buffers", "32768", "source_0ms", "0.020",
                 "pgbench exit 1: connection refused", "ro:fdw_local:1", "--isolation", "repeatable-read",
                 "/usr/lib/postgresql/15/bin", "1 ok, 1 failed", "90 s"):
        assert text in page, text
    assert page.count("<svg") == 1
    # shared_buffers differs between the two servers: its row is marked
    assert re.search(r'<tr class=differs><td class="label">shared_buffers', page)


def test_compare_page_lists_differences():
    page = html.compare_page(RunResult.from_rows(RUN, [], [], []), RunResult.from_rows({**RUN, "run_id": "B"}, [], [], []),
                             [Table("t", ["a"], [["x"]])], [],
                             ["fdw-overhead parameters: --isolation repeatable-read vs read-committed"])
    assert "--isolation repeatable-read vs read-committed" in page and "http://" not in page


def test_plot_rejects_unknown_kind():
    with pytest.raises(ValueError):
        Plot("t", "x", "y", "pie")
