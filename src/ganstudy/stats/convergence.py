"""convergence: has each set-up's in-training score stopped improving?

The curve of a set-up is the mean over its trials of each run's in-training score per iteration (pair
modes: ``fid`` every score_period iterations, the mean over classes for per-class runs; paired
generators: ``l1`` on held-out pairs; shower generators: ``showers``, the mean of the physics scores on
held-out events; the grid: ``fid_best``, its best cell every iteration). It is called converged when the
best value over its last 10% of iterations improves on the best value before them by no more than ``tolerance`` (relative): a curve still
falling at the end of training would have given a better generator with more iterations, and its scores
describe an unfinished run rather than the method. A curve whose best in the tail is worse than its best
before by more than ``degradation`` has degraded: training went on past its best (a discriminator that
overfits a small data set, too high a learning rate), and its scores describe that, not the method.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from ganstudy.atomic import atomic_path

# The in-training score columns of losses.csv, each lower-is-better: the pair trainer's FID, the grid's
# best cell's, and a paired generator's L1 on held-out pairs.
SCORE_COLUMNS = ("fid", "fid_best", "l1", "showers")
TAIL = 0.1
COLUMNS = ["setup", "trials", "iterations", "score", "first", "best_before_tail", "best_in_tail", "improvement", "converged"]


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


def tail_improvement(curve: pd.Series, tail: float = TAIL) -> tuple[float, float, float]:
    """(best before the tail, best in the tail, relative improvement of the latter) of a lower-is-better
    curve; the improvement is NaN when either part has no point."""
    last = curve.index > (1 - tail) * curve.index.max()
    before, after = curve[~last].dropna(), curve[last].dropna()
    if before.empty or after.empty:
        return float("nan"), float("nan"), float("nan")
    best_before, best_after = float(before.min()), float(after.min())
    return best_before, best_after, (best_before - best_after) / abs(best_before)


def _verdict(improvement: float, tolerance: float, degradation: float) -> str:
    if np.isnan(improvement):
        return "–"
    return "no" if improvement > tolerance else "degraded" if -improvement > degradation else "yes"


def convergence_table(loss_paths: list[str], setups: list[str], tolerance: float, degradation: float) -> pd.DataFrame:
    rows = []
    curves = setup_curves(loss_paths, setups)
    for setup in setups:
        if setup not in curves:
            rows.append({"setup": setup, "trials": 0, "converged": "–"})
            continue
        column, frame = curves[setup]
        mean = frame.mean(axis=1)
        best_before, best_after, improvement = tail_improvement(mean)
        rows.append({
            "setup": setup, "trials": frame.shape[1], "iterations": int(mean.index.max()), "score": column,
            "first": float(mean.iloc[0]), "best_before_tail": best_before, "best_in_tail": best_after, "improvement": improvement,
            "converged": _verdict(improvement, tolerance, degradation),
        })
    return pd.DataFrame(rows, columns=COLUMNS)


def write_convergence(
    loss_paths: list[str], setups: list[str], tolerance: float, degradation: float, out_path: str | os.PathLike[str],
) -> pd.DataFrame:
    table = convergence_table(loss_paths, setups, tolerance, degradation)
    with atomic_path(out_path) as tmp:
        table.to_csv(tmp, index=False)
    return table


def _name(column: str) -> str:
    return {"l1": "L1", "showers": "shower score"}.get(column, "FID")


def convergence_notes(convergence_path: str | os.PathLike[str]) -> dict[str, str]:
    """The summary tables' note for each set-up whose curve was still improving or had degraded (from
    convergence.csv)."""
    table = pd.read_csv(convergence_path)
    notes = {}
    for row in table.itertuples():
        if row.converged == "no":
            notes[row.setup] = (f"not converged: in-training {_name(row.score)} still improved {row.improvement:.0%} over the last "
                                f"{TAIL:.0%} of iterations")
        elif row.converged == "degraded":
            notes[row.setup] = (f"degraded: best in-training {_name(row.score)} of the last {TAIL:.0%} of iterations {-row.improvement:.0%} worse "
                                "than before them (trained past its best)")
    return notes
