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
from scipy.stats import binom, kruskal, mannwhitneyu, norm, rankdata, ttest_ind_from_stats

# statistics.failures: a failed trial ranks below every finite score, or is left out (said on the page).
FAILURES = ("worst", "exclude")
# statistics.test: auto = exact where the splits can be counted, else asymptotic (the thesis's).
TEST_METHODS = ("auto", "exact", "asymptotic")
# Most splits of the pooled trials that a tied exact test enumerates (9 vs 9 trials: 48,620).
EXACT_SPLITS = 100_000
# Resamples of a tied exact test whose splits are too many to count (seeded: the same p on every run).
PERMUTATION_RESAMPLES = 99_999
# Largest sample whose U distribution the shift interval takes exactly; above, its normal approximation.
EXACT_SHIFT_TRIALS = 60


def _present(values: Sequence[float]) -> np.ndarray:
    """The values without NaN; an infinite value is a failed trial ranked worst (``outcomes``) and stays."""
    values = np.asarray(values, float)
    return values[~np.isnan(values)]


def aligned_outcomes(values: Sequence[float], higher: bool, failures: str = "worst") -> np.ndarray:
    """A set-up's trials as the rank tests compare them, in the trials' order. A finite score is itself; a
    failed trial (NaN: no score; inf: diverged) is, under ``worst``, worse than every finite score (inf
    where lower is better, -inf where higher is), so that a set-up cannot win by losing its bad trials;
    under ``exclude`` it is NaN, left out."""
    if failures not in FAILURES:
        raise ValueError(f"statistics.failures {failures!r} is not one of {', '.join(FAILURES)}")
    values = np.asarray(values, float)
    failed = np.nan if failures == "exclude" else (-np.inf if higher else np.inf)
    return np.where(np.isfinite(values), values, failed)


def outcomes(values: Sequence[float], higher: bool, failures: str = "worst") -> np.ndarray:
    """``aligned_outcomes`` without the trials left out."""
    aligned = aligned_outcomes(values, higher, failures)
    return aligned[~np.isnan(aligned)]


def _distinct(values: np.ndarray) -> int:
    return len(np.unique(values))


