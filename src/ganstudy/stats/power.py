"""How many trials a comparison needs, from the scores a study measured: the power of the study's own rank
test, simulated, with the pilot's own uncertainty.

Rank tests have no closed-form power, and a small study measures its effect poorly: five trials of a true
one-sd shift can look like no shift or like a large one. So the plan is not one number. Each of
PILOT_COPIES bootstrap copies of the measured trials (each set-up's outcomes resampled with replacement)
stands for a world the pilot could have come from; in it, SIMULATIONS studies of n trials per set-up are
drawn from each set-up's own outcomes (their collapses, ties and failed trials kept, not smoothed into a
shift model), and a study decides when the two-sided test's p, times the study's number of pairs (Holm's
first step: conservative for the pairs after it), is below alpha with the effect the copy's way. The
trials that copy needs are the fewest on GRID whose share of deciding studies reaches TARGET_POWER. The
plan is the median and the 80% range (10th to 90th percentile) of those over the copies, "more than
MOST_TRIALS" where a copy's power stays below the target. Simulated pilots of known distributions (normal
shift, lognormal, collapse mixtures, ties) check that the true trials fall inside the range in at least 80%
of pilots (tests/test_power_plans.py); the power of one world is checked against statsmodels' closed form
of the t-test on normal scores (tests/test_rank_tests.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ganstudy.stats.tests import _present, a12, rowwise_test

SIMULATIONS = 250
PILOT_COPIES = 60
TARGET_POWER = 0.8
MOST_TRIALS = 100
# The share of the copies the reported range holds: from its 10th to its 90th percentile.
RANGE = 0.8
# Trials per set-up the search tries: every count up to 16, then steps a plan would be rounded to anyway.
GRID = (*range(2, 17), 20, 24, 28, 32, 40, 48, 56, 64, 80, MOST_TRIALS)

# decide(draws_a, draws_b) -> one bool per draw (row): does that simulated study decide, the measured way?
Decide = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class TrialsNeeded:
    """Trials per set-up for power TARGET_POWER: the median over the pilot's bootstrap copies and its 80%
    range; inf where more than MOST_TRIALS, NaN where nothing was measured to plan from."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, row: object) -> TrialsNeeded:
        """From a pairs table's row: its trials_for_power, trials_for_power_low and trials_for_power_high."""
        return cls(float(row.trials_for_power), float(row.trials_for_power_low), float(row.trials_for_power_high))

    def text(self) -> str:
        """E.g. "16 (80% range 8 to more than 100)"."""
        if np.isnan(self.median):
            return "–"
        return f"{_count(self.median)} ({RANGE:.0%} range {_count(self.low)} to {_count(self.high)})"


def _count(value: float) -> str:
    return f"more than {MOST_TRIALS}" if np.isinf(value) else f"{value:.0f}"


NOT_PLANNED = TrialsNeeded(float("nan"), float("nan"), float("nan"))


def rank_decision(direction: float, test: str, alpha: float, pairs: int) -> Decide:
    """A draw decides when its two-sided Mann-Whitney p (the study's test: exact or asymptotic as ``test``
    chooses for the draw's size) times ``pairs`` is below ``alpha`` and its U points the way ``direction``
    does (positive: a scores higher)."""

    def decide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        u, p = rowwise_test(a, b, test)
        return (p * pairs < alpha) & (np.sign(u - a.shape[1] * b.shape[1] / 2) == np.sign(direction))

    return decide


def simulated_power(
    x: Sequence[float], y: Sequence[float], trials: int, decide: Decide, simulations: int = SIMULATIONS, seed: int = 0
) -> float:
    """The share of ``simulations`` studies of ``trials`` trials per set-up, each trial drawn from its set-up's
    own outcomes (with replacement), that decide."""
    rng = np.random.default_rng(seed)
    x, y = np.asarray(x, float), np.asarray(y, float)
    a = rng.choice(x, size=(simulations, trials))
    b = rng.choice(y, size=(simulations, trials))
    return float(np.mean(decide(a, b)))


