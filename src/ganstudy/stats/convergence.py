"""convergence: has each set-up's in-training score stopped improving?

Each trial's curve is its run's in-training score per iteration (pair modes: ``fid`` every score_period
iterations, the mean over classes for per-class runs; paired generators: ``l1`` on held-out pairs; shower
generators: ``showers``, the mean of the physics scores on held-out events; the grid: ``fid_best``, its
best cell every iteration). Every score is lower-is-better.

The check reads the last ``window`` of the iterations (a quarter by default) of every trial's own curve as
a trend and a level, never as single points, and puts the spread between trials into its intervals, so
that noise (which differs between CPU kinds, whose float results differ) can neither fake nor hide a
trend:

- trend: each trial's Theil-Sen slope of log score against iteration over the window (the median of all
  pairwise slopes, which outliers barely move); the set-up's slope is their mean. Its standard error is
  the larger of the trials' spread (their slopes' standard deviation over the square root of the trial
  count: the between-trial variation a single curve cannot show) and the within-trial error (the residual
  scale about each trial's line, as for a least-squares slope, widened by (1 + r) / (1 - r) for the
  residuals' lag-1 autocorrelation r > 0, pooled over the trials: neighbouring scores of one generator are
  not independent). The 95% interval takes Student's t on the residuals' degrees of freedom. Projected
  over the window's span it gives the relative change the window saw, ``exp(slope * span) - 1``.
- level: each trial's window median against its best level before the window (the lowest running median
  of as many consecutive points as the window holds), the median carried from mid-window to the window's
  end along the trend (each end of the level's interval along the same end of the slope's interval, a
  fall carrying nothing); the set-up's change is the mean over trials of the log ratio, with its interval
  from the same two error terms.

Verdicts, in this order:

- **no** (not converged): the window's change is a fall beyond ``tolerance`` and its interval lies below
  zero: more iterations would have given a better generator.
- **degraded**: the level at the window's end is worse than the best before by more than ``degradation``
  even at its interval's low end: training went on past its best.
- **yes**: the change's interval rules out a fall of more than ``tolerance`` and the level's interval rules
  out a rise of more than ``degradation``: a curve that may have degraded does not pass.
- **–** (not judged): the window holds fewer than ``MIN_POINTS`` scores, or its noise cannot tell a
  plateau from a fall beyond the tolerance (the interval reaches past both), or the level is neither
  within the limit nor beyond it by its interval. This is a statement about the measurement, not the
  training: more trials, scores more often or on more samples narrow the intervals.

No test can tell a 5-point window under 30% noise from one falling 10%: a check with only a pass and a
flag must either flag many plateaus or pass many unfinished runs. The third outcome is what keeps both
rates low (measured by ``ganstudy.stats.calibration`` and written in docs/guide.md).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import t as student_t
from scipy.stats import theilslopes

from ganstudy.core.atomic import atomic_path, read_json
from ganstudy.study.folder import of_setup
from ganstudy.study.outcomes import diverged
from ganstudy.train.progress import score_columns

WINDOW = 0.25
CONFIDENCE = 0.95
# Fewer points than this in a window leave no residual to estimate the noise from.
MIN_POINTS = 3
# Variance of a median over that of a mean, for normal scores (pi / 2).
MEDIAN_VARIANCE = np.pi / 2
# A lag-1 autocorrelation this high would make the widening factor explode on a short window's estimate.
MAX_AUTOCORRELATION = 0.9
# What window_trend gives besides the window's point count.
TREND_COLUMNS = [
    "judged",
    "window_from",
    "intercept",
    "slope",
    "slope_low",
    "slope_high",
    "autocorrelation",
    "projected_change",
    "projected_change_low",
    "projected_change_high",
    "level_before",
    "level_in_window",
    "level_change",
    "level_at_end",
    "level_change_at_end",
    "level_change_at_end_low",
    "level_change_at_end_high",
]
COLUMNS = [
    "setup",
    "trials",
    # Runs that diverged, left out of the curves (the rank tests count their inf scores worst).
    "diverged",
    "iterations",
    "score",
    "first",
    "points",
    *TREND_COLUMNS,
    "tolerance",
    "degradation",
    "converged",
]


def run_curve(losses: pd.DataFrame, columns: tuple[str, ...]) -> tuple[str, pd.Series] | None:
    """A run's in-training score per iteration and its column (the first of ``columns`` it logged); None
    when the run logged none."""
    column = next((c for c in columns if c in losses and losses[c].notna().any()), None)
    if column is None:
        return None
    return column, losses.dropna(subset=[column]).groupby("iteration")[column].mean()


def diverged_runs(loss_paths: list[str]) -> set[str]:
    """The runs among ``loss_paths`` that diverged, as each one's run.json (an output of the same job) says."""
    records = {path: Path(path).with_name("run.json") for path in loss_paths}
    return {path for path, record in records.items() if record.is_file() and diverged(read_json(record))}


