"""prepare_dataset: load, normalise to [-1, 1], stratified seeded split, arrays + manifest."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.model_selection import train_test_split

from ganstudy.atomic import write_json
from ganstudy.data.arrays import Split, save_split, file_digest
from ganstudy.data.loaders import LOADERS
from ganstudy.errors import GanstudyError
from ganstudy.seeding import derive_seed


def _class_counts(labels: np.ndarray) -> dict[str, int]:
    values, counts = np.unique(labels, return_counts=True)
    return {str(int(v)): int(c) for v, c in zip(values, counts)}


def prepare_dataset(
    name: str,
    path: str | None,
    test_fraction: float,
    study_seed: int,
    out_dir: str | os.PathLike[str],
) -> dict[str, Any]:
    raw = LOADERS.get(name)(path)
    counts = _class_counts(raw.labels)
    too_small = [c for c, n in counts.items() if n < 2]
    if too_small:
        raise GanstudyError(
            f"class(es) {too_small} of dataset '{name}' have fewer than 2 images; a stratified split needs "
            "at least one image per class in each split: add images or drop those classes"
        )
    images = raw.images * 2.0 - 1.0
    seed = derive_seed(study_seed, "dataset-split") % 2**32
    try:
        train_idx, test_idx = train_test_split(
            np.arange(len(raw.labels)), test_size=test_fraction, stratify=raw.labels, random_state=seed
        )
    except ValueError as exc:
        raise GanstudyError(f"cannot split dataset '{name}' with test_fraction={test_fraction}: {exc}") from None
    # Sorted indices keep each split in the source's order, so the files do not depend on the shuffle.
    train_idx, test_idx = np.sort(train_idx), np.sort(test_idx)
    out = Path(out_dir)
    manifest: dict[str, Any] = {
        "dataset": name,
        "source": raw.source,
        "image_shape": list(images.shape[1:]),
        "num_classes": int(raw.labels.max()) + 1,
        "value_range": [-1.0, 1.0],
        "split_seed": seed,
        "test_fraction": test_fraction,
        "class_counts": {"all": counts},
        "files": {},
    }
    for split_name, idx in (("train", train_idx), ("test", test_idx)):
        file = out / f"{split_name}.npz"
        save_split(file, Split(images[idx].astype(np.float32), raw.labels[idx]))
        manifest["class_counts"][split_name] = _class_counts(raw.labels[idx])
        manifest["files"][split_name] = {"path": file.name, "images": int(len(idx)), "sha256": file_digest(file)}
    write_json(out / "manifest.json", manifest)
    return manifest
