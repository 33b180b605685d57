"""The baseline a study declares (results/baseline.py): which case each case is read against, and
the ratio paired by round, as the reports and --until-ci read them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgpathbench.results.baseline import Baseline
from pgpathbench.results.model import RunResult
from pgpathbench.studies import STUDIES
from pgpathbench.matrix import StudyOptions

GOLDEN = Path(__file__).resolve().parent.parent / "golden"


class C:
    """A case as twins() reads it: an id and dimensions."""
    def __init__(self, **dims):
        self.dims = dims
        self.case_id = ":".join(dims.values())


def test_the_twin_agrees_on_every_dimension_but_the_free_ones():
    b = Baseline("target", "local", free=("latency", "fdw."))
    local1, local5 = C(target="local", clients="1", latency="0ms", **{"fdw.fetch_size": "-"}), \
        C(target="local", clients="5", latency="0ms", **{"fdw.fetch_size": "-"})
    far = C(target="fdw", clients="5", latency="5ms", **{"fdw.fetch_size": "1000"})
    near = C(target="fdw", clients="1", latency="0ms", **{"fdw.fetch_size": "100"})
    lonely = C(target="fdw", clients="9", latency="0ms", **{"fdw.fetch_size": "100"})
    twins = b.twins([local1, local5, far, near, lonely])
    assert twins == {far.case_id: local5, near.case_id: local1}   # no baseline for 9 clients, none of its own
    # 'fdw.' frees the family's dimensions, not a dimension merely starting with 'fdw'
    b2 = Baseline("target", "local", free=("fdw.",))
    assert b2.twins([C(target="local", fdwx="a"), C(target="fdw", fdwx="b")]) == {}


def test_two_baselines_for_one_case_is_a_declaration_error():
    b = Baseline("target", "local")      # latency not free: both locals match a case without it
    with pytest.raises(ValueError, match="both match"):
        b.twins([C(target="local", latency="0ms"), C(target="local", latency="0ms")])


def _case(values: dict[int, float], ok_rounds=None):
    """A result-model case with one metric by round."""
    run = {"run_id": "r", "studies": ["s"], "options": {"model_version": 2}}
    ms = [{"study": "s", "case_id": "c", "dims": {}, "round": r, "ok": ok_rounds is None or r in ok_rounds,
           "metrics": {"tps": v}} for r, v in values.items()]
    return RunResult.from_rows(run, [], ms, []).cases[0]


def test_the_ratio_is_paired_by_round_and_quoted_as_declared():
    case = _case({1: 100.0, 2: 200.0, 3: 50.0, 4: 80.0})
    base = _case({1: 400.0, 2: 800.0, 3: 999.0, 4: 320.0}, ok_rounds={1, 2, 4})   # round 3 failed
    assert Baseline("target", "local").ratio(case, base, "tps").median == pytest.approx(0.25)
    inverse = Baseline("target", "local", inverse=True).ratio(case, base, "tps")
    assert inverse.n == 3 and inverse.median == pytest.approx(4.0) and inverse.ci_low == inverse.ci_high == 4.0


def _options(study, **dims) -> StudyOptions:
    """The quick preset's options, with these dimensions."""
    preset = study.presets["quick"]
    params = {name: preset.params.get(name, p.default) for name, p in study.parameters.items()}
    return StudyOptions(study.name, "quick", 6, params, {**study.default_dims, **preset.dims, **dims})


@pytest.mark.parametrize("name, dims", [
    ("fdw-overhead", {"latency": ("0ms", "2ms"), "clients": ("1", "5"), "fdw.fetch_size": ("100", "1000")}),
    ("remote-sampling", {"latency": ("0ms", "2ms")}),
    ("file-fdw-tpch", {"layout": ("single", "partitioned", "scaleout")}),
    ("interfaces-fidelity", {}),
])
def test_every_case_of_a_study_with_a_baseline_has_its_twin(name, dims):
    study = STUDIES[name]
    cases = study.cases(_options(study, **dims))
    twins = study.baseline.twins(cases)
    others = [c for c in cases if not study.baseline.is_baseline(dict(c.dims))]
    assert others and len(twins) == len(others)
    for case_id, base in twins.items():
        case = next(c for c in cases if c.case_id == case_id)
        assert dict(case.dims)["pg"] == dict(base.dims)["pg"]
    if name == "remote-sampling":   # ANALYZE of the foreign table against ANALYZE of the local one
        analyze = {c: b for c, b in twins.items() if c.startswith("analyze")}
        assert analyze and {dict(b.dims)["analyze_sampling"] for b in analyze.values()} == {"local"}


def test_interfaces_has_no_baseline():
    assert STUDIES["interfaces"].baseline is None


@pytest.mark.parametrize("name", ["fdw-overhead", "file-fdw-tpch", "remote-sampling"])
def test_every_case_of_a_golden_run_has_its_twin(name):
    run = RunResult.from_export(json.loads((GOLDEN / f"{name}.export.json").read_text()))
    baseline = STUDIES[name].baseline
    twins = baseline.twins(run.cases)
    assert len(twins) == sum(1 for c in run.cases if not baseline.is_baseline(c.dims))
