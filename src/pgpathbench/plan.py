"""How long a run's measurements should take, for the plan it prints before its servers start.

Each case still to measure counts at a time of its own: the study's where it can say
(fdw-overhead: pgbench -T), else the median of what this host measured of the same case, with
the same parameters, in the latest runs that measured it (ResultsStore.case_times). A case with
neither is unknown, and said to be.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .results.convergence import MIN_ROUNDS

# Per case, the latest runs whose measurements make its time: recent enough to be this machine
# as it is now, several so that one odd run does not decide.
HISTORY_RUNS = 3
# Parameters that decide how many rounds a case gets, not what one of its measurements costs:
# runs that differ only in them measured the same thing.
ROUNDS_ONLY = ("until_ci",)


@dataclass(frozen=True)
class Estimate:
    low_s: float    # --until-ci: each known case closing as early as it can
    high_s: float   # every planned measurement of the known cases
    known: int      # cases still to measure whose time is known
    cases: int      # cases still to measure


def estimate(todo: Mapping[str, int], seconds: Mapping[str, float], repeat: int, adaptive: bool) -> Estimate:
    """todo: case id -> measurements still to make; seconds: case id -> one measurement's time,
    where known. With --until-ci a case needs MIN_ROUNDS values at least, those already stored
    (its rounds not to do) counting."""
    cases = [c for c, n in todo.items() if n > 0]
    known = [c for c in cases if seconds.get(c) is not None]
    low = high = 0.0
    for c in known:
        n = todo[c]
        low += seconds[c] * (min(n, max(MIN_ROUNDS - (repeat - n), 0)) if adaptive else n)
        high += seconds[c] * n
    return Estimate(low, high, len(known), len(cases))