def setup_curves(loss_paths: list[str], setups: list[str]) -> dict[str, tuple[str, pd.DataFrame]]:
    """Per set-up with a curve: its score column and a frame of iterations x trials. A run that diverged has
    no curve to judge: it is an outcome (its scores are inf), not a run that is still improving."""
    gone = diverged_runs(loss_paths)
    return _curves([path for path in loss_paths if path not in gone], setups)


def _curves(loss_paths: list[str], setups: list[str]) -> dict[str, tuple[str, pd.DataFrame]]:
    curves, columns = {}, score_columns()
    for setup in setups:
        runs = [run_curve(pd.read_csv(p), columns) for p in loss_paths if of_setup(p, setup)]
        runs = [r for r in runs if r is not None]
        if runs:
            curves[setup] = (runs[0][0], pd.concat([curve for _, curve in runs], axis=1).sort_index())
    return curves


def _log(scores: pd.Series) -> np.ndarray:
    # A score of exactly 0 cannot fall further; the floor keeps its logarithm finite.
    return np.log(np.maximum(scores.to_numpy(float), 1e-12))


def _trial_window(curve: pd.Series, start: float) -> dict[str, float] | None:
    """One trial's window: its Theil-Sen line of log score, the residuals about it, its median and its best
    level before; None with fewer than MIN_POINTS in the window or none before it."""
    curve = curve.dropna()
    inside, before = curve[curve.index > start], curve[curve.index <= start]
    if len(inside) < MIN_POINTS or len(before) < 1:
        return None
    x = inside.index.to_numpy(float)
    y = _log(inside)
    slope, intercept, _, _ = theilslopes(y, x)
    residuals = y - intercept - slope * x
    m = min(len(inside), len(before))
    best_before = _log(before)
    return {
        "x": x,
        "slope": slope,
        "intercept": intercept,
        "residuals": residuals,
        "points": len(inside),
        "m": m,
        "level_in_window": float(np.median(y)),
        "level_before": float(pd.Series(best_before).rolling(m).median().min()),
    }


def _autocorrelation(trials: list[dict]) -> float:
    """The residuals' lag-1 autocorrelation pooled over the trials, clipped to [0, MAX_AUTOCORRELATION]:
    a negative estimate of a short window is noise, and would narrow the interval. Residuals about a
    fitted line correlate less than the noise does, by about (1 + 4 r) / n (simulated: 1.3 / n for
    independent noise, 5 / n at r = 0.5); the estimate is moved up by that much."""
    lagged = sum(float(np.dot(t["residuals"][1:], t["residuals"][:-1])) for t in trials)
    squares = sum(float(np.dot(t["residuals"], t["residuals"])) for t in trials)
    if squares <= 0:
        return 0.0
    r = lagged / squares
    points = np.mean([t["points"] for t in trials])
    return float(np.clip(r + (1 + 4 * max(r, 0.0)) / points, 0.0, MAX_AUTOCORRELATION))


def _combined(values: np.ndarray, within_variances: np.ndarray) -> float:
    """Standard error of the mean over trials of ``values``: the larger of the trials' spread and the
    within-trial errors."""
    k = len(values)
    between = float(np.var(values, ddof=1)) / k if k > 1 else 0.0
    return float(np.sqrt(max(between, float(np.mean(within_variances)) / k)))


