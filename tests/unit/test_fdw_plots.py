"""fdw-overhead's charts from synthetic measurements and link probes (no servers)."""

import pytest

from pgpathbench.report import html
from pgpathbench.results.model import RunResult
from pgpathbench.studies import get

STUDY = get("fdw-overhead")


def study_plots(measurements, probes):
    """The study's plots of a run made of these measurements and link probes."""
    run = RunResult.from_rows({"run_id": "r1", "studies": ["fdw-overhead"]}, [], measurements,
                              [{"session": 1, "round_trips": 100, **p} for p in probes])
    return STUDY.plots(run.study)


def measurements(latencies=("0ms",)):
    out = []
    base = {("ro", "local"): 20000, ("ro", "fdw_local"): 3000, ("ro", "fdw_external"): 4000,
            ("rw", "local"): 2000, ("rw", "fdw_local"): 600, ("rw", "fdw_external"): 800}
    for (workload, target), tps in base.items():
        for latency in latencies:
            if target != "fdw_external" and latency != "0ms":
                continue
            rtt = int(latency[:-2])
            value = tps if rtt == 0 else 1000 / (rtt * (2 if workload == "ro" else 5))
            for r in range(1, 5):
                out.append({"study": "fdw-overhead", "case_id": f"{workload}:{target}:1:{latency}", "round": r,
                            "ok": True, "error": None,
                            "dims": {"workload": workload, "target": target, "clients": "1", "latency": latency},
                            "metrics": {"tps": value * (1 + r / 100), "latency_ms": 1000 / value * (1 - r / 100)}})
    out.append({"study": "fdw-overhead", "case_id": "rw:local:1:0ms", "round": 5, "ok": False, "error": "boom",
                "dims": {"workload": "rw", "target": "local", "clients": "1", "latency": "0ms"}, "metrics": {}})
    return out


def probes(prefix=""):
    return [{"link": f"{prefix}source_{lat}ms", "round": r, "phase": "before", "rtt_median_ms": lat + 0.4 + r / 100}
            for lat in (0, 2, 5) for r in range(1, 5)]


def test_bars_by_target_without_latencies():
    plots = study_plots(measurements(), [])
    assert [p.kind for p in plots] == ["bar", "bar"]
    tps, latency = plots
    assert list(tps.series) == ["local", "FDW_local", "FDW_external"]
    assert [p.x for p in tps.series["local"]] == ["RO · 1 client", "RW · 1 client"]
    ro_local = tps.series["local"][0]
    # 4 rounds: median of 20000 * (1.01, 1.02, 1.03, 1.04); interval min..max (k = 1 of 4: 87.5%)
    assert ro_local.y == pytest.approx(20000 * 1.025)
    assert (ro_local.y_low, ro_local.y_high) == (pytest.approx(20200), pytest.approx(20800))
    assert tps.log_y and "ms" in latency.y_label and "transactions/s" in tps.y_label
    assert any("covers only 88%" in n for n in tps.notes)
    svg = html.svg_plot(tps)
    assert svg.count('class="bar"') == 6 and svg.count('class="errorbar"') == 6


@pytest.mark.parametrize("prefix", ["", "pg15_"])
def test_against_measured_rtt_with_several_latencies(prefix):
    plots = study_plots(measurements(("0ms", "2ms", "5ms")), probes(prefix))
    assert [p.kind for p in plots] == ["bar", "bar", "line", "line"]
    tps_rtt = plots[2]
    assert "round-trip" in tps_rtt.x_label and tps_rtt.x_label.endswith("ms")
    ro = tps_rtt.series["RO · 1 client · FDW_external"]
    # x: median of each link's probes (0.41..0.44 -> 0.425 + latency)
    assert [p.x for p in ro] == [pytest.approx(0.425), pytest.approx(2.425), pytest.approx(5.425)]
    assert ro[1].y == pytest.approx(250 * 1.025)
    assert "FDW_external over 2ms link" in plots[0].series


def test_no_measurements_no_plots():
    assert study_plots([], []) == []


def test_extra_dimensions_show_only_when_they_vary():
    one = [{**m, "case_id": m["case_id"] + ":15", "dims": {**m["dims"], "pg": "15"}} for m in measurements()]
    assert [p.x for p in study_plots(one, [])[0].series["local"]] == ["RO · 1 client", "RW · 1 client"]
    two = one + [{**m, "case_id": m["case_id"] + ":16", "dims": {**m["dims"], "pg": "16"}} for m in measurements()]
    cats = [p.x for p in study_plots(two, [])[0].series["local"]]
    assert cats == ["RO · 1 client · PG 15", "RO · 1 client · PG 16", "RW · 1 client · PG 15", "RW · 1 client · PG 16"]
