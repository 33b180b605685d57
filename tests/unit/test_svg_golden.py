"""SVG charts, byte for byte: svg_plot() of each Plot spec below must equal tests/golden/svg/NAME.svg,
stored by the code of the commit that added this test. It guards refactoring of report/svg.py: a change
of the drawing on purpose regenerates the files (PGPATHBENCH_WRITE_SVG_GOLDEN=1) and shows the diff."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from pgpathbench.report import Plot, Point
from pgpathbench.report.svg import svg_plot

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "svg"
WRITE = os.environ.get("PGPATHBENCH_WRITE_SVG_GOLDEN") == "1"
CI = ["Error bars: 95% CI of the median."]


def bar_plots() -> dict[str, Plot]:
    return {
        # three series, error bars on some points only; narrow slots so some value labels do not fit
        "bar_grouped": Plot("TPS by target", "workload · clients", "Throughput, transactions/s", "bar", {
            "local": [Point("RO · 1 client", 24000, 12000, 40000), Point("RW · 1 client", 2300, 1500, 2600)],
            "FDW_local": [Point("RO · 1 client", 2700, 2600, 3700), ("RW · 1 client", 560, 400, 930)],
            "FDW_external": [Point("RO · 1 client", 4000)],
        }, notes=CI),
        "bar_log_y": Plot("TPS by target, log", "workload", "Throughput, transactions/s", "bar", {
            "local": [Point("RO", 24000, 12000, 40000), Point("RW", 2300)],
            "fdw": [Point("RO", 13, 11, 19), Point("RW", 0.8, 0.5, 1.2)],
        }, log_y=True, notes=CI),
        # log_y asked, a zero and a negative value: linear axis from below zero, bars downwards
        "bar_log_y_fallback": Plot("Change in latency", "case", "Change, ms", "bar", {
            "a": [Point("one", 0.0), Point("two", -3.5, -4.25, -2.0), Point("three", 7.25, 6.0, 8.5)],
            "b": [Point("one", 1.5), Point("three", -0.75)],
        }, log_y=True),
        # only bars above zero but none reaching it: the axis still starts at 0; one value, step 2.5
        "bar_single": Plot("One bar", "x", "y", "bar", {"only": [Point("just one", 7.5, 7.0, 8.0)]}),
        # long category labels are rotated; markup characters are escaped everywhere
        "bar_long_labels": Plot('Rows <fetched> & "returned"', "query · driver & mode", "Time, s <median>", "bar", {
            "libpq <C>": [Point("a rather long category label number one", 1.25),
                          Point("another rather long category label, two", 2.5, 2.0, 3.0),
                          Point("three & <four>", 0.004), Point("a fourth category, also with a long label", 0.5),
                          Point("and a fifth one, the longest label of them all", 0.25)],
            'psycopg "3"': [Point("a rather long category label number one", 1.5, 1.4, 1.7),
                            Point("three & <four>", 0.003)],
        }),
        # ten series, two empty: palette and markers cycle (by position among all series), legend wraps
        "bar_many_series": Plot("Many series", "category", "Value", "bar", {
            f"series number {i} with a long name": ([] if i in (2, 7) else
                                                    [Point("c1", 10 + i * 3.3), Point("c2", 100 - i * 7.1, 90 - i * 7.1,
                                                                                      110 - i * 7.1)])
            for i in range(10)
        }, notes=CI + ["Rounds: 5."]),
        "bar_empty": Plot("No data", "x", "y", "bar", {"empty": []}),
        "bar_no_series": Plot("No series at all", "x", "y", "bar", {}, log_y=True),
        "bar_ref_y": Plot("Ratio to local", "target", "Ratio", "bar", {
            "ro": [Point("fdw", 0.12, 0.11, 0.14), Point("ext", 0.2)],
            "rw": [Point("fdw", 0.26, 0.2, 0.3), Point("ext", 0.35, 0.3, 0.41)],
        }, ref_y=1.0),
    }


def line_plots() -> dict[str, Plot]:
    return {
        # five series (markers cycle), one with a single point (no line), one empty, x unsorted
        "line_numeric": Plot("TPS against RTT", "Measured round-trip time, ms", "Throughput, transactions/s", "line", {
            "RO · 1 client": [Point(2.4, 80, 76, 80.5), Point(0.02, 4000, 3000, 6000), Point(5.5, 34, 33, 35)],
            "RW · 1 client": [Point(0.02, 800, 700, 1100), Point(2.4, 35), Point(5.5, 15, 15, 15.5)],
            "nothing": [],
            "RO · 8 clients": [Point(0.02, 9000), Point(5.5, 250, 200, 300)],
            "RW · 8 clients": [(3, 120)],
            "ext": [Point(1, 50), Point(2, 60), Point(4, 20)],
        }, notes=CI),
        "line_log_xy": Plot("TPS against RTT, log", "Round-trip time, ms", "TPS", "line", {
            "RO": [Point(0.02, 4000, 3000, 6000), Point(2.4, 80, 76, 80.5), Point(50, 3.4, 3.1, 3.9)],
            "RW": [Point(0.02, 800), Point(2.4, 35), Point(50, 1.5)],
        }, log_y=True, log_x=True),
        # log_x asked with x = 0, log_y with a negative value: both axes fall back to linear
        "line_log_fallback": Plot("Fallback", "Added latency, ms", "Change, %", "line", {
            "a": [Point(0, -5.0, -7.5, -2.5), Point(10, 12.0), Point(20, 40.0, 30.0, 55.0)],
            "b": [Point(0, 0.0), Point(20, 3.0)],
        }, log_y=True, log_x=True),
        # log axes within two decades: 2 and 5 labelled too
        "line_log_narrow": Plot("Two decades", "Rows", "Seconds", "line", {
            "s": [Point(300, 0.3), Point(800, 0.9, 0.8, 1.1), Point(2000, 2.2)],
        }, log_y=True, log_x=True),
        # categories on a line chart: drawn as points in bands, no line
        "line_categorical": Plot("Line with categories", "mode", "ms", "line", {
            "a": [Point("cold", 12.0, 10.0, 15.0), Point("warm", 3.0)],
            "b": [Point("warm", 2.5, 2.0, 3.5), Point("hot", 1.0)],
        }),
        "line_empty": Plot("Empty line chart", "x", "y", "line", {"a": [], "b": []}, log_x=True, log_y=True),
    }


def scatter_plots() -> dict[str, Plot]:
    return {
        # scatter: the y axis need not start at 0; negative, fractional and equal values; a NaN
        "scatter_numeric": Plot("Scatter", "Bandwidth, Mbit/s", "Difference, ms", "scatter", {
            "one": [Point(5, 0.0123, 0.011, 0.014), Point(1, 0.0101), Point(20, 0.0152)],
            "two": [Point(1, -0.002, -0.003, -0.001), Point(20, 0.0)],
            "three": [Point(10, math.nan)],
        }),
        # one exact decade on a log axis: widened to the next one
        "scatter_one_decade": Plot("One decade", "x", "y", "scatter", {"s": [Point(1, 10.0), Point(2, 10.0)]},
                                   log_y=True),
        "scatter_flat": Plot("All equal", "x", "y", "scatter", {"s": [Point(3, 42.0), Point(3, 42.0)]}, log_x=True),
        "scatter_categorical_ref": Plot("Ratio B / A", "case", "Ratio of tps, B / A", "scatter", {
            "tps": [Point("ro:local:1", 1.02, 0.97, 1.08), Point("ro:fdw_local:1", 0.8, 0.7, 0.9)],
            "latency": [Point("ro:local:1", 0.98, 0.93, 1.03), Point("rw:local:1", 1.3)],
            "bytes": [Point("rw:local:1", 1.0, 1.0, 1.0)],
            "rows": [Point("ro:local:1", 1.1)],
            "extra": [Point("ro:fdw_local:1", 0.5, 0.45, 0.52)],
        }, log_y=True, ref_y=1.0, notes=["Dashed: no difference."]),
        # the reference line alone decides the log axis: below it, all values above
        "scatter_ref_outside": Plot("Ref below the data", "x", "Ratio", "scatter", {
            "s": [Point(1, 3.0, 2.5, 3.5), Point(2, 5.0)]}, log_y=True, ref_y=1.0),
        "scatter_ref_negative": Plot("Ref makes log impossible", "x", "y", "scatter", {
            "s": [Point(1, 30000.0), Point(2, 45000.0)]}, log_y=True, ref_y=-1.0),
    }


def specs() -> dict[str, tuple[Plot, dict]]:
    """name -> (plot, keyword arguments of svg_plot)."""
    plots = bar_plots() | line_plots() | scatter_plots()
    out = {name: (plot, {}) for name, plot in plots.items()}
    out["bar_grouped_narrow"] = (plots["bar_grouped"], {"width": 760})
    out["line_numeric_narrow"] = (plots["line_numeric"], {"width": 760})
    return out


SPECS = specs()


@pytest.mark.parametrize("name", sorted(SPECS))
def test_svg_is_byte_for_byte_the_stored_one(name):
    plot, kwargs = SPECS[name]
    svg = svg_plot(plot, **kwargs)
    path = GOLDEN / f"{name}.svg"
    if WRITE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(svg.encode("utf-8"))
    assert svg.encode("utf-8") == path.read_bytes(), f"{name}: drawn differently than {path}"


def test_every_golden_file_has_a_spec():
    assert sorted(p.stem for p in GOLDEN.glob("*.svg")) == sorted(SPECS)
