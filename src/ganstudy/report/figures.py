"""figures: a box plot per metric (every trial drawn) and the set-ups' sample grids side by side."""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")  # compute nodes have no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from PIL import Image  # noqa: E402

from ganstudy.atomic import atomic_path  # noqa: E402
from ganstudy.stats.summary import BETTER  # noqa: E402


def _save(figure: plt.Figure, path: str | os.PathLike[str]) -> None:
    with atomic_path(path) as tmp:
        figure.savefig(tmp, dpi=120, bbox_inches="tight")
    plt.close(figure)


def box_plot(scores_path: str | os.PathLike[str], metric: str, setups: list[str], out_path: str | os.PathLike[str]) -> None:
    scores = pd.read_csv(scores_path)
    scores = scores[scores.metric == metric]
    groups = [scores[scores.setup == s].value.to_numpy(float) for s in setups]
    figure, axes = plt.subplots(figsize=(1.6 + 1.2 * len(setups), 3.6))
    axes.boxplot(groups, showfliers=False)
    axes.set_xticks(range(1, len(setups) + 1), setups, rotation=20)
    # Fixed jitter: the figure is the same bits on every regeneration.
    rng = np.random.default_rng(0)
    for position, values in enumerate(groups, start=1):
        axes.scatter(position + rng.uniform(-0.12, 0.12, len(values)), values, s=14, alpha=0.7, zorder=3)
    axes.set_ylabel(f"{metric.upper()} ({BETTER.get(metric, '?')} is better)")
    axes.set_title(f"{metric.upper()} over trials")
    axes.grid(axis="y", alpha=0.3)
    _save(figure, out_path)


def sample_montage(grid_paths: list[str], setups: list[str], out_path: str | os.PathLike[str]) -> None:
    figure, axes = plt.subplots(1, len(setups), figsize=(3.2 * len(setups), 3.6), squeeze=False)
    for ax, setup, path in zip(axes[0], setups, grid_paths):
        with Image.open(path) as picture:
            ax.imshow(np.asarray(picture), cmap="gray", interpolation="nearest")
        ax.set_title(setup)
        ax.axis("off")
    _save(figure, out_path)
