"""Two independent samples: Mann-Whitney counts, the Moses interval's rank, Hodges-Lehmann,
ratio of runs; all against values computed by hand."""

import math

import pytest

from pgpathbench import stats


def test_mann_whitney_counts_by_hand():
    # m = n = 2: the 6 orderings of xxyy give U = 0,1,2,2,3,4 -> counts 1,1,2,1,1
    assert stats.mann_whitney_counts(2, 2) == [1, 1, 2, 1, 1]
    # m = 1: U is the rank of the single x among the y's, each value once
    assert stats.mann_whitney_counts(1, 4) == [1, 1, 1, 1, 1]
    # m = n = 4: partitions of u into at most 4 parts of at most 4; 70 = C(8, 4) in all
    assert stats.mann_whitney_counts(4, 4) == [1, 1, 2, 3, 5, 5, 7, 7, 8, 7, 7, 5, 5, 3, 2, 1, 1]
    assert sum(stats.mann_whitney_counts(7, 5)) == math.comb(12, 5)
    assert stats.mann_whitney_counts(3, 5) == stats.mann_whitney_counts(5, 3)   # symmetric in m, n


@pytest.mark.parametrize("m, n, k, coverage", [
    (3, 3, 1, 1 - 2 / 20),             # min..max of the 9 differences: only 90%
    (4, 4, 1, 1 - 2 / 70),             # 97.1%; k=2 would be 1 - 2*2/70 = 94.3%
    (5, 5, 3, 1 - 2 * 4 / 252),        # P(U<=2) = (1+1+2)/252; k=4: 1 - 2*7/252 = 94.4% (tables: U crit 2)
    (3, 5, 1, 1 - 2 / 56),             # C(8,3) = 56; k=2: 1 - 4/56 = 92.9%
    (10, 10, 24, None),                # tables: two-sided 5% critical U = 23
    (20, 20, 128, None),               # tables: 127
])
def test_shift_ci_rank_exact(m, n, k, coverage):
    got_k, got_cov = stats.shift_ci_rank(m, n)
    assert got_k == k
    if coverage is not None:
        assert got_cov == pytest.approx(coverage)
    assert got_cov >= 0.95 or got_k == 1


def test_shift_ci_rank_normal_approximation_for_large_samples():
    # m = n = 60 (mn = 3600 > EXACT_MN_LIMIT): mean 1800, sd = sqrt(3600*121/12) = 190.53;
    # largest k with Phi((k - 0.5 - 1800)/190.53) <= 0.025: k - 0.5 <= 1800 - 1.95996*190.53 = 1426.57
    k, coverage = stats.shift_ci_rank(60, 60)
    assert k == 1427
    assert 0.95 <= coverage < 0.9502
    # exact and approximate agree closely at the boundary of the exact method (50 x 50: exact)
    assert stats.shift_ci_rank(50, 50)[0] in range(964, 968)


def test_hodges_lehmann_shift_by_hand():
    x, y = [1, 2, 3, 4], [3, 5, 6, 9]
    # differences y - x: 2,1,0,-1 | 4,3,2,1 | 5,4,3,2 | 8,7,6,5 -> sorted
    # -1,0,1,1,2,2,2,3,3,4,4,5,5,6,7,8: median (3+3)/2 = 3; k=1 -> [-1, 8] at 97.1%
    s = stats.hodges_lehmann_shift(x, y)
    assert (s.estimate, s.ci_low, s.ci_high) == (3, -1, 8)
    assert s.coverage == pytest.approx(68 / 70)
    assert s.verdict(0) == "no"


def test_hodges_lehmann_five_and_five_excludes_zero():
    # every difference is between 6 and 14: sorted 25 differences, k = 3 -> [D(3), D(23)]
    x, y = [10, 11, 12, 13, 14], [20, 21, 22, 23, 24]
    s = stats.hodges_lehmann_shift(x, y)
    # differences 10 + (j - i), j - i in -4..4 with counts 1,2,3,4,5,4,3,2,1: D(3) = 7, D(23) = 13
    assert (s.estimate, s.ci_low, s.ci_high) == (10, 7, 13)
    assert s.verdict(0) == "yes"


def test_ratio_of_runs_on_log_values():
    a = [1, 2, 4, 8]
    b = [2, 4, 8, 16]
    # log2 b_j - log2 a_i = (j + 1) - i: -2..4 with counts 1,2,3,4,3,2,1: median 1 -> ratio 2;
    # k = 1 -> [2^-2, 2^4]
    r = stats.ratio_of_runs(a, b)
    assert r.estimate == pytest.approx(2.0)
    assert (r.ci_low, r.ci_high) == (pytest.approx(0.25), pytest.approx(16.0))
    assert r.verdict(1.0) == "no"


def test_ratio_of_a_run_with_itself_is_one_and_not_significant():
    a = [1510.0, 1490.0, 1502.0, 1530.0, 1475.0, 1499.0]
    r = stats.ratio_of_runs(a, a)
    assert r.estimate == pytest.approx(1.0)
    assert r.ci_low < 1 < r.ci_high and r.verdict(1.0) == "no"


def test_ratio_of_runs_says_too_few_rounds():
    r = stats.ratio_of_runs([10, 11, 12], [20, 21, 22])
    assert r.coverage == pytest.approx(0.9)
    assert r.verdict(1.0) == "too few rounds (3, 3)"


def test_ratio_of_runs_rejects_non_positive_and_empty():
    with pytest.raises(ValueError):
        stats.ratio_of_runs([1, 0], [1, 2])
    with pytest.raises(ValueError):
        stats.ratio_of_runs([], [1, 2])
