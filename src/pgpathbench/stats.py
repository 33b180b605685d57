"""Pure statistics: summaries, confidence intervals, paired ratios, normalisation.

Intervals for medians are distribution-free order-statistic intervals: for n values sorted,
[x(k), x(n+1-k)] covers the true median with probability 1 - 2*P(Binomial(n, 1/2) < k).
They assume nothing about the shape of timing noise, need no resampling (the same data give
the same interval), and tell the truth at small n: with 3 rounds the widest interval, min to
max, only covers 75%, and the summary says so instead of pretending to 95%.
Ratios are paired by round (both sides measured in the same round, close in time), so drift
of a shared, noisy machine cancels within each pair.
Two runs are not paired: their ratio is the Hodges-Lehmann shift of log values with the Moses
(Mann-Whitney) order-statistic interval, distribution-free as well (ratio_of_runs).
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass
from typing import Mapping, Sequence

CONFIDENCE = 0.95


def median_ci_rank(n: int, confidence: float = CONFIDENCE) -> tuple[int, float]:
    """The 1-based rank k of the interval [x(k), x(n+1-k)], and the coverage it achieves.

    k is the largest rank whose coverage still reaches `confidence`; when even min..max
    (k = 1) falls short, k = 1 and its lower coverage are returned.
    """
    if n < 1:
        raise ValueError("no values")
    best_k, best_cov = 1, 1 - 2 * 0.5 ** n
    below = 0.0  # P(Binomial(n, 1/2) <= k - 1)
    for k in range(1, (n + 1) // 2 + 1):
        below += math.comb(n, k - 1) * 0.5 ** n
        coverage = 1 - 2 * below
        if coverage < confidence:
            break
        best_k, best_cov = k, coverage
    return best_k, best_cov


class _Interval:
    """What a summary and a shift share: a confidence interval, and what it tells about a value."""
    ci_low: float
    ci_high: float
    coverage: float

    def excludes(self, value: float) -> bool:
        """The interval lies wholly on one side of `value` (e.g. a ratio's 1)."""
        return self.ci_low > value or self.ci_high < value

    def verdict(self, value: float) -> str:
        """Whether the data tell a difference from `value`, at the stated confidence."""
        if self.coverage < CONFIDENCE:
            return f"too few rounds ({self._rounds()})"
        return "yes" if self.excludes(value) else "no"


@dataclass(frozen=True)
class Summary(_Interval):
    n: int
    median: float
    ci_low: float
    ci_high: float
    coverage: float          # what the interval really covers (below 0.95 only for n <= 5)
    mean: float
    min: float
    max: float
    stdev: float             # 0 for a single value
    outliers: int            # values flagged by median absolute deviation

    def _rounds(self) -> str:
        return str(self.n)

    @property
    def ci_text(self) -> str:
        note = "" if self.coverage >= CONFIDENCE else f" ({self.coverage:.0%})"
        return f"[{format_number(self.ci_low)}, {format_number(self.ci_high)}]{note}"


def summarise(values: Sequence[float], confidence: float = CONFIDENCE) -> Summary:
    xs = sorted(float(v) for v in values)
    if not xs:
        raise ValueError("no values to summarise")
    n = len(xs)
    k, coverage = median_ci_rank(n, confidence)
    return Summary(
        n=n, median=statistics.median(xs), ci_low=xs[k - 1], ci_high=xs[n - k], coverage=coverage,
        mean=statistics.fmean(xs), min=xs[0], max=xs[-1],
        stdev=statistics.stdev(xs) if n > 1 else 0.0, outliers=len(outliers(xs)),
    )


def mad(values: Sequence[float]) -> float:
    """Median absolute deviation from the median (unscaled)."""
    med = statistics.median(values)
    return statistics.median(abs(v - med) for v in values)


def outliers(values: Sequence[float], threshold: float = 3.5) -> list[int]:
    """Indices whose modified z-score 0.6745*|x - median|/MAD exceeds threshold (Iglewicz-Hoaglin)."""
    if len(values) < 3:
        return []
    med, spread = statistics.median(values), mad(values)
    if spread == 0:  # more than half the values equal the median: any other is infinitely far
        return [i for i, v in enumerate(values) if v != med]
    return [i for i, v in enumerate(values) if 0.6745 * abs(v - med) / spread > threshold]


def paired_ratios(numerator: Mapping[int, float], denominator: Mapping[int, float]) -> list[float]:
    """numerator[r] / denominator[r] for every round r measured on both sides (and non-zero)."""
    return [numerator[r] / denominator[r] for r in sorted(numerator.keys() & denominator.keys())
            if denominator[r] != 0]


def ratio_summary(numerator: Mapping[int, float], denominator: Mapping[int, float]) -> Summary | None:
    ratios = paired_ratios(numerator, denominator)
    return summarise(ratios) if ratios else None


# Two-sided 95% critical values of Student's t by degrees of freedom (standard tables).
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
         10: 2.228, 11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110,
         18: 2.101, 19: 2.093, 20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060,
         26: 2.056, 27: 2.052, 28: 2.048, 29: 2.045, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980}


