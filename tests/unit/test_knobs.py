"""Swept knobs in reports (report/knobs.py): the best value per combination of the other
dimensions, paired by round, from a run built by hand (an open-ended knob dimension)."""

from __future__ import annotations

from pgpathbench.report import knobs
from pgpathbench.results.model import RunResult
from pgpathbench.studies import get

STUDY = get("fdw-overhead")
TPS = {("fdw_external", "1"): [100, 110, 105, 98], ("fdw_external", "100"): [300, 320, 310, 305],
       ("local", "1"): [1000, 990, 1010, 1005], ("local", "100"): [1001, 995, 1009, 1003]}


def run() -> RunResult:
    measurements = []
    for (target, fetch), values in TPS.items():
        dims = {"workload": "ro", "target": target, "clients": "1", "latency": "0ms", "pg": "15",
                "protocol": "simple", "fdw.fetch_size": fetch}
        for r, v in enumerate(values, 1):
            measurements.append({"study": "fdw-overhead", "case_id": ":".join(dims.values()), "dims": dims,
                                 "round": r, "ok": True, "metrics": {"tps": v}})
    return RunResult.from_rows({"run_id": "r", "studies": ["fdw-overhead"], "options": {"model_version": 2}},
                               [], measurements, [])


def test_an_open_ended_dimension_with_several_values_is_a_knob():
    assert knobs.knob_names(run().study, STUDY) == ["fdw.fetch_size"]


def test_best_value_per_group_with_its_paired_ratio():
    (table,) = knobs.tables(run().study, STUDY)
    assert all(len(r) == len(table.columns) for r in table.rows) and table.narrow().rows
    rows = {r[1]: r for r in table.rows}
    fdw = rows["ro:fdw_external:1:0ms:15:simple"]
    assert fdw[2:4] == ["100", "1"] and 2.8 < fdw[4] < 3.2 and fdw[6] == "too few rounds (4)"
    assert any(n.startswith("fdw.fetch_size 100: 2.9") and "than 1 for ro:fdw_external:1:0ms:15:simple" in n
               for n in table.notes)
    assert 0.99 < rows["ro:local:1:0ms:15:simple"][4] < 1.01


def test_plot_has_a_series_per_group():
    (plot,) = knobs.plots(run().study, STUDY)
    assert set(plot.series) == {"ro:fdw_external:1:0ms:15:simple", "ro:local:1:0ms:15:simple"}
    assert [p.x for p in plot.series["ro:local:1:0ms:15:simple"]] == ["1", "100"]
