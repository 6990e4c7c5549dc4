"""The tests and intervals a study's answer rests on (ganstudy.stats.tests), each against an independent
implementation: scipy's exact and permutation tests, an enumeration of every split written here, the
test-inversion definition of the shift interval, and coverage simulated against closed forms."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest
from scipy import stats as sps

from ganstudy.stats.tests import (
    _u_distribution,
    a12,
    a12_interval,
    holm,
    median_interval,
    rank_test,
    shift_interval,
    smallest_p,
)


def _enumerated_p(x, y):
    """Two-sided p of |U1 - n1 n2 / 2| over every split of the pooled values, written out from the definition."""
    pooled = np.concatenate([x, y])
    n1 = len(x)
    ranks = sps.rankdata(pooled)

    def distance(first):
        return abs(ranks[list(first)].sum() - n1 * (n1 + 1) / 2 - n1 * len(y) / 2)

    observed = distance(range(n1))
    splits = list(combinations(range(len(pooled)), n1))
    return sum(distance(split) >= observed - 1e-9 for split in splits) / len(splits)


@pytest.mark.parametrize(
    "n1, n2, exact, asymptotic", [(2, 2, 0.333, 0.245), (3, 3, 0.100, 0.081), (5, 5, 0.0079, 0.012)]
)
def test_small_samples_take_the_exact_p_where_the_approximation_is_off(n1, n2, exact, asymptotic):
    # Issue 66's numbers: separated groups of n1 and n2 trials.
    x, y = np.arange(n1) + 0.5, 100.0 + np.arange(n2)
    test = rank_test(x, y)
    assert test.method == "exact" and test.p == pytest.approx(exact, abs=5e-4)
    assert test.p == pytest.approx(sps.mannwhitneyu(x, y, method="exact").pvalue, rel=1e-12)
    assert test.p == pytest.approx(2 / math.comb(n1 + n2, n1))
    thesis = rank_test(x, y, "asymptotic")
    assert thesis.method == "asymptotic" and thesis.p == pytest.approx(asymptotic, abs=5e-4)


def test_ties_take_every_split_as_an_enumeration_and_scipys_permutation_test_do():
    x, y = [1.0, 2.0, 2.0, 3.0, 5.0, 5.0], [2.0, 4.0, 5.0, 6.0, 6.0, 7.0, 7.0]
    test = rank_test(x, y)
    assert test.method == "exact (ties)"
    assert test.p == pytest.approx(_enumerated_p(np.array(x), np.array(y)), rel=1e-12)

    def distance(a, b, axis):
        ranks = sps.rankdata(np.concatenate([a, b], axis=axis), axis=axis)
        return np.abs(
            ranks[..., : a.shape[axis]].sum(axis=axis)
            - a.shape[axis] * (a.shape[axis] + 1) / 2
            - a.shape[axis] * b.shape[axis] / 2
        )

    scipy_p = sps.permutation_test(
        (x, y), distance, permutation_type="independent", vectorized=True, alternative="greater", n_resamples=np.inf
    ).pvalue
    assert test.p == pytest.approx(scipy_p, rel=1e-12)
    # scipy's "exact" ignores ties and says something else here.
    assert abs(test.p - sps.mannwhitneyu(x, y, method="exact").pvalue) > 1e-3
    # One trial against ties still enumerates (scipy's permutation test needs two per side).
    assert rank_test([2.0], [1.0, 2.0, 3.0]).p == pytest.approx(
        _enumerated_p(np.array([2.0]), np.array([1.0, 2.0, 3.0]))
    )


def test_too_many_tied_splits_take_seeded_resamples_close_to_the_asymptotic_p():
    rng = np.random.default_rng(3)
    x, y = np.round(rng.normal(0, 1, 12), 1), np.round(rng.normal(1, 1, 12), 1)
    test = rank_test(x, y, "exact")
    assert test.method.startswith("permutation (99,999 resamples")
    assert test.p == rank_test(x, y, "exact").p  # seeded: the same p every time
    assert test.p == pytest.approx(sps.mannwhitneyu(x, y, method="asymptotic").pvalue, abs=0.01)
    # auto takes the thesis's approximation for samples this large.
    assert rank_test(x, y).method == "asymptotic"


def test_identical_scores_differ_in_nothing_and_no_scores_give_no_test():
    assert rank_test([3.0, 3.0], [3.0, 3.0, 3.0]).p == 1.0 and rank_test([3.0], [3.0]).note == "all scores identical"
    assert math.isnan(rank_test([], [1.0]).p) and math.isnan(rank_test([np.nan, np.nan], [1.0]).p)
    # NaN scores are left out, not tested.
    assert rank_test([1.0, 2.0, np.nan], [3.0, 4.0]).p == pytest.approx(rank_test([1.0, 2.0], [3.0, 4.0]).p)
    with pytest.raises(ValueError, match="not one of auto, exact, asymptotic"):
        rank_test([1.0], [2.0], "exakt")


@pytest.mark.parametrize("n1, n2", [(1, 1), (2, 3), (4, 4), (5, 7)])
def test_the_u_distribution_is_every_splits_count(n1, n2):
    counts = np.zeros(n1 * n2 + 1)
    for first in combinations(range(n1 + n2), n1):
        # U1 counts the pairs where x is above y; ranks 0..n-1 of distinct values.
        counts[sum(r for r in first) - n1 * (n1 - 1) // 2] += 1
    np.testing.assert_allclose(_u_distribution(n1, n2), counts / counts.sum(), rtol=1e-12)


def test_the_smallest_holm_p_says_what_a_design_can_decide():
    # ARCHITECTURE.md: 4 vs 4 exactly 0.0286; after Holm over 3 set-ups' 3 pairs, 0.086: never below 0.05.
    assert smallest_p(4, 4) == pytest.approx(0.028571, rel=1e-4)
    assert holm([smallest_p(4, 4)] * 3)[0] == pytest.approx(0.0857, rel=1e-3)
    assert holm([smallest_p(4, 4)] * 6)[0] == pytest.approx(0.171, rel=1e-2)
    assert holm([smallest_p(3, 3)] * 15)[0] == 1.0
    assert smallest_p(30, 30, "asymptotic") == pytest.approx(3.02e-11, rel=5e-3)
    assert math.isnan(smallest_p(0, 4))
    # The smallest p is the one that separated groups give.
    assert smallest_p(3, 5) == pytest.approx(rank_test([1, 2, 3], [4, 5, 6, 7, 8]).p)


@pytest.mark.parametrize("n1, n2", [(4, 4), (4, 6), (8, 8), (12, 10)])
def test_the_shift_interval_is_the_shifts_the_exact_test_does_not_reject(n1, n2):
    rng = np.random.default_rng(n1 * 100 + n2)
    x, y = rng.normal(1.0, 1.0, n1), rng.normal(0.0, 1.0, n2)
    shift, low, high = shift_interval(x, y)
    assert shift == pytest.approx(np.median(np.subtract.outer(x, y)))
    step = 1e-7

    def p_at(delta):
        return sps.mannwhitneyu(x - delta, y, method="exact").pvalue

    assert low < shift < high
    # Just inside each end the exact test keeps the shift (p > 0.05); just outside it rejects it.
    assert p_at(low + step) > 0.05 and p_at(high - step) > 0.05
    assert p_at(low - step) <= 0.05 and p_at(high + step) <= 0.05


def test_too_few_trials_give_no_shift_interval():
    # 2 vs 2: the six splits cannot put 2.5% in a tail.
    shift, low, high = shift_interval([1.0, 2.0], [5.0, 7.0])
    assert shift == pytest.approx(-4.5) and math.isnan(low) and math.isnan(high)


def test_the_a12_interval_covers_the_closed_form_at_its_level():
    # Normal scores a shift delta apart: A12 = Phi(delta / sqrt(2)).
    rng = np.random.default_rng(7)
    delta, n, repeats = 0.8, 8, 1500
    truth = sps.norm.cdf(delta / math.sqrt(2))
    hits = 0
    for _ in range(repeats):
        x, y = rng.normal(delta, 1, n), rng.normal(0, 1, n)
        low, high = a12_interval(x, y)
        assert 0 <= low <= a12(x, y) <= high <= 1
        hits += low <= truth <= high
    assert 0.93 <= hits / repeats <= 0.975


def test_the_a12_interval_has_width_where_every_trial_is_separated():
    low, high = a12_interval([5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0])
    assert high == 1.0 and 0.5 < low < 0.7
    assert a12_interval([1.0, 2.0], [5.0, 6.0]) == pytest.approx((0.0, 1 - a12_interval([5.0, 6.0], [1.0, 2.0])[0]))
    # One trial each says almost nothing.
    low, high = a12_interval([1.0], [2.0])
    assert low == 0.0 and high > 0.75


def test_the_median_interval_is_scipys_quantile_test_interval():
    # scipy's quantile_test inverts the sign test: its confidence interval of the median is the same order statistics.
    rng = np.random.default_rng(11)
    for n in (6, 7, 10, 15, 31):
        sample = rng.lognormal(mean=2.0, sigma=0.8, size=n)
        reference = sps.quantile_test(sample, q=np.median(sample), p=0.5).confidence_interval(0.95)
        assert median_interval(sample) == pytest.approx((reference.low, reference.high)), n
    # Below 6 trials no pair of order statistics has 95%: 2 / 2^5 = 0.0625 outside.
    assert all(math.isnan(v) for v in median_interval([1.0, 2.0, 3.0, 4.0, 5.0]))


def test_the_design_says_before_any_job_what_the_trials_can_decide():
    from ganstudy.stats.design import design_lines, smallest_holm, trials_needed

    info, warnings = design_lines({"a": 4, "b": 4}, "auto", 0.05)
    assert "4 against 4 trials: smallest Holm p 0.0286" in info[0] and warnings == []
    # Issue 66: 4 trials and 3 set-ups can never reach 0.05 (0.086); 4 set-ups 0.171; 3 trials and 6 set-ups 1.
    info, warnings = design_lines({"a": 4, "b": 4, "c": 4}, "auto", 0.05)
    assert warnings == [
        "no comparison can reach Holm p < 0.05 with these trials, whatever the scores: the smallest is 0.0857; "
        "5 trials per set-up would let a complete separation reach it (trials, or setups.<name>.trials)."
    ]
    assert min(smallest_holm(dict.fromkeys("abcd", 4), "auto").values()) == pytest.approx(6 * 2 / 70)
    assert min(smallest_holm(dict.fromkeys("abcdef", 3), "auto").values()) == 1.0
    # The trials needed, by brute force over the exact test's smallest p.
    for setups in (2, 3, 6):
        pairs = setups * (setups - 1) // 2
        needed = next(n for n in range(2, 50) if pairs * 2 / math.comb(2 * n, n) < 0.05)
        assert trials_needed(setups, "auto", 0.05) == needed
    # Uneven trials: only the pairs that cannot decide are named.
    _, warnings = design_lines({"a": 8, "b": 8, "c": 1}, "auto", 0.05)
    assert warnings[0].startswith("2 of the 3 comparisons (a vs c, b vs c) cannot reach Holm p < 0.05")
    assert design_lines({"only": 5}, "auto", 0.05) == ([], [])


def test_simulated_power_matches_the_t_tests_closed_form_on_normal_scores():
    from scipy.stats import ttest_ind
    from statsmodels.stats.power import TTestIndPower

    from ganstudy.stats.power import rank_decision, simulated_power

    # Many measured trials of two normal set-ups one sd apart, resampled: the simulation's t-test power is the
    # closed form's, and the rank test's a little below it (its efficiency on normal scores is 0.955).
    rng = np.random.default_rng(1)
    x, y = rng.normal(1.0, 1.0, 2000), rng.normal(0.0, 1.0, 2000)

    def t_decides(a, b):
        return (ttest_ind(a, b, axis=1).pvalue < 0.05) & (a.mean(axis=1) > b.mean(axis=1))

    for n in (5, 10, 20):
        closed = TTestIndPower().power(1.0, n, 0.05, alternative="two-sided")
        assert simulated_power(x, y, n, t_decides, 2000) == pytest.approx(closed, abs=0.04)
        ranks = simulated_power(x, y, n, rank_decision(1.0, "auto", 0.05, 1), 2000)
        assert closed - 0.12 <= ranks <= closed + 0.02


def test_a_well_measured_effect_plans_a_narrow_range_around_the_closed_form():
    from statsmodels.stats.power import TTestIndPower

    from ganstudy.stats.power import trials_for_power

    # 2,000 trials each of two normal set-ups one sd apart: every bootstrap copy is nearly the truth. The t-test
    # needs 17 trials for power 0.8 (closed form); the rank test, at efficiency 0.955, one or two more.
    rng = np.random.default_rng(1)
    x, y = rng.normal(1.0, 1.0, 2000), rng.normal(0.0, 1.0, 2000)
    closed = TTestIndPower().solve_power(1.0, power=0.8, alpha=0.05)
    plan = trials_for_power(x, y, "auto", 0.05, 1)
    assert 16 <= closed <= 17 and closed <= plan.low <= plan.median <= plan.high <= 24, plan.text()
    # More pairs in the Holm family need more trials.
    assert trials_for_power(x, y, "auto", 0.05, 6).low > plan.high
