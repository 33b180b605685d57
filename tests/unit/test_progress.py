"""The ETA (progress.py): each planned measurement at its case's last time, each round to come at
the last round's own cost beside its measurements (probes, the decision), on a clock of our own."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from pgpathbench import progress
from pgpathbench.progress import ProgressReporter


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(progress.time, "monotonic", c)
    return c


def reporter(plan: list[tuple[int, str]]) -> ProgressReporter:
    p = ProgressReporter(Console(file=io.StringIO(), force_terminal=False))
    p.start("s", len(plan), 0, plan)
    return p


def run_round(p: ProgressReporter, clock: Clock, round_no: int, took: dict[str, float], probes: float) -> None:
    """A round as the runner makes it: probes before, each case, probes after, then round_done()."""
    clock.now += probes / 2
    for case, seconds in took.items():
        clock.now += seconds
        p.measured(case, round_no, "ok", seconds)
    clock.now += probes / 2
    p.round_done()


PLAN = [(r, c) for r in (1, 2, 3) for c in ("a", "b")]


def test_after_round_one_the_rest_is_each_case_and_each_round_counted_once(clock):
    p = reporter(PLAN)
    assert p.remaining_s() is None                       # nothing measured yet
    run_round(p, clock, 1, {"a": 1.0, "b": 3.0}, probes=2.0)
    # two rounds left: 2 x (1 + 3) of measurements, 2 x 2 s of probes
    assert p.remaining_s() == pytest.approx(12.0)
    run_round(p, clock, 2, {"b": 3.0, "a": 1.0}, probes=2.0)
    assert p.remaining_s() == pytest.approx(6.0)
    run_round(p, clock, 3, {"a": 1.0, "b": 3.0}, probes=2.0)
    assert p.remaining_s() == pytest.approx(0.0)


def test_within_a_round_its_closing_probes_are_still_to_come(clock):
    p = reporter(PLAN)
    run_round(p, clock, 1, {"a": 1.0, "b": 3.0}, probes=2.0)
    clock.now += 1.0 + 1.0
    p.measured("a", 2, "ok", 1.0)
    assert p.remaining_s() == pytest.approx(3.0 + 2.0 + (1.0 + 3.0 + 2.0))   # b, this round's probes, round 3


def test_probes_are_no_case_s_so_a_closed_case_takes_none_with_it(clock):
    p = reporter(PLAN)
    run_round(p, clock, 1, {"a": 1.0, "b": 3.0}, probes=6.0)   # probes dwarf the cases (a link, ms cases)
    p.closed({"a"})                                           # --until-ci: a converged
    assert p.total == 4 and p.remaining_s() == pytest.approx(2 * 3.0 + 2 * 6.0)
    p.closed({"b"})
    assert p.total == 2 and p.remaining_s() == pytest.approx(0.0)


def test_a_case_not_measured_yet_counts_at_the_median_and_a_resumed_plan_by_its_rounds(clock):
    # resumed: round 1 of b failed before, rounds 2 and 3 of both still to do
    p = reporter([(1, "b"), (2, "a"), (2, "b"), (2, "c"), (3, "a"), (3, "b"), (3, "c")])
    run_round(p, clock, 1, {"b": 2.0}, probes=1.0)
    assert p.remaining_s() == pytest.approx(2 * (2.0 + 2.0 + 2.0) + 2 * 1.0)


def test_a_resumed_run_counts_its_slow_cases_at_their_stored_time_until_measured_again(clock):
    # remote-sampling at scale: 10M-row cases take seconds, 10k-row ones milliseconds; resumed in
    # the middle of a round, the fast ones measured first must not set the slow ones' time
    p = ProgressReporter(Console(file=io.StringIO(), force_terminal=False))
    p.start("s", 6, 2, [(2, "fast"), (2, "slow"), (3, "fast"), (3, "slow")], known={"fast": 0.01, "slow": 15.0})
    assert p.remaining_s() == pytest.approx(2 * 0.01 + 2 * 15.0)     # before any measurement of this session
    clock.now += 0.02
    p.measured("fast", 2, "ok", 0.02)
    assert p.remaining_s() == pytest.approx(15.0 + 0.02 + 15.0)
    clock.now += 12.0
    p.measured("slow", 2, "ok", 12.0)
    assert p.remaining_s() == pytest.approx(0.02 + 12.0)


def test_the_eta_says_how_many_cases_it_guesses_until_each_is_timed(clock):
    # remote-sampling's paper preset after a quick one: 30 of 196 cases known, at milliseconds; the
    # rest count at their median until measured, so the line says the figure is a guess
    out = io.StringIO()
    p = ProgressReporter(Console(file=out, force_terminal=False, width=200))
    p.start("s", 4, 0, [(1, "a"), (1, "b"), (2, "a"), (2, "b")], known={"a": 1.0})
    assert p.untimed() == 1
    clock.now += 1.0
    p.measured("a", 1, "ok", 1.0)
    assert "(ETA 0m03s, 1 case not timed yet)" in out.getvalue()
    clock.now += 5.0
    p.measured("b", 1, "ok", 5.0)
    assert p.untimed() == 0 and out.getvalue().splitlines()[-1].endswith("(ETA 0m06s)")
