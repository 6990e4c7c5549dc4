"""aligned_ranks: the interaction of two swept keys by the aligned rank transform (Wobbrock, Findlater,
Gergle and Higgins, "The Aligned Rank Transform for Nonparametric Factorial Analyses Using Only ANOVA
Procedures", CHI 2011).

GAN scores are skewed and carry outliers (a collapsed trial), so an F-test on the scores is unsafe, and an
F-test on plain ranks tests the interaction of the ranks, which the main effects shape (ranking is not
additive). The aligned rank transform takes every effect but the one tested out before ranking:

1. each score's residual from its cell (a cell is one set-up of the sweep, one combination of every
   swept key's values),
2. plus the estimated interaction of the two keys at its cell: the mean of the cells at the two values,
   minus each value's mean, plus the grand mean (all on cell means, so that cells with more trials weigh
   no more, as in the main effects),
3. ranked (midranks for ties), then
4. a full-factorial ANOVA of the ranks on every swept key, whose type III F-test for the two keys'
   interaction term (sum-to-zero coding; the model's other terms absorb whatever alignment left) is the
   test.

Least squares by numpy; tests/test_sweeps.py checks the F and p against statsmodels' type III ANOVA of the
same aligned ranks, and the alignment against a hand computation.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd
from scipy.stats import f as f_distribution
from scipy.stats import rankdata

METHOD = "aligned rank transform (Wobbrock et al. 2011), type III F on the ranks"


def aligned_ranks(runs: pd.DataFrame, first: str, second: str) -> np.ndarray:
    """The runs' ranks aligned for the ``first`` x ``second`` interaction (``runs``: one row per score with
    its ``setup``, ``value`` and each key's value label)."""
    cell = runs.groupby("setup")["value"].transform("mean")
    cells = runs.groupby("setup").agg(value=("value", "mean"), a=(first, "first"), b=(second, "first"))
    both = cells.groupby(["a", "b"])["value"].mean()
    at_a, at_b, grand = both.groupby(level="a").mean(), both.groupby(level="b").mean(), both.mean()
    pairs = list(zip(runs[first], runs[second]))
    effect = np.array([both[pair] - at_a[pair[0]] - at_b[pair[1]] + grand for pair in pairs])
    return rankdata(runs.value.to_numpy(float) - cell.to_numpy(float) + effect)


def _coded(labels: pd.Series) -> np.ndarray:
    """Sum-to-zero (effect) coding of one factor: one column per value but the last, which is -1 in all."""
    values = list(dict.fromkeys(labels))
    columns = np.zeros((len(labels), max(len(values) - 1, 0)))
    for i, label in enumerate(labels):
        position = values.index(label)
        columns[i] = -1.0 if position == len(values) - 1 else np.eye(len(values) - 1)[position]
    return columns


def _design(runs: pd.DataFrame, keys: list[str], left_out: frozenset[str] | None) -> np.ndarray:
    """The full-factorial model matrix (intercept, every term's products of coded columns), without the
    term ``left_out``."""
    coded = {key: _coded(runs[key]) for key in keys}
    blocks = [np.ones((len(runs), 1))]
    for order in range(1, len(keys) + 1):
        for term in combinations(keys, order):
            if frozenset(term) == left_out:
                continue
            block = np.ones((len(runs), 1))
            for key in term:
                block = (block[:, :, None] * coded[key][:, None, :]).reshape(len(runs), -1)
            blocks.append(block)
    return np.hstack(blocks)


def _fit(design: np.ndarray, y: np.ndarray) -> tuple[float, int]:
    """Residual sum of squares and the model's rank."""
    coefficients, _, rank, _ = np.linalg.lstsq(design, y, rcond=None)
    residuals = y - design @ coefficients
    return float(residuals @ residuals), int(rank)


def interaction_test(runs: pd.DataFrame, keys: list[str], first: str, second: str) -> dict[str, float | str]:
    """The aligned-rank-transform test of the ``first`` x ``second`` interaction: F, its degrees of freedom
    and p; NaN with a note where the runs cannot estimate it (a pair of values with no cell, or no cell
    with two runs)."""
    empty = {"F": np.nan, "df": np.nan, "df_resid": np.nan, "p_value": np.nan}
    crossed = runs.groupby([first, second]).size()
    missing = len(set(runs[first])) * len(set(runs[second])) - len(crossed)
    if missing:
        return empty | {"note": f"{missing} pair(s) of values have no set-up with a finite score: no interaction test"}
    y = aligned_ranks(runs, first, second)
    full, full_rank = _fit(_design(runs, keys, None), y)
    reduced, reduced_rank = _fit(_design(runs, keys, frozenset((first, second))), y)
    df, df_resid = full_rank - reduced_rank, len(runs) - full_rank
    if df_resid <= 0 or df <= 0 or full <= 0:
        return empty | {"note": "no set-up has two finite trials: no within-set-up variance to test against"}
    statistic = (reduced - full) / df / (full / df_resid)
    return {
        "F": statistic,
        "df": df,
        "df_resid": df_resid,
        "p_value": float(f_distribution.sf(statistic, df, df_resid)),
        "note": "",
    }