def t_critical(df: int) -> float:
    """t(0.975, df); between tabulated df the next smaller df's value (conservative)."""
    if df < 1:
        raise ValueError("need at least one degree of freedom")
    return _T975[max(k for k in _T975 if k <= df)] if df <= 120 else 1.960


@dataclass(frozen=True)
class Fit:
    slope: float
    intercept: float
    slope_low: float          # 95% confidence interval of the slope
    slope_high: float
    n: int
    r2: float


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> Fit:
    """Ordinary least squares y = intercept + slope*x, with the t-interval of the slope."""
    n = len(xs)
    if n != len(ys) or n < 3:
        raise ValueError("need at least 3 paired points")
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        raise ValueError("all x values are equal: no slope")
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    slope = sxy / sxx
    intercept = my - slope * mx
    sse = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys))
    syy = sum((y - my) ** 2 for y in ys)
    half = t_critical(n - 2) * math.sqrt(sse / (n - 2) / sxx)
    return Fit(slope, intercept, slope - half, slope + half, n, 1 - sse / syy if syy else 1.0)


def normalise(x: float, lo: float, hi: float) -> float:
    """Seed 003's normalised duration: (x - min) / (max - min) within a group; 0 when flat."""
    return 0.0 if hi == lo else (x - lo) / (hi - lo)


