"""convergence: has each set-up's in-training score stopped improving?

The curve of a set-up is the mean over its trials of each run's in-training score per iteration (pair
modes: ``fid`` every score_period iterations, the mean over classes for per-class runs; paired
generators: ``l1`` on held-out pairs; shower generators: ``showers``, the mean of the physics scores on
held-out events; the grid: ``fid_best``, its best cell every iteration). Every score is lower-is-better.

The verdict reads the curve's last ``window`` of iterations (a quarter by default) as a trend and a level,
never as single points, so that noise (which differs between CPU kinds, whose float results differ)
can neither fake nor hide a trend:

- trend: the Theil-Sen slope of log score against iteration over the window's points (the median of all
  pairwise slopes, which outliers barely move), with its 95% confidence interval and its intercept
  (``scipy.stats.theilslopes``). Projected over the window's span it gives the relative change the window saw,
  ``exp(slope * span) - 1``. The set-up has **not converged** when that projected improvement exceeds
  ``tolerance`` and the interval excludes zero (a fall both material and beyond the noise): more
  iterations would have given a better generator, and its scores describe an unfinished run.
- level: the window's median against the best level before it, the lowest running median of as many
  consecutive points as the window has. The median sits mid-window, so for a curve that is still rising
  it is carried to the window's end at the slowest rise the slope's interval allows (not at all when the
  interval includes a fall, so a noisy flat window stays where it is). A level at the window's end worse
  than the best before by more than ``degradation`` has **degraded**: training went on past its best (a
  discriminator that overfits a small data set, too high a learning rate), and its scores describe that,
  not the method.
- inconclusive: the projected improvement exceeds ``tolerance`` but the interval includes no change (too
  few or too noisy points to confirm the fall), while the window's median lies more than ``tolerance``
  below the best level before it: the curve still reaches new lows, and its trend projects a material
  fall that the noise neither confirms nor rules out. The level is the second witness because a flat
  window's median sits at or above the lowest running median before it, so a noisy plateau rarely gives
  both at once (of 200 plateaus with 25% noise and outliers, 1 scored every iteration and 10 scored
  every 5th; an interval that merely reaches beyond the tolerance, on one side or both, would flag
  almost all of them). Its scores may describe an unfinished run: train longer or score more often.

The verdicts are checked in that order: not converged, degraded, inconclusive, else converged (``yes``).
Degraded and inconclusive exclude each other (a level above the best before against one below it); the
order only says which wins should that ever change.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
from scipy.stats import theilslopes

from ganstudy.atomic import atomic_path

# The in-training score columns of losses.csv, each lower-is-better: the pair trainer's FID, the grid's
# best cell's, and a paired generator's L1 on held-out pairs.
SCORE_COLUMNS = ("fid", "fid_best", "l1", "showers")
WINDOW = 0.25
CONFIDENCE = 0.95
# Fewer points than this in a window give no usable interval (two points make one slope).
MIN_POINTS = 3
# What window_trend gives besides the window's point count.
TREND_COLUMNS = ["window_from", "intercept", "slope", "slope_low", "slope_high", "projected_change", "projected_change_low",
                 "projected_change_high", "level_before", "level_in_window", "level_change", "level_at_end",
                 "level_change_at_end"]
COLUMNS = ["setup", "trials", "iterations", "score", "first", "points", *TREND_COLUMNS, "converged"]


def run_curve(losses: pd.DataFrame) -> tuple[str, pd.Series] | None:
    """A run's in-training FID per iteration and its column; None when the run logged none."""
    column = next((c for c in SCORE_COLUMNS if c in losses and losses[c].notna().any()), None)
    if column is None:
        return None
    return column, losses.dropna(subset=[column]).groupby("iteration")[column].mean()


def setup_curves(loss_paths: list[str], setups: list[str]) -> dict[str, tuple[str, pd.DataFrame]]:
    """Per set-up with a curve: its score column and a frame of iterations x trials."""
    curves = {}
    for setup in setups:
        runs = [run_curve(pd.read_csv(p)) for p in loss_paths if f"/runs/{setup}/" in p]
        runs = [r for r in runs if r is not None]
        if runs:
            curves[setup] = (runs[0][0], pd.concat([curve for _, curve in runs], axis=1).sort_index())
    return curves


