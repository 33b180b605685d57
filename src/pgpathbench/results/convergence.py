"""Adaptive repetition (`--until-ci PCT`): when a case's primary metric is known well enough.

A case has converged once its successful rounds number at least MIN_ROUNDS and the 95% interval
of their median (stats.summarise: distribution-free, from order statistics) lies within PCT% of
the median on both sides. MIN_ROUNDS is 6, the first count whose interval covers 95% (with 5,
min..max covers 93.75%). Decided from stored measurements only, so a resumed run decides alike.
"""

from __future__ import annotations

from ..stats import CONFIDENCE, Summary
from .model import CaseResult, RunResult

MIN_ROUNDS = 6


def half_width_pct(s: Summary) -> float | None:
    """The interval's larger distance from the median, in percent of the median."""
    if not s.median:
        return None
    return max(s.median - s.ci_low, s.ci_high - s.median) / abs(s.median) * 100


def converged(case: CaseResult, metric: str, pct: float) -> bool:
    s = case.summary(metric)
    if s is None or s.n < MIN_ROUNDS or s.coverage < CONFIDENCE:
        return False
    width = half_width_pct(s)
    return width is not None and width <= pct


def converged_cases(run: RunResult, metric: str, pct: float) -> set[str]:
    return {c.case_id for c in run.cases if converged(c, metric, pct)}


def convergence_rows(run: RunResult, metric: str, pct: float) -> list[list]:
    """Per case: rounds measured, the interval's half-width in % of the median, converged or not."""
    rows = []
    for c in run.cases:
        s = c.summary(metric)
        width = half_width_pct(s) if s is not None else None
        rows.append([c.case_id, s.n if s else 0, "—" if width is None else f"{width:.1f}%",
                     "yes" if converged(c, metric, pct) else "no"])
    return rows
