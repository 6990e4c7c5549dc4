"""What the plan knows of a study's data before any job: the prepared data's manifest (where they were made
from this config's dataset section), the data's classes and the training split's size, each None where
known only once the data are read."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ganstudy.config.validate import dataset_settings
from ganstudy.data.loaders import get_dataset
from ganstudy.plan.study_files import as_json
from ganstudy.study.folder import StudyFolder


@dataclass(frozen=True)
class KnownData:
    manifest: dict[str, Any] | None
    classes: int | None
    training_images: int | None


def prepared_manifest(study_dir: str | Path, dataset: dict[str, Any]) -> dict[str, Any] | None:
    """The prepared data's manifest where they were made from the ``dataset`` section, else None."""
    try:
        manifest = json.loads(Path(StudyFolder.at(study_dir).manifest()).read_text())
    except (OSError, ValueError):
        return None
    return manifest if manifest.get("settings") == json.loads(as_json(dataset_settings(dataset))) else None


def known_data(study_dir: str | Path, dataset: dict[str, Any]) -> KnownData:
    """The data's classes (prepared, declared by the data set or counted at its path) and the training
    split's images (the prepared split's, or a built-in data set's size split by test_fraction; unknown
    with SMOTE, which adds images)."""
    manifest = prepared_manifest(study_dir, dataset)
    data_set = get_dataset(dataset["name"])
    classes = (manifest or {}).get("num_classes") or data_set.classes_at(dataset["path"])
    if manifest is not None:
        images = manifest.get("files", {}).get("train", {}).get("images")
    elif data_set.images is None or dataset["smote"]["strategy"] != "none":
        images = None
    else:
        images = data_set.images - math.ceil(dataset["test_fraction"] * data_set.images)
    return KnownData(manifest, classes, images)