def window_trend(curve: pd.Series, window: float = WINDOW) -> dict[str, float]:
    """Trend and level of the last ``window`` of a lower-is-better curve's iterations (see the module's
    doc); every value is NaN when the window or the part before it has too few points."""
    curve = curve.dropna()
    start = (1 - window) * curve.index.max()
    inside, before = curve[curve.index > start], curve[curve.index <= start]
    points = len(inside)
    result = dict.fromkeys(TREND_COLUMNS, float("nan")) | {"points": points}
    if points < MIN_POINTS or len(before) < 1:
        return result
    x = inside.index.to_numpy(float)
    # A score of exactly 0 cannot fall further; the floor keeps its logarithm finite.
    slope, intercept, low, high = theilslopes(np.log(np.maximum(inside.to_numpy(float), 1e-12)), x, alpha=CONFIDENCE)
    span = x[-1] - x[0]
    level_before = float(before.rolling(min(points, len(before))).median().min())
    level_inside = float(inside.median())
    level_at_end = level_inside * float(np.exp(max(low, 0.0) * span / 2))
    return result | {
        "window_from": float(x[0]), "intercept": intercept, "slope": slope, "slope_low": low, "slope_high": high,
        "projected_change": float(np.expm1(slope * span)), "projected_change_low": float(np.expm1(low * span)),
        "projected_change_high": float(np.expm1(high * span)),
        "level_before": level_before, "level_in_window": level_inside, "level_change": level_inside / level_before - 1,
        "level_at_end": level_at_end, "level_change_at_end": level_at_end / level_before - 1,
    }


def verdict(trend: dict[str, float], tolerance: float, degradation: float) -> str:
    """"no" (still improving), "degraded", "inconclusive", "yes", or "–" when the curve is too short to
    judge (see the module's doc)."""
    if np.isnan(trend["slope"]):
        return "–"
    falling = -trend["projected_change"] > tolerance
    if falling and trend["slope_high"] < 0:
        return "no"
    if trend["level_change_at_end"] > degradation:
        return "degraded"
    # The slope alone cannot tell a short falling curve from a noisy plateau; a median below every
    # level before it is a second witness that a plateau rarely gives.
    if falling and trend["level_change"] < -tolerance:
        return "inconclusive"
    return "yes"


def convergence_table(loss_paths: list[str], setups: list[str], tolerance: float, degradation: float,
                      window: float = WINDOW) -> pd.DataFrame:
    rows = []
    curves = setup_curves(loss_paths, setups)
    for setup in setups:
        if setup not in curves:
            rows.append({"setup": setup, "trials": 0, "converged": "–"})
            continue
        column, frame = curves[setup]
        mean = frame.mean(axis=1)
        trend = window_trend(mean, window)
        rows.append({"setup": setup, "trials": frame.shape[1], "iterations": int(mean.index.max()), "score": column,
                     "first": float(mean.iloc[0]), **trend, "converged": verdict(trend, tolerance, degradation)})
    return pd.DataFrame(rows, columns=COLUMNS)


def write_convergence(
    loss_paths: list[str], setups: list[str], tolerance: float, degradation: float, out_path: str | os.PathLike[str],
    window: float = WINDOW,
) -> pd.DataFrame:
    table = convergence_table(loss_paths, setups, tolerance, degradation, window)
    with atomic_path(out_path) as tmp:
        table.to_csv(tmp, index=False)
    return table


def _name(column: str) -> str:
    return {"l1": "L1", "showers": "shower score"}.get(column, "FID")


def _note(row) -> str | None:
    """The summary tables' note for one row of convergence.csv; None when it had converged."""
    if row.converged == "–":
        # Never silent: a page that says nothing of an unjudged set-up reads as if it had converged.
        if not row.trials:
            return "not judged: no run of it logged an in-training score"
        return (f"not judged: the last {WINDOW:.0%} of its in-training {_name(row.score)} curve holds {row.points:.0f} "
                f"point(s), the check needs {MIN_POINTS} and some before them (train longer or score more often)")
    score, since = _name(row.score), f"from iteration {row.window_from:.0f} on"
    interval = f"95% interval {-row.projected_change_high:.0%} to {-row.projected_change_low:.0%}"
    if row.converged == "no":
        return f"not converged: in-training {score} still falling {since}, {-row.projected_change:.0%} better by the end ({interval})"
    if row.converged == "inconclusive":
        return (f"inconclusive: in-training {score} {since} {-row.projected_change:.0%} better by the end and its median "
                f"{-row.level_change:.0%} below its best level before, but the {interval} includes no change "
                f"(train longer or score more often)")
    if row.converged == "degraded" and row.slope_low <= 0:
        return (f"degraded: median in-training {score} {since} {row.level_change:.0%} worse than its best level before "
                f"(trained past its best)")
    if row.converged == "degraded":
        return (f"degraded: in-training {score} rising {since}, at least {row.level_change_at_end:.0%} worse than its best "
                f"level before by the end (median {row.level_change:.0%}; trained past its best)")
    return None


def convergence_notes(table: pd.DataFrame) -> dict[str, str]:
    """The summary tables' note for each set-up whose curve was still improving, inconclusive, had degraded or
    could not be judged (``table``: convergence.csv as read)."""
    notes = {row.setup: _note(row) for row in table.itertuples()}
    return {setup: note for setup, note in notes.items() if note is not None}
