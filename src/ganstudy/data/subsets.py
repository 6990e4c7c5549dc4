"""Partitions of a training split: per class (per-class training, class priors), per grid cell (data
dieting and per-cell label subsets) and into batches. Pure functions of the labels and a seed, so every
rank computes the same."""

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
        raise GanstudyError(
            f"a grid cell's classes {list(classes or [])} have no training images; choose classes the data has"
        )
    keep = min(len(pool), max(minimum, round(ratio * len(pool))))
    order = torch.randperm(len(pool), generator=torch.Generator().manual_seed(seed)).numpy()
    return np.sort(pool[order[:keep]])


def class_prior(labels: np.ndarray) -> tuple[list[int], list[float], dict[int, int]]:
    """The classes present, their share of the split (the prior a labelled generator samples), and counts."""
    classes, counts = np.unique(labels, return_counts=True)
    return classes.tolist(), (counts / counts.sum()).tolist(), dict(zip(classes.tolist(), counts.tolist()))


def batches_per_pass(size: int, batch_size: int, what: str = "training images") -> int:
    if batch_size > size:
        raise GanstudyError(f"batch_size {batch_size} is larger than the {size} {what}; lower batch_size in the set-up")
    # Full batches only: every step sees the same batch size, as in Lipizzaner.
    return size // batch_size
