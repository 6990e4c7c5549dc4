"""Significance tests, effect sizes and their intervals between set-ups, and what a design can decide.

The thesis's "tie-corrected rank-sum" p-values (seed 002, tables 4.5 and 4.7) are those of the
two-sided Mann-Whitney U test with the normal approximation, tie correction and continuity
correction; scipy's ``ranksums`` has no tie correction and gives different values. At the few trials a
GAN study affords, that approximation is off (2 against 2 trials: 0.245 where the exact p is 0.333), so
``rank_test``'s ``auto`` takes the exact distribution of U wherever its splits can be counted: scipy's
exact test without ties, every split of the pooled scores (a permutation test) with ties.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from math import comb

import numpy as np
from scipy.optimize import brentq
from scipy.stats import kruskal, mannwhitneyu, norm, rankdata, t, ttest_ind_from_stats

# statistics.test: auto = exact where the splits can be counted, else asymptotic (the thesis's).
TEST_METHODS = ("auto", "exact", "asymptotic")
# Most splits of the pooled trials that a tied exact test enumerates (9 vs 9 trials: 48,620).
EXACT_SPLITS = 100_000
# Resamples of a tied exact test whose splits are too many to count (seeded: the same p on every run).
PERMUTATION_RESAMPLES = 99_999
# Largest sample whose U distribution the shift interval takes exactly; above, its normal approximation.
EXACT_SHIFT_TRIALS = 60


def _finite(values: Sequence[float]) -> np.ndarray:
    values = np.asarray(values, float)
    return values[np.isfinite(values)]


def ranksum_pvalue(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided tie-corrected rank-sum p-value (the thesis's); NaN when either sample is empty or all
    values are equal (the normal approximation has no variance then)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) == 0 or len(y) == 0 or np.ptp(np.concatenate([x, y])) == 0:
        return float("nan")
    return float(mannwhitneyu(x, y, alternative="two-sided", method="asymptotic", use_continuity=True).pvalue)


@dataclass(frozen=True)
class RankTest:
    """A two-sided Mann-Whitney test of two set-ups' finite scores: its p-value, the way it was computed
    (exact, exact with ties, permutation, asymptotic) and, where it could not test, why."""

    p: float
    method: str
    note: str = ""


def _chosen(n1: int, n2: int, method: str) -> str:
    if method not in TEST_METHODS:
        raise ValueError(f"rank test method {method!r} is not one of {', '.join(TEST_METHODS)}")
    if method == "auto":
        return "exact" if comb(n1 + n2, n1) <= EXACT_SPLITS else "asymptotic"
    return method


def _tied_pvalue(x: np.ndarray, y: np.ndarray) -> tuple[float, str]:
    """The permutation p-value of |U1 - n1 n2 / 2| (midranks): over every split of the pooled values where
    there are at most EXACT_SPLITS, else over PERMUTATION_RESAMPLES seeded random splits ((hits + 1) /
    (resamples + 1), never 0)."""
    ranks = rankdata(np.concatenate([x, y]))
    n1, n2 = len(x), len(y)
    centre = n1 * n2 / 2
    observed = abs(ranks[:n1].sum() - n1 * (n1 + 1) / 2 - centre)
    if comb(n1 + n2, n1) <= EXACT_SPLITS:
        firsts = np.array(list(combinations(range(n1 + n2), n1)))
        distances = np.abs(ranks[firsts].sum(axis=1) - n1 * (n1 + 1) / 2 - centre)
        # Midrank sums are multiples of 0.5: a tolerance far below that counts equal distances as equal.
        return float(np.mean(distances >= observed - 1e-9)), "exact (ties)"
    rng = np.random.default_rng(0)
    firsts = np.argsort(rng.random((PERMUTATION_RESAMPLES, n1 + n2)), axis=1)[:, :n1]
    distances = np.abs(ranks[firsts].sum(axis=1) - n1 * (n1 + 1) / 2 - centre)
    hits = int((distances >= observed - 1e-9).sum())
    return (hits + 1) / (PERMUTATION_RESAMPLES + 1), f"permutation ({PERMUTATION_RESAMPLES:,} resamples, ties)"


def rank_test(x: Sequence[float], y: Sequence[float], method: str = "auto") -> RankTest:
    """The two-sided Mann-Whitney test of the finite values of x against y. ``exact`` takes U's exact
    distribution: scipy's without ties, every split of the pooled values with ties (a permutation test of
    |U - n1 n2 / 2|; past EXACT_SPLITS splits, PERMUTATION_RESAMPLES seeded resamples); ``asymptotic``
    is the thesis's normal approximation (tie and continuity corrected); ``auto`` is exact up to
    EXACT_SPLITS splits. Identical scores differ in nothing: p = 1."""
    x, y = _finite(x), _finite(y)
    if len(x) == 0 or len(y) == 0:
        return RankTest(float("nan"), "–", "no finite scores on one side")
    if np.ptp(np.concatenate([x, y])) == 0:
        return RankTest(1.0, "–", "all scores identical")
    chosen = _chosen(len(x), len(y), method)
    if chosen == "asymptotic":
        return RankTest(ranksum_pvalue(x, y), "asymptotic")
    if len(np.unique(np.concatenate([x, y]))) == len(x) + len(y):
        return RankTest(float(mannwhitneyu(x, y, alternative="two-sided", method="exact").pvalue), "exact")
    return RankTest(*_tied_pvalue(x, y))


def smallest_p(n1: int, n2: int, method: str = "auto") -> float:
    """The smallest two-sided p-value that ``n1`` against ``n2`` trials can give (every trial of one
    set-up better than every one of the other, no ties): 2 / C(n1 + n2, n1) exactly; NaN without trials."""
    if n1 < 1 or n2 < 1:
        return float("nan")
    if _chosen(n1, n2, method) == "asymptotic":
        return ranksum_pvalue(np.arange(n1), n1 + np.arange(n2))
    return min(1.0, 2 / comb(n1 + n2, n1))


def _u_distribution(n1: int, n2: int) -> np.ndarray:
    """P(U = u) for u = 0 .. n1 n2 under the null without ties, by the recursion on the largest value
    (it belongs to x with probability n1 / (n1 + n2), adding n2 to U)."""
    rows = [np.ones(1)] * (n2 + 1)  # rows[j]: the distribution for (i, j), here i = 0
    for i in range(1, n1 + 1):
        current = [np.ones(1)]
        for j in range(1, n2 + 1):
            size = i * j + 1
            mixed = np.zeros(size)
            mixed[j : j + len(rows[j])] += i / (i + j) * rows[j]
            mixed[: len(current[j - 1])] += j / (i + j) * current[j - 1]
            current.append(mixed)
        rows = current
    return rows[n2]


def _cut(n1: int, n2: int, confidence: float) -> int:
    """How many of the n1 n2 ordered pairwise differences the rank-based interval cuts from each end: the
    largest k with P(U <= k - 1) <= (1 - confidence) / 2."""
    tail = (1 - confidence) / 2
    if max(n1, n2) <= EXACT_SHIFT_TRIALS:
        cumulative = np.cumsum(_u_distribution(n1, n2))
        return int(np.searchsorted(cumulative, tail * (1 + 1e-12), side="right"))
    return max(0, int(np.floor(n1 * n2 / 2 - norm.ppf(1 - tail) * np.sqrt(n1 * n2 * (n1 + n2 + 1) / 12))))


def shift_interval(x: Sequence[float], y: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """The Hodges-Lehmann shift of x over y (the median of all differences x_i - y_j) and its rank-based
    ``confidence`` interval (Moses: the k-th smallest and largest difference, k from U's exact distribution),
    the shifts that the exact rank-sum test does not reject; NaN bounds where the trials are too few for any."""
    x, y = _finite(x), _finite(y)
    if len(x) == 0 or len(y) == 0:
        return float("nan"), float("nan"), float("nan")
    differences = np.sort((x[:, None] - y[None, :]).ravel())
    shift = float(np.median(differences))
    k = _cut(len(x), len(y), confidence)
    if k < 1:
        return shift, float("nan"), float("nan")
    return shift, float(differences[k - 1]), float(differences[len(differences) - k])


def a12_interval(x: Sequence[float], y: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Newcombe's (2006) score interval of A12 (his method 5): the values theta with (A12 - theta)^2 at
    most z^2 times Hanley and McNeil's variance at theta, with both sample sizes set to their mean. It
    stays inside [0, 1] and has width at A12 = 0 or 1, where a bootstrap collapses."""
    x, y = _finite(x), _finite(y)
    if len(x) == 0 or len(y) == 0:
        return float("nan"), float("nan")
    value, z, half = a12(x, y), norm.ppf(0.5 + confidence / 2), (len(x) + len(y)) / 2

    def excess(theta: float) -> float:
        variance = (
            theta
            * (1 - theta)
            / (len(x) * len(y))
            * (1 + (half - 1) * ((1 - theta) / (2 - theta) + theta / (1 + theta)))
        )
        return (value - theta) ** 2 - z**2 * variance

    # At A12 = 0 (or 1) theta = A12 is a root of no width: the interval's other end is the root beside it.
    low = 0.0 if value == 0 else brentq(excess, 0.0, value if value < 1 else 1 - 1e-12)
    high = 1.0 if value == 1 else brentq(excess, value if value > 0 else 1e-12, 1.0)
    return float(low), float(high)


def location_interval(
    values: Sequence[float], bounds: tuple[float | None, float | None] = (None, None), confidence: float = 0.95
) -> tuple[float, float, float, str]:
    """A set-up's typical score and its ``confidence`` interval inside the metric's range: the t-interval of
    the mean for an unbounded metric; for one bounded below (FID), the t-interval of the log scores taken
    back (the geometric mean's); for one bounded on both sides, of the logit. A score on a bound leaves the
    t-interval clipped to the range. Returns (centre, low, high, method); NaN with fewer than two values."""
    values = _finite(values)
    if len(values) < 2:
        return (float(values[0]) if len(values) else float("nan")), float("nan"), float("nan"), "–"
    low_end, high_end = bounds
    inside = (low_end is None or values.min() > low_end) and (high_end is None or values.max() < high_end)
    if low_end is not None and inside:
        width = 1.0 if high_end is None else high_end - low_end
        scaled = (values - low_end) / width
        if high_end is None:
            forward, back, method = np.log, np.exp, "t on the log scale (geometric mean)"
        else:
            forward, back, method = (
                (lambda v: np.log(v / (1 - v))),
                (lambda v: 1 / (1 + np.exp(-v))),
                "t on the logit scale",
            )
        centre, low, high = (low_end + width * back(v) for v in _t_interval(forward(scaled), confidence))
        return float(centre), float(low), float(high), method
    centre, low, high = _t_interval(values, confidence)
    if (low_end is None or low >= low_end) and (high_end is None or high <= high_end):
        return centre, low, high, "t"
    return (
        centre,
        max(low, -np.inf if low_end is None else low_end),
        min(high, np.inf if high_end is None else high_end),
        "t, clipped to the range",
    )


def _t_interval(values: np.ndarray, confidence: float) -> tuple[float, float, float]:
    half = t.ppf(0.5 + confidence / 2, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    return float(values.mean()), float(values.mean() - half), float(values.mean() + half)


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjustment (family-wise error), monotone and capped at 1; NaNs stay NaN and do
    not count as tests."""
    p = np.asarray(pvalues, float)
    adjusted = np.full_like(p, np.nan)
    tested = np.flatnonzero(~np.isnan(p))
    order = tested[np.argsort(p[tested], kind="stable")]
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, (len(order) - rank) * p[index])
        adjusted[index] = min(1.0, running)
    return adjusted


def a12(x: Sequence[float], y: Sequence[float]) -> float:
    """Vargha and Delaney's A12: the probability that a value of x exceeds one of y, ties counting half."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) == 0 or len(y) == 0:
        return float("nan")
    greater = (x[:, None] > y[None, :]).sum()
    equal = (x[:, None] == y[None, :]).sum()
    return float((greater + 0.5 * equal) / (len(x) * len(y)))


def a12_magnitude(value: float) -> str:
    """Vargha and Delaney's thresholds on the distance from 0.5: negligible, small, medium, large."""
    if np.isnan(value):
        return "–"
    distance = max(value, 1 - value)
    if distance < 0.56:
        return "negligible"
    if distance < 0.64:
        return "small"
    if distance < 0.71:
        return "medium"
    return "large"


def kruskal_wallis(groups: Sequence[Sequence[float]]) -> tuple[float, int, float]:
    """Tie-corrected Kruskal-Wallis H, its degrees of freedom and p-value over the non-empty groups;
    NaN when fewer than two groups have values or every value is the same."""
    present = [np.asarray(g, float) for g in groups if len(g)]
    if len(present) < 2 or np.ptp(np.concatenate(present)) == 0:
        return float("nan"), max(len(present) - 1, 0), float("nan")
    result = kruskal(*present)
    return float(result.statistic), len(present) - 1, float(result.pvalue)


def welch_pvalue(
    mean_a: float, sd_a: float | None, n_a: int | None, mean_b: float, sd_b: float | None, n_b: int | None
) -> float:
    """Two-sided Welch t-test from summary statistics (a paper publishes only mean, sd and trials); NaN
    when a side lacks its sd or has fewer than 2 trials, or both sds are 0."""
    known = all(v is not None and np.isfinite(v) for v in (mean_a, sd_a, n_a, mean_b, sd_b, n_b))
    if not known or n_a < 2 or n_b < 2 or (sd_a == 0 and sd_b == 0):
        return float("nan")
    return float(ttest_ind_from_stats(mean_a, sd_a, n_a, mean_b, sd_b, n_b, equal_var=False).pvalue)
