"""SMOTE (imbalanced-learn) for small image sets, on the training split only.

Synthetic images interpolate between an image and one of its k nearest neighbours of the same
class, in pixel space. The test split never sees them: it is split off before oversampling.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ganstudy.data.arrays import Split
from ganstudy.errors import GanstudyError


def targets(counts: dict[int, int], strategy: str, factor: float) -> dict[int, int]:
    """Images per class after oversampling: every class up to the largest (balance), or each class
    ``factor`` times its count (the thesis's 15x)."""
    if strategy == "balance":
        return {label: max(counts.values()) for label in counts}
    if strategy == "factor":
        return {label: int(round(count * factor)) for label, count in counts.items()}
    raise GanstudyError(f"unknown SMOTE strategy '{strategy}'; use balance or factor")


def oversample(split: Split, strategy: str, factor: float, k_neighbors: int, seed: int) -> tuple[Split, dict[str, Any]]:
    """The training split with SMOTE images appended (``synthetic`` marks them), and a report."""
    if split.conditions is not None:
        raise GanstudyError(
            "SMOTE cannot oversample a data set with conditions (paired images, showers' primary energies): it "
            "would blend inputs and targets into pairs that never existed; set dataset.smote.strategy to none"
        )
    from imblearn.over_sampling import SMOTE

    labels, sizes = np.unique(split.labels, return_counts=True)
    counts = dict(zip(labels.tolist(), sizes.tolist()))
    too_small = sorted(label for label, count in counts.items() if count < 2)
    if too_small:
        raise GanstudyError(
            f"class(es) {too_small} have fewer than 2 training images; SMOTE interpolates between two images "
            "of a class: add images, lower dataset.test_fraction, or turn dataset.smote.strategy to none"
        )
    used = min(k_neighbors, min(counts.values()) - 1)
    if used < k_neighbors:
        print(
            f"ganstudy prepare: warning: SMOTE k_neighbors lowered from {k_neighbors} to {used}: the smallest class "
            f"has {min(counts.values())} training images",
            file=sys.stderr,
            flush=True,
        )
    wanted = targets(counts, strategy, factor)
    flat = split.images.reshape(len(split.images), -1).astype(np.float64)
    y = split.labels
    # imbalanced-learn refuses a single class although SMOTE works within each class alone: a
    # placeholder class of one image, never oversampled and dropped afterwards, lifts the check.
    placeholder = len(counts) == 1
    if placeholder:
        flat = np.vstack([flat, np.zeros((1, flat.shape[1]))])
        y = np.append(y, y.max() + 1)
    resampled, new_labels = SMOTE(sampling_strategy=wanted, k_neighbors=used, random_state=seed).fit_resample(flat, y)
    if placeholder:
        keep = np.ones(len(new_labels), bool)
        keep[len(split.labels)] = False
        resampled, new_labels = resampled[keep], new_labels[keep]
    # imbalanced-learn returns the original images first, in order, then the synthetic ones.
    images = np.clip(resampled, -1.0, 1.0).astype(np.float32).reshape(-1, *split.images.shape[1:])
    images[: len(split.images)] = split.images
    synthetic = np.arange(len(images)) >= len(split.images)
    report = {
        "strategy": strategy,
        "factor": factor,
        "k_neighbors": k_neighbors,
        "k_neighbors_used": used,
        "seed": seed,
        "synthetic_images": int(synthetic.sum()),
    }
    return Split(images, new_labels.astype(np.int64), synthetic), report