def _needed(x: np.ndarray, y: np.ndarray, decide: Decide, rng: np.random.Generator, simulations: int) -> float:
    """The fewest GRID trials whose simulated power from x and y reaches the target; inf where none does."""
    # Common random numbers over the grid: one uniform draw per trial slot, read at each trial count.
    slots = rng.random((2, simulations, MOST_TRIALS))
    picks = [(slots[i] * len(v)).astype(int) for i, v in enumerate((x, y))]

    def power(n: int) -> float:
        return float(np.mean(decide(x[picks[0][:, :n]], y[picks[1][:, :n]])))

    if power(MOST_TRIALS) < TARGET_POWER:
        return float("inf")
    # Power grows with the trials (up to the simulation's noise): bisect the grid.
    low, high = -1, len(GRID) - 1
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if power(GRID[middle]) >= TARGET_POWER else (middle, high)
    return float(GRID[high])


def trials_for_power(
    x: Sequence[float],
    y: Sequence[float],
    test: str,
    alpha: float,
    pairs: int,
    copies: int = PILOT_COPIES,
    simulations: int = SIMULATIONS,
) -> TrialsNeeded:
    """The trials per set-up for power TARGET_POWER of the study's test over the pilot's bootstrap copies
    (module doc); NOT_PLANNED where a set-up has fewer than 2 outcomes or all of them are alike. Failed
    trials enter as the infinite outcomes the tests compare (tests.outcomes). Seeded: the same scores give
    the same plan."""
    x, y = _present(x), _present(y)
    if not _plannable(x, y):
        return NOT_PLANNED
    rng = np.random.default_rng(0)
    needed = []
    for copy_x, copy_y, effect in _copies(x, y, rng, copies):
        if effect == 0:
            needed.append(float("inf"))
            continue
        needed.append(_needed(copy_x, copy_y, rank_decision(effect, test, alpha, pairs), rng, simulations))
    return TrialsNeeded(*_spread(needed))


def _plannable(x: np.ndarray, y: np.ndarray) -> bool:
    return len(x) >= 2 and len(y) >= 2 and len(np.unique(np.concatenate([x, y]))) > 1


def _copies(x: np.ndarray, y: np.ndarray, rng: np.random.Generator, copies: int):
    """The pilot's bootstrap copies: each set-up's outcomes resampled, and the copy's A12 - 0.5."""
    for _ in range(copies):
        copy_x, copy_y = rng.choice(x, len(x)), rng.choice(y, len(y))
        yield copy_x, copy_y, a12(copy_x, copy_y) - 0.5


def _spread(values: Sequence[float]) -> tuple[float, float, float]:
    """The median and the RANGE range (its ends) of values over the copies."""
    low, median, high = np.quantile(values, [(1 - RANGE) / 2, 0.5, (1 + RANGE) / 2], method="inverted_cdf")
    return float(median), float(low), float(high)


# What a bigger budget buys: the power at the study's trials per set-up times each of these.
BUDGETS = (1, 2, 4)


def power_columns(times: int) -> tuple[str, str, str]:
    """The pairs table's columns of the power at ``times`` the budget: its median and its range's ends."""
    return f"power_{times}x", f"power_{times}x_low", f"power_{times}x_high"


def power_at_budgets(
    x: Sequence[float],
    y: Sequence[float],
    test: str,
    alpha: float,
    pairs: int,
    trials: int,
    copies: int = PILOT_COPIES,
    simulations: int = SIMULATIONS,
) -> list[tuple[float, float, float]]:
    """The power of the study's test (at ``alpha`` times ``pairs``, as ``trials_for_power``) at ``trials`` per
    set-up times each of BUDGETS: the median and the 80% range over the pilot's bootstrap copies (a copy with
    no effect has power 0: it cannot decide either way); NaN where nothing can be planned."""
    x, y = _present(x), _present(y)
    if not _plannable(x, y):
        return [(float("nan"),) * 3 for _ in BUDGETS]
    rng = np.random.default_rng(0)
    powers = []
    for copy_x, copy_y, effect in _copies(x, y, rng, copies):
        decide = rank_decision(effect, test, alpha, pairs)
        powers.append(
            [
                simulated_power(copy_x, copy_y, trials * times, decide, simulations, seed) if effect else 0.0
                for seed, times in enumerate(BUDGETS)
            ]
        )
    return [_spread(column) for column in np.array(powers).T]
