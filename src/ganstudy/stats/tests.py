"""Significance tests and effect sizes between set-ups.

The thesis's "tie-corrected rank-sum" p-values (seed 002, tables 4.5 and 4.7) are those of the
two-sided Mann-Whitney U test with the normal approximation, tie correction and continuity
correction; scipy's ``ranksums`` has no tie correction and gives different values.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import kruskal, mannwhitneyu, t, ttest_ind_from_stats


def ranksum_pvalue(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided tie-corrected rank-sum p-value; NaN when either sample is empty or all values are equal
    (the normal approximation has no variance then)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) == 0 or len(y) == 0 or np.ptp(np.concatenate([x, y])) == 0:
        return float("nan")
    return float(mannwhitneyu(x, y, alternative="two-sided", method="asymptotic", use_continuity=True).pvalue)


def mean_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """The ``confidence`` t-interval of the mean of ``values`` over trials; NaN with fewer than two."""
    values = np.asarray(values, float)
    if len(values) < 2:
        return float("nan"), float("nan")
    half = t.ppf(0.5 + confidence / 2, len(values) - 1) * values.std(ddof=1) / np.sqrt(len(values))
    return float(values.mean() - half), float(values.mean() + half)


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


def welch_pvalue(mean_a: float, sd_a: float | None, n_a: int | None, mean_b: float, sd_b: float | None, n_b: int | None) -> float:
    """Two-sided Welch t-test from summary statistics (a paper publishes only mean, sd and trials); NaN
    when a side lacks its sd or has fewer than 2 trials, or both sds are 0."""
    known = all(v is not None and np.isfinite(v) for v in (mean_a, sd_a, n_a, mean_b, sd_b, n_b))
    if not known or n_a < 2 or n_b < 2 or (sd_a == 0 and sd_b == 0):
        return float("nan")
    return float(ttest_ind_from_stats(mean_a, sd_a, n_a, mean_b, sd_b, n_b, equal_var=False).pvalue)
