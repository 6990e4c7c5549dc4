"""How many trials a comparison needs, from the scores a study measured: the power of the study's own rank
test, simulated.

Rank tests have no closed-form power. For a comparison of set-ups a and b the simulation keeps what the
trials measured, the Hodges-Lehmann shift between them and the spread of each set-up around its median,
and draws new studies of n trials per set-up from it: each trial a residual resampled from both set-ups'
pooled residuals, smoothed by a normal kernel (Silverman's bandwidth, so that draws do not tie and the
exact test applies at any n), plus the shift for a's trials. A draw decides when the two-sided test's p,
times the study's number of pairs (Holm's first step: conservative for the pairs after it), is below
alpha and the draw's effect points the way the measured one does. The power is the share of deciding
draws; ``trials_for_power`` the fewest trials per set-up that reach the target. Checked on normal scores
against statsmodels' closed-form power of the t-test (tests/test_rank_tests.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy.stats import mannwhitneyu

from ganstudy.stats.tests import _chosen, _finite, shift_interval

SIMULATIONS = 1000
TARGET_POWER = 0.8
MOST_TRIALS = 100

# decide(draws_a, draws_b) -> one bool per draw (row): does that simulated study decide, the measured way?
Decide = Callable[[np.ndarray, np.ndarray], np.ndarray]


def shift_model(x: Sequence[float], y: Sequence[float]) -> tuple[float, np.ndarray, float]:
    """The measured comparison as a model to draw from: the shift of x over y, the pooled residuals around
    each set-up's median, and the kernel's bandwidth."""
    x, y = _finite(x), _finite(y)
    residuals = np.concatenate([x - np.median(x), y - np.median(y)])
    spread = (
        min(residuals.std(ddof=1), np.subtract(*np.percentile(residuals, [75, 25])) / 1.34)
        if len(residuals) > 1
        else 0.0
    )
    if spread <= 0:
        spread = residuals.std(ddof=1) if len(residuals) > 1 else 0.0
    return shift_interval(x, y)[0], residuals, 0.9 * spread * len(residuals) ** -0.2


def draws(
    x: Sequence[float], y: Sequence[float], trials: int, simulations: int = SIMULATIONS, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``simulations`` studies of ``trials`` trials per set-up drawn from the measured comparison, as
    (draws of a, draws of b), one study per row; seeded, so the same scores give the same plan."""
    shift, residuals, bandwidth = shift_model(x, y)
    rng = np.random.default_rng(seed)

    def side(offset: float) -> np.ndarray:
        picked = rng.choice(residuals, size=(simulations, trials))
        return picked + rng.normal(0.0, bandwidth, size=picked.shape) + offset

    return side(shift), side(0.0)


def rank_decision(direction: float, test: str, alpha: float, pairs: int) -> Decide:
    """A draw decides when its two-sided Mann-Whitney p (the study's test: exact or asymptotic as
    ``test`` chooses for the draw's size) times ``pairs`` is below ``alpha``, its shift of the same sign
    as ``direction`` (the measured shift a - b)."""

    def decide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        method = _chosen(a.shape[1], b.shape[1], test)
        p = mannwhitneyu(a, b, axis=1, alternative="two-sided", method=method).pvalue
        same_way = np.sign(np.median(a, axis=1) - np.median(b, axis=1)) == np.sign(direction)
        return (p * pairs < alpha) & same_way

    return decide


def simulated_power(
    x: Sequence[float], y: Sequence[float], trials: int, decide: Decide, simulations: int = SIMULATIONS, seed: int = 0
) -> float:
    """The share of studies of ``trials`` trials per set-up, drawn from the measured comparison, that decide."""
    a, b = draws(x, y, trials, simulations, seed)
    return float(np.mean(decide(a, b)))


def trials_for_power(
    x: Sequence[float],
    y: Sequence[float],
    test: str,
    alpha: float,
    pairs: int,
    target: float = TARGET_POWER,
    simulations: int = SIMULATIONS,
) -> int | None:
    """The fewest trials per set-up (2 .. MOST_TRIALS) whose simulated power reaches ``target``; None when the
    measured shift is zero or MOST_TRIALS do not reach it."""
    x, y = _finite(x), _finite(y)
    if len(x) < 2 or len(y) < 2:
        return None
    shift = shift_model(x, y)[0]
    if shift == 0:
        return None
    decide = rank_decision(shift, test, alpha, pairs)
    # Most measured effects of a small study are noise: one look at the most trials settles those.
    if simulated_power(x, y, MOST_TRIALS, decide, simulations) < target:
        return None
    low, high = 1, 2
    while high < MOST_TRIALS and simulated_power(x, y, high, decide, simulations) < target:
        low, high = high, min(2 * high, MOST_TRIALS)
    # Power grows with the trials (up to the simulation's noise): bisect between the last miss and the first hit.
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if simulated_power(x, y, middle, decide, simulations) >= target else (middle, high)
    return high
