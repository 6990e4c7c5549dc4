"""The convergence check and the score-curve figure, on hand-made curves."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ganstudy.report.figures import score_curves
from ganstudy.stats.convergence import convergence_notes, tail_improvement, write_convergence
from ganstudy.stats.summary import summary_table


def _losses(folder, setup, trial, fids, column="fid", classes=None):
    path = folder / "runs" / setup / f"trial{trial}" / "losses.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    for label in classes or [None]:
        for iteration, fid in enumerate(fids, start=1):
            row = {"iteration": iteration, "d_loss": 1.0, "g_loss": 1.0, column: fid}
            rows.append(row if label is None else {"class": label, **row})
    pd.DataFrame(rows).to_csv(path, index=False)
    return str(path)


def test_the_tail_is_the_last_tenth_of_the_iterations():
    # 20 iterations: the tail is iterations 19 and 20. Best before 50, best in the tail 40: 20% better.
    curve = pd.Series([100.0] * 17 + [50.0, 60.0, 40.0], index=range(1, 21))
    assert tail_improvement(curve) == (50.0, 40.0, pytest.approx(0.2))
    flat = pd.Series([100.0, 60.0, 50.0, 49.0] + [49.5] * 16, index=range(1, 21))
    assert tail_improvement(flat) == (49.0, 49.5, pytest.approx(-0.5 / 49))  # worse at the end: no improvement


def test_a_set_up_still_improving_is_flagged_and_a_flat_one_is_not(tmp_path):
    falling = np.linspace(400, 100, 20)            # still falling steeply at the end
    plateau = np.r_[np.linspace(400, 50, 10), np.full(10, 50.0)]
    paths = [_losses(tmp_path, "short", t, falling + t) for t in range(3)]
    paths += [_losses(tmp_path, "long", t, plateau + t) for t in range(3)]
    # A per-class run: the curve is the mean over its classes.
    paths += [_losses(tmp_path, "pc", 0, plateau, classes=[0, 1])]
    paths += [_losses(tmp_path, "grid", 0, plateau, column="fid_best")]
    # Best 50 at iteration 10, then back up to 80 and 70 in the tail: 40% worse, past the 25% allowed.
    rising = np.r_[np.linspace(400, 50, 10), np.linspace(55, 90, 8), 80.0, 70.0]
    paths += [_losses(tmp_path, "rising", 0, rising)]
    setups = ["short", "long", "pc", "grid", "none", "rising"]
    table = write_convergence(paths, setups, 0.05, 0.25, tmp_path / "convergence.csv").set_index("setup")
    assert table.loc["short", "converged"] == "no" and table.loc["short", "trials"] == 3
    # Mean over 3 trials of falling + t: best before the tail at iteration 18, in the tail at 20.
    expected = (falling[17] + 1 - (falling[19] + 1)) / (falling[17] + 1)
    assert table.loc["short", "improvement"] == pytest.approx(expected)
    assert table.loc[["long", "pc", "grid"], "converged"].tolist() == ["yes"] * 3
    assert table.loc["grid", "score"] == "fid_best" and table.loc["none", "converged"] == "–"
    assert table.loc["rising", "converged"] == "degraded" and table.loc["rising", "improvement"] == pytest.approx(-0.4)
    # The same curve passes when 45% worse is allowed: the verdict follows the setting.
    looser = write_convergence(paths, setups, 0.05, 0.45, tmp_path / "looser.csv").set_index("setup")
    assert looser.loc["rising", "converged"] == "yes"
    notes = convergence_notes(tmp_path / "convergence.csv")
    assert list(notes) == ["short", "rising"] and notes["short"].startswith("not converged: in-training FID still improved")
    assert notes["rising"] == "degraded: best in-training FID of the last 10% of iterations 40% worse than before them (trained past its best)"
    scores = pd.DataFrame([{"setup": s, "trial": 0, "metric": "fid", "value": 1.0, "train_seconds": 1.0} for s in ("short", "long")])
    summary = summary_table(scores, "fid", ["short", "long"], 1, notes).set_index("setup")
    assert "not converged" in summary.loc["short", "note"] and summary.loc["long", "note"] == ""
    score_curves(paths, ["short", "long", "pc", "grid"], tmp_path / "curves.png")
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