def window_trend(curves: pd.DataFrame | pd.Series, window: float = WINDOW) -> dict[str, float]:
    """Trend and level of the last ``window`` of a set-up's lower-is-better curves (iterations x trials, or
    one trial's series; see the module's doc). Trials with too few points in the window are left out
    (``judged`` counts the others); every value is NaN when none is left."""
    frame = curves.to_frame() if isinstance(curves, pd.Series) else curves
    start = (1 - window) * frame.index.max()
    points = int((frame.index > start).sum())
    result = dict.fromkeys(TREND_COLUMNS, float("nan")) | {"points": points, "judged": 0}
    trials = [t for t in (_trial_window(frame.iloc[:, i], start) for i in range(frame.shape[1])) if t is not None]
    if not trials:
        return result
    k = len(trials)
    r = _autocorrelation(trials)
    widening = (1 + r) / (1 - r)
    slopes = np.array([t["slope"] for t in trials])
    residual_variance, sxx, df = [], [], 0
    for t in trials:
        dof = t["points"] - 2
        residual_variance.append(float(np.dot(t["residuals"], t["residuals"])) / max(dof, 1) * widening)
        sxx.append(float(np.sum((t["x"] - t["x"].mean()) ** 2)))
        df += max(dof, 1)
    residual_variance, sxx = np.array(residual_variance), np.array(sxx)
    # Correlated residuals carry fewer independent values than points: Student t on the effective count.
    critical = float(student_t.ppf((1 + CONFIDENCE) / 2, max(df / widening, 1.0)))
    slope = float(slopes.mean())
    slope_error = _combined(slopes, residual_variance / sxx)
    low, high = slope - critical * slope_error, slope + critical * slope_error
    x0 = min(float(t["x"][0]) for t in trials)
    span = max(float(t["x"][-1]) for t in trials) - x0
    # The window's median sits mid-window: carried to its end along the trend, each end of the level's interval
    # along the same end of the slope's (a fall carries nothing: noise cannot lower the level below its median).
    carried_low, carried, carried_high = (max(s, 0.0) * span / 2 for s in (low, slope, high))
    changes = np.array([t["level_in_window"] - t["level_before"] for t in trials])
    level_error = _combined(
        changes, residual_variance * MEDIAN_VARIANCE * np.array([1 / t["points"] + 1 / t["m"] for t in trials])
    )
    change = float(changes.mean())
    level_before = float(np.mean([t["level_before"] for t in trials]))
    level_inside = float(np.mean([t["level_in_window"] for t in trials]))
    # Scores are on the log scale inside; the table's levels are geometric means over the trials.
    return result | {
        "judged": k,
        "window_from": x0,
        "intercept": float(np.mean([t["intercept"] for t in trials])),
        "slope": slope,
        "slope_low": low,
        "slope_high": high,
        "autocorrelation": r,
        "projected_change": float(np.expm1(slope * span)),
        "projected_change_low": float(np.expm1(low * span)),
        "projected_change_high": float(np.expm1(high * span)),
        "level_before": float(np.exp(level_before)),
        "level_in_window": float(np.exp(level_inside)),
        "level_change": float(np.expm1(change)),
        "level_at_end": float(np.exp(level_inside + carried)),
        "level_change_at_end": float(np.expm1(change + carried)),
        "level_change_at_end_low": float(np.expm1(change + carried_low - critical * level_error)),
        "level_change_at_end_high": float(np.expm1(change + carried_high + critical * level_error)),
    }


def verdict(trend: dict[str, float], tolerance: float, degradation: float) -> str:
    """ "no" (still improving), "degraded", "yes", or "–" when the window is too short or too noisy to
    judge (see the module's doc)."""
    if np.isnan(trend["slope"]):
        return "–"
    if -trend["projected_change"] > tolerance and trend["projected_change_high"] < 0:
        return "no"
    if trend["level_change_at_end_low"] > degradation:
        return "degraded"
    if -trend["projected_change_low"] <= tolerance and trend["level_change_at_end_high"] <= degradation:
        return "yes"
    return "–"