def ranksum_pvalue(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided tie-corrected rank-sum p-value (the thesis's); NaN when either sample is empty or all
    values are equal (the normal approximation has no variance then)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) == 0 or len(y) == 0 or _distinct(np.concatenate([x, y])) == 1:
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
    EXACT_SPLITS splits. Identical scores differ in nothing: p = 1. NaN values are left out; infinite ones
    (failed trials, ``outcomes``) are ranked like any other."""
    x, y = _present(x), _present(y)
    if len(x) == 0 or len(y) == 0:
        return RankTest(float("nan"), "–", "no trials on one side")
    if _distinct(np.concatenate([x, y])) == 1:
        return RankTest(1.0, "–", "all scores identical")
    chosen = _chosen(len(x), len(y), method)
    if chosen == "asymptotic":
        return RankTest(ranksum_pvalue(x, y), "asymptotic")
    if len(np.unique(np.concatenate([x, y]))) == len(x) + len(y):
        return RankTest(float(mannwhitneyu(x, y, alternative="two-sided", method="exact").pvalue), "exact")
    return RankTest(*_tied_pvalue(x, y))


def rowwise_test(a: np.ndarray, b: np.ndarray, method: str = "auto") -> tuple[np.ndarray, np.ndarray]:
    """Simulated studies, one per row of ``a`` and ``b``: each one's U of a over b and its two-sided
    Mann-Whitney p (``method`` chosen for the rows' sizes as ``rank_test`` does; scipy's exact distribution
    takes no account of ties), p = 1 where a row's scores are all alike."""
    with np.errstate(invalid="ignore", divide="ignore"):
        result = mannwhitneyu(a, b, axis=1, alternative="two-sided", method=_chosen(a.shape[1], b.shape[1], method))
    return result.statistic, np.nan_to_num(result.pvalue, nan=1.0)


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


def _tail_count(cumulative: np.ndarray, tail: float) -> int:
    """The largest k with cumulative[k - 1] = P(X <= k - 1) at most ``tail`` (0 where even P(X <= 0) is more)."""
    return int(np.searchsorted(cumulative, tail * (1 + 1e-12), side="right"))


def _cut(n1: int, n2: int, confidence: float) -> int:
    """How many of the n1 n2 ordered pairwise differences the rank-based interval cuts from each end: the
    largest k with P(U <= k - 1) <= (1 - confidence) / 2."""
    tail = (1 - confidence) / 2
    if max(n1, n2) <= EXACT_SHIFT_TRIALS:
        return _tail_count(np.cumsum(_u_distribution(n1, n2)), tail)
    return max(0, int(np.floor(n1 * n2 / 2 - norm.ppf(1 - tail) * np.sqrt(n1 * n2 * (n1 + n2 + 1) / 12))))


def shift_interval(x: Sequence[float], y: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """The Hodges-Lehmann shift of x over y (the median of all differences x_i - y_j) and its rank-based
    ``confidence`` interval (Moses: the k-th smallest and largest difference, k from U's exact distribution),
    the shifts that the exact rank-sum test does not reject; NaN bounds where the trials are too few for any."""
    x, y = _present(x), _present(y)
    if len(x) == 0 or len(y) == 0:
        return float("nan"), float("nan"), float("nan")
    with np.errstate(invalid="ignore"):
        differences = x[:, None] - y[None, :]
    # Two failed trials (the same infinity) are alike: no difference.
    differences = np.sort(np.nan_to_num(differences, nan=0.0, posinf=np.inf, neginf=-np.inf).ravel())
    shift = float(np.median(differences))
    k = _cut(len(x), len(y), confidence)
    if k < 1:
        return shift, float("nan"), float("nan")
    return shift, float(differences[k - 1]), float(differences[len(differences) - k])


def _newcombe(value: float, n1: int, n2: int, confidence: float) -> tuple[float, float]:
    z, half = norm.ppf(0.5 + confidence / 2), (n1 + n2) / 2

    def excess(theta: float) -> float:
        shape = (1 - theta) / (2 - theta) + theta / (1 + theta)
        variance = theta * (1 - theta) / (n1 * n2) * (1 + (half - 1) * shape)
        return (value - theta) ** 2 - z**2 * variance

    # At A12 = 0 (or 1) theta = A12 is a root of no width: the interval's other end is the root beside it.
    low = 0.0 if value == 0 else brentq(excess, 0.0, value if value < 1 else 1 - 1e-12)
    high = 1.0 if value == 1 else brentq(excess, value if value > 0 else 1e-12, 1.0)
    return float(low), float(high)


def a12_interval(x: Sequence[float], y: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Newcombe's (2006) score interval of A12 (his method 5): the values theta with (A12 - theta)^2 at
    most z^2 times Hanley and McNeil's variance at theta, with both sample sizes set to their mean. It
    stays inside [0, 1] and has width at A12 = 0 or 1, where a bootstrap collapses. Its level is not exact:
    with both set-ups alike it leaves out 0.5 in 10% of 3-against-3 studies, about 5% (4-6%) from 4 trials on;
    so a table shows it only where it agrees with the rank test (``agrees_with_test``)."""
    x, y = _present(x), _present(y)
    if len(x) == 0 or len(y) == 0:
        return float("nan"), float("nan")
    return _newcombe(a12(x, y), len(x), len(y), confidence)


def agrees_with_test(low: float, high: float, p: float, confidence: float = 0.95) -> bool:
    """Whether an A12 interval says what the rank test says at the same level: it leaves out 0.5 exactly
    when p < 1 - confidence. Shown only then, an interval cannot call a difference that the test cannot
    (3 against 3 trials: the exact test's smallest p is 0.1)."""
    return bool(np.isfinite(low) and np.isfinite(p) and ((low > 0.5 or high < 0.5) == (p < 1 - confidence)))


def median_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """The distribution-free ``confidence`` interval of the median: the k-th smallest and largest value, k
    the largest with P(Binomial(n, 1/2) <= k - 1) <= (1 - confidence) / 2. It covers the median at least at
    its level whatever the scores' shape (collapses, ties, failed trials ranked worst), stays inside the
    metric's range, and needs 6 trials at 95%; NaN with fewer."""
    values = np.sort(_present(values))
    n = len(values)
    if n == 0:
        return float("nan"), float("nan")
    k = _tail_count(binom.cdf(np.arange(n + 1), n, 0.5), (1 - confidence) / 2)
    if k < 1:
        return float("nan"), float("nan")
    return float(values[k - 1]), float(values[n - k])


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
    if len(present) < 2 or _distinct(np.concatenate(present)) == 1:
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
