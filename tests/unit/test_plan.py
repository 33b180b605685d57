"""The plan's estimate (plan.py): each case still to measure at its own time, unknown cases said,
--until-ci's lower bound counting what a resumed run already stored; and the plan line (runner._plan)
built from the study's own figure or the store's history."""

from __future__ import annotations

import pytest

from pgpathbench import plan
from pgpathbench.matrix import Case, StudyOptions
from pgpathbench.plan import Estimate, estimate
from pgpathbench.results.convergence import MIN_ROUNDS
from pgpathbench.runner import _case_seconds, _plan


def test_each_case_counts_at_its_own_time_times_its_rounds_to_do():
    est = estimate({"a": 5, "b": 5}, {"a": 2.0, "b": 60.0}, repeat=5, adaptive=False)
    assert est == Estimate(low_s=310.0, high_s=310.0, known=2, cases=2)


def test_cases_without_a_time_are_counted_as_unknown_not_as_zero_nor_as_a_typical_one():
    est = estimate({"a": 3, "b": 3, "c": 3}, {"a": 10.0, "c": None}, repeat=3, adaptive=False)
    assert (est.high_s, est.known, est.cases) == (30.0, 1, 3)
    assert estimate({"a": 3}, {}, repeat=3, adaptive=False) == Estimate(0.0, 0.0, 0, 1)


def test_a_resumed_run_counts_only_what_is_left_and_cases_done_are_no_cases_of_the_plan():
    est = estimate({"a": 2, "b": 0}, {"a": 10.0, "b": 99.0}, repeat=5, adaptive=False)
    assert est == Estimate(20.0, 20.0, 1, 1)


def test_until_ci_lower_bound_is_min_rounds_per_case_less_the_values_already_stored():
    repeat = MIN_ROUNDS + 4
    fresh = estimate({"a": repeat}, {"a": 1.0}, repeat=repeat, adaptive=True)
    assert (fresh.low_s, fresh.high_s) == (MIN_ROUNDS, repeat)
    # resumed with 3 rounds stored: MIN_ROUNDS - 3 more at least, the rest at most
    resumed = estimate({"a": repeat - 3}, {"a": 1.0}, repeat=repeat, adaptive=True)
    assert (resumed.low_s, resumed.high_s) == (MIN_ROUNDS - 3, repeat - 3)
    # enough stored already: it may close at once
    closed = estimate({"a": repeat - MIN_ROUNDS}, {"a": 1.0}, repeat=repeat, adaptive=True)
    assert closed.low_s == 0.0
    # fewer rounds than MIN_ROUNDS: every one of them
    short = estimate({"a": 2}, {"a": 1.0}, repeat=2, adaptive=True)
    assert (short.low_s, short.high_s) == (2.0, 2.0)


class Study:
    name = "s"

    def __init__(self, each: float | None):
        self.each = each

    def expected_measurement_s(self, options) -> float | None:
        return self.each


class Store:
    """What _plan asks of the results store: its history of case times, each call recorded."""

    def __init__(self, times: dict[str, float]):
        self.times, self.asked = times, []

    def case_times(self, study, case_ids, host, params, ignored, last_runs):
        self.asked.append((study, sorted(case_ids), host, dict(params), tuple(ignored), last_runs))
        return {c: self.times[c] for c in case_ids if c in self.times}


def _cases(n: int) -> list[Case]:
    return [Case("s", (("k", str(i)),)) for i in range(n)]


def _options(repeat: int, **params) -> StudyOptions:
    return StudyOptions("s", "quick", repeat, {"evidence": "on", **params}, {"k": ()})


def _line(study, options: StudyOptions, cases: list[Case], todo: list, store, host: str) -> str:
    return _plan(options, cases, todo, *_case_seconds(study, options, todo, store, host))


def _todo(cases: list[Case], repeat: int) -> list:
    return [(r, c) for r in range(1, repeat + 1) for c in cases]


def test_the_plan_asks_the_store_for_this_hosts_history_and_says_how_much_it_covers():
    cases = _cases(4)
    store = Store({"0": 30.0, "1": 30.0, "2": 60.0})
    line = _line(Study(None), _options(2, until_ci=5.0), cases, _todo(cases, 2), store, "here")
    assert store.asked == [("s", ["0", "1", "2", "3"], "here", {"evidence": "on", "until_ci": 5.0},
                            plan.ROUNDS_ONLY, plan.HISTORY_RUNS)]
    assert line.startswith("plan: 8 measurements (4 cases x 2 rounds, fewer once cases converge")
    assert line.endswith("; about 4m00s of measurements (from earlier runs here: 3 of 4 cases; "
                         "the others unknown), servers and data apart")


def test_the_plan_gives_a_span_when_cases_may_converge_and_all_cases_when_all_are_known():
    cases = _cases(2)
    repeat = MIN_ROUNDS * 2
    line = _line(Study(None), _options(repeat, until_ci=5.0), cases, _todo(cases, repeat),
                 Store({"0": 60.0, "1": 60.0}), "here")
    low, high = 2 * MIN_ROUNDS * 60, 2 * repeat * 60
    assert f"about {low // 60}m00s to {high // 60}m00s of measurements (from earlier runs here: all 2 cases)" in line


def test_without_history_the_plan_says_the_first_round_will_tell():
    cases = _cases(2)
    line = _line(Study(None), _options(3), cases, _todo(cases, 3), Store({}), "here")
    assert line == "plan: 6 measurements (2 cases x 3 rounds); how long: known after the first round (see each round's line)"


def test_a_study_that_can_say_is_not_asked_about_history():
    cases = _cases(2)
    store = Store({"0": 1000.0})
    line = _line(Study(11.0), _options(3), cases, _todo(cases, 3), store, "here")
    assert store.asked == []
    assert line.endswith("; about 1m06s of measurements (11 s each), servers and data apart")


@pytest.mark.parametrize("each", [None, 11.0])
def test_a_resumed_run_with_nothing_left_has_no_estimate(each):
    cases = _cases(2)
    line = _line(Study(each), _options(3), cases, [], Store({"0": 1.0}), "here")
    assert line == "plan: 0 measurements (2 cases x 3 rounds)"
