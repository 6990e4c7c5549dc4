"""What a study needs from its user before it can run: the data set's files where the workflow cannot fetch
them, a pretrained extractor's weights (Inception, DINOv2, CLIP) where the scores are in its features, and a
classifier the study names. Free of torch: the workflow lists them while it plans, so that a dry-run shows the
whole study and what to provide."""

from __future__ import annotations

import os
from typing import Any

from ganstudy.config.pretrained import PRETRAINED, pretrained_file
from ganstudy.data.loaders import get_dataset
from ganstudy.data.sources import SOURCES


def missing_user_inputs(config: dict[str, Any]) -> list[str]:
    """One line per missing file or folder: the key that names it, and what to put there and how to get it."""
    missing = []
    name, path = config["dataset"]["name"], config["dataset"]["path"]
    # Standard data sets are fetched by the workflow's fetch_dataset rule.
    if name not in SOURCES and path and not os.path.exists(path):
        provide = get_dataset(name).provide or f"the files data set '{name}' reads"
        missing.append(f"dataset.path {path} (data set '{name}'): {provide}")
    evaluation = config["evaluation"]
    model = PRETRAINED.get(evaluation["extractor"])
    weights, sha256 = pretrained_file(evaluation)
    if model and not (weights and os.path.isfile(weights)):
        checksum = f" (sha256 starting {sha256})" if sha256 else ""
        missing.append(
            f"evaluation.{model.weights_key} {weights}: {model.what}{checksum}; on a machine with internet "
            f"{model.where} and copy it there (nothing is downloaded at run time)"
        )
    classifier = config["classifier"]["weights"]
    if classifier and not os.path.isfile(classifier):
        missing.append(
            f"classifier.weights {classifier}: the classifier to score with, a classifier.pt that `ganstudy "
            "train-classifier` wrote (e.g. another study's results/<study>/classifier/classifier.pt)"
        )
    return missing
