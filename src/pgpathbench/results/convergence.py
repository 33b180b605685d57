"""Adaptive repetition (`--until-ci PCT`): when a case is known well enough to stop measuring it.

What decides: where the study declares a baseline (results/baseline.py) and the case has one in
the run, the ratio the study quotes (fdw-overhead: local TPS / the FDW target's), its primary
metric paired by round with its baseline's: only rounds measured on both sides count, because
the ratio is the user's question and its interval, not each side's, must be narrow. Any other
case: its own primary metric. Converged: at least MIN_ROUNDS values (rounds, or pairs) and the
95% interval of their median (stats.summarise: distribution-free, from order statistics) within
PCT% of the median on both sides. MIN_ROUNDS is 6, the first count whose interval covers 95%
(with 5, min..max covers 93.75%).

A baseline case stays open while any case paired with it is open (its rounds are their pairs),
and is converged only when its own metric is. Decided from stored measurements only, so a
resumed run decides alike.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Callable

from ..matrix import round_order
from ..stats import CONFIDENCE, Summary
from .model import StudyResult

MIN_ROUNDS = 6


def half_width_pct(s: Summary | None) -> float | None:
    """The interval's larger distance from the median, in percent of the median."""
    if s is None or not s.median:
        return None
    return max(s.median - s.ci_low, s.ci_high - s.median) / abs(s.median) * 100


def within(s: Summary | None, pct: float) -> bool:
    if s is None or s.n < MIN_ROUNDS or s.coverage < CONFIDENCE:
        return False
    width = half_width_pct(s)
    return width is not None and width <= pct


@dataclass(frozen=True)
class Verdict:
    """One case, as --until-ci sees it from what is stored."""
    case_id: str
    rounds: int                      # its successful measurements
    decided_by: str                  # the primary metric, or 'ratio to target=local'
    interval: Summary | None         # the metric's, or the ratio's over the paired rounds
    converged: bool
    holds_for: tuple[str, ...] = ()  # a baseline: the cases paired with it still open

    @property
    def closed(self) -> bool:
        """Measured no more: converged, and no case needs its rounds as pairs."""
        return self.converged and not self.holds_for


def verdicts(result: StudyResult, study, pct: float) -> list[Verdict]:
    """Every case of the run, in planned order. `study`: its primary_metric and baseline."""
    metric, baseline = study.primary_metric, study.baseline
    twins = baseline.twins(result.cases) if baseline is not None else {}
    decided = {}
    for c in result.cases:
        base = twins.get(c.case_id)
        s = baseline.ratio(c, base, metric) if base is not None else c.summary(metric)
        decided[c.case_id] = (s, within(s, pct))
    holds = defaultdict(list)
    for case_id, base in twins.items():
        if not decided[case_id][1]:
            holds[base.case_id].append(case_id)
    return [Verdict(c.case_id, len(c.values(metric)),
                    f"ratio to {baseline.label}" if c.case_id in twins else metric,
                    *decided[c.case_id], tuple(holds[c.case_id])) for c in result.cases]


def closed_cases(result: StudyResult, study, pct: float) -> set[str]:
    return {v.case_id for v in verdicts(result, study, pct) if v.closed}


def plan_round(study, cases: list, seed: int, round_no: int, done: set, stored: Callable[[], StudyResult],
               pct: float | None) -> tuple[list, set[str]]:
    """The cases round `round_no` measures, in its shuffled order: those without a successful
    measurement in it (`done`: (study, case_id, round)) and, with --until-ci, not closed by what
    is stored (`stored()`, read only then); and the closed ones. Interleaved: every open case once
    per round; a resumed run plans alike, from the same stored measurements."""
    todo = [c for c in round_order(cases, seed, round_no) if (study.name, c.case_id, round_no) not in done]
    if pct is None or not todo:
        return todo, set()
    closed = closed_cases(stored(), study, pct)
    return [c for c in todo if c.case_id not in closed], closed