def format_number(x: float | None) -> str:
    """Four significant figures, without exponent for the ranges benchmarks produce."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    ax = abs(x)
    if ax >= 1000:
        return f"{x:,.0f}"
    if ax >= 100:
        return f"{x:.1f}"
    if ax >= 10:
        return f"{x:.2f}"
    if ax >= 1:
        return f"{x:.3f}"
    return f"{x:.4f}"


# -- two independent samples: the shift between them, and the ratio of two runs ---------------
#
# Runs are independent (round r of run A has nothing to do with round r of run B), so a ratio
# of two runs cannot be paired by round. The Hodges-Lehmann estimator of the shift y - x is the
# median of all m*n differences y_j - x_i; the Moses interval around it is
# [D(k), D(mn+1-k)] over the sorted differences, where k - 1 is the lower critical value of
# the Mann-Whitney statistic U (the number of pairs with y_j < x_i; under "no shift" U takes
# each value u with probability count(u) / C(m+n, m)). Its coverage is 1 - 2*P(U <= k-1),
# exactly as median_ci_rank's is 1 - 2*P(Binomial <= k-1). On log values the shift is the log
# of a ratio, so exp() of estimate and bounds gives the ratio y/x and its interval.

EXACT_MN_LIMIT = 2500    # exact U distribution up to m*n = 2500 (e.g. 50 x 50), normal beyond


def mann_whitney_counts(m: int, n: int) -> list[int]:
    """count[u]: how many of the C(m+n, m) orderings of m x's and n y's give U = u (no ties).

    The counts are the coefficients of the Gaussian binomial [m+n choose m] in q, built as
    prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i): multiply by the numerator factor, then divide by
    (1 - q^i), which is the running sum c[u] += c[u-i] (the division is exact at every step).
    """
    if m < 1 or n < 1:
        raise ValueError("need at least one value on each side")
    size = m * n + 1
    c = [1] + [0] * (size - 1)
    for i in range(1, m + 1):
        for u in range(size - 1, n + i - 1, -1):    # times (1 - q^(n+i)), high to low
            c[u] -= c[u - n - i]
        for u in range(i, size):                      # divided by (1 - q^i), low to high
            c[u] += c[u - i]
    return c


def _normal_cdf(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2))


def shift_ci_rank(m: int, n: int, confidence: float = CONFIDENCE) -> tuple[int, float]:
    """The 1-based rank k of the Moses interval [D(k), D(mn+1-k)], and the coverage it achieves.

    k is the largest rank whose coverage 1 - 2*P(U <= k-1) still reaches `confidence`; when
    even the widest interval (k = 1: smallest to largest difference) falls short, k = 1 and its
    lower coverage are returned (1 - 2/C(m+n, m): 90% for 3 + 3 rounds, 97.1% for 4 + 4).
    Exact distribution (by counting) up to m*n = EXACT_MN_LIMIT; beyond, the normal
    approximation of U (mean mn/2, variance mn(m+n+1)/12) with a continuity correction:
    P(U <= k-1) ~ Phi((k - 1 + 0.5 - mn/2) / sd).
    """
    if m < 1 or n < 1:
        raise ValueError("need at least one value on each side")
    mn = m * n
    if mn <= EXACT_MN_LIMIT:
        total = math.comb(m + n, m)
        cumulative = list(itertools.accumulate(mann_whitney_counts(m, n)))

        def below(k: int) -> float:          # P(U <= k - 1)
            return cumulative[k - 1] / total
    else:
        sd = math.sqrt(mn * (m + n + 1) / 12)

        def below(k: int) -> float:
            return _normal_cdf((k - 1 + 0.5 - mn / 2) / sd)
    best_k, best_cov = 1, 1 - 2 * below(1)
    for k in range(2, (mn + 1) // 2 + 1):
        coverage = 1 - 2 * below(k)
        if coverage < confidence:
            break
        best_k, best_cov = k, coverage
    return best_k, best_cov


@dataclass(frozen=True)
class Shift(_Interval):
    """y - x between two independent samples: Hodges-Lehmann estimate, Moses interval."""
    m: int                   # values of x
    n: int                   # values of y
    estimate: float
    ci_low: float
    ci_high: float
    coverage: float          # what the interval really covers (below 0.95 for 3 + 3 values)

    def _rounds(self) -> str:
        return f"{self.m}, {self.n}"


def hodges_lehmann_shift(x: Sequence[float], y: Sequence[float], confidence: float = CONFIDENCE) -> Shift:
    """The shift y - x: median of all differences y_j - x_i, with the Moses order-statistic interval."""
    if not x or not y:
        raise ValueError("need at least one value on each side")
    diffs = sorted(float(b) - float(a) for a in x for b in y)
    k, coverage = shift_ci_rank(len(x), len(y), confidence)
    return Shift(len(x), len(y), statistics.median(diffs), diffs[k - 1], diffs[len(diffs) - k], coverage)


def ratio_of_runs(a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE) -> Shift:
    """b / a for two independent samples of positive values: the shift of log values, exp'd back.

    estimate, ci_low and ci_high are ratios (1 = no difference); ValueError on values <= 0.
    """
    if any(v <= 0 for v in (*a, *b)):
        raise ValueError("ratios need positive values")
    s = hodges_lehmann_shift([math.log(v) for v in a], [math.log(v) for v in b], confidence)
    return Shift(s.m, s.n, math.exp(s.estimate), math.exp(s.ci_low), math.exp(s.ci_high), s.coverage)
