"""prepare_dataset: load, conform to the configured size and channels, normalise to [-1, 1], stratified
seeded split (or the source's own split), SMOTE on the training split, per-class partitions, arrays + a
manifest with the class counts after each step."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.model_selection import train_test_split

from ganstudy.core.atomic import atomic_path, write_json
from ganstudy.core.seeding import derive_seed
from ganstudy.data.arrays import Split, file_digest, save_split
from ganstudy.data.conform import conform
from ganstudy.data.loaders import DATASETS, LoadOptions, RawDataset, get_dataset
from ganstudy.data.settings import SmoteSettings
from ganstudy.data.smote import oversample
from ganstudy.data.subsets import class_partitions
from ganstudy.errors import GanstudyError


def _class_counts(labels: np.ndarray) -> dict[str, int]:
    values, counts = np.unique(labels, return_counts=True)
    return {str(int(v)): int(c) for v, c in zip(values, counts)}


def _stratified_split(
    name: str, labels: np.ndarray, counts: dict[str, int], test_fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    too_small = [c for c, n in counts.items() if n < 2]
    if too_small:
        raise GanstudyError(
            f"class(es) {too_small} of dataset '{name}' have fewer than 2 images; a stratified split needs "
            "at least one image per class in each split: add images or drop those classes"
        )
    try:
        train_idx, test_idx = train_test_split(
            np.arange(len(labels)), test_size=test_fraction, stratify=labels, random_state=seed
        )
    except ValueError as exc:
        raise GanstudyError(f"cannot split dataset '{name}' with test_fraction={test_fraction}: {exc}") from None
    # Sorted indices keep each split in the source's order, so the files do not depend on the shuffle.
    return np.sort(train_idx), np.sort(test_idx)


def _source_split(split: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """The source's own train rows, and its test rows, or its val rows when it has no test folder (pix2pix
    evaluates on val then); val rows beside a test folder are left out, as pix2pix trains on train only."""
    folders = {name: int(np.sum(split == name)) for name in ("train", "val", "test") if name in split}
    test_from = "test" if "test" in folders else "val"
    record = {"train": "train", "test": test_from, "folder_images": folders}
    return np.flatnonzero(split == "train"), np.flatnonzero(split == test_from), record


def prepare_dataset(
    name: str,
    path: str | None,
    test_fraction: float,
    study_seed: int,
    out_dir: str | os.PathLike[str],
    options: LoadOptions = LoadOptions(),
    smote: SmoteSettings = SmoteSettings(),
    settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``smote``: the config's dataset.smote section (strategy none / balance / factor). A source with its
    own split (RawDataset.split) keeps it and ``test_fraction`` is not used. ``settings``: the dataset
    section these arguments come from, recorded with the seed in the manifest, so that the workflow can
    tell prepared data that no longer match the config (ganstudy.plan.changed_runs)."""
    raw = get_dataset(name).read(name, path, options)
    counts = _class_counts(raw.labels)
    train_idx, test_idx, how_split = _split_rows(name, raw, counts, test_fraction, study_seed)
    images = raw.images if raw.native_units else conform(raw.images, options.image_size, options.channels) * 2.0 - 1.0
    out = Path(out_dir)
    manifest: dict[str, Any] = {
        "dataset": name,
        # Where the data set's loader came from (package, version, source hash): a plugin's too.
        "part": DATASETS.origin(name).record(),
        "source": raw.source,
        "image_shape": list(images.shape[1:]),
        "num_classes": int(raw.labels.max()) + 1,
        "value_range": [float(images.min()), float(images.max())] if raw.native_units else [-1.0, 1.0],
        **how_split,
        "class_counts": {"all": counts},
        "files": {},
    }
    if settings is not None:
        manifest |= {"settings": settings, "study_seed": study_seed}
    if raw.class_names is not None:
        manifest["class_names"] = list(raw.class_names)
    conditions = _conditions(raw, options, manifest)

    def subset(rows: np.ndarray) -> Split:
        picked = None if conditions is None else conditions[rows].astype(np.float32)
        return Split(images[rows].astype(np.float32), raw.labels[rows], conditions=picked)

    splits = {"train": subset(train_idx), "test": subset(test_idx)}
    for split_name, split in splits.items():
        manifest["class_counts"][split_name] = _class_counts(split.labels)
    if smote.strategy != "none":
        smote_seed = derive_seed(study_seed, "smote") % 2**32
        splits["train"], manifest["smote"] = oversample(
            splits["train"], smote.strategy, smote.factor, smote.k_neighbors, smote_seed
        )
        manifest["class_counts"]["train_after_smote"] = _class_counts(splits["train"].labels)
    _write_splits(out, splits, manifest)
    write_json(out / "manifest.json", manifest)
    return manifest


def _split_rows(
    name: str, raw: RawDataset, counts: dict[str, int], test_fraction: float, study_seed: int
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """The training and test rows, and how they were split for the manifest: the source's own split
    where it has one, else a stratified split by a seed of the study's."""
    if raw.split is not None:
        train_idx, test_idx, source_split = _source_split(raw.split)
        return train_idx, test_idx, {"source_split": source_split}
    seed = derive_seed(study_seed, "dataset-split") % 2**32
    train_idx, test_idx = _stratified_split(name, raw.labels, counts, test_fraction, seed)
    return train_idx, test_idx, {"split_seed": seed, "test_fraction": test_fraction}


def _conditions(raw: RawDataset, options: LoadOptions, manifest: dict[str, Any]) -> np.ndarray | None:
    """The condition rows as the networks take them (images conformed to the data's size and scaled to
    [-1, 1], native units as they are), their shape (and a pair's direction) noted in the manifest."""
    if raw.conditions is None:
        return None
    if raw.native_units:
        conditions = raw.conditions
    else:
        conditions = conform(raw.conditions, options.image_size, options.channels) * 2.0 - 1.0
        manifest["direction"] = options.direction
    manifest["condition_shape"] = list(conditions.shape[1:])
    return conditions


def _write_splits(out: Path, splits: dict[str, Split], manifest: dict[str, Any]) -> None:
    """The splits' files and the training split's class partitions, each listed in the manifest."""
    for split_name, split in splits.items():
        file = out / f"{split_name}.npz"
        save_split(file, split)
        manifest["files"][split_name] = {
            "path": file.name,
            "images": int(len(split.labels)),
            "sha256": file_digest(file),
        }
    partitions = class_partitions(splits["train"].labels)
    with atomic_path(out / "partitions.npz") as tmp:
        np.savez(tmp, **{f"class_{label}": indices for label, indices in partitions.items()})
    manifest["files"]["partitions"] = {"path": "partitions.npz", "classes": len(partitions)}
