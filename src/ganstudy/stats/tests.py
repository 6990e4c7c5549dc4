"""Pairwise significance tests between set-ups.

The thesis's "tie-corrected rank-sum" p-values (seed 002, tables 4.5 and 4.7) are those of the
two-sided Mann-Whitney U test with the normal approximation, tie correction and continuity
correction; scipy's ``ranksums`` has no tie correction and gives different values.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.stats import mannwhitneyu


def ranksum_pvalue(x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided tie-corrected rank-sum p-value; NaN when either sample is empty."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) == 0 or len(y) == 0:
        return float("nan")
    return float(mannwhitneyu(x, y, alternative="two-sided", method="asymptotic", use_continuity=True).pvalue)