def convergence_table(
    loss_paths: list[str], setups: list[str], tolerance: float, degradation: float, window: float = WINDOW
) -> pd.DataFrame:
    rows, gone_runs = [], diverged_runs(loss_paths)
    curves = _curves([path for path in loss_paths if path not in gone_runs], setups)
    for setup in setups:
        gone = sum(of_setup(path, setup) for path in gone_runs)
        if setup not in curves:
            rows.append(
                {
                    "setup": setup,
                    "trials": 0,
                    "diverged": gone,
                    "judged": 0,
                    "tolerance": tolerance,
                    "degradation": degradation,
                    "converged": "–",
                }
            )
            continue
        column, frame = curves[setup]
        trend = window_trend(frame, window)
        rows.append(
            {
                "setup": setup,
                "trials": frame.shape[1],
                "diverged": gone,
                "iterations": int(frame.index.max()),
                "score": column,
                "first": float(frame.iloc[0].mean()),
                **trend,
                "tolerance": tolerance,
                "degradation": degradation,
                "converged": verdict(trend, tolerance, degradation),
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def write_convergence(
    loss_paths: list[str],
    setups: list[str],
    tolerance: float,
    degradation: float,
    out_path: str | os.PathLike[str],
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
    score = _name(row.score)
    if row.converged == "–" and not row.trials and row.diverged:
        return f"not judged: all {row.diverged:.0f} of its runs diverged (losses not finite), so none has a curve"
    if row.converged == "–" and not row.trials:
        # Never silent: a page that says nothing of an unjudged set-up reads as if it had converged.
        return "not judged: no run of it logged an in-training score"
    if row.converged == "–" and not row.judged:
        return (
            f"not judged: the last {WINDOW:.0%} of its in-training {score} curve holds {row.points:.0f} point(s), the "
            f"check needs {MIN_POINTS} and some before them (train longer or score more often)"
        )
    since = f"from iteration {row.window_from:.0f} on"
    change = f"95% interval {row.projected_change_low:+.0%} to {row.projected_change_high:+.0%}"
    level = f"95% interval {row.level_change_at_end_low:+.0%} to {row.level_change_at_end_high:+.0%}"
    if row.converged == "no":
        return (
            f"not converged: in-training {score} still falling {since}, {row.projected_change:+.0%} by the end "
            f"({change})"
        )
    if row.converged == "degraded" and row.slope_low <= 0:
        return (
            f"degraded: median in-training {score} {since} {row.level_change:.0%} worse than its best level before "
            f"({level} at the end; trained past its best)"
        )
    if row.converged == "degraded":
        return (
            f"degraded: in-training {score} rising {since}, {row.level_change_at_end:.0%} worse than its best level "
            f"before by the end ({level}; median {row.level_change:.0%}; trained past its best)"
        )
    if row.converged == "yes":
        return None
    advice = (
        f"{row.judged:.0f} trial(s), {row.points:.0f} points in the window: more trials, or scores more often or on "
        f"more samples, narrow it"
    )
    if -row.projected_change_low > row.tolerance:
        return (
            f"not judged: in-training {score} {since} {row.projected_change:+.0%} by the end, and its {change} cannot "
            f"rule out a fall of more than {row.tolerance:.0%} ({advice})"
        )
    return (
        f"not judged: in-training {score} {since} {row.level_change_at_end:+.0%} against its best level before by the "
        f"end, and its {level} neither confirms nor rules out more than the {row.degradation:.0%} allowed ({advice})"
    )


def convergence_notes(table: pd.DataFrame) -> dict[str, str]:
    """The summary tables' note for each set-up whose curve was still improving, had degraded or could not
    be judged (``table``: convergence.csv as read)."""
    if "diverged" not in table:
        # A convergence.csv of ganstudy before 2026-12 did not count diverged runs: it had none (they failed).
        table = table.assign(diverged=0)
    notes = {row.setup: _note(row) for row in table.itertuples()}
    return {setup: note for setup, note in notes.items() if note is not None}
