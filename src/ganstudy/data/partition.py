"""Partitions of a training split: per class (per-class training) and per grid cell (data dieting and
per-cell label subsets). Pure functions of the labels and a seed, so every rank computes the same."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ganstudy.errors import GanstudyError


def class_partitions(labels: np.ndarray) -> dict[int, np.ndarray]:
    """Indices of each class's images, in split order."""
    return {int(label): np.flatnonzero(labels == label) for label in np.unique(labels)}


def cell_subset(labels: np.ndarray, ratio: float, classes: Sequence[int] | None, minimum: int, seed: int) -> np.ndarray:
    """Sorted indices a grid cell trains on: the images of ``classes`` (every image when None), of which
    a seeded random ``ratio`` (Lipizzaner's data dieting), at least ``minimum`` (one batch)."""
    pool = np.arange(len(labels)) if classes is None else np.flatnonzero(np.isin(labels, list(classes)))
    if len(pool) == 0:
        raise GanstudyError(f"a grid cell's classes {list(classes or [])} have no training images; choose classes the data has")
    keep = min(len(pool), max(minimum, round(ratio * len(pool))))
    order = torch.randperm(len(pool), generator=torch.Generator().manual_seed(seed)).numpy()
    return np.sort(pool[order[:keep]])
