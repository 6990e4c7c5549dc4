"""figures: a box plot per metric (every trial drawn), the set-ups' sample grids side by side, and the
training curves."""

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


def training_curves(loss_paths: list[str], setups: list[str], out_path: str | os.PathLike[str]) -> None:
    """Discriminator and generator loss per iteration, the mean over a set-up's trials (and over classes
    for per-class runs), one line per set-up."""
    figure, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharex=True)
    for setup in setups:
        runs = [pd.read_csv(p) for p in loss_paths if f"/runs/{setup}/" in p]
        if not runs:
            continue
        mean = pd.concat(runs).groupby("iteration")[["d_loss", "g_loss"]].mean()
        for ax, column in zip(axes, ("d_loss", "g_loss")):
            ax.plot(mean.index, mean[column], label=f"{setup} ({len(runs)} trials)")
    for ax, title in zip(axes, ("discriminator loss", "generator loss")):
        ax.set_title(title)
        ax.set_xlabel("iteration")
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=8)
    _save(figure, out_path)
