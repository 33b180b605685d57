"""Statistics against values computed by hand."""

import math

import pytest

from pgpathbench import stats


@pytest.mark.parametrize("n, k, coverage", [
    (1, 1, 0.0),
    (3, 1, 1 - 2 / 8),            # min..max of 3 covers 75%
    (5, 1, 1 - 2 / 32),           # 93.75%: still short of 95%
    (6, 1, 1 - 2 / 64),           # first n where min..max reaches 95%
    (10, 2, 1 - 2 * 11 / 1024),   # P(B<=1) = (1+10)/1024; k=3 would give 1-2*56/1024 = 89%
    (20, 6, 1 - 2 * (1 + 20 + 190 + 1140 + 4845 + 15504) / 2**20),
])
def test_median_ci_rank(n, k, coverage):
    got_k, got_cov = stats.median_ci_rank(n)
    assert got_k == k
    assert got_cov == pytest.approx(coverage)


def test_summarise_small_sample():
    s = stats.summarise([12, 10, 50, 11, 13])
    assert (s.n, s.median, s.min, s.max) == (5, 12, 10, 50)
    assert s.mean == pytest.approx(19.2)
    assert s.stdev == pytest.approx(math.sqrt(((12-19.2)**2 + (10-19.2)**2 + (50-19.2)**2
                                               + (11-19.2)**2 + (13-19.2)**2) / 4))
    assert (s.ci_low, s.ci_high) == (10, 50)
    assert s.coverage == pytest.approx(0.9375)
    assert s.outliers == 1                      # 50: 0.6745*38/MAD(=1) = 25.6 > 3.5
    assert s.ci_text == "[10.00, 50.00] (94%)"


def test_summarise_ten_rounds_interval_is_second_to_ninth():
    s = stats.summarise(list(range(10, 0, -1)))
    assert (s.median, s.ci_low, s.ci_high) == (5.5, 2, 9)
    assert s.ci_text == "[2.000, 9.000]"


def test_outliers_by_mad():
    assert stats.mad([1, 2, 3, 4, 100]) == 1    # deviations from 3: 2,1,0,1,97
    assert stats.outliers([1, 2, 3, 4, 100]) == [4]
    assert stats.outliers([5, 5, 5, 6]) == [3]  # MAD 0: anything off the median
    assert stats.outliers([1, 2]) == []


def test_paired_ratios_use_rounds_present_on_both_sides():
    num = {1: 10.0, 2: 20.0, 3: 30.0}
    den = {1: 5.0, 2: 10.0, 3: 10.0, 4: 7.0}
    assert stats.paired_ratios(num, den) == [2.0, 2.0, 3.0]
    r = stats.ratio_summary(num, den)
    assert r.median == 2.0 and r.verdict(1.0) == "too few rounds (3)"
    assert stats.ratio_summary({1: 1.0}, {2: 1.0}) is None


def test_verdict_needs_coverage():
    assert stats.summarise([2.0] * 6).verdict(1.0) == "yes"
    assert stats.summarise([0.9, 1.1] * 3).verdict(1.0) == "no"


def test_normalise():
    assert stats.normalise(5, 0, 10) == 0.5
    assert stats.normalise(3, 3, 3) == 0.0


@pytest.mark.parametrize("x, text", [(11512.79, "11,513"), (139.72, "139.7"), (12.345, "12.35"),
                                     (1.5, "1.500"), (0.0869, "0.0869"), (None, "—")])
def test_format_number(x, text):
    assert stats.format_number(x) == text


def test_summarise_rejects_empty():
    with pytest.raises(ValueError):
        stats.summarise([])


def test_linear_fit_by_hand():
    # y = 1 + 2x with residuals +0.1, -0.1, -0.1, +0.1 at x = 0..3
    fit = stats.linear_fit([0, 1, 2, 3], [1.1, 2.9, 4.9, 7.1])
    # mx 1.5, my 4.0, sxx 5, sxy = (-1.5)(-2.9)+(-.5)(-1.1)+(.5)(.9)+(1.5)(3.1) = 10.0 -> slope 2.0
    assert fit.slope == pytest.approx(2.0) and fit.intercept == pytest.approx(1.0)
    # sse = 0.04 + 0.01*... computed: residuals .1,-.1,-.1,.1 -> 0.04; se = sqrt(0.04/2/5) = 0.0632
    half = 4.303 * math.sqrt(0.04 / 2 / 5)
    assert (fit.slope_low, fit.slope_high) == (pytest.approx(2 - half), pytest.approx(2 + half))
    assert fit.n == 4 and fit.r2 == pytest.approx(1 - 0.04 / 20.04)


def test_linear_fit_needs_spread_in_x():
    with pytest.raises(ValueError):
        stats.linear_fit([1, 1, 1], [1, 2, 3])


@pytest.mark.parametrize("df, t", [(1, 12.706), (10, 2.228), (35, 2.042), (500, 1.96)])
def test_t_critical(df, t):
    assert stats.t_critical(df) == t
