"""fdw-overhead's roof (studies/fdw_overhead/roof.py): the knee of constructed p99 series, --rate's
values and their refinement, the offered rate of a share."""

from __future__ import annotations

import pytest

from pgpathbench.errors import UserError
from pgpathbench.matrix import StudyOptions
from pgpathbench.results.model import CaseResult, Measurement
from pgpathbench.studies import get
from pgpathbench.studies.fdw_overhead import roof
from pgpathbench.studies.fdw_overhead.report import Key
from pgpathbench.studies.fdw_overhead.spec import AUTO_STEPS, rate


def steps(*points: tuple[float, float | None]) -> list[roof.Step]:
    return [roof.Step(offered, p99, sample_n=100) for offered, p99 in points]


def test_knee_between_the_last_step_within_twice_the_low_load_p99_and_the_first_past_it():
    knee = roof.find_knee(steps((200, 1.0), (400, 1.4), (800, 1.9), (1200, 2.1), (1600, 40.0)))
    assert (knee.sustained.offered_tps, knee.passed.offered_tps, knee.limit_ms) == (800, 1200, 2.0)
    assert knee.text() == "between 800 and 1,200 TPS"


def test_knee_right_after_the_first_step():
    knee = roof.find_knee(steps((100, 1.0), (5000, 9.0), (10000, 80.0)))
    assert (knee.sustained.offered_tps, knee.passed.offered_tps) == (100, 5000)


def test_no_knee_within_the_steps():
    knee = roof.find_knee(steps((100, 1.0), (200, 1.1), (300, 2.0)))   # 2.0 is not past 2 x 1.0
    assert knee.passed is None and knee.sustained.offered_tps == 300
    assert knee.text() == "no knee up to 300 TPS"


def test_steps_in_any_order_and_a_step_without_p99_is_past_the_knee():
    knee = roof.find_knee(steps((3000, None), (1000, 1.0), (2000, 1.5)))   # 3000: every transaction skipped
    assert (knee.sustained.offered_tps, knee.passed.offered_tps) == (2000, 3000)


def test_one_step_or_no_low_load_p99_locates_nothing():
    assert roof.find_knee(steps((100, 1.0))).text().startswith("one rate step")
    knee = roof.find_knee(steps((100, None), (200, 1.0)))
    assert knee.sustained is None and knee.passed is None and "no p99 at the lowest step" in knee.text()


@pytest.mark.parametrize("given, value", [("800", "800"), ("12.50", "12.5"), ("0.6x", "0.6x"), ("1x", "1x"),
                                          ("max", "max"), ("auto", "auto")])
def test_rate_values(given, value):
    assert rate(given) == value


@pytest.mark.parametrize("given", ["0", "-5", "0x", "abc", "1e3", "nan", "inf", "11x", "99999999999"])
def test_rate_refuses(given):
    with pytest.raises(ValueError):
        rate(given)


def options(rates: tuple[str, ...], **params) -> StudyOptions:
    return StudyOptions("fdw-overhead", "quick", 1, params, {"workload": ("ro",), "target": ("local",),
                                                             "clients": ("1",), "latency": ("0ms",), "pg": ("15",),
                                                             "protocol": ("simple",), "rate": rates})


def test_refine_expands_auto_and_refuses_what_has_no_schedule():
    assert roof.refine(options(("auto",)), {"rate"}).dims["rate"] == AUTO_STEPS
    assert roof.refine(options(("100", "200"), latency_limit=5.0), {"rate"}).dims["rate"] == ("100", "200")
    with pytest.raises(UserError, match="--rate: auto"):
        roof.refine(options(("auto", "800")), {"rate"})
    with pytest.raises(UserError, match="--latency-limit"):
        roof.refine(options(("max",), latency_limit=5.0), set())


def test_a_share_offers_that_share_of_its_closed_twin_and_ids_stay_those_of_runs_before_rate():
    study = get("fdw-overhead")
    cases = study.cases(roof.refine(options(("max", "0.5x", "300")), {"rate"}))
    old = "ro:local:1:0ms:15:simple"
    assert [c.case_id for c in cases] == [old, f"{old}:0.5x", f"{old}:300"]
    closed = {old: 1001.0}
    assert [roof.share(r) for r in ("max", "0.5x", "300", "1x")] == [None, 0.5, None, 1.0]
    assert [roof.offered(c, closed) for c in cases] == [None, 500.5, 300.0]


def _case(rate_value: str, offered: float, p99s: list[float]) -> CaseResult:
    dims = {"workload": "ro", "target": "local", "clients": "1", "latency": "0ms", "pg": "15",
            "protocol": "simple", "rate": rate_value}
    ms = [Measurement(r, 1, None, True, None, 1.0,
                      {"rate_offered_tps": offered, "tps": offered, "latency_p99_ms": p99, "latency_p50_ms": p99 / 2,
                       "latency_sample_n": 50, "wall_ms": 1000.0, "cpu_ms": 100.0})
          for r, p99 in enumerate(p99s, 1)]
    return CaseResult("fdw-overhead", f"ro:local:1:{rate_value}", dims, 0, ms)


def test_knees_per_path_from_case_results_medians_with_every_round_s_sample():
    cases = [(Key.of(c), c) for c in (_case("100", 100, [1.0, 1.2, 0.9]), _case("200", 200, [5.0, 4.0, 6.0]))]
    (name, (dims, knee)), = roof.knees(cases).items()
    assert name == "RO.local" and dims["target"] == "local" and "rate" not in dims
    assert (knee.steps[0].p99_ms, knee.steps[0].sample_n, knee.steps[0].client_cpu_pct) == (1.0, 150, 10.0)
    assert knee.text() == "between 100 and 200 TPS"
